#!/usr/bin/env bash
# The replicated cluster through the events that used to lose it, each with
# real processes (a real etcd, ps_server processes with a 2 s lease) and 4
# workers (exact_sum_client) pushing +1 to every one of 20000 keys; every
# key must end at exactly workers * pushes.
#  1. A server SIGKILLed and restarted 0.5 s later, before its lease expires
#     (the ring still names its previous process): the new process must not
#     act on the old one's ring entries; its copies come back by the chain.
#  2. etcd stopped (SIGSTOP) for 5 s, past every lease: the servers register
#     again under the same incarnation; no shard is declared lost and the
#     ring's chains stay as they were.
#  3. r = 3 on 4 servers, a middle server drained: the chains repaired
#     around it catch their successors up from the recent history; no
#     server that holds a complete copy is sent a snapshot.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"
# shellcheck source=tests/etcd_cluster_lib.sh
source "$(dirname "$0")/etcd_cluster_lib.sh"
start_test_etcd

start_client() {  # CLUSTER PUSHES
  rm -f "$dir/started"
  "$client_bin" --etcd="$etcd_endpoint" --cluster="$1" --workers=4 --pushes="$2" --keys=20000 \
    --started_file="$dir/started" >"$dir/client_$1.log" 2>&1 &
  client=$!
  all_pids+=("$client")
  wait_for_file "$dir/started" 20 || { cat "$dir/client_$1.log"; fail "$1: the workers did not start"; }
}
finish_client() {  # CLUSTER: waits for the client; its sums must be exact
  wait "$client" || { cat "$dir/client_$1.log"; fail "$1: exact sum failed"; }
  result=$(grep '^RESULT' "$dir/client_$1.log")
  echo "$1: $result"
  grep -q 'wrong=0 ' <<<"$result" || fail "$1: wrong sums"
}

# 1. A restart before the lease expires.
start_servers "$root" "$dir" 3 --etcd="$etcd_endpoint" --cluster=restart --replicas=2 --lease_seconds=2
start_client restart "${RESTART_PUSHES:-3000}"
kill -KILL "${server_pids[0]}"
wait "${server_pids[0]}" 2>/dev/null || true
sleep 0.5  # the fault: restarted well inside the 2 s lease
restart_server 0
kill -0 "$client" 2>/dev/null || fail "the workers finished before the restart; raise RESTART_PUSHES"
finish_client restart
full_chains restart 2
echo "restart 0.5 s after SIGKILL: every key exact; $(head -n 1 "$dir/ring.txt")"
stop_servers

# 2. etcd stalled for 2.5 leases.
start_servers "$root" "$dir" 3 --etcd="$etcd_endpoint" --cluster=stall --replicas=2 --lease_seconds=2
start_client stall "${STALL_PUSHES:-6000}"
ring stall >"$dir/ring_before.txt"
kill -STOP "$etcd_pid"
sleep 5  # the fault's length
kill -CONT "$etcd_pid"
kill -0 "$client" 2>/dev/null || fail "the workers finished during the stall; raise STALL_PUSHES"
finish_client stall
ring stall >"$dir/ring_after.txt"
grep -q LOST "$dir/ring_after.txt" && fail "a shard was declared lost: $(cat "$dir/ring_after.txt")"
diff <(grep -o 'shard [0-9]*: [0-9 >-]*' "$dir/ring_before.txt") \
  <(grep -o 'shard [0-9]*: [0-9 >-]*' "$dir/ring_after.txt") ||
  fail "the chains changed after an etcd stall with every server alive"
grep -q "registered again in etcd under the same incarnation" "$dir"/server*.log ||
  fail "no server's lease lapsed in a 5 s stall (the test did not test the case)"
echo "etcd stopped 5 s (lease 2 s): every key exact, chains unchanged: $(head -n 1 "$dir/ring_after.txt")"
stop_servers

# 3. r = 3, a middle server drained under load.
start_servers "$root" "$dir" 4 --etcd="$etcd_endpoint" --cluster=drain --replicas=3 --lease_seconds=2
start_client drain "${DRAIN_PUSHES:-4000}"
"$admin_bin" drain --etcd="$etcd_endpoint" --cluster=drain --server_id=1 --timeout_seconds=60 \
  >"$dir/drain.log" 2>&1 || fail "ps_admin drain failed: $(cat "$dir/drain.log")"
kill -0 "$client" 2>/dev/null || fail "the workers finished before the drain did; raise DRAIN_PUSHES"
finish_client drain
if grep -h "holds a copy at .*: sending a snapshot" "$dir"/server*.log; then
  fail "a server that held a complete copy was sent a snapshot"
fi
catch_ups=$(cat "$dir"/server*.log | grep -c "catching it up" || true)
snapshots=$(cat "$dir"/server*.log | grep -c "holds no copy: sending a snapshot" || true)
bytes=$(sed -n 's/.*snapshot at .* sent to server .* (\([0-9]*\) bytes)/\1/p' "$dir"/server*.log |
  awk '{ s += $1 } END { print s + 0 }')
[ "$catch_ups" -gt 0 ] || fail "no successor was caught up from the history"
echo "drain of a middle server at r=3: $catch_ups successors caught up, $snapshots snapshots" \
  "(to servers without a copy), $bytes snapshot bytes" |
  tee "${TEST_UNDECLARED_OUTPUTS_DIR:-$dir}/repair_summary.txt"
stop_servers
echo "PASS: a fast restart, an etcd stall and a drain at r=3, every key exact"
