#!/bin/bash
# ps_bench's paired mode, briefly: both cases of a width print their RESULT
# line and one PAIR line with positive ratios; bad flags exit 2 naming the
# flag; against a ps_server process, RESULT lines end with each side's CPU
# per operation. (Speed itself is measured by running ps_bench, not
# asserted here.)
set -u
bench="$1"
# ps_server from runfiles, started and stopped as the deploy scripts do.
# shellcheck source=deploy/lib/servers.sh
source "$TEST_SRCDIR/$TEST_WORKSPACE/deploy/lib/servers.sh"
fail() { echo "FAIL: $*"; exit 1; }

out="$("$bench" --dense_values= --small_inflight=0 --ops=pushpull --sparse_widths=1,4 \
  --sparse_keys=200 --sparse_key_space=5000 --seconds=0.4 --warmup_seconds=0.05 \
  --paired_blocks=2 --slice_size=1024 2>&1)" || fail "paired run exited $?: $out"
for w in 1 4; do
  grep -q "^RESULT kind=sparse op=pushpull values=$((200 * w)) width=$w .*ops_per_s=[1-9]" \
    <<<"$out" || fail "no dense-key-path RESULT for width $w: $out"
  grep -q "^RESULT kind=hashed op=pushpull values=$((200 * w)) width=$w .*ops_per_s=[1-9]" \
    <<<"$out" || fail "no sparse-table RESULT for width $w: $out"
  line="$(grep "^PAIR op=pushpull width=$w turns=2 " <<<"$out")" ||
    fail "no PAIR line for width $w: $out"
  for field in hashed_over_sparse turn_median turn_min turn_max; do
    value="$(sed -n "s/.* $field=\([0-9.]*\).*/\1/p" <<<"$line")"
    [[ "$value" =~ ^[0-9]+\.[0-9]+$ ]] && [[ "$value" != 0.000 ]] ||
      fail "PAIR $field is '$value': $line"
  done
  # The spread brackets the median.
  min="$(sed -n 's/.* turn_min=\([0-9.]*\).*/\1/p' <<<"$line")"
  med="$(sed -n 's/.* turn_median=\([0-9.]*\).*/\1/p' <<<"$line")"
  max="$(sed -n 's/.* turn_max=\([0-9.]*\).*/\1/p' <<<"$line")"
  awk -v a="$min" -v b="$med" -v c="$max" 'BEGIN { exit !(a <= b && b <= c) }' ||
    fail "turn_min <= turn_median <= turn_max does not hold: $line"
done
# The server ran with the asked slicing.
grep -q "slice_size 1024" <<<"$out" || fail "the in-process server did not get --slice_size: $out"

out="$("$bench" --paired_blocks=-1 --dense_values= --sparse_keys=0 --small_inflight=0 2>&1)"
[[ $? -eq 2 && "$out" == *"--paired_blocks=-1"* ]] || fail "--paired_blocks=-1: $out"
out="$("$bench" --slice_size=0 --dense_values= --sparse_keys=0 --small_inflight=0 2>&1)"
[[ $? -eq 2 && "$out" == *"--slice_size=0"* ]] || fail "--slice_size=0: $out"
# Against a server process: the CPU each side used per operation, both
# positive (the server's from its Stats). In process, no such fields.
stop_on_exit "$TEST_TMPDIR/servers"
mkdir -p "$TEST_TMPDIR/servers"
start_servers "$TEST_SRCDIR/$TEST_WORKSPACE" "$TEST_TMPDIR/servers" 1
out="$("$bench" --servers="$spec" --dense_values=1024 --ops=pushpull \
  --small_inflight=0 --sparse_keys=0 --seconds=0.5 --warmup_seconds=0.1 2>&1)" ||
  fail "run against a server process exited $?: $out"
line="$(grep "^RESULT kind=dense op=pushpull values=1024 " <<<"$out")" || fail "no RESULT: $out"
for field in client_cpu_us server_cpu_us; do
  value="$(sed -n "s/.* $field=\([0-9.]*\).*/\1/p" <<<"$line")"
  awk -v v="$value" 'BEGIN { exit !(v > 0) }' || fail "$field is '$value': $line"
done
stop_servers
out="$("$bench" --dense_values=1024 --ops=pushpull --small_inflight=0 --sparse_keys=0 \
  --seconds=0.3 --warmup_seconds=0.05 2>&1)" || fail "in-process run exited $?: $out"
[[ "$out" == *"RESULT kind=dense"* && "$out" != *"cpu_us="* ]] ||
  fail "in-process run: want a RESULT line without CPU fields: $out"
echo PASS
