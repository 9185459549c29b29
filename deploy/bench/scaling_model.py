#!/usr/bin/python3
"""How a cluster of W workers and N servers would scale: a small discrete-event model.

What it models (the assumptions in full: docs/design/scaling_model.md):
  - W workers and N servers, each on its own machine with C cores (a FIFO queue of
    CPU jobs) and a full-duplex NIC of B bytes/s each way, behind a switch that never
    congests; one-way latency L.
  - Each worker repeats a Downpour step: compute for T (a delay, off its cores), then
    one push+pull of a dense model split over the servers by the project's
    consistent-hash ring (slices of 4096 keys, 512 virtual nodes a server, the hashes
    of common/hash_ring.h) and/or of a sparse batch of K keys over 1024 buckets on the
    same ring. Each server's part goes as calls of at most 256K values, all at once
    (PsClient); --inflight such steps per worker run side by side.
  - A call costs the client a + b*bytes (half before sending, half after the reply)
    and the server c + d*bytes (+ apply per value, + a cost per key of a key list);
    a message takes bytes/B on the sender's NIC and on the receiver's, pipelined, + L.
  - --check simulates ps_bench on this machine instead: every client and server on
    one machine's cores, loopback at iperf3's rate, L = 10 us; small pushes batched
    as PsClient's PushBatcher does (4 batches in flight to a server).

  scaling_model.py [--workers 1,2,4] [--servers 1,2] [--cores 16] ...    the grid
  scaling_model.py [--calibrate RAW] --check RAW      predicted vs measured here
Prints MODEL lines (or CALIBRATION, COSTS and CHECK lines) and --out/scaling_model.png.
"""
import argparse
import bisect
import collections
import functools
import heapq
import math
import os
import random
import statistics
import subprocess
import sys
from dataclasses import dataclass, replace

M64 = (1 << 64) - 1
SLICE_KEYS, VNODES, SPARSE_BUCKETS = 4096, 512, 1024  # common/placement.h, hash_ring.h
PUSHPULL_VALUES_PER_CALL, PUSH_VALUES_PER_CALL = 1 << 18, 1 << 20  # PsClientOptions
BATCH_MAX_VALUES, BATCHES_IN_FLIGHT = 16 << 10, 4  # worker/client/push_batcher.h
SIM_CALLS = 32  # a step is simulated as at most about this many calls (their costs kept)

# docs/experiments/2026-11-27-small-call-costs.md (1 server, 1 client, loopback):
DOC_1K_SERVER_US, DOC_1K_P50_US = 93.0, 159.0  # 1K push+pull, 1 in flight
DOC_BATCHED_SERVER_US, DOC_BATCHED_CLIENT_US = 12.7, 11.9  # a 1K push, 16 in flight
DOC_1M_GBYTES_PER_S = 1.7  # 1M-float push+pull, both directions counted
DOC_LOOPBACK_GBYTES_PER_S, LOOPBACK_LATENCY_US = 2.5, 10.0  # iperf3; the latency assumed
DEFAULT_KEY_NS = 27.6  # per key of a key list, both sides (docs/design/scaling_model.md)
DEFAULT_SHARE = DOC_BATCHED_SERVER_US / (DOC_BATCHED_SERVER_US + DOC_BATCHED_CLIENT_US)


# --- the project's placement (common/hash.h, common/hash_ring.cc) -----------------
def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def hash_string(s):
    h = 0xCBF29CE484222325
    for byte in s.encode():
        h = ((h ^ byte) * 0x100000001B3) & M64
    return mix64(h)


def hash_combine(a, b):
    return mix64(a ^ ((mix64(b) + 0x632BE59BD9B4E019 + ((a << 6) & M64) + (a >> 2)) & M64))


@functools.lru_cache(maxsize=None)
def slices_per_server(table, slices, servers):
    """How many of `table`'s slices each server owns on the consistent-hash ring."""
    if servers == 1:
        return (slices,)
    salt = hash_string("server")
    points = sorted((hash_combine(hash_combine(salt, m), v), m)
                    for m in range(servers) for v in range(VNODES))
    hashes, counts, table_hash = [h for h, _ in points], [0] * servers, hash_string(table)
    for s in range(slices):
        counts[points[bisect.bisect_left(hashes, hash_combine(table_hash, s)) % len(points)][1]] += 1
    return tuple(counts)


# --- costs, and what a step moves ------------------------------------------------
@dataclass
class Costs:
    client_call_us: float  # a
    client_byte_ns: float  # b
    server_call_us: float  # c
    server_byte_ns: float  # d
    client_key_ns: float = 0.0  # per key of a key list (grouping keys by slice)
    server_key_ns: float = 0.0  # per key of a key list (finding rows)
    apply_value_ns: float = 0.0  # server, per value pushed, on top of d (never fitted)

    def line(self):
        return " ".join("%s=%.4g" % kv for kv in vars(self).items())


def split(call_us, byte_ns, key_ns, share, apply_value_ns=0.0):
    """Costs from the totals of both sides: the server takes `share` of each."""
    return Costs((1 - share) * call_us, (1 - share) * byte_ns, share * call_us, share * byte_ns,
                 (1 - share) * key_ns, share * key_ns, apply_value_ns)


def default_costs(share=DEFAULT_SHARE):
    """a, b, c, d from the small-call-costs report (derivation: docs/design/scaling_model.md)."""
    costs, one_k = split(0.0, 1.0 / DOC_1M_GBYTES_PER_S, DEFAULT_KEY_NS, share), 8192
    costs.server_call_us = DOC_1K_SERVER_US - costs.server_byte_ns * one_k / 1e3
    costs.client_call_us = (DOC_1K_P50_US - DOC_1K_SERVER_US - 2 * LOOPBACK_LATENCY_US -
                            one_k / (DOC_LOOPBACK_GBYTES_PER_S * 1e3) -
                            costs.client_byte_ns * one_k / 1e3)
    return costs


@dataclass
class Workload:
    dense_values: int = 0  # floats of a dense table pushed and pulled each step
    sparse_keys: int = 0  # keys of a key list pushed and pulled each step
    width: int = 1  # values per sparse key
    op: str = "pushpull"  # or "push" (ps_bench's push cases)
    dense_table: str = "model"
    sparse_table: str = "embedding"
    sparse_slices: int = SPARSE_BUCKETS  # a sparse table's buckets (or a dense one's slices)


@dataclass
class Cluster:
    workers: int
    servers: int
    cores: int  # per machine
    bandwidth: float  # bytes/s, each way, per NIC
    latency: float  # s, one way
    compute: float = 0.0  # s per step
    inflight: int = 1  # steps each worker keeps going
    jitter: float = 0.0  # compute time varies uniformly by +- this fraction
    shared: bool = False  # everything on one machine (--check)


def plan(work, servers):
    """One step's calls: (server, real calls it stands for, values, keys, bytes out, back)."""
    dense = work.dense_values and slices_per_server(
        work.dense_table, max(1, -(-work.dense_values // SLICE_KEYS)), servers)
    sparse = work.sparse_keys and slices_per_server(work.sparse_table, work.sparse_slices, servers)
    calls = []
    for s in range(servers):
        keys = work.sparse_keys * sparse[s] / sum(sparse) if sparse else 0.0
        values = (work.dense_values * dense[s] / sum(dense) if dense else 0.0) + keys * work.width
        if values > 0:
            req = 4 * values + 8 * keys
            rep = req - 8 * keys if work.op == "pushpull" else 0.0
            real = math.ceil(values / (PUSHPULL_VALUES_PER_CALL if work.op == "pushpull"
                                       else PUSH_VALUES_PER_CALL) - 1e-9)
            n = min(real, max(2, -(-SIM_CALLS // servers)))
            calls += [(s, real / n, values / n, keys / n, req / n, rep / n)] * n
    return calls


# --- the simulation ----------------------------------------------------------------
class Cpu:
    """A machine's cores: each job takes the first core free (FIFO, no preemption)."""

    def __init__(self, cores):
        self.free, self.busy = [0.0] * cores, {"client": 0.0, "server": 0.0}

    def run(self, now, seconds, role):
        start = max(now, heapq.heappop(self.free))
        heapq.heappush(self.free, start + seconds)
        self.busy[role] += seconds
        return start + seconds


class Link:
    """One direction of a NIC: one message at a time, in the order they come."""

    def __init__(self, bandwidth):
        self.bandwidth, self.free, self.busy = bandwidth, 0.0, 0.0

    def reserve(self, now, nbytes, not_before=0.0):
        start, t = max(now, self.free), nbytes / self.bandwidth
        self.free, self.busy = max(start + t, not_before), self.busy + t
        return start, self.free


class Machine:
    def __init__(self, cores, bandwidth):
        self.cpu, self.tx, self.rx = Cpu(cores), Link(bandwidth), Link(bandwidth)


class Loop:
    """One of a worker's steps in flight, repeated."""

    def __init__(self, worker):
        self.worker, self.done, self.pending, self.cycle_start = worker, 0, 0, 0.0
        self.spans = []  # (start, end) of each step done


class Call:
    """Stages: client CPU, request on the wire (tx, then rx), server CPU, reply (tx, rx),
    client CPU."""
    __slots__ = ("owner", "worker", "server", "req", "rep", "send", "recv", "serve", "stage",
                 "tx_end")


class Simulation:
    def __init__(self, cluster, work, costs, steps, seed):
        self.cl, self.costs, self.steps, self.rng = cluster, costs, steps, random.Random(seed)
        self.events, self.seq, self.now = [], 0, 0.0
        n = 1 if cluster.shared else cluster.workers + cluster.servers
        self.machines = [Machine(cluster.cores, cluster.bandwidth) for _ in range(n)]
        self.worker_m = [self.machines[0 if cluster.shared else w] for w in range(cluster.workers)]
        self.server_m = [self.machines[0 if cluster.shared else cluster.workers + s]
                         for s in range(cluster.servers)]
        self.plan = plan(work, cluster.servers)
        self.batched = (work.op == "push" and len(self.plan) == 1 and self.plan[0][1] == 1
                        and self.plan[0][2] <= BATCH_MAX_VALUES)
        self.batchers = {}  # (worker, server) -> [batches in flight, queued loops]
        self.units = [0.0] * 4  # calls, bytes, keys, values
        self.loops = [Loop(w) for w in range(cluster.workers) for _ in range(cluster.inflight)]

    def at(self, t, fn, arg):
        heapq.heappush(self.events, (t, self.seq, fn, arg))
        self.seq += 1

    def run(self):
        for loop in self.loops:
            self.at(self.rng.uniform(0, max(self.cl.compute, 1e-5)), self._begin_step, loop)
        while self.events:
            self.now, _, fn, arg = heapq.heappop(self.events)
            fn(arg)
        return self._results()

    def _begin_step(self, loop):
        loop.cycle_start = self.now
        t = self.cl.compute * (1 + self.cl.jitter * self.rng.uniform(-1, 1))
        if t > 0:
            self.at(self.now + t, self._start_op, loop)
        else:
            self._start_op(loop)  # as PushAsync's done starts the next push at once

    def _start_op(self, loop):
        if self.batched:
            state = self.batchers.setdefault((loop.worker, self.plan[0][0]), [0, []])
            state[1].append(loop)
            if state[0] < BATCHES_IN_FLIGHT:
                state[0] += 1
                self._send_batch(loop.worker, state)
            return
        loop.pending = len(self.plan)
        for planned in self.plan:
            self._call(loop, loop.worker, planned)

    def _send_batch(self, worker, state):
        items, state[1] = state[1], []
        self._call(items, worker, self.plan[0], len(items))

    def _call(self, owner, worker, planned, n=1):  # n pushes of `planned` in one call
        server, real, values, keys, req, rep = planned
        values, keys, req, rep, c, call = n * values, n * keys, n * req, n * rep, self.costs, Call()
        half = c.client_call_us * 1e-6 * real / 2
        call.send = half + (c.client_byte_ns * req + c.client_key_ns * keys) * 1e-9
        call.recv = half + c.client_byte_ns * rep * 1e-9
        call.serve = c.server_call_us * 1e-6 * real + (c.server_byte_ns * (req + rep) +
                                                       c.server_key_ns * keys +
                                                       c.apply_value_ns * values) * 1e-9
        call.owner, call.worker, call.server, call.req, call.rep = owner, worker, server, req, rep
        call.stage, call.tx_end = 0, 0.0
        for i, u in enumerate((real, req + rep, keys, values)):
            self.units[i] += u
        self._advance(call)

    def _advance(self, call):
        stage, call.stage = call.stage, call.stage + 1
        w, s, latency = self.worker_m[call.worker], self.server_m[call.server], self.cl.latency
        if stage in (0, 6):
            end = w.cpu.run(self.now, call.send if stage == 0 else call.recv, "client")
        elif stage == 3:
            end = s.cpu.run(self.now, call.serve, "server")
        elif stage in (1, 4):  # onto the sender's NIC; the first byte arrives after L
            start, call.tx_end = (w if stage == 1 else s).tx.reserve(
                self.now, call.req if stage == 1 else call.rep)
            end = start + latency
        elif stage in (2, 5):  # through the receiver's NIC, no sooner than the last byte sent
            _, end = (s if stage == 2 else w).rx.reserve(
                self.now, call.req if stage == 2 else call.rep, call.tx_end + latency)
        else:
            return self._call_done(call)
        self.at(end, self._advance, call)

    def _call_done(self, call):
        if isinstance(call.owner, Loop):
            call.owner.pending -= 1
            if call.owner.pending == 0:
                self._finish_op(call.owner)
            return
        for loop in call.owner:  # a push batch: the dones first, then the slot passes on
            self._finish_op(loop)
        state = self.batchers[(call.worker, call.server)]
        if state[1]:
            self._send_batch(call.worker, state)
        else:
            state[0] -= 1

    def _finish_op(self, loop):
        loop.spans.append((loop.cycle_start, self.now))
        loop.done += 1
        if loop.done < self.steps:
            self._begin_step(loop)

    def _results(self):
        loops, ops = self.loops, sum(loop.done for loop in self.loops)
        # Each loop's rate over its steps inside the window where every loop is past its
        # first three steps (warm-up) and none has finished, else over all but its first.
        warm = max(0, min(2, self.steps - 3))
        first, last = max(l.spans[warm][1] for l in loops), min(l.spans[-1][1] for l in loops)
        measured = [[e - s for s, e in l.spans if s >= first and e <= last] or
                    [e - s for s, e in l.spans[1:]] for l in loops]
        rate = sum(1 / statistics.fmean(m) for m in measured if m)

        def busy_share(busy, capacity):  # of a resource, at that rate
            return rate * busy / ops / capacity

        util = dict(  # of the busiest machine's cores or NIC direction
            server_cpu=max(busy_share(m.cpu.busy["server"], self.cl.cores) for m in self.server_m),
            client_cpu=max(busy_share(m.cpu.busy["client"], self.cl.cores) for m in self.worker_m),
            network=max(busy_share(max(m.tx.busy, m.rx.busy), 1) for m in self.machines))
        name = max(util, key=util.get)
        return dict(steps_per_s=rate, util=util, bottleneck=name if util[name] >= 0.8 else "latency",
                    step_p50=statistics.median([c for m in measured for c in m] or [0]),
                    client_cpu=sum(m.cpu.busy["client"] for m in self.machines) / ops,
                    server_cpu=sum(m.cpu.busy["server"] for m in self.machines) / ops,
                    units=[u / ops for u in self.units])


def simulate(cluster, work, costs, steps, seed):
    return Simulation(cluster, work, costs, steps, seed).run()


# --- ps_bench RESULT lines: --check and --calibrate ----------------------------------
# The medians of one case's RESULT lines; each side's CPU per op is None unless measured.
Point = collections.namedtuple("Point", "kind op values width servers clients inflight "
                               "ops_per_s p50_us client_cpu_us server_cpu_us")


def load_raw(path):
    """(points, cores, iperf3 bytes/s) of a raw file; only side=new when it has two sides."""
    rows, cores, bandwidth = [], 2, DOC_LOOPBACK_GBYTES_PER_S * 1e9
    with open(path) as f:
        for line in f:
            kv = dict(t.split("=", 1) for t in line.split()[1:] if "=" in t)
            if line.startswith("RESULT "):
                rows.append(kv)
            elif line.startswith("MACHINE "):
                cores = int(kv.get("cores", cores))
            elif line.startswith("LIMIT ") and "iperf3_start_gbytes_per_s" in kv:
                bandwidth = float(kv["iperf3_start_gbytes_per_s"]) * 1e9
    if any(r.get("side") == "new" for r in rows):
        rows = [r for r in rows if r.get("side") == "new"]
    groups = {}
    for r in rows:
        if (r.get("kind"), r.get("op")) in (("dense", "pushpull"), ("dense", "push"),
                                            ("sparse", "pushpull"), ("hashed", "pushpull")):
            key = (r["kind"], r["op"], int(r["values"]), int(r.get("width", 1)),
                   int(r.get("servers", 1)), int(r.get("clients", 1)), int(r.get("inflight", 1)))
            groups.setdefault(key, []).append(r)

    def median(rs, name):
        return statistics.median(float(r[name]) for r in rs) if all(name in r for r in rs) else None

    return ([Point(*key, *(median(rs, n) for n in ("ops_per_s", "p50_us", "client_cpu_us",
                                                     "server_cpu_us")))
             for key, rs in groups.items()], cores, bandwidth)


def simulate_point(p, costs, cores, bandwidth, seed=1):
    """ps_bench's case on this machine: p.clients clients with p.inflight ops in flight each."""
    cluster = Cluster(p.clients, p.servers, cores, bandwidth, LOOPBACK_LATENCY_US * 1e-6,
                      inflight=p.inflight, shared=True)
    if p.kind == "dense":
        work = Workload(dense_values=p.values, op=p.op, dense_table="bench_dense_" + p.op)
    else:  # key lists on a sparse table (hashed) or on a dense one of 1M keys (sparse)
        work = Workload(sparse_keys=p.values // p.width, width=p.width, op=p.op,
                        sparse_table="bench_%s_%s" % (p.kind, p.op),
                        sparse_slices=SPARSE_BUCKETS if p.kind == "hashed" else 245)
    return simulate(cluster, work, costs, max(8, math.ceil(400 / (p.clients * p.inflight))), seed)


def solve(a, y):
    """x with a x = y, for a small square a (Gauss-Jordan, partial pivoting)."""
    n, m = len(y), [list(row) + [v] for row, v in zip(a, y)]
    for i in range(n):
        k = max(range(i, n), key=lambda r: abs(m[r][i]))
        m[i], m[k] = m[k], m[i]
        for r in range(n):
            if r != i and m[i][i]:
                m[r] = [x - m[r][i] / m[i][i] * z for x, z in zip(m[r], m[i])]
    return [m[i][n] / m[i][i] if m[i][i] else 0.0 for i in range(n)]


def least_squares(rows, ys):
    """x minimising sum (row . x / y - 1)^2 (relative errors: small and large calls alike)."""
    k = range(len(rows[0]))
    return solve([[sum(r[i] * r[j] / y ** 2 for r, y in zip(rows, ys)) for j in k] for i in k],
                 [sum(r[i] / y for r, y in zip(rows, ys)) for i in k])


def fit(points, cores, bandwidth, base, share, seed=1):
    """Costs fitted to the points, and how. With each side's CPU per op on every point:
    a, b (and the client's key cost) by linear least squares on the calls, bytes and keys
    per op that the model counts, c, d likewise from the server's. Otherwise the totals
    a+c, b+d (and the key cost) by least squares of log ops/s on the simulation,
    split between the sides by `share`."""
    keyed = any(p.kind != "dense" for p in points)
    if all(p.client_cpu_us is not None and p.server_cpu_us is not None for p in points):
        costs = base
        for _ in range(3):  # the calls per batched push depend on the costs
            units = [simulate_point(p, costs, cores, bandwidth, seed)["units"] for p in points]
            rows = [[u[0], u[1] / 1e3] + ([u[2] / 1e3] if keyed else []) for u in units]
            cx = least_squares(rows, [p.client_cpu_us for p in points])
            sx = least_squares(rows, [p.server_cpu_us - base.apply_value_ns * u[3] / 1e3
                                      for p, u in zip(points, units)])
            costs = Costs(cx[0], cx[1], sx[0], sx[1], *((cx[2], sx[2]) if keyed else (
                base.client_key_ns, base.server_key_ns)), base.apply_value_ns)
        return costs, "cpu_per_side"
    totals = [base.client_call_us + base.server_call_us, base.client_byte_ns + base.server_byte_ns,
              base.client_key_ns + base.server_key_ns]
    free = [0, 1, 2] if keyed else [0, 1]

    def costs_of(theta):
        t = list(totals)
        for i, v in zip(free, theta):
            t[i] = math.exp(v)
        return split(*t, share, base.apply_value_ns)

    def error(theta):  # sum of squared log errors of ops/s
        return sum(math.log(simulate_point(p, costs_of(theta), cores, bandwidth, seed)
                            ["steps_per_s"] / p.ops_per_s) ** 2 for p in points)

    # Compass search in log space: the simulation is not smooth enough for derivatives
    # (batches and queues change in steps as the costs move).
    theta, step = [math.log(totals[i]) for i in free], 0.5
    best = error(theta)
    while step > 0.005:
        for i, sign in [(i, s) for i in range(len(theta)) for s in (1, -1)]:
            trial = theta[:i] + [theta[i] + sign * step] + theta[i + 1:]
            value = error(trial)
            if value < best:
                theta, best = trial, value
                break
        else:
            step /= 2
    return costs_of(theta), "throughput"


def check(points, costs, cores, bandwidth, seed):
    """Prints predicted against measured for every point; returns the ops/s ratios."""
    ratios = []
    for p in sorted(points, key=lambda p: (p.kind, p.op, p.values, p.servers, p.clients)):
        r = simulate_point(p, costs, cores, bandwidth, seed)
        ratios.append(r["steps_per_s"] / p.ops_per_s)
        print("CHECK kind=%s op=%s values=%d servers=%d clients=%d inflight=%d measured_ops_per_s=%.0f "
              "predicted_ops_per_s=%.0f ratio=%.2f measured_p50_us=%.0f predicted_p50_us=%.0f "
              "p50_ratio=%.2f cpu_busy=%.2f" % (
                  p.kind, p.op, p.values, p.servers, p.clients, p.inflight, p.ops_per_s,
                  r["steps_per_s"], ratios[-1], p.p50_us, r["step_p50"] * 1e6,
                  r["step_p50"] * 1e6 / p.p50_us, r["util"]["server_cpu"] + r["util"]["client_cpu"]))
    print("CHECK_SUMMARY points=%d ratio_min=%.2f ratio_median=%.2f ratio_max=%.2f "
          "mean_abs_log_error=%.3f" % (len(ratios), min(ratios), statistics.median(ratios),
                                       max(ratios), statistics.fmean(abs(math.log(x)) for x in ratios)))
    return ratios


# --- the grid -----------------------------------------------------------------------
def grid(args, costs):
    work = Workload(dense_values=int(args.model_floats), sparse_keys=int(args.sparse_keys),
                    width=args.sparse_width)
    rows = []
    for n in args.servers:
        for w in args.workers:
            r = simulate(Cluster(w, n, args.cores, args.bandwidth_gbps * 1e9, args.latency_us * 1e-6,
                                 args.compute_ms * 1e-3, args.inflight, args.compute_jitter),
                         work, costs, args.steps, args.seed)
            rows.append((w, n, r["steps_per_s"]))
            print("MODEL workers=%d servers=%d cores=%d bandwidth_gbps=%g latency_us=%g model_floats=%d "
                  "sparse_keys=%d compute_ms=%g steps_per_s=%.4g values_per_s=%.4g step_p50_ms=%.4g "
                  "server_cpu=%.2f client_cpu=%.2f network=%.2f bottleneck=%s" % (
                      w, n, args.cores, args.bandwidth_gbps, args.latency_us, work.dense_values,
                      work.sparse_keys, args.compute_ms, r["steps_per_s"], r["steps_per_s"] *
                      (work.dense_values + work.sparse_keys * work.width), r["step_p50"] * 1e3,
                      *r["util"].values(), r["bottleneck"]), flush=True)
    return rows


def plot(rows, args):
    os.makedirs(args.out, exist_ok=True)
    data, png = (os.path.join(args.out, "scaling_model." + x) for x in ("dat", "png"))
    with open(data, "w") as f:
        for n in args.servers:
            f.write("# servers=%d\n%s\n\n" % (n, "".join("%d %.6g\n" % (w, x) for w, m, x in rows
                                                         if m == n)))
    curves = ", ".join("'%s' index %d using 1:2 with linespoints title '%d server%s'"
                       % (data, i, n, "s"[:n > 1]) for i, n in enumerate(args.servers))
    script = ("set terminal pngcairo size 900,550 noenhanced\nset output '%s'\n"
              "set title 'model: %g dense floats, %g sparse keys, compute %g ms, %g GB/s, %g us, "
              "%d cores'\nset xlabel 'workers'\nset ylabel 'steps/s, all workers'\n"
              "set logscale xy 2\nset key top left\nset grid\nplot %s\n"
              % (png, args.model_floats, args.sparse_keys, args.compute_ms, args.bandwidth_gbps,
                 args.latency_us, args.cores, curves))
    try:
        subprocess.run(["gnuplot"], input=script.encode(), check=True)
        print("PLOT " + png)
    except (OSError, subprocess.CalledProcessError) as e:
        print("scaling_model.py: gnuplot failed (%s); the data is in %s" % (e, data), file=sys.stderr)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    ap.add_argument("--workers", type=ints, default=[1, 2, 4, 8, 16, 32, 64])
    ap.add_argument("--servers", type=ints, default=[1, 2, 4, 8, 16])
    ap.add_argument("--cores", type=int, default=16, help="of every machine")
    ap.add_argument("--bandwidth_gbps", type=float, default=1.25, help="GB/s each way, per NIC")
    ap.add_argument("--latency_us", type=float, default=50.0, help="one way")
    ap.add_argument("--model_floats", type=float, default=100e6, help="dense floats per step")
    ap.add_argument("--sparse_keys", type=float, default=0, help="keys of a sparse batch per step")
    ap.add_argument("--sparse_width", type=int, default=1, help="values per sparse key")
    ap.add_argument("--compute_ms", type=float, default=100.0, help="per step")
    ap.add_argument("--compute_jitter", type=float, default=0.1, help="+- this fraction, uniform")
    ap.add_argument("--inflight", type=int, default=1, help="steps each worker keeps going")
    ap.add_argument("--steps", type=int, default=10, help="per worker; the first 3 are warm-up")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "scaling_model"))
    ap.add_argument("--server_share", type=float, default=DEFAULT_SHARE,
                    help="the server's share of each CPU cost when a fit has only throughput")
    ap.add_argument("--apply_ns_per_value", type=float, default=0.0,
                    help="server CPU per value pushed on top of d (a costlier optimizer)")
    ap.add_argument("--calibrate", metavar="RAW", help="fit the costs to ps_bench RESULT lines")
    ap.add_argument("--check", metavar="RAW", help="predicted vs measured on this machine")
    args = ap.parse_args(argv)
    if args.steps < 3:
        ap.error("--steps=%d: need at least 3 (a worker's first steps are warm-up)" % args.steps)
    if args.model_floats < 1 and args.sparse_keys < 1 and not args.check:
        ap.error("a step moves nothing: set --model_floats or --sparse_keys")
    if min(args.workers + args.servers + [args.cores, args.inflight, args.sparse_width]) < 1:
        ap.error("--workers, --servers, --cores, --inflight and --sparse_width must be >= 1")
    costs = replace(default_costs(args.server_share), apply_value_ns=args.apply_ns_per_value)
    for flag, raw in (("--calibrate", args.calibrate), ("--check", args.check)):
        try:
            if raw and not load_raw(raw)[0]:
                ap.error("%s %s: no RESULT lines of kind dense, sparse or hashed with op "
                         "pushpull (or dense push); is it ps_bench output?" % (flag, raw))
        except (OSError, ValueError, KeyError) as e:
            ap.error("%s %s: cannot read it (%s); it takes deploy/bench_compare.sh's "
                     "compare_raw.txt or ps_bench's RESULT lines" % (flag, raw, e))
    if args.calibrate:
        points, cores, bandwidth = load_raw(args.calibrate)
        costs, method = fit(points, cores, bandwidth, costs, args.server_share, args.seed)
        print("CALIBRATION method=%s points=%d raw=%s" % (method, len(points), args.calibrate))
    print("COSTS " + costs.line())
    if args.check:
        points, cores, bandwidth = load_raw(args.check)
        print("MACHINE cores=%d bandwidth_gbps=%.3g latency_us=%g"
              % (cores, bandwidth / 1e9, LOOPBACK_LATENCY_US))
        check(points, costs, cores, bandwidth, args.seed)
    else:
        plot(grid(args, costs), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
