#!/usr/bin/env bash
# The bounded-delay experiment of the Parameter Server paper (OSDI 2014,
# section 3.5), on Fashion-MNIST: 2 servers and 4 workers train the MLP, one
# worker computing 3x slower, with tau in {0 (BSP), 1, 2, 4, 8} and async.
# For each setting it records the wall time until the parameters on the
# servers reach the target test accuracy (an evaluator reads them every
# second) and the fraction of the workers' time spent waiting in pulls.
# Writes a Markdown table and a gnuplot PNG to the output directory.
#
#   deploy/consistency_experiment.sh [--out DIR] [--target 0.85] [--max_epochs 8]
set -euo pipefail

out="${TMPDIR:-/tmp}/ps_consistency"
target=0.85
max_epochs=8
settings="0 1 2 4 8 async"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --target) target="$2"; shift 2 ;;
    --max_epochs) max_epochs="$2"; shift 2 ;;
    --settings) settings="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "consistency_experiment.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/.."
source deploy/lib/experiment.sh
experiment_setup consistency "$out"

results="$out/results.txt"
: > "$results"
for setting in $settings; do
  if [ "$setting" = async ]; then mode=(--consistency=async); else mode=(--consistency=bounded --staleness="$setting"); fi
  all_pids=()
  start_servers "$bin" "$work" 2
  start=$(date +%s.%N)
  workers=()
  for w in 0 1 2 3; do
    slow=1; [ "$w" = 3 ] && slow=3
    "$bin/worker/ps_worker" --servers="$spec" --worker_index=$w --num_workers=4 --model=mlp \
      --epochs="$max_epochs" --slowdown=$slow "${mode[@]}" --progress_seconds=0.5 \
      >"$work/worker$w.log" 2>&1 &
    workers+=($!)
    all_pids+=($!)
  done
  # The evaluator: reads the servers' parameters every second.
  reached=""
  : > "$work/curve.txt"
  while true; do
    running=0
    for p in "${workers[@]}"; do kill -0 "$p" 2>/dev/null && running=1; done
    acc=$("$bin/worker/ps_worker" --servers="$spec" --model=mlp --eval_only 2>/dev/null |
          sed -n 's/^RESULT test_accuracy=//p' || true)
    now=$(date +%s.%N)
    elapsed=$(awk -v a="$start" -v b="$now" 'BEGIN { printf "%.2f", b - a }')
    [ -n "$acc" ] && echo "$elapsed $acc" >> "$work/curve.txt"
    if [ -n "$acc" ] && awk -v a="$acc" -v t="$target" 'BEGIN { exit !(a >= t) }'; then
      reached=$elapsed
      break
    fi
    [ "$running" = 1 ] || break
    sleep 1
  done
  # Stop the workers (they may still be training) and read their waiting.
  for p in "${workers[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${workers[@]}"; do wait "$p" 2>/dev/null || true; done
  cp "$work/curve.txt" "$out/curve_$setting.txt"
  # Idle fraction: time the workers' pulls waited over their training time,
  # from each worker's last progress line ("waited W s of T s").
  idle=$(for w in 0 1 2 3; do grep -o 'waited [0-9.]*s of [0-9.]*s' "$work/worker$w.log" | tail -1; done |
         awk '{ gsub(/s/, "", $2); gsub(/s/, "", $4); wait += $2; total += $4 }
              END { if (total > 0) printf "%.3f", wait / total; else print "n/a" }')
  straggler_idle=$(grep -o 'waited [0-9.]*s of [0-9.]*s' "$work/worker3.log" | tail -1 |
         awk '{ gsub(/s/, "", $2); gsub(/s/, "", $4); if ($4 > 0) printf "%.3f", $2 / $4 }')
  stats="idle_fraction=$idle straggler_idle_fraction=${straggler_idle:-n/a}"
  for p in "${all_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${all_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  all_pids=()
  line="setting=$setting reached_seconds=${reached:-none} final_accuracy=$(tail -1 "$out/curve_$setting.txt" | cut -d' ' -f2) $stats elapsed_seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
  echo "$line" | tee -a "$results"
done

# --- report -------------------------------------------------------------------
report="$out/report.md"
{
  echo "# Bounded delay on Fashion-MNIST (2 servers, 4 workers, worker 3 computes 3x slower)"
  echo
  echo "Target test accuracy $target; at most $max_epochs epochs; $(nproc) cores; $(date -u +%Y-%m-%d)."
  echo
  echo "| consistency | wall time to $target (s) | accuracy at stop | idle fraction, all workers | idle fraction, straggler |"
  echo "|---|---|---|---|---|"
  while read -r line; do
    v() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
    s=$(v setting)
    name="tau = $s"; [ "$s" = 0 ] && name="BSP (tau = 0)"; [ "$s" = async ] && name="async"
    echo "| $name | $(v reached_seconds) | $(v final_accuracy) | $(v idle_fraction) | $(v straggler_idle_fraction) |"
  done < "$results"
} > "$report"
dat="$out/plot.dat"
awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
       r = v["reached_seconds"] == "none" ? 0 : v["reached_seconds"];
       printf "\"%s\" %s %s\n", v["setting"] == "async" ? "async" : "tau=" v["setting"], r, v["idle_fraction"] }' \
  "$results" > "$dat"
if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set terminal pngcairo size 1000,450 noenhanced
set output "$out/bounded_delay.png"
set multiplot layout 1,2 title "4 workers (one 3x slower), 2 servers, MLP on Fashion-MNIST"
set style fill solid 0.6
set boxwidth 0.6
set grid ytics
set yrange [0:*]
set title "wall time to $target test accuracy (s)"
plot "$dat" using 0:2:xtic(1) with boxes notitle
set title "fraction of worker time waiting in pulls"
set yrange [0:1]
plot "$dat" using 0:3:xtic(1) with boxes notitle
unset multiplot
GP
fi
cat "$report"
echo "consistency_experiment.sh: wrote $report and $out/bounded_delay.png"
