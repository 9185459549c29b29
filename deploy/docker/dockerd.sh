#!/usr/bin/env bash
# Makes sure a Docker engine answers: when `docker info` fails, starts
# Debian's dockerd (package docker.io) in the background, in a session of its
# own so that it outlives the script that started it, and waits for it with a
# bounded poll. Idempotent; two callers at once are serialized by a lock.
#
# Storage driver: the first of overlay2, fuse-overlayfs (when the
# fuse-overlayfs program is installed) and vfs with which dockerd starts,
# unless PS_DOCKER_STORAGE_DRIVER names one. On this project's machines
# (ext4, kernel overlayfs available) that is overlay2. vfs works anywhere but
# copies every layer in full: slow, and several GB for the build stage; the
# script warns when the engine uses it.
#
# Usage: deploy/docker/dockerd.sh          (as root)
# Prints one line: the engine that answers, its version and storage driver.
#
# Environment:
#   DOCKER                    Docker client (default /usr/bin/docker, Debian's
#                             20.10 CLI, which matches the engine; see
#                             deploy/docker/build_images.sh)
#   DOCKER_HOST               the engine's socket, as for the client (default
#                             unix:///var/run/docker.sock)
#   PS_DOCKERD_LOG            dockerd's log (default /var/log/ps-dockerd.log)
#   PS_DOCKER_STORAGE_DRIVER  use only this storage driver
#   PS_DOCKERD_ARGS           more dockerd flags, split on spaces (e.g. a
#                             second engine for a trial: -H unix:///tmp/d.sock
#                             --data-root ... --exec-root ... --pidfile ...
#                             --iptables=false; not --bridge=none, with which
#                             dockerd deletes the host's docker0 interface
#                             that the first engine uses)
#   PS_DOCKERD_TIMEOUT        seconds to wait for each start (default 60)
set -euo pipefail

docker=${DOCKER:-/usr/bin/docker}
log=${PS_DOCKERD_LOG:-/var/log/ps-dockerd.log}
timeout_s=${PS_DOCKERD_TIMEOUT:-60}
lock=${PS_DOCKERD_LOCK:-/run/lock/ps-dockerd.lock}
[[ "$timeout_s" =~ ^[1-9][0-9]*$ ]] ||
  { echo "dockerd.sh: PS_DOCKERD_TIMEOUT=$timeout_s must be a positive integer" >&2; exit 2; }
[ -x "$docker" ] ||
  { echo "dockerd.sh: no Docker client at $docker (deploy/setup.sh installs docker.io; or set DOCKER)" >&2; exit 1; }

engine_line() {
  "$docker" info --format 'server {{.ServerVersion}}, storage driver {{.Driver}}, root {{.DockerRootDir}}' 2>/dev/null
}
report() {  # PREFIX
  local line
  line=$(engine_line) || return 1
  echo "dockerd.sh: $1: $line"
  case "$line" in
    *"storage driver vfs"*)
      echo "dockerd.sh: warning: storage driver vfs copies every layer in full (slow, large)" >&2 ;;
  esac
}

report "engine running" && exit 0

command -v dockerd >/dev/null || PATH="$PATH:/usr/sbin:/sbin"
command -v dockerd >/dev/null ||
  { echo "dockerd.sh: the engine does not answer and dockerd is not installed (deploy/setup.sh installs docker.io)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] ||
  { echo "dockerd.sh: the engine does not answer; dockerd must be started as root (sudo $0)" >&2; exit 1; }

mkdir -p "$(dirname "$lock")" "$(dirname "$log")"
exec 9>"$lock"
flock -w "$timeout_s" 9 ||
  { echo "dockerd.sh: another dockerd.sh has held $lock for ${timeout_s}s" >&2; exit 1; }
# Started by another caller while this one waited for the lock.
report "engine running" && exit 0

if [ -n "${PS_DOCKER_STORAGE_DRIVER:-}" ]; then
  drivers=("$PS_DOCKER_STORAGE_DRIVER")
else
  drivers=(overlay2)
  command -v fuse-overlayfs >/dev/null && drivers+=(fuse-overlayfs)
  drivers+=(vfs)
fi
# shellcheck disable=SC2206  # a list of flags separated by spaces: split on purpose
extra=(${PS_DOCKERD_ARGS:-})

for driver in "${drivers[@]}"; do
  echo "==== $(date -u +%FT%TZ) dockerd.sh: starting dockerd --storage-driver=$driver ${extra[*]}" >>"$log"
  setsid dockerd --storage-driver="$driver" "${extra[@]}" </dev/null >>"$log" 2>&1 9>&- &
  pid=$!
  for ((i = 0; i < timeout_s * 5; i++)); do
    if report "started dockerd (pid $pid, log $log)"; then exit 0; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    # Running but not answering: not a driver problem; say so and stop it.
    kill -TERM "$pid" 2>/dev/null || true
    tail -n 20 "$log" >&2
    echo "dockerd.sh: dockerd (pid $pid) did not answer within ${timeout_s}s; stopped it. See $log" >&2
    exit 1
  fi
  echo "dockerd.sh: dockerd exited at start with storage driver $driver; the end of $log:" >&2
  tail -n 2 "$log" >&2
done
echo "dockerd.sh: dockerd started with none of the storage drivers ${drivers[*]}; see $log" >&2
exit 1
