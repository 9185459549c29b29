# shellcheck shell=bash
# Shared by the multi-process tests (sourced): their side of deploy/lib/,
# which starts the servers. Gives each test a fresh directory, kills every
# process it started on exit, and fails with the ends of its logs.
#   root, server_bin, worker_bin: the runfiles, ps_server and ps_worker in them
#   dir: the test's directory (empty), where the servers' logs and ports go
#   all_pids: what is killed (SIGKILL) on exit
#   fail MESSAGE
# From deploy/lib/servers.sh (see there):
#   start_servers "$root" "$dir" N [ps_server flags] -> sets $spec, $server_pids
#   restart_server I, stop_servers (which fails on a non-zero exit)
# From deploy/lib/wait.sh: poll_until, wait_for_file, wait_for_line.
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
# shellcheck source=deploy/lib/wait.sh
source "$root/deploy/lib/wait.sh"
# shellcheck source=deploy/lib/servers.sh
source "$root/deploy/lib/servers.sh"
# shellcheck disable=SC2034  # for the tests that source this
server_bin="$root/server/ps_server"
# shellcheck disable=SC2034  # for the tests that source this
worker_bin="$root/worker/ps_worker"
dir="${TEST_TMPDIR}/$(basename "$0" .sh)"
rm -rf "$dir" && mkdir -p "$dir"

all_pids=()
server_pids=()
cleanup() { for p in "${all_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# Fails the test, with the last lines of every log of the run (what the
# processes said is most of what a failure in CI leaves to go on). Replaces
# deploy/lib/servers.sh's fail.
fail() {
  echo "FAIL: $*" >&2
  local f
  for f in "$dir"/*.log; do
    [ -f "$f" ] || continue
    echo "--- last lines of $(basename "$f"):" >&2
    tail -n 12 "$f" >&2
  done
  exit 1
}
