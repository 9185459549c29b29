#!/usr/bin/env bash
# A throw-away single-node Slurm cluster living entirely in one directory:
# its own munge key and munged, slurm.conf and cgroup.conf, slurmctld and
# slurmd, all state, spool, logs and pid files. Nothing under /etc/slurm or
# the system's munge (/etc/munge, /run/munge) is read or changed. For tests
# and for trying deploy/slurm/paramserver.sbatch on one machine.
#
#   deploy/slurm/local_slurm.sh start DIR   configure and start; returns once
#                                           the node is idle in sinfo
#   deploy/slurm/local_slurm.sh stop DIR    cancel any job left, stop the
#                                           daemons it started, wait for them
#   deploy/slurm/local_slurm.sh status DIR  which daemons run, and sinfo
#
# After `start`, point the Slurm commands at this cluster with
#   source DIR/slurm.env        (exports SLURM_CONF)
#
# Daemons: munged (socket, key, pid, log, seed all in DIR), slurmctld and
# slurmd on free TCP ports picked now, on 127.0.0.1. One node, named after
# `hostname -s`, with the CPUs and memory `slurmd -C` detects; one partition
# "local". No cgroups (proctrack/linuxproc, task/none) and no accounting.
# The daemons run as the caller (root in the tests), in the foreground in
# their own sessions, with their pids in DIR/run/*.pid; `stop` signals
# exactly those pids (after checking each is still the program it started).
#
# UNIX socket paths are limited to 107 bytes, and DIR (a Bazel TEST_TMPDIR)
# can be long, so every path in the configuration goes through a short
# symbolic link /tmp/psslurm.XXXXXX/d -> DIR (PS_SLURM_LINK_ROOT overrides
# /tmp), removed by `stop`.
#
# Environment: PS_SLURM_START_TIMEOUT (seconds each daemon may take to come
# up, default 30), PS_SLURM_DEBUG (SlurmctldDebug/SlurmdDebug, default info).
set -euo pipefail

prog=local_slurm.sh
die() { echo "$prog: $*" >&2; exit 1; }

usage() { sed -n '2,30p' "$0" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
case "$cmd" in start|stop|status) ;; *) usage ;; esac
if [ "$cmd" != start ] && [ ! -d "$2" ]; then
  echo "$prog: no directory $2; nothing to $cmd"
  exit 0
fi
mkdir -p "$2"
dir=$(cd "$2" && pwd -P)
timeout_s=${PS_SLURM_START_TIMEOUT:-30}
[[ "$timeout_s" =~ ^[1-9][0-9]*$ ]] || die "PS_SLURM_START_TIMEOUT=$timeout_s must be a positive integer"

# The three daemons, in start order; stop goes in reverse.
daemons=(munged slurmctld slurmd)

# pid of DAEMON when its pid file names a live process that is still that
# program (guards against a reused pid); empty otherwise.
live_pid() {
  local name=$1 file="$dir/run/$1.pid" pid comm
  [ -s "$file" ] || return 0
  pid=$(tr -dc '0-9' <"$file")
  [ -n "$pid" ] || return 0
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 0
  # /proc/PID/comm holds at most 15 characters of the program's name.
  [ "$comm" = "${name:0:15}" ] && echo "$pid"
  return 0
}

# Short path that reaches DIR (see the header); created by `start`.
link_path() {
  local link
  link=$(cat "$dir/link" 2>/dev/null) || return 1
  [ -L "$link" ] && [ "$(readlink "$link")" = "$dir" ] || return 1
  echo "$link"
}

log_tail() {  # NAME FILE: the last lines of a daemon's log, to stderr
  echo "---- last lines of $2 ($1):" >&2
  if [ -s "$2" ]; then tail -n 25 "$2" >&2; else echo "(empty or missing)" >&2; fi
}

# Two distinct free TCP ports on 127.0.0.1 (both held while they are picked,
# so they differ; a small race with other programs remains, as always).
free_ports() {
  python3 - <<'EOF'
import socket
held = []
for _ in range(2):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    held.append(s)
print(" ".join(str(s.getsockname()[1]) for s in held))
for s in held:
    s.close()
EOF
}

# Waits (bounded) until COMMAND... succeeds; fails early when the daemon
# with pid PID is gone. Returns 0 on success, 1 on death, 2 on time-out.
wait_until() {
  local pid=$1 i
  shift
  for ((i = 0; i < timeout_s * 10; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 2
}

# Starts NAME (the rest: its command line, which must stay in the
# foreground) in its own session, with stdin/stdout/stderr detached from the
# caller so that no pipe of the caller is held open; records its pid.
spawn() {
  local name=$1
  shift
  setsid "$@" </dev/null >>"$dir/log/$name.out" 2>&1 &
  echo $! >"$dir/run/$name.pid"
}

write_config() {  # LINK: writes slurm.conf, cgroup.conf, plugstack.conf
  local base=$1 node ctld_port slurmd_port hw
  node=$(hostname -s)
  read -r ctld_port slurmd_port <<<"$(free_ports)"
  # The hardware as slurmd itself will see it; slurmd drains a node whose
  # configuration claims more than it finds.
  hw=$(slurmd -C 2>/dev/null | head -n 1) || true
  [[ "$hw" == NodeName=* ]] || die "slurmd -C did not describe this machine (got '$hw')"
  hw=${hw#NodeName=* }
  cat >"$dir/slurm.conf" <<EOF
# Written by deploy/slurm/local_slurm.sh for a single-node cluster in
# $dir (reached as $base). Regenerated on every start.
ClusterName=pslocal
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$(id -un)
SlurmdUser=root

# munge through this directory's own munged.
AuthType=auth/munge
AuthInfo=socket=$base/munge/munge.socket
CredType=cred/munge

StateSaveLocation=$base/state
SlurmdSpoolDir=$base/spool
SlurmctldPidFile=$base/run/slurmctld.pid
SlurmdPidFile=$base/run/slurmd.pid
SlurmctldLogFile=$base/log/slurmctld.log
SlurmdLogFile=$base/log/slurmd.log
SlurmctldDebug=${PS_SLURM_DEBUG:-info}
SlurmdDebug=${PS_SLURM_DEBUG:-info}
PlugStackConfig=$base/plugstack.conf

# No cgroups, no accounting, no MPI.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none

SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# Keeps finished jobs visible to scontrol for a while.
MinJobAge=600
KillWait=10
MailProg=/bin/true
InactiveLimit=0
SlurmdTimeout=60

NodeName=$node NodeAddr=127.0.0.1 NodeHostname=$node $hw State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  # Read only by cgroup plugins, none of which is configured; present so
  # that nothing falls back to /etc/slurm/cgroup.conf.
  cat >"$dir/cgroup.conf" <<'EOF'
# Written by deploy/slurm/local_slurm.sh: no cgroup plugin is in use.
CgroupAutomount=no
ConstrainCores=no
ConstrainRAMSpace=no
ConstrainDevices=no
EOF
  : >"$dir/plugstack.conf"
  echo "export SLURM_CONF=$base/slurm.conf" >"$dir/slurm.env"
}

start() {
  local name pid base link_root rc tool old
  for tool in munged mungekey munge unmunge slurmctld slurmd sinfo scontrol python3 setsid; do
    command -v "$tool" >/dev/null || die "'$tool' not found; install: apt-get install -y --no-install-recommends slurm-wlm munge"
  done
  local running=()
  for name in "${daemons[@]}"; do
    pid=$(live_pid "$name")
    [ -n "$pid" ] && running+=("$name($pid)")
  done
  if [ ${#running[@]} -eq ${#daemons[@]} ]; then
    base=$(link_path) || die "daemons run but the link in $dir/link is gone; run '$0 stop $dir'"
    echo "$prog: already running in $dir: ${running[*]}"
    echo "$prog: use: source $dir/slurm.env"
    return 0
  fi
  [ ${#running[@]} -eq 0 ] ||
    die "partly running in $dir (${running[*]}); run '$0 stop $dir' first"

  # From here on, any exit before the cluster is up (an error, a signal, a
  # closed output pipe) stops whatever was started.
  trap '' PIPE
  trap 'stop >/dev/null 2>&1 || true' EXIT
  trap 'exit 130' INT TERM
  mkdir -p "$dir"/{munge,state,spool,run,log}
  chmod 755 "$dir/munge"
  rm -f "$dir"/run/*.pid
  # The short link (see the header), made afresh.
  if old=$(link_path); then rm -f "$old"; rmdir "$(dirname "$old")" 2>/dev/null || true; fi
  link_root=${PS_SLURM_LINK_ROOT:-/tmp}
  base=$(mktemp -d "$link_root/psslurm.XXXXXX")/d
  ln -s "$dir" "$base"
  echo "$base" >"$dir/link"
  write_config "$base"

  # 1. munged, with a key of its own.
  [ -s "$dir/munge/munge.key" ] || mungekey --create --keyfile="$dir/munge/munge.key" >/dev/null
  chmod 600 "$dir/munge/munge.key"
  spawn munged munged --foreground --force \
    --socket="$base/munge/munge.socket" --key-file="$base/munge/munge.key" \
    --pid-file="$base/munge/munged.pid" --log-file="$base/log/munged.log" \
    --seed-file="$base/munge/munged.seed"
  pid=$(cat "$dir/run/munged.pid")
  rc=0
  wait_until "$pid" sh -c "munge -n -S '$base/munge/munge.socket' | unmunge -S '$base/munge/munge.socket'" || rc=$?
  [ $rc -eq 0 ] || start_failed "munged $([ $rc = 1 ] && echo exited || echo "gave no credential in ${timeout_s} s")" \
    munged "$dir/log/munged.log" munged "$dir/log/munged.out"

  # 2. slurmctld: in the foreground (-D), its own session; -i: ignore
  # unreadable state left by an earlier run instead of refusing to start.
  export SLURM_CONF="$base/slurm.conf"
  spawn slurmctld slurmctld -D -i -f "$base/slurm.conf"
  pid=$(cat "$dir/run/slurmctld.pid")
  rc=0
  wait_until "$pid" scontrol ping || rc=$?
  if [ $rc -ne 0 ] || ! scontrol ping 2>/dev/null | grep -q 'is UP'; then
    start_failed "slurmctld $([ $rc = 1 ] && echo exited || echo "did not answer 'scontrol ping' in ${timeout_s} s")" \
      slurmctld "$dir/log/slurmctld.log" slurmctld "$dir/log/slurmctld.out"
  fi

  # 3. slurmd, then the node must turn idle.
  spawn slurmd slurmd -D -f "$base/slurm.conf"
  pid=$(cat "$dir/run/slurmd.pid")
  rc=0
  wait_until "$pid" node_idle || rc=$?
  [ $rc -eq 0 ] || start_failed "slurmd $([ $rc = 1 ] && echo exited || echo "started, but the node is not idle after ${timeout_s} s: $(sinfo -h -N -o '%N %T %E' 2>&1)")" \
    slurmd "$dir/log/slurmd.log" slurmd "$dir/log/slurmd.out" slurmctld "$dir/log/slurmctld.log"
  trap - EXIT
  echo "$prog: up in $dir: munged($(live_pid munged)) slurmctld($(live_pid slurmctld)) slurmd($(live_pid slurmd)); $(sinfo -h -o 'partition %P, node %N %T, %c CPUs')"
  echo "$prog: use: source $dir/slurm.env   # SLURM_CONF=$base/slurm.conf"
}

# start_failed MESSAGE [NAME LOG]...: stops what was started, then reports
# which daemon failed with the end of its logs; exits 1.
start_failed() {
  local message=$1
  shift
  trap - EXIT
  stop >/dev/null 2>&1 || true
  echo "$prog: $message" >&2
  while [ $# -ge 2 ]; do log_tail "$1" "$2"; shift 2; done
  exit 1
}

node_idle() {
  [ "$(sinfo -h -N -o '%T' 2>/dev/null)" = idle ]
}

# Stops the daemons recorded in DIR/run (reverse order), bounded: SIGTERM,
# up to 15 s, then SIGKILL. Returns 1 when one had to be killed or stayed.
stop_daemons() {
  local i name pid status=0
  for ((i = ${#daemons[@]} - 1; i >= 0; i--)); do
    name=${daemons[$i]}
    pid=$(live_pid "$name")
    if [ -z "$pid" ]; then rm -f "$dir/run/$name.pid"; continue; fi
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "$prog: $name ($pid) ignored SIGTERM for 15 s; SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      status=1
    fi
    if kill -0 "$pid" 2>/dev/null; then
      echo "$prog: $name ($pid) is still there" >&2; status=1
    else
      echo "$prog: stopped $name ($pid)"
      rm -f "$dir/run/$name.pid"
    fi
  done
  return $status
}

stop() {
  local base ids status=0
  if base=$(link_path) && [ -n "$(live_pid slurmctld)" ]; then
    # Cancel what is left (a job's steps run under slurmstepd, which outlives
    # slurmd), and wait (bounded) for the queue to drain.
    export SLURM_CONF="$base/slurm.conf"
    ids=$(squeue -h -o '%i' 2>/dev/null || true)
    if [ -n "$ids" ]; then
      echo "$prog: cancelling jobs left: $(tr "\n" " " <<<"$ids")"
      # shellcheck disable=SC2086  # the job ids, one a line: split on purpose
      scancel $ids 2>/dev/null || true
      for _ in $(seq 1 200); do
        [ -z "$(squeue -h -o '%i' 2>/dev/null)" ] && break
        sleep 0.1
      done
      [ -z "$(squeue -h -o '%i' 2>/dev/null)" ] || { echo "$prog: jobs still listed after 20 s: $(squeue -h 2>&1)" >&2; status=1; }
    fi
  fi
  stop_daemons || status=1
  if base=$(link_path); then
    rm -f "$base"
    rmdir "$(dirname "$base")" 2>/dev/null || true
  fi
  rm -f "$dir/link"
  return $status
}

status() {
  local name pid base
  for name in "${daemons[@]}"; do
    pid=$(live_pid "$name")
    echo "$name: ${pid:-not running}"
  done
  if base=$(link_path) && [ -n "$(live_pid slurmctld)" ]; then
    SLURM_CONF="$base/slurm.conf" sinfo
  fi
}

"$cmd"
