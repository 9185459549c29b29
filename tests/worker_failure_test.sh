#!/usr/bin/env bash
# A worker killed (SIGKILL) in the middle of a BSP job must not hang the
# others: once its lease expires the servers drop it from the clock minimum
# (and log it once), and the surviving workers finish. Completion is
# asserted, not a duration.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"

start_servers "$root" "$dir" 2
common=(--servers="$spec" --num_workers=3 --model=mlp --hidden=64 --consistency=bsp
        --lease_seconds=1 --epochs=1 --max_train_examples=12000 --progress_seconds=0.2)
survivors=()
for w in 0 1; do
  "$worker_bin" "${common[@]}" --worker_index=$w >"$dir/worker$w.log" 2>&1 &
  survivors+=($!)
  all_pids+=($!)
done
# The victim is slow (BSP paces everyone to it), so that it is still
# running when it is killed.
"$worker_bin" "${common[@]}" --worker_index=2 --slowdown=20 >"$dir/worker2.log" 2>&1 &
victim=$!
all_pids+=("$victim")

# Kill it once it has trained a little (it prints progress every 0.2 s).
if ! wait_for_line "$dir/worker2.log" "worker 2/3 epoch 1 step" 30 "$victim"; then
  kill -0 "$victim" 2>/dev/null || { cat "$dir/worker2.log"; fail "the victim exited early"; }
  fail "the victim never trained"
fi
kill -KILL "$victim"
wait "$victim" 2>/dev/null || true
echo "killed worker 2: $(tail -1 "$dir/worker2.log")"

grep -q "worker 2/3: done" "$dir/worker2.log" && fail "the victim finished before it was killed"
for w in 0 1; do
  wait "${survivors[$w]}" || { cat "$dir/worker$w.log"; fail "worker $w did not finish after worker 2 died"; }
  grep -q "worker $w/3: done" "$dir/worker$w.log" || fail "worker $w printed no summary"
  tail -3 "$dir/worker$w.log"
done
for i in 0 1; do
  grep -q "worker 2 lease expired" "$dir/server$i.log" ||
    { cat "$dir/server$i.log" "$dir"/worker*.log; fail "server $i did not log the expiry"; }
  [ "$(grep -c "worker 2 lease expired" "$dir/server$i.log")" = 1 ] || fail "server $i logged the expiry more than once"
done
stop_servers
echo "PASS"
