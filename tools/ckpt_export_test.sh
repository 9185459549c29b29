#!/usr/bin/env bash
# ps_ckpt export on a real-format checkpoint chain written by
# checkpoint_export_fixture (see its header for the values), read back with
# Debian's NumPy: exact values, dtypes and shapes after the incremental
# checkpoint is applied, sorted uint64 keys with the erased key gone, the
# .npy header alignment and a ZIP that zipfile checks; then one checkpoint
# directory given directly, --tables, and the errors.
set -euo pipefail
ckpt="$1"
fixture="$2"
python=/usr/bin/python3  # Debian's, with NumPy
root="$(mktemp -d "${TEST_TMPDIR:-/tmp}/ckpt_export.XXXXXX")"
trap 'rm -rf "$root"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$python" -c 'import numpy' || fail "$python has no NumPy (apt-get install python3-numpy)"
"$fixture" "$root/ckpt" || fail "the fixture did not write its checkpoints"

# The root: the newest complete checkpoint, 2 (3 has no MANIFEST).
out=$("$ckpt" export "$root/ckpt" "$root/out" 2>"$root/stderr") ||
  fail "export of the root: $(cat "$root/stderr")"
echo "$out"
grep -q "^exporting $root/ckpt/ckpt-0000000002 (incremental on 1)$" <<<"$out" ||
  fail "export did not say it used checkpoint 2"
grep -q "^wrote $root/out/model/w.npy: table model/w, dense, values float32 \[10, 3\], 248 bytes$" \
  <<<"$out" || fail "export did not report model/w.npy"
grep -q "^wrote $root/out/bias.npy: table bias, dense, values float32 \[3, 1\], 140 bytes$" \
  <<<"$out" || fail "export did not report bias.npy"
grep -q "^wrote $root/out/emb.npz: table emb, sparse, keys uint64 \[6\], values float32 \[6, 2\], [0-9]* bytes$" \
  <<<"$out" || fail "export did not report emb.npz"
[ "$(grep -c '^wrote ' <<<"$out")" = 3 ] || fail "export wrote other than 3 files"
[ "$(find "$root/out" -type f | wc -l)" = 3 ] || fail "other files in the output: $(find "$root/out")"

"$python" - "$root/out" <<'EOF' || fail "NumPy check of the export of checkpoint 2"
import os, sys, zipfile
import numpy as np
out = sys.argv[1]

def check(what, ok):
    if not ok:
        sys.exit(f"FAIL: {what}")

w = np.load(f"{out}/model/w.npy", allow_pickle=False)
check(f"model/w dtype {w.dtype}", w.dtype == np.dtype("<f4"))
check(f"model/w shape {w.shape}", w.shape == (10, 3))
expected = np.array([[(100 if 4 <= k < 8 else 0) + k + 0.25 * j for j in range(3)]
                     for k in range(10)], dtype=np.float32)
check(f"model/w values (slice 1 from checkpoint 2, no optimizer state):\n{w}",
      np.array_equal(w, expected))
check("model/w C order", w.flags["C_CONTIGUOUS"])

bias = np.load(f"{out}/bias.npy")
check(f"bias {bias.dtype} {bias.shape} {bias.ravel()}",
      bias.dtype == np.float32 and bias.shape == (3, 1) and bias.ravel().tolist() == [9, 8, 7])

for name in ("model/w.npy", "bias.npy"):
    with open(f"{out}/{name}", "rb") as f:
        head = f.read(10)
    check(f"{name} magic {head[:8]!r}", head[:8] == b"\x93NUMPY\x01\x00")
    start = 10 + int.from_bytes(head[8:10], "little")
    check(f"{name}: data at byte {start}, not a multiple of 64", start % 64 == 0)

with zipfile.ZipFile(f"{out}/emb.npz") as z:
    check(f"emb.npz members {z.namelist()}", z.namelist() == ["keys.npy", "values.npy"])
    check("emb.npz CRCs", z.testzip() is None)
    check("emb.npz stored", all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist()))
emb = np.load(f"{out}/emb.npz")
keys, values = emb["keys"], emb["values"]
check(f"emb keys dtype {keys.dtype}", keys.dtype == np.dtype("<u8"))
check(f"emb values dtype {values.dtype} shape {values.shape}",
      values.dtype == np.dtype("<f4") and values.shape == (6, 2))
want = [3, 42, 77, 1000003, 2**53 + 1, 2**64 - 1]  # 17 erased, 77 added
check(f"emb keys {keys.tolist()}", keys.tolist() == want)
check("emb keys ascending", bool(np.all(keys[1:] > keys[:-1])))
check(f"emb values\n{values}", values.tolist() == [
    [0.5, -0.5], [42.25, -42.25], [7.5, -7.5], [3.5, -3.5], [4.5, -4.5], [5.5, -5.5]])
EOF

# Checkpoint 1 given directly, one table: the values before the increment.
out=$("$ckpt" export "$root/ckpt/ckpt-0000000001/" "$root/one" --tables=emb,model/w) ||
  fail "export of checkpoint 1"
grep -q "^exporting $root/ckpt/ckpt-0000000001 (full)$" <<<"$out" || fail "checkpoint 1 not named"
[ -e "$root/one/bias.npy" ] && fail "--tables=emb,model/w wrote bias.npy"
"$python" - "$root/one" <<'EOF' || fail "NumPy check of the export of checkpoint 1"
import sys
import numpy as np
out = sys.argv[1]
emb = np.load(f"{out}/emb.npz")
if emb["keys"].tolist() != [3, 17, 42, 1000003, 2**53 + 1, 2**64 - 1]:
    sys.exit(f"FAIL: checkpoint 1 keys {emb['keys'].tolist()}")
if emb["values"][:3].tolist() != [[0.5, -0.5], [1.5, -1.5], [2.5, -2.5]]:
    sys.exit(f"FAIL: checkpoint 1 values {emb['values'].tolist()}")
w = np.load(f"{out}/model/w.npy")
if w[5].tolist() != [5, 5.25, 5.5]:
    sys.exit(f"FAIL: checkpoint 1 model/w row 5 {w[5].tolist()}")
EOF

# Errors: exit 1 with the cause named; usage: exit 2.
if err=$("$ckpt" export "$root/ckpt" "$root/x" --tables=nope 2>&1); then
  fail "an unknown table was accepted"
fi
grep -q "has no table 'nope'; its tables: model/w, bias, emb" <<<"$err" || fail "unknown table: $err"
[ -e "$root/x" ] && fail "an export that failed wrote $root/x"
if err=$("$ckpt" export "$root/empty" "$root/x" 2>&1); then fail "a missing root was accepted"; fi
grep -q "$root/empty" <<<"$err" || fail "missing root not named: $err"
status=0
"$ckpt" export "$root/ckpt" 2>/dev/null || status=$?
[ "$status" = 2 ] || fail "export without OUT_DIR: exit $status, expected 2"
# A damaged base: checkpoint 2 still verifies, its base does not.
printf '\x7f' | dd of="$root/ckpt/ckpt-0000000001/server-1-data" bs=1 seek=30 conv=notrunc status=none
if err=$("$ckpt" export "$root/ckpt" "$root/x" 2>&1); then fail "a damaged base was exported"; fi
echo "$err"
grep -q "ckpt-0000000001/server-1-data: block 0 (bytes 0\.\.[0-9]*) has CRC32" <<<"$err" ||
  fail "damaged base not named: $err"
echo PASS
