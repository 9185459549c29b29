#!/usr/bin/env bash
# python/examples/torch_embedding.py against real servers: LibSVM data from
# ps_gen_libsvm (a planted logistic model; the test set is the examples after
# the training set's), 2 ps_server processes and 2 PyTorch workers, 1 epoch.
# Both workers exit 0 and reach a test AUC clearly above chance (> 0.75; the
# planted model scores 0.90 on this data, chance 0.5).
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/cluster_lib.sh"
python=/usr/bin/python3
export PYTHONPATH="$root/python"
example="$root/python/examples/torch_embedding.py"
gen_bin="$root/worker/ps_gen_libsvm"

gen_flags=(--features=3000 --features_per_example=8 --weight_stddev=1 --bias=-0.5 --progress_seconds=0)
"$gen_bin" --out="$dir/train.svm" --examples=40000 "${gen_flags[@]}" >"$dir/gen.log" 2>&1 ||
  fail "ps_gen_libsvm failed on the training set"
"$gen_bin" --out="$dir/test.svm.gz" --examples=5000 --first_example=40000 "${gen_flags[@]}" \
  >"$dir/gen_test.log" 2>&1 || fail "ps_gen_libsvm failed on the test set"
planted=$(sed -n 's/^planted_auc=//p' "$dir/test.svm.gz.planted.txt")

start_servers "$root" "$dir" 2
worker_pids=()
for w in 0 1; do
  timeout 120 "$python" "$example" --servers="$spec" --worker_index=$w --num_workers=2 \
    --train_data="$dir/train.svm" --test_data="$dir/test.svm.gz" --batch_size=64 \
    --progress_seconds=100 >"$dir/worker$w.log" 2>&1 &
  worker_pids+=($!)
  all_pids+=($!)
done
for w in 0 1; do
  wait "${worker_pids[$w]}" || fail "worker $w exited non-zero (124: timed out)"
done
for w in 0 1; do
  auc=$(sed -n 's/^RESULT test_auc=\([0-9.]*\) .*/\1/p' "$dir/worker$w.log")
  [ -n "$auc" ] || fail "worker $w printed no RESULT test_auc line"
  awk -v a="$auc" 'BEGIN { exit !(a > 0.75) }' || fail "worker $w reached test AUC $auc, not > 0.75"
  grep -q "the planted model's test auc is" "$dir/worker$w.log" ||
    fail "worker $w did not report the planted model's AUC beside its own"
  echo "worker $w: test auc $auc (planted model: $planted)"
done
stop_servers
echo "PASS"
