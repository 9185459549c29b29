#!/usr/bin/env bash
# Writes to standard output a Docker Compose file (format 2.4, for Debian's
# docker-compose 1.29) for a parameter-server cluster on this machine, sized
# by the environment. It is generated because every server and worker needs
# its own index (--index, --worker_index), which Compose's scaling cannot
# give. Services:
#   etcd         membership and the ring (image paramserver-etcd)
#   server0..    PS_SERVERS ps_server, each shard on PS_REPLICAS of them;
#                gRPC on :7000 and metrics, /healthz, /readyz on :9100
#                inside the project's network; healthy once /readyz says
#                ready (it has a ring); the volume `checkpoints` mounted at
#                /checkpoints (see PS_MODE)
#   worker0..    PS_WORKERS ps_worker training the MLP on Fashion-MNIST for
#                PS_EPOCHS epochs, started once every server is healthy; each
#                ends with "worker i/W: test accuracy X (10000 test
#                examples)" and "RESULT test_accuracy=X", and exits 0
#   prometheus   scrapes every server and worker every 2 s; its port 9090
#                is published on 127.0.0.1 only (PS_PROMETHEUS_PORT, default
#                a free port: `docker-compose port prometheus 9090` says which)
# The processes talk over the internal network `cluster` (no route out of
# it); Prometheus alone is also on `web`, the network its port is published
# through. Nothing else is published. Every container runs under Docker's
# init (init: true), which passes SIGTERM on: a process that is PID 1 itself
# ignores it unless it handles it, and ps_worker does not.
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
#   PS_PROMETHEUS_PORT= (host port on 127.0.0.1; empty: a free one)
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
[ -z "$prom_port" ] || [[ "$prom_port" =~ ^[1-9][0-9]*$ ]] || die "PS_PROMETHEUS_PORT=$prom_port must be a port number"
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
echo "# Generated by deploy/docker/compose_file.sh: $servers servers ($shape), $workers workers, $epochs epochs."
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
    networks: [cluster]
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
      - "127.0.0.1:$prom_port:9090"
YAML
