#!/usr/bin/env bash
# Checks that the C++ sources follow the repository's .clang-format (Google
# style, 100 columns) with `clang-format --dry-run --Werror`; it never edits a
# file. Prints each file that is not formatted and a one-line summary; exits 1
# when any file is not formatted (2 on a usage or tool error).
#   deploy/check_format.sh                   # every tracked *.cc and *.h outside third_party/
#   deploy/check_format.sh --changed BASE    # only those added, modified or renamed since BASE
# To fix a file: clang-format -i FILE (the .clang-format at the root applies).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: $0 [--changed BASE]" >&2
  exit 2
}

base=""
case $# in
  0) ;;
  2) [ "$1" = "--changed" ] || usage; base="$2" ;;
  *) usage ;;
esac

clang_format="${CLANG_FORMAT:-clang-format}"
if ! command -v "$clang_format" >/dev/null; then
  echo "check_format.sh: $clang_format not found (apt-get install clang-format)" >&2
  exit 2
fi

files=()
if [ -z "$base" ]; then
  mapfile -t files < <(git ls-files -- '*.cc' '*.h' | grep -v '^third_party/' || true)
  scope="tracked C++ files"
else
  if ! git rev-parse --verify --quiet "${base}^{commit}" >/dev/null; then
    echo "check_format.sh: unknown revision '$base'" >&2
    exit 2
  fi
  # Against the working tree, so uncommitted edits are checked too.
  mapfile -t files < <(git diff --name-only --diff-filter=AMR "$base" -- '*.cc' '*.h' |
    grep -v '^third_party/' || true)
  scope="C++ files changed since $base"
fi

bad=0
checked=0
for f in "${files[@]}"; do
  [ -f "$f" ] || continue  # tracked but deleted in the working tree
  checked=$((checked + 1))
  if ! out="$(nice -n 19 "$clang_format" --style=file --dry-run --Werror "$f" 2>&1)"; then
    if [[ "$out" != *clang-format-violations* ]]; then
      # Not a formatting finding: a bad .clang-format, an unreadable file...
      echo "check_format.sh: clang-format failed on $f:" >&2
      echo "$out" >&2
      exit 2
    fi
    echo "not formatted: $f"
    bad=$((bad + 1))
  fi
done

if [ "$bad" -gt 0 ]; then
  echo "check_format.sh: $bad of $checked $scope not formatted" \
    "(fix with: clang-format -i FILE...; see the diff with: clang-format FILE | diff FILE -)"
  exit 1
fi
echo "check_format.sh: all $checked $scope formatted"
