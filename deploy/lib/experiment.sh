# shellcheck shell=bash
# Sourced by deploy/*_experiment.sh from the repository's root, once their
# arguments are read. Sources servers.sh.
#
#   experiment_setup NAME OUT
#     installs what the runs need (setup.sh --bench), builds ps_server and
#     ps_worker, sets `bin` to bazel-bin, creates OUT and `work` (a
#     temporary directory ps_NAME.XXXXXX, removed at exit after every
#     process started through servers.sh is stopped).
#   log MESSAGE
#     prints "<script>: MESSAGE" to stderr.

# shellcheck source=deploy/lib/servers.sh
source "$(dirname "${BASH_SOURCE[0]}")/servers.sh"

log() { echo "$(basename "$0"): $*" >&2; }

experiment_setup() {
  local name=$1 out_dir=$2
  deploy/setup.sh --bench
  bazel build --ui_event_filters=-info --noshow_progress //server:ps_server //worker:ps_worker
  # shellcheck disable=SC2034  # bin and work are the sourcing script's
  bin="$(bazel info bazel-bin 2>/dev/null)"
  mkdir -p "$out_dir"
  work="$(mktemp -d "${TMPDIR:-/tmp}/ps_$name.XXXXXX")"
  stop_on_exit "$work"
}
