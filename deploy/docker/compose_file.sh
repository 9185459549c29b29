#!/usr/bin/env bash
# Writes to standard output a Docker Compose file (format 2.4: Debian's
# docker-compose 1.29, and the `docker compose` plugin where it is installed)
# for a parameter-server cluster on this machine, sized by the environment.
# deploy/docker/compose.yaml is its output with every variable below unset
# (tests/compose_test.sh checks that they agree byte for byte): after
# changing this script, regenerate it with
#   env -i PATH="$PATH" deploy/docker/compose_file.sh >deploy/docker/compose.yaml
# so nothing written may depend on the machine or the time of generation.
# It is generated because every server and worker needs its own index
# (--index, --worker_index), which Compose's scaling cannot give. Services:
#   etcd         membership and the ring (image paramserver-etcd)
#   server0..    PS_SERVERS ps_server, each shard on PS_REPLICAS of them;
#                gRPC on :7000 and metrics, /healthz, /readyz and the web
#                UI (/) on :9100 inside the project's network; healthy once
#                /readyz says ready (it has a ring); the volume `checkpoints`
#                mounted at /checkpoints (see PS_MODE). server0's :9100 is
#                published on 127.0.0.1 (the UI; see the ports below)
#   worker0..    PS_WORKERS ps_worker training the MLP on Fashion-MNIST for
#                PS_EPOCHS epochs, started once every server is healthy; each
#                ends with "worker i/W: test accuracy X (10000 test
#                examples)" and "RESULT test_accuracy=X", and exits 0
#   prometheus   scrapes every server and worker every 2 s; its port 9090
#                is published on 127.0.0.1
# The processes talk over the internal network `cluster` (no route out of
# it); Prometheus and server0 are also on `web`, the network their ports are
# published through (Docker publishes no port of a container that is only on
# an internal network). Nothing else is published. Every container runs
# under Docker's init (init: true), which passes SIGTERM on: a process that
# is PID 1 itself ignores it unless it handles it, and ps_worker does not.
#
# Host ports (both bound to 127.0.0.1 only): PS_UI_PORT (server0's 9100)
# and PS_PROMETHEUS_PORT (Prometheus's 9090). Set when generating, the port
# is written into the file. Unset, the file says ${PS_UI_PORT:-} (and
# ${PS_PROMETHEUS_PORT:-}), which Compose reads from its environment at `up`;
# unset there too, the engine picks a free port, which
# `docker-compose -f FILE port server0 9100` (prometheus 9090) shows. Free
# ports by default because a fixed one fails `up` when it is taken (9100 and
# 9090 are the defaults of Prometheus's node exporter and of Prometheus
# itself), and so that two projects of one file (a user's and
# tests/compose_test.sh's, on a shared machine) can run at once.
#
# PS_MODE=replicated (default): the cluster above. ps_server refuses
#   --checkpoint_dir together with --etcd (replicated clusters cannot take
#   checkpoints yet), so the volume is mounted but stays empty.
# PS_MODE=static: no etcd; the servers form a static cluster (--servers) of
#   PS_SERVERS shards without replicas, and checkpoint into the volume
#   (/checkpoints/<PS_CLUSTER>): server 0 every PS_CHECKPOINT_SECONDS and
#   when stopped (`docker-compose stop`). A server that dies loses its shard,
#   and the job. PS_RESUME=1: the servers restore the newest checkpoint
#   (--restore) and the workers continue where it left off (--resume).
#
# Environment (defaults): PS_SERVERS=3 PS_WORKERS=2 PS_REPLICAS=2
#   PS_EPOCHS=3 PS_MODE=replicated PS_LEASE_SECONDS=3 (servers' etcd lease)
#   PS_CLUSTER=compose (the etcd prefix; the checkpoints' subdirectory)
#   PS_CHECKPOINT_SECONDS=10 PS_RESUME=0 (static mode)
#   PS_UI_PORT= PS_PROMETHEUS_PORT= (see above)
#   PS_IMAGE=paramserver:latest PS_ETCD_IMAGE=paramserver-etcd:latest
#   PS_PROMETHEUS_IMAGE=paramserver-prometheus:latest
#   PS_SERVER_ARGS, PS_WORKER_ARGS: more flags, split on spaces
#     (e.g. PS_WORKER_ARGS="--consistency=bsp --learning_rate=0.1")
#
# Usage:
#   deploy/docker/build_images.sh
#   PS_WORKERS=4 PS_EPOCHS=5 deploy/docker/compose_file.sh >/tmp/ps.yml
#   docker-compose -f /tmp/ps.yml -p ps up       # Ctrl-C once the workers have printed
#   docker-compose -f /tmp/ps.yml -p ps down -v  # removes containers, networks, volume
# With the default sizes, use deploy/docker/compose.yaml itself.
set -euo pipefail

die() { echo "compose_file.sh: $*" >&2; exit 2; }
servers=${PS_SERVERS:-3}
workers=${PS_WORKERS:-2}
replicas=${PS_REPLICAS:-2}
epochs=${PS_EPOCHS:-3}
mode=${PS_MODE:-replicated}
lease=${PS_LEASE_SECONDS:-3}
cluster=${PS_CLUSTER:-compose}
ckpt_seconds=${PS_CHECKPOINT_SECONDS:-10}
resume=${PS_RESUME:-0}
prom_port=${PS_PROMETHEUS_PORT:-}
ui_port=${PS_UI_PORT:-}
image=${PS_IMAGE:-paramserver:latest}
etcd_image=${PS_ETCD_IMAGE:-paramserver-etcd:latest}
prom_image=${PS_PROMETHEUS_IMAGE:-paramserver-prometheus:latest}

for pair in PS_SERVERS:servers PS_WORKERS:workers PS_REPLICAS:replicas PS_EPOCHS:epochs \
    PS_LEASE_SECONDS:lease PS_CHECKPOINT_SECONDS:ckpt_seconds; do
  v=${pair#*:}
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "${pair%%:*}=${!v} must be a positive integer"
done
case "$mode" in replicated|static) ;; *) die "PS_MODE=$mode must be replicated or static" ;; esac
[ "$mode" = static ] || [ "$replicas" -le "$servers" ] || die "PS_REPLICAS=$replicas exceeds PS_SERVERS=$servers"
case "$resume" in 0|1) ;; *) die "PS_RESUME=$resume must be 0 or 1" ;; esac
[ "$resume" = 0 ] || [ "$mode" = static ] || die "PS_RESUME=1 needs PS_MODE=static (replicated clusters take no checkpoints yet)"
[[ "$cluster" =~ ^[A-Za-z0-9_.-]+$ ]] || die "PS_CLUSTER=$cluster: letters, digits, '_', '.', '-' only"
for v in PS_PROMETHEUS_PORT PS_UI_PORT; do
  p=${!v:-}
  [ -z "$p" ] || { [[ "$p" =~ ^[1-9][0-9]{0,4}$ ]] && [ "$p" -le 65535 ]; } ||
    die "$v=$p must be a port number (1..65535), or unset"
done
for v in PS_SERVER_ARGS PS_WORKER_ARGS; do
  # Compose would expand $ itself, and the list below is written unescaped.
  [[ "${!v:-}" != *[\$\"\\]* ]] || die "$v may not contain \$, \" or \\"
done

# Words -> the items of a YAML flow list, each quoted, with a leading ", ".
items() {
  local w
  for w in "$@"; do printf ', "%s"' "$w"; done
}
# shellcheck disable=SC2086  # a list of flags separated by spaces: split on purpose
server_extra=$(items ${PS_SERVER_ARGS:-})
# shellcheck disable=SC2086  # a list of flags separated by spaces: split on purpose
worker_extra=$(items ${PS_WORKER_ARGS:-})

spec=""
for ((i = 0; i < servers; i++)); do spec="$spec${spec:+,}server$i:7000"; done
targets=""
for ((i = 0; i < servers; i++)); do targets="$targets${targets:+, }'server$i:9100'"; done
for ((i = 0; i < workers; i++)); do targets="$targets, 'worker$i:9100'"; done

shape="replicas $replicas"
if [ "$mode" = static ]; then
  shape="static, no replicas, a checkpoint every ${ckpt_seconds}s"
  [ "$resume" = 0 ] || shape="$shape, resuming"
fi
# Host ports: the one given, or Compose's variable, read when `up` runs.
# shellcheck disable=SC2016  # written as is, for Compose to expand
{ ui_host=$ui_port; [ -n "$ui_host" ] || ui_host='${PS_UI_PORT:-}'; }
# shellcheck disable=SC2016  # written as is, for Compose to expand
{ prom_host=$prom_port; [ -n "$prom_host" ] || prom_host='${PS_PROMETHEUS_PORT:-}'; }

cat <<YAML
# A parameter-server cluster: $servers servers ($shape), $workers workers, $epochs epochs.
# Generated by deploy/docker/compose_file.sh (deploy/docker/compose.yaml is its
# output with the default sizes: change the script, then regenerate). After
# deploy/docker/build_images.sh (docker-compose is Debian's Compose; the
# \`docker compose\` plugin, where installed, takes the same arguments):
#   docker-compose -f FILE up          # trains; each worker prints its test accuracy
#   docker-compose -f FILE port server0 9100     # the web UI: http://127.0.0.1:PORT/
#   docker-compose -f FILE port prometheus 9090  # Prometheus: http://127.0.0.1:PORT/
#   docker-compose -f FILE down -v     # removes the containers, networks and volume
YAML
if [ -z "$ui_port" ] || [ -z "$prom_port" ]; then
  cat <<'YAML'
# Both ports are bound to 127.0.0.1 only. A port written ${VAR:-} below is read
# from the environment at `up` (e.g. PS_UI_PORT=8080); unset, it is a free one.
YAML
else
  echo "# Both ports are bound to 127.0.0.1 only."
fi
cat <<YAML
version: "2.4"
networks:
  cluster:
    internal: true
  web: {}
volumes:
  checkpoints: {}
services:
YAML

if [ "$mode" = replicated ]; then
  cat <<YAML
  etcd:
    image: $etcd_image
    init: true
    command: ["etcd", "--name", "ps", "--data-dir", "/tmp/etcd",
              "--listen-client-urls", "http://0.0.0.0:2379",
              "--advertise-client-urls", "http://etcd:2379",
              "--listen-peer-urls", "http://127.0.0.1:2380",
              "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
              "--initial-cluster", "ps=http://127.0.0.1:2380"]
    networks: [cluster]
    healthcheck:
      test: ["CMD", "etcdctl", "--endpoints=127.0.0.1:2379", "--command-timeout=2s", "endpoint", "health"]
      interval: 1s
      timeout: 3s
      retries: 60
YAML
fi

for ((i = 0; i < servers; i++)); do
  if [ "$mode" = replicated ]; then
    flags="\"--etcd=etcd:2379\", \"--cluster=$cluster\", \"--num_servers=$servers\", \"--index=$i\",
              \"--replicas=$replicas\", \"--lease_seconds=$lease\", \"--advertise=server$i:7000\""
  else
    flags="\"--servers=$spec\", \"--index=$i\", \"--checkpoint_dir=/checkpoints/$cluster\""
    [ "$i" != 0 ] || flags="$flags, \"--checkpoint_every_seconds=$ckpt_seconds\""
    [ "$resume" = 0 ] || flags="$flags, \"--restore\""
  fi
  cat <<YAML
  server$i:
    image: $image
    init: true
    command: ["ps_server", $flags,
              "--listen=0.0.0.0:7000", "--metrics_port=9100"$server_extra]
YAML
  if [ "$i" = 0 ]; then
    cat <<YAML
    networks: [cluster, web]
    ports:
      - "127.0.0.1:$ui_host:9100"  # the web UI (/), /metrics, /healthz, /readyz
YAML
  else
    echo "    networks: [cluster]"
  fi
  cat <<YAML
    volumes:
      - checkpoints:/checkpoints
    healthcheck:
      # /readyz answers 200 once the server serves (a replicated one: has a ring).
      test: ["CMD", "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9100 && printf 'GET /readyz HTTP/1.0\\\\r\\\\n\\\\r\\\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
      interval: 1s
      timeout: 3s
      retries: 120
YAML
  if [ "$mode" = replicated ]; then
    printf '    depends_on:\n      etcd:\n        condition: service_healthy\n'
  fi
done

if [ "$mode" = replicated ]; then
  where="\"--etcd=etcd:2379\", \"--cluster=$cluster\""
else
  where="\"--servers=$spec\""
  [ "$resume" = 0 ] || where="$where, \"--resume\""
fi
for ((i = 0; i < workers; i++)); do
  cat <<YAML
  worker$i:
    image: $image
    init: true
    command: ["ps_worker", $where, "--worker_index=$i", "--num_workers=$workers",
              "--model=mlp", "--epochs=$epochs", "--progress_seconds=5",
              "--metrics_port=9100", "--metrics_host=0.0.0.0", "--metrics_linger_seconds=5"$worker_extra]
    networks: [cluster]
    depends_on:
YAML
  for ((s = 0; s < servers; s++)); do
    printf '      server%d:\n        condition: service_healthy\n' "$s"
  done
done

cat <<YAML
  prometheus:
    image: $prom_image
    init: true
    entrypoint: ["sh", "-c"]
    command:
      - |
        printf '%s\n' \\
          'global: {scrape_interval: 2s, evaluation_interval: 2s}' \\
          'scrape_configs:' \\
          '  - job_name: paramserver' \\
          '    static_configs:' \\
          "      - targets: [$targets]" >/tmp/prometheus.yml
        exec prometheus --config.file=/tmp/prometheus.yml --storage.tsdb.path=/tmp/tsdb \\
          --web.listen-address=0.0.0.0:9090
    networks: [cluster, web]
    ports:
      - "127.0.0.1:$prom_host:9090"
YAML
