#!/usr/bin/env bash
# Builds the Paddle-free kernel benchmarks (no Paddle, no Python): each times an op family's CUDA
# launchers through CUDA-graph replays, warm and cold L2 (bench_timing.cuh), and checks every row
# against the CPU implementation. Run from anywhere; binaries go to OUTDIR (default build/).
#
#   bash benchmarks/kernels/build.sh [ARCH, default 90a] [OUTDIR, default build] [NAME ...]
#   build/bench_ngram_kernels --quick      # then run one (each prints its own --help-like usage)
#
# NAME: bench_ngram_kernels, bench_suffix_kernels, bench_mtp_kernels, bench_mtp_state, bench_sample_tokens
# (default: all but bench_sample_tokens).
# PROFILE=1 compiles the kernels' profiler probes in (custom_ops/common/profiler.cuh), for the
# per-stage clocks of bench_suffix_kernels --stages / --profile; without it the probes compile to nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
arch=${1:-90a}
outdir=${2:-build}
shift $(( $# > 2 ? 2 : $# ))
names=${*:-bench_ngram_kernels bench_suffix_kernels bench_mtp_kernels bench_mtp_state}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
nvcc=$(command -v nvcc || echo "$cuda_home/bin/nvcc")

source tests/cuda/sources.sh
flags=(-std=c++17 -O3 -lineinfo "-gencode=arch=compute_$arch,code=sm_$arch" -DFDSPEC_WITH_CUDA
       -Icustom_ops -Itests/cuda -Ibenchmarks/kernels "-I$cuda_home/include/cccl")
[ "${PROFILE:-0}" = 0 ] || flags+=(-DFDSPEC_PROFILE)
mkdir -p "$outdir"
known=$(printf '%s\n' "${!sources[@]}" | grep '^bench_' | sort | xargs)
for n in $names; do
  [[ " $known " == *" $n "* ]] || { echo "unknown benchmark $n (known: $known)" >&2; exit 2; }
  echo "building $outdir/$n (sm_$arch${PROFILE:+, profiler on})"
  # shellcheck disable=SC2086
  "$nvcc" "${flags[@]}" ${sources[$n]} -o "$outdir/$n"
done
