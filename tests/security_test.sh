#!/usr/bin/env bash
# TLS, mutual TLS and tokens with roles, between real processes. The test
# makes its own CA and certificates with openssl: two servers require client
# certificates from the CA and a token; a worker with both trains; clients
# without TLS, without a certificate, with another CA's certificate, without
# a token or with an unknown one are refused with a clear error; a worker's
# token may not take a checkpoint, an admin's may (and the servers reach each
# other with theirs). A malformed tokens file stops a server at start,
# naming the file and line.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"
admin_bin="$root/tools/ps_admin"
command -v openssl >/dev/null || fail "openssl is not installed"

pki="$dir/pki"
mkdir -p "$pki"
# make_ca NAME: NAME.pem and NAME.key
make_ca() {
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/$1.key" -out "$pki/$1.pem" \
    -days 2 -subj "/CN=$1" 2>/dev/null
}
# make_cert CA NAME [SAN]: NAME.pem and NAME.key signed by CA
make_cert() {
  openssl req -newkey rsa:2048 -nodes -keyout "$pki/$2.key" -out "$pki/$2.csr" \
    -subj "/CN=$2" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\n%s\n' "${3:+subjectAltName=$3}" >"$pki/$2.ext"
  openssl x509 -req -in "$pki/$2.csr" -CA "$pki/$1.pem" -CAkey "$pki/$1.key" -CAcreateserial \
    -out "$pki/$2.pem" -days 2 -extfile "$pki/$2.ext" 2>/dev/null
}
make_ca ca
make_ca rogue
make_cert ca server "IP:127.0.0.1,DNS:localhost"
make_cert ca worker
make_cert rogue intruder
worker_token=$(openssl rand -hex 24)
admin_token=$(openssl rand -hex 24)
printf '# role token\nworker %s\nadmin  %s  # ps_admin and the servers\n' \
  "$worker_token" "$admin_token" >"$pki/tokens"
printf '%s\n' "$worker_token" >"$pki/worker.token"
printf '%s\n' "$admin_token" >"$pki/admin.token"
printf 'worker short\n' >"$pki/bad_tokens"

tls_server=(--tls_ca="$pki/ca.pem" --tls_cert="$pki/server.pem" --tls_key="$pki/server.key"
  --tokens_file="$pki/tokens" --token_file="$pki/admin.token")
tls_worker=(--tls_ca="$pki/ca.pem" --tls_cert="$pki/worker.pem" --tls_key="$pki/worker.key")

# A malformed tokens file: the server refuses to start, naming file and line.
if "$server_bin" --num_servers=1 --listen=127.0.0.1:0 "${tls_server[@]}" \
  --tokens_file="$pki/bad_tokens" 2>"$dir/bad.log"; then
  fail "a server started with a malformed tokens file"
fi
grep -q "bad_tokens:1: a token of 5 characters" "$dir/bad.log" || { cat "$dir/bad.log"; fail "no file:line error"; }

mkdir -p "$dir/ckpt"
start_servers "$root" "$dir" 2 "${tls_server[@]}" --checkpoint_dir="$dir/ckpt" --servers_file="$dir/spec"
echo "$spec" >"$dir/spec.tmp" && mv "$dir/spec.tmp" "$dir/spec"  # read by server 0 at a checkpoint

# The worker with its certificate and token trains.
"$worker_bin" --servers="$spec" "${tls_worker[@]}" --token_file="$pki/worker.token" \
  --model=softmax --epochs=1 --max_train_examples=6000 >"$dir/worker.log" 2>&1 ||
  { cat "$dir/worker.log"; fail "the worker with TLS and a token failed"; }
accuracy=$(sed -n 's/^RESULT test_accuracy=//p' "$dir/worker.log")
echo "worker over mutual TLS with a worker token: test accuracy $accuracy"

# status CASE EXPECTED FLAGS...: ps_admin status must fail, saying EXPECTED.
refused() {
  local name=$1 expected=$2
  shift 2
  if "$admin_bin" status --servers="$spec" --timeout_seconds=3 "$@" >"$dir/$name.log" 2>&1; then
    fail "$name: the call was accepted"
  fi
  grep -q -- "$expected" "$dir/$name.log" || { cat "$dir/$name.log"; fail "$name: no '$expected' in the error"; }
  echo "$name: refused ($(grep -o -- "$expected" "$dir/$name.log" | head -n 1))"
}
refused plaintext "did not answer within" --token_file="$pki/worker.token"
refused no_client_cert "did not answer within" --tls_ca="$pki/ca.pem" --token_file="$pki/worker.token"
refused rogue_cert "did not answer within" --tls_ca="$pki/ca.pem" --tls_cert="$pki/intruder.pem" \
  --tls_key="$pki/intruder.key" --token_file="$pki/worker.token"
refused no_token "needs a token" "${tls_worker[@]}"
printf '%s\n' "$(openssl rand -hex 24)" >"$pki/unknown.token"
refused unknown_token "unknown token" "${tls_worker[@]}" --token_file="$pki/unknown.token"
# The server's certificate must name the host dialled: a CA that did not sign it fails too.
refused wrong_ca "did not answer within" --tls_ca="$pki/rogue.pem" --tls_cert="$pki/worker.pem" \
  --tls_key="$pki/worker.key" --token_file="$pki/worker.token"

"$admin_bin" status --servers="$spec" "${tls_worker[@]}" --token_file="$pki/worker.token" \
  >"$dir/status.log" 2>&1 || { cat "$dir/status.log"; fail "status with a worker token failed"; }
grep -q "^2 shard(s)" "$dir/status.log" || fail "status printed no shards"

# Roles: a worker's token may not take a checkpoint; an admin's may, and
# server 0 then reaches server 1 with its own certificate and admin token.
if "$admin_bin" checkpoint --servers="$spec" "${tls_worker[@]}" --token_file="$pki/worker.token" \
  >"$dir/ckpt_worker.log" 2>&1; then
  fail "a worker's token took a checkpoint"
fi
grep -q "Checkpoint needs role admin; this token has role worker" "$dir/ckpt_worker.log" ||
  { cat "$dir/ckpt_worker.log"; fail "no PERMISSION_DENIED message for the worker's token"; }
"$admin_bin" checkpoint --servers="$spec" "${tls_worker[@]}" --token_file="$pki/admin.token" \
  >"$dir/ckpt_admin.log" 2>&1 || { cat "$dir/ckpt_admin.log"; fail "the admin's checkpoint failed"; }
grep -q "^checkpoint .*: sequence 1" "$dir/ckpt_admin.log" || { cat "$dir/ckpt_admin.log"; fail "no checkpoint taken"; }
echo "checkpoint: refused with a worker token, taken with an admin token"

stop_servers
echo "PASS: mutual TLS and tokens with roles"
