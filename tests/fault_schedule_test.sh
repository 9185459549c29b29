#!/usr/bin/env bash
# A seeded, bounded fault schedule (a "nemesis") against replicated clusters
# on a real etcd: no acknowledged update may be lost, and none applied twice,
# under faults repeated at random.
#
# For each seed and each replica count r: FAULT_SERVERS ps_server processes
# at --replicas=r (lease 2 s) and 4 workers (exact_sum_client, 20000 keys)
# pushing +1 to every key for FAULT_SECONDS + 10 s. A push that fails after
# the client's own retries is an unknown outcome (applied on some shards,
# maybe), and the worker goes on. During the first FAULT_SECONDS (at most 200
# faults), with a pause of 0.3-2 s before each, one of these, drawn from
# RANDOM=seed*10+r:
#   kill_fast    a. SIGKILL a server, restart it 0.2-1 s later (within its lease)
#   kill_slow    b. SIGKILL a server, restart it 3 s later (past its lease)
#   stop_server  c. SIGSTOP a server for 3 s (past its lease), then SIGCONT
#   stop_etcd    d. SIGSTOP etcd for 1-5 s, then SIGCONT
#   drain        e. ps_admin drain a server; once the ring names it in no
#                   chain, SIGTERM it, restart it, and wait until it rejoins
#   partition_etcd  f. cut a server off from everything (etcd, the other
#                   servers, the workers) for 3-6 s: its veth down, then up
#   partition_pair  g. two servers A and B cannot reach each other, either
#                   way, for 3-6 s (a blackhole route to the other in each
#                   one's namespace), while both reach etcd and the workers;
#                   then healed, and the script waits until the ring heals
#   kill_middle_copy h. (drawn at r=3 only) SIGKILL a server, restart it 3 s
#                   later; as soon as the ring shows a server joining a chain
#                   (polled every 0.05 s, at most 10 s), SIGKILL that chain's
#                   second server, restart it 3 s later. Only chains of shards
#                   that hold keys count, when known: 20000 keys are five
#                   4096-key slices, so some shards hold none (their copy is
#                   empty); the script learns which from ps_admin status
#                   (forwards pending) at the seed's start
#   term_restart i. SIGTERM a server and start it again at once; on a seed
#                   whose table is tiered it keeps its copies on its
#                   --table_dir, the chains wait for it, and it rejoins them
#                   with those copies (what it kept and how many chains
#                   caught it up without a snapshot are in the fault's detail)
# Even seeds sum into a sparse tiered table (exact_sum_client --tiered, the
# servers with a --table_dir), odd seeds into a dense table in memory.
# Faults run one at a time, so at most one server is down (<= r-1), except in
# kill_middle_copy: its second kill comes while the first victim (running
# again, but with no copy) is still being copied into, so two servers lack a
# copy at once: r-1 only because it is drawn at r=3 only. The first victim is
# running again before the second kill (at most one process is down at a
# time), the ring was healed before the fault (every chain had 3 servers),
# and the middle server is the second of a chain with a first: every chain
# keeps a server with a complete copy.
# Before a server fault (every kind but d), the script waits (at most 30 s,
# polling `ps_admin ring` every 0.1 s) until the ring is healed: every chain
# has r servers and nobody joining, every server process is in the ring at
# the incarnation it registered last (a server restarted within its lease
# is still named in the ring under its old incarnation, and holds nothing),
# and every server is registered in etcd (etcdctl: after an etcd stall past
# the lease, the servers register again a little after etcd is back).
# So a loss is the system's, not the schedule's. etcd stalls (d) need no wait.
# Each fault is logged, with its start and end in seconds since the client's
# start (its --start_file), in $dir/faults<seed>r<r>.txt (a partition_pair
# ends at its heal; its wait for the ring is in its detail).
#
# The network: every server runs in a network namespace of its own
# (ps-fs-<pid>-<i>), joined by a veth pair to one Linux bridge in the host
# namespace; the bridge holds the host's address <net>.1 (etcd listens on it;
# the workers and ps_admin reach the servers through it) and server i listens
# on <net>.(10+i), <net> = 10.214.X (a /24 no route of the host names yet).
# No namespace has a default route: traffic stays on these addresses. Every
# namespace, veth and the bridge are deleted on exit. Needs root (ip netns).
#
# Asserted per seed and r: the ring heals before every server fault, after
# every partition_pair, and after the schedule, and never shows a LOST shard;
# the client exits 0 with lost=0 duplicated=0 (each key within [acknowledged,
# acknowledged + unknown] pushes); no server exits on its own; the longest
# stretch without an acknowledged push that began within a partition_pair is
# under 10 s (the chain must drop the unreachable successor and go on). A
# failed seed does not stop the others; the test fails at the end if any did.
#
# Reported: a line per seed and r, and a table per fault kind: how many ran,
# and the longest stretch without an acknowledged push (100 ms resolution,
# from the client's --timeline_file) that began within a fault of that kind
# (from 0.1 s before it began to 1 s after it ended: a fault's end, a restart
# or a resumed etcd, can start a failover too). Written to
# ${TEST_UNDECLARED_OUTPUTS_DIR:-$dir}/fault_schedule_summary.txt with the
# fault logs, timelines and each seed's process logs (logs<seed>r<r>/).
#
# Parameters (environment): FAULT_SEEDS (default 3: how many seeds),
# FAULT_FIRST_SEED (1: seeds run from it up, so a long run can be split),
# FAULT_SECONDS (30, each seed's fault phase), FAULT_REPLICAS ("2 3": each seed runs at each r),
# FAULT_SERVERS (4), FAULT_KINDS (default all nine: the kinds drawn from,
# e.g. "kill_slow stop_server drain"; an r at which none of them is drawn is
# skipped), FAULT_CHECKPOINT_SECONDS (2: the servers keep checkpoints in
# the seed's directory and the primary of shard 0 takes one this often,
# through the faults; 0: none). With checkpoints, a seed also asserts that
# at least one was taken, that `ps_ckpt verify` accepts the newest, and that
# no shard was rebuilt from one (that happens only when every copy of a
# shard is lost, which the schedule never causes).
set -euo pipefail
# shellcheck source=tests/cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"
# shellcheck source=tests/etcd_cluster_lib.sh
source "$(dirname "$0")/etcd_cluster_lib.sh"

seeds=${FAULT_SEEDS:-3}
checkpoint_seconds=${FAULT_CHECKPOINT_SECONDS:-2}
ckpt_bin="$root/tools/ps_ckpt"
first_seed=${FAULT_FIRST_SEED:-1}
fault_seconds=${FAULT_SECONDS:-30}
replica_counts=${FAULT_REPLICAS:-2 3}
num_servers=${FAULT_SERVERS:-4}
max_faults=200
heal_seconds=30
pair_gap_limit=10  # seconds: the longest gap a partition_pair may cause
top=$dir
outputs=${TEST_UNDECLARED_OUTPUTS_DIR:-$top}
kinds=(kill_fast kill_slow stop_server stop_etcd drain partition_etcd partition_pair
  kill_middle_copy term_restart)
read -r -a chosen_kinds <<<"${FAULT_KINDS:-${kinds[*]}}"
for kind in "${chosen_kinds[@]}"; do
  [[ " ${kinds[*]} " == *" $kind "* ]] || fail "FAULT_KINDS: unknown kind '$kind' (known: ${kinds[*]})"
done
((num_servers >= 2 && num_servers <= 100)) || fail "FAULT_SERVERS=$num_servers: want 2..100"

# --- the network: a namespace per server, veths on one bridge ----------------

[ "$(id -u)" = 0 ] || fail "this test puts each server in a network namespace: it must run as root"
command -v ip >/dev/null || fail "ip (iproute2) is not installed; run deploy/setup.sh"
bridge="psfb$$"
ns_names=()  # per server: its namespace,
ns_ips=()    # its address (it listens there),
host_ifs=()  # and its veth's host end (on the bridge)
for ((i = 0; i < num_servers; i++)); do
  ns_names[i]="ps-fs-$$-$i"
  host_ifs[i]="psf$$h$i"
done
# A /24 that no route or address of the host names (bounded: 200 tries).
x=$(($$ % 200 + 20))
for _ in $(seq 1 200); do
  ip -4 route show table all | grep -q "10\.214\.$x\." || break
  x=$(((x - 19) % 200 + 20))
done
ip -4 route show table all | grep -q "10\.214\.$x\." && fail "no free 10.214.X.0/24 subnet"
net="10.214.$x"
host_ip="$net.1"
for ((i = 0; i < num_servers; i++)); do ns_ips[i]="$net.$((10 + i))"; done

net_teardown() {  # deletes every namespace, veth and the bridge this test made
  local i
  for i in "${!ns_names[@]}"; do
    ip netns del "${ns_names[$i]}" 2>/dev/null || true
    ip link del "${host_ifs[$i]}" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  if ((forward_rule)); then iptables -D FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null || true; fi
}
# Every veth up and no blackhole route left: the network as set up.
net_heal_all() {
  local i route
  for i in "${!ns_names[@]}"; do
    ip link set "${host_ifs[$i]}" up 2>/dev/null || true
    while read -r -a route; do  # "blackhole 10.214.X.Y"
      ((${#route[@]} > 0)) || continue
      ip -n "${ns_names[$i]}" route del "${route[@]}" 2>/dev/null || true
    done < <(ip -n "${ns_names[$i]}" route show type blackhole 2>/dev/null | head -n 100)
  done
}
seed_pid=""  # the running seed's subshell
# On a signal: the seed's subshell is stopped first (its EXIT trap kills its
# processes), then this shell exits, and its EXIT trap tears the network down.
on_signal() {
  if [ -n "$seed_pid" ]; then
    kill -TERM "$seed_pid" 2>/dev/null || true
    wait "$seed_pid" 2>/dev/null || true
  fi
  exit 143
}
forward_rule=0  # an iptables rule of this test's, to delete at the end
trap 'cleanup; net_teardown' EXIT
trap on_signal TERM INT HUP

ip link add "$bridge" type bridge || fail "could not create bridge $bridge"
ip link set "$bridge" type bridge stp_state 0 forward_delay 0
ip addr add "$host_ip/24" dev "$bridge"
ip link set "$bridge" up
# Bridged traffic goes through iptables' FORWARD chain when br_netfilter is
# loaded, and a Docker engine (tests/compose_test.sh starts one) sets that
# chain's policy to DROP: the servers' namespaces would not reach each
# other. Traffic between this bridge's own ports is accepted, for the test's
# life (the rule is deleted with the bridge).
if command -v iptables >/dev/null && iptables -I FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null; then
  forward_rule=1
fi
for ((i = 0; i < num_servers; i++)); do
  ip netns add "${ns_names[$i]}" || fail "could not create network namespace ${ns_names[$i]}"
  ip link add "${host_ifs[$i]}" type veth peer name "psf$$n$i"
  ip link set "psf$$n$i" netns "${ns_names[$i]}"
  ip link set "${host_ifs[$i]}" master "$bridge"
  ip link set "${host_ifs[$i]}" up
  ip -n "${ns_names[$i]}" addr add "${ns_ips[$i]}/24" dev "psf$$n$i"
  ip -n "${ns_names[$i]}" link set "psf$$n$i" up
  ip -n "${ns_names[$i]}" link set lo up
done
echo "network: bridge $bridge at $host_ip; servers at ${ns_ips[*]} (namespaces ps-fs-$$-*)"
start_test_etcd "$host_ip"

# --- helpers of one seed's run (they use $dir, $cluster, $t0, $r) ----------

kinds_at() {  # R: the kinds of FAULT_KINDS drawn at r=R (kill_middle_copy at r=3 only)
  local kind
  for kind in "${chosen_kinds[@]}"; do
    [[ $kind == kill_middle_copy ]] && (($1 != 3)) && continue
    echo "$kind"
  done
}
draw() {  # VAR LO HI: VAR = an integer in [LO, HI] from the seeded $RANDOM
  printf -v "$1" '%d' $(($2 + RANDOM % ($3 - $2 + 1)))
}
secs() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }  # MS -> seconds
elapsed() {  # seconds since the client's start
  local now
  now=$(date +%s.%N)
  awk -v now="$now" -v t0="$t0" 'BEGIN { printf "%.2f", now - t0 }'
}
before() { awk -v e="$(elapsed)" -v limit="$1" 'BEGIN { exit !(e < limit) }'; }

seed_fail() {  # MESSAGE: records why the seed failed (and in which fault), then fails it
  local why="$*"
  if [ -n "$current" ]; then  # "KIND START" of the fault under way
    why="$why (during fault $((n + 1)): ${current% *} from ${current#* } s)"
    echo "$current $(elapsed) incomplete" >>"$faults"
  fi
  echo "$why" >"$dir/failure.txt"
  fail "$why"
}

read_ring() { timeout 5 "$admin_bin" ring --etcd="$etcd_endpoint" --cluster="$cluster"; }

# Whether $dir/ring.txt shows the ring healed: every chain has r servers and
# nobody joining, and every server process, having registered since its last
# start, is in the ring at the incarnation it registered last.
healed() {
  local line i in_ring logged live
  line=$(head -n 1 "$dir/ring.txt")
  [[ $line == "ring v"* && $line != *joining* ]] || return 1
  awk -v r="$r" '{
      sub(/^ring v[0-9]+ r=[0-9]+: /, "")
      n = split($0, chains, "; ")
      for (i = 1; i <= n; i++) {
        sub(/^shard [0-9]+: /, "", chains[i])
        if (split(chains[i], servers, " -> ") != r) exit 1
      }
    }' <<<"$line" || return 1
  for ((i = 0; i < num_servers; i++)); do
    [ "$(grep -c 'registered in etcd' "$dir/server$i.log")" -ge "${starts[$i]}" ] || return 1
    in_ring=$(sed -n "s/^  server $i at .* (incarnation \([0-9]*\))\$/\1/p" "$dir/ring.txt")
    logged=$(sed -n 's/.*registered in etcd.*incarnation \([0-9]*\)).*/\1/p' "$dir/server$i.log" |
      tail -n 1)
    [ -n "$in_ring" ] && [ "$in_ring" = "$logged" ] || return 1
  done
  # And every server registered in etcd now (after an etcd stall past the
  # lease, a server is in the ring but registers again a little later; an
  # operator's drain of it is refused until it has).
  live=$(ETCDCTL_API=3 timeout 5 etcdctl --endpoints="$etcd_endpoint" get --prefix --keys-only \
    "/paramserver/$cluster/members/" 2>/dev/null) || return 1
  for ((i = 0; i < num_servers; i++)); do
    grep -qx "/paramserver/$cluster/members/$i" <<<"$live" || return 1
  done
}

# WHY: polls the ring until healed (at most 30 s). Fails on a LOST shard, a
# server that exited on its own, or the time out, naming the faults run
# since the ring was last healed ($unhealed).
wait_healed() {
  local why=$1 i deadline=$((SECONDS + heal_seconds))
  while ((SECONDS < deadline)); do
    for i in "${!server_pids[@]}"; do
      kill -0 "${server_pids[$i]}" 2>/dev/null ||
        seed_fail "server $i exited on its own ($why; faults since the ring was healed:$unhealed)"
    done
    if read_ring >"$dir/ring.txt" 2>/dev/null; then
      if grep -q LOST "$dir/ring.txt"; then
        cat "$dir/ring.txt" >&2
        seed_fail "a shard is LOST ($why; faults since the ring was healed:$unhealed):" \
          "$(head -n 1 "$dir/ring.txt")"
      fi
      if healed; then
        unhealed=""
        return 0
      fi
    fi
    sleep 0.1
  done
  cat "$dir/ring.txt" >&2
  seed_fail "the ring did not heal within ${heal_seconds} s ($why; faults since the ring was" \
    "healed:$unhealed): $(head -n 1 "$dir/ring.txt")"
}

# N [ps_server flags]: starts servers 0..N-1, server i in its namespace on
# its address (port chosen by the kernel); like deploy/lib/servers.sh's
# start_servers.
start_ns_servers() {
  local n=$1 i
  shift
  server_pids=()
  server_flags=(--num_servers="$n" "$@")
  for ((i = 0; i < n; i++)); do
    rm -f "$dir/p$i"
    ip netns exec "${ns_names[$i]}" "$server_bin" --index="$i" --listen="${ns_ips[$i]}:0" \
      --port_file="$dir/p$i" "${server_flags[@]}" 2>"$dir/server$i.log" &
    server_pids[i]=$!  # ip netns exec execs the server: this is its pid
    all_pids+=($!)
  done
  for ((i = 0; i < n; i++)); do
    wait_for_file "$dir/p$i" 10 || seed_fail "server $i wrote no port file"
  done
  # Each server reaches the next one, and the host reaches each (bounded).
  # shellcheck disable=SC2016  # $1 and $2 are the inner bash's arguments
  for ((i = 0; i < n; i++)); do
    timeout 5 ip netns exec "${ns_names[$(((i + 1) % n))]}" \
      bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "${ns_ips[$i]}" "$(cat "$dir/p$i")" ||
      seed_fail "server $i at ${ns_ips[$i]} cannot be reached from ${ns_names[$(((i + 1) % n))]}"
    timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "${ns_ips[$i]}" "$(cat "$dir/p$i")" ||
      seed_fail "server $i at ${ns_ips[$i]} cannot be reached from the host"
  done
}

restart() {  # I: starts server I again in its namespace, on its address and port
  local i=$1
  ip netns exec "${ns_names[$i]}" "$server_bin" --index="$i" \
    --listen="${ns_ips[$i]}:$(cat "$dir/p$i")" "${server_flags[@]}" 2>>"$dir/server$i.log" &
  server_pids[i]=$!
  all_pids+=($!)
  starts[i]=$((starts[i] + 1))
}

down_count() {  # prints how many server processes are not running
  local i down=0
  for i in "${!server_pids[@]}"; do kill -0 "${server_pids[$i]}" 2>/dev/null || down=$((down + 1)); done
  echo "$down"
}

stop_exited() {  # I: waits (at most 10 s) for server I to exit after SIGTERM; fails if it does not
  local i=$1 _
  for _ in $(seq 1 100); do kill -0 "${server_pids[$i]}" 2>/dev/null || break; sleep 0.1; done
  kill -0 "${server_pids[$i]}" 2>/dev/null && seed_fail "server $i did not exit within 10 s of SIGTERM"
  wait "${server_pids[$i]}" || seed_fail "server $i exited non-zero after SIGTERM"
}

# The faults (kill_restart, stop_server, stop_etcd, partition_etcd,
# partition_pair, kill_middle_copy, drain_restart).
# shellcheck source=tests/fault_kinds_lib.sh
source "$(dirname "$0")/fault_kinds_lib.sh"

# One seed at one r, in a subshell of its own (its processes are killed when
# it exits; a failure ends the seed, not the test). Leaves in $dir:
# client.log (its RESULT line), timeline, failure.txt when it failed.
run_seed() {
  set -e
  local seed=$1 drawn kind victim other pause ms n=0 start end client result
  r=$2
  mapfile -t drawn_kinds < <(kinds_at "$r")
  unhealed=""
  current=""
  cluster="fs${seed}r${r}"
  dir="$top/$cluster"
  mkdir -p "$dir"
  all_pids=()
  trap 'kill -CONT "$etcd_pid" 2>/dev/null || true; cleanup; net_heal_all' EXIT
  trap 'exit 143' TERM INT HUP
  net_heal_all  # the network as set up, whatever a failed seed left
  faults="$top/faults${seed}r${r}.txt"
  echo "# kind start_s end_s detail (seconds since the client's start)" >"$faults"
  RANDOM=$((seed * 10 + r))

  local checkpoint_flags=()
  if [ "$checkpoint_seconds" != 0 ]; then
    mkdir -p "$dir/ckpt"
    checkpoint_flags=(--checkpoint_dir="$dir/ckpt" --checkpoint_every_seconds="$checkpoint_seconds")
  fi
  # Even seeds sum into a sparse tiered table (rows on disk under each
  # server's --table_dir; a clean stop keeps the copies there), odd seeds
  # into a dense one in memory.
  local table_flags=() client_flags=()
  if ((seed % 2 == 0)); then
    mkdir -p "$dir/tables"
    table_flags=(--table_dir="$dir/tables")
    client_flags=(--tiered)
  fi
  start_ns_servers "$num_servers" --etcd="$etcd_endpoint" --cluster="$cluster" --replicas="$r" \
    --lease_seconds=2 "${checkpoint_flags[@]}" "${table_flags[@]}"
  starts=()
  for ((i = 0; i < num_servers; i++)); do starts[i]=1; done
  "$client_bin" --etcd="$etcd_endpoint" --cluster="$cluster" --workers=4 --keys=20000 \
    "${client_flags[@]}" --seconds=$((fault_seconds + 10)) --tolerate_unknown --start_file="$dir/start" \
    --started_file="$dir/started" --progress_file="$dir/progress" \
    --timeline_file="$dir/timeline" >"$dir/client.log" 2>&1 &
  client=$!
  all_pids+=("$client")
  wait_for_file "$dir/started" 20 || seed_fail "the workers did not start"
  t0=$(cat "$dir/start")
  # The shards that hold keys (the 20000 keys fill only five 4096-key
  # slices: some shards hold none, and a copy of those is empty), for
  # kill_middle_copy: 5 samples of ps_admin status in the background (see
  # shards_with_keys).
  (
    for sample in 1 2 3 4 5; do
      timeout 15 "$admin_bin" status --etcd="$etcd_endpoint" --cluster="$cluster" \
        --timeout_seconds=10 >"$dir/status$sample.txt" 2>>"$dir/admin.log" || true
    done
  ) &
  all_pids+=($!)
  echo "# t0 (the client's start, Unix seconds; server logs are in UTC): $t0" >>"$faults"

  # The schedule: every draw is made for every fault, so the faults drawn
  # depend on the seed only (how many fit in the time depends on the machine).
  while ((n < max_faults)); do
    draw pause 300 2000
    draw drawn 0 $((${#drawn_kinds[@]} - 1))
    draw victim 0 $((num_servers - 1))
    draw other 1 $((num_servers - 1))  # partition_pair: the other server, victim + other
    draw ms 200 1000
    sleep "$(secs "$pause")"  # the schedule's pause between faults
    before "$fault_seconds" || break
    # A drain needs r other live servers; without them, kill past the lease.
    # etcd stalls need no healed ring.
    kind=${drawn_kinds[$drawn]}
    [[ $kind == drain ]] && ((num_servers - 1 < r)) && kind=kill_slow
    if [[ $kind != stop_etcd ]]; then
      wait_healed "before fault $((n + 1)) ($kind)"
      before "$fault_seconds" || break
    fi
    start=$(elapsed)
    current="$kind $start"
    fault_end=""  # set by a fault that ends before it returns (partition_pair)
    case $kind in
      kill_fast) kill_restart "$victim" "$ms" ;;
      kill_slow) kill_restart "$victim" 3000 ;;
      stop_server) stop_server "$victim" 3000 ;;
      stop_etcd) stop_etcd $((ms * 5)) ;;  # 1-5 s
      drain) drain_restart "$victim" ;;
      partition_etcd) partition_etcd "$victim" $((3000 + (ms - 200) * 15 / 4)) ;;  # 3-6 s
      partition_pair)
        partition_pair "$victim" $(((victim + other) % num_servers)) $((3000 + (ms - 200) * 15 / 4))
        ;;
      kill_middle_copy) kill_middle_copy "$victim" ;;
      term_restart) term_restart "$victim" ;;
    esac
    end=${fault_end:-$(elapsed)}
    current=""
    n=$((n + 1))
    echo "$kind $start $end $detail" >>"$faults"
    unhealed="$unhealed [$n $kind $start-$end s $detail]"
    echo "  $cluster fault $n: $kind $start-$end s $detail"
  done

  # The end of the schedule: nothing may stay stopped, cut off or down.
  kill -CONT "$etcd_pid" 2>/dev/null || true
  net_heal_all
  for i in "${!server_pids[@]}"; do
    kill -CONT "${server_pids[$i]}" 2>/dev/null || true
    kill -0 "${server_pids[$i]}" 2>/dev/null || seed_fail "server $i exited on its own"
  done
  # A LOST shard stays lost: the client could only fail its final read.
  if read_ring >"$dir/ring.txt" 2>/dev/null && grep -q LOST "$dir/ring.txt"; then
    seed_fail "a shard is LOST after the schedule (faults since the ring was healed:$unhealed):" \
      "$(head -n 1 "$dir/ring.txt")"
  fi
  # The client pushes until FAULT_SECONDS + 10 s, then reads (retrying for up
  # to 60 s); a push may take 40 tries of 2.5 s: a client alive past that hung.
  local deadline=$((SECONDS + fault_seconds + 10 + 60 + 120))
  while kill -0 "$client" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  kill -0 "$client" 2>/dev/null && seed_fail "the client did not finish (a hung push?)"
  local client_rc=0
  wait "$client" || client_rc=$?
  result=$(grep '^RESULT' "$dir/client.log" || true)
  echo "  $cluster: ${result:-no RESULT line}"
  grep '^exact_sum_client:' "$dir/client.log" | head -n 12 || true
  [ -n "$result" ] || seed_fail "the client failed (exit $client_rc): $(tail -n 1 "$dir/client.log")"
  [[ $result == *" lost=0 duplicated=0 "* ]] ||
    seed_fail "acknowledged updates lost or applied twice:" \
      "$(grep '^exact_sum_client: key' "$dir/client.log" || echo "$result")"
  ((client_rc == 0)) || seed_fail "the client exited $client_rc: $(tail -n 1 "$dir/client.log")"
  wait_healed "after the schedule"  # fails on a LOST shard too
  for i in "${!server_pids[@]}"; do kill -TERM "${server_pids[$i]}"; done
  for i in "${!server_pids[@]}"; do stop_exited "$i"; done
  if [ "$checkpoint_seconds" != 0 ]; then
    local taken
    taken=$(cat "$dir"/server*.log | grep -c '(on the timer): cut' || true)
    echo "  $cluster: $taken checkpoint(s) taken through the faults"
    ((taken > 0)) || seed_fail "no checkpoint was taken in ${fault_seconds} s of faults"
    "$ckpt_bin" verify "$dir/ckpt" >"$dir/verify.txt" 2>&1 ||
      seed_fail "ps_ckpt verify rejects the newest checkpoint: $(tail -n 3 "$dir/verify.txt")"
    ! grep -h 'every copy was lost' "$dir"/server*.log ||
      seed_fail "a shard was rebuilt from a checkpoint: every copy of it was lost"
  fi
}

# --- the seeds --------------------------------------------------------------

# GAPS: per fault of $1 (a fault log), its kind and the longest stretch of
# empty 100 ms buckets of $2 (a timeline) that began within it.
fault_gaps() {
  awk 'FNR == NR { if ($1 !~ /^#/) { n++; kind[n] = $1; from[n] = $2; to[n] = $3 }; next }
    { t[m] = $1; count[m] = $2; m++ }
    END {
      for (i = 0; i < m; i++) {
        if (count[i] != 0 || (i > 0 && count[i - 1] == 0)) continue
        for (j = i; j < m && count[j] == 0; j++) {}
        len = (j - i) * 0.1
        for (f = 1; f <= n; f++) {
          if (t[i] >= from[f] - 0.1 && t[i] <= to[f] + 1.0 && len > gap[f]) gap[f] = len
        }
      }
      for (f = 1; f <= n; f++) printf "%s %.1f\n", kind[f], gap[f]
    }' "$1" "$2"
}

summary=()
failed=0
for ((seed = first_seed; seed < first_seed + seeds; seed++)); do
  for r in $replica_counts; do
    ((r <= num_servers)) || fail "FAULT_REPLICAS has r=$r > FAULT_SERVERS=$num_servers"
    cluster="fs${seed}r${r}"
    if [ -z "$(kinds_at "$r")" ]; then
      echo "=== seed $seed, r=$r: skipped (no kind of FAULT_KINDS is drawn at r=$r)"
      continue
    fi
    echo "=== seed $seed, r=$r ($cluster): $num_servers servers, ${fault_seconds} s of faults"
    began=$SECONDS
    set +e
    # In the background, so that a signal to this shell is handled at once
    # (a foreground subshell would defer it until the seed's end).
    (run_seed "$seed" "$r") &
    seed_pid=$!
    wait "$seed_pid"
    rc=$?
    seed_pid=""
    set -e
    kill -CONT "$etcd_pid" 2>/dev/null || true
    faults="$top/faults${seed}r${r}.txt"
    timeline="$top/$cluster/timeline"
    cp "$faults" "$outputs/" 2>/dev/null || true
    [ -s "$timeline" ] && cp "$timeline" "$outputs/timeline${seed}r${r}.txt"
    mkdir -p "$outputs/logs${seed}r${r}"
    cp "$top/$cluster"/*.log "$outputs/logs${seed}r${r}/" 2>/dev/null || true
    : >"$top/gaps${seed}r${r}.txt"
    [ -s "$timeline" ] && fault_gaps "$faults" "$timeline" >"$top/gaps${seed}r${r}.txt"
    counts=$(awk '$1 !~ /^#/ { c[$1]++ } END { for (k in c) printf "%s=%d ", k, c[k] }' "$faults")
    result=$(sed -n 's/^RESULT //p' "$top/$cluster/client.log" 2>/dev/null |
      grep -o 'acked=[0-9]* unknown=[0-9]* lost=[0-9]* duplicated=[0-9]*' || true)
    # The longest stretch without an acknowledged push, and the last one.
    gap=""
    [ -s "$timeline" ] && gap=$(awk '$2 == 0 { run += 0.1; if (run > g) g = run } $2 > 0 { run = 0; last = $1 }
      END { printf "longest_gap_s=%.1f last_ack_s=%.1f", g, last + 0.1 }' "$timeline")
    # The longest gap per kind of fault, and the partition_pair bound.
    kind_gaps=$(awk '$2 > g[$1] || !($1 in g) { g[$1] = $2 }
      END { for (k in g) printf "%s=%.1f ", k, g[k] }' "$top/gaps${seed}r${r}.txt")
    pair_gap=$(awk '$1 == "partition_pair" && $2 > g { g = $2 } END { printf "%.1f", g }' \
      "$top/gaps${seed}r${r}.txt")
    pair_over=$(awk -v g="$pair_gap" -v limit="$pair_gap_limit" 'BEGIN { print (g >= limit) }')
    if grep -q '^partition_pair ' "$faults"; then
      echo "  $cluster: longest gap within a partition_pair: $pair_gap s (must be under ${pair_gap_limit} s)"
    fi
    if ((rc == 0 && pair_over == 0)); then
      verdict=PASS
    else
      verdict="FAIL:"
      ((rc == 0)) ||
        verdict="$verdict $(cat "$top/$cluster/failure.txt" 2>/dev/null || echo "see the log above")"
      if ((pair_over != 0)); then
        verdict="$verdict writes did not resume within ${pair_gap_limit} s of a partition_pair:"
        verdict="$verdict a gap of $pair_gap s (faults: $faults, timeline: $timeline)"
      fi
      failed=$((failed + 1))
    fi
    line="seed=$seed r=$r seconds=$((SECONDS - began)) faults: ${counts:-none}| ${result:-no result}"
    line="$line $gap | gap_s per kind: ${kind_gaps:-none}| $verdict"
    echo "$line"
    summary+=("$line")
  done
done

((${#summary[@]} > 0)) || fail "no seed ran: no kind of FAULT_KINDS is drawn at any r of FAULT_REPLICAS"
printf '%s\n' "${summary[@]}" >"$outputs/fault_schedule_summary.txt"
{
  echo
  printf '%-17s %6s %14s %s\n' "fault" "count" "longest_gap_s" "bound"
  for kind in "${kinds[@]}"; do
    count=$(awk -v k="$kind" '$1 == k { n++ } END { print n + 0 }' "$top"/faults*r*.txt)
    gap=$(awk -v k="$kind" '$1 == k && $2 > g { g = $2 } END { printf "%.1f", g }' "$top"/gaps*r*.txt)
    bound="-"
    if [[ $kind == partition_pair ]]; then
      bound="< ${pair_gap_limit} s: $(awk -v g="$gap" -v l="$pair_gap_limit" 'BEGIN { print g < l ? "ok" : "EXCEEDED" }')"
    fi
    printf '%-17s %6d %14s %s\n' "$kind" "$count" "$gap" "$bound"
  done
} | tee -a "$outputs/fault_schedule_summary.txt"
((failed == 0)) || fail "$failed of the seed runs failed (see the summary above)"
echo "PASS: no acknowledged update lost or applied twice under $seeds seed(s) of faults"
