#!/usr/bin/env bash
# The Slurm job end to end, on a real (single-node) Slurm: starts munged,
# slurmctld and slurmd in a temporary directory (deploy/slurm/local_slurm.sh),
# submits deploy/slurm/paramserver.sbatch with 3 servers (replicas 2),
# 2 workers and 2 epochs of Fashion-MNIST, and checks that
#   - the job ends COMPLETED with exit code 0:0,
#   - its output has the summary line with a test accuracy >= PS_MIN_ACCURACY
#     (default 0.80; 2 epochs reach about 0.85),
#   - the servers and etcd were stopped by the job itself (SIGTERM);
# then submits it again with the workers as one MPI job
# (PS_WORKER_LAUNCH=mpi: srun --mpi=pmix): embedding_mlp with
# --dense_sync=allreduce, 2 ranks, 1 epoch of LibSVM data generated here
# (ps_gen_libsvm: 20,000 training and 5,000 test examples, 20,000 features
# in 4 fields), and checks that
#   - it ends COMPLETED 0:0, the servers and etcd stopped cleanly,
#   - rank 0 alone reports the test result, with a test AUC >= PS_MIN_AUC
#     (default 0.76: this job reaches 0.771-0.773; the same model trained on
#     the first half of the data 0.756, on a fifth 0.725, untrained 0.50;
#     the generator's planted model 0.84),
#   - both ranks trained, as workers 0 and 1 of 2 (indices from their MPI
#     ranks), and ran the same number of allreduce rounds;
# and finally that
#   - after stopping Slurm, no process of this Slurm instance is left: not
#     the daemons it started, nor any slurmstepd, server, worker or etcd.
# On failure it prints the job's output and the ends of the logs.
#
# Under `bazel test` the binaries and scripts come from the runfiles. By hand:
#   PS_REPO=/work/main PS_BIN_DIR=/work/main/bazel-bin tests/slurm_test.sh
# (PS_REPO defaults to this script's repository, PS_BIN_DIR to
# $PS_REPO/bazel-bin). Needs root (slurmd), and the packages slurm-wlm,
# munge, etcd-server, etcd-client, openmpi-bin and libpmix-dev (the
# libpmix.so Slurm's mpi/pmix plugin loads).
set -euo pipefail

# The Slurm daemons live in /usr/sbin, which a test's PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"

if [ -n "${TEST_SRCDIR:-}" ] && [ -n "${TEST_WORKSPACE:-}" ]; then
  root="$TEST_SRCDIR/$TEST_WORKSPACE"
  bin_dir="${PS_BIN_DIR:-$root}"
  dir="$TEST_TMPDIR/slurm_test"
  rm -rf "$dir"
  mkdir -p "$dir"
else
  root="${PS_REPO:-$(cd "$(dirname "$0")/.." && pwd)}"
  bin_dir="${PS_BIN_DIR:-$root/bazel-bin}"
  dir=$(mktemp -d "${TMPDIR:-/tmp}/slurm_test.XXXXXX")
fi
local_slurm="$root/deploy/slurm/local_slurm.sh"
sbatch_script="$root/deploy/slurm/paramserver.sbatch"
etcd_lib="$root/deploy/lib/etcd.sh"
min_accuracy="${PS_MIN_ACCURACY:-0.80}"
min_auc="${PS_MIN_AUC:-0.76}"
job_timeout="${PS_JOB_TIMEOUT:-120}"
gen_libsvm="$bin_dir/worker/ps_gen_libsvm"
for f in "$local_slurm" "$sbatch_script" "$etcd_lib" "$gen_libsvm"; do
  [ -r "$f" ] || { echo "FAIL: missing $f" >&2; exit 1; }
done
t0=$(date +%s.%N)
elapsed() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

job_id=""
job_out=""
slurm_conf=""
daemon_pids=()
# Slurm client commands for this instance only (SLURM_CONF is not exported
# to the test's own shell, so that the final scan below can find every
# process of the instance by its environment).
sl() { SLURM_CONF="$slurm_conf" "$@"; }

dump() {
  local f
  if [ -n "$job_out" ] && [ -f "$job_out" ]; then
    echo "---- job output ($job_out), without progress lines:" >&2
    grep -v ': epoch [0-9]* step' "$job_out" | tail -n 60 >&2 || true
  fi
  for f in "$dir"/jobs/paramserver-*/servers.log "$dir"/jobs/paramserver-*/etcd.out \
      "$dir"/log/slurmctld.log "$dir"/log/slurmd.log; do
    [ -f "$f" ] || continue
    echo "---- last lines of $f:" >&2
    tail -n 15 "$f" >&2
  done
}
fail() {
  echo "FAIL: $*" >&2
  dump
  exit 1
}

# Stops Slurm on every exit (a signal included); by hand, a passing run's
# directory is removed and a failing one's kept.
cleanup() {
  local status=$?
  trap - EXIT
  "$local_slurm" stop "$dir" >/dev/null 2>&1 || true
  if [ -z "${TEST_TMPDIR:-}" ]; then
    if [ "$status" -eq 0 ]; then rm -rf "$dir"; else echo "slurm_test: files kept in $dir" >&2; fi
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'echo "slurm_test: interrupted" >&2; exit 143' TERM INT

# ---- Slurm up --------------------------------------------------------------
"$local_slurm" start "$dir" || fail "local Slurm did not start"
slurm_conf=$(sed -n 's/^export SLURM_CONF=//p' "$dir/slurm.env")
[ -r "$slurm_conf" ] || fail "no slurm.conf at '$slurm_conf'"
for name in munged slurmctld slurmd; do
  pid=$(cat "$dir/run/$name.pid")
  kill -0 "$pid" 2>/dev/null || fail "$name ($pid) is not running after start"
  daemon_pids+=("$pid")
done
echo "slurm up after $(elapsed)s: $(sl sinfo -h -N -o '%N %T %c CPUs %m MB')"

# ---- the jobs --------------------------------------------------------------
# One node with 2 CPUs for 3 + 2 tasks (+ etcd): --overcommit lets the steps
# share them. 127.0.0.1 is the node's address here.
mkdir -p "$dir/jobs"
cd "$dir/jobs"

# submit_job NAME [VAR=VALUE]...: submits the sbatch script with 3 servers
# (replicas 2) and 2 workers, plus the given environment; sets job_id and
# job_out.
submit_job() {
  local name=$1
  shift
  job_id=$(sl env PS_BIN_DIR="$bin_dir" PS_ETCD_LIB="$etcd_lib" PS_SERVERS=3 PS_WORKERS=2 \
    PS_REPLICAS=2 PS_BIND_HOST=127.0.0.1 "$@" \
    sbatch --parsable --job-name="$name" --nodes=1 --ntasks=5 --overcommit \
      --time=5 --chdir="$dir/jobs" --output="$dir/jobs/job-%j.out" "$sbatch_script") ||
    fail "sbatch refused the job $name"
  job_id=${job_id%%;*}
  job_out="$dir/jobs/job-$job_id.out"
  echo "submitted job $job_id ($name)"
}

# wait_job: polls job_id's state (bounded; sbatch --wait would also do, but
# it polls at 2, 8 and then 32 s intervals) and fails unless it ends
# COMPLETED with exit code 0:0.
wait_job() {
  local i record="" state="" exit_code
  for ((i = 0; i < job_timeout * 5; i++)); do
    record=$(sl scontrol show job -o "$job_id" 2>/dev/null) || record=""
    state=$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$record")
    case "$state" in
      PENDING|CONFIGURING|RUNNING|COMPLETING|"") sleep 0.2 ;;
      *) break ;;
    esac
  done
  exit_code=$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<<"$record")
  echo "job $job_id: state $state, exit code $exit_code, after $(elapsed)s"
  case "$state" in
    COMPLETED) ;;
    PENDING|CONFIGURING|RUNNING|COMPLETING)
      sl scancel "$job_id" || true
      fail "job $job_id still $state after ${job_timeout}s (reason: $(sed -n 's/.* Reason=\([^ ]*\).*/\1/p' <<<"$record"))" ;;
    *) fail "job $job_id ended $state (exit code $exit_code)" ;;
  esac
  [ "$exit_code" = "0:0" ] || fail "job $job_id exit code $exit_code"
}

# check_stopped: the job's servers and etcd shut down on its SIGTERM.
check_stopped() {
  local servers_log="$dir/jobs/paramserver-$job_id/servers.log" i
  grep -q '^paramserver job: servers stopped (.*exit status 0)' "$job_out" ||
    fail "the servers did not stop cleanly"
  grep -q '^paramserver job: etcd stopped (.*exit status 0)' "$job_out" ||
    fail "etcd did not stop cleanly"
  [ -f "$servers_log" ] || fail "no $servers_log"
  for i in 0 1 2; do
    grep -q "^$i: .*ps_server $i .*shut down" "$servers_log" || fail "server $i did not shut down on SIGTERM"
  done
}

submit_job ps-slurm-test PS_EPOCHS=2
wait_job

# ---- its output (the first job) --------------------------------------------
[ -f "$job_out" ] || fail "no job output $job_out"
summary=$(grep '^paramserver job: [0-9]* workers, test accuracy ' "$job_out" || true)
[ -n "$summary" ] || fail "no summary line in the job output"
echo "$summary"
accuracy=${summary##* }
[[ "$accuracy" =~ ^[0-9]+\.[0-9]+$ ]] || fail "summary accuracy '$accuracy' is not a number"
grep -q '^paramserver job: 2 workers,' <<<"$summary" || fail "summary does not report 2 workers"
awk -v a="$accuracy" -v m="$min_accuracy" 'BEGIN { exit !(a >= m) }' ||
  fail "test accuracy $accuracy < $min_accuracy"
check_stopped
first_summary=$summary

# ---- the MPI job -----------------------------------------------------------
# Its data: a planted logistic model's examples, written in well under a
# second (the test set continues the training set's sequence).
data="$dir/data"
mkdir -p "$data"
"$gen_libsvm" --out="$data/train.txt" --examples=20000 --features=20000 --num_fields=4 \
  --seed=1 --threads=1 --progress_seconds=0 >/dev/null || fail "ps_gen_libsvm (training set) failed"
"$gen_libsvm" --out="$data/test.txt" --examples=5000 --first_example=20000 --features=20000 \
  --num_fields=4 --seed=1 --threads=1 --progress_seconds=0 >/dev/null || fail "ps_gen_libsvm (test set) failed"
submit_job ps-slurm-mpi-test PS_EPOCHS=1 PS_MODEL=embedding_mlp PS_WORKER_LAUNCH=mpi \
  PS_WORKER_ARGS="--dense_sync=allreduce --num_fields=4 --train_data=$data/train.txt --test_data=$data/test.txt"
wait_job
[ -f "$job_out" ] || fail "no job output $job_out"
grep -q '^paramserver job: .* 2 workers (one MPI job, srun --mpi=pmix)' "$job_out" ||
  fail "the job did not start its workers as one MPI job"
summary=$(grep '^paramserver job: 2 workers, test auc [0-9.]*, test accuracy [0-9.]*$' "$job_out" || true)
[ -n "$summary" ] || fail "no summary line with a test AUC in the MPI job's output"
echo "$summary"
auc=${summary#* test auc }
auc=${auc%%,*}
awk -v a="$auc" -v m="$min_auc" 'BEGIN { exit !(a >= m) }' || fail "test auc $auc < $min_auc"
workers_log="$dir/jobs/paramserver-$job_id/workers.log"
[ -f "$workers_log" ] || fail "no $workers_log"
# The ranks of an allreduce job hold one model: rank 0 alone evaluates it.
tests=$(grep -c '^ *[0-9]*: RESULT test_auc=' "$workers_log" || true)
if [ "$tests" -ne 1 ] || ! grep -q '^ *0: RESULT test_auc=' "$workers_log"; then
  fail "expected one test result, from rank 0; found $tests"
fi
# "RANK WORKER ROUNDS" of each rank's training line ("RESULT worker=W ...
# allreduce_rounds=N"); each rank is the worker of its index, and the
# allreduce rounds, which go on until every rank's data has ended, are as
# many on both.
rounds=$(sed -n 's/^ *\([0-9][0-9]*\): RESULT worker=\([0-9][0-9]*\) .*allreduce_rounds=\([0-9][0-9]*\).*/\1 \2 \3/p' \
  "$workers_log" | sort -n)
[ "$(awk '{ printf "%s%s:%s", (NR > 1 ? " " : ""), $1, $2 }' <<<"$rounds")" = "0:0 1:1" ] ||
  fail "expected the training lines of ranks 0 and 1 as workers 0 and 1; got '$(tr '\n' ';' <<<"$rounds")'"
awk 'NR == 1 { n = $3 } $3 != n || $3 == 0 { bad = 1 } END { exit bad }' <<<"$rounds" ||
  fail "the ranks ran different numbers of allreduce rounds: $(awk '{ printf "rank %s: %s; ", $1, $3 }' <<<"$rounds")"
echo "allreduce rounds: $(awk '{ printf "%srank %s %s", (NR > 1 ? ", " : ""), $1, $3 }' <<<"$rounds")"
check_stopped

# ---- Slurm down, nothing left ----------------------------------------------
"$local_slurm" stop "$dir" || fail "local_slurm.sh stop failed"
for pid in "${daemon_pids[@]}"; do
  ! kill -0 "$pid" 2>/dev/null || fail "daemon $pid ($(cat /proc/"$pid"/comm 2>/dev/null)) still runs after stop"
done
# Every process this Slurm instance started (daemons, slurmstepd, the job's
# tasks) carries its SLURM_CONF in the environment.
left=()
for environ in /proc/[0-9]*/environ; do
  pid=${environ#/proc/}; pid=${pid%/environ}
  [ "$pid" = "$$" ] && continue
  if tr '\0' '\n' 2>/dev/null <"$environ" | grep -qxF "SLURM_CONF=$slurm_conf"; then
    left+=("$pid:$(cat /proc/"$pid"/comm 2>/dev/null)")
  fi
done
[ ${#left[@]} -eq 0 ] || fail "processes of the Slurm instance left after stop: ${left[*]}"
echo "PASS: Slurm jobs ($first_summary; MPI: $summary), every daemon stopped; $(elapsed)s"
