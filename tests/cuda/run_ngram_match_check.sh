#!/usr/bin/env bash
# Builds and runs tests/cuda/ngram_match_vs_cpu.cu (GPU vs CPU, bit-exact) from the repo root, then the
# quick variant under compute-sanitizer (memcheck, racecheck, synccheck) when it is installed.
# Needs nvcc and a GPU, not Paddle. Usage: bash tests/cuda/run_ngram_match_check.sh [ARCH, default 90]
set -euo pipefail
cd "$(dirname "$0")/../.."
arch="${1:-90}"
bin="$(mktemp -d)/ngram_match_vs_cpu"
nvcc -std=c++17 -O3 -lineinfo -DFDSPEC_WITH_CUDA -I custom_ops -arch="sm_${arch}" \
  -I "${CUDA_HOME:-/usr/local/cuda}/include/cccl" tests/cuda/ngram_match_vs_cpu.cu custom_ops/ngram_match/ngram_match.cu \
  custom_ops/ngram_match/ngram_match_cpu.cc -o "$bin"
"$bin"
if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck synccheck; do
    compute-sanitizer --tool "$tool" --error-exitcode 3 "$bin" quick | tail -3
  done
fi
