# shellcheck shell=bash
# The nine faults of tests/fault_schedule_test.sh (sourced by it, after its
# helpers: it defines restart, seed_fail, elapsed and the ring helpers these
# use, and the variables declared below). Each fault sets $detail; the caller
# logs its kind, start and end.

# The state of fault_schedule_test.sh these read (assigned there, cluster
# and dir anew for each seed); declared here, values untouched.
declare -g dir cluster admin_bin etcd_endpoint etcd_pid heal_seconds
declare -ga server_pids ns_names ns_ips host_ifs
kill_restart() {  # I DOWN_MS
  kill -KILL "${server_pids[$1]}"
  wait "${server_pids[$1]}" 2>/dev/null || true
  sleep "$(secs "$2")"  # the fault's length
  restart "$1"
  detail="server=$1 down_s=$(secs "$2")"
}
stop_server() {  # I MS
  kill -STOP "${server_pids[$1]}"
  sleep "$(secs "$2")"  # the fault's length
  kill -CONT "${server_pids[$1]}"
  detail="server=$1 stopped_s=$(secs "$2")"
}
stop_etcd() {  # MS
  kill -STOP "$etcd_pid"
  sleep "$(secs "$1")"  # the fault's length
  kill -CONT "$etcd_pid"
  detail="etcd_stopped_s=$(secs "$1")"
}
partition_etcd() {  # I MS: server I cut off from everything (its veth down), then healed
  local i=$1 fenced_before fenced
  fenced_before=$(grep -c "fenced: the etcd lease" "$dir/server$i.log" || true)
  ip link set "${host_ifs[$i]}" down
  sleep "$(secs "$2")"  # the fault's length
  ip link set "${host_ifs[$i]}" up
  fenced=$(($(grep -c "fenced: the etcd lease" "$dir/server$i.log" || true) - fenced_before))
  detail="server=$i cut_s=$(secs "$2") fenced=$fenced"
}
# A B: the chains of $dir/ring.txt in which A and B are next to each other
# ("S,S,..."; "none"): where a partition between them stops replication.
adjacent_in() {
  head -n 1 "$dir/ring.txt" | awk -v a="$1" -v b="$2" '{
      sub(/^ring v[0-9]+ r=[0-9]+: /, "")
      n = split($0, chains, "; ")
      for (i = 1; i <= n; i++) {
        split(chains[i], parts, ": ")
        shard = parts[1]; sub(/^shard /, "", shard)
        rest = parts[2]; sub(/ \(\+.*$/, "", rest)
        m = split(rest, servers, " -> ")
        for (j = 1; j < m; j++) {
          if ((servers[j] == a && servers[j + 1] == b) || (servers[j] == b && servers[j + 1] == a)) {
            out = out (out == "" ? "" : ",") shard
            break
          }
        }
      }
      print out == "" ? "none" : out
    }'
}
partition_pair() {  # A B MS: A and B cannot reach each other (both reach the rest), then healed
  local a=$1 b=$2 reports_before reports healed_at adjacent
  adjacent=$(adjacent_in "$a" "$b")  # $dir/ring.txt: the ring healed before the fault
  reports_before=$(cat "$dir/server$a.log" "$dir/server$b.log" | grep -c "reported server .* stuck" || true)
  ip -n "${ns_names[$a]}" route add blackhole "${ns_ips[$b]}/32"
  ip -n "${ns_names[$b]}" route add blackhole "${ns_ips[$a]}/32"
  sleep "$(secs "$3")"  # the fault's length
  ip -n "${ns_names[$a]}" route del blackhole "${ns_ips[$b]}/32"
  ip -n "${ns_names[$b]}" route del blackhole "${ns_ips[$a]}/32"
  fault_end=$(elapsed)
  reports=$(($(cat "$dir/server$a.log" "$dir/server$b.log" | grep -c "reported server .* stuck" ||
    true) - reports_before))
  wait_healed "after the partition of servers $a and $b"
  healed_at=$(elapsed)
  detail="servers=$a,$b cut_s=$(secs "$3") adjacent_in_shards=$adjacent stuck_reports=$reports"
  detail="$detail ring_healed_s=$(awk -v a="$fault_end" -v b="$healed_at" 'BEGIN { printf "%.2f", b - a }')"
}
# The shards that hold keys, as far as run_seed's samples of ps_admin status
# show so far: those whose primary had forwards pending ("repl lag" > 0).
# Empty if none was seen.
shards_with_keys() {
  cat "$dir"/status[1-5].txt 2>/dev/null |
    awk '/^[0-9]+ +server [0-9]+ \(/ && $NF > 0 { print $1 }' | sort -n -u | tr '\n' ' ' | sed 's/ $//'
}
# The first chain of $dir/ring.txt with a server joining, at least two
# servers, and a shard of $keyed_shards (any shard when that is empty): prints
# "SHARD SECOND JOINING" (nothing if there is none).
joining_chain() {
  head -n 1 "$dir/ring.txt" | awk -v data=" $keyed_shards " '{
      sub(/^ring v[0-9]+ r=[0-9]+: /, "")
      n = split($0, chains, "; ")
      for (i = 1; i <= n; i++) {
        if (chains[i] !~ /joining\)$/) continue
        split(chains[i], parts, ": ")
        shard = parts[1]; sub(/^shard /, "", shard)
        if (data != "  " && index(data, " " shard " ") == 0) continue
        rest = parts[2]
        joining = rest; sub(/^.*\(\+/, "", joining); sub(/ joining\)$/, "", joining)
        sub(/ \(\+.*$/, "", rest)
        if (split(rest, servers, " -> ") < 2) continue
        print shard, servers[2], joining
        exit
      }
    }'
}
kill_middle_copy() {  # I: kill_slow of I, then a kill of the middle of a chain being copied into
  local v=$1 found="" shard middle joining seen_at deadline keyed_shards keyed _
  kill_restart "$v" 3000
  keyed_shards=$(shards_with_keys)
  keyed=${keyed_shards// /,}
  deadline=$((SECONDS + 10))
  for _ in $(seq 1 200); do  # every 0.05 s, at most 10 s
    ((SECONDS <= deadline)) || break
    if read_ring >"$dir/ring.txt" 2>/dev/null; then
      found=$(joining_chain)
      [ -n "$found" ] && break
    fi
    sleep 0.05
  done
  if [ -z "$found" ]; then
    detail="$detail middle=none shards_with_keys=${keyed:-any} (no chain of these seen"
    detail="$detail with a server joining within 10 s)"
    return 0
  fi
  seen_at=$(elapsed)
  read -r shard middle joining <<<"$found"
  # At most one process down at a time: the first victim runs again.
  (($(down_count) == 0)) || seed_fail "a server is down before the second kill of kill_middle_copy"
  kill -KILL "${server_pids[$middle]}"
  wait "${server_pids[$middle]}" 2>/dev/null || true
  sleep 3  # past its lease
  restart "$middle"
  detail="$detail middle=$middle shard=$shard joining=$joining seen_at_s=$seen_at"
  detail="$detail shards_with_keys=${keyed:-any}"
}
drain_restart() {  # I
  local i=$1 began drained refused=0
  began=$(elapsed)
  if ! timeout $((heal_seconds + 10)) "$admin_bin" drain --etcd="$etcd_endpoint" \
    --cluster="$cluster" --server_id="$i" --timeout_seconds="$heal_seconds" >>"$dir/admin.log" 2>&1; then
    # A drain the cluster cannot do (no other live server may take a copy:
    # at r=3 on 4 servers, one that a stuck report excludes for a while) is
    # refused with that reason: correct, and then the server is stopped
    # and restarted all the same (one server down, as for the other kinds).
    tail -n 1 "$dir/admin.log" | grep -q "no other live server can take them" ||
      seed_fail "ps_admin drain --server_id=$i failed: $(tail -n 1 "$dir/admin.log")"
    refused=1
  fi
  drained=$(elapsed)
  local deadline=$((SECONDS + heal_seconds))
  until ((refused)) || { read_ring >"$dir/ring.txt" 2>/dev/null && ! grep -q "^  server $i " "$dir/ring.txt"; }; do
    ((SECONDS < deadline)) || seed_fail "server $i is still in the ring after its drain"
    sleep 0.1
  done
  kill -TERM "${server_pids[$i]}"
  stop_exited "$i"
  restart "$i"
  wait_healed "server $i rejoining after its drain"
  detail="server=$i drain_s=$(awk -v a="$began" -v b="$drained" 'BEGIN { printf "%.2f", b - a }') refused=$refused"
}
term_restart() {  # I: SIGTERM, started again at once on its --table_dir
  local i=$1 from=() k kept offered caught
  for k in "${!server_pids[@]}"; do from[k]=$(($(wc -l <"$dir/server$k.log") + 1)); done
  kill -TERM "${server_pids[$i]}"
  stop_exited "$i"
  restart "$i"
  wait_healed "server $i rejoining after SIGTERM"
  # What it kept (shards whose tables are all tiered) and how it came back.
  kept=$(tail -n "+${from[$i]}" "$dir/server$i.log" | grep -c "for the next process") || true
  offered=$(tail -n "+${from[$i]}" "$dir/server$i.log" | grep -c "joining with the kept copy") || true
  caught=0
  for k in "${!server_pids[@]}"; do
    ((k == i)) && continue
    caught=$((caught + $(tail -n "+${from[$k]}" "$dir/server$k.log" |
      grep -c "server $i holds a copy at .*(no snapshot)" || true)))
  done
  detail="server=$i kept=$kept joined_with_kept=$offered caught_up_without_snapshot=$caught"
}
