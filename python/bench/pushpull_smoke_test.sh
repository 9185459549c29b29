#!/usr/bin/env bash
# Keeps the benchmark's two sides working: cpp_pushpull and py_pushpull.py each
# run a short loop against 2 real servers on the same table and print a
# RESULT line with at least one push+pull; they agree on the table's
# definition (the second creation of it is a no-op, not ALREADY_EXISTS).
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/cluster_lib.sh"

start_servers "$root" "$dir" 2
flags=(--servers="$spec" --values=65536 --seconds=0.3 --warmup_seconds=0.05)
timeout 60 "$root/python/bench/cpp_pushpull" "${flags[@]}" >"$dir/cpp.log" 2>&1 ||
  fail "cpp_pushpull failed"
PYTHONPATH="$root/python" timeout 60 /usr/bin/python3 "$root/python/bench/py_pushpull.py" \
  "${flags[@]}" >"$dir/python.log" 2>&1 || fail "py_pushpull.py failed"
for side in cpp python; do
  grep -qE "^RESULT client=$side values=65536 ops=[1-9][0-9]* .*ops_per_s=[0-9.]+ gbytes_per_s=" \
    "$dir/$side.log" || fail "$side printed no RESULT line with at least one op"
  grep "^RESULT" "$dir/$side.log"
done
stop_servers
echo "PASS"
