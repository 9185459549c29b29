#!/usr/bin/env bash
# python/examples/torch_embedding.py against real servers:
#   - libffm data from ps_gen_libsvm with 2 fields (a planted logistic model;
#     the test set is the examples after the training set's), 2 ps_server
#     processes and 2 PyTorch workers with --num_fields=2, --key_caching and
#     the row cache, 1 epoch: both exit 0, print ps_worker's progress, done
#     and RESULT lines, and reach a test AUC clearly above chance (> 0.75;
#     the planted model scores about 0.9 on this data, chance 0.5);
#   - TLS and tokens: a server with mutual TLS and a tokens file; a worker
#     with ps_worker's --tls_ca, --tls_cert, --tls_key and --token_file
#     trains; one without --token_file is refused (UNAUTHENTICATED).
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/cluster_lib.sh"
python=/usr/bin/python3
export PYTHONPATH="$root/python"
example="$root/python/examples/torch_embedding.py"
gen_bin="$root/worker/ps_gen_libsvm"

gen_flags=(--features=3000 --features_per_example=8 --weight_stddev=1 --bias=-0.5 --num_fields=2
  --progress_seconds=0)
"$gen_bin" --out="$dir/train.svm" --examples=40000 "${gen_flags[@]}" >"$dir/gen.log" 2>&1 ||
  fail "ps_gen_libsvm failed on the training set"
"$gen_bin" --out="$dir/test.svm.gz" --examples=5000 --first_example=40000 "${gen_flags[@]}" \
  >"$dir/gen_test.log" 2>&1 || fail "ps_gen_libsvm failed on the test set"
planted=$(sed -n 's/^planted_auc=//p' "$dir/test.svm.gz.planted.txt")

start_servers "$root" "$dir" 2
worker_pids=()
for w in 0 1; do
  timeout 120 "$python" "$example" --servers="$spec" --worker_index=$w --num_workers=2 \
    --train_data="$dir/train.svm" --test_data="$dir/test.svm.gz" --batch_size=64 --num_fields=2 \
    --key_caching --row_cache_staleness=2 --progress_seconds=0.2 >"$dir/worker$w.log" 2>&1 &
  worker_pids+=($!)
  all_pids+=($!)
done
for w in 0 1; do
  wait "${worker_pids[$w]}" || fail "worker $w exited non-zero (124: timed out)"
done
for w in 0 1; do
  log="$dir/worker$w.log"
  auc=$(sed -n 's/^RESULT test_auc=\([0-9.]*\) .*/\1/p' "$log")
  [ -n "$auc" ] || fail "worker $w printed no RESULT test_auc line"
  awk -v a="$auc" 'BEGIN { exit !(a > 0.75) }' || fail "worker $w reached test AUC $auc, not > 0.75"
  grep -Eq "^worker $w/2: epoch 1 step [0-9]+: [0-9]+ examples, [0-9]+ examples/s, [0-9]+ keys/s \([0-9]+% pulled, 100% pushed\), log-loss [0-9.]+$" \
    "$log" || fail "worker $w printed no ps_worker sparse progress line"
  grep -Eq "^worker $w/2: done: 313 steps, 20000 examples in [0-9.]+s \([0-9]+ examples/s, [0-9]+ keys/s, [0-9]+ keys pulled\)," \
    "$log" || fail "worker $w's done line is not ps_worker's"
  grep -Eq "^RESULT worker=$w partition=0 seconds=[0-9.]+ examples=20000 keys=[0-9]+ keys_pulled=[0-9]+ " \
    "$log" || fail "worker $w's RESULT line is not ps_worker's"
  grep -q "^worker $w/2: test auc $auc accuracy [0-9.]* logloss [0-9.]* (5000 test examples)$" "$log" ||
    fail "worker $w's test line is not ps_worker's"
  echo "worker $w: test auc $auc (planted model: $planted); $(grep -o '[0-9]*% pulled' "$log" | tail -n 1) with the row cache"
done
stop_servers

# TLS and tokens (as tests/security_test.sh makes them).
pki="$dir/pki"
mkdir -p "$pki"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.pem" -days 2 \
  -subj "/CN=ca" 2>/dev/null || fail "openssl could not make a CA"
for name in server worker; do
  openssl req -newkey rsa:2048 -nodes -keyout "$pki/$name.key" -out "$pki/$name.csr" \
    -subj "/CN=$name" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$pki/$name.ext"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -CAcreateserial \
    -out "$pki/$name.pem" -days 2 -extfile "$pki/$name.ext" 2>/dev/null
done
worker_token=$(openssl rand -hex 24)
printf 'worker %s\nadmin %s\n' "$worker_token" "$(openssl rand -hex 24)" >"$pki/tokens"
printf '%s\n' "$worker_token" >"$pki/worker.token"
start_servers "$root" "$dir" 1 --tls_ca="$pki/ca.pem" --tls_cert="$pki/server.pem" \
  --tls_key="$pki/server.key" --tokens_file="$pki/tokens"
tls=(--tls_ca="$pki/ca.pem" --tls_cert="$pki/worker.pem" --tls_key="$pki/worker.key")
timeout 120 "$python" "$example" --servers="$spec" "${tls[@]}" --token_file="$pki/worker.token" \
  --train_data="$dir/train.svm" --test_data="$dir/test.svm.gz" --num_fields=2 --max_steps=20 \
  --max_train_examples=5000 >"$dir/tls.log" 2>&1 || fail "the worker with TLS and a token failed"
grep -q "^RESULT test_auc=" "$dir/tls.log" || fail "the worker with TLS and a token did not finish"
if timeout 60 "$python" "$example" --servers="$spec" "${tls[@]}" --train_data="$dir/train.svm" \
  --test_data="$dir/test.svm.gz" --num_fields=2 --max_steps=5 >"$dir/no_token.log" 2>&1; then
  fail "a worker without a token was accepted"
fi
grep -q "UNAUTHENTICATED" "$dir/no_token.log" || fail "a worker without a token failed without UNAUTHENTICATED"
echo "TLS and token: trained with them; refused without the token ($(grep -o 'UNAUTHENTICATED[^;]*' "$dir/no_token.log" | head -n 1))"
stop_servers
echo "PASS"
