# shellcheck shell=bash
# Sourced by the deploy scripts and, through tests/cluster_lib.sh, by the
# process tests: starts ps_server processes on 127.0.0.1 with ports chosen
# by the kernel (no fixed ports, so runs never collide). Sources wait.sh.
#
#   start_servers BIN_DIR WORK_DIR N [ps_server flags...]
#     starts N servers (BIN_DIR/server/ps_server); server I logs to
#     WORK_DIR/serverI.log and writes its port to WORK_DIR/serverI.port.
#     With `server_cpus` set (a CPU list, "0" or "0-3"), they run pinned to
#     those CPUs (taskset -c).
#     Sets `spec` to host:port,..., `server_pids` to their pids, and appends
#     these to the array `all_pids`. Calls `fail` when one exits during
#     start-up or writes no port within 30 s.
#   restart_server I
#     starts server I of the last start_servers again (after it stopped or
#     was killed), on its port with the same flags; its log goes on.
#   stop_servers
#     SIGTERM to `server_pids`, then waits for each; calls `fail` when one
#     exited with a status other than 0.
#   stop_on_exit DIR
#     when the script exits: SIGTERM to every process in `all_pids`, waits
#     for them, and removes DIR. Empties `all_pids`.
#   fail MESSAGE
#     prints "<script>: MESSAGE" and exits 1. A script that sources this may
#     define its own after it (tests/cluster_lib.sh adds the logs' ends).

# shellcheck source=deploy/lib/wait.sh
source "$(dirname "${BASH_SOURCE[0]}")/wait.sh"

fail() {
  echo "$(basename "$0"): $*" >&2
  exit 1
}

# Sets `_ps_pin` to the prefix that pins a server to `server_cpus`, or none.
_ps_pin_prefix() {
  _ps_pin=()
  if [ -n "${server_cpus:-}" ]; then _ps_pin=(taskset -c "$server_cpus"); fi
}

# PORT_FILE PID: whether the port file is written, or the server is gone.
_ps_port_or_exited() { [ -s "$1" ] || ! kill -0 "$2" 2>/dev/null; }

start_servers() {
  local bin_dir=$1 work_dir=$2 n=$3 i port_file log
  shift 3
  _ps_server_dirs=("$bin_dir" "$work_dir")
  _ps_server_flags=(--num_servers="$n" "$@")
  server_pids=()
  _ps_pin_prefix
  for ((i = 0; i < n; i++)); do
    rm -f "$work_dir/server$i.port"
    "${_ps_pin[@]}" "$bin_dir/server/ps_server" --index="$i" --listen=127.0.0.1:0 \
      --port_file="$work_dir/server$i.port" "${_ps_server_flags[@]}" 2>"$work_dir/server$i.log" &
    server_pids+=("$!")
    all_pids+=("$!")
  done
  spec=""
  for ((i = 0; i < n; i++)); do
    port_file="$work_dir/server$i.port"
    log="$work_dir/server$i.log"
    poll_until 30 _ps_port_or_exited "$port_file" "${server_pids[$i]}" ||
      fail "server $i wrote no port to $port_file within 30 s (log: $log)"
    [ -s "$port_file" ] ||
      fail "server $i exited during start-up; the end of $log:"$'\n'"$(tail -n 20 "$log")"
    spec="${spec:+$spec,}127.0.0.1:$(cat "$port_file")"
  done
}

restart_server() {
  local i=$1 bin_dir=${_ps_server_dirs[0]} work_dir=${_ps_server_dirs[1]}
  _ps_pin_prefix
  "${_ps_pin[@]}" "$bin_dir/server/ps_server" --index="$i" --listen="127.0.0.1:$(cat "$work_dir/server$i.port")" \
    "${_ps_server_flags[@]}" 2>>"$work_dir/server$i.log" &
  server_pids[i]=$!
  all_pids+=("$!")
}

stop_servers() {
  local i status
  for i in "${!server_pids[@]}"; do kill -TERM "${server_pids[$i]}" 2>/dev/null || true; done
  for i in "${!server_pids[@]}"; do
    status=0
    wait "${server_pids[$i]}" || status=$?
    [ "$status" = 0 ] || fail "server $i exited with status $status after SIGTERM"
  done
  server_pids=()
}

stop_on_exit() {
  _ps_exit_dir=$1
  all_pids=()
  trap _ps_stop_all EXIT
}
_ps_stop_all() {
  local p
  for p in "${all_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${all_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$_ps_exit_dir"
}
