#!/usr/bin/env bash
# The main job (README): on a fresh machine, installs Paddle 3.3.1 (CPU) into .venv, builds the op
# library (with CUDA kernels when a CUDA toolkit is found), and runs the speculative-decoding demo on
# the GPU when Paddle, a GPU and CUDA kernels are all there, else on the CPU. Arguments go to the demo
# (e.g. --method ngram --logprobs 5 --device cpu).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
py=${FDSPEC_PYTHON:-$(bash scripts/setup_env.sh)}
"$py" setup_ops.py build >/dev/null
exec "$py" -m fastdeploy_spec.demo "$@"
