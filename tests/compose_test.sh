#!/usr/bin/env bash
# The Docker Compose cluster end to end (deploy/docker), in two parts.
#
# First, without the engine: deploy/docker/compose_file.sh with no variable
# set must write deploy/docker/compose.yaml byte for byte (the checked-in
# file is the generator's output with the default sizes). Then it builds the
# images (deploy/docker/build_images.sh: starts the engine if needed; with
# cached layers and Bazel's cache it takes seconds when nothing changed, and
# is incremental after a source change).
#
# A. The checked-in deploy/docker/compose.yaml, as a user runs it, with a
#    server killed during training:
#   1. runs `docker-compose -f deploy/docker/compose.yaml up` (attached, as
#      in the docs; in the background, its output to a file) under a
#      Compose project name of its own: etcd, 3 servers with every shard on
#      2 of them (lease 3 s), 2 workers training the MLP for 3 epochs,
#      Prometheus; PS_UI_PORT and PS_PROMETHEUS_PORT unset (free ports);
#   2. checks that server0's metrics port (the web UI's) answers /metrics on
#      its published address on 127.0.0.1;
#   3. once worker 0 has finished epoch 1 (and no worker has a result yet),
#      SIGKILLs one server's container (docker kill);
#   4. checks that every worker exits 0 with a test accuracy >=
#      PS_MIN_ACCURACY, printed by `up` too, that the ring moved on (etcd's
#      ring version), that only Prometheus (9090) and server0 (9100) publish
#      a port, each on 127.0.0.1 only, and the processes' network is
#      internal, and that Prometheus, queried on 127.0.0.1, scraped every
#      server and worker and holds the workers' results.
# B. Static (PS_MODE=static, a file from the generator), checkpoints in the
#    Compose volume: 2 servers, 2 workers, 2 epochs, a checkpoint every 3 s;
#    the whole project is stopped (docker-compose stop) during epoch 2, then
#    started again with PS_RESUME=1: the servers must restore a checkpoint
#    from the volume and each worker continue from its position in it (past
#    its first step; worker 0 in epoch 2, a slower one possibly still in
#    epoch 1) to an accuracy >= PS_MIN_ACCURACY.
# After each part, `docker-compose down -v` must leave no container, network
# or volume of its project (checked with docker ps -a / network ls / volume
# ls, by the project's label and name).
#
# On failure it prints the end of every container's log and keeps its
# directory (the generated Compose files, `up`'s output). Traffic goes only
# to the projects' containers and to 127.0.0.1. Every wait is bounded.
#
# Usage (root; packages docker.io and docker-compose, see deploy/setup.sh):
#   tests/compose_test.sh
# Environment:
#   DOCKER               Docker client (default /usr/bin/docker, Debian's 20.10)
#   PS_MIN_ACCURACY      each worker's final test accuracy bound (default 0.80)
#   PS_KILL_SERVER       index of the server killed in part A (default 1)
#   PS_COMPOSE_NO_BUILD  1: use the images as they are (fail if one is missing)
#   PS_COMPOSE_PARTS     which parts to run (default "A B")
#   PS_TRAIN_TIMEOUT     seconds the workers of one run may take (default 300)
# PS_UI_PORT and PS_PROMETHEUS_PORT are ignored (unset): the test's ports
# are free ones, so that it can run beside a user's cluster.
set -euo pipefail
unset PS_UI_PORT PS_PROMETHEUS_PORT

repo=$(cd "$(dirname "$0")/.." && pwd)
docker=${DOCKER:-/usr/bin/docker}
export DOCKER=$docker
min_accuracy=${PS_MIN_ACCURACY:-0.80}
victim_index=${PS_KILL_SERVER:-1}
parts=${PS_COMPOSE_PARTS:-A B}
train_timeout=${PS_TRAIN_TIMEOUT:-300}
t0=$(date +%s.%N)
elapsed() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "compose_test [$(elapsed)s]: $*"; }

[ "$(id -u)" -eq 0 ] || { echo "FAIL: run as root (the Docker engine)" >&2; exit 1; }
command -v docker-compose >/dev/null ||
  { echo "FAIL: docker-compose is not installed (deploy/setup.sh installs it)" >&2; exit 1; }
[[ "$victim_index" =~ ^[0-2]$ ]] || { echo "FAIL: PS_KILL_SERVER=$victim_index must be 0, 1 or 2" >&2; exit 1; }
[[ "$train_timeout" =~ ^[1-9][0-9]*$ ]] ||
  { echo "FAIL: PS_TRAIN_TIMEOUT=$train_timeout must be a number of seconds" >&2; exit 1; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/compose_test.XXXXXX")
# Project names of their own (lower case and digits, as Compose wants).
base_name="pscomposetest$(date +%s)$$"
project="" file=""          # the project the helpers below act on
up_pid=""                   # an attached `docker-compose up` running in the background
declare -A project_file     # every project brought up -> its Compose file

compose() { docker-compose --ansi never -p "$project" -f "$file" "$@"; }
# The container of a service (stopped ones included).
cid() { compose ps -q "$1" 2>/dev/null | head -n 1; }
state() { "$docker" inspect -f '{{.State.Status}}' "$1" 2>/dev/null || echo gone; }

dump() {
  local p c name
  for p in "${!project_file[@]}"; do
    for c in $("$docker" ps -aq --filter "label=com.docker.compose.project=$p" 2>/dev/null); do
      name=$("$docker" inspect -f '{{.Name}} ({{.State.Status}}, exit {{.State.ExitCode}})' "$c" 2>/dev/null) || continue
      echo "---- last lines of ${name#/}:" >&2
      "$docker" logs --tail 40 "$c" 2>&1 | grep -v ' step [0-9]* loss .*s$' | tail -n 12 >&2 || true
    done
  done
}
fail() {
  echo "FAIL: $*" >&2
  dump
  exit 1
}
# Every project brought up is taken down on exit (a signal included).
cleanup() {
  local status=$? p
  trap - EXIT
  for p in "${!project_file[@]}"; do
    docker-compose --ansi never -p "$p" -f "${project_file[$p]}" down -v --remove-orphans -t 10 \
      >>"$dir/down.log" 2>&1 || echo "compose_test: docker-compose down of $p failed; see $dir/down.log" >&2
  done
  # An attached `up` ends with its containers; in case it did not.
  [ -z "$up_pid" ] || kill "$up_pid" 2>/dev/null || true
  if [ "$status" -eq 0 ]; then rm -rf "$dir"; else echo "compose_test: files kept in $dir" >&2; fi
  exit "$status"
}
trap cleanup EXIT
trap 'echo "compose_test: interrupted" >&2; exit 143' TERM INT

# use_project NAME FILE: the helpers act on it from now on.
use_project() { project=$1 file=$2; project_file[$project]=$file; }

# up: `docker-compose up -d`, which returns once etcd and the servers are
# healthy (/readyz) and the workers started (bounded: 180 s).
up() {
  if ! timeout 180 docker-compose --ansi never -p "$project" -f "$file" up -d >"$dir/up.log" 2>&1; then
    cat "$dir/up.log" >&2
    fail "docker-compose up of $project failed or took over 180 s (see above)"
  fi
}

# up_attached LOG: `docker-compose up` as a user runs it (attached: the
# containers' output goes to LOG), in the background (its pid in up_pid);
# returns once every service's container has started (bounded: 180 s, as
# up). `up` itself ends when its containers are taken down (bounded anyway).
up_attached() {
  local log=$1 n started deadline
  n=$(compose config --services | wc -l)
  timeout $((180 + train_timeout + 180)) docker-compose --ansi never -p "$project" -f "$file" \
    up --no-color </dev/null >"$log" 2>&1 &
  up_pid=$!
  deadline=$(($(date +%s) + 180))
  while :; do
    # Services with a container past "Created" (running, or already exited).
    started=$("$docker" ps -a --filter "label=com.docker.compose.project=$project" \
      --format '{{.Label "com.docker.compose.service"}} {{.Status}}' |
      awk '$2 != "Created" { print $1 }' | sort -u | wc -l)
    [ "$started" -lt "$n" ] || return 0
    kill -0 "$up_pid" 2>/dev/null || { cat "$log" >&2; fail "docker-compose up of $project ended early (see above)"; }
    [ "$(date +%s)" -lt "$deadline" ] ||
      { tail -n 20 "$log" >&2; fail "docker-compose up of $project had started $started of $n services after 180 s (see above)"; }
    sleep 0.5
  done
}

# end_attached: after `down`, waits for the attached `up` to end (bounded: 30 s).
end_attached() {
  local i
  for ((i = 0; i < 60; i++)); do
    kill -0 "$up_pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$up_pid" 2>/dev/null; then
    kill "$up_pid" 2>/dev/null || true
    fail "the attached docker-compose up of $project went on 30 s after down"
  fi
  wait "$up_pid" 2>/dev/null || true
  up_pid=""
}

# wait_epoch1 CONTAINER...: until worker 0 (the first) ends epoch 1 (bounded:
# 180 s); then fails if any worker already has a result (too late for an
# interruption "during training").
wait_epoch1() {
  local i w0=$1 c
  for ((i = 0; i < 900; i++)); do
    "$docker" logs "$w0" 2>&1 | grep -q ' epoch 1 step .*(epoch end)' && break
    [ "$(state "$w0")" = running ] || break
    sleep 0.2
  done
  "$docker" logs "$w0" 2>&1 | grep -q ' epoch 1 step .*(epoch end)' ||
    fail "worker 0 of $project did not finish epoch 1 (state $(state "$w0"))"
  for c in "$@"; do
    ! "$docker" logs "$c" 2>&1 | grep -q 'RESULT test_accuracy=' ||
      fail "a worker of $project had finished before the interruption: it would not be during training"
  done
}

# check_workers N: waits until workers 0..N-1 exit (bounded), and checks
# each exit code and final test accuracy; the accuracies go to `accuracies`.
check_workers() {
  local n=$1 w c code logs line accuracy retries deadline
  deadline=$(($(date +%s) + train_timeout))
  accuracies=""
  for ((w = 0; w < n; w++)); do
    c=$(cid "worker$w")
    [ -n "$c" ] || fail "no container for worker$w in $project"
    while [ "$(state "$c")" = running ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.5; done
    [ "$(state "$c")" = exited ] || fail "worker $w of $project still $(state "$c") after ${train_timeout}s"
    code=$("$docker" inspect -f '{{.State.ExitCode}}' "$c")
    [ "$code" = 0 ] || fail "worker $w of $project exited with status $code"
    logs=$("$docker" logs "$c" 2>&1)
    line=$(grep -E "^worker $w/$n: test accuracy [0-9.]+" <<<"$logs" | tail -n 1)
    accuracy=$(sed -n 's/^RESULT test_accuracy=\([0-9.][0-9.]*\).*/\1/p' <<<"$logs" | tail -n 1)
    [ -n "$accuracy" ] || fail "worker $w of $project printed no 'RESULT test_accuracy='"
    retries=$(grep -c 'retrying' <<<"$logs" || true)
    say "$line (calls retried: $retries)"
    awk -v a="$accuracy" -v m="$min_accuracy" 'BEGIN { exit !(a >= m) }' ||
      fail "worker $w of $project: test accuracy $accuracy < $min_accuracy"
    accuracies="$accuracies $accuracy"
  done
}

# down_and_check: `docker-compose down -v`, then nothing of the project may
# be left (looked up by the project's label and by its name prefix).
down_and_check() {
  local label="label=com.docker.compose.project=$project" c n v
  compose down -v --remove-orphans -t 10 >"$dir/down.log" 2>&1 ||
    { cat "$dir/down.log" >&2; fail "docker-compose down of $project failed"; }
  c=$("$docker" ps -aq --filter "$label"; "$docker" ps -aq --filter "name=^${project}_")
  n=$("$docker" network ls -q --filter "$label"; "$docker" network ls -q --filter "name=^${project}_")
  v=$("$docker" volume ls -q --filter "$label"; "$docker" volume ls -q --filter "name=^${project}_")
  [ -z "$c$n$v" ] || fail "left behind by project $project: containers [$c] networks [$n] volumes [$v]"
  unset "project_file[$project]"
  say "down: no container, network or volume of $project left"
}

# ---- the checked-in Compose file is the generator's output -----------------------
# With no variable set (env -i): nothing of this environment may reach it.
env -i PATH="$PATH" "$repo/deploy/docker/compose_file.sh" >"$dir/generated.yaml" ||
  fail "deploy/docker/compose_file.sh failed with the default sizes"
if ! cmp -s "$dir/generated.yaml" "$repo/deploy/docker/compose.yaml"; then
  diff -u "$repo/deploy/docker/compose.yaml" "$dir/generated.yaml" | head -n 40 >&2 || true
  fail "deploy/docker/compose.yaml is not what deploy/docker/compose_file.sh writes with the default sizes (diff above); regenerate it: env -i PATH=\"\$PATH\" deploy/docker/compose_file.sh >deploy/docker/compose.yaml"
fi
say "deploy/docker/compose.yaml is the generator's output with the default sizes"

# ---- images --------------------------------------------------------------------
if [ "${PS_COMPOSE_NO_BUILD:-0}" = 1 ]; then
  "$repo/deploy/docker/dockerd.sh"
  for image in paramserver paramserver-etcd paramserver-prometheus; do
    "$docker" image inspect "$image:latest" >/dev/null 2>&1 ||
      fail "image $image:latest is missing; run deploy/docker/build_images.sh (or unset PS_COMPOSE_NO_BUILD)"
  done
else
  "$repo/deploy/docker/build_images.sh" || fail "building the images failed (see its output above)"
fi
say "images ready"

# ---- A. replicated, a server SIGKILLed -------------------------------------------
if [[ " $parts " == *" A "* ]]; then
  servers=3 workers=2  # the checked-in file's sizes (its cluster: "compose")
  use_project "${base_name}a" "$repo/deploy/docker/compose.yaml"
  up_attached "$dir/up-a.log"
  say "A: deploy/docker/compose.yaml up (project $project: etcd, $servers servers, replicas 2, $workers workers, 3 epochs)"
  # Every service's container, in one call (one docker-compose call each
  # takes seconds on a loaded machine, and epoch 1 is short).
  declare -A id
  while read -r s c; do id[$s]=$c; done < <("$docker" ps -a --filter "label=com.docker.compose.project=$project" \
    --format '{{.Label "com.docker.compose.service"}} {{.ID}}')
  for s in etcd prometheus server0 server1 server2 worker0 worker1; do
    [ -n "${id[$s]:-}" ] || fail "no container for service $s"
  done

  # server0's metrics port, the web UI's, on its published address (before
  # the kill, which may hit server0).
  ui=$("$docker" port "${id[server0]}" 9100/tcp | head -n 1)
  [[ "$ui" =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "server0's port 9100 is published at '$ui', not on 127.0.0.1"
  curl -sf --max-time 5 "http://$ui/metrics" | grep -q '^ps_server_ready' ||
    fail "server0's metrics port at $ui (published) does not serve /metrics with ps_server_ready"
  say "A: server0's metrics and UI port published at $ui"

  wait_epoch1 "${id[worker0]}" "${id[worker1]}"
  victim=server$victim_index
  "$docker" kill --signal=KILL "${id[$victim]}" >/dev/null || fail "docker kill $victim failed"
  kill_time=$(elapsed)
  say "A: worker 0 finished epoch 1; SIGKILLed $victim (container ${id[$victim]:0:12})"

  check_workers "$workers"
  # What the user of `up` sees: each worker's accuracy in up's output.
  for ((w = 0; w < workers; w++)); do
    grep -qE "worker $w/$workers: test accuracy [0-9.]+" "$dir/up-a.log" ||
      fail "docker-compose up's output ($dir/up-a.log) lacks worker $w's test accuracy"
  done
  [ "$(state "${id[$victim]}")" = exited ] || fail "$victim is $(state "${id[$victim]}") after its SIGKILL"
  code=$("$docker" inspect -f '{{.State.ExitCode}}' "${id[$victim]}")
  [ "$code" = 137 ] || fail "$victim exited with $code, not 137 (SIGKILL)"

  # The ring moved on past its first version.
  ring=$("$docker" exec "${id[etcd]}" etcdctl --endpoints=127.0.0.1:2379 --command-timeout=3s \
    get --print-value-only /paramserver/compose/ring 2>&1) || fail "etcdctl get the ring: $ring"
  ring_version=$(grep -o '"version": *"*[0-9]*' <<<"$ring" | grep -o '[0-9]*$' | head -n 1)
  if [ -z "$ring_version" ] || [ "$ring_version" -le 1 ]; then
    fail "the ring is still at version '${ring_version}' after $victim was killed: $ring"
  fi
  say "A: ring at version $ring_version after the kill"

  # Only Prometheus (9090) and server0 (9100, the UI) publish a port, each
  # on 127.0.0.1 only; the processes' network is internal.
  for s in "${!id[@]}"; do
    # shellcheck disable=SC2016  # a Go template, not shell
    bindings=$("$docker" inspect -f '{{range $p, $b := .HostConfig.PortBindings}}{{$p}}={{range $b}}{{.HostIp}}:{{.HostPort}} {{end}}{{end}}' "${id[$s]}")
    case $s in
      prometheus) port=9090 ;;
      server0) port=9100 ;;
      *) port="" ;;
    esac
    if [ -n "$port" ]; then
      [[ "$bindings" =~ ^$port/tcp=127\.0\.0\.1:[0-9]*\ $ ]] || fail "$s publishes '$bindings', not $port on 127.0.0.1 only"
    else
      [ -z "$bindings" ] || fail "$s publishes ports: $bindings"
    fi
  done
  internal=$("$docker" network inspect -f '{{.Internal}}' "${project}_cluster") ||
    fail "no network ${project}_cluster"
  [ "$internal" = true ] || fail "network ${project}_cluster is not internal"
  published=$("$docker" port "${id[prometheus]}" 9090/tcp | head -n 1)
  [[ "$published" =~ ^127\.0\.0\.1:[0-9]+$ ]] || fail "Prometheus is published at '$published', not on 127.0.0.1"

  # Every server and worker scraped (up 1 at some point: the workers linger
  # 5 s after their result, the victim was up before its kill), and the
  # workers' results there.
  query() { curl -sf --max-time 5 -G "http://$published/api/v1/query" --data-urlencode "query=$1"; }
  want=$((servers + workers))
  scraped=0 answer=""
  for ((i = 0; i < 30; i++)); do  # ~15 s at most
    answer=$(query 'count(max_over_time(up{job="paramserver"}[10m]) == 1)' || true)
    scraped=$(grep -o '"value":\[[0-9.]*,"[0-9]*"' <<<"$answer" | grep -o '[0-9]*"$' | tr -d '"' || true)
    [ "${scraped:-0}" -ge "$want" ] && break
    sleep 0.5
  done
  [ "${scraped:-0}" -ge "$want" ] || fail "Prometheus scraped ${scraped:-0} of $want targets: $answer"
  results=$(query 'max_over_time(ps_worker_test_result[10m])' || true)
  results=$(grep -o '"value":\[[0-9.]*,"[0-9.]*"' <<<"$results" | grep -o '"[0-9.]*"$' | tr -d '"' | tr '\n' ' ')
  [ "$(wc -w <<<"$results")" -ge "$workers" ] ||
    fail "Prometheus has ps_worker_test_result for fewer than $workers workers: '$results'"
  say "A: Prometheus at $published scraped all $want targets; ps_worker_test_result there: $results"
  down_and_check
  end_attached
  summary_a="A: trained through a SIGKILL of $victim at ${kill_time}s, accuracies$accuracies"
fi

# ---- B. static, checkpoints in the volume, stopped and resumed --------------------
if [[ " $parts " == *" B "* ]]; then
  use_project "${base_name}b" "$dir/static.yml"
  export PS_MODE=static PS_SERVERS=2 PS_WORKERS=2 PS_EPOCHS=2 PS_CHECKPOINT_SECONDS=3 PS_CLUSTER=test
  "$repo/deploy/docker/compose_file.sh" >"$file" || fail "compose_file.sh (static) failed"
  PS_RESUME=1 "$repo/deploy/docker/compose_file.sh" >"$dir/static-resume.yml" ||
    fail "compose_file.sh (static, resume) failed"
  up
  say "B: static cluster up (project $project: 2 servers checkpointing every 3 s, 2 workers, 2 epochs)"
  wait_epoch1 "$(cid worker0)" "$(cid worker1)"
  timeout 120 docker-compose --ansi never -p "$project" -f "$file" stop -t 20 >"$dir/stop.log" 2>&1 ||
    { cat "$dir/stop.log" >&2; fail "docker-compose stop of $project failed or took over 120 s"; }
  taken=$(compose logs --no-color server0 2>/dev/null | grep -c 'checkpoint /checkpoints/test/ckpt-' || true)
  [ "${taken:-0}" -ge 1 ] || fail "server 0 logged no checkpoint into the volume before the stop"
  say "B: stopped the whole project during epoch 2; server 0 had logged $taken checkpoint(s)"

  use_project "$project" "$dir/static-resume.yml"
  up
  check_workers 2
  for w in 0 1; do
    logs=$("$docker" logs "$(cid "worker$w")" 2>&1)
    grep -q "^worker $w/2: --resume: servers restored /checkpoints/test/ckpt-" <<<"$logs" ||
      fail "worker $w did not resume from a checkpoint in the volume"
    # Async workers run at their own speeds: the checkpoint's cut may hold
    # the slower one still in epoch 1. Each must continue past its start.
    resumed=$(grep -o "^worker $w/2 resumed at epoch [0-9]* step [0-9]*" <<<"$logs" || true)
    step=${resumed##* }
    if [ -z "$resumed" ] || [ "$step" -le 1 ]; then
      fail "worker $w resumed at '${resumed:-nothing}', expected a step past the first"
    fi
    say "B: worker $w: $(grep -o 'servers restored [^;]*' <<<"$logs" | head -n 1); $resumed"
  done
  down_and_check
  summary_b="B: resumed from the volume's checkpoint, accuracies$accuracies"
fi

echo "PASS: ${summary_a:-A skipped}; ${summary_b:-B skipped}; nothing left behind; $(elapsed)s"
