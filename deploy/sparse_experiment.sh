#!/usr/bin/env bash
# Sparse logistic regression at scale, epoch by epoch: generates (or reuses)
# LibSVM data with a planted model (ps_gen_libsvm), starts S servers, runs W
# ps_worker --model=sparse_lr processes one epoch at a time and evaluates the
# weights after each epoch. Reports examples/s, keys/s, payload bytes, the
# bytes measured through the loopback interface, peak server memory and the
# test AUC against the planted model's, and plots AUC against training time.
#
#   deploy/sparse_experiment.sh [--examples N] [--features F] [--test_examples N]
#       [--test_first_example N] [--weight_stddev S] [--weight_shrink_rank R]
#       [--weight_shrink_exponent G] [--num_fields F] [--epochs E] [--servers S] [--workers W]
#       [--batch_size B] [--out DIR] [--data DIR] [-- extra ps_worker flags (optimizer)]
#
# Defaults are the acceptance run of issue 9: 5M examples over 10^8 feature
# ranks (about 10M distinct ids used), FTRL, 2 servers and 4 workers. The
# planted weights' spread shrinks beyond rank R (ps_gen_libsvm
# --weight_shrink_rank; 0: the same spread for every feature). The test set
# is the examples right after the training set's; --test_first_example picks
# another range of the same planted model, as a validation set for tuning.
# --num_fields F > 0 writes the same examples as field:index:value, F fields,
# and passes --num_fields=F to the workers (--model=embedding_mlp sums per
# field; sparse_lr ignores fields).
set -euo pipefail
examples=5000000
features=100000000
test_examples=500000
test_first=""
weight_stddev=0.55
shrink_rank=1000
shrink_exponent=0.5
num_fields=0
epochs=3
servers=2
workers=4
batch=256
out="${TMPDIR:-/tmp}/ps_sparse_experiment"
data="${TMPDIR:-/tmp}/ps_sparse_data"
# Chosen on a validation set (--test_first_example=20000000; README): the
# strong L2 keeps the weights of rare features, seen a few times, near 0.
extra=(--optimizer=ftrl --learning_rate=0.5 --l1=1 --l2=300)
while [ $# -gt 0 ]; do
  case "$1" in
    --examples) examples="$2"; shift 2 ;;
    --features) features="$2"; shift 2 ;;
    --test_examples) test_examples="$2"; shift 2 ;;
    --test_first_example) test_first="$2"; shift 2 ;;
    --weight_stddev) weight_stddev="$2"; shift 2 ;;
    --weight_shrink_rank) shrink_rank="$2"; shift 2 ;;
    --weight_shrink_exponent) shrink_exponent="$2"; shift 2 ;;
    --num_fields) num_fields="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --servers) servers="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --batch_size) batch="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "sparse_experiment.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
test_first="${test_first:-$examples}"
cd "$(dirname "$0")/.."
source deploy/lib/servers.sh
bazel build -c opt --ui_event_filters=-info --noshow_progress //server:ps_server //worker:ps_worker \
  //worker:ps_gen_libsvm
bin="$(bazel info -c opt bazel-bin 2>/dev/null)"
mkdir -p "$out" "$data"
work="$(mktemp -d "${TMPDIR:-/tmp}/ps_sparse.XXXXXX")"
stop_on_exit "$work"
log() { echo "sparse_experiment.sh: $*" >&2; }

# --- data (reused when present with the same parameters) ---------------------------
tag="e${examples}_f${features}_w${weight_stddev}_r${shrink_rank}_g${shrink_exponent}"
[ "$num_fields" = 0 ] || tag="${tag}_F$num_fields"
train="$data/train_$tag.svm"
test="$data/test_${tag}_t${test_examples}_from${test_first}.svm"
# The model's flags, the same for both sets: the test examples come from the
# same planted model.
gen_flags=(--features="$features" --weight_stddev="$weight_stddev"
  --weight_shrink_rank="$shrink_rank" --weight_shrink_exponent="$shrink_exponent"
  --num_fields="$num_fields" --progress_seconds=0)
if [ ! -s "$train.planted.txt" ]; then
  log "generating $train"
  "$bin/worker/ps_gen_libsvm" --out="$train" --examples="$examples" "${gen_flags[@]}" | tail -1
fi
if [ ! -s "$test.planted.txt" ]; then
  log "generating $test"
  "$bin/worker/ps_gen_libsvm" --out="$test" --examples="$test_examples" \
    --first_example="$test_first" "${gen_flags[@]}" | tail -1
fi
planted=$(sed -n 's/^planted_auc=//p' "$test.planted.txt")
features_used=$(sed -n 's/^features_used=//p' "$train.planted.txt")
log "planted model's test AUC $planted; $features_used distinct features in the training set"

# --- training, epoch by epoch ------------------------------------------------------
start_servers "$bin" "$work" "$servers"
flags=(--servers="$spec" --num_workers="$workers" --model=sparse_lr --train_data="$train"
  --test_data="$test" --batch_size="$batch" --epochs=1 --progress_seconds=10)
[ "$num_fields" = 0 ] || flags+=(--num_fields="$num_fields")
flags+=("${extra[@]}")
raw="$out/sparse_raw.txt"
: >"$raw"
: >"$work/auc.dat"
# Bytes through the loopback interface while training: every byte the
# servers and workers send each other, with gRPC's and TCP's overhead (plus
# whatever else this machine sends over loopback meanwhile).
lo_bytes() { awk '$1 == "lo:" { print $2 }' /proc/net/dev; }
wire_bytes=0
trained=0
keys_total=0
pulled_total=0
pushed_total=0
examples_total=0
for ((e = 1; e <= epochs; e++)); do
  t0=$(date +%s.%N)
  lo0=$(lo_bytes)
  wpids=()
  for ((w = 0; w < workers; w++)); do
    "$bin/worker/ps_worker" "${flags[@]}" --worker_index=$w --evaluate=false \
      >"$work/worker$w.epoch$e.log" 2>&1 &
    wpids+=($!)
  done
  for ((w = 0; w < workers; w++)); do
    wait "${wpids[$w]}" || { cat "$work/worker$w.epoch$e.log" >&2; exit 1; }
    line=$(grep '^RESULT worker=' "$work/worker$w.epoch$e.log")
    examples_total=$((examples_total + $(echo "$line" | sed 's/.* examples=\([0-9]*\).*/\1/')))
    keys_total=$((keys_total + $(echo "$line" | sed 's/.* keys=\([0-9]*\).*/\1/')))
    pulled_total=$((pulled_total + $(echo "$line" | sed 's/.* keys_pulled=\([0-9]*\).*/\1/')))
    pushed_total=$((pushed_total + $(echo "$line" | sed 's/.* keys_pushed=\([0-9]*\).*/\1/')))
  done
  t1=$(date +%s.%N)
  wire_bytes=$((wire_bytes + $(lo_bytes) - lo0))
  trained=$(awk -v a="$trained" -v b="$t0" -v c="$t1" 'BEGIN { printf "%.2f", a + c - b }')
  "$bin/worker/ps_worker" "${flags[@]}" --worker_index=0 --eval_only >"$work/eval$e.log" 2>&1 ||
    { cat "$work/eval$e.log" >&2; exit 1; }
  auc=$(sed -n 's/^RESULT test_auc=\([0-9.]*\).*/\1/p' "$work/eval$e.log")
  accuracy=$(sed -n 's/^RESULT .*test_accuracy=\([0-9.]*\).*/\1/p' "$work/eval$e.log")
  echo "$trained $auc" >>"$work/auc.dat"
  echo "EPOCH epoch=$e train_seconds=$trained test_auc=$auc test_accuracy=$accuracy" | tee -a "$raw"
done
peak_kb=0
for p in "${server_pids[@]}"; do
  kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$p/status")
  [ "$kb" -gt "$peak_kb" ] && peak_kb=$kb
done
# Payload: a key and its row per key pushed or pulled (8 + 4 * width bytes;
# the filter holds some pushes back, the row cache serves some pulls). The
# width is 1 for sparse_lr, --embedding_dim (8) for embedding_mlp.
width=1
for flag in "${extra[@]}"; do
  case "$flag" in
    --model=embedding_mlp) [ "$width" = 1 ] && width=8 ;;
    --embedding_dim=*) width="${flag#--embedding_dim=}" ;;
  esac
done
case " ${extra[*]} " in *" --model=embedding_mlp "*) ;; *) width=1 ;; esac
echo "RESULT examples=$examples features_used=$features_used epochs=$epochs servers=$servers workers=$workers \
train_seconds=$trained examples_per_second=$(awk -v n="$examples_total" -v t="$trained" 'BEGIN { printf "%.0f", n / t }') \
keys_per_second=$(awk -v n="$keys_total" -v t="$trained" 'BEGIN { printf "%.0f", n / t }') \
keys_pulled=$pulled_total keys_pushed=$pushed_total \
payload_gbytes=$(awk -v n="$pushed_total" -v p="$pulled_total" -v w="$width" 'BEGIN { printf "%.2f", (n + p) * (8 + 4 * w) / 1e9 }') \
loopback_gbytes=$(awk -v b="$wire_bytes" 'BEGIN { printf "%.2f", b / 1e9 }') \
peak_server_rss_mb=$((peak_kb / 1024)) test_auc=$auc planted_auc=$planted" | tee -a "$raw"
model=sparse_lr
for flag in "${extra[@]}"; do
  case "$flag" in --model=*) model="${flag#--model=}" ;; esac
done
cp "$work/auc.dat" "$out/sparse_auc.dat"
# The AUC after each epoch, next to the planted model's and the acceptance
# bound 0.01 below it (an untrained model's 0.5 would squash the scale).
gnuplot <<PLOT
set terminal pngcairo size 800,450 noenhanced
set output "$out/sparse_auc.png"
set title "$model: test AUC after each epoch against training time ($servers servers, $workers workers)"
set xlabel "training seconds"
set ylabel "test AUC"
set xrange [0:*]
set key right center
plot "$out/sparse_auc.dat" using 1:2 with linespoints pointtype 7 title "trained", \
     $planted title "planted model" with lines dashtype 2, \
     $planted - 0.01 title "planted - 0.01" with lines dashtype 3
PLOT
log "results: $raw, $out/sparse_auc.png"
