# shellcheck shell=bash
# Sourced by the benchmark scripts: the machine limits figures are compared
# with, measured in the same run.
#   iperf_gbps -> prints loopback TCP bandwidth (iperf3, one stream, 3 s) in
#                 GB/s, or 0 when no free port was found. Only 127.0.0.1.
#   bench_dirs OUT NAME -> creates OUT, empties `raw` (OUT/raw.txt) and makes
#                 `work`, a scratch directory removed with every process in
#                 `all_pids` when the script exits (deploy/lib/servers.sh's
#                 stop_on_exit, which must be sourced too).
iperf_gbps() {
  local port
  for port in $(shuf -i 20000-60000 -n 20); do
    iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
    local server=$!
    sleep 0.3
    if kill -0 "$server" 2>/dev/null; then
      local json
      json=$(iperf3 -c 127.0.0.1 -p "$port" -t 3 -J 2>/dev/null || true)
      wait "$server" 2>/dev/null || true
      echo "$json" | awk '/"sum_received"/ {f=1} f && /"bits_per_second"/ {gsub(/[,]/,""); print $2/8e9; exit}'
      return
    fi
  done
  echo 0
}

bench_dirs() {
  mkdir -p "$1"
  raw="$1/raw.txt"
  : >"$raw"
  work="$(mktemp -d "${TMPDIR:-/tmp}/$2.XXXXXX")"
  stop_on_exit "$work"
}
