#!/usr/bin/env bash
# Checkpoints with real ps_server processes and real signals:
#  1. train, ps_admin checkpoint, SIGKILL every server; restore into 2 and
#     into 3 servers: the same parameters bit for bit (ps_ckpt export of a
#     checkpoint of the restored cluster), the same clocks, the same accuracy;
#  2. SIGTERM: server 0 takes a last checkpoint, the others ask it to;
#     restored, workers with --resume continue at epoch 2, at their clock;
#  3. SIGKILL at random moments while server 0 checkpoints continuously,
#     with several seeds: the newest complete checkpoint always verifies
#     and is the one restored.
set -euo pipefail

# shellcheck source=tests/cluster_lib.sh
source "$(dirname "$0")/cluster_lib.sh"
admin_bin="$root/tools/ps_admin"
ckpt_bin="$root/tools/ps_ckpt"
ck="$dir/ck"
model_flags=(--model=mlp "--hidden=512,256" --max_train_examples=2000 --batch_size=32)

# Servers that find each other through $dir/spec (written once their ports
# are known), checkpointing into $ck.
start_ckpt_servers() {
  local n=$1
  shift
  rm -f "$dir/spec"
  start_servers "$root" "$dir" "$n" --checkpoint_dir="$ck" --servers_file="$dir/spec" "$@"
  echo "$spec" > "$dir/spec"
}
kill_servers() {
  local p
  for p in "${server_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${server_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  server_pids=()
}
train() {  # train EPOCHS [worker flags]: two workers, to the end
  local epochs=$1 w
  shift
  for w in 0 1; do
    "$worker_bin" --servers="$spec" --worker_index=$w --num_workers=2 "${model_flags[@]}" \
      --epochs="$epochs" "$@" >"$dir/worker$w.log" 2>&1 &
    worker_pids[$w]=$!
  done
  for w in 0 1; do
    wait "${worker_pids[$w]}" || { cat "$dir/worker$w.log"; fail "worker $w failed"; }
  done
}
accuracy() {
  "$worker_bin" --servers="$spec" "${model_flags[@]}" --eval_only >"$dir/eval.log" 2>&1 ||
    { cat "$dir/eval.log"; fail "evaluation failed"; }
  sed -n 's/^RESULT test_accuracy=//p' "$dir/eval.log"
}
clocks() { "$ckpt_bin" inspect "$1" | grep "clock: table" | sort; }

echo "== 1. round trip after SIGKILL, onto 2 and 3 servers"
start_ckpt_servers 2 --checkpoint_on_exit=false
train 1
out=$("$admin_bin" checkpoint --servers="$spec") || fail "ps_admin checkpoint: $out"
echo "$out"
path=$(sed -n 's/^checkpoint \([^:]*\):.*/\1/p' <<<"$out")
[ -f "$path/MANIFEST" ] || fail "no MANIFEST in '$path'"
acc=$(accuracy)
echo "accuracy before the kill: $acc"
kill_servers
"$ckpt_bin" export "$path" "$dir/export0" >/dev/null
clocks "$path" > "$dir/clocks0"
grep -q "worker 1 at 32" "$dir/clocks0" || { cat "$dir/clocks0"; fail "worker 1's clock is not 32"; }
for n in 2 3; do
  start_ckpt_servers "$n" --restore --checkpoint_on_exit=false
  grep -q "restored $path" "$dir/server0.log" || { cat "$dir/server0.log"; fail "$n servers: not restored"; }
  [ "$(accuracy)" = "$acc" ] || fail "$n servers: accuracy $(accuracy), expected $acc"
  out=$("$admin_bin" checkpoint --servers="$spec" --checkpoint_dir="$dir/again$n") ||
    fail "checkpoint of the restored cluster: $out"
  again=$(sed -n 's/^checkpoint \([^:]*\):.*/\1/p' <<<"$out")
  "$ckpt_bin" export "$again" "$dir/export$n" >/dev/null
  for f in $(cd "$dir/export0" && find . -name '*.npy'); do
    cmp -s "$dir/export0/$f" "$dir/export$n/$f" || fail "$n servers: $f differs after the restore"
  done
  clocks "$again" | diff "$dir/clocks0" - || fail "$n servers: clocks differ"
  echo "$n servers: parameters, clocks and accuracy ($acc) as checkpointed"
  kill_servers
done

echo "== 2. SIGTERM takes a last checkpoint; --resume continues at epoch 2"
rm -rf "$ck"
start_ckpt_servers 2
train 1
stop_servers
grep -q "(at shutdown)" "$dir/server0.log" || { cat "$dir/server0.log"; fail "no last checkpoint"; }
grep -q "last checkpoint (taken by server 0)" "$dir/server1.log" ||
  { cat "$dir/server1.log"; fail "server 1 did not ask for the last checkpoint"; }
start_ckpt_servers 2 --restore --checkpoint_on_exit=false
train 2 --resume
for w in 0 1; do
  # 1000 examples a worker, 32 a step: epoch 1 is 32 steps (rounds).
  grep -q "worker $w/2 resumed at epoch 2 step 33 (clock 32)" "$dir/worker$w.log" ||
    { cat "$dir/worker$w.log"; fail "worker $w did not resume at epoch 2, step 33"; }
done
echo "resumed at epoch 2, step 33; accuracy after 2 epochs: $(accuracy)"
kill_servers

echo "== 3. SIGKILL while checkpointing, several seeds"
for seed in 1 2 3 4; do
  RANDOM=$seed
  start_ckpt_servers 2 --restore --checkpoint_on_exit=false --checkpoint_every_seconds=0.02
  # The kill lands anywhere in the checkpoints being written.
  sleep "0.$((RANDOM % 6 + 2))$((RANDOM % 10))"
  kill_servers
  newest=$(cd "$ck" && for d in ckpt-*; do if [ -f "$d/MANIFEST" ]; then echo "$d"; fi; done | tail -1)
  "$ckpt_bin" verify "$ck/$newest" >/dev/null || fail "seed $seed: $newest does not verify"
  start_ckpt_servers 2 --restore --checkpoint_on_exit=false
  grep -q "restored $ck/$newest " "$dir/server0.log" ||
    { cat "$dir/server0.log"; fail "seed $seed: $newest was not the one restored"; }
  torn=$(cd "$ck" && for d in ckpt-*; do if [ ! -f "$d/MANIFEST" ]; then echo "$d"; fi; done)
  echo "seed $seed: killed; incomplete: ${torn:-none} (files: $(ls "$ck/${torn:-$newest}" | wc -l)); $newest verifies and is restored"
  kill_servers
done
echo PASS
