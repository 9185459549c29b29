#!/usr/bin/env bash
# paramserver.torch (torch_test.py) against real ps_server processes:
#   - the tests on a 2-server cluster: ShardedEmbeddingBag's rows and
#     gradients against local PyTorch, its clock, row cache and key lists;
#     ServerParameters' steps, and BSP with two workers; the Trainer's lines,
#     curve and bar;
#   - resume: a Trainer does 25 steps on a 1-server cluster that checkpoints,
#     asking for a checkpoint every 10 steps and at its end; the server is
#     stopped and restarted with --restore; the restored values are the
#     first run's, and a Trainer with resume continues at clock 25, step 26.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/cluster_lib.sh"
python=/usr/bin/python3
export PYTHONPATH="$root/python"
test_py="$root/python/tests/torch_test.py"

start_servers "$root" "$dir" 2
PS_SERVERS="$spec" "$python" "$test_py" || fail "torch_test.py failed"
stop_servers

export PS_SNAPSHOT="$dir/snapshot.npz"
start_servers "$root" "$dir" 1 --checkpoint_dir="$dir/checkpoints"
PS_SERVERS="$spec" timeout 120 "$python" "$test_py" resume_train >"$dir/train.log" 2>&1 ||
  fail "resume: the first run failed (124: timed out)"
# Step 20's is skipped when step 10's is still being taken (training does
# not wait for it: its cut may wait for this worker's rounds).
for step in 10 20 25; do
  grep -q -e "^worker 0/1: checkpoint .*/checkpoints/ckpt-[0-9]* asked at step $step: cut [0-9]*, [0-9]* bytes" \
    -e "^worker 0/1: checkpoint at step $step skipped: the one asked at step 10 is still being taken$" \
    "$dir/train.log" || fail "resume: no checkpoint line for step $step"
done
stop_servers
mv "$dir/server0.log" "$dir/server0_first.log"
start_servers "$root" "$dir" 1 --checkpoint_dir="$dir/checkpoints" --restore
PS_SERVERS="$spec" timeout 120 "$python" "$test_py" resume_continue >"$dir/resumed.log" 2>&1 ||
  fail "resume: the resumed run failed (124: timed out)"
grep -q "^worker 0/1: --resume: servers restored .*/checkpoints/ckpt-[0-9]* (cut [0-9]*); this worker continues at clock 25$" \
  "$dir/resumed.log" || fail "resume: the worker did not continue at clock 25 of a restored checkpoint"
grep -q "^worker 0/1 resumed at epoch 1 step 26 (clock 25)$" "$dir/resumed.log" ||
  fail "resume: the worker did not resume at epoch 1 step 26"
grep -q "^worker 0/1: done: 30 steps" "$dir/resumed.log" || fail "resume: the worker did not stop at step 30"
cat "$dir/train.log" "$dir/resumed.log" | grep -e "checkpoint" -e "resume" -e "restored values"
stop_servers
echo "PASS"
