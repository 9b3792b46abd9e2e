#!/usr/bin/env bash
# Builds and runs the Paddle-free kernel harnesses (each op's CUDA launcher against its CPU
# implementation, bit for bit) from the repo root: every harness in its full mode, then in its quick
# mode under compute-sanitizer memcheck (with the leak check), racecheck and initcheck.
#
#   bash tests/cuda/run_cuda_checks.sh [ARCHS, default 90] [OUTDIR, default build] [--build-only | --cpu-selftest]
#                                      [--prebuilt] [--ptx-only]
#
# ARCHS: one or more of 80 86 89 90 (quoted, spaces or commas), built as setup_ops.py does: SASS for
# each, plus PTX of the highest, so that "86 89" also runs on an H100 by JIT (with the decisions of
# an sm_89 image: no programmatic dependent launch, no clusters; docs/testing_gpus.md).
# --build-only    compile only (needs nvcc, no GPU).
# --cpu-selftest  compile, then run the harnesses that have one in their --cpu-selftest mode (no GPU:
#                 generators, buffers and comparison against the CPU implementation, and a perturbed
#                 pass proving that a single wrong value is caught).
# A binary newer than every source it depends on (custom_ops/, tests/cuda/), built for the same ARCHS,
# is not rebuilt.
# --prebuilt      use the binaries already in OUTDIR as they are (built elsewhere for these ARCHS;
#                 copying a checkout may leave its sources newer than them); build only missing ones.
# --ptx-only      the PTX of the highest arch alone: all that a newer GPU can load from such a build
#                 (an H100 runs a "86 89" build from its compute_89 PTX), at a third of the size.
# Environment: HARNESSES (names, default all), NVCC_EXTRA (more nvcc flags, e.g. "-cudart shared" for
# small binaries), TOOLS (default "memcheck racecheck initcheck"; empty: no sanitizer), JOBS (parallel builds and sanitizer runs, default min(nproc / 2, 8)), CHECKS_LOGDIR
# (logs, default OUTDIR/logs), CUDA_HOME (default /usr/local/cuda).
# Prints one line per run and exits non-zero if any build, run or sanitizer report fails.
set -uo pipefail
cd "$(dirname "$0")/../.."

arch=90 outdir=build mode=run positional=0 prebuilt=0 ptx_only=0
for a in "$@"; do
  case "$a" in
    --build-only) mode=build ;;
    --cpu-selftest) mode=selftest ;;
    --prebuilt) prebuilt=1 ;;
    --ptx-only) ptx_only=1 ;;
    -*) echo "unknown option $a" >&2; exit 2 ;;
    *)
      if [ "$positional" -eq 0 ]; then arch=$a; else outdir=$a; fi
      positional=$((positional + 1)) ;;
  esac
done
archs=$(echo "$arch" | tr ',;' '  ' | xargs -n1 | sed 's/\.//' | sort -n -u | xargs)
[ -n "$archs" ] || { echo "no ARCHS given" >&2; exit 2; }
gencode=()
for a in $archs; do
  case "$a" in 80|86|87|89|90|100|120) gencode+=("-gencode=arch=compute_$a,code=sm_$a") ;;
    *) echo "unsupported arch $a (80 86 89 90)" >&2; exit 2 ;; esac
done
top=${archs##* }
[ "$ptx_only" -eq 1 ] && gencode=()
gencode+=("-gencode=arch=compute_$top,code=compute_$top")
arch_label="sm_${archs// /+sm_} + compute_$top"
[ "$ptx_only" -eq 1 ] && arch_label="compute_$top (PTX only)"
stamp_value=$archs
[ "$ptx_only" -eq 1 ] && stamp_value="compute_$top ptx-only"  # "86 89" and "80 86 89": the same binaries
cuda_home=${CUDA_HOME:-/usr/local/cuda}
nvcc=$(command -v nvcc || echo "$cuda_home/bin/nvcc")
logdir=${CHECKS_LOGDIR:-$outdir/logs}
jobs_max=${JOBS:-$(( $(nproc) / 2 > 8 ? 8 : ($(nproc) / 2 < 1 ? 1 : $(nproc) / 2) ))}
mkdir -p "$outdir" "$logdir"
# Binaries built for other ARCHS are rebuilt.
stamp="$outdir/.archs"
if [ "$(cat "$stamp" 2>/dev/null)" != "$stamp_value" ]; then
  [ "$prebuilt" -eq 1 ] && [ -e "$stamp" ] && { echo "$outdir holds binaries for '$(cat "$stamp")', not '$stamp_value'" >&2; exit 2; }
  rm -f "$outdir"/*_vs_cpu "$outdir"/pdl_order_check "$outdir"/bench_*
  echo "$stamp_value" > "$stamp"
fi

# name: harness source, then the op sources it links.
declare -A sources=(
  [ngram_match_vs_cpu]="tests/cuda/ngram_match_vs_cpu.cu custom_ops/ngram_match/ngram_match.cu custom_ops/ngram_match/ngram_match_cpu.cc"
  [decode_step_vs_cpu]="tests/cuda/decode_step_vs_cpu.cu custom_ops/verify_draft_tokens/verify_draft_tokens.cu custom_ops/verify_draft_tokens/verify_draft_tokens_cpu.cc custom_ops/unified_update_model_status/unified_update_model_status.cu custom_ops/unified_update_model_status/unified_update_model_status_cpu.cc custom_ops/naive_update_model_status/naive_update_model_status.cu custom_ops/naive_update_model_status/naive_update_model_status_cpu.cc custom_ops/top_p_candidates/top_p_candidates.cu custom_ops/top_p_candidates/top_p_candidates_cpu.cc"
  [hybrid_mtp_ngram_vs_cpu]="tests/cuda/hybrid_mtp_ngram_vs_cpu.cu custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram.cu custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram_cpu.cc"
  [speculate_get_accept_tokens_and_logits_vs_cpu]="tests/cuda/speculate_get_accept_tokens_and_logits_vs_cpu.cu custom_ops/speculate_get_accept_tokens_and_logits/speculate_get_accept_tokens_and_logits.cu custom_ops/speculate_get_accept_tokens_and_logits/speculate_get_accept_tokens_and_logits_cpu.cc"
  [speculate_logprobs_topk_vs_cpu]="tests/cuda/speculate_logprobs_topk_vs_cpu.cu custom_ops/speculate_logprobs_topk/speculate_logprobs_topk.cu custom_ops/speculate_logprobs_topk/speculate_logprobs_topk_cpu.cc"
  [draft_model_vs_cpu]="tests/cuda/draft_model_vs_cpu.cu custom_ops/draft_model/draft_model.cu custom_ops/draft_model/draft_model_cpu.cc"
  [mtp_state_vs_cpu]="tests/cuda/mtp_state_vs_cpu.cu custom_ops/mtp_state/mtp_state.cu custom_ops/mtp_state/mtp_state_cpu.cc"
  [suffix_match_vs_cpu]="tests/cuda/suffix_match_vs_cpu.cu custom_ops/suffix_match/suffix_match.cu custom_ops/suffix_match/suffix_match_cpu.cc"
  [suffix_cache_vs_cpu]="tests/cuda/suffix_cache_vs_cpu.cu custom_ops/suffix_cache/suffix_cache.cu custom_ops/suffix_cache/suffix_cache_cpu.cc custom_ops/suffix_cache/suffix_cache_state.cc custom_ops/suffix_match/suffix_match.cu custom_ops/suffix_match/suffix_match_cpu.cc"
  [sample_tokens_vs_cpu]="tests/cuda/sample_tokens_vs_cpu.cu custom_ops/speculate_sample_tokens/speculate_sample_tokens.cu custom_ops/speculate_sample_tokens/speculate_sample_tokens_cpu.cc"
  [draft_length_policy_vs_cpu]="tests/cuda/draft_length_policy_vs_cpu.cu custom_ops/speculate_draft_length_policy/speculate_draft_length_policy.cu custom_ops/speculate_draft_length_policy/speculate_draft_length_policy_cpu.cc"
  # Not an op: the stream-ordering rule the n-gram ops' walk-free path relies on (see the source).
  [pdl_order_check]="tests/cuda/pdl_order_check.cu"
  # Benchmarks: built and run only when named in HARNESSES (e.g. HARNESSES=bench_mtp_kernels TOOLS= ...).
  [bench_mtp_kernels]="benchmarks/kernels/bench_mtp_kernels.cu custom_ops/draft_model/draft_model.cu custom_ops/draft_model/draft_model_cpu.cc custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram.cu custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram_cpu.cc"
  [bench_mtp_state]="benchmarks/kernels/bench_mtp_state.cu custom_ops/mtp_state/mtp_state.cu custom_ops/mtp_state/mtp_state_cpu.cc custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram.cu custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram_cpu.cc custom_ops/draft_model/draft_model.cu custom_ops/draft_model/draft_model_cpu.cc custom_ops/speculate_sample_tokens/speculate_sample_tokens.cu custom_ops/speculate_sample_tokens/speculate_sample_tokens_cpu.cc"
  [bench_ngram_kernels]="benchmarks/kernels/bench_ngram_kernels.cu custom_ops/ngram_match/ngram_match.cu custom_ops/ngram_match/ngram_match_cpu.cc custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram.cu custom_ops/hybrid_mtp_ngram/hybrid_mtp_ngram_cpu.cc"
  [bench_sample_tokens]="benchmarks/kernels/bench_sample_tokens.cu custom_ops/speculate_sample_tokens/speculate_sample_tokens.cu custom_ops/speculate_sample_tokens/speculate_sample_tokens_cpu.cc"
  [bench_suffix_kernels]="benchmarks/kernels/bench_suffix_kernels.cu custom_ops/suffix_match/suffix_match.cu custom_ops/suffix_match/suffix_match_cpu.cc custom_ops/suffix_cache/suffix_cache.cu custom_ops/suffix_cache/suffix_cache_cpu.cc"
)
all="ngram_match_vs_cpu decode_step_vs_cpu hybrid_mtp_ngram_vs_cpu speculate_get_accept_tokens_and_logits_vs_cpu speculate_logprobs_topk_vs_cpu draft_model_vs_cpu mtp_state_vs_cpu suffix_match_vs_cpu suffix_cache_vs_cpu sample_tokens_vs_cpu draft_length_policy_vs_cpu pdl_order_check"
selftests="ngram_match_vs_cpu decode_step_vs_cpu hybrid_mtp_ngram_vs_cpu speculate_get_accept_tokens_and_logits_vs_cpu speculate_logprobs_topk_vs_cpu draft_model_vs_cpu mtp_state_vs_cpu suffix_match_vs_cpu suffix_cache_vs_cpu sample_tokens_vs_cpu draft_length_policy_vs_cpu"
names=${HARNESSES:-$all}
for n in $names; do
  [ -n "${sources[$n]:-}" ] || { echo "unknown harness $n (known: $all)" >&2; exit 2; }
done

# Runs "$@" in the background with its output in $1's log; at most jobs_max at once. The exit status
# goes to LOG.rc.
spawn() {
  local log=$1; shift
  rm -f "$log.rc"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n 2>/dev/null || true; done
  ( "$@" > "$log" 2>&1; echo $? > "$log.rc" ) &
}
rc_of() { cat "$1.rc" 2>/dev/null || echo 99; }

fail=0

# --- build ---
build() {
  local name=$1 bin="$outdir/$1"
  local srcs=${sources[$name]}
  if [ -x "$bin" ] && [ "$prebuilt" -eq 1 ]; then
    echo "up to date"
    return 0
  fi
  if [ -x "$bin" ] && [ -z "$(find custom_ops tests/cuda benchmarks/kernels $srcs -newer "$bin" \
        \( -name '*.h' -o -name '*.cuh' -o -name '*.cu' -o -name '*.cc' \) -print -quit)" ]; then
    echo "up to date"
    return 0
  fi
  # shellcheck disable=SC2086
  "$nvcc" -std=c++17 -O3 -lineinfo -DFDSPEC_WITH_CUDA -Icustom_ops -Itests/cuda -Ibenchmarks/kernels -I"$cuda_home/include/cccl" \
    "${gencode[@]}" ${NVCC_EXTRA:-} $srcs -o "$bin.tmp" && mv "$bin.tmp" "$bin"
}
for n in $names; do spawn "$logdir/$n.build.log" build "$n"; done
wait
for n in $names; do
  rc=$(rc_of "$logdir/$n.build.log")
  if [ "$rc" -ne 0 ]; then
    echo "== build $n: FAIL (rc $rc)"; tail -20 "$logdir/$n.build.log"; fail=1
  else
    echo "== build $n: $(grep -q "up to date" "$logdir/$n.build.log" && echo "up to date" || echo built) ($outdir/$n)"
  fi
done
[ "$fail" -eq 0 ] || { echo "run_cuda_checks: FAIL (build)"; exit 1; }
[ "$mode" = build ] && { echo "run_cuda_checks: built $arch_label into $outdir"; exit 0; }

summary() { grep -E ": (PASS|FAIL) \(" "$1" | tail -1; }

if [ "$mode" = selftest ]; then
  for n in $names; do
    case " $selftests " in *" $n "*) ;; *) continue ;; esac
    "$outdir/$n" --cpu-selftest quick > "$logdir/$n.selftest.log" 2>&1
    rc=$?
    echo "== $n --cpu-selftest quick (rc $rc):"; grep -E ": (PASS|FAIL) \(" "$logdir/$n.selftest.log"
    [ "$rc" -eq 0 ] || { tail -12 "$logdir/$n.selftest.log"; fail=1; }
  done
  [ "$fail" -eq 0 ] && echo "run_cuda_checks: PASS (cpu self-tests)" || echo "run_cuda_checks: FAIL (cpu self-tests)"
  exit "$fail"
fi

# --- full runs, one at a time ---
for n in $names; do
  start=$SECONDS
  "$outdir/$n" > "$logdir/$n.full.log" 2>&1
  rc=$?
  echo "== $n full ($((SECONDS - start)) s, rc $rc): $(summary "$logdir/$n.full.log")"
  [ "$rc" -eq 0 ] || { tail -15 "$logdir/$n.full.log"; fail=1; }
done

# --- quick runs under compute-sanitizer, in parallel ---
tools=${TOOLS-memcheck racecheck initcheck}
if [ -n "$tools" ]; then
  sanitizer=$(command -v compute-sanitizer || echo "$cuda_home/bin/compute-sanitizer")
  [ -x "$sanitizer" ] || { echo "compute-sanitizer not found"; echo "run_cuda_checks: FAIL"; exit 1; }
  start=$SECONDS
  for n in $names; do
    for tool in $tools; do
      extra=()
      [ "$tool" = memcheck ] && extra=(--leak-check full)
      spawn "$logdir/$n.$tool.log" "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 3 "$outdir/$n" quick
    done
  done
  wait
  echo "== compute-sanitizer runs: $((SECONDS - start)) s"
  for n in $names; do
    for tool in $tools; do
      log="$logdir/$n.$tool.log"
      rc=$(rc_of "$log")
      line=$(grep -E "(ERROR|RACECHECK) SUMMARY" "$log" | tail -1 | sed 's/^=* *//')
      echo "== $n $tool (rc $rc): ${line:-no summary} | $(summary "$log")"
      [ "$rc" -eq 0 ] || { grep -v "^\s*$" "$log" | head -40; fail=1; }
    done
  done
fi

[ "$fail" -eq 0 ] && echo "run_cuda_checks: PASS" || echo "run_cuda_checks: FAIL"
exit "$fail"
