#!/usr/bin/python3
"""Turns the raw lines of deploy/bench_compare.sh into compare_report.md and
two plots (compare_targets.png, compare_scaling.png, drawn by gnuplot).

    deploy/bench_compare_report.py RAW_FILE OUT_DIR

Each figure is the median over the rounds of each side; the ratio is
new / baseline of the medians, on the same machine in the same run.
"""
import os
import statistics
import subprocess
import sys


def fields(line):
    out = {}
    for token in line.split()[1:]:
        if "=" in token:
            key, value = token.split("=", 1)
            out[key] = value
    return out


def load(path):
    results, clusters, limits, machine = [], [], {}, {}
    with open(path) as f:
        for line in f:
            if line.startswith("RESULT "):
                results.append(fields(line))
            elif line.startswith("CLUSTER "):
                clusters.append(fields(line))
            elif line.startswith("LIMIT "):
                limits.update({k: float(v) for k, v in fields(line).items()})
            elif line.startswith("MACHINE "):
                machine = fields(line)
    return results, clusters, limits, machine


# (label, short name for the plot, selector, value key, better, target ratio, unit)
FIGURES = [
    ("1K floats: push the gradient, get the fresh parameters, one client, p50 latency",
     "1K step p50", dict(kind="dense", op="pushpull", values="1024", inflight="1"), "p50_us",
     "lower", 1.0, "us"),
    ("1K-float pushes, 16 in flight, one client", "1K pushes x16",
     dict(kind="dense", op="push", values="1024", inflight="16"), "ops_per_s", "higher", 1.5,
     "pushes/s"),
    ("10,000 random keys of width 1, push+pull, sparse (hash) table", "10K keys, sparse table",
     dict(kind="hashed", op="pushpull", values="10000"), "values_per_s", "higher", 1.25,
     "keys/s"),
    ("10,000 random keys of width 1, push+pull, dense table's key path", "10K keys, dense table",
     dict(kind="sparse", op="pushpull", values="10000"), "values_per_s", "higher", 1.0,
     "keys/s"),
    ("1M floats dense push+pull (or >= 0.8 of iperf3)", "1M dense push+pull",
     dict(kind="dense", op="pushpull", values="1048576", inflight="1"), "gbytes_per_s", "higher",
     1.45, "GB/s"),
]


def select(results, side, selector, round_filter):
    out = []
    for r in results:
        if r.get("side") != side or not round_filter(r.get("round", "0")):
            continue
        if r.get("servers") != "1" or r.get("clients") != "1":
            continue
        if all(r.get(k) == v for k, v in selector.items()):
            out.append(r)
    return out


def fmt(x):
    if x >= 1e6:
        return "%.2fM" % (x / 1e6)
    if x >= 1e4:
        return "%.1fK" % (x / 1e3)
    if x >= 100:
        return "%.0f" % x
    return "%.3g" % x


def main():
    raw, out_dir = sys.argv[1], sys.argv[2]
    results, clusters, limits, machine = load(raw)
    measured = lambda rnd: rnd != "0"
    iperf = [v for k, v in limits.items() if k.startswith("iperf3") and v > 0]
    net = statistics.mean(iperf) if iperf else 0
    rows, plot_rows = [], []
    for label, short, selector, key, better, target, unit in FIGURES:
        new = [float(r[key]) for r in select(results, "new", selector, measured)]
        base = [float(r[key]) for r in select(results, "base", selector, measured)]
        if not new or not base:
            rows.append("| %s | - | - | - | %s%.2fx | not measured |" %
                        (label, "<= " if better == "lower" else ">= ", target))
            continue
        mn, mb = statistics.median(new), statistics.median(base)
        ratio = mn / mb
        ok = ratio <= target if better == "lower" else ratio >= target
        extra = ""
        if unit == "GB/s" and net > 0:
            extra = " (%.2f / %.2f of iperf3)" % (mn / net, mb / net)
            ok = ok or mn / net >= 0.8
        rows.append("| %s | %s %s | %s %s%s | %s | %.2fx | %s%.2fx | %s |" % (
            label, fmt(mn), unit, fmt(mb), unit, extra,
            ", ".join(fmt(v) for v in new) + " / " + ", ".join(fmt(v) for v in base),
            ratio, "<= " if better == "lower" else ">= ", target, "met" if ok else "missed"))
        plot_rows.append((short, ratio, target, better))
    cn = [c for c in clusters if c.get("side") == "new"]
    cb = [c for c in clusters if c.get("side") == "base"]
    if cn and cb:
        wn = statistics.median(float(c["wall_seconds"]) for c in cn)
        wb = statistics.median(float(c["wall_seconds"]) for c in cb)
        an = statistics.median(float(c["test_accuracy"]) for c in cn)
        ab = statistics.median(float(c["test_accuracy"]) for c in cb)
        ratio = wn / wb
        rows.append("| deploy/local_cluster.sh, defaults: wall time (test accuracy) | %.1f s (%.4f) | "
                    "%.1f s (%.4f) | %s / %s | %.2fx | <= 1.0x, same accuracy | %s |" % (
                        wn, an, wb, ab, ", ".join(c["wall_seconds"] for c in cn),
                        ", ".join(c["wall_seconds"] for c in cb), ratio,
                        "met" if ratio <= 1.0 and an >= ab - 0.005 else "missed"))
        plot_rows.append(("local cluster wall time", ratio, 1.0, "lower"))

    lines = []
    lines.append("# Data path against %s" % machine.get("baseline", "the baseline"))
    lines.append("")
    lines.append("Machine: %s cores, %s GiB, %s. New: %s. Rounds per side: %d, alternating "
                 "which side runs first. Servers and clients pinned to disjoint CPUs: %s." % (
                     machine.get("cores", "?"), machine.get("mem_gib", "?"),
                     machine.get("cpu", "?").replace("_", " "), machine.get("new", "?"),
                     len({r.get("round") for r in results if r.get("round") not in ("0", None)}),
                     {"both": "both sides", "new": "the new side only"}.get(
                         machine.get("pin", "none"), "neither side")))
    lines.append("")
    lines.append("Limits measured in the same run: iperf3 loopback single stream %.2f GB/s at the "
                 "start, %.2f GB/s at the end; memory copy %.1f GB/s." % (
                     limits.get("iperf3_start_gbytes_per_s", 0),
                     limits.get("iperf3_end_gbytes_per_s", 0),
                     limits.get("memcopy_gbytes_per_s", 0)))
    lines.append("")
    lines.append("| figure | new (median) | baseline (median) | each round, new / baseline | "
                 "ratio | target | |")
    lines.append("|---|---|---|---|---|---|---|")
    lines.extend(rows)
    lines.append("")
    lines.append("![targets](compare_targets.png)")
    lines.append("")

    # Issue 9's figure, from the same rounds: key lists on a sparse table
    # (kind=hashed) against the same number of keys on a dense table.
    sparse_rows = []
    for width in ("1", "16"):
        medians = {}
        for kind in ("hashed", "sparse"):
            vals = [float(r["values_per_s"]) for r in select(
                results, "new", dict(kind=kind, op="pushpull", width=width),
                lambda x: x != "0")]
            if vals:
                medians[kind] = statistics.median(vals)
        if len(medians) == 2:
            sparse_rows.append("| %s | %s | %s | %.2fx |" % (
                width, fmt(medians["hashed"]), fmt(medians["sparse"]),
                medians["hashed"] / medians["sparse"]))
    if sparse_rows:
        lines.append("## Sparse table against the dense key path (new side, same rounds)")
        lines.append("")
        lines.append("10,000 random keys, push+pull, values/s (medians); target: sparse >= dense.")
        lines.append("")
        lines.append("| width | sparse table | dense table, key list | ratio |")
        lines.append("|---|---|---|---|")
        lines.extend(sparse_rows)
        lines.append("")

    scale = [r for r in results if r.get("round") == "0"]
    server_counts = sorted({int(r["servers"]) for r in scale})
    client_counts = sorted({int(r["clients"]) for r in scale})
    if scale:
        lines.append("## How cost grows (aggregate over clients; each client one thread)")
        lines.append("")
        lines.append("Both sides' CPU per Downpour step (client and server processes, "
                     "microseconds) is the new side's, from ps_bench's client_cpu_us and "
                     "server_cpu_us.")
        lines.append("")
        lines.append("| servers | clients | 1K-float Downpour steps/s, new | baseline | "
                     "CPU per step, client + server | "
                     "keys/s of 10,000-key push+pull (sparse table), new | baseline |")
        lines.append("|---|---|---|---|---|---|---|")
        data, cpu = {}, {}
        for r in scale:
            k = (int(r["servers"]), int(r["clients"]), r["side"], r["kind"])
            data[k] = float(r["ops_per_s"]) if r["kind"] == "dense" else float(r["values_per_s"])
            if r["side"] == "new" and r["kind"] == "dense" and "client_cpu_us" in r:
                cpu[k[:2]] = "%s + %s" % (r["client_cpu_us"], r["server_cpu_us"])
        with open(os.path.join(out_dir, "compare_scaling.dat"), "w") as f:
            for s in server_counts:
                f.write("# servers=%d\n" % s)
                for c in client_counts:
                    vals = [data.get((s, c, side, kind), 0) for side in ("new", "base")
                            for kind in ("dense", "hashed")]
                    f.write("%d %g %g %g %g\n" % (c, vals[0], vals[2], vals[1], vals[3]))
                    lines.append("| %d | %d | %s | %s | %s | %s | %s |" % (
                        s, c, fmt(vals[0]), fmt(vals[2]), cpu.get((s, c), "-"), fmt(vals[1]),
                        fmt(vals[3])))
                f.write("\n\n")
        lines.append("")
        lines.append("![scaling](compare_scaling.png)")
        lines.append("")
    with open(os.path.join(out_dir, "compare_report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))

    with open(os.path.join(out_dir, "compare_targets.dat"), "w") as f:
        for i, (name, ratio, target, better) in enumerate(plot_rows):
            # Plotted as "times better than the baseline": baseline / new for
            # latencies and wall time.
            gain = 1 / ratio if better == "lower" else ratio
            need = 1 / target if better == "lower" else target
            f.write('%d "%s" %g %g\n' % (i, name, gain, need))
    gp = """
set terminal pngcairo size 1000,500 noenhanced
set output '{out}/compare_targets.png'
set title 'New data path against the baseline (times better, medians of one run)'
set style fill solid 0.6
set boxwidth 0.35
set yrange [0:*]
set ylabel 'times better than baseline'
set xtics rotate by -20
set key top left
plot '{out}/compare_targets.dat' using ($1-0.2):3:xtic(2) with boxes title 'measured', \\
     '' using ($1+0.2):4 with boxes title 'target', 1 with lines dt 2 title 'baseline'
""".format(out=out_dir)
    if scale:
        def curves(column):
            out = []
            for i, n in enumerate(server_counts):
                plural = "" if n == 1 else "s"
                out.append("'{out}/compare_scaling.dat' index %d using 1:%d with linespoints lw 2 "
                           "lc %d title 'new, %d server%s'" % (i, column, i + 1, n, plural))
                out.append("'' index %d using 1:%d with linespoints dt 2 lc %d "
                           "title 'baseline, %d server%s'" % (i, column + 1, i + 1, n, plural))
            return ", \\\n     ".join(out)
        gp += """
set terminal pngcairo size 1100,560 noenhanced
set output '{out}/compare_scaling.png'
set ylabel ''
set multiplot layout 1,2 title 'How cost grows: aggregate over clients (one thread each), one run'
set key below maxrows 3
set xtics rotate by 0
set xlabel 'clients'
set logscale x 2
set xrange [0.8:%g]
set xtics (%s)
set yrange [0:*]
set title '1K-float Downpour steps (push+pull) per second'
plot %s
set title 'keys/s of 10,000-key push+pull, sparse table'
plot %s
unset multiplot
""" % (max(client_counts) * 1.25, ", ".join(str(c) for c in client_counts),
       curves(2), curves(4))
        gp = gp.format(out=out_dir)
    subprocess.run(["gnuplot"], input=gp.encode(), check=True)


if __name__ == "__main__":
    main()
