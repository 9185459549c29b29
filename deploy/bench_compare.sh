#!/usr/bin/env bash
# The data path against an earlier commit, in one run on this machine
# (deploy/bench.sh --baseline REV calls this):
#   - builds ps_server, ps_worker and ps_bench of REV in a git worktree
#     (cached per machine under ~/.cache/paramserver-bench/REV);
#   - measures the machine's limits: iperf3 loopback (one stream) at the start
#     and the end, memory copy;
#   - for each of --rounds rounds, alternating which side goes first, runs
#     ps_bench against one ps_server of each side (1 server, 1 client): the
#     Downpour step on 1K floats (p50), 1K-float pushes with 16 in flight,
#     push+pull of 10,000 random keys, push+pull of 1M floats; and
#     deploy/local_cluster.sh of each side with its defaults;
#   - how cost grows: aggregate ops/s and keys/s of both sides with 1, 2, 4
#     and 8 clients against 1, 2 and 4 servers (ps_bench's CPU per operation
#     of each side with them);
#   - writes compare_report.md, compare_targets.png and compare_scaling.png
#     (deploy/bench_compare_report.py).
# --pin both|new|none (default none): the servers run pinned to the first half
# of the CPUs and ps_bench to the rest (taskset), on both sides, on the new
# side only (the project as docs/ops/tuning.md deploys it, against the
# baseline as it ran before), or on neither.
#
#   deploy/bench_compare.sh --baseline REV [--rounds N] [--seconds S] [--out DIR]
#                           [--no_cluster] [--no_scaling] [--pin both|new|none]
set -euo pipefail

baseline=""
rounds=3
seconds=2
out="${TMPDIR:-/tmp}/ps_bench_compare"
cluster=1
scaling=1
pin=none
while [ $# -gt 0 ]; do
  case "$1" in
    --baseline) baseline="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no_cluster) cluster=0; shift ;;
    --no_scaling) scaling=0; shift ;;
    --pin) pin="$2"; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "bench_compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$baseline" ] || { echo "bench_compare.sh: --baseline REV is required" >&2; exit 2; }
case "$pin" in
  both|new|none) ;;
  *) echo "bench_compare.sh: --pin $pin: want both, new or none" >&2; exit 2 ;;
esac
[ "$rounds" -ge 1 ] 2>/dev/null || { echo "bench_compare.sh: --rounds=$rounds must be >= 1" >&2; exit 2; }

cd "$(dirname "$0")/.."
repo="$(pwd)"
source deploy/lib/servers.sh
source deploy/lib/limits.sh
deploy/setup.sh --bench
log() { echo "bench_compare.sh: $*" >&2; }

rev=$(git rev-parse --verify "$baseline^{commit}" 2>/dev/null) ||
  { echo "bench_compare.sh: --baseline $baseline is not a commit of this repository" >&2; exit 2; }
short=${rev:0:7}

# --- the two builds ------------------------------------------------------------
targets=(//server:ps_server //worker:ps_worker //deploy/bench:ps_bench)
log "building this tree"
bazel build --ui_event_filters=-info --noshow_progress "${targets[@]}" //common/optimizer:optimizer_bench
new_bin="$(bazel info bazel-bin 2>/dev/null)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/paramserver-bench"
base_tree="$cache/$short"
if [ ! -d "$base_tree/.git" ] && [ ! -f "$base_tree/.git" ]; then
  log "creating a worktree of $short in $base_tree"
  mkdir -p "$cache"
  git worktree prune
  git worktree add --detach "$base_tree" "$rev" >/dev/null
fi
log "building $short in its worktree (cached after the first run)"
(cd "$base_tree" && bazel build --ui_event_filters=-info --noshow_progress "${targets[@]}")
base_bin="$(cd "$base_tree" && bazel info bazel-bin 2>/dev/null)"

mkdir -p "$out"
raw="$out/compare_raw.txt"
: > "$raw"
work="$(mktemp -d "${TMPDIR:-/tmp}/ps_bench_compare.XXXXXX")"
stop_on_exit "$work"

# --- machine limits ------------------------------------------------------------
echo "MACHINE pin=$pin cores=$(nproc) mem_gib=$(awk '/MemTotal/ {printf "%.0f", $2/1048576}' /proc/meminfo) cpu=$(lscpu | sed -n 's/^Model name: *//p' | tr ' ' '_') baseline=$short new=$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes)" | tee -a "$raw"
log "iperf3 loopback, single stream"
echo "LIMIT iperf3_start_gbytes_per_s=$(iperf_gbps)" | tee -a "$raw"
log "memory copy"
"$new_bin/common/optimizer/optimizer_bench" --benchmark_filter=BM_MemoryCopy --benchmark_min_time=0.5 \
  --benchmark_format=json 2>/dev/null |
  awk -F'"' '/"bytes_per_second":/ { split($3, v, /[:,]/); printf "LIMIT memcopy_gbytes_per_s=%.2f\n", v[2] / 1e9; exit }' |
  tee -a "$raw"

# --- the data path, alternating ----------------------------------------------------
# The CPUs of each role when pinned: servers the first half, clients the rest.
cpus=$(nproc)
server_half="0-$(((cpus + 1) / 2 - 1))"
client_half="$(((cpus + 1) / 2))-$((cpus - 1))"
if [ "$pin" != none ] && [ "$cpus" -lt 2 ]; then
  echo "bench_compare.sh: --pin $pin needs 2 CPUs or more" >&2
  exit 2
fi
run_bench() {  # run_bench SIDE ROUND BIN_DIR SERVERS CLIENTS [ps_bench flags...]
  local side=$1 round=$2 bin=$3 servers=$4 clients=$5 client_pin=() pinned=no
  shift 5
  server_cpus=""
  if [ "$pin" = both ] || { [ "$pin" = new ] && [ "$side" = new ]; }; then
    server_cpus=$server_half
    client_pin=(taskset -c "$client_half")
    pinned=yes
  fi
  start_servers "$bin" "$work" "$servers"
  "${client_pin[@]}" "$bin/deploy/bench/ps_bench" --servers="$spec" --clients="$clients" \
    --seconds="$seconds" "$@" |
    sed -n "s/^RESULT /RESULT side=$side round=$round pinned=$pinned /p" | tee -a "$raw"
  stop_servers
}
cases=(--ops=pushpull "--dense_values=1024,1048576" --small_inflight=16 --sparse_widths=1)
for ((r = 1; r <= rounds; r++)); do
  order=("new $new_bin" "base $base_bin")
  [ $((r % 2)) -eq 0 ] && order=("base $base_bin" "new $new_bin")
  for entry in "${order[@]}"; do
    set -- $entry
    log "round $r/$rounds: ps_bench, $1"
    run_bench "$1" "$r" "$2" 1 1 "${cases[@]}"
  done
done

# --- deploy/local_cluster.sh with its defaults, alternating ------------------------
if [ "$cluster" = 1 ]; then
  for ((r = 1; r <= rounds; r++)); do
    order=("new $repo" "base $base_tree")
    [ $((r % 2)) -eq 0 ] && order=("base $base_tree" "new $repo")
    for entry in "${order[@]}"; do
      set -- $entry
      log "round $r/$rounds: local_cluster.sh, $1"
      line=$(cd "$2" && deploy/local_cluster.sh 2>&1 | grep 'RESULT servers=' | tail -1)
      [ -n "$line" ] || { echo "bench_compare.sh: local_cluster.sh of $1 printed no result" >&2; exit 1; }
      echo "CLUSTER side=$1 round=$r ${line#*RESULT }" | tee -a "$raw"
    done
  done
fi

# --- how cost grows ------------------------------------------------------------------
if [ "$scaling" = 1 ]; then
  for servers in 1 2 4; do
    for clients in 1 2 4 8; do
      for entry in "new $new_bin" "base $base_bin"; do
        set -- $entry
        log "scaling: $1, $servers server(s), $clients client(s)"
        run_bench "$1" 0 "$2" "$servers" "$clients" --ops=pushpull --dense_values=1024 \
          --small_inflight=0 --sparse_widths=1
      done
    done
  done
fi

echo "LIMIT iperf3_end_gbytes_per_s=$(iperf_gbps)" | tee -a "$raw"
/usr/bin/python3 deploy/bench_compare_report.py "$raw" "$out"
log "report: $out/compare_report.md"
