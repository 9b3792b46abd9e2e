#!/usr/bin/env bash
# The GPU checks in the configurations of docs/testing_gpus.md, from the repo root. One machine (an
# H100) plays each supported GPU: the library or harness is built for that GPU's targets (the H100
# JIT-compiles their PTX) and FDSPEC_DEVICE_CAP makes the host take that GPU's launch decisions.
#
#   config    FDSPEC_CUDA_ARCHS   FDSPEC_DEVICE_CAP   plays
#   sm90      90                  -                   H100 / H800 / H20, native
#   sm80      80                  8.0                 A100 / A800 (163 KB of shared memory per block)
#   sm86_89   86 89               8.9                 L20 / L40 / RTX 4090 / A10 (99 KB)
#   default   80 86 89            -                   the default-style build on a Hopper GPU, no cap
#
#   bash tools/gpu_configs.sh build                 # here (nvcc, no GPU): every binary below, sequentially
#   bash tools/gpu_configs.sh harness CONFIG [TOOLS] # kernel harnesses, full mode, then TOOLS (default
#                                                    # "memcheck racecheck initcheck") on the quick modes
#   bash tools/gpu_configs.sh pytest CONFIG          # the op library for CONFIG (Paddle 2.6.2), pytest -m gpu;
#                                                    # LOGPROBS_BENCH=1: then scripts/bench_logprobs.py --quick
#   bash tools/gpu_configs.sh bench-ab               # main's and this branch's kernel benches, sm_90, one call
#   bash tools/gpu_configs.sh bench CONFIG           # this branch's kernel benches in CONFIG (sm80: the A100 path)
#
# Binaries live in build/gpu48/ (ignored; carry the folder): the GPU machine uses them as they are
# (run_cuda_checks.sh --prebuilt) and compiles only what is missing. The JIT configurations carry only
# the PTX of their highest target (--ptx-only): all that an H100 can load from such a build, so that
# sm86_89 and default share build/gpu48/ptx89/. bench-ab's baseline is build/gpu48/main_sm90/, built
# from BASE (default: the tree before launch_plan.h was added; .base in the folder names it). Logs go to $OUT (default results/gpu48).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/gpu48}
root=build/gpu48
cuda_home=${CUDA_HOME:-/usr/local/cuda}
export CUDA_HOME=$cuda_home
# The binaries link the CUDA runtime dynamically (a static one is ~1 MB in each) and compress their
# device code; the runtime is found through their rpath or here.
export LD_LIBRARY_PATH=$cuda_home/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
small=(-cudart shared -Xlinker "-rpath=$cuda_home/lib64" --compress-mode=size)

archs_of() {
  case "$1" in sm90) echo "90" ;; sm80) echo "80" ;; sm86_89) echo "86 89" ;; default) echo "80 86 89" ;;
    *) echo "unknown config $1 (sm90 sm80 sm86_89 default)" >&2; exit 2 ;; esac
}
dir_of() {
  case "$1" in sm90) echo "$root/sm90" ;; sm80) echo "$root/ptx80" ;; *) echo "$root/ptx89" ;; esac
}
ptx_of() {
  case "$1" in sm90) echo "" ;; *) echo "--ptx-only" ;; esac
}
cap_of() {
  case "$1" in sm80) echo "8.0" ;; sm86_89) echo "8.9" ;; *) echo "" ;; esac
}
benches="bench_ngram_kernels bench_suffix_kernels bench_mtp_kernels"
benches_cfg="$benches bench_sample_tokens"  # bench CONFIG also times the sampler

# The kernel benches of a source tree at `src` (main's) into `dir`, sm_90, as run_cuda_checks.sh builds.
build_benches_of() {
  local src=$1 dir=$2
  mkdir -p "$dir"
  local cc=(-std=c++17 -O3 -lineinfo -DFDSPEC_WITH_CUDA -I"$src/custom_ops" -I"$cuda_home/include/cccl"
            -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90 "${small[@]}")
  local o=$src/custom_ops k=$src/benchmarks/kernels
  [ -d "$k" ] || k=$src/tests/cuda  # trees from before the benches moved
  cc+=(-I"$k")
  [ -x "$dir/bench_ngram_kernels" ] || "$cuda_home/bin/nvcc" "${cc[@]}" "$k/bench_ngram_kernels.cu" \
    "$o/ngram_match/ngram_match.cu" "$o/ngram_match/ngram_match_cpu.cc" "$o/hybrid_mtp_ngram/hybrid_mtp_ngram.cu" \
    "$o/hybrid_mtp_ngram/hybrid_mtp_ngram_cpu.cc" -o "$dir/bench_ngram_kernels" || return 1
  [ -x "$dir/bench_suffix_kernels" ] || "$cuda_home/bin/nvcc" "${cc[@]}" "$k/bench_suffix_kernels.cu" \
    "$o/suffix_match/suffix_match.cu" "$o/suffix_match/suffix_match_cpu.cc" "$o/suffix_cache/suffix_cache.cu" \
    "$o/suffix_cache/suffix_cache_cpu.cc" -o "$dir/bench_suffix_kernels" || return 1
  [ -x "$dir/bench_mtp_kernels" ] || "$cuda_home/bin/nvcc" "${cc[@]}" "$k/bench_mtp_kernels.cu" \
    "$o/draft_model/draft_model.cu" "$o/draft_model/draft_model_cpu.cc" "$o/hybrid_mtp_ngram/hybrid_mtp_ngram.cu" \
    "$o/hybrid_mtp_ngram/hybrid_mtp_ngram_cpu.cc" -o "$dir/bench_mtp_kernels" || return 1
}

stage=${1:-}
shift || true
mkdir -p "$OUT"
case "$stage" in
  build)
    # Sequential (JOBS=1): the machine that builds is small. Each config's harnesses, then the benches
    # of the native and the A100 configurations, then main's benches.
    export NVCC_EXTRA="${small[*]}"
    for cfg in sm86_89 sm80 sm90; do
      # shellcheck disable=SC2046
      JOBS=${JOBS:-1} bash tests/cuda/run_cuda_checks.sh "$(archs_of $cfg)" "$(dir_of $cfg)" --build-only $(ptx_of $cfg) || exit 1
    done
    for cfg in sm90 sm80; do
      # shellcheck disable=SC2046
      HARNESSES="$benches_cfg" JOBS=${JOBS:-1} bash tests/cuda/run_cuda_checks.sh "$(archs_of $cfg)" "$(dir_of $cfg)" \
        --build-only $(ptx_of $cfg) || exit 1
    done
    # The baseline: the tree before this issue's launch logic (the parent of the commit that added
    # custom_ops/common/launch_plan.h), unless BASE names another.
    base=${BASE:-$(git rev-parse "$(git log --diff-filter=A --format=%H -- custom_ops/common/launch_plan.h | tail -1)^")}
    src=$(mktemp -d)
    git archive "$base" custom_ops tests/cuda | tar -x -C "$src"
    build_benches_of "$src" "$root/main_sm90" || exit 1
    echo "$base" > "$root/main_sm90/.base"
    rm -rf "$src"
    du -sh "$root"
    ;;
  harness)
    cfg=${1:?config}; tools=${2-memcheck racecheck initcheck}
    cap=$(cap_of "$cfg")
    echo "== config $cfg: FDSPEC_CUDA_ARCHS=\"$(archs_of "$cfg")\" FDSPEC_DEVICE_CAP=${cap:-none}"
    # shellcheck disable=SC2046
    FDSPEC_DEVICE_CAP=$cap TOOLS=$tools CHECKS_LOGDIR="$OUT/$cfg" bash tests/cuda/run_cuda_checks.sh \
      "$(archs_of "$cfg")" "$(dir_of "$cfg")" --prebuilt $(ptx_of "$cfg") 2>&1 | tee "$OUT/harness_$cfg.log"
    ;;
  pytest)
    cfg=${1:?config}
    cap=$(cap_of "$cfg")
    export PYTHONPATH=/root/pdsite:$PWD PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16}
    [ -d /root/pdsite/paddle ] || bash /root/pd/install.sh 2>&1 | tail -3
    FDSPEC_CUDA_ARCHS="$(archs_of "$cfg")" python3 setup_ops.py build > "$OUT/build_$cfg.log" 2>&1 \
      || { tail -30 "$OUT/build_$cfg.log"; exit 1; }
    tail -1 "$OUT/build_$cfg.log"
    echo "== config $cfg: FDSPEC_CUDA_ARCHS=\"$(archs_of "$cfg")\" FDSPEC_DEVICE_CAP=${cap:-none}"
    FDSPEC_DEVICE_CAP=$cap python3 -m pytest -q -p no:cacheprovider -n 12 -m gpu -rfE tests 2>&1 \
      | tee "$OUT/pytest_$cfg.log" | grep -vE "^\s*$" | tail -25
    # speculate_logprobs_topk has no Paddle-free bench: its bench through Paddle, in this configuration.
    if [ "${LOGPROBS_BENCH:-0}" != 0 ]; then
      FDSPEC_DEVICE_CAP=$cap python3 scripts/bench_logprobs.py --quick --out "$OUT/bench_logprobs_$cfg" 2>&1 \
        | tee "$OUT/bench_logprobs_$cfg.log" | tail -12
    fi
    ;;
  bench-ab)
    # Alternating runs of main's and this branch's benches, same machine, same call.
    for b in "$root/main_sm90" "$root/sm90"; do
      for x in $benches; do [ -x "$b/$x" ] || { echo "missing $b/$x: run the build stage" >&2; exit 1; }; done
    done
    for round in 1 2; do
      for side in main_sm90 sm90; do
        d=$root/$side
        echo "== round $round: $side"
        "$d/bench_ngram_kernels" --quick --json "$OUT/ab_${side}_ngram_$round.json" > "$OUT/ab_${side}_ngram_$round.log" 2>&1
        echo "bench_ngram_kernels rc $?"; tail -3 "$OUT/ab_${side}_ngram_$round.log"
        "$d/bench_suffix_kernels" --quick --json "$OUT/ab_${side}_suffix_$round.json" > "$OUT/ab_${side}_suffix_$round.log" 2>&1
        echo "bench_suffix_kernels rc $?"; tail -3 "$OUT/ab_${side}_suffix_$round.log"
        "$d/bench_mtp_kernels" --quick --json "$OUT/ab_${side}_mtp_$round.json" > "$OUT/ab_${side}_mtp_$round.log" 2>&1
        echo "bench_mtp_kernels rc $?"; tail -3 "$OUT/ab_${side}_mtp_$round.log"
      done
    done
    ;;
  bench)
    cfg=${1:?config}
    cap=$(cap_of "$cfg")
    d=$(dir_of "$cfg")
    echo "== config $cfg: FDSPEC_DEVICE_CAP=${cap:-none} (on an H100: a proxy for that GPU's path, not its speed)"
    for x in $benches_cfg; do
      [ -x "$d/$x" ] || { echo "missing $d/$x" >&2; exit 1; }
      FDSPEC_DEVICE_CAP=$cap "$d/$x" --quick --json "$OUT/bench_${cfg}_$x.json" > "$OUT/bench_${cfg}_$x.log" 2>&1
      echo "$x rc $?"; tail -25 "$OUT/bench_${cfg}_$x.log"
    done
    ;;
  *)
    sed -n 2,22p "$0"; exit 2 ;;
esac
