#!/usr/bin/env bash
# Used inside the Dockerfile's build stage: copies into DEST_DIR every shared
# library that the given binaries load (ldd) and that the runtime stage will
# not have. Both stages start FROM the same debian:bookworm, whose packages
# (name and version) were recorded in BASE_PACKAGES before deploy/setup.sh
# ran; a library is copied unless its package is there at the same version.
# glibc's own libraries (package libc6) are never copied: they must match the
# base's dynamic loader, and bookworm keeps their symbol versions stable.
#
# Usage: collect_libs.sh BASE_PACKAGES DEST_DIR BINARY...
#   BASE_PACKAGES: lines "package version" (dpkg-query -W -f='${Package} ${Version}\n')
# Prints each library copied, with its package.
set -euo pipefail

[ $# -ge 3 ] || { echo "usage: $0 BASE_PACKAGES DEST_DIR BINARY..." >&2; exit 2; }
base=$1 dest=$2
shift 2
[ -r "$base" ] || { echo "collect_libs.sh: cannot read the base package list $base" >&2; exit 1; }
mkdir -p "$dest"

# Which package owns each library: dpkg records usr-merged files under
# either /lib or /usr/lib, and a soname is often a symlink to the real file,
# so every spelling is asked, in one dpkg-query call (one per file is slow).
candidates() {
  local c p
  for c in "$1" "$(readlink -f "$1")"; do
    for p in "$c" "${c#/usr}" "/usr$c"; do echo "$p"; done
  done
}
libs=$(ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u)
[ -n "$libs" ] || { echo "collect_libs.sh: ldd found no libraries in $*" >&2; exit 1; }
if ldd "$@" | grep -q 'not found'; then
  ldd "$@" | grep 'not found' >&2
  echo "collect_libs.sh: the binaries miss libraries in the build stage itself" >&2
  exit 1
fi
declare -A owner_of
mapfile -t all < <(for lib in $libs; do candidates "$lib"; done | sort -u)
while IFS= read -r line; do  # "package[:arch]: /path"
  case "$line" in diversion*|*", "*) continue ;; esac
  owner_of[${line#*: }]=${line%%: *}
done < <(dpkg-query -S "${all[@]}" 2>/dev/null || true)
copied=0
for lib in $libs; do
  pkg=""
  for c in $(candidates "$lib"); do
    pkg=${owner_of[$c]:-}
    [ -n "$pkg" ] && break
  done
  [ -n "$pkg" ] || { echo "collect_libs.sh: no package owns $lib" >&2; exit 1; }
  pkg_name=${pkg%%:*}
  [ "$pkg_name" = libc6 ] && continue
  version=$(dpkg-query -W -f='${Version}' "$pkg")
  grep -qxF "$pkg_name $version" "$base" && continue
  cp -L "$lib" "$dest/"
  echo "  $(basename "$lib") ($pkg_name $version)"
  copied=$((copied + 1))
done
echo "collect_libs.sh: $copied libraries copied to $dest"
