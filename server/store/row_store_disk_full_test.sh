#!/usr/bin/env bash
# The log row store on a disk that fills up (RocksDB, built by Debian with
# assertions, aborts the process at the failed write: see
# docs/experiments/2026-11-28-row-stores.md): a 16 MiB tmpfs mounted in a
# private mount namespace (unshare -m; needs root), with a 4 MiB filler file
# the check deletes to give room back (row_store_disk_full_check.cc says
# what is checked).
set -euo pipefail
check="$1"
[ "$(id -u)" -eq 0 ] || { echo "FAIL: needs root (a tmpfs in a private mount namespace)" >&2; exit 1; }
root="${TEST_TMPDIR:-/tmp}/disk_full"
mkdir -p "$root"
# shellcheck disable=SC2016  # expanded by the inner bash, from its arguments
unshare -m bash -c '
  set -euo pipefail
  mount -t tmpfs -o size=16m tmpfs "$1"
  dd if=/dev/zero of="$1/filler" bs=1M count=4 status=none
  "$2" --store=log --dir="$1/store" --filler="$1/filler"
' _ "$root" "$check"
echo "PASS: the log store on a full disk"
