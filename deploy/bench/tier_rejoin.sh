#!/usr/bin/env bash
# What a replicated server's restart costs when its shards hold a tiered
# table (tier_client's: width 4, SGD, a 1 MiB cache a shard, --keys rows,
# default 1,000,000): two ps_server processes at --replicas=2 on this
# machine, one --table_dir, etcd; server 1 is stopped cleanly (SIGTERM: it
# keeps its copies on disk, and its predecessor catches it up from its
# history) or killed (SIGKILL: it is sent a snapshot of every row), the two
# alternated --runs times (default 2). While it is down a round of 20,000
# keys is pushed. Measured: from the new process's start (the kept copies
# are opened before it registers) to its last copy complete (its log's
# times, UTC), and what its predecessor sent
# (snapshot bytes, or the entries caught up); beside the loopback's TCP
# bandwidth measured in the same run (iperf3, 2 s), what a snapshot's bytes
# go over.
#
#   deploy/bench/tier_rejoin.sh [--keys N] [--runs N]
#
# Prints a line per run and a summary; the RESULT lines also go to
# $dir/results.txt (dir: /var/tmp/tier_rejoin, emptied).
set -euo pipefail
keys=1000000
runs=2
while [ $# -gt 0 ]; do
  case $1 in
    --keys) keys=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) echo "tier_rejoin.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/../.."
command -v etcd >/dev/null || { echo "tier_rejoin.sh: etcd is missing: run deploy/setup.sh" >&2; exit 1; }
bazel build --ui_event_filters=-info --noshow_progress //server:ps_server //tests:tier_client //tools:ps_admin
bin_dir="$(bazel info bazel-bin 2>/dev/null)"
dir=/var/tmp/tier_rejoin
rm -rf "$dir" && mkdir -p "$dir/tables"
# shellcheck source=deploy/lib/etcd.sh
source deploy/lib/etcd.sh
# shellcheck source=deploy/lib/servers.sh
source deploy/lib/servers.sh
all_pids=()
cleanup() { for p in "${all_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

loopback="(iperf3 missing)"
if command -v iperf3 >/dev/null; then
  iperf3 -s -1 -p 5299 >/dev/null 2>&1 &
  sleep 0.5
  loopback=$(iperf3 -c 127.0.0.1 -p 5299 -t 2 -J 2>/dev/null |
    /usr/bin/python3 -c 'import json,sys; print("%.0f MiB/s" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 8 / 2**20))') ||
    loopback="(iperf3 failed)"
fi

start_etcd "$dir" || fail "etcd did not start"
all_pids+=("$etcd_pid")
start_servers "$bin_dir" "$dir" 2 --etcd="$etcd_endpoint" --cluster=rejoin --replicas=2 \
  --lease_seconds=2 --table_dir="$dir/tables" --rejoin_grace_seconds=60
tier() { "$bin_dir/tests/tier_client" --etcd="$etcd_endpoint" --cluster=rejoin "$@"; }
full_chains() {  # until both chains have 2 servers and nobody joins (at most 60 s)
  local _
  for _ in $(seq 1 600); do
    "$bin_dir/tools/ps_admin" ring --etcd="$etcd_endpoint" --cluster=rejoin >"$dir/ring.txt" 2>/dev/null &&
      [ "$(grep -o ' -> ' "$dir/ring.txt" | wc -l)" = 2 ] && ! grep -q joining "$dir/ring.txt" && return 0
    sleep 0.1
  done
  fail "the ring did not heal: $(cat "$dir/ring.txt")"
}
full_chains
filled=$SECONDS
tier --keys="$keys" --mode=push --rounds=1 >/dev/null || fail "filling $keys keys failed"
echo "$keys rows pushed in about $((SECONDS - filled)) s; loopback TCP $loopback"

now_utc() { /usr/bin/python3 -c 'import datetime; print(datetime.datetime.utcnow().isoformat())'; }
# FROM START: seconds from START (UTC) to server 1's last copy complete after
# line FROM of its log.
measure() {
  tail -n "+$1" "$dir/server1.log" | /usr/bin/python3 -c '
import sys, datetime
t = lambda s: datetime.datetime.fromisoformat(s.rstrip("Z"))
start, end = t(sys.argv[1]), None
for line in sys.stdin:
    if "copy complete" in line or "copy caught up" in line: end = t(line.split(" ")[0])
print("%.3f" % (end - start).total_seconds() if end else "nan")' "$2"
}
: >"$dir/results.txt"
for ((run = 1; run <= runs; run++)); do
  for mode in kept snapshot; do
    from1=$(($(wc -l <"$dir/server1.log") + 1))
    from0=$(($(wc -l <"$dir/server0.log") + 1))
    if [ "$mode" = kept ]; then kill -TERM "${server_pids[1]}"; else kill -KILL "${server_pids[1]}"; fi
    wait "${server_pids[1]}" 2>/dev/null || true
    tier --keys=20000 --mode=push --rounds=1 >/dev/null || fail "the round while server 1 is down failed"
    started=$(now_utc)
    restart_server 1
    full_chains
    seconds=$(measure "$from1" "$started")
    bytes=$(tail -n "+$from0" "$dir/server0.log" | sed -n 's/.*sent to server 1 (\([0-9]*\) bytes).*/\1/p' |
      awk '{ s += $1 } END { print s + 0 }')
    entries=$(tail -n "+$from0" "$dir/server0.log" | sed -n 's/.*server 1 holds a copy at .*catching it up with \([0-9]*\) entries.*/\1/p' |
      awk '{ s += $1 } END { print s + 0 }')
    line="RESULT mode=$mode run=$run keys=$keys rejoin_seconds=$seconds snapshot_bytes=$bytes caught_up_entries=$entries"
    echo "$line" | tee -a "$dir/results.txt"
  done
done
stop_servers
/usr/bin/python3 - "$dir/results.txt" "$loopback" <<'EOF'
import statistics, sys
rows = [dict(kv.split("=") for kv in l.split()[1:]) for l in open(sys.argv[1])]
med = lambda m, k: statistics.median(float(r[k]) for r in rows if r["mode"] == m)
kept, snap = med("kept", "rejoin_seconds"), med("snapshot", "rejoin_seconds")
print("summary: rejoin %.3f s with the kept copies (%.0f entries caught up), %.3f s by snapshot "
      "(%.1f MiB sent); %.1fx faster; loopback TCP %s"
      % (kept, med("kept", "caught_up_entries"), snap, med("snapshot", "snapshot_bytes") / 2**20,
         snap / kept if kept > 0 else float("nan"), sys.argv[2]))
EOF
