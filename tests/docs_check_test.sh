#!/bin/bash
# The documentation against the tree and the binaries: every relative link in
# README.md and docs/ resolves, and every --flag they name after ps_server,
# ps_worker, ps_admin, ps_ckpt or a deploy script exists
# (tests/docs_check.py says how).
# Args: the four binaries. README.md (a data dependency) leads back to the
# source tree, which is where the links point.
set -euo pipefail
[[ $# -eq 4 ]] || { echo "usage: $0 PS_SERVER PS_WORKER PS_ADMIN PS_CKPT" >&2; exit 2; }
readme=$(readlink -f README.md)
root=$(dirname "$readme")
[[ -f "$root/docs/design/architecture.md" ]] ||
  { echo "FAIL: $readme does not lead to the source tree (no docs/ beside it)" >&2; exit 1; }
abs() { readlink -f "$1"; }
exec /usr/bin/python3 "$(abs tests/docs_check.py)" "$root" \
  "ps_server=$(abs "$1")" "ps_worker=$(abs "$2")" "ps_admin=$(abs "$3")" "ps_ckpt=$(abs "$4")"
