#!/usr/bin/env bash
# MpiCollective under mpirun (Open MPI, 3 processes on this machine): every
# rank's allreduce, allgather and broadcast equal the values computed by
# hand; and with one rank SIGKILLed mid-job, mpirun ends every process and
# fails, naming it, instead of leaving the others waiting.
set -euo pipefail
check="$TEST_SRCDIR/$TEST_WORKSPACE/worker/collective/mpi_collective_check"
fail() { echo "mpi_collective_test: $*" >&2; exit 1; }
command -v mpirun >/dev/null || fail "mpirun missing: deploy/setup.sh installs openmpi-bin"
# As root (CI), and with more processes than cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe -np 3)
out="$TEST_TMPDIR/ok.log"
timeout 120 "${mpi[@]}" "$check" >"$out" 2>&1 || { cat "$out"; fail "the 3-rank run failed"; }
for r in 0 1 2; do
  grep -q "^rank $r of 3: OK" "$out" || { cat "$out"; fail "rank $r did not report OK"; }
done
killed="$TEST_TMPDIR/killed.log"
status=0
timeout 120 "${mpi[@]}" "$check" --die_rank=1 >"$killed" 2>&1 || status=$?
[ "$status" -ne 0 ] || { cat "$killed"; fail "mpirun succeeded though rank 1 was killed"; }
[ "$status" -ne 124 ] || { cat "$killed"; fail "mpirun hung (timeout) after rank 1 was killed"; }
grep -qi "signal 9\|killed" "$killed" || { cat "$killed"; fail "mpirun's output does not say a rank was killed"; }
if grep -q "OK" "$killed"; then cat "$killed"; fail "a rank reported OK past the dead one"; fi
echo "mpi_collective_test: PASS (3 ranks; a killed rank ends the job with status $status)"
