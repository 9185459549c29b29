# shellcheck shell=bash
# Sourced by the deploy scripts and the process tests: bounded polling, the
# way they wait for what another process does (never a fixed sleep). Each
# checks every 0.05 s until a deadline on the clock; SECONDS is a whole
# number.
#
#   poll_until SECONDS COMMAND [ARGS...]
#     runs COMMAND until it succeeds; returns 1 when SECONDS passed first.
#   wait_for_file FILE SECONDS [PID]
#     until FILE exists (an empty file counts: the marker files of
#     exact_sum_client --started_file; ps_server writes its port and metrics
#     port files whole, by a rename). Returns 1 after SECONDS, or as soon as
#     process PID, when given, has exited without writing it.
#   wait_for_line FILE PATTERN SECONDS [PID]
#     until a line of FILE matches the grep PATTERN; returns 1 likewise.

poll_until() {
  local seconds=$1 deadline
  shift
  deadline=$((${EPOCHREALTIME/[.,]/} + seconds * 1000000))
  until "$@"; do
    ((${EPOCHREALTIME/[.,]/} < deadline)) || return 1
    sleep 0.05
  done
}

# PID COMMAND...: whether COMMAND succeeds (its errors unsaid), or else the
# process PID, when PID is not empty, is gone.
_ps_holds_or_exited() {
  local pid=$1
  shift
  "$@" 2>/dev/null || { [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; }
}

wait_for_file() {
  poll_until "$2" _ps_holds_or_exited "${3:-}" test -e "$1" && [ -e "$1" ]
}

wait_for_line() {
  poll_until "$3" _ps_holds_or_exited "${4:-}" grep -q -- "$2" "$1" && grep -q -- "$2" "$1" 2>/dev/null
}
