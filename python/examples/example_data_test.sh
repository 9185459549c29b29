#!/usr/bin/env bash
# The examples' server-free pieces (example_data_test.py, unittest): the IDX
# and LibSVM readers (fields and bags), sharding and batches.
set -euo pipefail
root="$TEST_SRCDIR/$TEST_WORKSPACE"
PYTHONPATH="$root/python" exec /usr/bin/python3 "$root/python/examples/example_data_test.py"
