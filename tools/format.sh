#!/usr/bin/env bash
# Formats the whole tree with the project's formatters and their configuration (pyproject.toml's
# [tool.ruff], .clang-format): ruff's safe fixes and ruff format over the Python files, clang-format
# over the C++/CUDA sources. --check only reports (what the lint step of .ci/run runs).
#
#   bash tools/format.sh            # rewrite the files in place
#   bash tools/format.sh --check    # exit non-zero if any file would change or a lint rule fails
#
# The tools are installed from PyPI into .venv-lint (pinned versions, the same as
# .pre-commit-config.yaml); FDSPEC_LINT_VENV overrides the directory.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
RUFF_VERSION=0.17.6
CLANG_FORMAT_VERSION=23.1.5
venv=${FDSPEC_LINT_VENV:-$root/.venv-lint}
if ! "$venv/bin/ruff" --version 2>/dev/null | grep -q "$RUFF_VERSION" \
    || ! "$venv/bin/clang-format" --version 2>/dev/null | grep -q "$CLANG_FORMAT_VERSION"; then
  python3 -m venv "$venv" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    "ruff==$RUFF_VERSION" "clang-format==$CLANG_FORMAT_VERSION" >&2
fi
mapfile -t py < <(git ls-files '*.py')
mapfile -t cxx < <(git ls-files '*.h' '*.cc' '*.cu' '*.cuh')
if [ "${1:-}" = --check ]; then
  "$venv/bin/ruff" check "${py[@]}"
  "$venv/bin/ruff" format --check "${py[@]}"
  "$venv/bin/clang-format" --dry-run -Werror "${cxx[@]}"
  echo "format: clean (${#py[@]} Python files, ${#cxx[@]} C++/CUDA files)"
else
  "$venv/bin/ruff" check --fix --quiet "${py[@]}" || true  # what it cannot fix, --check reports
  "$venv/bin/ruff" format --quiet "${py[@]}"
  "$venv/bin/clang-format" -i "${cxx[@]}"
  echo "format: formatted ${#py[@]} Python files and ${#cxx[@]} C++/CUDA files"
fi
