#!/usr/bin/env bash
# Elasticity under load, with real processes: a real etcd, 3 ps_server
# processes at --replicas=2, and 4 workers (exact_sum_client) pushing +1 to
# 20000 keys. While they push, a fourth server is started (--standby) and
# added (ps_admin add-server), then server 1 is drained (ps_admin drain) and
# stopped. Every key must end at exactly workers * pushes, the drained
# server must hold nothing, and the added one must hold shards.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"
# shellcheck source=tests/etcd_cluster_lib.sh
source "$(dirname "$0")/etcd_cluster_lib.sh"
start_test_etcd
cluster=elastic
common=(--etcd="$etcd_endpoint" --cluster="$cluster" --replicas=2 --lease_seconds=2)
admin() { "$admin_bin" "$@" --etcd="$etcd_endpoint" --cluster=$cluster --timeout_seconds=60; }

start_servers "$root" "$dir" 3 "${common[@]}"
pushes=${ELASTIC_PUSHES:-4000}
"$client_bin" --etcd="$etcd_endpoint" --cluster=$cluster --workers=4 --pushes="$pushes" \
  --keys=20000 --started_file="$dir/started" >"$dir/client.log" 2>&1 &
client=$!
all_pids+=("$client")
wait_for_file "$dir/started" 20 || { cat "$dir/client.log"; fail "the workers did not start"; }

# A new standby server registers; it takes no shard until it is added.
"$server_bin" --standby --server_id=3 --shards=3 --listen=127.0.0.1:0 --port_file="$dir/server3.port" \
  "${common[@]}" 2>"$dir/server3.log" &
server3=$!
all_pids+=("$server3")
wait_for_line "$dir/server3.log" "registered in etcd" 30 || fail "the standby server 3 did not register in etcd"
start=$(date +%s.%N)
admin add-server --server_id=3 | tee "$dir/add.log" || fail "ps_admin add-server failed"
added=$(date +%s.%N)
grep -q '^server 3 added: it holds shards [0-9]' "$dir/add.log" || fail "no 'server 3 added' line"
admin drain --server_id=1 | tee "$dir/drain.log" || fail "ps_admin drain failed"
drained=$(date +%s.%N)
grep -q '^server 1 drained' "$dir/drain.log" || fail "no 'server 1 drained' line"
kill -0 "$client" 2>/dev/null ||
  fail "the workers finished before the drain did; raise ELASTIC_PUSHES (now $pushes)"
kill -TERM "${server_pids[1]}"
wait "${server_pids[1]}" || fail "the drained server exited non-zero after SIGTERM"

wait "$client" || { cat "$dir/client.log"; tail -n 20 "$dir"/server*.log; fail "exact sum failed"; }
result=$(grep '^RESULT' "$dir/client.log")
echo "$result"
grep -q 'wrong=0 ' <<<"$result" || fail "wrong sums after add and drain"

admin ring | tee "$dir/ring.log" || fail "ps_admin ring failed"
grep -q '^  server 1 ' "$dir/ring.log" && fail "the drained server is still a ring member"
grep -q '^  server 3 ' "$dir/ring.log" || fail "the added server is not a ring member"
retries=$(grep -c 'retrying' "$dir/client.log" || true)
awk -v s="$start" -v a="$added" -v d="$drained" -v r="$retries" 'BEGIN {
  printf "add-server took %.2f s, drain %.2f s, calls retried by the workers: %d\n", a - s, d - a, r }' |
  tee "${TEST_UNDECLARED_OUTPUTS_DIR:-$dir}/elasticity_summary.txt"
"$admin_bin" status --etcd="$etcd_endpoint" --cluster=$cluster >"$dir/status.log" 2>&1 ||
  fail "ps_admin status failed"
cat "$dir/status.log"
grep -q "^ring v[0-9]* r=2" "$dir/status.log" || fail "ps_admin status printed no ring"
grep -q "^3 shard(s), " "$dir/status.log" || fail "ps_admin status did not list the 3 shards"
echo "PASS: a server added and another drained under load; every key exact"
