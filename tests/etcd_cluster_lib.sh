# Shared by the multi-process tests of replicated clusters (sourced after
# cluster_lib.sh): a real etcd for the test, and the exact-sum client and
# ps_admin binaries.
#   start_test_etcd [HOST]  -> sets $etcd_endpoint; etcd is stopped on exit
source "$root/deploy/lib/etcd.sh"
client_bin="$root/tests/exact_sum_client"
admin_bin="$root/server/ps_admin"

start_test_etcd() {
  start_etcd "$dir" "${1:-127.0.0.1}" || fail "etcd did not start"
  all_pids+=("$etcd_pid")
  echo "etcd at $etcd_endpoint"
}
