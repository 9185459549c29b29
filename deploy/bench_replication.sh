#!/usr/bin/env bash
# What replication costs on the data path: the same ps_bench cases as
# deploy/bench_compare.sh (1K- and 1M-float push+pull, 1K-float pushes with
# 16 in flight, push+pull of 10,000 random keys of a sparse and a hashed
# table) against two replicated clusters on one etcd, each of 2 servers and
# 2 shards: r=1 (each shard on one server) and r=2 (each shard on both: a
# push is applied on its primary, forwarded to the other server and
# acknowledged once that one applied it too). Rounds alternate which cluster
# goes first; the report gives each figure's median per side and r2 / r1,
# next to the loopback bandwidth (iperf3) measured in the same run.
#
#   deploy/bench_replication.sh [--rounds N] [--seconds S] [--out DIR] [--shards N]
#
# With --shards N it compares logical shard counts instead, both at r=1:
# 2 shards against N on the same 2 servers (what many small shards cost
# while the client sends one call per shard).
#
# Writes DIR/replication_report.md (default DIR: $TMPDIR/ps_bench_replication)
# and the raw RESULT lines (DIR/raw.txt).
set -euo pipefail
rounds=3
seconds=2
many_shards=""
out="${TMPDIR:-/tmp}/ps_bench_replication"
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --shards) many_shards="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "bench_replication.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ "$rounds" -ge 1 ] 2>/dev/null || { echo "bench_replication.sh: --rounds=$rounds must be >= 1" >&2; exit 2; }

cd "$(dirname "$0")/.."
source deploy/lib/servers.sh
source deploy/lib/limits.sh
source deploy/lib/etcd.sh
deploy/setup.sh --bench
bazel build --ui_event_filters=-info --noshow_progress //server:ps_server //deploy/bench:ps_bench
bin="$(bazel info bazel-bin 2>/dev/null)"
bench_dirs "$out" ps_bench_replication
log() { echo "bench_replication.sh: $*" >&2; }

echo "MACHINE cores=$(nproc) commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes)" | tee -a "$raw"
echo "LIMIT iperf3_start_gbytes_per_s=$(iperf_gbps)" | tee -a "$raw"
start_etcd "$work" || exit 1
all_pids+=("$etcd_pid")
# The two sides: a name (also the cluster's) and its ps_server flags.
names=(r1 r2)
flags=("--replicas=1 --shards=2" "--replicas=2 --shards=2")
if [ -n "$many_shards" ]; then
  [ "$many_shards" -ge 2 ] 2>/dev/null || { echo "bench_replication.sh: --shards=$many_shards must be >= 2" >&2; exit 2; }
  names=(s2 "s$many_shards")
  flags=("--replicas=1 --shards=2" "--replicas=1 --shards=$many_shards")
fi
for i in 0 1; do
  mkdir -p "$work/${names[$i]}"
  # shellcheck disable=SC2086  # the side's flags, separated by spaces: split on purpose
  start_servers "$bin" "$work/${names[$i]}" 2 --etcd="$etcd_endpoint" --cluster="${names[$i]}" \
    ${flags[$i]}
  echo "SIDE ${names[$i]} ${flags[$i]}" | tee -a "$raw"
done

cases=(--ops=pushpull "--dense_values=1024,1048576" --small_inflight=16 --sparse_widths=1)
for ((round = 1; round <= rounds; round++)); do
  order=("${names[0]}" "${names[1]}")
  ((round % 2 == 0)) && order=("${names[1]}" "${names[0]}")
  for side in "${order[@]}"; do
    log "round $round/$rounds: $side"
    "$bin/deploy/bench/ps_bench" --etcd="$etcd_endpoint" --cluster="$side" --clients=1 \
      --seconds="$seconds" "${cases[@]}" |
      sed -n "s/^RESULT /RESULT side=$side round=$round /p" | tee -a "$raw"
  done
done
echo "LIMIT iperf3_end_gbytes_per_s=$(iperf_gbps)" | tee -a "$raw"

/usr/bin/python3 - "$raw" "$out/replication_report.md" <<'EOF'
import statistics, sys
rows, limits, machine, sides = {}, {}, "", []
for line in open(sys.argv[1]):
    parts = line.split()
    if not parts:
        continue
    kv = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
    if parts[0] == "MACHINE":
        machine = line.strip()
    elif parts[0] == "SIDE":
        sides.append((parts[1], " ".join(parts[2:])))
    elif parts[0] == "LIMIT":
        limits.update(kv)
    elif parts[0] == "RESULT":
        key = (kv["kind"], kv["op"], kv["values"], kv["inflight"])
        rows.setdefault(key, {}).setdefault(kv["side"], []).append(kv)
(a_name, a_flags), (b_name, b_flags) = sides
out = ["# %s against %s (2 servers, one client)" % (b_name, a_name), "",
       machine, "", "- %s: ps_server %s" % (a_name, a_flags), "- %s: ps_server %s" % (b_name, b_flags), "",
       "Loopback (iperf3, one stream): %s GB/s at the start, %s GB/s at the end." %
       (limits.get("iperf3_start_gbytes_per_s"), limits.get("iperf3_end_gbytes_per_s")), "",
       "| case | figure | %s | %s | %s / %s |" % (a_name, b_name, b_name, a_name),
       "|---|---|---|---|---|"]
for (kind, op, values, inflight), by_side in sorted(rows.items()):
    if a_name not in by_side or b_name not in by_side:
        continue
    case = "%s %s %s values, %s in flight" % (kind, op, values, inflight)
    for figure in ("ops_per_s", "gbytes_per_s", "p50_us"):
        a = statistics.median(float(r[figure]) for r in by_side[a_name])
        b = statistics.median(float(r[figure]) for r in by_side[b_name])
        out.append("| %s | %s | %.4g | %.4g | %.2f |" % (case, figure, a, b, b / a if a else 0))
text = "\n".join(out) + "\n"
open(sys.argv[2], "w").write(text)
print(text)
EOF
log "report: $out/replication_report.md"
