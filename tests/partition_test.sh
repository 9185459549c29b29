#!/usr/bin/env bash
# A network partition, with real processes and a real network namespace:
# server 0 (the managing server) runs in a namespace of its own, joined to
# the rest by a veth pair; etcd, servers 1 and 2 and the workers
# (exact_sum_client) are on the other side. While the workers push, the
# veth is taken down: server 0 must fence itself (it cannot renew its
# lease), servers 1 and 2 must take its shards over and go on acknowledging;
# when the veth comes back up, server 0 must register again and rejoin the
# chains by copying. Every key must end at exactly workers * pushes: no
# acknowledged update lost, none applied twice. Needs root (ip netns).
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"
# shellcheck source=tests/etcd_cluster_lib.sh
source "$(dirname "$0")/etcd_cluster_lib.sh"

[ "$(id -u)" = 0 ] || fail "this test creates a network namespace: it must run as root"
command -v ip >/dev/null || fail "ip (iproute2) is not installed; run deploy/setup.sh"
ns="ps-part-$$"
host_if="psh$$"
ns_if="psn$$"
net="10.213.$(($$ % 200 + 20))"
outside="$net.1"
inside="$net.2"
cleanup_all() {
  cleanup
  ip netns del "$ns" 2>/dev/null || true
  ip link del "$host_if" 2>/dev/null || true
}
trap cleanup_all EXIT
ip netns add "$ns" || fail "could not create network namespace $ns"
ip link add "$host_if" type veth peer name "$ns_if"
ip link set "$ns_if" netns "$ns"
ip addr add "$outside/30" dev "$host_if"
ip link set "$host_if" up
ip netns exec "$ns" ip addr add "$inside/30" dev "$ns_if"
ip netns exec "$ns" ip link set "$ns_if" up
ip netns exec "$ns" ip link set lo up
echo "namespace $ns: server 0 at $inside, the rest at $outside"

start_test_etcd "$outside"
cluster=part
flags=(--etcd="$etcd_endpoint" --cluster="$cluster" --replicas=2 --lease_seconds=2 --shards=3)
server_pids=()
for i in 0 1 2; do
  where=()
  listen="$outside:0"
  if [ $i = 0 ]; then where=(ip netns exec "$ns"); listen="$inside:0"; fi
  "${where[@]}" "$server_bin" --server_id=$i --listen="$listen" --port_file="$dir/p$i" \
    "${flags[@]}" 2>"$dir/server$i.log" &
  server_pids+=($!)
  all_pids+=($!)
done
progress() { cat "$dir/progress" 2>/dev/null || echo 0; }

pushes=${PARTITION_PUSHES:-8000}
"$client_bin" --etcd="$etcd_endpoint" --cluster=$cluster --workers=4 --pushes="$pushes" \
  --keys=20000 --started_file="$dir/started" --progress_file="$dir/progress" >"$dir/client.log" 2>&1 &
client=$!
all_pids+=("$client")
wait_for_file "$dir/started" 20 || { cat "$dir/client.log"; tail "$dir"/server*.log; fail "the workers did not start"; }
grep -q "^  server 0 at $inside" <(ring $cluster) || fail "server 0 is not in the first ring at $inside"

# Cut server 0 off: from etcd, from the other servers and from the workers.
cut=$(date +%s.%N)
ip link set "$host_if" down
wait_for_line "$dir/server0.log" "fenced: the etcd lease could not be renewed" 30 ||
  fail "server 0 did not fence itself once cut off"
fenced=$(date +%s.%N)
wait_ring $cluster "server 0 gone" '! grep -q "^  server 0 " "$dir/ring.txt"'
failed_over=$(date +%s.%N)
sed -n 1p "$dir/ring.txt"
# The rest go on acknowledging: at least 100 more pushes (bounded wait).
base=$(progress)
for _ in $(seq 1 300); do [ "$(progress)" -gt $((base + 100)) ] && break; sleep 0.1; done
[ "$(progress)" -gt $((base + 100)) ] || fail "no pushes acknowledged after the failover"
kill -0 "$client" 2>/dev/null || fail "the workers finished before the heal; raise PARTITION_PUSHES"

# Heal: server 0 finds its lease gone, registers again (same incarnation:
# it is the same process) and copies back into the chains it left.
ip link set "$host_if" up
wait_for_line "$dir/server0.log" "registering again (same incarnation)" 30 ||
  fail "server 0 did not register again after the heal"
wait_ring $cluster "server 0 back in full chains" \
  'grep -q "^  server 0 " "$dir/ring.txt" && ! grep -q joining "$dir/ring.txt"'
rejoined=$(date +%s.%N)
sed -n 1p "$dir/ring.txt"
kill -0 "$client" 2>/dev/null || fail "the workers finished before server 0 rejoined; raise PARTITION_PUSHES"

wait "$client" || { cat "$dir/client.log"; tail -n 20 "$dir"/server*.log; fail "exact sum failed"; }
result=$(grep '^RESULT' "$dir/client.log")
echo "$result"
grep -q 'wrong=0 ' <<<"$result" || fail "wrong sums after the partition"
awk -v c="$cut" -v f="$fenced" -v o="$failed_over" -v r="$rejoined" 'BEGIN {
  printf "server 0 fenced %.2f s after the cut; its shards failed over after %.2f s; rejoined %.2f s after the heal began\n", f - c, o - c, r - o }' |
  tee "${TEST_UNDECLARED_OUTPUTS_DIR:-$dir}/partition_summary.txt"
echo "PASS: a partitioned server fenced itself, the rest went on, it rejoined; every key exact"
