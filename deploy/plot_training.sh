#!/usr/bin/env bash
# Plots workers' training curves (ps_worker --curve_csv) with gnuplot:
#   deploy/plot_training.sh OUT.png curve0.csv [curve1.csv ...]
# Top: training loss against time, one line per worker; bottom: examples/s.
# Fails (exit 1, with the reason) when gnuplot is missing or a file is empty.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OUT.png CURVE.csv..." >&2; exit 2; }
out=$1
shift
command -v gnuplot >/dev/null || { echo "plot_training.sh: gnuplot is not installed (deploy/setup.sh installs gnuplot-nox)" >&2; exit 1; }
plots_loss=()
plots_speed=()
for f in "$@"; do
  [ "$(wc -l <"$f")" -ge 2 ] || { echo "plot_training.sh: $f has no rows" >&2; exit 1; }
  name=$(basename "$f" .csv | sed 's/^curve/worker /')
  # Rows with a test result repeat the last point: plotted once (every ::1 skips the header).
  plots_loss+=("'$f' every ::1 using 1:5 with linespoints pointsize 0.5 title '$name'")
  plots_speed+=("'$f' every ::1 using 1:6 with lines title '$name'")
done
join() { local IFS=,; echo "$*"; }
gnuplot <<EOF2
set terminal pngcairo size 900,700 noenhanced
set output '$out'
set datafile separator ','
set multiplot layout 2,1 title 'Training curves ($(date '+%Y-%m-%d %H:%M'))'
set xlabel 'seconds'
set ylabel 'training loss'
set grid
plot $(join "${plots_loss[@]}")
set ylabel 'examples/s'
plot $(join "${plots_speed[@]}")
unset multiplot
EOF2
echo "plot_training.sh: wrote $out"
