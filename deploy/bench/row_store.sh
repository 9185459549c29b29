#!/usr/bin/env bash
# The disk tier's stores (deploy/bench/row_store_bench: RocksDB and the
# project's own log) beside the disk's limits measured in the same run with
# fio on the same directory: sequential write bandwidth (1 MiB blocks) and
# random 4 KiB reads per second (direct I/O, one at a time and 16 in
# flight). Cold reads (after dropping the page cache) need root. With
# --tier, the tiered table against the table in memory instead
# (deploy/bench/tier_bench.cc), at the servers' store and then through
# gRPC (--rpc), with the segment files in the page cache, then with them
# paged out before each block of requests (--cold: misses read the disk),
# and full checkpoints of the tiered table both ways (--checkpoints), beside
# the same fio figures.
#
#   deploy/bench/row_store.sh [--dir DIR] [--tier] [row_store_bench or tier_bench flags...]
#
# Prints the bench's lines and a summary; the RESULT lines go to
# $DIR/results.txt.
set -euo pipefail
dir=/var/tmp/row_store_bench
bench=row_store_bench
if [ "${1:-}" = "--dir" ]; then dir="$2"; shift 2; fi
if [ "${1:-}" = "--tier" ]; then bench=tier_bench; shift; fi
cd "$(dirname "$0")/../.."
command -v fio >/dev/null || { echo "row_store.sh: fio is missing: run deploy/setup.sh --bench" >&2; exit 1; }
bazel build --ui_event_filters=-info --noshow_progress "//deploy/bench:$bench"
bin="$(bazel info bazel-bin 2>/dev/null)/deploy/bench/$bench"
mkdir -p "$dir"
fio_json() {  # NAME fio flags... -> the job's JSON on stdout
  local name=$1
  shift
  fio --name="$name" --directory="$dir" --size=1g --direct=1 --output-format=json "$@"
}
fio_figure() {  # FIELD (read/write) KEY (bw/iops) <json
  /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0][sys.argv[1]]; print(round(j[sys.argv[2]]))' "$1" "$2"
}
seq_write=$(fio_json seqwrite --rw=write --bs=1m --end_fsync=1 | fio_figure write bw)
rand_read1=$(fio_json randread --rw=randread --bs=4k --runtime=10 --time_based | fio_figure read iops)
rand_read16=$(fio_json randread16 --rw=randread --bs=4k --runtime=10 --time_based \
  --ioengine=libaio --iodepth=16 | fio_figure read iops)
rm -f "$dir"/seqwrite.* "$dir"/randread.* "$dir"/randread16.*
echo "row_store.sh: disk of $dir: sequential write $((seq_write / 1024)) MiB/s," \
  "random 4 KiB reads $rand_read1/s (one at a time), $rand_read16/s (16 in flight)"
echo "RESULT disk seq_write_mib_per_second=$((seq_write / 1024)) rand_read_iops_qd1=$rand_read1 rand_read_iops_qd16=$rand_read16" \
  >"$dir/results.txt"
if [ "$bench" = tier_bench ]; then
  # At the servers' store, then through the PushPull RPC of a worker.
  "$bin" --dir="$dir/stores" "$@" | tee -a "$dir/results.tmp"
  "$bin" --dir="$dir/stores" --rpc "$@" 2>"$dir/rpc_server.log" | tee -a "$dir/results.tmp" ||
    { echo "row_store.sh: tier_bench --rpc failed; see $dir/rpc_server.log" >&2; exit 1; }
  # Misses from the disk: fewer requests (each waits for ~50-100 reads).
  "$bin" --dir="$dir/stores" --cold --requests=500 "$@" | tee -a "$dir/results.tmp"
  # Full checkpoints: the rows on disk read into records, or left in a
  # snapshot of the store (linked), with the store in the page cache or not.
  "$bin" --dir="$dir/stores" --exponents=1.05 --checkpoints=3 "$@" | tee -a "$dir/results.tmp"
  "$bin" --dir="$dir/stores" --exponents=1.05 --checkpoints=3 --cold "$@" |
    tee -a "$dir/results.tmp"
else
  "$bin" --dir="$dir/stores" "$@" | tee -a "$dir/results.tmp"
fi
grep '^RESULT' "$dir/results.tmp" >>"$dir/results.txt"
rm -f "$dir/results.tmp"
echo "row_store.sh: RESULT lines in $dir/results.txt"
