#!/usr/bin/env bash
# The test command (README, CI): on a fresh machine it installs Paddle 3.3.1 (CPU) into .venv, then
#   1. builds the CPU-only op library and runs the tests (the CPU fallback build), and
#   2. when a CUDA toolkit is present, builds the CUDA library against the same Paddle (every .cu
#      compiled by nvcc) and runs the tests again through it on CPU tensors (CPU dispatch inside a
#      GPU build). GPU-marked tests skip without a GPU.
# After each pytest run, the package's numpydoc examples run as doctests (on the CPU, private queues).
# Extra arguments go to pytest (the test run, not the doctests).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
py=$(bash scripts/setup_env.sh)

echo "== CPU-only build"
doctests() { "$py" -m pytest -q -p no:cacheprovider --doctest-modules fastdeploy_spec; }
FDSPEC_CPU_ONLY=1 "$py" setup_ops.py install
"$py" -m pytest -q "$@"
doctests

if [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ] || command -v nvcc >/dev/null 2>&1; then
  echo "== CUDA build (kernels compiled; tests dispatch CPU tensors inside it)"
  CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")} "$py" setup_ops.py install
  "$py" -m pytest -q "$@"
  doctests
else
  echo "== no CUDA toolkit found: CUDA build skipped"
fi
