#!/usr/bin/env bash
# Exactly once from Python under a SIGKILL and a restart: a real etcd, 3
# ps_server processes with --replicas=2, and 3 Python workers
# (exactly_once_worker.py, one paramserver.Client each) pushing +1 to every
# key of a dense and a sparse table. Server 0, the managing server, is
# killed with SIGKILL while they push; once its shards have failed over it
# is restarted and copies its way back into the chains; the workers push on
# past that. Every key must end at exactly the number of pushes
# acknowledged: none lost, none applied twice.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/cluster_lib.sh"
# shellcheck source=tests/etcd_cluster_lib.sh
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/etcd_cluster_lib.sh"
start_test_etcd
cluster=py_exact
victim=0
mkdir -p "$dir/ckpt"
start_servers "$root" "$dir" 3 --etcd="$etcd_endpoint" --cluster=$cluster --replicas=2 --lease_seconds=2 \
  --checkpoint_dir="$dir/ckpt"

PYTHONPATH="$root/python" /usr/bin/python3 "$root/python/tests/exactly_once_worker.py" \
  --etcd="$etcd_endpoint" --cluster=$cluster --workers=3 --started_file="$dir/started" \
  --stop_file="$dir/stop" >"$dir/workers.log" 2>&1 &
workers=$!
all_pids+=("$workers")
wait_for_file "$dir/started" 20 || { cat "$dir/workers.log"; fail "the Python workers did not start"; }

kill -KILL "${server_pids[$victim]}"
killed=$(date +%s.%N)
wait_ring $cluster "server $victim gone" "! grep -q '^  server $victim ' \"\$dir/ring.txt\""
failed_over=$(date +%s.%N)
sed -n 1p "$dir/ring.txt"
kill -0 "$workers" 2>/dev/null || { cat "$dir/workers.log"; fail "the workers stopped during the failover"; }

restart_server $victim
# Back in the chains: in the first line (the chains), not as a joining copy.
wait_ring $cluster "server $victim back in full chains" \
  "head -n 1 \"\$dir/ring.txt\" | grep -Eq '(: |-> )$victim( ->|;|\$)' && ! grep -q joining \"\$dir/ring.txt\""
rejoined=$(date +%s.%N)
sed -n 1p "$dir/ring.txt"
touch "$dir/stop"

wait "$workers" || { cat "$dir/workers.log"; fail "the Python workers failed"; }
cat "$dir/workers.log"
result=$(grep '^RESULT' "$dir/workers.log")
grep -q 'wrong_keys=0 wrong_rows=0' <<<"$result" || fail "wrong sums: $result"
retries=$(grep -c 'retrying' "$dir/workers.log" || true)
awk -v k="$killed" -v f="$failed_over" -v r="$rejoined" -v n="$retries" 'BEGIN {
  printf "server failed over %.2f s after the SIGKILL, rejoined %.2f s after that; %d calls retried\n", f - k, r - f, n }'
# A checkpoint of the replicated cluster from Python (the primary of shard 0
# coordinates).
checkpoint=$(PYTHONPATH="$root/python" /usr/bin/python3 -c "
import paramserver as ps
c = ps.checkpoint(etcd='$etcd_endpoint', cluster='$cluster', timeout=20)
print(c['path'], c['cut'])") || fail "paramserver.checkpoint(etcd=...) failed"
echo "checkpoint from Python: $checkpoint"
[ -f "${checkpoint%% *}/MANIFEST" ] || fail "no MANIFEST in the checkpoint Python reported: $checkpoint"
echo "PASS: every key exact after a server was killed and restarted under Python workers"
