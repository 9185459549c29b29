#!/usr/bin/env bash
# ps_ckpt inspect and verify on checkpoints written by checkpoint_fixture:
# what inspect lists, verify's OK, then a flipped byte and a truncated file
# named with the block or the sizes, and the exit status.
set -euo pipefail
ckpt="$1"
fixture="$2"
root="$(mktemp -d "${TEST_TMPDIR:-/tmp}/ckpt_tool.XXXXXX")"
trap 'rm -rf "$root"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$fixture" "$root"
out=$("$ckpt" inspect "$root")
echo "$out"
grep -q "sequence 1, full, cut 100" <<<"$out" || fail "inspect: checkpoint 1"
grep -q "sequence 2, incremental on 1, cut 200" <<<"$out" || fail "inspect: checkpoint 2"
grep -q "table w: dense, width 4, 1000 keys" <<<"$out" || fail "inspect: table"
grep -q "clock: table w worker 3 at 200" <<<"$out" || fail "inspect: clock"
grep -q "file server-0-table-w: 3072 bytes, 3 blocks" <<<"$out" || fail "inspect: file"

"$ckpt" verify "$root" | grep -c ": OK$" | grep -qx 2 || fail "verify: both OK"

# One flipped byte in block 1 of checkpoint 2: named, exit 1.
f="$root/ckpt-0000000002/server-0-table-w"
printf '\x7f' | dd of="$f" bs=1 seek=1500 conv=notrunc status=none
if out=$("$ckpt" verify "$root"); then fail "verify passed a corrupt checkpoint"; fi
echo "$out"
grep -q "server-0-table-w: block 1 (bytes 1024..2048) has CRC32" <<<"$out" || fail "verify: block"
grep -q "ckpt-0000000001: OK" <<<"$out" || fail "verify: the older one"
# One directory given directly, truncated file.
truncate -s 100 "$root/ckpt-0000000001/server-0-table-w"
if out=$("$ckpt" verify "$root/ckpt-0000000001"); then fail "verify passed a truncated file"; fi
grep -q "100 bytes, expected 3072" <<<"$out" || fail "verify: truncation"
# Usage errors.
if "$ckpt" frobnicate "$root" 2>/dev/null; then fail "unknown command accepted"; fi
if "$ckpt" inspect "$root/none" 2>/dev/null; then fail "missing directory accepted"; fi
echo PASS
