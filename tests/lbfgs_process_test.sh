#!/usr/bin/env bash
# Sandblaster L-BFGS across processes (ps_lbfgs, ps_worker --algorithm=lbfgs,
# two ps_server) on heart_scale, a small real LibSVM set:
#   1. a sparse table reaches the single-process SciPy reference's loss
#      (deploy/lbfgs_reference.py) within 1e-4 relative;
#   2. dense tables of 15 and 150,000 keys (the last: the bias) take the same iterations and the
#      same bytes between the coordinator and the servers per iteration, but
#      for the value count each reply carries (a varint: at most 10 bytes a
#      reply more);
#   3. with a straggler (worker 1 waits 100 ms after each push) its portions
#      get backups (the backup's copy of each part the straggler pushed is
#      dropped by the server, not added twice); SIGKILLed while it holds its
#      second portion (pushed, not reported: maybe backed up already, after
#      30 ms) the portion is backed up too,
#      and the job ends within 1e-6 of run 1.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/cluster_lib.sh"
# shellcheck source=deploy/lib/lbfgs.sh
source "$root/deploy/lib/lbfgs.sh"
data=/usr/share/doc/liblinear-tools/examples/heart_scale
[ -s "$data" ] || fail "$data missing: deploy/setup.sh installs liblinear-tools"
l2=0.01

field() { sed -n "s/^RESULT lbfgs .*$2=\([^ ]*\).*/\1/p" "$1" | head -1; }
# rel A B: |A - B| / |B|
rel() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; if (b < 0) b = -b; print d / b }'; }
below() { awk -v v="$1" -v t="$2" 'BEGIN { exit !(v < t) }'; }

# run NAME [ps_lbfgs flags] [-- worker 1 flags]: the coordinator and two
# workers in the background (deploy/lib/lbfgs.sh); sets coord_pid and
# lbfgs_workers.
run() {
  local name=$1
  shift
  start_lbfgs "$root" "$dir" "$name" "$data" --l2=$l2 --portions=8 "$@"
}
finish() {
  local name=$1
  wait "$coord_pid" || fail "$name: the coordinator failed"
  grep -q "^RESULT lbfgs " "$dir/$name.log" || fail "$name: no RESULT line"
}

start_servers "$root" "$dir" 2
ref=$(/usr/bin/python3 "$root/deploy/lbfgs_reference.py" --data "$data" --l2 $l2 --bias |
  sed -n 's/^RESULT .*reference_loss=\([^ ]*\).*/\1/p')
[ -n "$ref" ] || fail "the SciPy reference gave no loss"

# 1. Sparse table against the reference.
run sparse --table=sparse_w
finish sparse
wait "${lbfgs_workers[@]}" || fail "sparse: a worker failed"
f_sparse=$(field "$dir/sparse.log" f)
below "$(rel "$f_sparse" "$ref")" 1e-4 || fail "sparse: f $f_sparse vs reference $ref"

# 2. Dense tables 10^4 times apart.
run small --table=dense_small --sparse=false --num_keys=15
finish small
wait "${lbfgs_workers[@]}" || fail "small: a worker failed"
run large --table=dense_large --sparse=false --num_keys=150000
finish large
wait "${lbfgs_workers[@]}" || fail "large: a worker failed"
for name in small large; do
  below "$(rel "$(field "$dir/$name.log" f)" "$ref")" 1e-4 || fail "$name: f vs reference $ref"
done
[ "$(field "$dir/large.log" values)" = 150000 ] || fail "the large table's ops ran over $(field "$dir/large.log" values) values"
[ "$(field "$dir/small.log" iterations)" = "$(field "$dir/large.log" iterations)" ] ||
  fail "iterations differ: $(field "$dir/small.log" iterations) vs $(field "$dir/large.log" iterations)"
bpi_small=$(field "$dir/small.log" bytes_per_iteration)
bpi_large=$(field "$dir/large.log" bytes_per_iteration)
calls=$(field "$dir/large.log" coordinator_calls)
iterations=$(field "$dir/large.log" iterations)
awk -v s="$bpi_small" -v l="$bpi_large" -v c="$calls" -v i="$iterations" \
  'BEGIN { d = l - s; if (d < 0) d = -d; exit !(d <= c / i * 2 * 10) }' ||
  fail "coordinator bytes per iteration: $bpi_small (15 keys) vs $bpi_large (150000 keys)"

# 3. A straggler, killed after it pushed a portion and before it reported it.
run straggle --table=straggle_w --backup_after_ms=30 -- --lbfgs_straggle_ms=100
# Its second portion: pushed, not reported, and (for 100 ms) not backed up.
second() { [ "$(grep -c straggling "$dir/straggle.worker1.log")" -ge 2 ]; }
poll_until 60 second || fail "straggle: worker 1 did not take two portions"
kill -KILL "${lbfgs_workers[1]}"
finish straggle
wait "${lbfgs_workers[0]}" || fail "straggle: worker 0 failed"
f_straggle=$(field "$dir/straggle.log" f)
below "$(rel "$f_straggle" "$f_sparse")" 1e-6 || fail "straggle: f $f_straggle vs $f_sparse undisturbed"
# Every iteration as in run 1 (a portion counted twice would move that
# iteration's step, and f, far more than 1e-6).
curve() { sed -n 's/^lbfgs iteration=\([0-9]*\) f=\([^ ]*\).*/\1 \2/p' "$1"; }
paste -d' ' <(curve "$dir/sparse.log") <(curve "$dir/straggle.log") |
  awk 'NF != 4 || $1 != $3 { bad = 1 } { d = $2 - $4; if (d < 0) d = -d; if (d > 1e-6 * $2) bad = 1 }
       END { exit bad }' ||
  fail "straggle: the iterations differ from run 1's: $(paste -d' ' <(curve "$dir/sparse.log") <(curve "$dir/straggle.log") | tr '\n' ';')"
backups=$(field "$dir/straggle.log" backups)
[ "$backups" -ge 2 ] || fail "straggle: $backups backups; want one for each of worker 1's portions"
stop_servers
echo "lbfgs_process_test: PASS: reference $ref, sparse $f_sparse, dense bytes/iteration $bpi_small vs $bpi_large, straggler killed -> $f_straggle with $backups backups"
