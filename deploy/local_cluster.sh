#!/usr/bin/env bash
# Runs a parameter-server job on this machine: S ps_server processes and W
# ps_worker processes on 127.0.0.1 (free ports picked by the kernel), streams
# the workers' progress, then evaluates the final parameters on the test set
# and prints the test accuracy and the wall time. Every process it started is
# stopped when it exits, fails or is interrupted (Ctrl-C).
#
#   deploy/local_cluster.sh [--servers S] [--workers W]
#                           [--model mlp|softmax|sparse_lr|embedding_mlp]
#                           [--epochs N] [--keep_logs] [--plot FILE.png]
#                           [--checkpoint_dir DIR [--checkpoint_every SECONDS] [--resume]]
#                           [--replicas R [--kill_server_after SECONDS]]
#                           [--python_workers]
#                           [--model_partitions K] [--dense_sync allreduce]
#                           [-- extra ps_worker flags]
#
# Installs first what the job needs (deploy/setup.sh --build: the build
# tools, libraries and data; the options below add theirs when given).
#
# Each worker writes its training curve as CSV (ps_worker --curve_csv), and
# the loss and speed of every worker against time are plotted with gnuplot
# into --plot (default $TMPDIR/ps_training.png, or /tmp/ps_training.png)
# when gnuplot is installed; --plot installs it (gnuplot-nox).
#
# --checkpoint_dir DIR: the servers checkpoint the model into DIR every
# --checkpoint_every seconds (default 10) and when stopped (Ctrl-C included).
# --resume: the servers first restore the newest valid checkpoint in DIR and
# the workers continue at the epoch and step it holds.
#
# --replicas R: a replicated cluster. A single-node etcd starts on a free
# loopback port (data in the run's directory); each shard lives on a chain of
# R servers; workers find the primaries through etcd and follow failovers.
# --kill_server_after S: SIGKILL the last server S seconds into training,
# to watch the job survive it.
#
# --model sparse_lr and embedding_mlp train on LibSVM files, given as worker
# flags (which reach the evaluation too, so --num_fields agrees):
#   deploy/local_cluster.sh --model sparse_lr --epochs 1 -- \
#     --train_data=train.svm --test_data=test.svm --optimizer=ftrl --learning_rate=0.5
#   deploy/local_cluster.sh --model embedding_mlp --epochs 1 -- \
#     --train_data=train.ffm --test_data=test.ffm --num_fields=4 --optimizer=adagrad
#
# --model_partitions K (mlp, embedding_mlp): each of the W workers (model
# replicas) is K processes, each holding 1/K of every hidden layer; the
# W * K processes run as one mpirun job (Open MPI), and so does the final
# evaluation (K processes). --dense_sync allreduce (embedding_mlp): the
# workers keep the MLP's dense layers and average them by MPI allreduce
# every step, the embedding rows staying on the servers; one mpirun job of W
# processes. See docs/guide/mpi.md.
#
# --python_workers: the workers are PyTorch processes instead of ps_worker
# (python/examples/torch_mnist.py under /usr/bin/python3, over the paramserver
# module built from //python): the same MLP and defaults, on the same
# servers; flags after -- go to torch_mnist.py (see its --help), and the final
# evaluation is torch_mnist.py --eval_only. Model mlp only. Their
# progress lines and curves have no staleness (the Python client does not
# report the versions its pushes reached); the plot is the same.
set -euo pipefail

servers=2
workers=4
model=mlp
epochs=5
keep_logs=0
plot="${TMPDIR:-/tmp}/ps_training.png"
plot_asked=0
checkpoint_dir=""
checkpoint_every=10
resume=0
replicas=0
kill_after=0
python_workers=0
partitions=1
dense_sync=servers
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --servers) servers="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --keep_logs) keep_logs=1; shift ;;
    --plot) plot="$2"; plot_asked=1; shift 2 ;;
    --checkpoint_dir) checkpoint_dir="$2"; shift 2 ;;
    --checkpoint_every) checkpoint_every="$2"; shift 2 ;;
    --resume) resume=1; shift ;;
    --replicas) replicas="$2"; shift 2 ;;
    --kill_server_after) kill_after="$2"; shift 2 ;;
    --python_workers) python_workers=1; shift ;;
    --model_partitions) partitions="$2"; shift 2 ;;
    --dense_sync) dense_sync="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,57p' "$0"; exit 0 ;;
    *) echo "local_cluster.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$resume" = 1 ] && [ -z "$checkpoint_dir" ]; then
  echo "local_cluster.sh: --resume needs --checkpoint_dir DIR (where the checkpoints are)" >&2
  exit 2
fi
if [ "$replicas" != 0 ] && [ -n "$checkpoint_dir" ]; then
  echo "local_cluster.sh: --replicas does not combine with --checkpoint_dir yet" >&2
  exit 2
fi
if [ "$python_workers" = 1 ] && [ "$model" != mlp ]; then
  echo "local_cluster.sh: --python_workers trains the MLP (python/examples/torch_mnist.py): --model must be mlp, not $model" >&2
  exit 2
fi
if [ "$dense_sync" != servers ] && [ "$dense_sync" != allreduce ]; then
  echo "local_cluster.sh: --dense_sync=$dense_sync: expected servers or allreduce" >&2
  exit 2
fi
if { [ "$partitions" != 1 ] || [ "$dense_sync" = allreduce ]; } && [ "$python_workers" = 1 ]; then
  echo "local_cluster.sh: --model_partitions and --dense_sync allreduce run ps_worker under mpirun, not --python_workers" >&2
  exit 2
fi
if [ "$kill_after" != 0 ] && [ "$replicas" = 0 ]; then
  echo "local_cluster.sh: --kill_server_after needs --replicas (a static cluster loses the shard)" >&2
  exit 2
fi
for pair in "servers:$servers" "workers:$workers" "epochs:$epochs" \
    "checkpoint_every:$checkpoint_every" "replicas:${replicas/#0/1}" "kill_server_after:${kill_after/#0/1}" \
    "model_partitions:$partitions"; do
  name="${pair%%:*}"; value="${pair#*:}"
  if ! [[ "$value" =~ ^[1-9][0-9]*$ ]]; then
    echo "local_cluster.sh: --$name=$value must be a positive integer" >&2; exit 2
  fi
done

cd "$(dirname "$0")/.."
source deploy/lib/servers.sh
source deploy/lib/etcd.sh
# What this run needs, and no more (deploy/setup.sh's profiles).
profiles=(--build)
[ "$replicas" != 0 ] && profiles+=(--etcd)
[ "$python_workers" = 1 ] && profiles+=(--python)
[ "$plot_asked" = 1 ] && profiles+=(--plot)
{ [ "$partitions" != 1 ] || [ "$dense_sync" = allreduce ]; } && profiles+=(--mpi)
deploy/setup.sh "${profiles[@]}"
targets=(//server:ps_server //worker:ps_worker)
[ "$python_workers" = 1 ] && targets+=(//python:paramserver)
bazel build --ui_event_filters=-info --noshow_progress "${targets[@]}"
bin="$(bazel info bazel-bin 2>/dev/null)"
# The worker command: ps_worker, or a PyTorch worker taking the same cluster
# and index flags (Debian's interpreter, which sees python3-torch).
if [ "$python_workers" = 1 ]; then
  worker_cmd=(env PYTHONPATH="$PWD/python:$bin/python" /usr/bin/python3 python/examples/torch_mnist.py)
  model_flags=()
  model_name=torch_mlp
  worker_kind="PyTorch "
else
  worker_cmd=("$bin/worker/ps_worker")
  model_flags=(--model="$model")
  model_name=$model
  worker_kind=""
fi

run_dir="$(mktemp -d "${TMPDIR:-/tmp}/ps_cluster.XXXXXX")"
all_pids=()
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  for pid in "${all_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${all_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  # etcd last: stopping servers leave the cluster through it.
  if [ -n "${etcd_pid:-}" ]; then kill -TERM "$etcd_pid" 2>/dev/null || true; wait "$etcd_pid" 2>/dev/null || true; fi
  if [ "$keep_logs" = 1 ] || [ "$status" -ne 0 ]; then
    echo "local_cluster.sh: logs kept in $run_dir"
  else
    rm -rf "$run_dir"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'echo "local_cluster.sh: interrupted, stopping every process"; exit 130' INT TERM

start=$(date +%s.%N)
echo "local_cluster.sh: starting $servers server(s) and $workers ${worker_kind}worker(s), model $model_name, $epochs epoch(s)${extra[*]:+, worker flags: ${extra[*]}} (logs in $run_dir)"
server_flags=()
worker_flags=()
if [ -n "$checkpoint_dir" ]; then
  mkdir -p "$checkpoint_dir"
  checkpoint_dir="$(cd "$checkpoint_dir" && pwd)"
  # Server 0 coordinates; the ports are known only once the servers run, so
  # the cluster spec reaches them through a file.
  server_flags=(--checkpoint_dir="$checkpoint_dir" --servers_file="$run_dir/spec"
                --checkpoint_every_seconds="$checkpoint_every")
  if [ "$resume" = 1 ]; then
    server_flags+=(--restore)
    worker_flags=(--resume)
  fi
fi
connect=()
if [ "$replicas" != 0 ]; then
  start_etcd "$run_dir" || exit 1
  echo "local_cluster.sh: etcd at $etcd_endpoint (data in $run_dir/etcd)"
  server_flags+=(--etcd="$etcd_endpoint" --replicas="$replicas" --lease_seconds=2)
fi
start_servers "$bin" "$run_dir" "$servers" "${server_flags[@]}"
echo "$spec" > "$run_dir/spec.tmp" && mv "$run_dir/spec.tmp" "$run_dir/spec"
echo "local_cluster.sh: servers up at $spec${checkpoint_dir:+, checkpoints in $checkpoint_dir every ${checkpoint_every}s}${etcd_endpoint:+, each shard on $replicas of them}"
if [ "$replicas" != 0 ]; then
  connect=(--etcd="$etcd_endpoint")
else
  connect=(--servers="$spec")
fi
[ "$resume" = 1 ] && grep -h "restored\|passed over" "$run_dir"/server0.log | sed 's/^/local_cluster.sh: /'

worker_pids=()
eval_cmd=("${worker_cmd[@]}" --worker_index=0 --num_workers="$workers")
if [ "$partitions" != 1 ] || [ "$dense_sync" = allreduce ]; then
  # One MPI job: rank r is worker r / K, partition r % K (deploy/lib/mpi.sh).
  source deploy/lib/mpi.sh
  model_flags+=(--model_partitions="$partitions" --dense_sync="$dense_sync")
  mpi_run $((workers * partitions)) "${worker_cmd[@]}" "${connect[@]}" "${model_flags[@]}" \
    --epochs="$epochs" --curve_csv="$run_dir/curve@RANK@.csv" --progress_seconds=0.5 \
    "${worker_flags[@]}" "${extra[@]}" > >(tee "$run_dir/worker0.log") 2>&1 &
  worker_pids+=($!)
  all_pids+=($!)
  # The evaluation: the K partitions of a replica together.
  [ "$partitions" != 1 ] && eval_cmd=(mpi_run "$partitions" "${worker_cmd[@]}")
else
  for ((w = 0; w < workers; w++)); do
    "${worker_cmd[@]}" "${connect[@]}" --worker_index="$w" --num_workers="$workers" \
      "${model_flags[@]}" --epochs="$epochs" --curve_csv="$run_dir/curve$w.csv" --progress_seconds=0.5 \
      "${worker_flags[@]}" "${extra[@]}" > >(tee "$run_dir/worker$w.log") 2>&1 &
    worker_pids+=($!)
    all_pids+=($!)
  done
fi

if [ "$kill_after" != 0 ]; then
  victim=$((servers - 1))
  ( sleep "$kill_after"  # the fault's moment, not a synchronisation
    kill -KILL "${server_pids[$victim]}" 2>/dev/null &&
      echo "local_cluster.sh: killed server $victim (SIGKILL) ${kill_after}s into training" ) &
fi

failed=0
for ((w = 0; w < ${#worker_pids[@]}; w++)); do
  if ! wait "${worker_pids[$w]}"; then
    echo "local_cluster.sh: worker $w failed (log: $run_dir/worker$w.log)" >&2
    failed=1
  fi
done
[ "$failed" = 0 ] || exit 1
train_end=$(date +%s.%N)

echo "local_cluster.sh: all workers done; evaluating the final parameters"
"${eval_cmd[@]}" "${connect[@]}" "${model_flags[@]}" "${extra[@]}" --eval_only > "$run_dir/eval.log" 2>&1 ||
  { cat "$run_dir/eval.log" >&2; exit 1; }
accuracy=$(sed -n 's/^RESULT .*test_accuracy=\([0-9.]*\).*/\1/p' "$run_dir/eval.log")
auc=$(sed -n 's/^RESULT .*test_auc=\([0-9.]*\).*/\1/p' "$run_dir/eval.log")
end=$(date +%s.%N)
awk -v s="$servers" -v w="$workers" -v k="$partitions" -v m="$model_name" -v e="$epochs" -v a="$accuracy" -v u="$auc" \
  -v t0="$start" -v t1="$train_end" -v t2="$end" 'BEGIN {
    printf "local_cluster.sh: RESULT servers=%d workers=%d%s model=%s epochs=%d%s test_accuracy=%s train_seconds=%.1f wall_seconds=%.1f\n",
      s, w, (k > 1 ? " model_partitions=" k : ""), m, e, (u != "" ? " test_auc=" u : ""), a, t1 - t0, t2 - t0 }'
if command -v gnuplot >/dev/null; then
  "$(dirname "$0")/plot_training.sh" "$plot" "$run_dir"/curve*.csv ||
    echo "local_cluster.sh: no plot ($plot)" >&2
else
  echo "local_cluster.sh: no plot: gnuplot is not installed (--plot FILE.png installs it)"
fi
