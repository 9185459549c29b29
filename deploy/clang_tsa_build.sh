#!/usr/bin/env bash
# Builds the whole tree with Debian's clang and -Wthread-safety as an error
# (bazel --config=clang_tsa, see .bazelrc), so every ABSL_GUARDED_BY and
# ABSL_EXCLUSIVE_LOCKS_REQUIRED is checked; GCC ignores the annotations.
# Installs clang with apt (via deploy/setup.sh) when it is missing. Extra
# arguments go to bazel build, e.g. a narrower target pattern:
#   deploy/clang_tsa_build.sh                 # //...
#   deploy/clang_tsa_build.sh //worker/...
# Exits non-zero when the build, or any thread-safety check, fails.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v clang >/dev/null || ! command -v clang++ >/dev/null; then
  deploy/setup.sh
fi

targets=()
flags=()
for arg in "$@"; do
  case "$arg" in
    -*) flags+=("$arg") ;;
    *) targets+=("$arg") ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(//...)

echo "clang_tsa_build.sh: bazel build --config=clang_tsa ${flags[*]} ${targets[*]}"
start=$SECONDS
if bazel build --config=clang_tsa "${flags[@]}" -- "${targets[@]}"; then
  echo "clang_tsa_build.sh: thread-safety build passed in $((SECONDS - start))s"
else
  status=$?
  echo "clang_tsa_build.sh: thread-safety build FAILED (exit $status) after $((SECONDS - start))s;" \
    "see the errors above ([-Werror,-Wthread-safety-...] marks the lock checks)" >&2
  exit "$status"
fi
