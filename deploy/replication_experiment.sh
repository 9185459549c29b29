#!/usr/bin/env bash
# The throughput cost of replication: the exact-sum workload (4 workers, each
# pushing +1 to 20000 keys, 2500 times) on 3 servers with --replicas=1 and
# --replicas=2, runs alternated (3 each), against one etcd on loopback.
# Prints each run and the ratio of the medians (r=2 over r=1).
#
#   deploy/replication_experiment.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source deploy/lib/servers.sh
source deploy/lib/etcd.sh
bazel build --ui_event_filters=-info --noshow_progress //server:ps_server //tests:exact_sum_client
bin="$(bazel info bazel-bin 2>/dev/null)"
work="$(mktemp -d "${TMPDIR:-/tmp}/ps_replication.XXXXXX")"
stop_on_exit "$work"
start_etcd "$work"
all_pids+=("$etcd_pid")
declare -A rates
for round in 1 2 3; do
  for r in 1 2; do
    cluster="bench-r$r-$round"
    start_servers "$bin" "$work" 3 --etcd="$etcd_endpoint" --cluster="$cluster" --replicas="$r"
    line=$("$bin/tests/exact_sum_client" --etcd="$etcd_endpoint" --cluster="$cluster" \
      --workers=4 --pushes=2500 --keys=20000 | grep '^RESULT')
    rate=$(sed -n 's/.*pushes_per_second=\([0-9]*\).*/\1/p' <<<"$line")
    rates[$r]="${rates[$r]:-} $rate"
    echo "round $round r=$r: $line"
    stop_servers
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | sed -n 2p; }
m1=$(median "${rates[1]}")
m2=$(median "${rates[2]}")
awk -v a="$m1" -v b="$m2" 'BEGIN { printf "median pushes/s (each 20000 floats): r=1 %d, r=2 %d; r=2 / r=1 = %.2f\n", a, b, b / a }'
