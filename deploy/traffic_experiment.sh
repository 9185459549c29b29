#!/usr/bin/env bash
# Traffic reduction on and off (PS paper, section 4.2): trains the same job
# once per variant and reports, for each, the bytes that crossed the loopback
# interface while it trained (every byte servers and workers sent each other,
# with gRPC's and TCP's overhead; read from /proc/net/dev), the ratio to the
# baseline's bytes, the training time and the final test quality.
#
#   deploy/traffic_experiment.sh [--examples N] [--features F] [--epochs E]
#       [--servers S] [--workers W] [--out DIR] [--data DIR] [--skip_dense]
#
# Variants, sparse LR (FTRL) on generated LibSVM data, each worker one process
# for all epochs (so that key lists repeat across epochs too):
#   baseline; bf16 and f16 values (--wire_floats); key-list caching
#   (--key_caching); f16 + key caching; the significantly-modified filter
#   (--push_threshold=0.5); all three.
# Then the Fashion-MNIST MLP of local_cluster.sh with f32, bf16 and f16
# values (--skip_dense leaves it out). Writes traffic_raw.txt, traffic.md and
# traffic_bytes.png into --out (default docs/experiments/results).
set -euo pipefail
examples=1000000
features=10000000
test_examples=200000
epochs=2
servers=2
workers=4
out="docs/experiments/results"
data="${TMPDIR:-/tmp}/ps_traffic_data"
dense=1
while [ $# -gt 0 ]; do
  case "$1" in
    --examples) examples="$2"; shift 2 ;;
    --features) features="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --servers) servers="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    --skip_dense) dense=0; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "traffic_experiment.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
source deploy/lib/servers.sh
bazel build -c opt --ui_event_filters=-info --noshow_progress //server:ps_server //worker:ps_worker \
  //worker:ps_gen_libsvm
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
mkdir -p "$out" "$data"
work="$(mktemp -d "${TMPDIR:-/tmp}/ps_traffic.XXXXXX")"
stop_on_exit "$work"
log() { echo "traffic_experiment.sh: $*" >&2; }
lo_bytes() { awk '$1 == "lo:" { print $2 }' /proc/net/dev; }
raw="$out/traffic_raw.txt"
: >"$raw"

train="$data/train_e${examples}_f${features}.svm"
test="$data/test_e${examples}_f${features}_t${test_examples}.svm"
[ -s "$train.planted.txt" ] || "$bin/worker/ps_gen_libsvm" --out="$train" \
  --examples="$examples" --features="$features" --progress_seconds=0 | tail -1
[ -s "$test.planted.txt" ] || "$bin/worker/ps_gen_libsvm" --out="$test" \
  --examples="$test_examples" --first_example="$examples" --features="$features" \
  --progress_seconds=0 | tail -1
planted=$(sed -n 's/^planted_auc=//p' "$test.planted.txt")

# run_variant NAME MODEL_FLAGS...: fresh servers, W workers, then evaluation.
# Prints "NAME bytes seconds quality" into $raw.
run_variant() {
  local name=$1 w t0 t1 lo0 lo1 quality
  shift
  start_servers "$bin" "$work" "$servers"
  local flags=(--servers="$spec" --num_workers="$workers" --progress_seconds=30 "$@")
  local wpids=()
  lo0=$(lo_bytes)
  t0=$(date +%s.%N)
  for ((w = 0; w < workers; w++)); do
    "$bin/worker/ps_worker" "${flags[@]}" --worker_index=$w --evaluate=false \
      >"$work/$name.worker$w.log" 2>&1 &
    wpids+=($!)
  done
  for ((w = 0; w < workers; w++)); do
    wait "${wpids[$w]}" || { cat "$work/$name.worker$w.log" >&2; exit 1; }
  done
  t1=$(date +%s.%N)
  lo1=$(lo_bytes)
  "$bin/worker/ps_worker" "${flags[@]}" --worker_index=0 --eval_only >"$work/$name.eval.log" 2>&1 ||
    { cat "$work/$name.eval.log" >&2; exit 1; }
  quality=$(sed -n 's/^RESULT \(test_auc=[0-9.]*\).*/\1/p; s/^RESULT \(test_accuracy=[0-9.]*\)$/\1/p' \
    "$work/$name.eval.log" | head -1)
  stop_servers
  echo "$name bytes=$((lo1 - lo0)) seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') $quality" |
    tee -a "$raw"
}

sparse=(--model=sparse_lr --train_data="$train" --test_data="$test" --epochs="$epochs"
  --batch_size=256 --optimizer=ftrl --learning_rate=0.5 --l1=0.1 --l2=1)
log "sparse LR: $examples examples, $features feature ranks, $epochs epochs; planted AUC $planted"
run_variant sparse_baseline "${sparse[@]}"
run_variant sparse_bf16 "${sparse[@]}" --wire_floats=bf16
run_variant sparse_f16 "${sparse[@]}" --wire_floats=f16
run_variant sparse_key_caching "${sparse[@]}" --key_caching
run_variant sparse_f16_key_caching "${sparse[@]}" --wire_floats=f16 --key_caching
run_variant sparse_filter "${sparse[@]}" --push_threshold=0.5
run_variant sparse_all_three "${sparse[@]}" --wire_floats=f16 --key_caching --push_threshold=0.5
if [ "$dense" = 1 ]; then
  mlp=(--model=mlp --epochs=5 --batch_size=32)
  run_variant mlp_f32 "${mlp[@]}"
  run_variant mlp_bf16 "${mlp[@]}" --wire_floats=bf16
  run_variant mlp_f16 "${mlp[@]}" --wire_floats=f16
fi

# The table, with each variant's bytes against its baseline's.
{
  echo "| variant | bytes through loopback | vs. baseline | training seconds | test quality |"
  echo "|---|---|---|---|---|"
  awk '{
    split($2, b, "="); split($3, s, "="); bytes = b[2]
    base = ($1 ~ /^sparse/) ? "sparse_baseline" : "mlp_f32"
    if ($1 == base) ref[base] = bytes
    printf "| %s | %.1f MB | %.2fx | %s | %s |\n", $1, bytes / 1e6, bytes / ref[base], s[2], $4
  }' "$raw"
  echo
  echo "Planted model's test AUC (sparse): $planted. Machine: $(nproc) cores, $(uname -m)."
} >"$out/traffic.md"
cat "$out/traffic.md"
# Plotted as the ratio to each job's baseline (the two jobs differ 35x in bytes).
awk '{ split($2, b, "="); base = ($1 ~ /^sparse/) ? "sparse_baseline" : "mlp_f32"
       if ($1 == base) ref[base] = b[2]; printf "%s %.3f\n", $1, b[2] / ref[base] }' "$raw" \
  >"$work/ratio.dat"
gnuplot <<PLOT
set terminal pngcairo size 900,450 noenhanced
set output "$out/traffic_bytes.png"
set title "Bytes through loopback while training, against each job's baseline"
set ylabel "bytes / baseline bytes"
set yrange [0:1.1]
set style fill solid 0.6
set boxwidth 0.7
set xtics rotate by -30
set grid ytics
plot "$work/ratio.dat" using 0:2:xtic(1) with boxes notitle, \
     "" using 0:(\$2 + 0.04):(sprintf("%.2f", \$2)) with labels notitle
PLOT
log "results: $raw, $out/traffic.md, $out/traffic_bytes.png"
