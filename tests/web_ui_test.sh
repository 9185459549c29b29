#!/usr/bin/env bash
# The web UI in headless Chromium (Debian's chromium), against real
# processes:
#   1. two servers and four workers training the MLP; the page a server
#      serves on its metrics port is loaded twice, a few progress reports
#      apart: both show the ring (two shards) and the four workers' loss
#      curves, and the second's loss chart differs from the first's (the page
#      updates while the job runs); the screenshots are kept in the test's
#      outputs (ui1.png, ui2.png);
#   2. ps_admin ui serves the same page and data for the cluster;
#   3. with TLS and tokens on, the servers' UI is served over HTTPS, and
#      refuses a request without the token (401) while the page and the data
#      open with ?token=.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/cluster_lib.sh"
admin_bin="$root/tools/ps_admin"
command -v chromium >/dev/null || fail "chromium missing: deploy/setup.sh installs it"
out="${TEST_UNDECLARED_OUTPUTS_DIR:-$dir}"

# page URL FILE [screenshot.png]: the DOM of the page after its scripts ran
# (a few polls of the data), and a screenshot when asked.
page() {
  local url=$1 dom=$2 shot=${3:-}
  local common=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage
    --ignore-certificate-errors --user-data-dir="$dir/chromium" --virtual-time-budget=5000)
  # The DOM without the page's script, whose text holds the same markup.
  timeout 60 chromium "${common[@]}" --dump-dom "$url" 2>"$dir/chromium.log" |
    sed '/<script>/,/<\/script>/d' >"$dom" || fail "chromium could not load $url: $(tail -3 "$dir/chromium.log")"
  [ -s "$dom" ] || fail "chromium loaded nothing from $url: $(tail -3 "$dir/chromium.log")"
  if [ -n "$shot" ]; then
    timeout 60 chromium "${common[@]}" --window-size=1200,1500 --screenshot="$shot" "$url" \
      >/dev/null 2>>"$dir/chromium.log" || fail "chromium could not take a screenshot of $url"
  fi
}
# curves DOM: the loss chart's paths (one line each).
curves() {
  tr '\n' ' ' <"$1" | grep -oP '<svg id="loss-chart".*?</svg>' |
    grep -o 'class="curve"[^>]*d="[^"]*"' || true
}
# steps LOG: the last step a worker's progress line shows.
steps() { sed -n 's/.* step \([0-9]*\) .*/\1/p' "$1" | tail -1; }

# ---- 1. a server's page while a job runs ------------------------------------
start_servers "$root" "$dir" 2 --metrics_port=0 --metrics_port_file="$dir/metrics.port" \
  --servers_file="$dir/spec"
echo "$spec" >"$dir/spec.tmp" && mv "$dir/spec.tmp" "$dir/spec"
wait_for_file "$dir/metrics.port" 10 || fail "no metrics port"
url="http://127.0.0.1:$(cat "$dir/metrics.port")/"
for w in 0 1 2 3; do
  "$worker_bin" --servers="$spec" --worker_index=$w --num_workers=4 --model=mlp --epochs=50 \
    --max_train_examples=40000 --progress_seconds=0.3 >"$dir/worker$w.log" 2>&1 &
  all_pids+=($!)
done
for w in 0 1 2 3; do
  wait_for_line "$dir/worker$w.log" " step " 60 || fail "worker $w reported no progress"
done
page "$url" "$dir/dom1.html" "$out/ui1.png"
first=$(steps "$dir/worker0.log")
past() { [ "$(steps "$dir/worker0.log")" -gt "$1" ]; }
poll_until 60 past $((first + 40)) || fail "worker 0 stopped"
page "$url" "$dir/dom2.html" "$out/ui2.png"
for d in dom1 dom2; do
  [ "$(grep -o 'class="shard-row"' "$dir/$d.html" | wc -l)" = 2 ] || fail "$d: the ring has not 2 shards"
  [ "$(curves "$dir/$d.html" | wc -l)" = 4 ] || fail "$d: the loss chart has not 4 workers' curves"
  curves "$dir/$d.html" | grep -q 'd="M[0-9.,]* L' || fail "$d: a loss curve has a single point"
  grep -q 'class="alert"' "$dir/$d.html" && fail "$d: alerts on a healthy cluster: $(grep -o 'class="alert">[^<]*' "$dir/$d.html")"
done
[ "$(curves "$dir/dom1.html")" != "$(curves "$dir/dom2.html")" ] || fail "the loss chart did not change"
cmp -s "$out/ui1.png" "$out/ui2.png" && fail "the two screenshots are the same"
[ -s "$out/ui1.png" ] || fail "no screenshot"
echo "server's page: 2 shards, 4 loss curves, updated between two loads"

# ---- 2. ps_admin ui ---------------------------------------------------------
"$admin_bin" ui --servers="$spec" --ui_port=0 >"$dir/admin_ui.log" 2>&1 &
all_pids+=($!)
wait_for_line "$dir/admin_ui.log" "ps_admin ui: http" 10 || fail "ps_admin ui did not start"
admin_url=$(sed -n 's/^ps_admin ui: \(http[^ ]*\)/\1/p' "$dir/admin_ui.log")
page "$admin_url" "$dir/admin.html"
[ "$(grep -o 'class="shard-row"' "$dir/admin.html" | wc -l)" = 2 ] || fail "ps_admin ui: not 2 shards"
[ "$(curves "$dir/admin.html" | wc -l)" = 4 ] || fail "ps_admin ui: not 4 curves"
grep -q "ps_admin ui" "$dir/admin.html" || fail "ps_admin ui: the page does not name its source"
for p in "${all_pids[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${all_pids[@]}"; do wait "$p" 2>/dev/null || true; done
all_pids=()
echo "ps_admin ui: the same page for the cluster"

# ---- 3. TLS and tokens --------------------------------------------------------
pki="$dir/pki"
mkdir -p "$pki"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.pem" -days 2 \
  -subj "/CN=ca" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$pki/server.key" -out "$pki/server.csr" \
  -subj "/CN=server" 2>/dev/null
printf 'basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$pki/server.ext"
openssl x509 -req -in "$pki/server.csr" -CA "$pki/ca.pem" -CAkey "$pki/ca.key" -CAcreateserial \
  -out "$pki/server.pem" -days 2 -extfile "$pki/server.ext" 2>/dev/null
token=$(openssl rand -hex 24)
printf 'admin %s\n' "$token" >"$pki/tokens"
printf '%s\n' "$token" >"$pki/admin.token"
rm -f "$dir/metrics.port"
start_servers "$root" "$dir" 1 --tls_ca="$pki/ca.pem" --tls_cert="$pki/server.pem" \
  --tls_key="$pki/server.key" --tokens_file="$pki/tokens" --token_file="$pki/admin.token" \
  --metrics_port=0 --metrics_port_file="$dir/metrics.port"
wait_for_file "$dir/metrics.port" 10 || fail "no metrics port"
base="https://127.0.0.1:$(cat "$dir/metrics.port")"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$pki/ca.pem" "$base/api/cluster")
[ "$code" = 401 ] || fail "without the token the UI's data answered $code, not 401"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$pki/ca.pem" "$base/")
[ "$code" = 401 ] || fail "without the token the page answered $code, not 401"
curl -sf --cacert "$pki/ca.pem" -H "Authorization: Bearer $token" "$base/api/cluster" >"$dir/tls.json" ||
  fail "with the token over HTTPS the UI's data did not answer"
grep -q '"shards":\[{' "$dir/tls.json" || fail "over HTTPS the data has no shard: $(head -c 300 "$dir/tls.json")"
if curl -s -o /dev/null "http://127.0.0.1:$(cat "$dir/metrics.port")/"; then
  fail "the UI answered plain HTTP although the server has a certificate"
fi
page "$base/?token=$token" "$dir/tls.html"
[ "$(grep -o 'class="shard-row"' "$dir/tls.html" | wc -l)" = 1 ] || fail "the page over HTTPS with ?token= shows no shard"
echo "TLS and tokens: HTTPS, 401 without the token, the page with ?token="
echo "web_ui_test: PASS"
