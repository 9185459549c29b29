#!/usr/bin/env bash
# Turns the raw lines of deploy/bench.sh into a Markdown report (report.md)
# and a plot (dense_throughput.png) in the output directory.
#   deploy/bench_report.sh RAW_FILE OUT_DIR
set -euo pipefail
raw="$1"
out="$2"
report="$out/report.md"

value() {  # value KEY LINE -> the value of key=value in the line
  echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"
}
iperf_start=$(sed -n 's/^LIMIT iperf3_start_gbytes_per_s=//p' "$raw")
iperf_end=$(sed -n 's/^LIMIT iperf3_end_gbytes_per_s=//p' "$raw")
net=$(awk -v a="$iperf_start" -v b="${iperf_end:-$iperf_start}" 'BEGIN { print (a + b) / 2 }')
membw=$(awk '/^APPLY name=BM_MemoryCopy / { split($3, a, "="); print a[2] / 1e9 }' "$raw")

{
  echo "# Benchmark report"
  echo
  echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(date -u +%Y-%m-%d)."
  echo
  echo "## Limits of this machine, measured in the same run"
  echo
  echo "| limit | GB/s |"
  echo "|---|---|"
  echo "| loopback TCP, iperf3 single stream, at start | $iperf_start |"
  echo "| loopback TCP, iperf3 single stream, at end | ${iperf_end:-n/a} |"
  echo "| memory copy (256 MiB arrays, read + write counted) | $membw |"
  echo
  echo "Network ratios below use the mean of the two iperf3 figures ($net GB/s)."
  echo
  echo "## Server apply (one core, Google Benchmark)"
  echo
  echo "| kernel | values | GB/s of memory touched | ratio to memory copy |"
  echo "|---|---|---|---|"
  grep '^APPLY name=BM_\(Sgd\|Adagrad\)' "$raw" | while read -r line; do
    name=$(value name "$line"); bps=$(value bytes_per_s "$line")
    awk -v n="$name" -v b="$bps" -v m="$membw" 'BEGIN {
      split(n, p, "/"); printf "| %s | %s | %.1f | %.2f |\n", p[1], p[2], b / 1e9, b / 1e9 / m }'
  done
  echo
  echo "## Push/pull (ps_bench against ps_server processes)"
  echo
  echo "| kind | op | values | width | servers | clients | in flight | ops/s | values/s | GB/s | ratio to iperf3 | p50 us | p99 us |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  grep '^RESULT kind=' "$raw" | while read -r line; do
    awk -v l="$line" -v net="$net" 'BEGIN {
      n = split(l, f, " "); for (i = 2; i <= n; i++) { split(f[i], kv, "="); v[kv[1]] = kv[2] }
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %s | %s |\n",
        v["kind"], v["op"], v["values"], v["width"], v["servers"], v["clients"], v["inflight"],
        v["ops_per_s"], v["values_per_s"], v["gbytes_per_s"], v["gbytes_per_s"] / net, v["p50_us"], v["p99_us"] }'
  done
  echo
  echo "## Training: Fashion-MNIST MLP 784-256-128-10, batch 32, AdaGrad, 1 epoch"
  echo
  echo "| setup | n_fetch = n_push | examples/s | ratio to in-process (same n) |"
  echo "|---|---|---|---|"
  for n in 1 4; do
    local_eps=$(grep "^RESULT mode=local .*n_sync=$n overlap=1" "$raw" | head -1 | tr ' ' '\n' | sed -n 's/^examples_per_second=//p')
    echo "| in-process, local store (overlap) | $n | $local_eps | 1.00 |"
    grep "^TRAIN mode=cluster .*n_sync=$n " "$raw" | while read -r line; do
      eps=$(value examples_per_second "$line")
      awk -v s="$(value servers "$line")" -v w="$(value workers "$line")" -v n="$n" -v e="$eps" -v l="$local_eps" \
        'BEGIN { printf "| %d server(s) + %d worker(s) | %d | %.0f | %.2f |\n", s, w, n, e, e / l }'
    done
  done
  single=$(grep '^RESULT mode=local .*overlap=0' "$raw" | tr ' ' '\n' | sed -n 's/^examples_per_second=//p')
  torch=$(grep '^RESULT framework=pytorch' "$raw" | tr ' ' '\n' | sed -n 's/^examples_per_second=//p')
  echo
  echo "| one process, one thread | examples/s |"
  echo "|---|---|"
  echo "| C++ trainer, local store, no overlap | $single |"
  echo "| PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null), 1 thread | $torch |"
  awk -v c="$single" -v t="$torch" 'BEGIN { if (t > 0) printf "\nC++ / PyTorch: %.2fx\n", c / t }'
} > "$report"

# Dense throughput of 1 server + 1 client by request size, with the iperf3 line.
dat="$out/dense.dat"
grep '^RESULT kind=dense .* servers=1 clients=1 inflight=1 ' "$raw" | awk -v net="$net" '
  { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    g[v["values"], v["op"]] = v["gbytes_per_s"]; sizes[v["values"]] = 1 }
  END { for (s in sizes) print s, g[s, "push"], g[s, "pull"], g[s, "pushpull"], net }' |
  sort -n > "$dat"
if command -v gnuplot >/dev/null && [ -s "$dat" ]; then
  gnuplot <<GP
set terminal pngcairo size 900,520 noenhanced
set output "$out/dense_throughput.png"
set title "Dense push/pull, 1 server + 1 client, payload GB/s (loopback)"
set xlabel "floats per request"
set ylabel "GB/s"
set logscale x 2
set format x "%.0f"
set key top left
set grid
plot "$dat" using 1:2 with linespoints title "push", \
     "$dat" using 1:3 with linespoints title "pull", \
     "$dat" using 1:4 with linespoints title "push+pull", \
     "$dat" using 1:5 with lines dashtype 2 title "iperf3 loopback (mean)"
GP
fi
echo "bench_report.sh: wrote $report${dat:+ and $out/dense_throughput.png}"
cat "$report"
