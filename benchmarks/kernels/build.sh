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

declare -A sources=(
  [bench_ngram_kernels]="custom_ops/ngram_match/ngram_match.cu custom_ops/ngram_match/ngram_match_cpu.cc custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram.cu custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram_cpu.cc"
  [bench_suffix_kernels]="custom_ops/suffix_match/suffix_match.cu custom_ops/suffix_match/suffix_match_cpu.cc custom_ops/suffix_cache/suffix_cache.cu custom_ops/suffix_cache/suffix_cache_cpu.cc"
  [bench_sample_tokens]="custom_ops/speculate_sample_tokens/speculate_sample_tokens.cu custom_ops/speculate_sample_tokens/speculate_sample_tokens_cpu.cc"
  [bench_mtp_kernels]="custom_ops/draft_model/draft_model.cu custom_ops/draft_model/draft_model_cpu.cc custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram.cu custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram_cpu.cc"
  [bench_mtp_state]="custom_ops/mtp_state/mtp_state.cu custom_ops/mtp_state/mtp_state_cpu.cc custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram.cu custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram_cpu.cc custom_ops/draft_model/draft_model.cu custom_ops/draft_model/draft_model_cpu.cc custom_ops/speculate_sample_tokens/speculate_sample_tokens.cu custom_ops/speculate_sample_tokens/speculate_sample_tokens_cpu.cc"
)
flags=(-std=c++17 -O3 -lineinfo "-gencode=arch=compute_$arch,code=sm_$arch" -DFDSPEC_WITH_CUDA
       -Icustom_ops -Itests/cuda -Ibenchmarks/kernels "-I$cuda_home/include/cccl")
[ "${PROFILE:-0}" = 0 ] || flags+=(-DFDSPEC_PROFILE)
mkdir -p "$outdir"
for n in $names; do
  [ -n "${sources[$n]:-}" ] || { echo "unknown benchmark $n (known: ${!sources[*]})" >&2; exit 2; }
  echo "building $outdir/$n (sm_$arch${PROFILE:+, profiler on})"
  # shellcheck disable=SC2086
  "$nvcc" "${flags[@]}" "benchmarks/kernels/$n.cu" ${sources[$n]} -o "$outdir/$n"
done
