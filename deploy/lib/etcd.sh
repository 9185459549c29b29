# shellcheck shell=bash
# Sourced by the deploy scripts and tests that run a replicated cluster:
# starts a single-node etcd on free loopback ports with its data in a given
# directory.
#
#   start_etcd WORK_DIR [HOST]
#     sets `etcd_endpoint` (HOST:PORT, HOST 127.0.0.1 by default) and
#     `etcd_pid`; the data and the log (etcd.log) are under WORK_DIR. Returns
#     1, with the log's tail, when etcd does not answer within 10 s (three
#     tries on new ports).
#   restart_etcd
#     after etcd was stopped (or killed): starts it again on the same ports
#     and data, and sets `etcd_pid`. Returns 1 when it does not answer
#     within 10 s.

_ps_free_port() {  # [HOST]
  python3 -c 'import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1]); s.close()' "${1:-127.0.0.1}"
}

# DIR HOST CLIENT_PORT PEER_PORT: runs etcd in the background (etcd_pid),
# and waits until it answers.
_ps_run_etcd() {
  local work_dir=$1 host=$2 client=$3 peer=$4
  etcd --name ps --data-dir "$work_dir/etcd" \
    --listen-client-urls "http://$host:$client" --advertise-client-urls "http://$host:$client" \
    --listen-peer-urls "http://$host:$peer" --initial-advertise-peer-urls "http://$host:$peer" \
    --initial-cluster "ps=http://$host:$peer" >>"$work_dir/etcd.log" 2>&1 &
  etcd_pid=$!
  local _
  for _ in $(seq 1 100); do
    if ETCDCTL_API=3 etcdctl --endpoints="$host:$client" endpoint health >/dev/null 2>&1; then
      return 0
    fi
    kill -0 "$etcd_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$etcd_pid" 2>/dev/null || true
  wait "$etcd_pid" 2>/dev/null || true
  return 1
}

start_etcd() {
  local work_dir=$1 host=${2:-127.0.0.1} client peer _
  command -v etcd >/dev/null || { echo "etcd is not installed; run deploy/setup.sh" >&2; return 1; }
  for _ in 1 2 3; do
    client=$(_ps_free_port "$host")
    peer=$(_ps_free_port "$host")
    if _ps_run_etcd "$work_dir" "$host" "$client" "$peer"; then
      # shellcheck disable=SC2034  # for the scripts that source this
      etcd_endpoint="$host:$client"
      _ps_etcd_args=("$work_dir" "$host" "$client" "$peer")
      return 0
    fi
  done
  echo "etcd did not start (3 tries); the end of $work_dir/etcd.log:" >&2
  tail -n 20 "$work_dir/etcd.log" >&2
  return 1
}

restart_etcd() {
  if ! _ps_run_etcd "${_ps_etcd_args[@]}"; then
    echo "etcd did not restart; the end of ${_ps_etcd_args[0]}/etcd.log:" >&2
    tail -n 20 "${_ps_etcd_args[0]}/etcd.log" >&2
    return 1
  fi
}
