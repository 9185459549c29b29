#!/usr/bin/env bash
# Downpour SGD against model averaging (SparkNet), elastic averaging (EASGD)
# and hierarchical aggregation (MXNet; hier_*: the 4 workers as 2 processes
# of 2 threads, each process pushing its threads' sum and sharing one
# pull): 2 servers and 4 workers, the same epochs and optimizer flags for
# every setting (Downpour: the servers' optimizer; averaging: the workers'
# local steps). Dense settings train the Fashion-MNIST MLP; settings named
# lr_* and emb_* train sparse LR and the embedding MLP on generated LibSVM
# data (ps_gen_libsvm: 220K examples, the last 20K held out). For each
# setting it records the test accuracy (MLP) or AUC (sparse models) of the
# servers' parameters at the end, the wall time, and the parameter bytes
# (dense) or keys (sparse) the workers moved; worker 0's training loss is
# plotted against wall time and against the bytes it had moved (dense).
# Writes a Markdown table, the raw lines and a gnuplot PNG to the output
# directory.
#
#   deploy/averaging_experiment.sh [--out DIR] [--epochs 3] [--settings "NAME ..."]
#
# Settings: downpour_async downpour_bsp average1_bsp average10_bsp
# average50_bsp average50_async easgd10_async easgd10_bsp (average50_bsp: tau
# = 50, synchronous) hier_async hier_bsp downpour_bspreduce hier_bspreduce
# (*_bspreduce: BSP with the servers' deterministic reduction); lr_downpour lr_average50 lr_easgd10 emb_downpour
# emb_average50 emb_easgd10 (asynchronous: sparse models are).
set -euo pipefail

out="${TMPDIR:-/tmp}/ps_averaging"
epochs=3
settings="downpour_async downpour_bsp average1_bsp average10_bsp average50_bsp average50_async easgd10_async easgd10_bsp hier_async hier_bsp downpour_bspreduce hier_bspreduce"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --settings) settings="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "averaging_experiment.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/.."
source deploy/lib/experiment.sh
experiment_setup averaging "$out"

flags_of() {  # flags_of SETTING -> the ps_worker flags of the setting
  local s=$1 algorithm tau consistency
  consistency=${s##*_}
  case "$s" in
    lr_*|emb_*)
      local model=sparse_lr extra="--optimizer=adagrad --learning_rate=0.1"
      [ "${s%%_*}" = emb ] && model=embedding_mlp extra="--optimizer=adagrad --learning_rate=0.05 --num_fields=4"
      s=${s#*_}
      case "$s" in
        downpour) algorithm="--algorithm=downpour" ;;
        *) algorithm=${s%%[0-9]*}; tau=${s#"$algorithm"}
           algorithm="--algorithm=$algorithm --average_every=$tau --easgd_alpha=0.1" ;;
      esac
      echo "--model=$model $extra $algorithm --train_data=$data/$model.train --test_data=$data/$model.test" ;;
    downpour_bspreduce) echo "--algorithm=downpour --consistency=bsp --bsp_reduce" ;;
    hier_bspreduce) echo "--algorithm=downpour --consistency=bsp --bsp_reduce --local_workers=2 --local_aggregation" ;;
    downpour_*) echo "--algorithm=downpour --consistency=$consistency" ;;
    hier_*) echo "--algorithm=downpour --consistency=$consistency --local_workers=2 --local_aggregation" ;;
    average*|easgd*)
      algorithm=${s%%[0-9]*}
      tau=${s#"$algorithm"}; tau=${tau%%_*}
      echo "--algorithm=$algorithm --average_every=$tau --easgd_alpha=0.1 --consistency=$consistency" ;;
    *) echo "averaging_experiment.sh: unknown setting '$s'" >&2; return 1 ;;
  esac
}

# Generated LibSVM data for the sparse settings: one planted model, the last
# 20K examples held out.
data="$work/data"
if [[ " $settings " == *" lr_"* || " $settings " == *" emb_"* ]]; then
  bazel build --ui_event_filters=-info --noshow_progress //worker:ps_gen_libsvm
  mkdir -p "$data"
  for model in sparse_lr embedding_mlp; do
    fields=0; [ "$model" = embedding_mlp ] && fields=4
    "$bin/worker/ps_gen_libsvm" --examples=220000 --features=100000 --num_fields=$fields --seed=1 \
      --out="$data/$model.all" >/dev/null 2>&1
    head -200000 "$data/$model.all" > "$data/$model.train"
    tail -20000 "$data/$model.all" > "$data/$model.test"
  done
fi

raw="$out/averaging_raw.txt"
: > "$raw"
echo "MACHINE cores=$(nproc) mem_gib=$(awk '/MemTotal/ {printf "%.0f", $2/1048576}' /proc/meminfo) commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes) date=$(date -u +%Y-%m-%d)" | tee -a "$raw"
for setting in $settings; do
  read -r -a flags <<< "$(flags_of "$setting")"
  log "$setting: ${flags[*]}"
  start_servers "$bin" "$work" 2
  if [[ "$setting" == lr_* || "$setting" == emb_* ]]; then
    start=$(date +%s.%N)
    pids=()
    for w in 0 1 2 3; do
      "$bin/worker/ps_worker" --servers="$spec" --worker_index=$w --num_workers=4 \
        --epochs="$epochs" --evaluate=false "${flags[@]}" >"$work/worker$w.log" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    auc=$("$bin/worker/ps_worker" --servers="$spec" --eval_only "${flags[@]}" 2>/dev/null |
          sed -n 's/^RESULT test_auc=\([0-9.]*\).*/\1/p')
    stop_servers
    keys=$(cat "$work"/worker?.log | sed -n 's/^RESULT worker=.* keys_pulled=\([0-9]*\) keys_pushed=\([0-9]*\).*/\1 \2/p' |
           awk '{ s += $1 + $2 } END { printf "%.0f", s }')
    echo "RESULT setting=$setting test_auc=$auc wall_seconds=$seconds keys_moved=$keys epochs=$epochs" | tee -a "$raw"
    continue
  fi
  # hier_*: the 4 workers as 2 processes ("hosts") of 2 threads each.
  procs=4
  [[ "$setting" == hier_* ]] && procs=2
  start=$(date +%s.%N)
  pids=()
  for ((w = 0; w < procs; w++)); do
    "$bin/worker/ps_worker" --servers="$spec" --worker_index=$w --num_workers=$procs --model=mlp \
      --epochs="$epochs" --progress_seconds=0.5 --curve_csv="$work/curve$w.csv" \
      --evaluate=false "${flags[@]}" >"$work/worker$w.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  # The evaluator names the algorithm too: the tables' definition follows it.
  acc=$("$bin/worker/ps_worker" --servers="$spec" --model=mlp --eval_only "${flags[@]}" 2>/dev/null |
        sed -n 's/^RESULT test_accuracy=//p')
  stop_servers
  # Bytes to and from the servers over the four workers (with local
  # aggregation, the hosts' lines: what their aggregators sent), and worker
  # 0's (or host 0's) per step of worker 0, for the plot.
  who="worker"
  [[ "$setting" == hier_* ]] && who="host"
  bytes=$(cat "$work"/worker?.log | sed -n "s/^RESULT $who=.*value_bytes_pushed=\([0-9]*\) value_bytes_pulled=\([0-9]*\).*/\1 \2/p" |
          awk '{ s += $1 + $2 } END { printf "%.0f", s }')
  steps0=$(tail -1 "$work/curve0.csv" | cut -d, -f3)
  bytes0=$(sed -n "s/^RESULT $who=0 .*value_bytes_pushed=\([0-9]*\) value_bytes_pulled=\([0-9]*\).*/\1 \2/p" "$work/worker0.log" |
           awk '{ printf "%.0f", $1 + $2 }')
  awk -F, -v per_step="$(awk -v b="$bytes0" -v s="$steps0" 'BEGIN { print b / s }')" \
    '{ printf "%s %s %.0f\n", $1, $5, $3 * per_step }' "$work/curve0.csv" > "$out/curve_$setting.dat"
  echo "RESULT setting=$setting test_accuracy=$acc wall_seconds=$seconds value_bytes=$bytes epochs=$epochs" | tee -a "$raw"
done

# --- report -------------------------------------------------------------------
report="$out/averaging_report.md"
v() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }  # field $1 of the current $line
base=$(sed -n 's/^RESULT setting=downpour_async .*value_bytes=\([0-9]*\).*/\1/p' "$raw")
{
  echo "# Downpour, model averaging, EASGD and hierarchical aggregation on the Fashion-MNIST MLP"
  echo
  echo "2 servers, 4 workers, $epochs epochs, batch 32, AdaGrad (lr 0.05) on the servers (Downpour) or in the local steps (averaging). $(sed -n 's/^MACHINE //p' "$raw")."
  echo
  echo "| setting | flags | test accuracy | wall time (s) | parameter bytes moved | vs Downpour async |"
  echo "|---|---|---|---|---|---|"
  while read -r line; do
    s=$(v setting)
    ratio=$(awk -v b="$(v value_bytes)" -v d="${base:-0}" 'BEGIN { if (d > 0) printf "%.3f", b / d; else print "n/a" }')
    echo "| $s | \`$(flags_of "$s")\` | $(v test_accuracy) | $(v wall_seconds) | $(awk -v b="$(v value_bytes)" 'BEGIN { printf "%.1f MB", b / 1e6 }') | $ratio |"
  done < <(grep '^RESULT setting=' "$raw" | grep -v 'test_auc=')
  if grep -q 'test_auc=' "$raw"; then
    echo
    echo "Sparse models, asynchronous, 200K generated examples (the planted model's AUC is in ps_gen_libsvm's output):"
    echo
    echo "| setting | flags | test AUC | wall time (s) | keys pulled and pushed |"
    echo "|---|---|---|---|---|"
    while read -r line; do
      s=$(v setting)
      echo "| $s | \`$(flags_of "$s" | sed 's/ --train_data.*//')\` | $(v test_auc) | $(v wall_seconds) | $(v keys_moved) |"
    done < <(grep '^RESULT setting=.*test_auc=' "$raw")
  fi
} > "$report"
dense_settings=""
for setting in $settings; do
  [[ "$setting" == lr_* || "$setting" == emb_* ]] || dense_settings+=" $setting"
done
if command -v gnuplot >/dev/null && [ -n "$dense_settings" ]; then
  plots_time="" plots_bytes=""
  for setting in $dense_settings; do
    plots_time+="\"$out/curve_$setting.dat\" using 1:2 with lines title \"$setting\", "
    plots_bytes+="\"$out/curve_$setting.dat\" using (\$3/1e6):2 with lines title \"$setting\", "
  done
  gnuplot <<GP
set terminal pngcairo size 1200,480 noenhanced
set output "$out/averaging.png"
set multiplot layout 1,2 title "MLP on Fashion-MNIST, 2 servers, 4 workers: worker 0's training loss"
set grid
set key top right
set xlabel "wall time (s)"
set ylabel "training loss"
plot ${plots_time%, }
set xlabel "parameter bytes worker 0 pushed and pulled (MB, log scale)"
set logscale x
plot ${plots_bytes%, }
unset multiplot
GP
fi
cat "$report"
log "wrote $report, $raw and $out/averaging.png"
