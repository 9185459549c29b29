#!/usr/bin/env bash
# Metrics end to end: two ps_server processes and a training ps_worker serve
# /metrics, /healthz and /readyz; a real Prometheus (Debian's) scrapes them
# every 500 ms, and the series are read back through its HTTP API. Also: the
# worker's training-curve CSV, and a taken metrics port as a clear error.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"

command -v prometheus >/dev/null || fail "prometheus is not installed; run deploy/setup.sh"
py=/usr/bin/python3

free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The servers by hand: each writes its metrics port to a file of its own.
for i in 0 1; do
  "$server_bin" --num_servers=2 --index=$i --listen=127.0.0.1:0 --port_file="$dir/server$i.port" \
    --metrics_port=0 --metrics_port_file="$dir/m$i" 2>"$dir/server$i.log" &
  server_pids+=($!)
  all_pids+=($!)
done
spec=""
for i in 0 1; do
  wait_for_file "$dir/server$i.port" 10 "${server_pids[$i]}" || fail "server $i wrote no port file"
  wait_for_file "$dir/m$i" 10 "${server_pids[$i]}" || fail "server $i wrote no metrics port file"
  spec="${spec:+$spec,}127.0.0.1:$(cat "$dir/server$i.port")"
done
m0=$(cat "$dir/m0")
m1=$(cat "$dir/m1")
for path in healthz readyz; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$m0/$path")
  [ "$code" = 200 ] || fail "/$path of server 0 answered $code"
done

# A metrics port that is taken: a clear error, naming it.
if "$server_bin" --num_servers=2 --index=0 --listen=127.0.0.1:0 --metrics_port="$m0" \
  2>"$dir/taken.log"; then
  fail "a server started on a taken metrics port"
fi
grep -q "could not listen on 127.0.0.1:$m0" "$dir/taken.log" || { cat "$dir/taken.log"; fail "no clear error for the taken metrics port"; }

# Prometheus on a free loopback port, scraping the two servers and the
# worker (whose port is fixed here, so that the configuration names it).
wport=$(free_port)
pport=$(free_port)
mkdir -p "$dir/prometheus"
cat >"$dir/prometheus.yml" <<EOF
global:
  scrape_interval: 500ms
  scrape_timeout: 400ms
scrape_configs:
  - job_name: servers
    static_configs:
      - targets: ['127.0.0.1:$m0', '127.0.0.1:$m1']
  - job_name: workers
    static_configs:
      - targets: ['127.0.0.1:$wport']
EOF
prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/prometheus" \
  --web.listen-address="127.0.0.1:$pport" >"$dir/prometheus.log" 2>&1 &
all_pids+=($!)
poll_until 20 curl -sf -o /dev/null "http://127.0.0.1:$pport/-/ready" || fail "prometheus did not become ready"

# query EXPR: prints the sum of the result's values ("none" when empty).
query() {
  curl -sf --get "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1" |
    "$py" -c 'import json,sys
r = json.load(sys.stdin)["data"]["result"]
print(sum(float(x["value"][1]) for x in r) if r else "none")'
}
# wait_for EXPR: until the query has a positive value (bounded: 30 s).
wait_for() {
  local v
  for _ in $(seq 1 150); do
    v=$(query "$1")
    [ "$v" != none ] && awk -v v="$v" 'BEGIN { exit !(v > 0) }' && { echo "$1 = $v"; return 0; }
    sleep 0.2
  done
  fail "Prometheus never had a positive value for: $1 (last: $v)"
}

"$worker_bin" --servers="$spec" --model=mlp --epochs=1 --max_train_examples=20000 --progress_seconds=0.2 \
  --metrics_port="$wport" --metrics_linger_seconds=120 --curve_csv="$dir/curve.csv" \
  >"$dir/worker.log" 2>&1 &
worker=$!
all_pids+=("$worker")
# It trains in about a second; it then serves its final values until killed.
wait_for_line "$dir/worker.log" '^RESULT test_accuracy=' 30 || fail "the worker printed no test accuracy"
accuracy=$(sed -n 's/^RESULT test_accuracy=//p' "$dir/worker.log")
wait_for 'ps_worker_steps_total{job="workers"}'
wait_for 'ps_worker_test_result{job="workers",metric="accuracy"}'
wait_for 'ps_grpc_client_handled_total{job="workers",method="ParameterServer/PushPull",code="OK"}'
kill -TERM "$worker"
wait "$worker" 2>/dev/null || true

wait_for 'sum(up{job="servers"}) == 2'
wait_for 'ps_grpc_server_handled_total{method="ParameterServer/PushPull",code="OK"}'
wait_for 'ps_grpc_server_received_bytes_total{method="ParameterServer/PushPull"}'
wait_for 'ps_memory_used_bytes'
wait_for 'sum(ps_apply_seconds_count)'
wait_for 'ps_table_pulls_total'
wait_for 'histogram_quantile(0.99, sum by (le) (ps_grpc_server_handling_seconds_bucket{method="ParameterServer/PushPull"}))'

# The curve: a header, progress rows, and the test result last.
head -n 1 "$dir/curve.csv" | grep -q '^seconds,epoch,step,examples,loss,' || fail "curve.csv has no header"
rows=$(($(wc -l <"$dir/curve.csv") - 1))
[ "$rows" -ge 3 ] || fail "curve.csv has $rows rows"
tail -n 1 "$dir/curve.csv" | grep -q ",accuracy,$accuracy\$" || { tail -n 2 "$dir/curve.csv"; fail "the curve's last row is not the test accuracy $accuracy"; }

stop_servers
echo "PASS: Prometheus scraped 2 servers and a worker; curve.csv has $rows rows, test accuracy $accuracy"
