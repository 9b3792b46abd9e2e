#!/usr/bin/env bash
# Kernel variants of suffix_match / suffix_cache, each built from a git ref, checked and timed side by
# side on the GPU machine in one call (docs/perf/suffix_cache_notes.md: every figure there is a
# variant against its baseline in the same call). No Paddle: the Paddle-free harnesses and bench.
#
# Here (nvcc, no GPU needed), each NAME=REF into build/variants/NAME/:
#   bash scripts/dev/suffix_variants.sh build base=main try=my-branch
# On the GPU machine (the device tool's carry: build/variants, about 12 MB a variant, sources
# included, of its 64 MiB with the tree: five variants at most), every variant built:
#   bash scripts/dev/suffix_variants.sh run [checks] [ab] [profile]   (all three when none is named)
#     checks   the variant's own tests/cuda/run_cuda_checks.sh on its two suffix harnesses: full, then
#              quick under memcheck, racecheck and initcheck (TOOLS as there); stops at a failure;
#              a line per run in $OUT/checks.log, each variant's output in $OUT/NAME.checks.log
#     ab       bench_suffix_kernels --quick --only cache-10k, two rounds, the variants interleaved;
#              AB_ONLY=cache-64 for issue 20's row and its two other texts at B = 64 alone (quicker),
#              AB_ONLY=cache-texts for that row over ten texts (before a gain at the row is believed)
#     profile  the profile build's --profile cache 64 10000 summary (the global search's stages, the
#              first scan's phases, the local search's stages beside it) and its --breakdown 64 10000
#     source   ncu's warp-state samples per SASS instruction of the first scan, the global search and
#              the local search (3rd step, plain build, ncu's cache control): the report and its
#              $OUT/NAME.KERNEL.sass.csv, for scripts/dev/ncu_source_lines.py (where in the code a
#              kernel's warps wait, and on what); SOURCE_KERNELS="NAME:SKIP ..." other launches
# VARIANTS="one two" limits a run to those (a variant's checks take several minutes, a device call
# at most ten). Logs go to $OUT (or ./results/variants).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$root/build/variants
mode=${1:-}
shift || true

harnesses="suffix_match_vs_cpu suffix_cache_vs_cpu"

build_one() {  # NAME REF: the ref's sources into build/variants/NAME/src, the binaries beside them
  local name=$1 ref=$2 out=$dir/$1
  local src=$out/src
  [ -n "$name" ] || { echo "a variant needs a name: NAME=REF" >&2; return 1; }
  rm -rf "$out"
  mkdir -p "$src"
  git -C "$root" archive "$ref" custom_ops tests/cuda | tar -x -C "$src" || return 1
  git -C "$root" rev-parse --short "$ref" > "$out/commit"
  local f="-std=c++17 -O3 -lineinfo -DFDSPEC_WITH_CUDA -I$src/custom_ops -I${CUDA_HOME:-/usr/local/cuda}/include/cccl"
  local s="$src/custom_ops/suffix_match/suffix_match.cu $src/custom_ops/suffix_match/suffix_match_cpu.cc"
  s="$s $src/custom_ops/suffix_cache/suffix_cache.cu $src/custom_ops/suffix_cache/suffix_cache_cpu.cc"
  # The state's layout (refs since it has its own file).
  [ -f "$src/custom_ops/suffix_cache/suffix_cache_state.cc" ] && s="$s $src/custom_ops/suffix_cache/suffix_cache_state.cc"
  local a90a="-gencode=arch=compute_90a,code=sm_90a"
  nvcc $f $a90a "$src/tests/cuda/bench_suffix_kernels.cu" $s -o "$out/bench" &
  nvcc $f $a90a -DFDSPEC_SUFFIX_PROFILE "$src/tests/cuda/bench_suffix_kernels.cu" $s -o "$out/bench_prof" &
  HARNESSES=$harnesses CHECKS_LOGDIR=$out/logs bash "$src/tests/cuda/run_cuda_checks.sh" 90 "$out" --build-only \
    > "$out/build.log" 2>&1 &
  local rc=0
  for job in $(jobs -p); do wait "$job" || rc=1; done
  echo "$name: $(cat "$out/commit") $([ $rc = 0 ] && echo built || echo FAILED)"
  return $rc
}

case "$mode" in
  build)
    [ $# -gt 0 ] || { echo "usage: $0 build NAME=REF ..." >&2; exit 2; }
    export PATH=$PATH:${CUDA_HOME:-/usr/local/cuda}/bin
    for pair in "$@"; do build_one "${pair%%=*}" "${pair#*=}" || exit 1; done
    ;;
  run)
    export PATH=$PATH:${CUDA_HOME:-/usr/local/cuda}/bin
    OUT=${OUT:-$root/results/variants}
    mkdir -p "$OUT"
    names=${VARIANTS:-$(ls "$dir")}
    stages=${*:-checks ab profile}
    for stage in $stages; do
      case "$stage" in
        checks)
          # One line per run in $OUT/checks.log (the device tool returns a few files, and a long
          # call's output keeps only its tail); the full logs stay in $OUT/<variant>/.
          for v in $names; do
            echo "== $v ($(cat "$dir/$v/commit"))"
            HARNESSES=$harnesses CHECKS_LOGDIR=$OUT/$v bash "$dir/$v/src/tests/cuda/run_cuda_checks.sh" 90 "$dir/$v" \
              > "$OUT/$v.checks.log" 2>&1
            rc=$?
            grep -E "^== .*(full|memcheck|racecheck|initcheck) |^run_cuda_checks" "$OUT/$v.checks.log"
            [ $rc = 0 ] || { echo "$v: checks FAILED (rc $rc)"; exit 1; }
          done 2>&1 | tee "$OUT/checks.log"
          [ "${PIPESTATUS[0]}" = 0 ] || exit 1
          ;;
        ab)
          for round in 1 2; do
            for v in $names; do
              echo "== $v ($(cat "$dir/$v/commit")), round $round"
              "$dir/$v/bench" --quick --only "${AB_ONLY:-cache-10k}" | grep "^cache"
            done
          done 2>&1 | tee "$OUT/ab.log"
          ;;
        profile)
          for v in $names; do
            "$dir/$v/bench_prof" --profile cache 64 10000 > "$OUT/$v.profile.log" 2>&1
            "$dir/$v/bench_prof" --breakdown 64 10000 > "$OUT/$v.breakdown.log" 2>&1
            echo "== $v: $(grep "stage (us" "$OUT/$v.profile.log")"
            grep "first scan" "$OUT/$v.profile.log"
            head -8 "$OUT/$v.breakdown.log"
          done
          ;;
        source)
          # The scan runs twice a step (passes 1 and 2): skipping 4 launches takes the 3rd step's first.
          for v in $names; do
            for ks in ${SOURCE_KERNELS:-query_scan_kernel:4 query_search_kernel:2 suffix_search_kernel:2}; do
              k=${ks%:*} rep=$OUT/$v.$k
              ncu -f -o "$rep" -k "regex:$k" --launch-skip "${ks#*:}" --launch-count 1 \
                --section SourceCounters --section WarpStateStats --warp-sampling-interval 0 \
                "$dir/$v/bench" --profile cache 64 10000 > "$rep.log" 2>&1 || { tail -5 "$rep.log"; continue; }
              ncu -i "$rep.ncu-rep" --page source --csv --print-source sass > "$rep.sass.csv" 2>&1
              echo "== $v $k: $(wc -l < "$rep.sass.csv") SASS rows"
            done
          done 2>&1 | tee "$OUT/source.log"
          ;;
        *) echo "unknown stage $stage" >&2; exit 2 ;;
      esac
    done
    ;;
  *)
    sed -n 2,16p "$0" >&2
    exit 2
    ;;
esac
