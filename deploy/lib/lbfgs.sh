# shellcheck shell=bash
# Sourced after servers.sh (deploy/lbfgs_experiment.sh, and through
# tests/cluster_lib.sh by tests/lbfgs_process_test.sh): starts a Sandblaster
# L-BFGS job on the servers of `spec`.
#
#   start_lbfgs ROOT WORK NAME DATA [ps_lbfgs flags...] [-- worker 1's flags...]
#     starts ROOT/worker/lbfgs/ps_lbfgs (log WORK/NAME.log, port in
#     WORK/NAME.port) and two ROOT/worker/ps_worker --algorithm=lbfgs on the
#     LibSVM file DATA (logs WORK/NAME.workerI.log), worker 1 with the flags
#     after --. Sets `coord_pid` and `lbfgs_workers` and appends them to
#     `all_pids`. Calls `fail` when the coordinator writes no port within 30 s.

start_lbfgs() {
  local root=$1 work=$2 name=$3 data=$4 coord_flags=() w1_flags=() port i
  shift 4
  while [ $# -gt 0 ] && [ "$1" != -- ]; do coord_flags+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  w1_flags=("$@")
  rm -f "$work/$name.port"
  # shellcheck disable=SC2154  # spec: set by start_servers (servers.sh)
  "$root/worker/lbfgs/ps_lbfgs" --servers="$spec" --port_file="$work/$name.port" \
    ${coord_flags[@]+"${coord_flags[@]}"} >"$work/$name.log" 2>&1 &
  coord_pid=$!
  all_pids+=("$coord_pid")
  wait_for_file "$work/$name.port" 30 "$coord_pid" || fail "$name: ps_lbfgs wrote no port"
  port=$(cat "$work/$name.port")
  lbfgs_workers=()
  for i in 0 1; do
    local extra=()
    [ "$i" = 1 ] && extra=(${w1_flags[@]+"${w1_flags[@]}"})
    "$root/worker/ps_worker" --algorithm=lbfgs --coordinator="127.0.0.1:$port" --servers="$spec" \
      --train_data="$data" --worker_index=$i ${extra[@]+"${extra[@]}"} \
      >"$work/$name.worker$i.log" 2>&1 &
    lbfgs_workers+=("$!")
    all_pids+=("$!")
  done
}
