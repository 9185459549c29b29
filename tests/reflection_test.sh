#!/usr/bin/env bash
# gRPC server reflection on a real ps_server started with --grpc_reflection:
# reflection_probe lists its services and reads the file that defines
# ps.proto.ParameterServer back through reflection, and the test checks that
# the data-path methods are described. (The services themselves are served
# through gRPC's generic API from the server's call queue, which reflection
# does not list: only its own service is.)
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tests/cluster_lib.sh"
probe="$root/tests/reflection_probe"

start_servers "$root" "$dir" 1 --grpc_reflection
"$probe" "$spec" ps.proto.ParameterServer >"$dir/probe.out" 2>"$dir/probe.log" ||
  fail "reflection_probe failed: $(cat "$dir/probe.log")"
cat "$dir/probe.out"
service=grpc.reflection.v1alpha.ServerReflection
grep -qx "service $service" "$dir/probe.out" || fail "service $service is not listed"
for method in CreateTable Push Pull PushPull Info Heartbeat; do
  grep -qx "method ps.proto.ParameterServer.$method" "$dir/probe.out" ||
    fail "method ParameterServer.$method is not described"
done
# A symbol the server does not have gets reflection's error, not a crash.
if "$probe" "$spec" ps.proto.NoSuchService >/dev/null 2>"$dir/probe_missing.log"; then
  fail "an unknown symbol was described"
fi
grep -q "NoSuchService" "$dir/probe_missing.log" || fail "the error does not name the symbol"
stop_servers
echo "PASS: reflection lists $(grep -c '^service ' "$dir/probe.out") services and describes ParameterServer"
