#!/usr/bin/env bash
# Sandblaster L-BFGS against Downpour SGD and a single-process L-BFGS
# (SciPy's L-BFGS-B, deploy/lbfgs_reference.py) on sparse logistic
# regression, on a small real LibSVM set (heart_scale) and on a generated one
# of --examples examples (ps_gen_libsvm). 2 servers and 2 workers each run.
# For each job: the training loss (mean logistic loss over the whole
# training set) against wall time and against bytes moved, one PNG; the
# final objective of L-BFGS against the reference's. Also: the bytes between
# the coordinator and the servers per iteration for two dense tables 10x
# apart, and the generated job again with a straggler SIGKILLed mid-run.
# Writes a Markdown report, the raw lines and the PNGs to the output
# directory.
#
#   deploy/lbfgs_experiment.sh [--out DIR] [--examples 1000000] [--features 100000]
#       [--epochs 5] [--iterations 300] [--l2 1e-4]
set -euo pipefail

out="${TMPDIR:-/tmp}/ps_lbfgs"
examples=1000000
features=100000
epochs=5
iterations=300
l2=1e-4
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --examples) examples="$2"; shift 2 ;;
    --features) features="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --iterations) iterations="$2"; shift 2 ;;
    --l2) l2="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "lbfgs_experiment.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/.."
source deploy/lib/experiment.sh
# shellcheck source=deploy/lib/lbfgs.sh
source deploy/lib/lbfgs.sh
experiment_setup lbfgs "$out"
bazel build --ui_event_filters=-info --noshow_progress //worker/lbfgs:ps_lbfgs //worker:ps_gen_libsvm

heart=/usr/share/doc/liblinear-tools/examples/heart_scale
gen="$work/generated.libsvm"
log "generating $examples examples over $features features"
"$bin/worker/ps_gen_libsvm" --examples="$examples" --features="$features" --seed=1 \
  --progress_seconds=0 --out="$gen" >/dev/null

raw="$out/lbfgs_raw.txt"
echo "MACHINE cores=$(nproc) mem_gib=$(awk '/MemTotal/ {printf "%.0f", $2/1048576}' /proc/meminfo) commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes) date=$(date -u +%Y-%m-%d)" | tee "$raw"

field() { sed -n "s/^RESULT $1 .*$2=\([^ ]*\).*/\1/p" "$3" | head -1; }

# reference JOB DATA: SciPy's run; curve_JOB_reference.dat (seconds, data loss).
reference() {
  local job=$1 data=$2
  log "$job: SciPy L-BFGS-B"
  /usr/bin/python3 deploy/lbfgs_reference.py --data "$data" --l2 "$l2" --bias \
    --curve "$work/ref.csv" >"$work/ref.log"
  tail -n +2 "$work/ref.csv" | awk -F, '{ print $2, $4 }' >"$out/curve_${job}_reference.dat"
  echo "RESULT job=$job method=reference l2=$l2 f=$(sed -n 's/^RESULT reference_loss=\([^ ]*\).*/\1/p' "$work/ref.log") data_loss=$(sed -n 's/^RESULT .*data_loss=\([^ ]*\).*/\1/p' "$work/ref.log") iterations=$(sed -n 's/^RESULT .*iterations=\([^ ]*\).*/\1/p' "$work/ref.log") seconds=$(sed -n 's/^RESULT .* seconds=\([^ ]*\).*/\1/p' "$work/ref.log") bytes=0" | tee -a "$raw"
}

# lbfgs_start NAME DATA [ps_lbfgs flags] [-- worker 1 flags]: one Sandblaster
# run (deploy/lib/lbfgs.sh) with the experiment's settings; sets coord_pid and
# lbfgs_workers; leaves the logs in $work.
lbfgs_start() {
  local name=$1 data=$2
  shift 2
  start_lbfgs "$bin" "$work" "$name" "$data" --l2="$l2" --portions=16 \
    --max_iterations="$iterations" --gtol=1e-7 --curve_csv="$work/$name.csv" "$@"
}
lbfgs_finish() {
  local name=$1
  wait "$coord_pid" || fail "$name: ps_lbfgs failed: $(tail -n 3 "$work/$name.log")"
  for p in "${lbfgs_workers[@]}"; do wait "$p" 2>/dev/null || true; done
}

# lbfgs_job JOB DATA [METHOD L2]: a Sandblaster run of the comparison (METHOD
# lbfgs, l2 $l2 by default); its curve in curve_JOB_METHOD.dat (seconds,
# data loss, bytes).
lbfgs_job() {
  local job=$1 data=$2 method=${3:-lbfgs} run_l2=${4:-$l2} worker_bytes evaluations name
  name="$job.$method"
  log "$job: Sandblaster L-BFGS, l2 $run_l2"
  start_servers "$bin" "$work" 2
  lbfgs_start "$name" "$data" --l2="$run_l2"
  lbfgs_finish "$name"
  stop_servers
  worker_bytes=$(cat "$work/$name".worker*.log | sed -n 's/^RESULT worker=.*bytes_pulled=\([0-9]*\) bytes_pushed=\([0-9]*\).*/\1 \2/p' |
    awk '{ s += $1 + $2 } END { printf "%.0f\n", s }')
  evaluations=$(field lbfgs evaluations "$work/$name.log")
  # Each evaluation moves the same values (every portion's keys pulled and
  # pushed once, and its backups'): spread the workers' bytes evenly.
  tail -n +2 "$work/$name.csv" | awk -F, -v wb="$worker_bytes" -v ev="$evaluations" \
    '{ printf "%s %s %.0f\n", $2, $4, $6 * wb / ev + $7 }' >"$out/curve_${job}_$method.dat"
  echo "RESULT job=$job method=$method l2=$run_l2 f=$(field lbfgs f "$work/$name.log") data_loss=$(field lbfgs loss "$work/$name.log") iterations=$(field lbfgs iterations "$work/$name.log") evaluations=$evaluations seconds=$(field lbfgs seconds "$work/$name.log") bytes=$((worker_bytes + $(field lbfgs coordinator_bytes "$work/$name.log"))) coordinator_bytes=$(field lbfgs coordinator_bytes "$work/$name.log") coordinator_bytes_per_iteration=$(field lbfgs bytes_per_iteration "$work/$name.log") rows=$(field lbfgs values "$work/$name.log") stop=$(field lbfgs stop "$work/$name.log")" | tee -a "$raw"
}

# downpour JOB DATA EPOCHS BATCH: Downpour SGD (sparse_lr, AdaGrad), epoch by epoch,
# each followed by the exact training loss over the whole file
# (--eval_only on the training data; its time is not counted).
downpour() {
  local job=$1 data=$2 n=$3 batch=$4 e w elapsed=0 bytes=0 t0 t1 loss=""
  log "$job: Downpour SGD, $n epochs"
  start_servers "$bin" "$work" 2
  : >"$out/curve_${job}_downpour.dat"
  for ((e = 1; e <= n; e++)); do
    t0=$(date +%s.%N)
    local pids=()
    for w in 0 1; do
      "$bin/worker/ps_worker" --servers="$spec" --num_workers=2 --worker_index=$w --model=sparse_lr \
        --train_data="$data" --epochs=1 --evaluate=false --optimizer=adagrad --learning_rate=0.05 \
        --batch_size="$batch" >"$work/$job.dp$w.log" 2>&1 &
      pids+=("$!")
    done
    for p in "${pids[@]}"; do wait "$p" || fail "$job: a Downpour worker failed"; done
    t1=$(date +%s.%N)
    elapsed=$(awk -v a="$t0" -v b="$t1" -v e="$elapsed" 'BEGIN { print e + b - a }')
    bytes=$((bytes + $(cat "$work/$job".dp*.log | sed -n 's/^RESULT worker=.*keys_pulled=\([0-9]*\) keys_pushed=\([0-9]*\).*/\1 \2/p' |
      awk '{ s += 4 * ($1 + $2) } END { printf "%.0f\n", s }')))
    "$bin/worker/ps_worker" --servers="$spec" --model=sparse_lr --eval_only --test_data="$data" \
      >"$work/$job.eval.log" 2>&1 || fail "$job: evaluating Downpour's weights failed"
    loss=$(sed -n 's/.*test auc .* logloss \([0-9.]*\) .*/\1/p' "$work/$job.eval.log" | head -1)
    echo "$elapsed $loss $bytes" >>"$out/curve_${job}_downpour.dat"
  done
  stop_servers
  echo "RESULT job=$job method=downpour l2=0 data_loss=$loss epochs=$n batch=$batch seconds=$elapsed bytes=$bytes" | tee -a "$raw"
}

for job in heart generated; do
  data=$heart
  n=40 batch=8
  if [ "$job" = generated ]; then data=$gen; n=$epochs; batch=128; fi
  reference "$job" "$data"
  lbfgs_job "$job" "$data"
  # Downpour's sparse LR is not regularized: L-BFGS at a 100 times weaker
  # l2 minimizes nearly its training loss.
  lbfgs_job "$job" "$data" lbfgs_weak_l2 "$(awk -v l="$l2" 'BEGIN { print l / 100 }')"
  downpour "$job" "$data" "$n" "$batch"
done

# Bytes between the coordinator and the servers per iteration, for dense
# tables 10x apart (heart_scale's 13 features and the bias in either).
for keys in 100000 1000000; do
  log "dense table of $keys keys"
  start_servers "$bin" "$work" 2
  lbfgs_start "dense$keys" "$heart" --sparse=false --num_keys="$keys" --
  lbfgs_finish "dense$keys"
  stop_servers
  echo "RESULT job=dense method=lbfgs keys=$keys values=$(field lbfgs values "$work/dense$keys.log") iterations=$(field lbfgs iterations "$work/dense$keys.log") coordinator_calls=$(field lbfgs coordinator_calls "$work/dense$keys.log") coordinator_bytes_per_iteration=$(field lbfgs bytes_per_iteration "$work/dense$keys.log") seconds=$(field lbfgs seconds "$work/dense$keys.log")" | tee -a "$raw"
done

# The generated job with worker 1 a straggler (50 ms after each push),
# SIGKILLed once it has taken 20 portions.
log "generated: a straggler SIGKILLed mid-run"
start_servers "$bin" "$work" 2
lbfgs_start killed "$gen" --backup_after_ms=200 -- --lbfgs_straggle_ms=50
taken() { [ "$(grep -c straggling "$work/killed.worker1.log")" -ge 20 ]; }
poll_until 600 taken || fail "the straggler took no 20 portions"
kill -KILL "${lbfgs_workers[1]}"
lbfgs_finish killed
stop_servers
f_killed=$(field lbfgs f "$work/killed.log")
f_plain=$(sed -n 's/^RESULT job=generated method=lbfgs l2=[^ ]* f=\([^ ]*\).*/\1/p' "$raw")
echo "RESULT job=killed method=lbfgs f=$f_killed undisturbed_f=$f_plain relative_difference=$(awk -v a="$f_killed" -v b="$f_plain" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; printf "%.3g", d }') iterations=$(field lbfgs iterations "$work/killed.log") backups=$(field lbfgs backups "$work/killed.log") duplicates=$(field lbfgs duplicates "$work/killed.log") seconds=$(field lbfgs seconds "$work/killed.log") portions_by_worker=$(sed -n 's/^RESULT lbfgs_worker worker=\([0-9]*\) portions=\([0-9]*\)/\1:\2/p' "$work/killed.log" | paste -sd,)" | tee -a "$raw"

# --- report -------------------------------------------------------------------
report="$out/lbfgs_report.md"
kv() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
{
  echo "# Sandblaster L-BFGS, Downpour SGD and SciPy's L-BFGS-B on sparse logistic regression"
  echo
  echo "2 servers and 2 workers (L-BFGS: plus the coordinator), l2 = $l2, a bias. $(sed -n 's/^MACHINE //p' "$raw")."
  echo
  echo "| job | method | l2 | f (objective) | training loss | iterations / epochs | seconds | bytes moved |"
  echo "|---|---|---|---|---|---|---|---|"
  grep -E "^RESULT job=(heart|generated) " "$raw" | while read -r line; do
    echo "| $(kv "$line" job) | $(kv "$line" method) | $(kv "$line" l2) | $(kv "$line" f) | $(kv "$line" data_loss) | $(kv "$line" iterations)$(kv "$line" epochs) | $(kv "$line" seconds) | $(kv "$line" bytes) |"
  done
  echo
  for job in heart generated; do
    ref=$(sed -n "s/^RESULT job=$job method=reference l2=[^ ]* f=\([^ ]*\).*/\1/p" "$raw")
    got=$(sed -n "s/^RESULT job=$job method=lbfgs l2=[^ ]* f=\([^ ]*\).*/\1/p" "$raw")
    echo "- $job: L-BFGS's f is $(awk -v a="$got" -v b="$ref" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d; printf "%.2g", d }') relative from the reference's."
  done
  echo
  echo "| dense table keys | values the ops ran over | iterations | coordinator calls | coordinator bytes per iteration |"
  echo "|---|---|---|---|---|"
  grep "^RESULT job=dense " "$raw" | while read -r line; do
    echo "| $(kv "$line" keys) | $(kv "$line" values) | $(kv "$line" iterations) | $(kv "$line" coordinator_calls) | $(kv "$line" coordinator_bytes_per_iteration) |"
  done
  echo
  line=$(grep "^RESULT job=killed " "$raw")
  echo "Straggler SIGKILLed mid-run on the generated job: f $(kv "$line" f) against $(kv "$line" undisturbed_f) undisturbed (relative difference $(kv "$line" relative_difference)), $(kv "$line" backups) backup portions, $(kv "$line" duplicates) duplicate results dropped; portions kept by worker: $(kv "$line" portions_by_worker)."
} >"$report"
if command -v gnuplot >/dev/null; then
  for job in heart generated; do
    ref=$(sed -n "s/^RESULT job=$job method=reference .*data_loss=\([^ ]*\).*/\1/p" "$raw")
    gnuplot <<GP
set terminal pngcairo size 1200,480 noenhanced
set output "$out/lbfgs_$job.png"
set multiplot layout 1,2 title "Sparse LR on $job, 2 servers, 2 workers: training loss (whole training set)"
set grid
set key top right
set xlabel "wall time (s)"
set ylabel "training loss"
plot "$out/curve_${job}_lbfgs.dat" using 1:2 with linespoints title "Sandblaster L-BFGS", \
     "$out/curve_${job}_lbfgs_weak_l2.dat" using 1:2 with linespoints title "Sandblaster L-BFGS, l2 / 100", \
     "$out/curve_${job}_downpour.dat" using 1:2 with linespoints title "Downpour SGD (per epoch)", \
     "$out/curve_${job}_reference.dat" using 1:2 with lines title "SciPy L-BFGS-B (1 process)", \
     $ref with lines dashtype 2 title "reference's final loss"
set xlabel "bytes moved (MB, log scale)"
set logscale x
plot "$out/curve_${job}_lbfgs.dat" using (\$3/1e6):2 with linespoints title "Sandblaster L-BFGS", \
     "$out/curve_${job}_lbfgs_weak_l2.dat" using (\$3/1e6):2 with linespoints title "Sandblaster L-BFGS, l2 / 100", \
     "$out/curve_${job}_downpour.dat" using (\$3/1e6):2 with linespoints title "Downpour SGD", \
     $ref with lines dashtype 2 title "reference's final loss"
unset multiplot
GP
  done
fi
cat "$report"
log "wrote $report, $raw and $out/lbfgs_*.png"
