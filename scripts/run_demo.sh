#!/usr/bin/env bash
# The main job (README): builds the op library and runs the speculative-decoding demo, on the GPU when
# there is one. Which Python (and Paddle) runs it:
#   1. $FDSPEC_PYTHON, when set;
#   2. a Python on PATH whose Paddle is a CUDA build: used as it is, nothing installed (a machine
#      with Paddle already set up, e.g. one without registry access and Paddle on PYTHONPATH);
#   3. on a machine with an NVIDIA GPU: the virtual environment .venv-gpu with paddlepaddle-gpu 2.6.2
#      from PyPI (the one CUDA build there; its own kernels stop at sm_86, the plugin's run on any GPU);
#   4. otherwise the CPU environment .venv with paddlepaddle 3.3.1 (scripts/setup_env.sh).
# With a GPU and a CUDA toolkit the library is built for the local GPU's architecture (nvidia-smi's
# compute capability) unless FDSPEC_CUDA_ARCHS says otherwise. Arguments go to the demo (e.g.
# --method ngram --logprobs 5 --device cpu).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

gpu_archs() {  # "90" for an H100, "80 86" for a mixed host; empty without a working nvidia-smi
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  { nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d ' .' | grep -E '^[0-9]+$' \
      | sort -un | tr '\n' ' ' | sed 's/ $//'; } || true
}
cuda_paddle() {  # true when "$1" imports a CUDA build of Paddle
  "$1" -c "import zlib, sys, paddle; sys.exit(0 if paddle.is_compiled_with_cuda() else 1)" >/dev/null 2>&1
}

archs=$(gpu_archs)
py=${FDSPEC_PYTHON:-}
if [ -z "$py" ]; then
  for cand in python3 python; do
    if command -v "$cand" >/dev/null 2>&1 && cuda_paddle "$(command -v "$cand")"; then
      py=$(command -v "$cand")
      echo "run_demo: using $py (its Paddle is a CUDA build)" >&2
      break
    fi
  done
fi
if [ -z "$py" ] && [ -n "$archs" ]; then
  echo "run_demo: NVIDIA GPU (sm_${archs// /, sm_}) and no CUDA Paddle: setting up .venv-gpu with paddlepaddle-gpu 2.6.2" >&2
  py=$(FDSPEC_PADDLE=gpu bash scripts/setup_env.sh)
fi
if [ -z "$py" ]; then
  py=$(bash scripts/setup_env.sh)
fi

if [ -n "$archs" ] && [ -z "${FDSPEC_CUDA_ARCHS:-}" ] && [ -z "${FDSPEC_CPU_ONLY:-}" ]; then
  export FDSPEC_CUDA_ARCHS=$archs
  echo "run_demo: building the op library for sm_${archs// /, sm_}" >&2
fi
"$py" setup_ops.py build >/dev/null
exec "$py" -m examples.demo "$@"
