#!/usr/bin/env bash
# Multi-process test: three real ps_server daemons and two ps_worker
# processes on loopback, ports chosen by the kernel. Checks that training
# through them works end to end, that misconfigured workers fail with a clear
# message, and that the servers stop cleanly on SIGTERM.
set -euo pipefail

# shellcheck source=tests/cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"

start_servers "$root" "$dir" 3
pids=("${server_pids[@]}")

# Two workers train softmax regression on 6000 Fashion-MNIST examples.
for w in 0 1; do
  "$worker_bin" --servers="$spec" --worker_index=$w --num_workers=2 --model=softmax \
    --epochs=2 --max_train_examples=6000 --progress_seconds=1 >"$dir/worker$w.log" 2>&1 &
  worker_pids[$w]=$!
done
for w in 0 1; do
  wait "${worker_pids[$w]}" || { cat "$dir/worker$w.log"; fail "worker $w exited non-zero"; }
  cat "$dir/worker$w.log"
  grep -q "worker $w/2: 3000 training examples" "$dir/worker$w.log" || fail "worker $w did not read its 3000-example shard"
  grep -q "worker $w/2 epoch 2 step" "$dir/worker$w.log" || fail "worker $w printed no progress for epoch 2"
done

"$worker_bin" --servers="$spec" --model=softmax --eval_only >"$dir/eval.log" 2>&1 || { cat "$dir/eval.log"; fail "eval failed"; }
accuracy=$(sed -n 's/^RESULT test_accuracy=//p' "$dir/eval.log")
echo "test accuracy of the final parameters: $accuracy"
awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.70) }' || fail "test accuracy $accuracy < 0.70"

# ps_admin status: each shard's tables, clocks and pulls, as the servers count them.
"$root/tools/ps_admin" status --servers="$spec" >"$dir/status.log" 2>&1 || { cat "$dir/status.log"; fail "ps_admin status failed"; }
cat "$dir/status.log"
grep -q "^3 shard(s), " "$dir/status.log" || fail "ps_admin status did not list 3 shards"
grep -Eq "^softmax/fc0/w +[1-3] +0 +[0-9]+ +[1-9][0-9]* " "$dir/status.log" || fail "ps_admin status shows no pulls of softmax/fc0/w"

# Any image size: a generated data set of 8x8 images in 4 classes (the bright
# quadrant is the class) trains through the same binaries, the model's shape
# taken from the data (64 inputs, 4 classes: 260 parameters).
octal() { printf '\\%03o' "$1"; }  # a byte as a printf escape
be32() { printf "$(octal $(($1 >> 24 & 255)))$(octal $(($1 >> 16 & 255)))$(octal $(($1 >> 8 & 255)))$(octal $(($1 & 255)))"; }
quadrant=()
for q in 0 1 2 3; do
  image=""
  for r in 0 1 2 3 4 5 6 7; do
    for c in 0 1 2 3 4 5 6 7; do
      if [ $(((r < 4 ? 0 : 2) + (c < 4 ? 0 : 1))) -eq $q ]; then image+='\377'; else image+='\040'; fi
    done
  done
  quadrant[$q]=$image
done
make_quadrant_set() {  # PREFIX N: PREFIX-images-idx3-ubyte.gz and PREFIX-labels-idx1-ubyte.gz
  local i
  { printf '\000\000\010\003'; be32 "$2"; be32 8; be32 8
    for ((i = 0; i < $2; i++)); do printf "${quadrant[i % 4]}"; done; } | gzip >"$1-images-idx3-ubyte.gz"
  { printf '\000\000\010\001'; be32 "$2"
    for ((i = 0; i < $2; i++)); do printf "$(octal $((i % 4)))"; done; } | gzip >"$1-labels-idx1-ubyte.gz"
}
mkdir -p "$dir/quadrants"
make_quadrant_set "$dir/quadrants/train" 400
make_quadrant_set "$dir/quadrants/t10k" 100
"$worker_bin" --servers="$spec" --data_dir="$dir/quadrants" --model=softmax --table_prefix=quadrants \
  --epochs=5 --progress_seconds=100 >"$dir/quadrants.log" 2>&1 || { cat "$dir/quadrants.log"; fail "8x8 worker failed"; }
cat "$dir/quadrants.log"
grep -q "400 training examples of 8x8 images in 4 classes, model softmax (260 parameters)" "$dir/quadrants.log" ||
  fail "the 8x8 worker did not size its model from the data"
accuracy=$(sed -n 's/^RESULT test_accuracy=//p' "$dir/quadrants.log")
awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.95) }' || fail "8x8 test accuracy $accuracy < 0.95"

# Model averaging on the same data: two workers, rounds of 5 local steps;
# the center (tables of its own prefix) is evaluated with the same
# --algorithm, and an evaluator without it is refused, naming both table
# definitions.
avg_flags=(--servers="$spec" --data_dir="$dir/quadrants" --model=softmax --table_prefix=averaged
  --algorithm=average --average_every=5)
for w in 0 1; do
  "$worker_bin" "${avg_flags[@]}" --worker_index=$w --num_workers=2 --epochs=10 --progress_seconds=100 \
    --evaluate=false >"$dir/avg$w.log" 2>&1 &
  avg_pids[$w]=$!
done
for w in 0 1; do
  wait "${avg_pids[$w]}" || { cat "$dir/avg$w.log"; fail "averaging worker $w failed"; }
done
grep -q "RESULT worker=0 .* algorithm=average pushes=" "$dir/avg0.log" || { cat "$dir/avg0.log"; fail "no averaging RESULT line"; }
"$worker_bin" "${avg_flags[@]}" --eval_only >"$dir/avg_eval.log" 2>&1 || { cat "$dir/avg_eval.log"; fail "evaluating the averaged center failed"; }
accuracy=$(sed -n 's/^RESULT test_accuracy=//p' "$dir/avg_eval.log")
awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.9) }' || fail "averaged 8x8 test accuracy $accuracy < 0.9"
if "$worker_bin" --servers="$spec" --data_dir="$dir/quadrants" --model=softmax --table_prefix=averaged \
  --eval_only >"$dir/avg_eval_bad.log" 2>&1; then
  fail "an evaluator without --algorithm=average read the center's tables"
fi
grep -q "already exists with a different definition" "$dir/avg_eval_bad.log" || { cat "$dir/avg_eval_bad.log"; fail "no clear refusal of the mismatched tables"; }
if "$worker_bin" "${avg_flags[@]}" --algorithm=sgd >"$dir/bad_algo.log" 2>&1; then fail "--algorithm=sgd accepted"; fi
grep -q -- "--algorithm=sgd: expected downpour, average or easgd" "$dir/bad_algo.log" || { cat "$dir/bad_algo.log"; fail "bad --algorithm not named"; }

# Hierarchical aggregation: 4 workers as 2 processes of 2 threads, BSP.
# Each process pushes its threads' sum and pulls once a round, so its
# aggregator moves half of what its two workers report (each as a flat
# worker would), and the model still trains.
hier_flags=(--servers="$spec" --data_dir="$dir/quadrants" --model=softmax --table_prefix=hier
  --consistency=bsp --local_workers=2 --local_aggregation)
for p in 0 1; do
  "$worker_bin" "${hier_flags[@]}" --worker_index=$p --num_workers=2 --epochs=5 --progress_seconds=100 \
    >"$dir/hier$p.log" 2>&1 &
  hier_pids[$p]=$!
done
for p in 0 1; do
  wait "${hier_pids[$p]}" || { cat "$dir/hier$p.log"; fail "hierarchical process $p failed"; }
done
for p in 0 1; do
  workers=$(sed -n 's/^RESULT worker=.*value_bytes_pushed=\([0-9]*\) value_bytes_pulled=\([0-9]*\).*/\1 \2/p' "$dir/hier$p.log" |
            awk '{ s += $1 + $2; n++ } END { if (n == 2) printf "%.0f", s }')
  host=$(sed -n 's/^RESULT host=.*value_bytes_pushed=\([0-9]*\) value_bytes_pulled=\([0-9]*\)/\1 \2/p' "$dir/hier$p.log" |
         awk '{ printf "%.0f", $1 + $2 }')
  if [ -z "$workers" ] || [ -z "$host" ]; then
    cat "$dir/hier$p.log"
    fail "process $p: no RESULT lines of its 2 workers and its host"
  fi
  [ "$((2 * host))" = "$workers" ] || fail "process $p: its aggregator moved $host bytes, not half of its workers' $workers"
done
accuracy=$(sed -n 's/^RESULT test_accuracy=//p' "$dir/hier0.log")
awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.9) }' || fail "hierarchical 8x8 test accuracy $accuracy < 0.9"
# With the servers' reduction (--bsp_reduce) the same 4 workers, flat and
# as 2 x 2, train the same parameters: every worker's losses and the test
# accuracy agree (tests/local_aggregation_test compares the values bit by bit).
for layout in flat hier; do
  procs=4 local=()
  [ "$layout" = hier ] && procs=2 local=(--local_workers=2 --local_aggregation)
  for ((p = 0; p < procs; p++)); do
    "$worker_bin" --servers="$spec" --data_dir="$dir/quadrants" --model=softmax --table_prefix="reduce_$layout" \
      --consistency=bsp --bsp_reduce --epochs=3 --progress_seconds=100 --worker_index=$p --num_workers=$procs \
      "${local[@]}" >"$dir/reduce_$layout$p.log" 2>&1 &
    reduce_pids[p]=$!
  done
  for ((p = 0; p < procs; p++)); do
    wait "${reduce_pids[$p]}" || { cat "$dir/reduce_$layout$p.log"; fail "--bsp_reduce $layout process $p failed"; }
  done
  cat "$dir"/reduce_"$layout"?.log | sed -n 's/^\(worker [0-9]\/4\): done: .* last-epoch loss \([0-9.]*\),.*/\1 \2/p' |
    sort >"$dir/reduce_$layout.losses"
  sed -n 's/^RESULT test_accuracy=//p' "$dir/reduce_${layout}0.log" >>"$dir/reduce_$layout.losses"
done
[ "$(wc -l <"$dir/reduce_flat.losses")" = 5 ] || { cat "$dir/reduce_flat.losses"; fail "--bsp_reduce: not 4 workers' losses and an accuracy"; }
diff "$dir/reduce_flat.losses" "$dir/reduce_hier.losses" ||
  fail "--bsp_reduce: the flat and the 2 x 2 runs differ"

if "$worker_bin" --servers="$spec" --model=sparse_lr --train_data=x --test_data=x --local_aggregation \
  >"$dir/hier_sparse.log" 2>&1; then
  fail "--local_aggregation with a sparse model accepted"
fi
grep -q -- "--local_workers and --local_aggregation are for the dense models" "$dir/hier_sparse.log" ||
  { cat "$dir/hier_sparse.log"; fail "--local_aggregation with a sparse model not refused clearly"; }

# LARS: SGD with LARS on the weight tables trains; with AdaGrad it is
# refused, naming the rule.
"$worker_bin" --servers="$spec" --data_dir="$dir/quadrants" --model=softmax --table_prefix=lars \
  --optimizer=sgd --learning_rate=1 --lars_eta=0.05 --epochs=5 --progress_seconds=100 \
  >"$dir/lars.log" 2>&1 || { cat "$dir/lars.log"; fail "LARS worker failed"; }
accuracy=$(sed -n 's/^RESULT test_accuracy=//p' "$dir/lars.log")
awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.9) }' || fail "LARS 8x8 test accuracy $accuracy < 0.9"
if "$worker_bin" --servers="$spec" --data_dir="$dir/quadrants" --model=softmax --table_prefix=lars2 \
  --optimizer=adagrad --lars_eta=0.05 >"$dir/lars_bad.log" 2>&1; then
  fail "LARS with AdaGrad accepted"
fi
grep -q "LARS (lars_eta) needs OPT_SGD, OPT_MOMENTUM or OPT_NESTEROV, not OPT_ADAGRAD" "$dir/lars_bad.log" ||
  { cat "$dir/lars_bad.log"; fail "LARS with AdaGrad not refused clearly"; }

# Sparse logistic regression on LibSVM files written by ps_gen_libsvm (a
# test set from the same planted model), FTRL on a sparse table, two
# workers; then a malformed training file is named with its line and column.
gen_bin="$root/worker/ps_gen_libsvm"
"$gen_bin" --out="$dir/train.svm" --examples=40000 --features=3000 --features_per_example=8 \
  --weight_stddev=1 --bias=-0.5 --progress_seconds=0 >"$dir/gen.log" 2>&1 || { cat "$dir/gen.log"; fail "ps_gen_libsvm failed"; }
"$gen_bin" --out="$dir/test.svm.gz" --examples=5000 --first_example=40000 --features=3000 \
  --features_per_example=8 --weight_stddev=1 --bias=-0.5 --progress_seconds=0 >"$dir/gen_test.log" 2>&1 ||
  { cat "$dir/gen_test.log"; fail "ps_gen_libsvm failed on the test set"; }
planted=$(sed -n 's/^planted_auc=//p' "$dir/test.svm.gz.planted.txt")
sparse_flags=(--servers="$spec" --num_workers=2 --model=sparse_lr --train_data="$dir/train.svm"
  --test_data="$dir/test.svm.gz" --optimizer=ftrl --learning_rate=0.5 --l1=0.1 --l2=1
  --batch_size=64 --epochs=2 --progress_seconds=100)
for w in 0 1; do
  "$worker_bin" "${sparse_flags[@]}" --worker_index=$w >"$dir/sparse$w.log" 2>&1 &
  sparse_pids[$w]=$!
done
for w in 0 1; do
  wait "${sparse_pids[$w]}" || { cat "$dir/sparse$w.log"; fail "sparse_lr worker $w failed"; }
done
auc=$(sed -n 's/^test auc \([0-9.]*\) accuracy.*/\1/p' "$dir/sparse0.log")
echo "sparse_lr: test auc $auc, planted model's $planted"
awk -v a="$auc" -v p="$planted" 'BEGIN { exit !(a >= p - 0.03) }' ||
  fail "sparse_lr test auc $auc is not within 0.03 of the planted model's $planted"
# The same by EASGD, the sparse table holding the center: it learns (AUC
# well above chance), and the row cache, Downpour's, is refused with it.
"$worker_bin" "${sparse_flags[@]}" --worker_index=0 --num_workers=1 --table_prefix=easgd \
  --algorithm=easgd --average_every=10 --easgd_alpha=0.5 --optimizer=adagrad --learning_rate=0.1 \
  >"$dir/sparse_easgd.log" 2>&1 || { cat "$dir/sparse_easgd.log"; fail "sparse_lr by EASGD failed"; }
auc=$(sed -n 's/^test auc \([0-9.]*\) accuracy.*/\1/p' "$dir/sparse_easgd.log")
echo "sparse_lr by EASGD: test auc $auc"
awk -v a="$auc" 'BEGIN { exit !(a >= 0.7) }' || fail "sparse_lr by EASGD: test auc $auc < 0.7"
if "$worker_bin" "${sparse_flags[@]}" --worker_index=0 --algorithm=average --row_cache_staleness=2 \
  >"$dir/avg_cache.log" 2>&1; then
  fail "--algorithm=average with the row cache was accepted"
fi
grep -q -- "--row_cache_staleness and --push_threshold are Downpour's" "$dir/avg_cache.log" || { cat "$dir/avg_cache.log"; fail "the row cache's refusal is not named"; }
printf '1 3:1 7:1\n0 5:abc\n' >"$dir/bad.svm"
if "$worker_bin" "${sparse_flags[@]}" --worker_index=0 --num_workers=1 --train_data="$dir/bad.svm" \
  >"$dir/bad_svm.log" 2>&1; then
  fail "a malformed LibSVM file was accepted"
fi
grep -q "bad.svm:2:5: expected index:value with a finite number as value, got '5:abc'" "$dir/bad_svm.log" || { cat "$dir/bad_svm.log"; fail "no file:line:column for a malformed LibSVM line"; }

# A model far over the servers' memory budget (a 784 x 20,000,000 first
# layer) is refused at CreateTable, naming the table and the bytes; the
# servers allocate nothing and keep answering.
if "$worker_bin" --servers="$spec" --model=mlp --hidden=20000000 --table_prefix=huge \
  --epochs=1 >"$dir/huge.log" 2>&1; then
  cat "$dir/huge.log"; fail "a 15.7G-parameter model was accepted"
fi
cat "$dir/huge.log"
grep -q "table 'huge/fc0/w' needs [0-9]* bytes on server" "$dir/huge.log" || fail "no clear memory-budget refusal"
grep -q -- "--memory_budget_mb" "$dir/huge.log" || fail "the refusal does not name the flag"
for i in 0 1 2; do
  rss_kb=$(awk '/^VmRSS/ { print $2 }' "/proc/${pids[$i]}/status")
  echo "server $i resident: ${rss_kb} kB"
  [ "$rss_kb" -lt 1048576 ] || fail "server $i holds ${rss_kb} kB after refusing the huge model"
done
"$worker_bin" --servers="$spec" --model=softmax --eval_only >"$dir/eval2.log" 2>&1 || { cat "$dir/eval2.log"; fail "servers stopped answering after the refusal"; }

# Two live processes claiming the same worker id: the second is refused,
# naming the first; once the first is dead and its lease has expired on
# every server, a restarted worker with that id is accepted.
"$worker_bin" --servers="$spec" --worker_index=1 --num_workers=2 --model=softmax --table_prefix=twin \
  --epochs=1000 --max_train_examples=2000 --lease_seconds=1 --progress_seconds=100 >"$dir/first.log" 2>&1 &
first=$!
all_pids+=("$first")
wait_for_line "$dir/first.log" "training examples" 30 || fail "the first worker 1 did not start training"
if "$worker_bin" --servers="$spec" --worker_index=1 --num_workers=2 --model=softmax --table_prefix=twin \
  --epochs=1 --max_train_examples=2000 >"$dir/second.log" 2>&1; then
  fail "a second process with worker id 1 was accepted"
fi
cat "$dir/second.log"
grep -q "worker id 1 is already held by another live process" "$dir/second.log" || fail "no clear message for a duplicate worker id"
grep -q -- "--worker_index" "$dir/second.log" || fail "the duplicate-id message does not name --worker_index"
kill -KILL "$first"
wait "$first" 2>/dev/null || true
for i in 0 1 2; do
  wait_for_line "$dir/server$i.log" "worker 1 lease expired" 30 || fail "server $i logged no expiry of worker 1's lease"
done
"$worker_bin" --servers="$spec" --worker_index=1 --num_workers=2 --model=softmax --table_prefix=twin \
  --epochs=1 --max_train_examples=2000 >"$dir/restarted.log" 2>&1 || { cat "$dir/restarted.log"; fail "a restarted worker 1 was refused after its lease expired"; }

# Every server holds part of the model and logged the tables it created.
for i in 0 1 2; do
  grep -q "table created: 'softmax/fc0/w'" "$dir/server$i.log" || fail "server $i did not log table creation"
done

# A worker whose spec lists the servers in another order is refused.
swapped="127.0.0.1:$(cat "$dir/server1.port"),127.0.0.1:$(cat "$dir/server0.port"),127.0.0.1:$(cat "$dir/server2.port")"
if "$worker_bin" --servers="$swapped" --model=softmax --eval_only >"$dir/bad.log" 2>&1; then
  fail "worker with a reordered --servers succeeded"
fi
grep -q "reports shard 1 of 3" "$dir/bad.log" || { cat "$dir/bad.log"; fail "no clear message for a reordered spec"; }

# A missing data directory is named.
if "$worker_bin" --servers="$spec" --data_dir="$dir/nowhere" >"$dir/nodata.log" 2>&1; then
  fail "worker without data succeeded"
fi
grep -q "$dir/nowhere/t10k-images-idx3-ubyte.gz" "$dir/nodata.log" || { cat "$dir/nodata.log"; fail "missing file not named"; }

# Bad server flags are named.
if "$server_bin" --servers=127.0.0.1:1 --index=4 2>"$dir/badflag.log"; then fail "bad --index accepted"; fi
grep -q -- "--index=4" "$dir/badflag.log" || fail "bad --index not named"

# SIGTERM stops each server cleanly.
for i in 0 1 2; do kill -TERM "${pids[$i]}"; done
for i in 0 1 2; do
  wait "${pids[$i]}" || fail "server $i exited non-zero after SIGTERM"
  grep -q "received SIGTERM" "$dir/server$i.log" || fail "server $i did not log SIGTERM"
  grep -q "shut down" "$dir/server$i.log" || fail "server $i did not log its shutdown"
done
pids=()
echo "PASS"
