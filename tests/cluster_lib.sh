# Shared by the multi-process tests (sourced): starts real ps_server
# processes on kernel-chosen ports and stops everything on exit.
#   start_servers N [extra ps_server flags]  -> sets $spec; pids in $server_pids
#   restart_server I  -> starts server I again (after it stopped or was killed)
#                        on its port, with the same flags; its log goes on
#   fail MESSAGE
#   wait_for_line FILE PATTERN
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
server_bin="$root/server/ps_server"
worker_bin="$root/worker/ps_worker"
dir="${TEST_TMPDIR}/$(basename "$0" .sh)"
rm -rf "$dir" && mkdir -p "$dir"

all_pids=()
server_pids=()
cleanup() { for p in "${all_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# Fails the test, with the last lines of every log of the run (what the
# processes said is most of what a failure in CI leaves to go on).
fail() {
  echo "FAIL: $*" >&2
  local f
  for f in "$dir"/*.log; do
    [ -f "$f" ] || continue
    echo "--- last lines of $(basename "$f"):" >&2
    tail -n 12 "$f" >&2
  done
  exit 1
}

wait_for_line() {  # FILE PATTERN: waits (at most 30 s) until FILE has a line matching PATTERN
  local _
  for _ in $(seq 1 600); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  fail "no line matching '$2' in $1"
}

start_servers() {
  local n=$1 i
  shift
  server_pids=()
  server_flags=(--num_servers="$n" "$@")
  for ((i = 0; i < n; i++)); do
    rm -f "$dir/p$i"
    "$server_bin" --index="$i" --listen=127.0.0.1:0 --port_file="$dir/p$i" "${server_flags[@]}" \
      2>"$dir/server$i.log" &
    server_pids+=($!)
    all_pids+=($!)
  done
  spec=""
  for ((i = 0; i < n; i++)); do
    for _ in $(seq 1 200); do [ -s "$dir/p$i" ] && break; sleep 0.05; done
    [ -s "$dir/p$i" ] || fail "server $i wrote no port file"
    spec="${spec:+$spec,}127.0.0.1:$(cat "$dir/p$i")"
  done
  echo "servers: $spec"
}

restart_server() {
  local i=$1 port
  port=$(cat "$dir/p$i")
  "$server_bin" --index="$i" --listen="127.0.0.1:$port" "${server_flags[@]}" 2>>"$dir/server$i.log" &
  server_pids[$i]=$!
  all_pids+=($!)
}

stop_servers() {
  local p
  for p in "${server_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${server_pids[@]}"; do wait "$p" || fail "a server exited non-zero after SIGTERM"; done
  server_pids=()
}
