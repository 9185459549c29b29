#!/usr/bin/env bash
# Gives the Docker engine the image debian:bookworm, which every stage of
# deploy/docker/Dockerfile starts FROM. In order:
#   1. the image is present: nothing to do (--rebuild: remove it first);
#   2. `docker pull debian:bookworm`, given PS_PULL_SECONDS (default 20) s:
#      what a machine that reaches a registry does;
#   3. otherwise (no registry reachable, as on this project's machines):
#      debootstrap a minimal bookworm (variant minbase) from Debian's archive
#      into a temporary directory and `docker import` it as debian:bookworm.
#      The image's APT sources are bookworm, bookworm-updates and
#      bookworm-security on the same mirror as this machine's (or
#      PS_DEBIAN_MIRROR); no caches or package lists are kept; package
#      scripts may not start services (/usr/sbin/policy-rc.d exits 101);
#      the command is bash, as in Docker's official image. About 120 MB,
#      3-4 minutes here.
# Starts the engine first if needed (deploy/docker/dockerd.sh). Run as root.
#
# Usage: deploy/docker/base_image.sh [--rebuild]
# Environment:
#   DOCKER            Docker client (default /usr/bin/docker)
#   PS_PULL_SECONDS   how long the pull may take before debootstrap (20)
#   PS_DEBIAN_MIRROR  Debian archive, e.g. http://deb.debian.org/debian
#                     (default: the first http(s) debian mirror of this
#                     machine's APT sources, else deb.debian.org)
#   PS_DEBIAN_SECURITY_MIRROR  security archive (default: this machine's
#                     bookworm-security source, else the mirror's host
#                     with /debian-security)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
docker=${DOCKER:-/usr/bin/docker}
export DOCKER=$docker
image=debian:bookworm
pull_seconds=${PS_PULL_SECONDS:-20}
case "${1:-}" in
  "") rebuild=0 ;;
  --rebuild) rebuild=1 ;;
  *) echo "usage: $0 [--rebuild]" >&2; exit 2 ;;
esac
[[ "$pull_seconds" =~ ^[0-9]+$ ]] ||
  { echo "base_image.sh: PS_PULL_SECONDS=$pull_seconds must be a number of seconds" >&2; exit 2; }

"$here/dockerd.sh" >/dev/null
if "$docker" image inspect "$image" >/dev/null 2>&1; then
  if [ "$rebuild" = 0 ]; then
    echo "base_image.sh: $image present"
    exit 0
  fi
  "$docker" image rm "$image" >/dev/null ||
    { echo "base_image.sh: cannot remove $image (images built on it? docker image ls)" >&2; exit 1; }
fi

if [ "$pull_seconds" -gt 0 ] &&
   timeout "$pull_seconds" "$docker" pull -q "$image" >/dev/null 2>&1; then
  echo "base_image.sh: pulled $image"
  exit 0
fi

# ---- debootstrap -------------------------------------------------------------
command -v debootstrap >/dev/null || PATH="$PATH:/usr/sbin:/sbin"
command -v debootstrap >/dev/null ||
  { echo "base_image.sh: no registry answered within ${pull_seconds}s and debootstrap is missing (deploy/setup.sh installs it)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "base_image.sh: debootstrap needs root" >&2; exit 1; }

# The host's mirrors, from deb822 sources (Debian 12) or a one-line list.
host_uri() {  # SUITE_REGEX: the URI of the first source listing such a suite
  {
    awk -v re="$1" 'BEGIN { RS = ""; FS = "\n" }
      { uri = ""; suites = ""
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { sub(/^URIs: */, "", $i); split($i, u, " "); uri = u[1] }
          if ($i ~ /^Suites:/) suites = $i
        }
        if (uri ~ /^https?:/ && suites ~ re) { print uri; exit } }' \
      /etc/apt/sources.list.d/*.sources 2>/dev/null || true
    awk -v re="$1" '$1 == "deb" && $2 ~ /^https?:/ && $3 ~ re { print $2; exit }' \
      /etc/apt/sources.list 2>/dev/null || true
  } | head -n 1
}
mirror=${PS_DEBIAN_MIRROR:-$(host_uri '(^|[ :])bookworm( |$)')}
mirror=${mirror:-http://deb.debian.org/debian}
mirror=${mirror%/}
security=${PS_DEBIAN_SECURITY_MIRROR:-$(host_uri 'bookworm-security')}
security=${security:-${mirror%/debian}/debian-security}
security=${security%/}

root=$(mktemp -d "${TMPDIR:-/tmp}/bookworm-root.XXXXXX")
blog="$root.log"
cleanup() {
  # debootstrap mounts /proc and /sys in the target; never delete through them.
  local m
  awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r |
    while IFS= read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

echo "base_image.sh: no registry answered within ${pull_seconds}s; debootstrap bookworm from $mirror" >&2
t0=$(date +%s)
if ! debootstrap --variant=minbase --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
    bookworm "$root" "$mirror" >"$blog" 2>&1; then
  tail -n 20 "$blog" >&2
  echo "base_image.sh: debootstrap from $mirror failed (log kept: $blog); is the mirror reachable? set PS_DEBIAN_MIRROR" >&2
  exit 1
fi
rm -f "$blog"

rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
printf '#!/bin/sh\n# Image builds: package scripts start no services.\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin \
  "$root"/var/lib/apt/lists/* "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/tmp/*
: >"$root/etc/machine-id"

tar --numeric-owner -C "$root" -c . |
  "$docker" import --change 'CMD ["bash"]' -m "debootstrap --variant=minbase bookworm $mirror" - "$image" >/dev/null
size=$("$docker" image inspect -f '{{.Size}}' "$image")
echo "base_image.sh: imported $image from debootstrap ($((size / 1000000)) MB) in $(($(date +%s) - t0)) s"
