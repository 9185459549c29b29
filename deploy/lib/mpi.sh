# shellcheck shell=bash
# Sourced by deploy/local_cluster.sh and the experiments: runs a command as
# an MPI job on this machine (Open MPI's mpirun, loopback).
#
#   mpi_run N COMMAND [ARGS...]
#     starts N processes of COMMAND under mpirun (more than the cores
#     allowed; as root too), each with ARGS in which @RANK@ becomes its
#     rank (OMPI_COMM_WORLD_RANK): per-rank file names such as
#     --curve_csv=dir/curve@RANK@.csv. Returns mpirun's status: non-zero
#     when any process failed or was killed (mpirun then ends the others).

mpi_run() {
  local n=$1
  shift
  command -v mpirun >/dev/null || { echo "mpi_run: mpirun missing: deploy/setup.sh installs openmpi-bin" >&2; return 1; }
  # Open MPI refuses root unless told; runs here are local jobs. The body
  # is expanded by each rank's shell, not this one.
  # shellcheck disable=SC2016
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun --oversubscribe -np "$n" bash -c \
    'args=(); for a in "$@"; do args+=("${a//@RANK@/$OMPI_COMM_WORLD_RANK}"); done; exec "${args[@]}"' \
    mpi_rank "$@"
}
