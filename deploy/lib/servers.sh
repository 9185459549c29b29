# Sourced by the deploy scripts: starts ps_server processes on 127.0.0.1 with
# ports chosen by the kernel (no fixed ports, so runs never collide).
#
#   start_servers BIN_DIR WORK_DIR N [ps_server flags...]
#     starts N servers; appends their pids to the array `pids`, sets `spec`
#     to host:port,... and `server_pids` to their pids. Exits with the
#     server's log if one dies or writes no port within 30 s.
#   stop_servers
#     SIGTERM to `server_pids`, then waits for them.

start_servers() {
  local bin_dir=$1 work_dir=$2 n=$3 i
  shift 3
  server_pids=()
  for ((i = 0; i < n; i++)); do
    rm -f "$work_dir/server$i.port"
    "$bin_dir/server/ps_server" --num_servers="$n" --index="$i" --listen=127.0.0.1:0 \
      --port_file="$work_dir/server$i.port" "$@" 2>"$work_dir/server$i.log" &
    server_pids+=($!)
    pids+=($!)
  done
  spec=""
  for ((i = 0; i < n; i++)); do
    for _ in $(seq 1 300); do
      [ -s "$work_dir/server$i.port" ] && break
      if ! kill -0 "${server_pids[$i]}" 2>/dev/null; then
        echo "server $i exited during start-up:" >&2
        cat "$work_dir/server$i.log" >&2
        exit 1
      fi
      sleep 0.1
    done
    [ -s "$work_dir/server$i.port" ] || { echo "server $i wrote no port in 30 s" >&2; exit 1; }
    spec="${spec:+$spec,}127.0.0.1:$(cat "$work_dir/server$i.port")"
  done
}

stop_servers() {
  local p
  for p in "${server_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${server_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  server_pids=()
}

# stop_on_exit DIR: when the script exits, stops every process in `pids`
# (SIGTERM, then waits) and removes DIR.
stop_on_exit() {
  _ps_exit_dir=$1
  pids=()
  trap _ps_stop_all EXIT
}
_ps_stop_all() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$_ps_exit_dir"
}
