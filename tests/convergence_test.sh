#!/usr/bin/env bash
# Each consistency model still trains: 2 servers and 4 workers train the
# Fashion-MNIST MLP for 5 epochs with bsp, bounded (tau 2) and async, and
# the parameters left on the servers reach >= 85% test accuracy.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"

for mode in bsp bounded async; do
  start_servers "$root" "$dir" 2
  workers=()
  for w in 0 1 2 3; do
    "$worker_bin" --servers="$spec" --worker_index=$w --num_workers=4 --model=mlp --epochs=5 \
      --consistency=$mode --staleness=2 --progress_seconds=100 >"$dir/$mode.worker$w.log" 2>&1 &
    workers+=($!)
    all_pids+=($!)
  done
  for w in 0 1 2 3; do
    wait "${workers[$w]}" || { cat "$dir/$mode.worker$w.log"; fail "$mode: worker $w failed"; }
  done
  "$worker_bin" --servers="$spec" --model=mlp --eval_only >"$dir/$mode.eval.log" 2>&1 ||
    { cat "$dir/$mode.eval.log"; fail "$mode: evaluation failed"; }
  accuracy=$(sed -n 's/^RESULT test_accuracy=//p' "$dir/$mode.eval.log")
  grep "worker 0/4: done" "$dir/$mode.worker0.log"
  echo "$mode: test accuracy $accuracy"
  awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.85) }' || fail "$mode: test accuracy $accuracy < 0.85"
  stop_servers
done
echo "PASS"
