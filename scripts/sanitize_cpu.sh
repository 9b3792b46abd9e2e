#!/usr/bin/env bash
# Builds the CPU-only op library with AddressSanitizer (+ UBSan) and runs the test suite through it.
#
#   bash scripts/sanitize_cpu.sh [pytest args...]          # default: the whole suite, tests/
#   FDSPEC_SANITIZE=address bash scripts/sanitize_cpu.sh   # ASan only (default: address,undefined)
#
# The build and the run happen in a scratch copy of the checkout (its fastdeploy_spec/_lib is left
# alone). Python is not instrumented, so the sanitizer runtimes are preloaded (for the build too:
# Paddle loads the fresh library at its end). Options:
#   detect_leaks=0           Python and Paddle keep allocations alive until exit by design;
#   alloc_dealloc_mismatch=0 Paddle's prebuilt libraries mix new[]/delete in places (not our code);
#   log_path                 reports go to files: pytest captures fd 2, so a report printed there
#                            by a process that then exits is never seen (the "silent exit" of a
#                            sanitized run, see docs/RELIABILITY.md);
#   suppressions (UBSan)     vptr checks inside Paddle's own headers (paddle::any downcasts: the
#                            type info of a template instantiated in two libraries differs).
# Reports are fatal (ASan by default, UBSan with halt_on_error=1). The last line is a summary:
# "sanitize_cpu: PASS|FAIL (<pytest summary>) sanitizers=... reports=N exit=RC".
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
san=${FDSPEC_SANITIZE:-address,undefined}
work=$(mktemp -d /tmp/fdspec_sanitize.XXXXXX)
# FDSPEC_SANITIZE_KEEP=1 keeps the scratch copy (and its instrumented build) for a closer look.
[ "${FDSPEC_SANITIZE_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
py=${PYTHON:-python}

# A copy of the tracked and untracked (not ignored) files: what the next commit would hold.
(cd "$root" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$work" 2>/dev/null)
cd "$work"

asan_rt=$(gcc -print-file-name=libasan.so)
preload=$asan_rt
if [[ $san == *undefined* ]]; then
  preload="$asan_rt $(gcc -print-file-name=libubsan.so)"
fi
mkdir -p "$work/reports"
printf 'vptr_check:paddle/utils/any.h\n' >"$work/ubsan.supp"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:alloc_dealloc_mismatch=0}:log_path=$work/reports/asan
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}:suppressions=$work/ubsan.supp:log_path=$work/reports/ubsan

echo "== build (FDSPEC_SANITIZE=$san) in $work"
# Paddle loads the fresh library at the end of the build: the runtime must be preloaded there too.
if ! LD_PRELOAD="$preload" FDSPEC_CPU_ONLY=1 FDSPEC_SANITIZE=$san "$py" setup_ops.py build >build.log 2>&1; then
  tail -30 build.log
  echo "sanitize_cpu: FAIL (build)"
  exit 1
fi
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(tests)
echo "== pytest ${args[*]} with LD_PRELOAD=$preload ASAN_OPTIONS=$ASAN_OPTIONS"
LD_PRELOAD="$preload" "$py" -m pytest -q -p no:cacheprovider "${args[@]}" 2>&1 | tee pytest.log
rc=${PIPESTATUS[0]}
summary=$(grep -E '[0-9]+ (passed|failed)' pytest.log | tail -1)
reports=$(cat "$work"/reports/* 2>/dev/null | grep -cE 'ERROR: AddressSanitizer|runtime error:')
if [ "$reports" -gt 0 ]; then
  echo "== sanitizer reports (first 60 lines)"
  cat "$work"/reports/* | head -60
fi
if [ "$rc" -eq 0 ] && [ "$reports" -eq 0 ]; then verdict=PASS; else verdict=FAIL; fi
echo "sanitize_cpu: $verdict (${summary:-no pytest summary}) sanitizers=$san reports=$reports exit=$rc"
[ "$verdict" = PASS ]
