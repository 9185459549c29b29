#!/usr/bin/env bash
# etcd restarted under load, with real processes: 3 ps_server processes at
# --replicas=2 (lease 2 s) and 4 workers (exact_sum_client) pushing +1 to
# 20000 keys.
#  1. etcd is killed for 3 s (1.5 leases) and restarted on the same ports
#     and data: the servers find etcd down for everyone and serve on with
#     the last ring, so pushes are acknowledged during the outage; afterwards
#     the ring is unchanged (no server was declared dead) and every key is
#     exact.
#  2. etcd is killed, and a server too while etcd is down: the ring cannot
#     change until etcd is back (the others fence themselves, since a server
#     they cannot reach might be the one that reaches etcd); then the dead
#     server's shards fail over, and every key is exact.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"
# shellcheck source=tests/etcd_cluster_lib.sh
source "$(dirname "$0")/etcd_cluster_lib.sh"
start_test_etcd
ring_version() {  # CLUSTER: the ring's version, read with ps_admin
  "$admin_bin" ring --etcd="$etcd_endpoint" --cluster="$1" | sed -n 's/^ring v\([0-9]*\) .*/\1/p'
}
progress() { cat "$dir/progress" 2>/dev/null || echo 0; }
start_client() {  # CLUSTER PUSHES
  rm -f "$dir/started" "$dir/progress"
  "$client_bin" --etcd="$etcd_endpoint" --cluster="$1" --workers=4 --pushes="$2" --keys=20000 \
    --started_file="$dir/started" --progress_file="$dir/progress" >"$dir/client_$1.log" 2>&1 &
  client=$!
  all_pids+=("$client")
  wait_for_file "$dir/started" 20 || { cat "$dir/client_$1.log"; fail "$1: the workers did not start"; }
}
finish_client() {  # CLUSTER: waits for the client; its sums must be exact
  wait "$client" || { cat "$dir/client_$1.log"; tail -n 20 "$dir"/server*.log; fail "$1: exact sum failed"; }
  result=$(grep '^RESULT' "$dir/client_$1.log")
  echo "$1: $result"
  grep -q 'wrong=0 ' <<<"$result" || fail "$1: wrong sums"
}

# 1. An outage of 1.5 leases, under load.
start_servers "$root" "$dir" 3 --etcd="$etcd_endpoint" --cluster=outage --replicas=2 --lease_seconds=2
start_client outage "${OUTAGE_PUSHES:-6000}"
[ "$(ring_version outage)" = 1 ] || fail "expected the first ring"
kill -KILL "$etcd_pid"
wait "$etcd_pid" 2>/dev/null || true
# The outage's length (the fault, not a synchronisation): past the point
# where a server that cannot renew its lease would fence itself (2/3 lease).
sleep 1.5
before=$(progress)
sleep 1.5
during=$(progress)
kill -0 "$client" 2>/dev/null || fail "the workers finished during the outage; raise OUTAGE_PUSHES"
restart_etcd || fail "etcd did not restart"
all_pids+=("$etcd_pid")
echo "pushes acknowledged between 1.5 s and 3 s into the outage: $((during - before))"
[ "$during" -gt "$before" ] || fail "no push was acknowledged while etcd was down"
for i in 0 1 2; do
  grep -q "serving on with it" "$dir/server$i.log" ||
    fail "server $i did not find etcd down for everyone: $(tail -n 5 "$dir/server$i.log")"
done
finish_client outage
[ "$(ring_version outage)" = 1 ] || fail "the ring changed although no server died: $(ring_version outage)"
stop_servers

# 2. A server dies while etcd is down: the failover waits for etcd.
start_servers "$root" "$dir" 3 --etcd="$etcd_endpoint" --cluster=waits --replicas=2 --lease_seconds=2
start_client waits "${WAITS_PUSHES:-4000}"
kill -KILL "$etcd_pid"
wait "$etcd_pid" 2>/dev/null || true
kill -KILL "${server_pids[2]}"
sleep 2  # the outage's length
kill -0 "$client" 2>/dev/null || fail "the workers finished during the outage; raise WAITS_PUSHES"
restart_etcd || fail "etcd did not restart"
all_pids+=("$etcd_pid")
finish_client waits
version=$("$admin_bin" ring --etcd="$etcd_endpoint" --cluster=waits | tee "$dir/ring.log" | head -n 1)
echo "after the outage: $version"
grep -q '^  server 2 ' "$dir/ring.log" && fail "the dead server is still in the ring"
unset 'server_pids[2]'
stop_servers
echo "PASS: training goes on through an etcd outage; a failover waits for etcd"
