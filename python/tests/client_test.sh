#!/usr/bin/env bash
# The module's tests (client_test.py) against real ps_server processes: a
# 2-server cluster; a 1-server cluster the test kills; a 1-server cluster
# that takes checkpoints.
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/cluster_lib.sh"

# Each server keeps writing to its log once it is renamed.
start_servers "$root" "$dir" 1
victim_spec=$spec
victim_pid=${server_pids[0]}
mv "$dir/server0.log" "$dir/victim.log"
start_servers "$root" "$dir" 1 --checkpoint_dir="$dir/checkpoints"
checkpointed_spec=$spec
mv "$dir/server0.log" "$dir/checkpointed.log"
start_servers "$root" "$dir" 2

PS_SERVERS="$spec" PS_VICTIM="$victim_spec" PS_VICTIM_PID="$victim_pid" \
  PS_CHECKPOINTED="$checkpointed_spec" PS_CHECKPOINT_DIR="$dir/checkpoints" \
  PYTHONPATH="$root/python" /usr/bin/python3 "$root/python/tests/client_test.py" ||
  fail "client_test.py failed"
