#!/usr/bin/python3
"""Properties of deploy/bench/scaling_model.py that would break if the simulation or the
fit went wrong.

    /usr/bin/python3 deploy/bench/scaling_model_test.py
"""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaling_model as sm  # noqa: E402


def run(workers, servers, bandwidth, latency, work, costs=None, cores=2, compute=0.0, steps=10):
    cluster = sm.Cluster(workers, servers, cores, bandwidth, latency, compute)
    return sm.simulate(cluster, work, costs or sm.default_costs(), steps, seed=1)


def synthetic_raw(path, costs, cpu_fields, servers=(1, 2, 4), clients=(1, 2, 4, 8)):
    """RESULT lines in ps_bench's format, written by the model itself (the scaling run's
    cases: 1K and 1M push+pull with 1 in flight, 1K pushes with 16)."""
    cases = [("pushpull", 1024, 1), ("pushpull", 1048576, 1), ("push", 1024, 16)]
    with open(path, "w") as f:
        f.write("MACHINE cores=2 mem_gib=24\nLIMIT iperf3_start_gbytes_per_s=2.6\n")
        for s in servers:
            for c in clients:
                for op, values, inflight in cases:
                    p = sm.Point("dense", op, values, 1, s, c, inflight, 0, 0, None, None)
                    r = sm.simulate_point(p, costs, 2, 2.6e9)
                    cpu = " client_cpu_us=%.6g server_cpu_us=%.6g" % (
                        r["client_cpu"] * 1e6, r["server_cpu"] * 1e6) if cpu_fields else ""
                    f.write("RESULT kind=dense op=%s values=%d width=1 servers=%d clients=%d "
                            "inflight=%d ops_per_s=%.6g values_per_s=0 gbytes_per_s=0 "
                            "p50_us=%.6g p99_us=0%s\n" % (op, values, s, c, inflight,
                                                          r["steps_per_s"], r["step_p50"] * 1e6,
                                                          cpu))


class ScalingModelTest(unittest.TestCase):
    def test_hashes_match_common_hash(self):
        # common/hash_test.cc's vectors: placement must be the servers' own.
        self.assertEqual(sm.mix64(0), 0xE220A8397B1DCDAF)
        self.assertEqual(sm.mix64(1), 0x910A2DEC89025CC1)
        self.assertEqual(sm.mix64(sm.M64), 0xE4D971771B652C20)
        shares = sm.slices_per_server("table", 3000, 4)
        self.assertEqual(sum(shares), 3000)
        for owned in shares:  # hash_ring_test's balance bound
            self.assertTrue(0.85 * 750 < owned < 1.15 * 750, shares)

    def test_server_cpu_bound_grows_with_servers(self):
        work = sm.Workload(dense_values=10_000_000)
        base = None
        for n in (1, 2, 4):
            r = run(64, n, 1e15, 0.0, work)
            self.assertEqual(r["bottleneck"], "server_cpu", (n, r["util"]))
            base = base or r["steps_per_s"]
            # The most loaded server sets the pace: N times, less the ring's imbalance.
            shares = sm.slices_per_server("model", -(-work.dense_values // 4096), n)
            ideal = n * (sum(shares) / n) / max(shares)
            self.assertAlmostEqual(r["steps_per_s"] / base / ideal, 1.0, delta=0.1, msg=n)
            self.assertGreater(r["steps_per_s"] / base, 0.8 * n)

    def test_network_bound_follows_bandwidth(self):
        work = sm.Workload(dense_values=1 << 20)
        slow = run(8, 2, 10e6, 50e-6, work)
        fast = run(8, 2, 20e6, 50e-6, work)
        self.assertEqual(slow["bottleneck"], "network", slow["util"])
        self.assertEqual(fast["bottleneck"], "network", fast["util"])
        self.assertAlmostEqual(fast["steps_per_s"] / slow["steps_per_s"], 2.0, delta=0.2)

    def test_one_worker_step_is_compute_latency_cpu_and_wire(self):
        costs, latency, bandwidth, compute = sm.default_costs(), 50e-6, 1e9, 2e-3
        values = 1024  # one slice: a single call
        nbytes = 8 * values  # pushed and pulled
        expected = (compute + 2 * latency + nbytes / bandwidth +
                    (costs.client_call_us + costs.server_call_us) * 1e-6 +
                    (costs.client_byte_ns + costs.server_byte_ns) * nbytes * 1e-9)
        r = run(1, 1, bandwidth, latency, sm.Workload(dense_values=values), costs,
                compute=compute)
        self.assertAlmostEqual(r["step_p50"] / expected, 1.0, delta=0.01)
        self.assertAlmostEqual(r["steps_per_s"] * expected, 1.0, delta=0.01)

    def test_many_calls_pipeline(self):
        # 4M floats to one server go as 16 calls of 256K at once: the uploads, the
        # server's work and the replies overlap, so the step is well under their sum.
        costs, bandwidth = sm.default_costs(), 1e9
        r = run(1, 1, bandwidth, 0.0, sm.Workload(dense_values=4 << 20), costs, cores=16)
        nbytes = 8 * (4 << 20)
        serial = (nbytes / bandwidth + (costs.client_byte_ns + costs.server_byte_ns) *
                  nbytes * 1e-9)
        self.assertLess(r["step_p50"], 0.75 * serial)
        self.assertGreater(r["step_p50"], nbytes / 2 / bandwidth)  # each way's wire time

    def fit_synthetic(self, true, cpu_fields, method, delta, **grid):
        """Fits costs to RESULT lines the model itself made from `true`: each within delta."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "raw.txt")
            synthetic_raw(path, true, cpu_fields=cpu_fields, **grid)
            points, cores, bandwidth = sm.load_raw(path)
        fitted, fit_method = sm.fit(points, cores, bandwidth, sm.default_costs(), 0.5)
        self.assertEqual(fit_method, method)
        for name in ("client_call_us", "client_byte_ns", "server_call_us", "server_byte_ns"):
            self.assertAlmostEqual(getattr(fitted, name) / getattr(true, name), 1.0, delta=delta,
                                   msg=name)
        return points

    def test_calibration_recovers_costs_from_cpu_per_side(self):
        points = self.fit_synthetic(sm.Costs(30.0, 0.2, 60.0, 0.35), True, "cpu_per_side", 0.02)
        self.assertEqual(len(points), 36)

    def test_calibration_recovers_costs_from_throughput(self):
        self.fit_synthetic(sm.split(150.0, 0.8, 0.0, 0.5), False, "throughput", 0.1,
                           servers=(1, 2), clients=(1, 4))

    def test_check_reads_the_layout_run(self):
        # The real raw format (two sides, rounds): five cases, each predicted within 2x.
        raw = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                           "experiments", "results", "2026-11-27-layout", "compare_raw.txt")
        points, cores, bandwidth = sm.load_raw(raw)
        self.assertEqual((len(points), cores, bandwidth), (5, 2, 2.63215e9))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(sm.main(["--check", raw]), 0)
        lines = [l for l in out.getvalue().splitlines() if l.startswith("CHECK ")]
        self.assertEqual(len(lines), 5)
        for line in lines:
            ratio = float(line.split(" ratio=")[1].split()[0])
            self.assertTrue(0.5 < ratio < 2.0, line)

    def test_deterministic_with_seed(self):
        work = sm.Workload(dense_values=1 << 22, sparse_keys=10000)
        cluster = sm.Cluster(8, 2, 4, 1e9, 20e-6, 1e-3, jitter=0.2)
        a = sm.simulate(cluster, work, sm.default_costs(), 6, seed=7)
        b = sm.simulate(cluster, work, sm.default_costs(), 6, seed=7)
        c = sm.simulate(cluster, work, sm.default_costs(), 6, seed=8)
        self.assertEqual(a, b)
        self.assertNotEqual(a["steps_per_s"], c["steps_per_s"])


if __name__ == "__main__":
    unittest.main()
