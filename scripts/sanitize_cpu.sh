#!/usr/bin/env bash
# Builds the CPU-only op library with AddressSanitizer (+ UBSan) and runs the test suite through it.
#
#   bash scripts/sanitize_cpu.sh [pytest args...]          # default: the whole suite, tests/
#   FDSPEC_SANITIZE=address bash scripts/sanitize_cpu.sh   # ASan only (default: ASan + UBSan)
#
# The build and the run happen in a scratch copy of the checkout (its fastdeploy_spec/_lib is left
# alone). Python is not instrumented, so the sanitizer runtimes are preloaded (for the build too:
# Paddle loads the fresh library at its end). Options:
#   detect_leaks=0           Python and Paddle keep allocations alive until exit by design;
#   alloc_dealloc_mismatch=0 Paddle's prebuilt libraries mix new[]/delete in places (not our code);
#   --capture=sys, log_path  pytest captures file descriptor 2 by default, so a report printed there
#                            by a process that then halts is never seen (the "silent exit" of a
#                            sanitized run, see docs/testing.md): pytest captures only Python's
#                            sys.stderr here, and ASan also writes its reports to files;
#   UBSan without vptr       "undefined" minus -fsanitize=vptr, which flags paddle::any downcasts in
#                            Paddle's own headers (type info of a template instantiated in two
#                            libraries differs): a false positive outside this plugin.
# Reports are fatal (ASan by default, UBSan with halt_on_error=1). The last line is a summary:
# "sanitize_cpu: PASS|FAIL (<pytest summary>) sanitizers=... reports=N exit=RC".
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Every UBSan check of gcc 12 except vptr (see above).
ubsan=signed-integer-overflow,shift,integer-divide-by-zero,unreachable,vla-bound,null,return,bounds
ubsan=$ubsan,alignment,object-size,float-cast-overflow,nonnull-attribute,returns-nonnull-attribute,bool
ubsan=$ubsan,enum,pointer-overflow,builtin
san=${FDSPEC_SANITIZE:-address,$ubsan}
work=$(mktemp -d /tmp/fdspec_sanitize.XXXXXX)
# FDSPEC_SANITIZE_KEEP=1 keeps the scratch copy (and its instrumented build) for a closer look.
[ "${FDSPEC_SANITIZE_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
py=${PYTHON:-python}

# A copy of the tracked and untracked (not ignored) files: what the next commit would hold.
(cd "$root" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$work" 2>/dev/null)
cd "$work"

asan_rt=$(gcc -print-file-name=libasan.so)
preload=$asan_rt
if [[ $san == *,* ]]; then
  preload="$asan_rt $(gcc -print-file-name=libubsan.so)"
fi
mkdir -p "$work/reports"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:alloc_dealloc_mismatch=0}:log_path=$work/reports/asan
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}:log_path=$work/reports/ubsan

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
LD_PRELOAD="$preload" "$py" -m pytest -q -p no:cacheprovider --capture=sys "${args[@]}" 2>&1 | tee pytest.log
rc=${PIPESTATUS[0]}
summary=$(grep -E '[0-9]+ (passed|failed)' pytest.log | tail -1)
reports=$(cat "$work"/reports/* pytest.log 2>/dev/null | grep -cE 'ERROR: AddressSanitizer|runtime error:')
if [ "$reports" -gt 0 ]; then
  echo "== sanitizer reports (first 60 lines)"
  cat "$work"/reports/* | head -60
fi
if [ "$rc" -eq 0 ] && [ "$reports" -eq 0 ]; then verdict=PASS; else verdict=FAIL; fi
echo "sanitize_cpu: $verdict (${summary:-no pytest summary}) sanitizers=${FDSPEC_SANITIZE:-address,undefined-but-vptr} reports=$reports exit=$rc"
[ "$verdict" = PASS ]
