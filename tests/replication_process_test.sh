#!/usr/bin/env bash
# No acknowledged update lost, none applied twice, under SIGKILL: a real etcd,
# 3 ps_server processes with --replicas=2, and 4 workers (exact_sum_client)
# each pushing +1 to every one of 20000 keys; one server is killed with
# SIGKILL at a moment drawn from the seed, for 10 seeds. Every key must end
# at exactly workers * pushes.
set -euo pipefail
source "$(dirname "$0")/cluster_lib.sh"
source "$root/deploy/lib/etcd.sh"
client_bin="$root/tests/exact_sum_client"

start_etcd "$dir" || fail "etcd did not start"
all_pids+=("$etcd_pid")
echo "etcd at $etcd_endpoint"

seeds=${REPLICATION_SEEDS:-10}
pushes=2500
summary=()
for ((seed = 1; seed <= seeds; seed++)); do
  RANDOM=$seed
  victim=$((RANDOM % 3))
  delay_ms=$((100 + RANDOM % 900))
  cluster="sum$seed"
  start_servers 3 --etcd="$etcd_endpoint" --cluster="$cluster" --replicas=2 --lease_seconds=2
  rm -f "$dir/started"
  "$client_bin" --etcd="$etcd_endpoint" --cluster="$cluster" --workers=4 --pushes=$pushes \
    --keys=20000 --started_file="$dir/started" >"$dir/client$seed.log" 2>&1 &
  client=$!
  all_pids+=("$client")
  for _ in $(seq 1 400); do [ -e "$dir/started" ] && break; sleep 0.05; done
  [ -e "$dir/started" ] || { cat "$dir/client$seed.log"; fail "seed $seed: the workers did not start"; }
  # The fault's moment, drawn from the seed (not a synchronisation).
  sleep "$(printf '0.%03d' "$delay_ms")"
  kill -0 "$client" 2>/dev/null || fail "seed $seed: the run ended before the kill; raise pushes"
  kill -KILL "${server_pids[$victim]}"
  wait "$client" || { cat "$dir/client$seed.log"; tail -n 20 "$dir"/server*.log; fail "seed $seed: exact sum failed"; }
  result=$(grep '^RESULT' "$dir/client$seed.log")
  echo "seed $seed: killed server $victim after ${delay_ms} ms: $result"
  grep -q 'wrong=0 ' <<<"$result" || fail "seed $seed: wrong sums"
  retries=$(grep -c 'retrying' "$dir/client$seed.log" || true)
  summary+=("seed=$seed victim=$victim delay_ms=$delay_ms retried_calls=$retries $(sed 's/^RESULT //' <<<"$result")")
  for p in "${server_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${server_pids[@]}"; do wait "$p" 2>/dev/null || true; done
done
printf '%s\n' "${summary[@]}" > "${TEST_UNDECLARED_OUTPUTS_DIR:-$dir}/replication_summary.txt"
echo "PASS: $seeds seeds, every key exact after a SIGKILL"
