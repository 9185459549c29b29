#!/usr/bin/env bash
# Benchmarks of the data path and of training, each figure next to the limit
# of this machine measured in the same run:
#   - loopback TCP bandwidth (iperf3, one stream), at the start and the end;
#   - memory bandwidth (a copy over arrays much larger than cache);
#   - server apply: SGD/AdaGrad over a large slice on one core (Google Benchmark);
#   - ps_bench: push/pull/push+pull of dense ranges and sparse key sets against
#     real ps_server processes (1 server + 1 client, then 2 + 2);
#   - training: examples/s of the Fashion-MNIST MLP in one process (local
#     store), with 1 server + 1 worker and 2 + 2, and PyTorch on CPU.
# Writes a Markdown report and a PNG plot to the output directory.
#
#   deploy/bench.sh [--out DIR] [--seconds S] [--quick]
#
# With --baseline REV it compares instead this tree's data path with commit
# REV's, alternating, in one run (deploy/bench_compare.sh; see its --help):
#   deploy/bench.sh --baseline c55ddf1 [--rounds N] [--seconds S] [--out DIR]
set -euo pipefail
for arg in "$@"; do
  if [ "$arg" = --baseline ]; then exec "$(dirname "$0")/bench_compare.sh" "$@"; fi
done

out="${TMPDIR:-/tmp}/ps_bench_results"
seconds=2
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --quick) quick=1; seconds=0.5; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/.."
source deploy/lib/servers.sh
source deploy/lib/limits.sh
deploy/setup.sh --bench
bazel build --ui_event_filters=-info --noshow_progress //server:ps_server //worker:ps_worker \
  //common/optimizer:optimizer_bench //deploy/bench:ps_bench //deploy/bench:train_bench
bin="$(bazel info bazel-bin 2>/dev/null)"
bench_dirs "$out" ps_bench
log() { echo "bench.sh: $*" >&2; }

# --- machine limits -------------------------------------------------------
log "iperf3 loopback, single stream"
iperf_start=$(iperf_gbps)
echo "LIMIT iperf3_start_gbytes_per_s=$iperf_start" | tee -a "$raw"

log "memory bandwidth and server apply (Google Benchmark)"
"$bin/common/optimizer/optimizer_bench" --benchmark_min_time=0.5 --benchmark_format=json 2>/dev/null |
  awk -F'"' '/"name":/ { name = $4 }
             /"bytes_per_second":/ { split($3, v, /[:,]/); printf "APPLY name=%s bytes_per_s=%s\n", name, v[2] + 0 }' |
  tee -a "$raw"

# --- ps_bench against real server processes ---------------------------------
log "ps_bench: 1 server, 1 client"
start_servers "$bin" "$work" 1
"$bin/deploy/bench/ps_bench" --servers="$spec" --clients=1 --seconds="$seconds" | tee -a "$raw"
stop_servers
log "ps_bench: 2 servers, 2 clients"
start_servers "$bin" "$work" 2
"$bin/deploy/bench/ps_bench" --servers="$spec" --clients=2 --seconds="$seconds" \
  --ops=pushpull --small_inflight=0 --sparse_widths=1 | tee -a "$raw"
stop_servers

# --- training -----------------------------------------------------------------
epochs=1
[ "$quick" = 1 ] && train_limit="--max_train_examples=12000" || train_limit=""
cluster_train() {  # cluster_train S W N -> examples/s summed over workers
  local s=$1 w=$2 n=$3 i
  start_servers "$bin" "$work" "$s"
  local wpids=()
  for ((i = 0; i < w; i++)); do
    "$bin/worker/ps_worker" --servers="$spec" --worker_index="$i" --num_workers="$w" \
      --epochs="$epochs" --n_fetch="$n" --n_push="$n" --progress_seconds=100 $train_limit \
      >"$work/worker$i.log" 2>&1 &
    wpids+=($!)
  done
  for pid in "${wpids[@]}"; do wait "$pid"; done
  stop_servers
  cat "$work"/worker*.log | sed -n 's/.*done: .*(\([0-9.]*\) examples\/s).*/\1/p' |
    awk '{ s += $1 } END { print s }'
  rm -f "$work"/worker*.log
}
for n in 1 4; do
  log "training: in-process local store, n_fetch = n_push = $n"
  "$bin/deploy/bench/train_bench" --n_sync="$n" --epochs="$epochs" | grep '^RESULT' | tee -a "$raw"
  for sw in "1 1" "2 2"; do
    set -- $sw
    log "training: $1 server(s) + $2 worker(s), n_fetch = n_push = $n"
    echo "TRAIN mode=cluster servers=$1 workers=$2 n_sync=$n examples_per_second=$(cluster_train "$1" "$2" "$n")" | tee -a "$raw"
  done
done
log "training: in-process, one thread, no overlap (the like-for-like PyTorch comparison)"
"$bin/deploy/bench/train_bench" --overlap=false --epochs="$epochs" | grep '^RESULT' | tee -a "$raw"
log "training: PyTorch on CPU, 1 thread (OPENBLAS_CORETYPE/L2_SIZE unset for this run)"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 deploy/torch_mlp_baseline.py \
  --threads 1 --epochs "$epochs" | grep '^RESULT' | tee -a "$raw"

iperf_end=$(iperf_gbps)
echo "LIMIT iperf3_end_gbytes_per_s=$iperf_end" | tee -a "$raw"

# --- report -------------------------------------------------------------------
deploy/bench_report.sh "$raw" "$out"
