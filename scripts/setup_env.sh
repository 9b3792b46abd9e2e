#!/usr/bin/env bash
# Creates (or reuses) a virtual environment with Paddle and the test/demo dependencies; prints its
# python path. Used by run_tests.sh and run_demo.sh.
#   default          .venv:     paddlepaddle 3.3.1 (CPU) from PyPI
#   FDSPEC_PADDLE=gpu .venv-gpu: paddlepaddle-gpu 2.6.2, the CUDA build on PyPI (built against NumPy 1)
# FDSPEC_VENV overrides the directory.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ "${FDSPEC_PADDLE:-cpu}" = gpu ]; then
  venv=${FDSPEC_VENV:-$root/.venv-gpu}
  paddle=("paddlepaddle-gpu==2.6.2" "numpy<2")
  check="import zlib, sys, paddle; sys.exit(0 if paddle.is_compiled_with_cuda() else 1)"
else
  venv=${FDSPEC_VENV:-$root/.venv}
  paddle=("paddlepaddle==3.3.1" numpy)
  check="import paddle"
fi
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
if ! "$venv/bin/python" -c "$check; import numpy, pytest, hypothesis, matplotlib, tqdm, wheel" 2>/dev/null; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    "${paddle[@]}" pytest hypothesis matplotlib tqdm setuptools wheel >&2
fi
echo "$venv/bin/python"
