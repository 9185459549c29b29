#!/usr/bin/env bash
# Checkpoint costs on this machine, each next to a limit measured in the same
# run (dd writing and fsyncing a file of the checkpoint's size, in the same
# directory):
#   1. checkpoint time and size against model size: 2 ps_server processes
#      hold one dense AdaGrad table of N floats (filled by ps_bench), ps_admin
#      takes full checkpoints (3 each); then an incremental one after a
#      small model (softmax regression, 7,850 floats) trained one epoch on
#      2,000 examples; then both servers are killed and restarted with
#      --restore (restore time from their logs);
#   2. training throughput with a checkpoint every 10 s (and every 2 s)
#      against none: deploy/local_cluster.sh runs of the MLP with wider
#      hidden layers (a 10 MiB model with its AdaGrad state), alternated.
# Writes a Markdown report and a PNG plot.
#
#   deploy/checkpoint_experiment.sh [--out DIR] [--sizes "1 4 16 64"] [--rounds N]
set -euo pipefail

out="docs/experiments/results"
sizes="1 4 16 64"  # millions of floats
rounds=2
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "checkpoint_experiment.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/.."
source deploy/lib/servers.sh
deploy/setup.sh
bazel build --ui_event_filters=-info --noshow_progress //server:ps_server //tools:ps_admin \
  //worker:ps_worker //deploy/bench:ps_bench
bin="$(bazel info bazel-bin 2>/dev/null)"
mkdir -p "$out"
work="$(mktemp -d "${TMPDIR:-/tmp}/ps_ckpt_exp.XXXXXX")"
stop_on_exit "$work"
raw="$out/checkpoint_raw.txt"
: > "$raw"

# The disk's limit for a file of MiB mebibytes: dd writes and fsyncs it
# where the checkpoints go (median of 3).
disk_mibps() {
  local mib=$1 r
  for r in 1 2 3; do
    dd if=/dev/zero of="$work/dd" bs=1M count="$mib" conv=fsync 2>&1 |
      awk -v m="$mib" '/copied/ { for (i = 1; i <= NF; i++) if ($i == "s,") print m / $(i - 1) }'
    rm -f "$work/dd"
  done | sort -g | sed -n 2p
}

admin() { "$bin/tools/ps_admin" checkpoint --servers="$spec" "$@"; }
# From "checkpoint P: sequence S, cut C, full, X MiB in Y s": X and Y.
size_time() { sed -n 's/.*, \([0-9.]*\) MiB in \([0-9.]*\) s$/\1 \2/p'; }

echo "== 1. checkpoint and restore against model size" | tee -a "$raw"
for m in $sizes; do
  n=$((m * 1048576))
  ck="$work/ck$m"
  rm -f "$work/spec"
  start_servers "$bin" "$work" 2 --checkpoint_dir="$ck" --servers_file="$work/spec" \
    --checkpoint_on_exit=false
  echo "$spec" > "$work/spec"
  "$bin/deploy/bench/ps_bench" --servers="$spec" --dense_values="$n" --ops=push \
    --small_inflight=0 --sparse_keys=0 --seconds=0.2 --warmup_seconds=0.1 >/dev/null
  for r in 1 2 3; do
    read -r mib secs < <(admin --full | size_time)
    echo "FULL floats=$n mib=$mib seconds=$secs" | tee -a "$raw"
  done
  echo "DISK floats=$n mib=$mib mibps=$(disk_mibps "${mib%.*}")" | tee -a "$raw"
  # A small model trains (its clocks advance): the increment holds only it.
  "$bin/worker/ps_worker" --servers="$spec" --model=softmax --epochs=1 \
    --max_train_examples=2000 >"$work/softmax.log" 2>&1
  read -r mib secs < <(admin --checkpoint_dir="$ck" --incremental=4 | size_time)
  echo "INCREMENTAL floats=$n mib=$mib seconds=$secs" | tee -a "$raw"
  for p in "${server_pids[@]}"; do kill -KILL "$p"; wait "$p" 2>/dev/null || true; done
  start_servers "$bin" "$work" 2 --checkpoint_dir="$ck" --servers_file="$work/spec" --restore \
    --checkpoint_on_exit=false
  restore=$(sed -n 's/.*restored .* in \([0-9.]*\) s$/\1/p' "$work"/server[01].log | sort -g | tail -1)
  echo "RESTORE floats=$n seconds=$restore" | tee -a "$raw"
  stop_servers
  rm -rf "$ck"
done

echo "== 2. training throughput with and without checkpoints" | tee -a "$raw"
for r in $(seq 1 "$rounds"); do
  for every in 0 10 2; do
    flags=()
    [ "$every" = 0 ] || flags=(--checkpoint_dir "$work/train_ck" --checkpoint_every "$every")
    rm -rf "$work/train_ck"
    line=$(deploy/local_cluster.sh --servers 2 --workers 2 --epochs 4 "${flags[@]}" \
             -- --hidden=1024,512 --progress_seconds=60 2>&1 | grep "RESULT servers=")
    secs=$(sed -n 's/.*train_seconds=\([0-9.]*\).*/\1/p' <<<"$line")
    acc=$(sed -n 's/.*test_accuracy=\([0-9.]*\).*/\1/p' <<<"$line")
    echo "TRAIN round=$r every=$every train_seconds=$secs accuracy=$acc" | tee -a "$raw"
  done
done

report="$out/checkpoint.md"
{
  echo "# Checkpoint costs"
  echo
  echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo). \"dd\": dd writing and fsyncing a file of the checkpoint's size in the same directory, same run (median of 3). Raw lines: \`checkpoint_raw.txt\`."
  echo
  echo "| floats | checkpoint MiB | full checkpoint s (median of 3) | MiB/s | dd MiB/s | ratio | increment after a softmax model trained: MiB, s | restore s |"
  echo "|---|---|---|---|---|---|---|---|"
  for m in $sizes; do
    n=$((m * 1048576))
    awk -v n="$n" '
      $1 == "DISK" { split($2, f, "="); if (f[2] != n) next; split($4, d, "="); disk = d[2] }
      $1 == "FULL" { split($2, f, "="); if (f[2] != n) next; split($3, a, "="); split($4, b, "=");
                     mib = a[2]; t[++k] = b[2] + 0 }
      $1 == "INCREMENTAL" { split($2, f, "="); if (f[2] != n) next; split($3, a, "="); split($4, b, "=");
                            inc = a[2] " MiB, " b[2] " s" }
      $1 == "RESTORE" { split($2, f, "="); if (f[2] != n) next; split($3, b, "="); rs = b[2] }
      END { lo = t[1]; hi = t[1]; for (i = 2; i <= k; i++) { if (t[i] < lo) lo = t[i]; if (t[i] > hi) hi = t[i] }
            med = k == 3 ? t[1] + t[2] + t[3] - lo - hi : t[1]; printf "| %dM | %.1f | %.3f | %.0f | %.0f | %.2f | %s | %s |\n",
              n / 1048576, mib, med, mib / med, disk, mib / med / disk, inc, rs }' "$raw"
  done
  echo
  echo "Training (local_cluster.sh, 2 servers, 2 workers, MLP 784-1024-512-10 with AdaGrad: 10 MiB of parameters and state, 4 epochs), alternated:"
  echo
  echo "| checkpoint every | train seconds (each round) | mean | ratio to none | accuracy |"
  echo "|---|---|---|---|---|"
  awk '$1 == "TRAIN" { split($3, ev, "="); split($4, sv, "="); split($5, av, "="); k = ev[2];
         secs[k] = secs[k] " " sv[2]; sum[k] += sv[2]; cnt[k]++; acc[k] = acc[k] " " av[2] }
       END { split("0 10 2", order, " ");
             for (i = 1; i <= 3; i++) { k = order[i]; if (!(k in sum)) continue;
               printf "| %s |%s | %.1f | %.3f |%s |\n", (k == 0 ? "none" : k " s"), secs[k],
                 sum[k] / cnt[k], (sum[k] / cnt[k]) / (sum[0] / cnt[0]), acc[k] } }' "$raw"
} > "$report"

# Checkpoint time against size.
awk '$1 == "FULL" { split($2, f, "="); split($3, a, "="); split($4, b, "=");
       print f[2] / 1048576, a[2], b[2] }' "$raw" > "$work/full.dat"
awk '$1 == "DISK" { split($3, a, "="); split($4, d, "="); print a[2], a[2] / d[2] }' "$raw" \
  > "$work/disk.dat"
gnuplot <<EOF
set terminal png size 800,480
set output "$out/checkpoint_time.png"
set title "Full checkpoint of 2 servers: time against size, and dd of the same size"
set xlabel "checkpoint size (MiB)"
set ylabel "seconds"
set logscale xy
set grid
plot "$work/full.dat" using 2:3 with points pt 7 title "full checkpoint", \
     "$work/disk.dat" using 1:2 with linespoints title "dd of the same size, fsync"
EOF
cat "$report"
echo "checkpoint_experiment.sh: report in $report, plot in $out/checkpoint_time.png"
