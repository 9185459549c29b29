#!/usr/bin/env bash
# Issue 30's measurements, in one run on this machine, beside its limits
# (loopback TCP by iperf3, memory copy by optimizer_bench's BM_MemoryCopy):
#
#   A. Model partitions: the MLP 784-H-H-10 (default H = 4096) under BSP,
#      one replica of K = 1 (a plain ps_worker), 2 and 4 processes (mpirun),
#      --steps steps of 32 examples each: per process the parameters held
#      (MiB of values), the peak resident memory, the step time, the
#      parameter bytes pulled and pushed and the activation bytes exchanged
#      per step, and the test accuracy.
#   B. The embedding MLP on generated CTR-like LibSVM data (--examples, 4
#      fields, Zipf ids): its dense layers on the servers (2 ps_worker
#      processes, Downpour) against kept by the workers and averaged by MPI
#      allreduce (--dense_sync=allreduce, 2 ranks) against PyTorch DDP (gloo,
#      2 processes, deploy/torch_ctr_ddp.py): time per epoch, bytes moved
#      per worker, test AUC. One epoch each, the same data and model.
#   C. How far K = 2 and 4 partitions' parameters drift from the whole
#      model's (in this process: deploy/bench/partition_divergence, the A
#      model) after 50 to 200 steps, beside a control: the whole model with
#      each image's brightest pixel 1e-6 brighter.
#
#   deploy/model_parallel_experiment.sh [--out DIR] [--hidden 4096] [--steps 100]
#                                       [--examples 500000] [--parts "A B C"]
#
# Writes OUT/raw.txt (every RESULT line), OUT/summary.md (the tables) and
# OUT/partitions.png, OUT/embedding.png, OUT/divergence.png (gnuplot).
set -euo pipefail

out="${TMPDIR:-/tmp}/ps_model_parallel"
hidden=4096
steps=100
examples=500000
parts="A B C"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --hidden) hidden="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --examples) examples="$2"; shift 2 ;;
    --parts) parts="$2"; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "model_parallel_experiment.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/.."
source deploy/lib/experiment.sh
source deploy/lib/limits.sh
source deploy/lib/mpi.sh
experiment_setup model_parallel "$out"
rm -f "$out"/partitions.* "$out"/embedding.* "$out"/divergence.*
bazel build --ui_event_filters=-info --noshow_progress //worker:ps_gen_libsvm \
  //common/optimizer:optimizer_bench //deploy/bench:partition_divergence
raw="$out/raw.txt"
summary="$out/summary.md"
: >"$raw"
echo "MACHINE cores=$(nproc) mem_gib=$(awk '/MemTotal/ {printf "%.0f", $2/1048576}' /proc/meminfo) commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes) date=$(date -u +%Y-%m-%d)" | tee -a "$raw"
log "machine limits: iperf3 loopback, memory copy"
echo "LIMIT iperf3_gbytes_per_s=$(iperf_gbps)" | tee -a "$raw"
"$bin/common/optimizer/optimizer_bench" --benchmark_filter=BM_MemoryCopy --benchmark_min_time=0.5 \
  --benchmark_format=json 2>/dev/null |
  awk -F'"' '/"bytes_per_second":/ { split($3, v, /[:,]/); printf "LIMIT memory_copy_gbytes_per_s=%.2f\n", v[2] / 1e9 }' |
  tee -a "$raw"

# field LINE NAME: NAME=value in LINE.
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"; }

# ---- A. model partitions ----------------------------------------------------
if [[ " $parts " == *" A "* ]]; then
  start_servers "$bin" "$work" 2
  common=(--servers="$spec" --model=mlp --hidden="$hidden,$hidden" --consistency=bsp --epochs=1
    --batch_size=32 --max_train_examples=$((steps * 32)) --progress_seconds=10)
  printf '| K | parameters held (MiB) | peak RSS (MiB) | step (ms) | parameter bytes / step | activation bytes / step | test accuracy |\n|---|---|---|---|---|---|---|\n' >"$out/partitions.md"
  : >"$out/partitions.dat"
  for k in 1 2 4; do
    log "partitions: K = $k, MLP 784-$hidden-$hidden-10, $steps steps"
    log_file="$work/k$k.log"
    if [ "$k" = 1 ]; then
      "$bin/worker/ps_worker" "${common[@]}" --table_prefix=k1 >"$log_file" 2>&1
      line=$(grep '^RESULT worker=0 ' "$log_file")
      params=$(sed -n 's/.*model mlp (\([0-9]*\) parameters).*/\1/p' "$log_file" | head -1)
      held=$params
      pulled=$(field "$line" value_bytes_pulled)
      pushed=$(field "$line" value_bytes_pushed)
      act=0
      rss=$(field "$line" peak_rss_mib)
    else
      mpi_run "$k" "$bin/worker/ps_worker" "${common[@]}" --table_prefix="k$k" --model_partitions="$k" >"$log_file" 2>&1
      line=$(grep '^RESULT worker=0 partition=0 ' "$log_file")
      held=$(field "$line" params_held)
      pulled=$(field "$line" value_bytes_pulled)
      pushed=$(field "$line" value_bytes_pushed)
      act=$(field "$line" activation_bytes)
      # The largest of the partitions' peaks.
      rss=$(grep '^RESULT worker=0 partition=' "$log_file" | sed 's/.* peak_rss_mib=\([0-9.]*\).*/\1/' | sort -g | tail -1)
    fi
    seconds=$(field "$line" seconds)
    accuracy=$(sed -n 's/^RESULT test_accuracy=\([0-9.]*\).*/\1/p' "$log_file")
    grep '^RESULT' "$log_file" | sed "s/^/K=$k /" >>"$raw"
    awk -v k="$k" -v h="$held" -v r="$rss" -v s="$seconds" -v n="$steps" -v pl="$pulled" -v ps="$pushed" \
      -v a="$act" -v acc="$accuracy" 'BEGIN {
        printf "| %d | %.1f | %.0f | %.1f | %.1f MB | %.2f MB | %s |\n", k, h * 4 / 1048576, r, 1000 * s / n,
          (pl + ps) / n / 1e6, a / n / 1e6, acc
        printf "%d %.2f %.1f %.2f %.3f\n", k, h * 4 / 1048576, r, 1000 * s / n, a / n / 1e6 > "/dev/stderr" }' \
      >>"$out/partitions.md" 2>>"$out/partitions.dat"
  done
  stop_servers
  gnuplot <<EOF
set terminal pngcairo size 900,420 noenhanced
set output "$out/partitions.png"
set multiplot layout 1,2 title "MLP 784-$hidden-$hidden-10 split in K partitions (BSP, one replica, this machine)"
set style data histograms
set style fill solid 0.8 border -1
set boxwidth 0.8
set ylabel "MiB per process"
set key top right
plot "$out/partitions.dat" using 2:xtic(sprintf("K=%d", \$1)) title "parameters held", '' using 3 title "peak RSS"
set ylabel "ms"
set yrange [0:*]
plot "$out/partitions.dat" using 4:xtic(sprintf("K=%d", \$1)) title "step time"
unset multiplot
EOF
fi

# ---- B. the embedding MLP: servers, allreduce, PyTorch DDP -------------------
if [[ " $parts " == *" B "* ]]; then
  gen=(--features=1000000 --num_fields=4 --seed=7 --progress_seconds=0)
  log "generating $examples training and $((examples / 10)) test examples"
  "$bin/worker/ps_gen_libsvm" --out="$work/train.svm" --examples="$examples" "${gen[@]}" | tee -a "$raw"
  "$bin/worker/ps_gen_libsvm" --out="$work/test.svm" --examples=$((examples / 10)) \
    --first_example="$examples" "${gen[@]}" | tee -a "$raw"
  emb=(--model=embedding_mlp --num_fields=4 --train_data="$work/train.svm" --test_data="$work/test.svm"
    --epochs=1 --progress_seconds=10)
  printf '| dense layers | time per epoch (s) | MB per worker: dense | MB per worker: embedding rows | test AUC |\n|---|---|---|---|---|\n' >"$out/embedding.md"
  : >"$out/embedding.dat"
  # row NAME SECONDS DENSE_BYTES ROW_BYTES AUC
  row() {
    awk -v n="$1" -v s="$2" -v d="$3" -v r="$4" -v a="$5" 'BEGIN {
      printf "| %s | %.1f | %.1f | %.1f | %s |\n", n, s, d / 1e6, r / 1e6, a
      printf "\"%s\" %.2f %.3f %.3f %s\n", n, s, d / 1e6, r / 1e6, a > "/dev/stderr" }' \
      >>"$out/embedding.md" 2>>"$out/embedding.dat"
  }
  # The rows' bytes of a worker's RESULT line (pulled and pushed, width 8).
  row_bytes() { awk -v a="$(field "$1" keys_pulled)" -v b="$(field "$1" keys_pushed)" 'BEGIN { print (a + b) * 8 * 4 }'; }
  for mode in servers allreduce; do
    log "embedding MLP, dense layers: $mode"
    start_servers "$bin" "$work" 2
    log_file="$work/emb_$mode.log"
    if [ "$mode" = servers ]; then
      for w in 0 1; do
        "$bin/worker/ps_worker" --servers="$spec" "${emb[@]}" --worker_index="$w" --num_workers=2 \
          --evaluate=false >"$work/emb_servers$w.log" 2>&1 &
        all_pids+=($!)
        pids[w]=$!
      done
      for w in 0 1; do wait "${pids[w]}" || fail "all-on-servers worker $w failed"; done
      cat "$work"/emb_servers?.log >"$log_file"
      "$bin/worker/ps_worker" --servers="$spec" "${emb[@]}" --eval_only >>"$log_file" 2>&1
    else
      mpi_run 2 "$bin/worker/ps_worker" --servers="$spec" "${emb[@]}" --dense_sync=allreduce >"$log_file" 2>&1
    fi
    stop_servers
    line=$(grep '^RESULT worker=0 ' "$log_file")
    grep '^RESULT' "$log_file" | sed "s/^/EMB=$mode /" >>"$raw"
    row "$mode" "$(field "$line" seconds)" "$(field "$line" dense_bytes)" "$(row_bytes "$line")" \
      "$(sed -n 's/^RESULT test_auc=\([0-9.]*\).*/\1/p' "$log_file")"
  done
  log "embedding MLP: PyTorch DDP (gloo, 2 processes)"
  /usr/bin/python3 deploy/torch_ctr_ddp.py --train="$work/train.svm" --test="$work/test.svm" \
    --workers=2 --num_fields=4 --epochs=1 >"$work/ddp.log" 2>&1 || { tail "$work/ddp.log" >&2; fail "DDP failed"; }
  line=$(grep '^RESULT framework=pytorch_ddp' "$work/ddp.log")
  echo "$line" >>"$raw"
  ddp_steps=$(((examples / 2 + 31) / 32))
  ddp_bytes=$(awk -v b="$(field "$line" allreduce_bytes_per_step)" -v n="$ddp_steps" 'BEGIN { print b * n }')
  ddp_dense=$(awk -v p="$(field "$line" dense_params)" -v n="$ddp_steps" 'BEGIN { print 4 * p * n }')
  row "pytorch_ddp" "$(field "$line" seconds_per_epoch)" "$ddp_dense" \
    "$(awk -v a="$ddp_bytes" -v d="$ddp_dense" 'BEGIN { print a - d }')" "$(field "$line" test_auc)"
  gnuplot <<EOF
set terminal pngcairo size 900,420 noenhanced
set output "$out/embedding.png"
set multiplot layout 1,2 title "Embedding MLP, $examples examples, 2 workers (this machine)"
set style data histograms
set style fill solid 0.8 border -1
set ylabel "seconds per epoch"
set yrange [0:*]
plot "$out/embedding.dat" using 2:xtic(1) notitle
set ylabel "test AUC"
set yrange [0.5:*]
plot "$out/embedding.dat" using 5:xtic(1) notitle
unset multiplot
EOF
fi

# ---- C. drift of the partitions' parameters ----------------------------------
if [[ " $parts " == *" C "* ]]; then
  log "drift from the whole model, MLP 784-$hidden-$hidden-10 in this process"
  "$bin/deploy/bench/partition_divergence" --hidden="$hidden,$hidden" --steps=50,100,150,200 \
    --partitions=2,4 | tee -a "$raw" >"$work/divergence.txt"
  printf '| steps | control (pixels 1e-6 brighter) | K = 2 | K = 4 |\n|---|---|---|---|\n' >"$out/divergence.md"
  awk '{ for (i = 2; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] }
         d[v["steps"], v["k"]] = v["max_table_rel_diff"]
         if (!(v["steps"] in seen)) { seen[v["steps"]] = 1; order[++n] = v["steps"] } }
       END { for (i = 1; i <= n; ++i) { s = order[i]; printf "| %s | %s | %s | %s |\n", s, d[s, 0], d[s, 2], d[s, 4]
               printf "%s %s %s %s\n", s, d[s, 0], d[s, 2], d[s, 4] > "/dev/stderr" } }' \
    "$work/divergence.txt" >>"$out/divergence.md" 2>"$out/divergence.dat"
  gnuplot <<EOF
set terminal pngcairo size 700,420 noenhanced
set output "$out/divergence.png"
set title "MLP 784-$hidden-$hidden-10: parameters' distance from the whole model's"
set xlabel "steps (batch 32, AdaGrad 0.05)"
set ylabel "largest table |diff| / |whole|"
set logscale y
set format y "%.0e"
set key bottom right
plot "$out/divergence.dat" using 1:2 with linespoints title "control: pixels 1e-6 brighter", \
     '' using 1:3 with linespoints title "K = 2", '' using 1:4 with linespoints title "K = 4"
EOF
fi

{
  echo "# Model partitions and dense allreduce ($(date -u +%Y-%m-%d), $(nproc) cores)"
  echo
  grep '^LIMIT' "$raw" | sed 's/^/    /'
  [ -f "$out/partitions.md" ] && { echo; cat "$out/partitions.md"; }
  [ -f "$out/embedding.md" ] && { echo; cat "$out/embedding.md"; }
  [ -f "$out/divergence.md" ] && { echo; cat "$out/divergence.md"; }
} >"$summary"
cat "$summary"
