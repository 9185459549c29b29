#!/usr/bin/env bash
# What gRPC's threading costs a small call on this machine, outside the
# project's code (deploy/bench/grpc_threads_bench.cc): for each server API
# (callback, queue, queue_health, two_queues) and client API (callback,
# queue), with both processes free to run on any CPU and then pinned to
# different CPUs (taskset), --rounds runs of 16 calls in flight of 16 KB
# each. Prints one line per run, over loopback only:
#
#   GRPC round=1 server=queue client=queue pin=split calls_per_s=... client_cpu_us=...
#        server_cpu_us=...
#
#   deploy/bench/grpc_threads.sh [--rounds N] [--seconds S]
set -euo pipefail

rounds=2
seconds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "grpc_threads.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "grpc_threads.sh: --rounds=$rounds must be >= 1" >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "grpc_threads.sh: needs 2 CPUs or more to pin the two sides apart" >&2; exit 2; }

cd "$(dirname "$0")/../.."
bazel build --ui_event_filters=-info --noshow_progress //deploy/bench:grpc_threads_bench
bench="$(bazel info bazel-bin 2>/dev/null)/deploy/bench/grpc_threads_bench"

# run SERVER_API CLIENT_API PIN ROUND: one measured run (after a 1 s warm-up).
run() {
  local server_api=$1 client_api=$2 pin=$3 round=$4 server_pin=() client_pin=() port result cpu
  if [ "$pin" = split ]; then
    server_pin=(taskset -c 0)
    client_pin=(taskset -c 1)
  fi
  coproc SERVER { exec "${server_pin[@]}" "$bench" --role=server --api="$server_api"; }
  local server_pid=$SERVER_PID
  read -r -t 30 port <&"${SERVER[0]}" || { echo "grpc_threads.sh: the server printed no port" >&2; exit 1; }
  local client=("${client_pin[@]}" "$bench" --role=client --target="127.0.0.1:$port"
    --api="$client_api" --inflight=16)
  "${client[@]}" --seconds=1 >/dev/null
  echo start >&"${SERVER[1]}"
  result=$("${client[@]}" --seconds="$seconds")
  echo end >&"${SERVER[1]}"
  read -r -t 30 cpu <&"${SERVER[0]}" || { echo "grpc_threads.sh: the server printed no CPU figure" >&2; exit 1; }
  local to_server=${SERVER[1]}
  exec {to_server}>&-  # end of input: the server stops
  wait "$server_pid"
  echo "GRPC round=$round server=$server_api client=$client_api pin=$pin $result $cpu"
}

for ((r = 1; r <= rounds; r++)); do
  for pin in none split; do
    for server_api in callback queue queue_health two_queues; do
      for client_api in callback queue; do
        run "$server_api" "$client_api" "$pin" "$r"
      done
    done
  done
done
