#!/usr/bin/env bash
# Tiered tables on a replicated cluster, real processes: etcd, 3 ps_server
# processes at --replicas=2 (lease 2 s) sharing one --table_dir, and
# tier_client pushing +1 to each of 20,000 keys a round (a 1 MiB cache a
# table, so most rows are on disk); every value must be the number of rounds
# acknowledged.
#  1. A server stopped cleanly (SIGTERM) while pushes go on (a second
#     client's, and a round while it is away), and started again on its
#     --table_dir: it kept its copies there, the chains waited for it (no
#     other server joined them), and its predecessors send only the updates
#     it missed: "catching it up ... (no snapshot)", no snapshot to it. Then the other two servers are SIGKILLed one after the other
#     (each restarted), so the rejoined copies serve as primaries: every
#     value exact.
#  2. SIGKILL and a restart: nothing was kept; the server is sent snapshots
#     and every value stays exact.
#  3. Every server stopped cleanly, then all started again: each chain
#     resumes from a copy kept by a server the ring still names in it (no
#     checkpoint); every value exact, and pushes go on.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"
# shellcheck source=tests/etcd_cluster_lib.sh
source "$(dirname "$0")/etcd_cluster_lib.sh"
start_test_etcd
tier="$root/tests/tier_client"
tables="$dir/tables"
mkdir -p "$tables"
keys=20000

tier_client() {  # MODE [flags]
  local mode=$1
  shift
  "$tier" --etcd="$etcd_endpoint" --cluster=tier --keys="$keys" --mode="$mode" "$@"
}
check() {  # N: every value N
  tier_client check --expect="$1" >"$dir/check.out" 2>"$dir/check.err" ||
    fail "values are not all $1: $(cat "$dir/check.err")"
}
# Whether $dir/ring.txt names server S in no chain (ShardRing::Describe:
# "shard 0: 0 -> 1; shard 1: 2 (+1 joining)").
out_of_chains() {
  ! grep -oE 'shard [0-9]+: [^;]*' "$dir/ring.txt" | sed 's/^shard [0-9]*://' |
    grep -qE "(^| )$1( |\)|\$)"
}
# Server I's log since line FROM (1-based).
log_since() { tail -n "+$2" "$dir/server$1.log"; }
lines() { wc -l <"$dir/server$1.log"; }

start_servers "$root" "$dir" 3 --etcd="$etcd_endpoint" --cluster=tier --replicas=2 \
  --lease_seconds=2 --table_dir="$tables" --rejoin_grace_seconds=60
full_chains tier 2
tier_client push --rounds=2 >"$dir/push0.out" 2>"$dir/push0.err" ||
  fail "the first rounds: $(cat "$dir/push0.err")"
check 2

# 1. A clean stop while pushes go on, and a restart on the same directory.
rounds=${TIER_REPLICATION_ROUNDS:-150}
tier_client push --rounds="$rounds" --worker_id=2 >"$dir/push1.out" 2>"$dir/push1.err" &
pusher=$!
all_pids+=("$pusher")
from=()
for i in 0 1 2; do from[i]=$(($(lines "$i") + 1)); done
kill -TERM "${server_pids[1]}"
status=0
wait "${server_pids[1]}" || status=$?
[ "$status" = 0 ] || fail "server 1 exited with status $status after SIGTERM"
kept=$(log_since 1 "${from[1]}" | grep -c "kept in $tables for the next process") || true
((kept == 2)) || fail "server 1 kept $kept copies, not the 2 of its shards"
# The chains wait: server 1 is out of them, nobody else joins; a round is
# pushed while it is away.
wait_ring tier "server 1 out of every chain" "out_of_chains 1"
grep -q joining "$dir/ring.txt" && fail "another server joined for server 1: $(cat "$dir/ring.txt")"
tier_client push --rounds=1 >"$dir/away.out" 2>"$dir/away.err" ||
  fail "the round while server 1 is away: $(cat "$dir/away.err")"
restart_server 1
full_chains tier 2
wait "$pusher" || fail "pushes across the restart: $(cat "$dir/push1.err")"
grep -q "^ACKED $rounds\$" "$dir/push1.out" || fail "not every round acknowledged: $(cat "$dir/push1.out")"
offered=$(log_since 1 "${from[1]}" | grep -c "joining with the kept copy") || true
((offered == 2)) || fail "server 1 joined $offered chains with its kept copies, not 2"
caught=$(cat <(log_since 0 "${from[0]}") <(log_since 2 "${from[2]}") |
  grep -c "server 1 holds a copy at .*catching it up with .* (no snapshot)") || true
((caught == 2)) || fail "$caught chains caught server 1 up from their history, not 2"
if cat <(log_since 0 "${from[0]}") <(log_since 2 "${from[2]}") | grep "server 1 .*sending a snapshot"; then
  fail "server 1 was sent a snapshot"
fi
total=$((3 + rounds))
check "$total"
echo "PASS: SIGTERM, restart: 2 kept copies caught up without a snapshot; every value $total"

# The rejoined copies serve: the others fail, one after the other.
for victim in 0 2; do
  kill -KILL "${server_pids[$victim]}"
  wait "${server_pids[$victim]}" 2>/dev/null || true
  check "$total"
  restart_server "$victim"
  full_chains tier 2
done
tier_client push --rounds=1 >"$dir/push2.out" 2>"$dir/push2.err" ||
  fail "a round after the failovers: $(cat "$dir/push2.err")"
total=$((total + 1))
check "$total"
echo "PASS: servers 0 and 2 SIGKILLed in turn: the rejoined copies served; every value $total"

# 2. A crash keeps nothing: the restarted server is sent snapshots.
from1=$(($(lines 1) + 1))
from0=$(($(lines 0) + 1))
from2=$(($(lines 2) + 1))
kill -KILL "${server_pids[1]}"
wait "${server_pids[1]}" 2>/dev/null || true
restart_server 1
full_chains tier 2
if log_since 1 "$from1" | grep -q "offering a copy"; then fail "a killed server offered a copy"; fi
check "$total"
echo "PASS: SIGKILL, restart: nothing offered, $(cat <(log_since 0 "$from0") <(log_since 2 "$from2") |
  grep -c 'sending a snapshot') snapshot(s) sent; every value $total"

# 3. The whole cluster stopped cleanly and started again: each chain
#    resumes from a kept copy (no checkpoint), the others rejoin theirs.
stop_servers
start_servers "$root" "$dir" 3 --etcd="$etcd_endpoint" --cluster=tier --replicas=2 \
  --lease_seconds=2 --table_dir="$tables" --rejoin_grace_seconds=60
full_chains tier 2
check "$total"
resumed=$(cat "$dir"/server[0-2].log | grep -c "serving the kept copy at") || true
((resumed == 3)) || fail "$resumed chains resumed from a kept copy, not 3: $(cat "$dir/ring.txt")"
snapshots=$(cat "$dir"/server[0-2].log | grep -c "sending a snapshot") || true
tier_client push --rounds=1 >"$dir/push3.out" 2>"$dir/push3.err" ||
  fail "a round after the cluster's restart: $(cat "$dir/push3.err")"
total=$((total + 1))
check "$total"
echo "PASS: every server SIGTERMed, all started again: 3 chains resumed from kept copies," \
  "$snapshots snapshot(s) sent; every value $total"
stop_servers
