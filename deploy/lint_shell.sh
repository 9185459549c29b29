#!/usr/bin/env bash
# Lints every shell script tracked by git (*.sh) with ShellCheck, warnings
# and errors (`shellcheck -x -S warning`, from the repository root, with its
# .shellcheckrc). Prints each finding and exits 1 when there is any; 0 when
# there is none.
#
#   deploy/lint_shell.sh
#
# A finding that is a false positive is disabled on its line, with the
# reason: `# shellcheck disable=SCxxxx  # why`. A library sourced through a
# computed path gets `# shellcheck source=path/from/the/root.sh` above the
# `source`.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v shellcheck >/dev/null ||
  { echo "lint_shell.sh: shellcheck is not installed (apt-get install shellcheck)" >&2; exit 2; }
mapfile -t scripts < <(git ls-files '*.sh')
[ "${#scripts[@]}" -gt 0 ] || { echo "lint_shell.sh: git lists no *.sh file" >&2; exit 2; }
if ! shellcheck -x -S warning "${scripts[@]}"; then
  echo "lint_shell.sh: ShellCheck findings above, in ${#scripts[@]} scripts checked" >&2
  exit 1
fi
echo "lint_shell.sh: ${#scripts[@]} scripts, no ShellCheck warning"
