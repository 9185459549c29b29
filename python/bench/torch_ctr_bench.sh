#!/usr/bin/env bash
# The embedding-bag CTR model three ways, on the same generated data and the
# same servers, one run each: ps_worker --model=embedding_mlp (C++), the
# paramserver.torch example (python/examples/torch_embedding.py), and the
# hand-written PyTorch example of git revision --baseline (its
# torch_embedding.py, which wires tables, keys and gradients itself).
#
# Data: ps_gen_libsvm's CTR-like examples, with --num_fields fields (libffm
# lines) for ps_worker and the paramserver.torch model, and the same
# examples without fields (the same seed: ids and labels are identical) for
# the baseline, which reads only index:value lines; the paramserver.torch
# example also runs on those with one field, the baseline's model, for a
# like-for-like speed. Every run: 1 epoch, one worker, embedding width 8,
# 16 hidden units, AdaGrad 0.1 (accumulator 0.1), batches of 256, on 2
# servers; each gets its own tables.
#
#   python/bench/torch_ctr_bench.sh [--examples N] [--test_examples N] [--features F]
#       [--num_fields K] [--baseline REV] [--keep_logs]
#
# Prints each run's test AUC and training examples/s (the loop's, as each
# worker's done line reports it), then
#   RESULT cpp_auc=... torch_auc=... auc_gap=... torch_eps=... baseline_eps=...
#          speed_ratio=... torch_f1_eps=... speed_ratio_f1=...
# Targets (issue 31): |torch_auc - cpp_auc| <= 0.005, speed_ratio >= 0.8.
set -euo pipefail

examples=200000
test_examples=20000
features=100000
num_fields=4
baseline=a564578
keep_logs=0
while [ $# -gt 0 ]; do
  case "$1" in
    --examples) examples="$2"; shift 2 ;;
    --test_examples) test_examples="$2"; shift 2 ;;
    --features) features="$2"; shift 2 ;;
    --num_fields) num_fields="$2"; shift 2 ;;
    --baseline) baseline="$2"; shift 2 ;;
    --keep_logs) keep_logs=1; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "torch_ctr_bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/../.."
source deploy/lib/servers.sh
bazel build --ui_event_filters=-info --noshow_progress //server:ps_server \
  //worker:ps_worker //worker:ps_gen_libsvm //python:paramserver
bin="$(bazel info bazel-bin 2>/dev/null)"
python=/usr/bin/python3  # Debian's, which sees python3-torch
work="$(mktemp -d "${TMPDIR:-/tmp}/torch_ctr_bench.XXXXXX")"
all_pids=()
cleanup() {
  local p
  for p in "${all_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${all_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "$keep_logs" = 1 ]; then echo "torch_ctr_bench.sh: logs kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
log() { echo "torch_ctr_bench.sh: $*" >&2; }

# The baseline example and the helpers it imports, as of --baseline.
mkdir -p "$work/baseline"
for f in torch_embedding.py cluster_args.py libsvm_data.py idx_data.py server_parameters.py \
  training_log.py; do
  git show "$baseline:python/examples/$f" >"$work/baseline/$f"
done

gen() {  # OUT FIRST_EXAMPLE EXAMPLES FIELDS
  "$bin/worker/ps_gen_libsvm" --out="$1" --first_example="$2" --examples="$3" \
    --features="$features" --num_fields="$4" --progress_seconds=0 >"$1.log" 2>&1
}
log "generating $examples + $test_examples examples of $features features"
gen "$work/train.ffm" 0 "$examples" "$num_fields"
gen "$work/test.ffm" "$examples" "$test_examples" "$num_fields"
gen "$work/train.svm" 0 "$examples" 0
gen "$work/test.svm" "$examples" "$test_examples" 0
cmp -s <(sed 's/ [0-9]*:\([0-9]*:\)/ \1/g' "$work/train.ffm") "$work/train.svm" ||
  { log "the files with and without fields hold different examples"; exit 1; }

start_servers "$bin" "$work" 2
log "servers at $spec"
model=(--embedding_dim=8 --optimizer=adagrad --learning_rate=0.1 --initial_accumulator=0.1
  --batch_size=256 --epochs=1)
export PYTHONPATH="$PWD/python:$bin/python"

run() {  # NAME COMMAND...: its log in $work/NAME.log
  local name=$1
  shift
  log "$name: $*"
  "$@" >"$work/$name.log" 2>&1 || { tail -n 20 "$work/$name.log" >&2; log "$name failed"; exit 1; }
}
run cpp "$bin/worker/ps_worker" --servers="$spec" --model=embedding_mlp --table_prefix=bench_cpp \
  --train_data="$work/train.ffm" --test_data="$work/test.ffm" --num_fields="$num_fields" \
  --embedding_hidden=16 "${model[@]}"
run torch "$python" python/examples/torch_embedding.py --servers="$spec" --table_prefix=bench_torch \
  --train_data="$work/train.ffm" --test_data="$work/test.ffm" --num_fields="$num_fields" \
  --embedding_hidden=16 "${model[@]}"
run baseline "$python" "$work/baseline/torch_embedding.py" --servers="$spec" \
  --table_prefix=bench_baseline --train_data="$work/train.svm" --test_data="$work/test.svm" \
  --hidden=16 "${model[@]}"
run torch_f1 "$python" python/examples/torch_embedding.py --servers="$spec" \
  --table_prefix=bench_torch_f1 --train_data="$work/train.svm" --test_data="$work/test.svm" \
  --num_fields=1 --embedding_hidden=16 "${model[@]}"
stop_servers

auc_of() { sed -n 's/^RESULT test_auc=\([0-9.]*\).*/\1/p' "$work/$1.log"; }
eps_of() { sed -n 's/^worker 0\/1: done: .* (\([0-9]*\) examples\/s.*/\1/p' "$work/$1.log"; }
for name in cpp torch baseline torch_f1; do
  echo "$name: test auc $(auc_of $name), $(eps_of $name) examples/s ($work/$name.log)"
done
awk -v ca="$(auc_of cpp)" -v ta="$(auc_of torch)" -v te="$(eps_of torch)" \
  -v be="$(eps_of baseline)" -v fe="$(eps_of torch_f1)" 'BEGIN {
    gap = ta - ca; if (gap < 0) gap = -gap
    printf "RESULT cpp_auc=%s torch_auc=%s auc_gap=%.4f torch_eps=%s baseline_eps=%s speed_ratio=%.3f torch_f1_eps=%s speed_ratio_f1=%.3f\n",
      ca, ta, gap, te, be, te / be, fe, fe / be
    printf "targets: auc gap <= 0.005 %s; speed ratio >= 0.8 %s\n", (gap <= 0.005 ? "met" : "NOT met"),
      (te / be >= 0.8 ? "met" : "NOT met") }'
