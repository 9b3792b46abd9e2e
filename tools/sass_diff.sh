#!/usr/bin/env bash
# Compares the machine code of the kernel layer at two revisions: for a change that must not alter
# what the GPU runs (a refactor, shared helpers, comments), identical SASS proves it without a GPU.
#
#   bash tools/sass_diff.sh BASE [ARCHS, default "80 90"] [FILE.cu ...]
#
# BASE: a git revision; the working tree is compared with it. Each custom_ops/*/*.cu (or each FILE)
# whose sources differ between the two is compiled for every arch (nvcc -cubin) and disassembled
# (cuobjdump -sass); anonymous-namespace hashes, which follow the checkout's path, are normalised.
# Prints SAME / DIFF per file and arch; exits non-zero on any DIFF or build failure. A DIFF is not a
# bug, only unproven: run the harnesses and the benchmarks on a GPU before landing it.
# cuobjdump: $CUOBJDUMP, else $CUDA_HOME/bin, else PATH (without a full toolkit, PyPI's
# nvidia-cuda-cuobjdump wheel carries it under nvidia/cu13/bin). OUT (default a temporary folder)
# keeps the .sass files for diffing.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,15p' "$0"; exit 2; }
base=$1
archs=${2:-"80 90"}
shift $(( $# > 2 ? 2 : $# ))
cuda_home=${CUDA_HOME:-/usr/local/cuda}
nvcc=$(command -v nvcc || echo "$cuda_home/bin/nvcc")
cuobjdump=${CUOBJDUMP:-$( [ -x "$cuda_home/bin/cuobjdump" ] && echo "$cuda_home/bin/cuobjdump" || command -v cuobjdump || true)}
[ -n "$cuobjdump" ] || { echo "no cuobjdump: set CUOBJDUMP (see the header)" >&2; exit 2; }
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
old="$out/base"
rm -rf "$old" && mkdir -p "$old"
git archive "$base" custom_ops | tar -x -C "$old" || { echo "cannot read $base" >&2; exit 2; }
flags=(-std=c++17 -O3 -DFDSPEC_WITH_CUDA -Icustom_ops "-I$cuda_home/include/cccl")
deps() { (cd "$1" && "$nvcc" "${flags[@]}" -M "$2" 2>/dev/null | tr ' \\' '\n\n' | grep '^custom_ops/' | sort -u); }
sass() { "$cuobjdump" -sass "$1" | grep -v '^\s*$' | sed -E 's/_GLOBAL__N__[0-9a-f]+_/_GLOBAL__N__/g'; }
files=${*:-$(ls custom_ops/*/*.cu)}
rc=0
for f in $files; do
  [ -f "$old/$f" ] || { echo "NEW  $f (not in $base)"; continue; }
  changed=0
  for d in $(deps "$old" "$f") $(deps . "$f"); do
    cmp -s "$old/$d" "$d" || { changed=1; break; }
  done
  [ "$changed" -eq 1 ] || { echo "same sources $f"; continue; }
  n=$(echo "$f" | tr '/' '_')
  for a in $archs; do
    if ! (cd "$old" && "$nvcc" "${flags[@]}" -arch="sm_$a" -cubin "$f" -o "$out/base_${n}_$a.cubin") ||
       ! "$nvcc" "${flags[@]}" -arch="sm_$a" -cubin "$f" -o "$out/new_${n}_$a.cubin"; then
      echo "BUILD FAIL sm_$a $f"; rc=1; continue
    fi
    sass "$out/base_${n}_$a.cubin" > "$out/base_${n}_$a.sass"
    sass "$out/new_${n}_$a.cubin" > "$out/new_${n}_$a.sass"
    if cmp -s "$out/base_${n}_$a.sass" "$out/new_${n}_$a.sass"; then
      echo "SAME sm_$a $f ($(grep -c 'Function :' "$out/new_${n}_$a.sass") functions)"
    else
      echo "DIFF sm_$a $f ($out/{base,new}_${n}_$a.sass)"; rc=1
    fi
  done
done
exit $rc
