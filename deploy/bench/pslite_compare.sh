#!/usr/bin/env bash
# This project's data path side by side with ps-lite's (dmlc/ps-lite on
# GitHub), in one run on this machine, over loopback only:
#   - builds ps-lite in the clone given with --pslite when DIR/build/libps.a is
#     missing (with its own Makefile: make ps), then
#     deploy/bench/pslite/pslite_bench.cc against it with g++, and this tree's
#     ps_server and ps_bench with Bazel;
#   - measures iperf3 loopback bandwidth (one stream) at the start and the end;
#   - for each of --rounds rounds, alternating which side goes first, runs the
#     same cases on both sides, 1 server and 1 client: the Downpour step on 1K
#     floats (p50), 1K-float pushes with 16 in flight, push+pull of 10,000
#     random keys (below 1M, and spread over uint64 like hashed ids), push+pull
#     of 1M floats. This project: ps_bench against one ps_server. ps-lite:
#     pslite_bench as its scheduler, a server (AdaGrad, as ps_server applies)
#     and a worker, on 127.0.0.1;
#   - writes OUT/pslite_raw.txt (the raw lines) and OUT/pslite_report.md (each
#     figure's median per side and their ratio).
#
#   deploy/bench/pslite_compare.sh --pslite DIR [--rounds N] [--seconds S] [--out DIR]
#                                  [--deps_path DIR] [--pushpull_combined]
#
# DIR: a git clone of ps-lite. Its Makefile downloads protobuf and ZeroMQ and
# builds them into DIR/deps (this needs the internet) unless they are there.
# With Debian's packages installed (apt-get install libzmq3-dev libprotobuf-dev
# protobuf-compiler) this script builds ps-lite with DEPS_PATH=/usr instead
# and downloads nothing; --deps_path DIR sets DEPS_PATH (it must be the one
# DIR/build/libps.a was built with). --pushpull_combined: ps-lite's step is
# one ZPushPull (recent clones only) instead of a ZPush and a ZPull.
# Defaults: 3 rounds, 2 s per case, OUT = $TMPDIR/ps_bench_pslite.
set -euo pipefail

pslite=""
rounds=3
seconds=2
warmup=0.3
out="${TMPDIR:-/tmp}/ps_bench_pslite"
deps=""
pslite_flags=()
usage_error() {
  echo "pslite_compare.sh: $* (see --help)" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    --pushpull_combined) pslite_flags+=(--pushpull_combined); shift ;;
    --pslite|--rounds|--seconds|--out|--deps_path)
      [ $# -ge 2 ] || usage_error "$1 needs a value"
      case "$1" in
        --pslite) pslite="$2" ;;
        --rounds) rounds="$2" ;;
        --seconds) seconds="$2" ;;
        --out) out="$2" ;;
        --deps_path) deps="$2" ;;
      esac
      shift 2 ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
done
[ -n "$pslite" ] || usage_error "--pslite DIR (a clone of ps-lite) is required"
if ! [[ "$rounds" =~ ^[0-9]+$ ]] || [ "$rounds" -lt 1 ]; then
  usage_error "--rounds=$rounds must be a whole number >= 1"
fi
if ! [[ "$seconds" =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]] || ! awk -v s="$seconds" 'BEGIN { exit !(s > 0) }'; then
  usage_error "--seconds=$seconds must be a number > 0"
fi
[ -d "$pslite" ] || usage_error "--pslite $pslite is not a directory"
for f in include/ps/ps.h Makefile; do
  [ -f "$pslite/$f" ] || usage_error "--pslite $pslite does not look like a ps-lite clone: $pslite/$f is missing"
done
if [ -n "$deps" ]; then
  [ -d "$deps" ] || usage_error "--deps_path $deps is not a directory"
  deps="$(cd "$deps" && pwd)"
fi
pslite="$(cd "$pslite" && pwd)"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

cd "$(dirname "$0")/../.."
source deploy/lib/servers.sh
source deploy/lib/limits.sh
deploy/setup.sh --bench
log() { echo "pslite_compare.sh: $*" >&2; }
raw="$out/pslite_raw.txt"
: >"$raw"
work="$(mktemp -d "${TMPDIR:-/tmp}/ps_bench_pslite.XXXXXX")"
stop_on_exit "$work"

# --- ps-lite and pslite_bench ------------------------------------------------------
if [ -z "$deps" ]; then
  if [ -e "$pslite/deps/include/zmq.h" ]; then
    deps="$pslite/deps"
  elif [ -e /usr/include/zmq.h ] && [ -e /usr/include/google/protobuf/message.h ] &&
    [ -x /usr/bin/protoc ]; then
    deps=/usr
  else
    deps="$pslite/deps"
    log "no ZeroMQ or protobuf headers under /usr/include: ps-lite's Makefile downloads them" \
      "into $deps (or stop, apt-get install libzmq3-dev libprotobuf-dev protobuf-compiler, rerun)"
  fi
fi
if [ ! -f "$pslite/build/libps.a" ]; then
  log "building ps-lite: make ps DEPS_PATH=$deps in $pslite (log: $out/pslite_make.log)"
  if ! make -C "$pslite" DEPS_PATH="$deps" ps >"$out/pslite_make.log" 2>&1; then
    tail -n 30 "$out/pslite_make.log" >&2
    fail "building ps-lite failed; the end of $out/pslite_make.log is above"
  fi
fi
# The flags ps-lite's own make files give its programs: ADD_CFLAGS (USE_KEY32
# changes ps::Key) and the libraries of make/ps.mk (protobuf-lite and ZeroMQ).
# shellcheck disable=SC2016  # $(...) here is make's, expanded by make
printf 'pslite-bench-flags:\n\t@echo "ADD_CFLAGS=$(ADD_CFLAGS)"\n\t@echo "LIBS=$(PS_LDFLAGS_SO)"\n' \
  >"$work/flags.mk"
vars=$(make -s --no-print-directory -C "$pslite" DEPS_PATH="$deps" -f Makefile -f "$work/flags.mk" \
  pslite-bench-flags) || fail "ps-lite's Makefile in $pslite did not print its flags"
read -ra add_cflags <<<"$(sed -n 's/^ADD_CFLAGS=//p' <<<"$vars")"
read -ra libs <<<"$(sed -n 's/^LIBS=//p' <<<"$vars")"
[ "${#libs[@]}" -gt 0 ] || libs=(-L"$deps/lib" -lprotobuf-lite -lzmq)
extra=()
[ "$deps" = /usr ] || extra=(-I"$deps/include" -Xlinker -rpath -Xlinker "$deps/lib")
pslite_bin="$work/pslite_bench"
log "compiling deploy/bench/pslite/pslite_bench.cc against $pslite"
# As this project's build: -O2 -march=native. -fno-math-errno lets g++
# vectorize the AdaGrad loop's square root (ps_server's kernel is vectorized).
g++ -std=c++17 -O2 -march=native -fno-math-errno -pthread -I"$pslite/include" "${add_cflags[@]}" \
  deploy/bench/pslite/pslite_bench.cc "$pslite/build/libps.a" "${libs[@]}" "${extra[@]}" \
  -o "$pslite_bin" || fail "compiling pslite_bench.cc against $pslite failed (see above)"

# --- this project --------------------------------------------------------------------
log "building this tree's ps_server and ps_bench"
bazel build --ui_event_filters=-info --noshow_progress //server:ps_server //deploy/bench:ps_bench
bin="$(bazel info bazel-bin 2>/dev/null)"

# --- machine limits ------------------------------------------------------------------
step="separate"
[ "${#pslite_flags[@]}" -eq 0 ] || step="combined"
echo "MACHINE cores=$(nproc) cpu=$(lscpu | sed -n 's/^Model name: *//p' | tr ' ' '_')" \
  "paramserver=$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes)" \
  "pslite=$(git -C "$pslite" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  "pslite_step=$step deps=$deps" | tee -a "$raw"
log "iperf3 loopback, single stream"
echo "LIMIT iperf3_start_gbytes_per_s=$(iperf_gbps)" | tee -a "$raw"

# --- the two sides, alternating ----------------------------------------------------------
# Each run of a side is bounded: 5 cases of warm-up + --seconds, three times
# over, plus two minutes for starting.
budget=$(awk -v s="$seconds" -v w="$warmup" 'BEGIN { printf "%d", 120 + 15 * (s + w) }')
cases=(--ops=pushpull "--dense_values=1024,1048576" --small_inflight=16 --sparse_widths=1)

run_paramserver() {  # run_paramserver ROUND
  start_servers "$bin" "$work" 1
  timeout "$budget" "$bin/deploy/bench/ps_bench" --servers="$spec" --clients=1 \
    --seconds="$seconds" --warmup_seconds="$warmup" "${cases[@]}" >"$work/ps_bench.out" ||
    fail "ps_bench exited with status $? in round $1 (124: still running after $budget s)"
  stop_servers
  [ "$(grep -c '^RESULT ' "$work/ps_bench.out")" -eq 5 ] ||
    fail "ps_bench printed $(grep -c '^RESULT ' "$work/ps_bench.out") RESULT lines, not 5"
  sed -n "s/^RESULT /RESULT side=paramserver round=$1 /p" "$work/ps_bench.out" | tee -a "$raw"
}

free_port() {  # a loopback port the kernel had free a moment ago
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
_pslite_one_gone() {  # PID...: whether any of them has exited
  local p
  for p in "$@"; do kill -0 "$p" 2>/dev/null || return 0; done
  return 1
}
_pslite_all_gone() {  # PID...: whether all of them have exited
  local p
  for p in "$@"; do ! kill -0 "$p" 2>/dev/null || return 1; done
}
pslite_fail() {  # MESSAGE: fails with the end of each ps-lite log
  local f
  for f in "$work"/pslite_scheduler.log "$work"/pslite_server.log "$work"/pslite_worker.log; do
    [ -s "$f" ] && { echo "--- the end of $(basename "$f"):"; tail -n 15 "$f"; } >&2
  done
  fail "$*"
}

run_pslite() {  # run_pslite ROUND
  local round=$1 port sched server worker status name pid
  port=$(free_port) || fail "found no free loopback port for ps-lite's scheduler"
  # Every node on 127.0.0.1 (DMLC_NODE_HOST; DMLC_INTERFACE for older
  # clones, which also have the scheduler listen on every interface). Unset:
  # PORT (ps-lite would bind its nodes there), DMLC_USE_KUBERNETES (the
  # scheduler would listen on every interface) and DMLC_LOCAL (IPC instead of
  # TCP; ps_server is measured over TCP).
  local roles=(env -u PORT -u DMLC_LOCAL -u DMLC_USE_KUBERNETES -u PS_VERBOSE
    DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT="$port" DMLC_NODE_HOST=127.0.0.1
    DMLC_INTERFACE=lo DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1)
  local args=(--seconds="$seconds" --warmup_seconds="$warmup" --round="$round"
    "${pslite_flags[@]}")
  "${roles[@]}" DMLC_ROLE=scheduler "$pslite_bin" "${args[@]}" >"$work/pslite_scheduler.log" 2>&1 &
  sched=$!
  all_pids+=("$sched")
  "${roles[@]}" DMLC_ROLE=server "$pslite_bin" "${args[@]}" >"$work/pslite_server.log" 2>&1 &
  server=$!
  all_pids+=("$server")
  "${roles[@]}" DMLC_ROLE=worker timeout "$budget" "$pslite_bin" "${args[@]}" \
    >"$work/pslite_worker.out" 2>"$work/pslite_worker.log" &
  worker=$!
  all_pids+=("$worker")
  # Until one of them exits: the worker, when all goes well (the scheduler and
  # the server end with it, within moments); a scheduler or server that dies
  # first leaves the worker waiting for an answer, so a worker still running
  # 10 s after one of them ended has failed.
  poll_until "$((budget + 10))" _pslite_one_gone "$worker" "$sched" "$server" ||
    pslite_fail "ps-lite's processes still ran after $budget s (round $round)"
  poll_until 10 _pslite_all_gone "$worker" ||
    pslite_fail "ps-lite's scheduler or server exited while the worker ran (round $round)"
  status=0
  wait "$worker" || status=$?
  [ "$status" = 0 ] ||
    pslite_fail "pslite_bench (worker) exited with status $status in round $round" \
      "(124: still running after $budget s)"
  poll_until 30 _pslite_all_gone "$sched" "$server" ||
    pslite_fail "ps-lite's scheduler or server still ran 30 s after the worker ended (round $round)"
  for name in scheduler server; do
    pid=$sched
    [ "$name" = scheduler ] || pid=$server
    status=0
    wait "$pid" || status=$?
    [ "$status" = 0 ] || pslite_fail "ps-lite's $name exited with status $status in round $round"
  done
  [ "$(grep -c '^RESULT ' "$work/pslite_worker.out")" -eq 5 ] ||
    pslite_fail "pslite_bench printed $(grep -c '^RESULT ' "$work/pslite_worker.out") RESULT lines, not 5"
  grep '^RESULT ' "$work/pslite_worker.out" | tee -a "$raw"
}

for ((r = 1; r <= rounds; r++)); do
  order=(paramserver pslite)
  [ $((r % 2)) -eq 0 ] && order=(pslite paramserver)
  for side in "${order[@]}"; do
    log "round $r/$rounds: $side"
    "run_$side" "$r"
  done
done

echo "LIMIT iperf3_end_gbytes_per_s=$(iperf_gbps)" | tee -a "$raw"

# --- report ------------------------------------------------------------------------------
/usr/bin/python3 - "$raw" "$out/pslite_report.md" <<'EOF'
import statistics
import sys

raw, report = sys.argv[1], sys.argv[2]
results, limits, machine = [], {}, {}
for line in open(raw):
    words = line.split()
    fields = dict(w.split("=", 1) for w in words[1:] if "=" in w)
    if words and words[0] == "RESULT":
        results.append(fields)
    elif words and words[0] == "LIMIT":
        limits.update({k: float(v) for k, v in fields.items()})
    elif words and words[0] == "MACHINE":
        machine = fields

# (figure, selector, value, which is better, unit)
FIGURES = [
    ("1K floats: push the gradient, get the parameters, p50 latency",
     dict(kind="dense", op="pushpull", values="1024", inflight="1"), "p50_us", "lower", "us"),
    ("1K-float pushes, 16 in flight", dict(kind="dense", op="push", values="1024", inflight="16"),
     "ops_per_s", "higher", "pushes/s"),
    ("10,000 random keys below 1M: push+pull", dict(kind="sparse", op="pushpull", values="10000"),
     "values_per_s", "higher", "keys/s"),
    ("10,000 random keys spread over uint64: push+pull",
     dict(kind="hashed", op="pushpull", values="10000"), "values_per_s", "higher", "keys/s"),
    ("1M floats: push+pull", dict(kind="dense", op="pushpull", values="1048576", inflight="1"),
     "gbytes_per_s", "higher", "GB/s"),
]


def fmt(x):
    return "%.2fM" % (x / 1e6) if x >= 1e6 else "%.1fK" % (x / 1e3) if x >= 1e4 else "%.3g" % x


def values(side, selector, key):
    return [float(r[key]) for r in results if r.get("side") == side
            and all(r.get(k) == v for k, v in selector.items())]


iperf = [v for k, v in limits.items() if k.startswith("iperf3") and v > 0]
net = statistics.mean(iperf) if iperf else 0
step = ("one ZPushPull" if machine.get("pslite_step") == "combined"
        else "a ZPush and a ZPull, sent together, then waited for")
lines = [
    "# This project's data path and ps-lite's, side by side",
    "",
    "Machine: %s cores, %s. This project: %s; ps-lite: %s (its dependencies from %s). "
    "Rounds: %d per side, alternating which side runs first; 1 server, 1 client, loopback. "
    "A step of ps-lite is %s; of this project, PsClient::PushPull." % (
        machine.get("cores", "?"), machine.get("cpu", "?").replace("_", " "),
        machine.get("paramserver", "?"), machine.get("pslite", "?"), machine.get("deps", "?"),
        len({r.get("round") for r in results}), step),
    "",
    "iperf3 loopback, one stream: %.2f GB/s at the start, %.2f GB/s at the end." % (
        limits.get("iperf3_start_gbytes_per_s", 0), limits.get("iperf3_end_gbytes_per_s", 0)),
    "",
    "| figure | this project (median) | ps-lite (median) | each round, this project / ps-lite "
    "| ratio this project / ps-lite | better |",
    "|---|---|---|---|---|---|",
]
for label, selector, key, better, unit in FIGURES:
    ours, theirs = values("paramserver", selector, key), values("pslite", selector, key)
    if not ours or not theirs:
        lines.append("| %s | - | - | - | - | not measured |" % label)
        continue
    mo, mt = statistics.median(ours), statistics.median(theirs)
    extra = " (%.2f of iperf3)" % (mo / net) if unit == "GB/s" and net > 0 else ""
    extra_t = " (%.2f of iperf3)" % (mt / net) if unit == "GB/s" and net > 0 else ""
    ratio = mo / mt if mt > 0 else float("inf")
    ours_better = mo < mt if better == "lower" else mo > mt
    by = max(mo, mt) / min(mo, mt) if min(mo, mt) > 0 else float("inf")
    lines.append("| %s | %s %s%s | %s %s%s | %s / %s | %.2fx | %s, %.2fx |" % (
        label, fmt(mo), unit, extra, fmt(mt), unit, extra_t,
        ", ".join(fmt(v) for v in ours), ", ".join(fmt(v) for v in theirs), ratio,
        "this project" if ours_better else "ps-lite", by))
lines += ["", "GB/s counts payload only (4 bytes per value each way); ps-lite also sends "
          "every key with each request and each answer. Raw lines: pslite_raw.txt."]
with open(report, "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
log "report: $out/pslite_report.md"
