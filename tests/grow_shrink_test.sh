#!/usr/bin/env bash
# Growth is not capped by the starting size: a replicated cluster started on
# 3 servers with 24 logical shards (--shards=24, r = 2) is grown to 8 servers
# (ps_admin add-server, one at a time) and drained back to 3 (ps_admin
# drain, then SIGTERM), while 4 workers (exact_sum_client) push +1 to every
# one of 100000 keys (25 slices, spread over the shards). Every key must end
# at exactly workers * pushes; at 8 servers every server must hold shards;
# the drained ones none. Reports the bytes moved: snapshot bytes sent, and
# the successors caught up from the recent history instead.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"
# shellcheck source=tests/etcd_cluster_lib.sh
source "$(dirname "$0")/etcd_cluster_lib.sh"
start_test_etcd
cluster=grow
common=(--etcd="$etcd_endpoint" --cluster="$cluster" --replicas=2 --lease_seconds=2 --shards=24)
admin() { "$admin_bin" "$@" --etcd="$etcd_endpoint" --cluster=$cluster --timeout_seconds=60; }

start_servers "$root" "$dir" 3 "${common[@]}"
pushes=${GROW_PUSHES:-100000}
"$client_bin" --etcd="$etcd_endpoint" --cluster=$cluster --workers=4 --pushes="$pushes" \
  --keys=100000 --started_file="$dir/started" --stop_file="$dir/stop" >"$dir/client.log" 2>&1 &
client=$!
all_pids+=("$client")
wait_for_file "$dir/started" 20 || { cat "$dir/client.log"; fail "the workers did not start"; }
admin ring | head -n 1

start=$(date +%s.%N)
extra=()
for id in 3 4 5 6 7; do
  "$server_bin" --standby --server_id=$id --num_servers=3 --listen=127.0.0.1:0 \
    --port_file="$dir/server$id.port" "${common[@]}" 2>"$dir/server$id.log" &
  extra[$id]=$!
  all_pids+=("${extra[$id]}")
  wait_for_line "$dir/server$id.log" "registered in etcd" 30 || fail "the standby server $id did not register in etcd"
  admin add-server --server_id=$id >"$dir/add$id.log" 2>&1 || fail "add-server $id: $(cat "$dir/add$id.log")"
  grep -q "^server $id added: it holds shards [0-9]" "$dir/add$id.log" ||
    fail "server $id took no shard: $(cat "$dir/add$id.log")"
done
grown=$(date +%s.%N)
admin ring >"$dir/ring8.txt"
for id in 0 1 2 3 4 5 6 7; do
  grep -q "^  server $id " "$dir/ring8.txt" || fail "server $id holds nothing at 8 servers: $(cat "$dir/ring8.txt")"
done
echo "grown to 8: $(head -n 1 "$dir/ring8.txt")"
kill -0 "$client" 2>/dev/null || fail "the workers finished before the cluster grew; raise GROW_PUSHES"

for id in 7 6 5 4 3; do
  admin drain --server_id=$id >"$dir/drain$id.log" 2>&1 || fail "drain $id: $(cat "$dir/drain$id.log")"
  kill -TERM "${extra[$id]}"
  wait "${extra[$id]}" || fail "drained server $id exited non-zero after SIGTERM"
done
shrunk=$(date +%s.%N)
admin ring >"$dir/ring3.txt"
for id in 3 4 5 6 7; do
  grep -q "^  server $id " "$dir/ring3.txt" && fail "drained server $id is still in the ring"
done
echo "drained back to 3: $(head -n 1 "$dir/ring3.txt")"
kill -0 "$client" 2>/dev/null || fail "the workers finished before the drains did; raise GROW_PUSHES"
touch "$dir/stop"  # the workers stop after the push in flight
wait "$client" || { cat "$dir/client.log"; fail "exact sum failed"; }
result=$(grep '^RESULT' "$dir/client.log")
echo "$result"
grep -q 'wrong=0 ' <<<"$result" || fail "wrong sums after growing and shrinking"
snapshot_bytes=$(sed -n 's/.*snapshot at .* sent to server .* (\([0-9]*\) bytes)/\1/p' "$dir"/server*.log |
  awk '{ s += $1 } END { print s + 0 }')
snapshots=$(cat "$dir"/server*.log | grep -c "holds no copy: sending a snapshot" || true)
catch_ups=$(cat "$dir"/server*.log | grep -c "catching it up" || true)
awk -v s="$start" -v g="$grown" -v d="$shrunk" -v b="$snapshot_bytes" -v n="$snapshots" -v c="$catch_ups" 'BEGIN {
  printf "3 -> 8 servers in %.1f s, 8 -> 3 in %.1f s; %d snapshots (%.1f MB moved), %d successors caught up from the history\n",
    g - s, d - g, n, b / 1e6, c }' | tee "${TEST_UNDECLARED_OUTPUTS_DIR:-$dir}/grow_summary.txt"
stop_servers
echo "PASS: 3 -> 8 -> 3 servers under load; every key exact"
