#!/usr/bin/env bash
# Training with MPI beside the parameter servers (issue 30), as processes:
# two ps_server and ps_worker jobs under mpirun (Open MPI, loopback only).
#   1. Model partitions (--model=mlp --model_partitions=K, BSP, Fashion-MNIST
#      784-64-32-10, 300 steps): K = 2 with one replica ends at the whole
#      model's last-epoch loss (a single ps_worker) within 1e-3 relative and
#      at its test accuracy within 0.005, each partition holding half of the
#      parameters; two replicas of K = 2 (4 processes) train together.
#   2. --max_worker_memory_mb: a 784-1024-1024-10 MLP (14.2 MiB of values and
#      gradients) is refused at K = 1 under a 6 MiB limit, naming the flag,
#      and trains at K = 4 (3.6 MiB a process).
#   3. --dense_sync=allreduce (embedding_mlp on generated LibSVM data, two
#      ranks with shares one example apart): every rank checks every 10
#      rounds that all hold the same bits; both take part in every round;
#      rank 0's tables on the servers give the AUC it reports to a separate
#      --eval_only run. The embedding MLP in two partitions trains, partition
#      0 alone reading and writing the embedding rows.
#   4. A partition SIGKILLed mid-training: mpirun ends the job, non-zero,
#      naming the killed rank, within the time limit (no hang).
#   5. A checkpoint of the servers holds rank 0's allreduced tables: restored
#      onto 3 servers they give the AUC rank 0 reported.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/cluster_lib.sh"
command -v mpirun >/dev/null || fail "mpirun missing: deploy/setup.sh installs openmpi-bin"
gen_bin="$root/worker/ps_gen_libsvm"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi() { local n=$1; shift; timeout 300 mpirun --oversubscribe -np "$n" "$@"; }

# field FILE NAME [FILTER]: NAME=value of the first RESULT line (matching FILTER).
field() { grep "^RESULT ${3:-}" "$1" | sed -n "s/.* $2=\([^ ]*\).*/\1/p;s/^RESULT $2=\([^ ]*\).*/\1/p" | head -1; }
# rel A B: |A - B| / |B|
rel() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; if (b < 0) b = -b; print d / b }'; }
below() { awk -v v="$1" -v t="$2" 'BEGIN { exit !(v < t) }'; }
# loss FILE FILTER: the last-epoch loss of the "done:" line matching FILTER.
loss() { grep "$2.*: done:" "$1" | sed -n 's/.*last-epoch loss \([0-9.]*\).*/\1/p' | head -1; }

# The servers checkpoint into $ck when asked (ps_admin checkpoint); they
# find each other through $dir/spec.
ck="$dir/ck"
start_servers "$root" "$dir" 2 --checkpoint_dir="$ck" --servers_file="$dir/spec" \
  --checkpoint_on_exit=false
echo "$spec" >"$dir/spec"
mlp=(--servers="$spec" --model=mlp --hidden="64,32" --consistency=bsp --epochs=1
  --max_train_examples=9600 --progress_seconds=100)

# ---- 1. partitions against the whole model --------------------------------
"$worker_bin" "${mlp[@]}" --table_prefix=whole >"$dir/whole.log" 2>&1 || fail "the whole model's run failed"
mpi 2 "$worker_bin" "${mlp[@]}" --table_prefix=split --model_partitions=2 >"$dir/split.log" 2>&1 ||
  fail "K = 2 under mpirun failed"
whole_loss=$(loss "$dir/whole.log" "worker 0/1")
split_loss=$(loss "$dir/split.log" "partition 0/2")
if [ -z "$whole_loss" ] || [ -z "$split_loss" ]; then fail "no loss lines"; fi
below "$(rel "$split_loss" "$whole_loss")" 1e-3 || fail "K = 2 loss $split_loss, whole model $whole_loss"
whole_acc=$(field "$dir/whole.log" test_accuracy)
split_acc=$(field "$dir/split.log" test_accuracy)
below "$(awk -v a="$whole_acc" -v b="$split_acc" 'BEGIN { d = a - b; print d < 0 ? -d : d }')" 0.005 ||
  fail "K = 2 test accuracy $split_acc, whole model $whole_acc"
below 0.6 "$split_acc" || fail "K = 2 test accuracy $split_acc is too low"
for p in 0 1; do
  held=$(field "$dir/split.log" params_held "worker=0 partition=$p ")
  total=$(field "$dir/split.log" params_total "worker=0 partition=$p ")
  pulled=$(field "$dir/split.log" value_bytes_pulled "worker=0 partition=$p ")
  steps=$(field "$dir/split.log" steps "worker=0 partition=$p ")
  [ "$steps" = 300 ] || fail "partition $p took $steps steps, not 300"
  # 784-64-32-10 has 52,650: each partition holds half of every layer.
  if [ "$held" != 26325 ] || [ "$total" != 52650 ]; then
    fail "partition $p holds $held of $total parameters"
  fi
  [ "$pulled" = $((held * 4 * 300)) ] || fail "partition $p pulled $pulled bytes, not its share"
done
echo "partitions: K = 2 loss $split_loss accuracy $split_acc; whole model loss $whole_loss accuracy $whole_acc"
mpi 4 "$worker_bin" "${mlp[@]}" --table_prefix=two --model_partitions=2 >"$dir/two.log" 2>&1 ||
  fail "two replicas of K = 2 failed"
[ "$(grep -c '^RESULT worker=[01] partition=[01] ' "$dir/two.log")" = 4 ] ||
  fail "two replicas: not every partition reported"
two_acc=$(field "$dir/two.log" test_accuracy)
below 0.6 "$two_acc" || fail "two replicas of K = 2: test accuracy $two_acc"

# ---- 2. the memory limit ---------------------------------------------------
big=(--servers="$spec" --model=mlp --hidden="1024,1024" --table_prefix=big --epochs=1
  --max_train_examples=640 --max_worker_memory_mb=6 --progress_seconds=100)
if "$worker_bin" "${big[@]}" >"$dir/big1.log" 2>&1; then fail "K = 1 trained over the memory limit"; fi
grep -q "max_worker_memory_mb=6: this process would hold 14.2 MiB" "$dir/big1.log" ||
  fail "K = 1's refusal does not name the limit and the size"
mpi 4 "$worker_bin" "${big[@]}" --model_partitions=4 >"$dir/big4.log" 2>&1 || fail "K = 4 failed"
grep -q "^RESULT test_accuracy=" "$dir/big4.log" || fail "K = 4 reported no accuracy"

# ---- 3. dense tables by allreduce ------------------------------------------
gen=(--features=5000 --num_fields=4 --seed=3 --progress_seconds=0)
"$gen_bin" --out="$dir/train.svm" --examples=20001 "${gen[@]}" >/dev/null
"$gen_bin" --out="$dir/test.svm" --examples=5000 --first_example=20001 "${gen[@]}" >/dev/null
emb=(--servers="$spec" --model=embedding_mlp --num_fields=4 --train_data="$dir/train.svm"
  --test_data="$dir/test.svm" --dense_sync=allreduce --epochs=1 --progress_seconds=100)
mpi 2 "$worker_bin" "${emb[@]}" --allreduce_check_every=10 --allreduce_publish_every=50 \
  >"$dir/hybrid.log" 2>&1 || fail "--dense_sync=allreduce under mpirun failed"
# 10,001 and 10,000 examples in batches of 32: 313 and 313 steps; both ranks in every round.
r0=$(field "$dir/hybrid.log" allreduce_rounds "worker=0 ")
r1=$(field "$dir/hybrid.log" allreduce_rounds "worker=1 ")
if [ -z "$r0" ] || [ "$r0" != "$r1" ] || [ "$r0" -lt 313 ]; then
  fail "allreduce rounds: rank 0 $r0, rank 1 $r1"
fi
auc=$(field "$dir/hybrid.log" test_auc)
below 0.7 "$auc" || fail "hybrid test AUC $auc"
"$worker_bin" "${emb[@]}" --eval_only >"$dir/eval.log" 2>&1 || fail "--eval_only failed"
[ "$(field "$dir/eval.log" test_auc)" = "$auc" ] ||
  fail "the servers' tables give AUC $(field "$dir/eval.log" test_auc), rank 0 reported $auc"
echo "allreduce: $r0 rounds on both ranks, test AUC $auc (rank 0 and --eval_only)"
# The embedding MLP split in two partitions: partition 0 alone reads the rows.
parts=(--servers="$spec" --model=embedding_mlp --num_fields=4 --train_data="$dir/train.svm"
  --test_data="$dir/test.svm" --model_partitions=2 --table_prefix=parts --epochs=1 --progress_seconds=100)
mpi 2 "$worker_bin" "${parts[@]}" >"$dir/emb_parts.log" 2>&1 || fail "embedding_mlp K = 2 failed"
[ "$(field "$dir/emb_parts.log" keys "worker=0 partition=1 ")" = 0 ] || fail "partition 1 read rows"
below 0 "$(field "$dir/emb_parts.log" keys "worker=0 partition=0 ")" || fail "partition 0 read no rows"
parts_auc=$(field "$dir/emb_parts.log" test_auc)
below 0.7 "$parts_auc" || fail "embedding_mlp K = 2: test AUC $parts_auc"

# ---- 4. a partition killed mid-training ------------------------------------
mpirun --oversubscribe -np 2 "$worker_bin" "${mlp[@]}" --table_prefix=killed --model_partitions=2 \
  --epochs=100 --max_train_examples=60000 --progress_seconds=0.2 >"$dir/killed.log" 2>&1 &
job=$!
all_pids+=("$job")
wait_for_line "$dir/killed.log" "partition 1/2: epoch 1 step" 60 "$job" || fail "the job to kill did not start"
victim=""
for p in $(pgrep -P "$job" -f ps_worker); do
  if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then victim=$p; fi
done
[ -n "$victim" ] || fail "rank 1's process not found among mpirun's children"
kill -KILL "$victim"
gone() { ! kill -0 "$1" 2>/dev/null; }
poll_until 60 gone "$job" || fail "mpirun still runs 60 s after rank 1 was killed"
status=0
wait "$job" || status=$?
[ "$status" -ne 0 ] || fail "mpirun succeeded though rank 1 was killed"
grep -qi "rank 1 .*signal 9\|signal 9 (Killed)" "$dir/killed.log" || fail "mpirun does not say rank 1 was killed"
echo "killed partition: mpirun ended with status $status"

# ---- 5. the allreduced tables in a checkpoint --------------------------------
# Rank 0's tables (values and optimizer state) are on the servers: a
# checkpoint holds them, and restored onto 3 servers they give its AUC.
"$root/tools/ps_admin" checkpoint --servers="$spec" >"$dir/checkpoint.log" 2>&1 ||
  fail "ps_admin checkpoint failed"
for p in "${server_pids[@]}"; do kill -KILL "$p"; done
for p in "${server_pids[@]}"; do wait "$p" 2>/dev/null || true; done
rm -f "$dir/spec"
start_servers "$root" "$dir" 3 --checkpoint_dir="$ck" --servers_file="$dir/spec" --restore \
  --checkpoint_on_exit=false
echo "$spec" >"$dir/spec"
"$worker_bin" "${emb[@]/--servers=*/--servers=$spec}" --eval_only >"$dir/restored.log" 2>&1 ||
  fail "--eval_only on the restored servers failed"
[ "$(field "$dir/restored.log" test_auc)" = "$auc" ] ||
  fail "restored onto 3 servers: AUC $(field "$dir/restored.log" test_auc), rank 0 reported $auc"
echo "checkpoint: restored onto 3 servers, AUC $auc"
echo "mpi_training_test: PASS"
