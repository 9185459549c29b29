#!/usr/bin/env bash
# python/examples/torch_mnist.py against real servers: 2 ps_server processes
# and 2 PyTorch workers on a bounded subset of Fashion-MNIST.
#   - async, 1 epoch of the first 12,000 training examples: both workers exit
#     0 and reach a test accuracy an untrained model cannot (> 0.6; chance is
#     0.1); their progress lines are ps_worker's (staleness included); their
#     curve CSVs have ps_worker's columns and end with the result;
#   - bsp, 20 steps each on other tables: both finish every step (the servers
#     hold each pull back until both workers pushed the step before);
#   - --resume: a worker of 1 does 30 steps against a server that checkpoints,
#     asking for one every 10 steps (--checkpoint_every_steps); the server is
#     stopped (its stop writes a checkpoint) and restarted with --restore; a
#     worker with --resume continues at clock 30, step 31, up to step 35;
#   - a worker index outside [0, num_workers) exits 2 naming the flag.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/cluster_lib.sh"
python=/usr/bin/python3
export PYTHONPATH="$root/python"
example="$root/python/examples/torch_mnist.py"

# run_workers NAME FLAGS...: workers 0 and 1 with FLAGS, each bounded in
# time; logs in $dir/NAME<w>.log, curves in $dir/NAME<w>.csv.
run_workers() {
  local name=$1 w
  shift
  local worker_pids=()
  for w in 0 1; do
    timeout 120 "$python" "$example" --servers="$spec" --worker_index=$w --num_workers=2 \
      --progress_seconds=100 --curve_csv="$dir/$name$w.csv" "$@" >"$dir/$name$w.log" 2>&1 &
    worker_pids+=($!)
    all_pids+=($!)
  done
  for w in 0 1; do
    wait "${worker_pids[$w]}" || fail "$name: worker $w exited non-zero (124: timed out)"
  done
}

start_servers "$root" "$dir" 2

run_workers async --epochs=1 --max_train_examples=12000
for w in 0 1; do
  accuracy=$(sed -n 's/^RESULT test_accuracy=//p' "$dir/async$w.log")
  [ -n "$accuracy" ] || fail "async: worker $w printed no RESULT test_accuracy line"
  awk -v a="$accuracy" 'BEGIN { exit !(a > 0.6) }' ||
    fail "async: worker $w reached test accuracy $accuracy, not > 0.6"
  grep -q "^worker $w/2: test accuracy $accuracy (10000 test examples)$" "$dir/async$w.log" ||
    fail "async: worker $w's accuracy line is not ps_worker's 'worker i/n: test accuracy X (N test examples)'"
  grep -Eq "^worker $w/2 epoch 1 step [0-9]+ loss [0-9.]+ examples/s [0-9]+ staleness mean [0-9.]+ max [0-9]+ clock lag max [0-9]+ waited [0-9.]+s of [0-9.]+s \(epoch end\)$" \
    "$dir/async$w.log" || fail "async: worker $w printed no ps_worker progress line with its staleness"
  grep -Eq "^worker $w/2: done: [0-9]+ steps, [0-9]+ examples in [0-9.]+s \([0-9]+ examples/s\), last-epoch loss [0-9.]+, staleness mean [0-9.]+ max [0-9]+," \
    "$dir/async$w.log" || fail "async: worker $w's done line is not ps_worker's"
  head -n 1 "$dir/async$w.csv" |
    grep -qx 'seconds,epoch,step,examples,loss,examples_per_second,staleness,test_metric,test_value' ||
    fail "async: curve $w's header is not ps_worker --curve_csv's"
  tail -n 1 "$dir/async$w.csv" | grep -q ",accuracy,$accuracy$" ||
    fail "async: curve $w does not end with the test accuracy $accuracy"
  echo "async worker $w: test accuracy $accuracy"
done

run_workers bsp --consistency=bsp --max_steps=20 --table_prefix=torch_bsp
for w in 0 1; do
  grep -q "^worker $w/2: done: 20 steps" "$dir/bsp$w.log" || fail "bsp: worker $w did not do its 20 steps"
done
echo "bsp: both workers did 20 steps"

stop_servers
start_servers "$root" "$dir" 1 --checkpoint_dir="$dir/checkpoints"
timeout 120 "$python" "$example" --servers="$spec" --max_steps=30 --max_train_examples=12000 \
  --table_prefix=torch_resume --progress_seconds=100 --checkpoint_every_steps=10 >"$dir/before.log" 2>&1 ||
  fail "resume: the first run exited non-zero (124: timed out)"
grep -q -e "^worker 0/1: checkpoint .*/checkpoints/ckpt-[0-9]* asked at step 20: cut" \
  -e "^worker 0/1: checkpoint at step 20 skipped: the one asked at step 10 is still being taken$" \
  "$dir/before.log" || fail "resume: worker 0 neither asked for a checkpoint at step 20 nor skipped it"
stop_servers
mv "$dir/server0.log" "$dir/server0_first.log"
start_servers "$root" "$dir" 1 --checkpoint_dir="$dir/checkpoints" --restore
timeout 120 "$python" "$example" --servers="$spec" --max_steps=35 --max_train_examples=12000 \
  --table_prefix=torch_resume --progress_seconds=100 --resume >"$dir/resumed.log" 2>&1 ||
  fail "resume: the resumed run exited non-zero (124: timed out)"
grep -q "^worker 0/1: --resume: servers restored .*/checkpoints/ckpt-[0-9]* (cut [0-9]*); this worker continues at clock 30$" \
  "$dir/resumed.log" || fail "resume: the worker did not continue at clock 30 of a restored checkpoint"
grep -q "^worker 0/1 resumed at epoch 1 step 31 (clock 30)$" "$dir/resumed.log" ||
  fail "resume: the worker did not resume at epoch 1 step 31"
grep -q "^worker 0/1: done: 35 steps, 160 examples" "$dir/resumed.log" ||
  fail "resume: the worker did not do 5 more steps, up to step 35"
echo "resume: $(grep -- '--resume:' "$dir/resumed.log")"
stop_servers

if "$python" "$example" --servers="$spec" --worker_index=2 --num_workers=2 >"$dir/bad_flags.log" 2>&1; then
  fail "--worker_index=2 --num_workers=2 was accepted"
else
  status=$?
  [ "$status" = 2 ] || fail "--worker_index=2 --num_workers=2 exited $status, not 2 (a usage error)"
  grep -q -- "--worker_index=2: must be in \[0, 2)" "$dir/bad_flags.log" ||
    fail "--worker_index=2's error does not name the flag and its range"
fi

echo "PASS"
