#!/usr/bin/env bash
# The README's first command, deploy/local_cluster.sh, on a fresh machine:
# a container from debian:bookworm (deploy/docker/base_image.sh: none of the
# project's packages) unpacks a revision of the tree and runs the command
# with no argument, every line it prints stamped with the wall seconds and
# the container's CPU seconds so far. Two revisions alternate (before, after,
# then after, before, ...), so both see the same machine and mirror; the
# table gives each run's phases (install: to "setup.sh: done"; build: to
# "local_cluster.sh: starting"; train and evaluate: to its RESULT line), the
# packages apt installed, and the means with after / before.
#
#   deploy/bench/first_run.sh [--before REV] [--after REV] [--runs N] [--out DIR]
#
# Defaults: before a564578 (the tree before the lighter install), after
# HEAD, 2 runs of each, logs in /tmp/first_run. A run takes 3-4 minutes
# on a quiet 2-core machine; nothing else should run meanwhile. Needs
# Docker (started if it is not running) and the Debian mirror of this
# machine's APT sources; root.
set -euo pipefail
declare -A rev=([before]=a564578 [after]=HEAD)
runs=2
out=/tmp/first_run
while [ $# -gt 0 ]; do
  case "$1" in
    --before) rev[before]="$2"; shift 2 ;;
    --after) rev[after]="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "usage: $0 [--before REV] [--after REV] [--runs N] [--out DIR]" >&2; exit 2 ;;
  esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "first_run.sh: --runs=$runs must be a positive integer" >&2; exit 2; }
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
mkdir -p "$out"
for side in before after; do
  git rev-parse --verify -q "${rev[$side]}^{commit}" >/dev/null ||
    { echo "first_run.sh: --$side=${rev[$side]} is not a commit of $repo" >&2; exit 2; }
  git archive -o "$out/$side.tar" "${rev[$side]}"
  echo "first_run.sh: $side = $(git log -1 --format='%h %s' "${rev[$side]}" | cut -c1-72)"
done
deploy/docker/dockerd.sh
deploy/docker/base_image.sh

# Runs inside the container: the stamps are milliseconds since the start and
# the cgroup's CPU seconds.
cat >"$out/inside.sh" <<'EOF'
#!/bin/bash
set -uo pipefail
start=$(date +%s%N)
cpu() {  # cgroup v2, else v1's cpuacct
  if [ -r /sys/fs/cgroup/cpu.stat ]; then
    awk '/^usage_usec/ { printf "%.1f", $2 / 1e6 }' /sys/fs/cgroup/cpu.stat
  else
    awk '{ printf "%.1f", $1 / 1e9 }' /sys/fs/cgroup/cpuacct/cpuacct.usage 2>/dev/null || echo 0
  fi
}
stamp() {
  while IFS= read -r line; do
    printf '%d %s %s\n' $(( ($(date +%s%N) - start) / 1000000 )) "$(cpu)" "$line"
  done
}
echo "PACKAGES_BEFORE $(dpkg-query -W | wc -l)"
mkdir -p /repo && tar -xf /repo.tar -C /repo && cd /repo || exit 1
deploy/local_cluster.sh 2>&1 | stamp
code=${PIPESTATUS[0]}
echo "PACKAGES_AFTER $(dpkg-query -W | wc -l)"
echo "EXIT $code"
exit "$code"
EOF
chmod +x "$out/inside.sh"

# One run: SIDE N -> a row "side n install build train total cpu packages".
run_one() {
  local side=$1 n=$2 log="$out/$1-$2.log"
  if ! docker run --rm -v "$out/$side.tar:/repo.tar:ro" -v "$out/inside.sh:/inside.sh:ro" \
      debian:bookworm /inside.sh >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "first_run.sh: $side run $n failed (log: $log)" >&2
    exit 1
  fi
  awk -v side="$side" -v n="$n" '
    /^PACKAGES_BEFORE/ { p0 = $2 } /^PACKAGES_AFTER/ { p1 = $2 }
    / setup\.sh: done$/ { install = $1 / 1000 }
    / local_cluster\.sh: starting / { build = $1 / 1000 }
    / local_cluster\.sh: RESULT / { total = $1 / 1000; cpu = $2 }
    END {
      if (!install || !build || !total) { print "first_run.sh: phases missing in the log" > "/dev/stderr"; exit 1 }
      printf "%s %d %.1f %.1f %.1f %.1f %.0f %d\n", side, n, install, build - install, total - build, total, cpu, p1 - p0
    }' "$log"
}

rows="$out/rows.txt"
: >"$rows"
for ((i = 1; i <= runs; i++)); do
  order=(before after)
  ((i % 2 == 0)) && order=(after before)
  for side in "${order[@]}"; do
    row=$(run_one "$side" "$i")
    echo "$row" >>"$rows"
    echo "first_run.sh: $row" | awk '{ printf "first_run.sh: %s run %d: install %.1f s, build %.1f s, train and evaluate %.1f s, total %.1f s, %d CPU s, %d packages\n", $2, $3, $4, $5, $6, $7, $8, $9 }'
  done
done

awk '
  { n[$1]++; for (c = 3; c <= 8; c++) s[$1, c] += $c }
  END {
    print "| | install (s) | build (s) | train + eval (s) | total (s) | CPU s | packages installed |"
    print "|---|---|---|---|---|---|---|"
    for (k = 1; k <= 2; k++) {
      side = k == 1 ? "before" : "after"
      printf "| mean %s (%d) |", side, n[side]
      for (c = 3; c <= 8; c++) printf " %.1f |", s[side, c] / n[side]
      printf "\n"
    }
    printf "| after / before |"
    for (c = 3; c <= 8; c++) {
      if (s["before", c] > 0) printf " %.2f |", s["after", c] / n["after"] / (s["before", c] / n["before"])
      else printf " - |"
    }
    printf "\n"
    t = s["after", 6] / n["after"] / (s["before", 6] / n["before"])
    printf "first_run.sh: the first run takes %.0f%% less time after (%.2fx as fast)\n", 100 * (1 - t), 1 / t
  }' "$rows" | tee "$out/summary.md"
