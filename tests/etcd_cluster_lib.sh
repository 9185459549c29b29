# shellcheck shell=bash
# Shared by the multi-process tests of replicated clusters (sourced after
# cluster_lib.sh): a real etcd for the test (deploy/lib/etcd.sh), and the
# exact-sum client and ps_admin binaries.
#   start_test_etcd [HOST]  -> sets $etcd_endpoint; etcd is stopped on exit
#   ring CLUSTER            -> prints the cluster's ring (ps_admin ring)
#   wait_ring CLUSTER WHAT CONDITION
#                           -> polls the ring into $dir/ring.txt (at most 30 s)
#                              until the shell command CONDITION holds; fails naming WHAT
#   chains_of R             -> whether $dir/ring.txt has only chains of R servers
#                              and none joining
#   full_chains CLUSTER R   -> waits until the ring shows every chain at R
: "${root:?source tests/cluster_lib.sh first}" "${dir:?source tests/cluster_lib.sh first}"
# shellcheck source=deploy/lib/etcd.sh
source "$root/deploy/lib/etcd.sh"
# shellcheck disable=SC2034  # for the tests that source this
client_bin="$root/tests/exact_sum_client"
admin_bin="$root/tools/ps_admin"

start_test_etcd() {
  start_etcd "$dir" "${1:-127.0.0.1}" || fail "etcd did not start"
  all_pids+=("$etcd_pid")
  echo "etcd at $etcd_endpoint"
}

ring() { "$admin_bin" ring --etcd="$etcd_endpoint" --cluster="$1"; }

wait_ring() {
  local cluster=$1 what=$2 condition=$3 _
  for _ in $(seq 1 300); do
    ring "$cluster" >"$dir/ring.txt" 2>/dev/null && eval "$condition" && return 0
    sleep 0.1
  done
  cat "$dir/ring.txt" >&2
  fail "the ring never showed $what"
}

# ShardRing::Describe: "shard 0: 2 -> 0 -> 1; shard 1: ..." (a chain may end
# in "(+3 joining)" or "[from checkpoint at vN]").
chains_of() {
  grep -o 'shard [0-9]*: [^;(\[]*' "$dir/ring.txt" |
    awk -F' -> ' -v r="$1" '/LOST/ || NF != r { bad = 1 } END { exit bad || NR == 0 }' &&
    ! grep -q joining "$dir/ring.txt"
}
full_chains() { wait_ring "$1" "every chain at r=$2" "chains_of $2"; }
