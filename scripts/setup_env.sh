#!/usr/bin/env bash
# Creates (or reuses) the project's virtual environment with Paddle 3.3.1 (CPU, from PyPI) and the
# test/demo dependencies. Sourced by run_tests.sh and run_demo.sh; prints the venv's python path.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${FDSPEC_VENV:-$root/.venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
if ! "$venv/bin/python" -c "import paddle, numpy, pytest, hypothesis, matplotlib, tqdm, wheel" 2>/dev/null; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    "paddlepaddle==3.3.1" numpy pytest hypothesis matplotlib tqdm setuptools wheel >&2
fi
echo "$venv/bin/python"
