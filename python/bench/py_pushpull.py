#!/usr/bin/python3
"""The Python side of python/bench/pushpull_bench.sh.

Repeats one Downpour step, Client.push_pull of a dense table's whole range
(1M floats by default) into a preallocated array (out=), for --seconds after
--warmup_seconds, from one thread: the loop cpp_pushpull.cc runs over
PsClient::PushPull, with the same table definition, sizes, clock and timing.
Prints one line:

    RESULT client=python values=1048576 ops=... seconds=... ops_per_s=...
           gbytes_per_s=... p50_us=... p99_us=...

gbytes_per_s counts payload bytes: 4 per value each way.
"""

import argparse
import sys
import time

import numpy as np

try:
    import paramserver as ps
except ImportError as err:
    sys.exit(f"py_pushpull: cannot import paramserver ({err}); build //python:paramserver and "
             "set PYTHONPATH=python:bazel-bin/python (from the repository root)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--servers", required=True, help="host:port,... in shard order")
    p.add_argument("--table", default="pushpull_bench", help="the dense table (created if missing)")
    p.add_argument("--values", type=int, default=1 << 20, help="floats per push+pull")
    p.add_argument("--seconds", type=float, default=3.0, help="measured time")
    p.add_argument("--warmup_seconds", type=float, default=0.5, help="unmeasured time before it")
    p.add_argument("--worker_id", type=int, default=1, help="this client's worker id")
    args = p.parse_args()
    if args.values < 1:
        p.error(f"--values={args.values}: must be >= 1")

    # As cpp_pushpull.cc (and ps_worker): the process's data path settings.
    ps.tune_process_for_data_path()
    try:
        client = ps.Client(servers=args.servers, worker_id=args.worker_id)
        # cpp_pushpull.cc's definition, field for field (identical: a no-op).
        client.create_table(args.table, size=args.values, initializer="zeros",
                            optimizer="adagrad", learning_rate=0.01, initial_accumulator=0.1,
                            epsilon=1e-8)
        grads = np.full(args.values, 1e-3, dtype=np.float32)
        out = np.zeros(args.values, dtype=np.float32)
        latencies = []
        clock = time.perf_counter
        start = clock()
        measure_from = start + args.warmup_seconds
        stop = measure_from + args.seconds
        measured_end = measure_from
        while True:
            t0 = clock()
            if t0 >= stop:
                break
            client.push_pull(args.table, grads, out=out)
            t1 = clock()
            if t0 >= measure_from:
                latencies.append(t1 - t0)
                measured_end = t1
        client.close()
    except ps.Error as err:
        sys.exit(f"py_pushpull: {err.code}: {err.message}")
    seconds = measured_end - measure_from
    ops_per_s = len(latencies) / seconds if seconds > 0 else 0.0
    lat_us = np.sort(np.array(latencies or [0.0])) * 1e6

    def percentile(p):  # as cpp_pushpull.cc: the element at floor(p * n)
        return lat_us[min(lat_us.size - 1, int(p * lat_us.size))]

    print(f"RESULT client=python values={args.values} ops={len(latencies)} seconds={seconds:.3f} "
          f"ops_per_s={ops_per_s:.2f} "
          f"gbytes_per_s={ops_per_s * args.values * 4 * 2 / 1e9:.3f} "
          f"p50_us={percentile(0.5):.0f} p99_us={percentile(0.99):.0f}",
          flush=True)


if __name__ == "__main__":
    main()
