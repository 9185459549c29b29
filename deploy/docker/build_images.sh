#!/usr/bin/env bash
# Builds the images of deploy/docker/Dockerfile from this repository:
#   paramserver:latest             ps_server, ps_worker, ps_admin (target runtime)
#   paramserver-etcd:latest        Debian's etcd (target etcd)
#   paramserver-prometheus:latest  Debian's Prometheus (target prometheus)
# First starts the engine if it is not running (deploy/docker/dockerd.sh) and
# provides the debian:bookworm base (deploy/docker/base_image.sh).
#
# Incremental: the layer with deploy/setup.sh's packages is reused until
# setup.sh changes, and Bazel's output base lives in a BuildKit cache mount,
# so after a source change only the touched targets are rebuilt; with no
# change every layer comes from the cache (a few seconds). Prints each
# image's build time and size; the full output goes to a log.
#
# Which client: Debian's /usr/bin/docker (20.10, the engine's own version).
# It runs BuildKit inside the engine with DOCKER_BUILDKIT=1, which the cache
# mounts need. A newer CLI on PATH (here /usr/local/bin/docker 28.x) wants the
# buildx plugin for BuildKit, and without it falls back to the legacy
# builder, which refuses RUN --mount.
#
# Usage: deploy/docker/build_images.sh        (as root, from anywhere)
# Environment:
#   DOCKER            Docker client (default /usr/bin/docker)
#   PS_BAZEL_FLAGS    extra flags for the image's `bazel build`. The default
#                     build uses .bazelrc's -march=native: the binaries need
#                     the build machine's CPU features. For images that run
#                     on other x86-64 machines: PS_BAZEL_FLAGS=--copt=-march=x86-64-v2
#   PS_BUILD_LOG      the build output (default ${TMPDIR:-/tmp}/ps_docker_build.log)
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
docker=${DOCKER:-/usr/bin/docker}
export DOCKER=$docker
log=${PS_BUILD_LOG:-${TMPDIR:-/tmp}/ps_docker_build.log}
[ -x "$docker" ] ||
  { echo "build_images.sh: no Docker client at $docker (deploy/setup.sh installs docker.io)" >&2; exit 1; }

"$repo/deploy/docker/dockerd.sh"
"$repo/deploy/docker/base_image.sh"

export DOCKER_BUILDKIT=1
: >"$log"
for spec in runtime:paramserver etcd:paramserver-etcd prometheus:paramserver-prometheus; do
  target=${spec%%:*} name=${spec#*:}:latest
  t0=$(date +%s.%N)
  echo "==== $(date -u +%FT%TZ) $name (target $target)" >>"$log"
  if ! "$docker" build --progress=plain -f "$repo/deploy/docker/Dockerfile" --target "$target" \
      --build-arg "BAZEL_FLAGS=${PS_BAZEL_FLAGS:-}" -t "$name" "$repo" >>"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "build_images.sh: building $name (target $target) failed; full output in $log" >&2
    exit 1
  fi
  size=$("$docker" image inspect -f '{{.Size}}' "$name")
  echo "build_images.sh: $name built in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s ($((size / 1000000)) MB)"
done
