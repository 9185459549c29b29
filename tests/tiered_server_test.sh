#!/usr/bin/env bash
# Tiered tables through ps_server processes, their --table_dir on a tmpfs in
# a private mount namespace (root). tier_client pushes +1 to each of
# 100,000 keys a round (most rows on disk: a 1 MiB cache a server) and
# checks that every value is the count of rounds acknowledged.
#  1. SIGTERM, then servers started again on the same --table_dir: the
#     rows are served from disk, no checkpoint restored; training goes on.
#  2. SIGKILL, then started again: the table is refused, saying the
#     earlier run did not stop cleanly.
#  3. A full disk: a push is refused with an error naming the table and
#     the disk; every acknowledged push is in the values (the refused round
#     at most partly), reads keep working, and pushes are taken again once
#     there is room.
#  4. A checkpoint (ps_admin checkpoint; the rows on disk in a snapshot of
#     each server's store), a push after it, SIGKILL: restored onto 3
#     servers, every value is the checkpoint's; ps_ckpt export writes the
#     table's 100,000 rows.
set -euo pipefail
[ "$(id -u)" -eq 0 ] || { echo "FAIL: needs root (a tmpfs in a private mount namespace)" >&2; exit 1; }
if [ -z "${TIERED_SERVER_TEST_NS:-}" ]; then
  exec unshare -m env TIERED_SERVER_TEST_NS=1 bash "$0" "$@"
fi

# shellcheck source=tests/cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"
client="$root/tests/tier_client"
tables="$dir/tables"
mkdir -p "$tables"
mount -t tmpfs -o size=32m tmpfs "$tables"

kill_servers() {
  local p
  for p in "${server_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${server_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  server_pids=()
}
push() {  # push ROUNDS [flags]: prints the rounds acknowledged
  local rounds=$1
  shift
  "$client" --servers="$spec" --mode=push --rounds="$rounds" "$@" >"$dir/push.out" 2>"$dir/push.err" ||
    fail "tier_client push failed: $(cat "$dir/push.err")"
  sed -n 's/^ACKED //p' "$dir/push.out"
}
check() {  # check LO [HI]: every value in [LO, HI]
  "$client" --servers="$spec" --mode=check --expect="$1" --expect_max="${2:-$1}" \
    >"$dir/check.out" 2>"$dir/check.err" ||
    fail "values are not in [$1, ${2:-$1}]: $(cat "$dir/check.err")"
}

# 1. A clean stop and a start on the same directory.
start_servers "$root" "$dir" 2 --table_dir="$tables"
[ "$(push 3)" = 3 ] || fail "3 rounds were not acknowledged"
check 3
stop_servers
start_servers "$root" "$dir" 2 --table_dir="$tables"
check 3
for i in 0 1; do
  grep -q "written by an earlier run" "$dir/server$i.log" ||
    fail "server $i did not say it serves its rows from disk"
done
[ "$(push 2)" = 2 ] || fail "2 more rounds were not acknowledged"
check 5
echo "PASS: restarted on its table directory, every value 5"

# 2. A crash: the directory is refused, saying why.
kill_servers
start_servers "$root" "$dir" 2 --table_dir="$tables"
if "$client" --servers="$spec" --mode=check --expect=5 >"$dir/check.out" 2>"$dir/check.err"; then
  fail "a directory left by a killed server was served"
fi
grep -q "did not stop cleanly" "$dir/check.err" ||
  fail "the refusal does not say why: $(cat "$dir/check.err")"
echo "PASS: after SIGKILL: $(head -c 300 "$dir/check.err")"
kill_servers
rm -rf "${tables:?}"/*

# 3. A full disk.
start_servers "$root" "$dir" 2 --table_dir="$tables"
[ "$(push 2)" = 2 ] || fail "2 rounds were not acknowledged"
dd if=/dev/zero of="$tables/filler" bs=64k status=none 2>/dev/null || true
acked=$(push 50 --until_refused)
grep -q "^REFUSED" "$dir/push.out" || fail "50 rounds on a full disk, none refused"
refusal=$(sed -n 's/^REFUSED //p' "$dir/push.out")
case "$refusal" in
  *ctr/emb*"$tables"*"No space left on device"*) ;;
  *) fail "the refusal does not name the table, the directory and the error: $refusal" ;;
esac
check $((2 + acked)) $((3 + acked))
echo "PASS: full disk after $acked more rounds: $refusal; reads go on"
rm -f "$tables/filler"
[ "$(push 1)" = 1 ] || fail "no push taken once the disk had room again"
check $((3 + acked)) $((4 + acked))
stop_servers
echo "PASS: pushes taken again once the disk had room"

# 4. A checkpoint, restored onto another number of servers.
rm -rf "${tables:?}"/*
ck="$dir/ck"
start_ckpt_servers() {  # start_ckpt_servers N TABLE_DIR [flags]
  local n=$1 table_dir=$2
  shift 2
  rm -f "$dir/spec"
  start_servers "$root" "$dir" "$n" --table_dir="$table_dir" --checkpoint_dir="$ck" \
    --servers_file="$dir/spec" --checkpoint_on_exit=false "$@"
  echo "$spec" >"$dir/spec"
}
start_ckpt_servers 2 "$tables/taken"
[ "$(push 3)" = 3 ] || fail "3 rounds were not acknowledged"
out=$("$root/tools/ps_admin" checkpoint --servers="$spec") || fail "ps_admin checkpoint: $out"
path=$(sed -n 's/^checkpoint \([^:]*\):.*/\1/p' <<<"$out")
[ -f "$path/MANIFEST" ] || fail "no MANIFEST in '$path' ($out)"
[ "$(push 1)" = 1 ] || fail "the round after the checkpoint was not acknowledged"
kill_servers
"$root/tools/ps_ckpt" export "$path" "$dir/export" >"$dir/export.out" 2>&1 ||
  fail "ps_ckpt export: $(cat "$dir/export.out")"
grep -q "100000" "$dir/export.out" || fail "the export does not hold 100000 rows: $(cat "$dir/export.out")"
# The rows on disk are in a snapshot of each server's store (copied: the
# checkpoint is on another file system), the cache's rows in records.
snapshots=$("$root/tools/ps_ckpt" inspect "$path" | grep -c "row store snapshot server-") || true
[ "$snapshots" = 2 ] || fail "the checkpoint holds $snapshots row store snapshots, not 2"
start_ckpt_servers 3 "$tables/restored" --restore
grep -q "restored $path" "$dir/server0.log" || fail "3 servers: the checkpoint was not restored"
check 3
echo "PASS: a checkpoint restored onto 3 servers, every value 3; exported: $(head -c 200 "$dir/export.out")"
stop_servers
