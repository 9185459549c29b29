#!/usr/bin/env bash
# Large-batch training with and without LARS (You et al., 2017) against batch
# 32, on the Fashion-MNIST MLP: 2 servers (every weight table spans both, so
# the norms LARS needs are of the whole layer) and one worker, the same
# epochs for every setting, each setting run --repeats times with seeds 1..N.
# Records each run's test accuracy, wall time and parameter bytes moved;
# plots the first run's training loss against wall time and against bytes.
# Writes a Markdown table, the raw lines and a gnuplot PNG to the output
# directory.
#
#   deploy/lars_experiment.sh [--out DIR] [--epochs 3] [--repeats 3] [--settings "NAME ..."]
#
# Settings (flags_of below has each one's flags): b32_sgd b32_momentum
# b32_adagrad (batch 32); b1024_sgd b1024_adagrad b1024_momentum (batch
# 1024, the plain rules, each at the best of a few rates tried on this
# machine); b1024_lars_momentum b1024_lars_nesterov (batch 1024, LARS).
set -euo pipefail

out="${TMPDIR:-/tmp}/ps_lars"
epochs=3
repeats=3
settings="b32_sgd b32_momentum b32_adagrad b1024_sgd b1024_adagrad b1024_momentum b1024_lars_momentum b1024_lars_nesterov"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --settings) settings="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "lars_experiment.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/.."
source deploy/lib/experiment.sh
experiment_setup lars "$out"

# A step decay once an epoch of batch 1024 (59 clocks), and a 10-clock
# warm-up for LARS, whose first steps are the largest.
decay="--lr_schedule=step --lr_step_clocks=59 --lr_gamma=0.3"
flags_of() {  # flags_of SETTING -> the ps_worker flags of the setting
  case "$1" in
    b32_sgd) echo "--batch_size=32 --optimizer=sgd --learning_rate=0.1" ;;
    b32_momentum) echo "--batch_size=32 --optimizer=momentum --momentum=0.9 --learning_rate=0.01" ;;
    b32_adagrad) echo "--batch_size=32 --optimizer=adagrad --learning_rate=0.05" ;;
    b1024_sgd) echo "--batch_size=1024 --optimizer=sgd --learning_rate=0.1" ;;
    b1024_adagrad) echo "--batch_size=1024 --optimizer=adagrad --learning_rate=0.05" ;;
    b1024_momentum) echo "--batch_size=1024 --optimizer=momentum --momentum=0.9 --learning_rate=0.2 $decay" ;;
    b1024_lars_momentum) echo "--batch_size=1024 --optimizer=momentum --momentum=0.9 --learning_rate=1 --lars_eta=0.02 --warmup_clocks=10 $decay" ;;
    b1024_lars_nesterov) echo "--batch_size=1024 --optimizer=nesterov --momentum=0.9 --learning_rate=1 --lars_eta=0.01 --warmup_clocks=10 $decay" ;;
    *) echo "lars_experiment.sh: unknown setting '$1'" >&2; return 1 ;;
  esac
}

raw="$out/lars_raw.txt"
: > "$raw"
echo "MACHINE cores=$(nproc) mem_gib=$(awk '/MemTotal/ {printf "%.0f", $2/1048576}' /proc/meminfo) commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes) date=$(date -u +%Y-%m-%d)" | tee -a "$raw"
for setting in $settings; do
  read -r -a flags <<< "$(flags_of "$setting")"
  for ((seed = 1; seed <= repeats; seed++)); do
    log "$setting seed $seed: ${flags[*]}"
    start_servers "$bin" "$work" 2
    start=$(date +%s.%N)
    "$bin/worker/ps_worker" --servers="$spec" --model=mlp --epochs="$epochs" --seed="$seed" \
      --progress_seconds=0.2 --curve_csv="$work/curve.csv" "${flags[@]}" >"$work/worker.log" 2>&1 ||
      fail "$setting seed $seed: ps_worker failed: $(tail -n 3 "$work/worker.log")"
    seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    stop_servers
    acc=$(sed -n 's/^RESULT test_accuracy=//p' "$work/worker.log")
    bytes=$(sed -n 's/^RESULT worker=.*value_bytes_pushed=\([0-9]*\) value_bytes_pulled=\([0-9]*\).*/\1 \2/p' "$work/worker.log" |
            awk '{ printf "%.0f\n", $1 + $2 }')
    if [ "$seed" = 1 ]; then
      steps=$(tail -1 "$work/curve.csv" | cut -d, -f3)
      awk -F, -v per_step="$(awk -v b="$bytes" -v s="$steps" 'BEGIN { print b / s }')" \
        'NR > 1 { printf "%s %s %.0f\n", $1, $5, $3 * per_step }' "$work/curve.csv" > "$out/curve_$setting.dat"
    fi
    echo "RESULT setting=$setting seed=$seed test_accuracy=$acc wall_seconds=$seconds value_bytes=$bytes epochs=$epochs" | tee -a "$raw"
  done
done

# --- report -------------------------------------------------------------------
report="$out/lars_report.md"
{
  echo "# Batch 32 against batch 1,024, with and without LARS, on the Fashion-MNIST MLP"
  echo
  echo "2 servers, 1 worker, $epochs epochs, $repeats runs per setting (seeds 1..$repeats). $(sed -n 's/^MACHINE //p' "$raw")."
  echo
  echo "| setting | flags | test accuracy: mean (min, max) | wall time (s), mean | parameter bytes moved |"
  echo "|---|---|---|---|---|"
  for s in $settings; do
    grep "^RESULT setting=$s " "$raw" | awk -v s="$s" -v f="$(flags_of "$s")" '
      { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        a = v["test_accuracy"]; sum += a; secs += v["wall_seconds"]; n++
        if (n == 1 || a < lo) lo = a; if (n == 1 || a > hi) hi = a; bytes = v["value_bytes"] }
      END { printf "| %s | `%s` | %.4f (%.4f, %.4f) | %.1f | %.1f MB |\n", s, f, sum / n, lo, hi, secs / n, bytes / 1e6 }'
  done
} > "$report"
if command -v gnuplot >/dev/null; then
  plots_time="" plots_bytes=""
  for setting in $settings; do
    plots_time+="\"$out/curve_$setting.dat\" using 1:2 with lines title \"$setting\", "
    plots_bytes+="\"$out/curve_$setting.dat\" using (\$3/1e6):2 with lines title \"$setting\", "
  done
  gnuplot <<GP
set terminal pngcairo size 1200,480 noenhanced
set output "$out/lars.png"
set multiplot layout 1,2 title "MLP on Fashion-MNIST, 2 servers, 1 worker: training loss (seed 1)"
set grid
set key top right
set yrange [0.2:1.2]
set xlabel "wall time (s)"
set ylabel "training loss"
plot ${plots_time%, }
set xlabel "parameter bytes pushed and pulled (MB, log scale)"
set logscale x
plot ${plots_bytes%, }
unset multiplot
GP
fi
cat "$report"
log "wrote $report, $raw and $out/lars.png"
