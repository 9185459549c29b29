#!/usr/bin/env bash
# Tables larger than memory (issue 32's training job): the sparse LR and the
# embedding MLP on generated CTR-like data (ps_gen_libsvm, 4 fields), each
# trained twice on 2 servers and 2 workers, epoch by epoch with the test AUC
# after each:
#   memory: the sparse table all in memory, no memory budget;
#   tiered: the servers' memory budget set to 1/RATIO of what the memory
#     run's largest server held (ps_server --memory_budget_mb), the sparse
#     table tiered (ps_worker --tiered_cache_mb: half the budget; its rows
#     on disk under ps_server --table_dir).
# Prints RESULT lines (training seconds, AUC, the budget, the table's bytes
# against it, rows in memory and on disk, peak server RSS, and the RSS at the
# end as the servers' own memory and the table files they map) and plots each
# model's AUC against training time.
#
#   deploy/tier_experiment.sh [--examples N] [--features F] [--epochs E]
#       [--ratio R] [--models "sparse_lr embedding_mlp"] [--out DIR] [--data DIR]
set -euo pipefail
examples=2000000
features=10000000
test_examples=200000
epochs=2
ratio=5
models="sparse_lr embedding_mlp"
out="${TMPDIR:-/tmp}/ps_tier_experiment"
data="${TMPDIR:-/tmp}/ps_tier_data"
while [ $# -gt 0 ]; do
  case "$1" in
    --examples) examples="$2"; shift 2 ;;
    --features) features="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --ratio) ratio="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "tier_experiment.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
# shellcheck source=deploy/lib/experiment.sh
source deploy/lib/experiment.sh
experiment_setup tier "$out"
bazel build --ui_event_filters=-info --noshow_progress //worker:ps_gen_libsvm //tools:ps_admin
mkdir -p "$data"
raw="$out/tier_raw.txt"
: >"$raw"

# --- data (reused when present) ------------------------------------------------------
train="$data/train_e${examples}_f${features}.svm"
test="$data/test_e${examples}_f${features}_t${test_examples}.svm"
gen=(--features="$features" --num_fields=4 --progress_seconds=0)
[ -s "$train.planted.txt" ] ||
  "$bin/worker/ps_gen_libsvm" --out="$train" --examples="$examples" "${gen[@]}" | tail -1
[ -s "$test.planted.txt" ] ||
  "$bin/worker/ps_gen_libsvm" --out="$test" --examples="$test_examples" \
    --first_example="$examples" "${gen[@]}" | tail -1
planted=$(sed -n 's/^planted_auc=//p' "$test.planted.txt")
log "planted model's test AUC $planted; $(sed -n 's/^features_used=//p' "$train.planted.txt") distinct features"

# The largest MiB of parameters and optimizer state a server held, and the
# tiered tables' rows in memory and on disk, from ps_admin status.
status() { "$bin/tools/ps_admin" status --servers="$spec" >"$work/status.txt"; }
max_shard_mib() {
  awk '/^[0-9]+ +server/ { for (i = 1; i <= NF; i++) if ($i ~ /^\(/) { v = $(i - 1); if (v > m) m = v } }
       END { printf "%.1f", m }' "$work/status.txt"
}
tier_field() {  # tier_field N: column N of the tiered table's line
  awk -v n="$1" 'f && NF >= 6 { print $n; exit } /^tiered table/ { f = 1 }' "$work/status.txt"
}

# run MODEL MODE [server flags] -- [worker flags]: one run, epoch by epoch.
run() {
  local model=$1 mode=$2 server_flags=() worker_flags=() e w t0 t1 trained=0 auc="" kb peak=0
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do server_flags+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  worker_flags=("$@")
  start_servers "$bin" "$work" 2 "${server_flags[@]}"
  local flags=(--servers="$spec" --num_workers=2 --model="$model" --num_fields=4
    --train_data="$train" --test_data="$test" --batch_size=256 --epochs=1 --progress_seconds=30
    --optimizer=adagrad --learning_rate=0.05 "${worker_flags[@]}")
  : >"$work/$model.$mode.dat"
  for ((e = 1; e <= epochs; e++)); do
    t0=$(date +%s.%N)
    local pids=()
    for w in 0 1; do
      "$bin/worker/ps_worker" "${flags[@]}" --worker_index=$w --evaluate=false \
        >"$work/$model.$mode.worker$w.log" 2>&1 &
      pids+=($!)
    done
    for w in 0 1; do
      wait "${pids[$w]}" || { tail -20 "$work/$model.$mode.worker$w.log" >&2; fail "$model $mode: worker $w failed"; }
    done
    t1=$(date +%s.%N)
    trained=$(awk -v a="$trained" -v b="$t0" -v c="$t1" 'BEGIN { printf "%.1f", a + c - b }')
    "$bin/worker/ps_worker" "${flags[@]}" --worker_index=0 --eval_only >"$work/eval.log" 2>&1 ||
      { tail -20 "$work/eval.log" >&2; fail "$model $mode: evaluation failed"; }
    auc=$(sed -n 's/^RESULT test_auc=\([0-9.]*\).*/\1/p' "$work/eval.log")
    echo "$trained $auc" >>"$work/$model.$mode.dat"
    log "$model $mode: epoch $e at $trained s, test AUC $auc"
  done
  status
  # Peak RSS, and the RSS at the end split into the process's own memory
  # (anonymous) and file pages it maps (a tiered table's segments, read
  # through mappings: the page cache, which the kernel can take back).
  local anon=0 file=0
  for p in "${server_pids[@]}"; do
    kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$p/status")
    [ "$kb" -gt "$peak" ] && peak=$kb
    kb=$(awk '/^RssAnon:/ { print $2 }' "/proc/$p/status")
    [ "$kb" -gt "$anon" ] && anon=$kb
    kb=$(awk '/^RssFile:/ { print $2 }' "/proc/$p/status")
    [ "$kb" -gt "$file" ] && file=$kb
  done
  shard_mib=$(max_shard_mib)
  local line="RESULT model=$model mode=$mode epochs=$epochs train_seconds=$trained test_auc=$auc"
  line+=" max_server_table_mib=$shard_mib peak_server_rss_mib=$((peak / 1024))"
  line+=" end_server_rss_anon_mib=$((anon / 1024)) end_server_rss_file_mib=$((file / 1024))"
  if [ "$mode" = tiered ]; then
    line+=" budget_mib=$budget cache_mib=$cache rows_in_memory=$(tier_field 2)"
    line+=" rows_on_disk=$(tier_field 3) disk_mib=$(tier_field 4) hit_rate=$(tier_field 5)"
  fi
  echo "$line" | tee -a "$raw"
  cp "$work/$model.$mode.dat" "$out/"
  stop_servers
}

for model in $models; do
  run "$model" memory
  whole=$shard_mib
  # The tiered run's budget: 1/ratio of the whole table's largest share.
  budget=$(awk -v t="$whole" -v r="$ratio" 'BEGIN { b = int(t / r); print (b < 4 ? 4 : b) }')
  cache=$(awk -v b="$budget" 'BEGIN { c = int(0.5 * b); print (c < 1 ? 1 : c) }')
  log "$model: the largest server held $whole MiB in memory; tiered: budget $budget MiB, cache $cache MiB"
  rm -rf "$work/tables"
  run "$model" tiered --memory_budget_mb="$budget" --table_dir="$work/tables" -- \
    --tiered_cache_mb="$cache"
  echo "RATIO model=$model whole_table_mib=$whole budget_mib=$budget table_over_budget=$(awk -v t="$whole" -v b="$budget" 'BEGIN { printf "%.2f", t / b }')" |
    tee -a "$raw"
  gnuplot <<PLOT
set terminal pngcairo size 800,450 noenhanced
set output "$out/$model.png"
set title "$model: test AUC after each epoch (tiered: memory budget 1/$ratio of the table)"
set xlabel "training seconds"
set ylabel "test AUC"
set xrange [0:*]
set key outside bottom center horizontal
plot "$out/$model.memory.dat" using 1:2 with linespoints pointtype 7 title "in memory", \
     "$out/$model.tiered.dat" using 1:2 with linespoints pointtype 5 title "tiered, budget $budget MiB", \
     $planted title "planted model" with lines dashtype 2
PLOT
done
log "results: $raw, $out/*.png"
