#!/usr/bin/env bash
# Push+pull of 1M floats from Python against the C++ client, in one run.
#
# Starts 2 ps_server processes on 127.0.0.1 (kernel-chosen ports), then runs
# --rounds rounds; each round runs the C++ loop (cpp_pushpull: PsClient::PushPull
# of a 1M-float dense table) and the same loop in Python (py_pushpull.py:
# paramserver.Client.push_pull into a preallocated array), one process each
# for --seconds, alternating which goes first so that neither always gets
# the warmer machine. Prints every run, then ops/s and GB/s of each (median
# and range over the rounds) and the ratio Python / C++ (per round: median
# and range), next to the memory bandwidth measured in the same run
# (optimizer_bench's BM_MemoryCopy, as deploy/bench.sh reports it).
#
#   python/bench/pushpull_bench.sh [--rounds N] [--seconds S] [--values V] [--out FILE]
#
# The last line is machine-readable:
#   RESULT cpp_ops_per_s=... python_ops_per_s=... ratio_median=... ratio_min=...
#          ratio_max=... memcpy_gbytes_per_s=...
# Target (issue 13): ratio >= 0.90. The script reports whether it was met;
# it fails only when a run fails.
set -euo pipefail

rounds=5
seconds=3
values=1048576
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --values) values="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "pushpull_bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for pair in "rounds:$rounds" "values:$values"; do
  if ! [[ "${pair#*:}" =~ ^[1-9][0-9]*$ ]]; then
    echo "pushpull_bench.sh: --${pair%%:*}=${pair#*:} must be a positive integer" >&2; exit 2
  fi
done
if ! [[ "$seconds" =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
  echo "pushpull_bench.sh: --seconds=$seconds must be a positive number" >&2; exit 2
fi

cd "$(dirname "$0")/../.."
source deploy/lib/servers.sh
deploy/setup.sh
bazel build --ui_event_filters=-info --noshow_progress //server:ps_server \
  //common/optimizer:optimizer_bench //python/bench:cpp_pushpull //python:paramserver
bin="$(bazel info bazel-bin 2>/dev/null)"
python=/usr/bin/python3  # Debian's, which sees python3-numpy
work="$(mktemp -d "${TMPDIR:-/tmp}/pushpull_bench.XXXXXX")"
stop_on_exit "$work"
raw="${out:-$work/raw.txt}"
: > "$raw"
log() { echo "pushpull_bench.sh: $*" >&2; }

log "memory bandwidth (optimizer_bench BM_MemoryCopy: 256 MiB arrays, bytes read + written)"
membw=$("$bin/common/optimizer/optimizer_bench" --benchmark_filter='^BM_MemoryCopy$' \
    --benchmark_min_time=0.5 --benchmark_format=json 2>/dev/null |
  awk -F'"' '/"bytes_per_second":/ { split($3, v, /[:,]/); printf "%.2f", v[2] / 1e9; exit }')
echo "LIMIT memcpy_gbytes_per_s=$membw" | tee -a "$raw"

start_servers "$bin" "$work" 2
log "2 servers at $spec; $rounds round(s) of ${seconds}s each for C++ and Python, $values floats"
run_cpp() {
  "$bin/python/bench/cpp_pushpull" --servers="$spec" --values="$values" --seconds="$seconds" |
    sed "s/^RESULT /RESULT round=$1 /" | tee -a "$raw"
}
run_python() {
  PYTHONPATH="$PWD/python:$bin/python" "$python" python/bench/py_pushpull.py --servers="$spec" \
    --values="$values" --seconds="$seconds" | sed "s/^RESULT /RESULT round=$1 /" | tee -a "$raw"
}
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then run_cpp "$r"; run_python "$r"; else run_python "$r"; run_cpp "$r"; fi
done
stop_servers

# Per client: median and range of ops/s and GB/s; per round: Python / C++.
awk -v membw="$membw" -v target=0.90 '
  function field(name,   i, kv) {
    for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == name) return kv[2] }
    return ""
  }
  function sort(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
  }
  function median(a, n) { return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  /^RESULT round=/ {
    r = field("round"); c = field("client")
    ops[c, r] = field("ops_per_s"); gb[c, r] = field("gbytes_per_s"); p50[c, r] = field("p50_us")
    if (r > rounds) rounds = r
  }
  END {
    for (k = 1; k <= 2; k++) {
      c = k == 1 ? "cpp" : "python"
      for (r = 1; r <= rounds; r++) { o[r] = ops[c, r]; g[r] = gb[c, r]; l[r] = p50[c, r] }
      sort(o, rounds); sort(g, rounds); sort(l, rounds)
      med_ops[c] = median(o, rounds)
      printf "%-6s push+pull: %.1f ops/s (%.1f-%.1f), %.3f GB/s (%.3f-%.3f), p50 %.0f us, median of %d rounds\n",
        c, med_ops[c], o[1], o[rounds], median(g, rounds), g[1], g[rounds], median(l, rounds), rounds
    }
    for (r = 1; r <= rounds; r++) q[r] = ops["python", r] / ops["cpp", r]
    sort(q, rounds)
    printf "python / cpp: %.3f median of the rounds'"'"' ratios (range %.3f-%.3f); target %.2f %s\n",
      median(q, rounds), q[1], q[rounds], target, (median(q, rounds) >= target ? "met" : "NOT met")
    printf "memcpy bandwidth in this run: %s GB/s (bytes read + written)\n", membw
    printf "RESULT cpp_ops_per_s=%.1f python_ops_per_s=%.1f ratio_median=%.3f ratio_min=%.3f ratio_max=%.3f memcpy_gbytes_per_s=%s\n",
      med_ops["cpp"], med_ops["python"], median(q, rounds), q[1], q[rounds], membw
  }' "$raw" | tee -a "$raw"
[ -z "$out" ] || log "raw results in $out"
