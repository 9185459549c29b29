"""paramserver against real ps_server processes (started by client_test.sh).

Environment: PS_SERVERS, the 2-server cluster ("host:port,host:port");
PS_VICTIM, a 1-server cluster this test kills, and PS_VICTIM_PID;
PS_CHECKPOINTED, a 1-server cluster started with
--checkpoint_dir=PS_CHECKPOINT_DIR.
"""

import os
import pickle
import signal
import socket
import threading
import unittest

import numpy as np

import paramserver as ps

SERVERS = os.environ["PS_SERVERS"].split(",")


def sgd(values, grads, rate):
    """What the servers' SGD computes, in float32: values - rate * grads."""
    return (values - np.float32(rate) * grads).astype(np.float32)


class RoundTripTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = ps.Client(servers=SERVERS)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def test_dense_range_push_pull_and_out(self):
        c = self.client
        # 10000 keys: more than one slice (4096 keys), so both servers hold some.
        c.create_table("dense", size=10000, width=3, optimizer="sgd", learning_rate=0.5)
        expected = np.zeros((10000, 3), dtype=np.float32)
        np.testing.assert_array_equal(c.pull("dense"), expected)

        grads = np.arange(30000, dtype=np.float32).reshape(10000, 3) / 1000
        c.push("dense", grads)
        expected = sgd(expected, grads, 0.5)
        pulled = c.pull("dense")
        self.assertEqual(pulled.dtype, np.float32)
        self.assertEqual(pulled.shape, (10000, 3))
        np.testing.assert_array_equal(pulled, expected)

        # push_pull of keys [4090, 4100) (across a slice boundary) from any shape.
        step = np.full(30, 0.25, dtype=np.float32)
        after = c.push_pull("dense", step, 4090, clock=1)
        expected[4090:4100] = sgd(expected[4090:4100], step.reshape(10, 3), 0.5)
        np.testing.assert_array_equal(after, expected[4090:4100])

        # out= is filled in place and returned: a row of a larger array.
        block = np.zeros((2, 30), dtype=np.float32)
        row = block[1]
        self.assertIs(c.pull("dense", 4090, 4100, out=row), row)
        np.testing.assert_array_equal(block[1], expected[4090:4100].ravel())
        np.testing.assert_array_equal(block[0], 0)

        out = np.empty((10, 3), dtype=np.float32)
        self.assertIs(c.push_pull("dense", step, 0, clock=2, out=out), out)
        expected[0:10] = sgd(expected[0:10], step.reshape(10, 3), 0.5)
        np.testing.assert_array_equal(out, expected[0:10])
        np.testing.assert_array_equal(c.pull("dense"), expected)

    def test_push_pull_many(self):
        c = self.client
        c.create_table("many_a", size=5000, width=2, optimizer="sgd", learning_rate=0.5)
        c.create_table("many_b", size=3, optimizer="sgd", learning_rate=2.0)
        grads_a = np.full((4000, 2), 0.5, dtype=np.float32)
        grads_b = np.array([1, 2, 3], dtype=np.float32)
        out_a = np.empty((4000, 2), dtype=np.float32)
        out_b = np.empty(3, dtype=np.float32)
        # Keys [1000, 5000) of many_a (across a slice boundary) and all of many_b.
        c.push_pull_many([("many_a", grads_a, out_a), ("many_b", grads_b, out_b)], clock=0,
                         begins=[1000, 0])
        expected_a = np.zeros((5000, 2), dtype=np.float32)
        expected_a[1000:] = sgd(expected_a[1000:], grads_a, 0.5)
        expected_b = sgd(np.zeros(3, np.float32), grads_b, 2.0)
        np.testing.assert_array_equal(out_a, expected_a[1000:])
        np.testing.assert_array_equal(out_b, expected_b)
        np.testing.assert_array_equal(c.pull("many_a"), expected_a)
        np.testing.assert_array_equal(c.pull("many_b").ravel(), expected_b)

        # Checked before anything is sent: an out overlapping another op's
        # grads, a float64 op, a missing out, mismatched lengths.
        with self.assertRaisesRegex(ValueError, r"outs\[1\] shares memory with grads\[0\]"):
            c.push_pull_many([("many_b", grads_b, out_b), ("many_b", grads_b.copy(), grads_b)])
        with self.assertRaisesRegex(TypeError, r"grads\[1\] must be a float32 array"):
            c.push_pull_many([("many_b", grads_b, out_b),
                              ("many_b", grads_b.astype(np.float64), out_b.copy())])
        with self.assertRaisesRegex(ValueError, r"outs\[0\] is None"):
            c.push_pull_many([("many_b", grads_b, None)])
        with self.assertRaisesRegex(ValueError, "expected one of each per op"):
            c.push_pull_many([("many_b", grads_b, out_b)], begins=[0, 0])
        np.testing.assert_array_equal(c.pull("many_b").ravel(), expected_b)

    def test_pull_many_push_many_and_their_versions(self):
        c = self.client
        c.create_table("mv_a", size=5000, optimizer="sgd", learning_rate=1.0)
        c.create_table("mv_b", size=4, width=2, optimizer="sgd", learning_rate=1.0)
        a = np.empty(5000, dtype=np.float32)
        b = np.empty((4, 2), dtype=np.float32)
        info = c.pull_many([("mv_a", a), ("mv_b", b)], clock=0)
        self.assertEqual(info["versions"].dtype, np.uint64)
        self.assertEqual(info["versions"].shape, (2, 2))  # (ops, servers)
        self.assertEqual(info["versions"].max(), 0)  # nothing pushed yet
        self.assertGreaterEqual(info["waited"], 0.0)
        # Two pushes of both tables: every server holding some of a table's
        # keys reports version 2 for them; a server holding none, 0.
        for clock in (0, 1):
            versions = c.push_many([("mv_a", np.ones(5000, np.float32)),
                                    ("mv_b", np.ones(8, np.float32))], clock=clock)
        for op in range(2):
            self.assertEqual(versions[op].max(), 2)
            self.assertTrue(set(versions[op].tolist()) <= {0, 2}, versions)
        info = c.pull_many([("mv_a", a[1000:]), ("mv_b", b)], clock=2, begins=[1000, 0])
        np.testing.assert_array_equal(a[1000:], -2)
        np.testing.assert_array_equal(b, -2)
        np.testing.assert_array_equal(info["versions"][1], versions[1])
        info = c.push_pull_many([("mv_b", np.ones(8, np.float32), b)], clock=2)
        np.testing.assert_array_equal(b, -3)
        self.assertEqual(info["versions"].max(), 3)  # the push's version
        with self.assertRaisesRegex(ValueError, r"outs\[0\] has 3 values, not whole rows of "
                                                r"table 'mv_b' \(width 2\)"):
            c.pull_many([("mv_b", np.empty(3, np.float32))])
        with self.assertRaisesRegex(ValueError, r"outs\[1\] shares memory with outs\[0\]"):
            c.pull_many([("mv_b", b), ("mv_b", b)])
        with self.assertRaisesRegex(TypeError, r"ops\[0\] must be a tuple \(table, grads\)"):
            c.push_many([("mv_b", b, b)])
        definition = c.table_definition("mv_b")
        self.assertEqual((definition["width"], definition["num_keys"], definition["kind"]),
                         (2, 4, "TABLE_DENSE"))
        with self.assertRaises(ps.Error) as caught:
            c.table_definition("no_such_table")
        self.assertEqual(caught.exception.code, "NOT_FOUND")

    def test_sparse_keys(self):
        c = self.client
        c.create_table("sparse", width=2, sparse=True, optimizer="sgd", learning_rate=2.0)
        keys = np.array([7, 2**40 + 1, 2**63, 2**63 + 99, 2**64 - 1], dtype=np.uint64)
        np.testing.assert_array_equal(c.pull_keys("sparse", keys), np.zeros((5, 2), np.float32))

        grads = np.arange(10, dtype=np.float32).reshape(5, 2)
        c.push_keys("sparse", keys, grads, clock=0)
        expected = sgd(np.zeros((5, 2), np.float32), grads, 2.0)
        np.testing.assert_array_equal(c.pull_keys("sparse", keys), expected)

        # int64 keys (all >= 0) read as uint64; push_pull_keys into out.
        small = np.array([7, 2**40 + 1], dtype=np.int64)
        out = np.empty(4, dtype=np.float32)
        ones = np.ones((2, 2), dtype=np.float32)
        self.assertIs(c.push_pull_keys("sparse", small, ones, clock=1, out=out), out)
        expected[:2] = sgd(expected[:2], ones, 2.0)
        np.testing.assert_array_equal(out.reshape(2, 2), expected[:2])
        np.testing.assert_array_equal(c.pull_keys("sparse", keys), expected)

        stats = c.stats()
        self.assertEqual([s["server"] for s in stats], [0, 1])
        self.assertEqual(sum(s["tables"]["sparse"]["rows"] for s in stats), 5)

    def test_initializer_and_position(self):
        c = self.client
        c.create_table("init", size=500, initializer="uniform", init_low=-1.0, init_high=1.0,
                       seed=7, optimizer="adam", learning_rate=0.01, beta1=0.8)
        values = c.pull("init")
        self.assertTrue(((values >= -1) & (values < 1)).all())
        self.assertGreater(len(np.unique(values)), 400)
        # The same definition again is a no-op; a different one is refused.
        c.create_table("init", size=500, initializer="uniform", init_low=-1.0, init_high=1.0,
                       seed=7, optimizer="adam", learning_rate=0.01, beta1=0.8)
        with self.assertRaises(ps.Error) as caught:
            c.create_table("init", size=500)
        self.assertEqual(caught.exception.code, "ALREADY_EXISTS")
        position = c.position()
        self.assertEqual((position["restored_from"], position["restored_cut"]), ("", 0))
        self.assertIsInstance(position["clocks"], dict)
        self.assertEqual(c.num_servers, 2)


class ErrorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = ps.Client(servers=SERVERS)
        cls.client.create_table("errors", size=100, width=2)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def assertError(self, caught, codes, *fragments):
        error = caught.exception
        self.assertIsInstance(error, RuntimeError)
        self.assertIn(error.code, codes)
        for fragment in fragments:
            self.assertIn(fragment, error.message)
        self.assertEqual(str(error), f"{error.code}: {error.message}")

    def test_unreachable_server(self):
        with socket.socket() as s:  # a port nothing listens on once closed
            s.bind(("127.0.0.1", 0))
            address = f"127.0.0.1:{s.getsockname()[1]}"
        with self.assertRaises(ps.Error) as caught:
            ps.Client(servers=[address], connect_timeout=0.5)
        self.assertError(caught, {"UNAVAILABLE", "DEADLINE_EXCEEDED"}, address)

    def test_server_killed_after_connect(self):
        address = os.environ["PS_VICTIM"]
        with ps.Client(servers=[address], timeout=0.5, max_attempts=2) as c:
            c.create_table("victim", size=10)
            os.kill(int(os.environ["PS_VICTIM_PID"]), signal.SIGKILL)
            with self.assertRaises(ps.Error) as caught:
                c.pull("victim")
        self.assertError(caught, {"UNAVAILABLE", "DEADLINE_EXCEEDED"}, address)

    def test_unknown_table(self):
        with self.assertRaises(ps.Error) as caught:
            self.client.pull("no_such_table")
        self.assertError(caught, {"NOT_FOUND"}, "'no_such_table'")
        with self.assertRaises(ps.Error) as caught:
            self.client.push_keys("no_such_table", np.zeros(1, np.uint64), np.zeros(1, np.float32))
        self.assertError(caught, {"NOT_FOUND"}, "'no_such_table'")

    def test_bad_range(self):
        with self.assertRaises(ps.Error) as caught:
            self.client.pull("errors", 50, 40)
        self.assertError(caught, {"INVALID_ARGUMENT"}, "'errors'", "[50, 40)", "reversed")
        with self.assertRaises(ps.Error) as caught:
            self.client.pull("errors", 90, 110)
        self.assertError(caught, {"INVALID_ARGUMENT"}, "'errors'", "num_keys 100")
        with self.assertRaises(ps.Error) as caught:
            self.client.push("errors", np.zeros((20, 2), np.float32), 90)
        self.assertError(caught, {"INVALID_ARGUMENT"}, "'errors'")

    def test_error_pickles(self):
        error = ps.Error("NOT_FOUND", "table 't' not found")
        copy = pickle.loads(pickle.dumps(error))
        self.assertEqual((copy.code, copy.message), ("NOT_FOUND", "table 't' not found"))


class ValidationTest(unittest.TestCase):
    """Bad arrays are refused before anything is sent: the table stays as it was."""

    @classmethod
    def setUpClass(cls):
        cls.client = ps.Client(servers=SERVERS)
        cls.client.create_table("checked", size=8, width=2, learning_rate=1.0)
        cls.client.create_table("checked_rows", width=2, sparse=True, learning_rate=1.0)
        cls.keys = np.array([1, 2], dtype=np.uint64)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def setUp(self):
        self.before = self.client.pull("checked")
        self.rows_before = self.client.pull_keys("checked_rows", self.keys)

    def tearDown(self):
        np.testing.assert_array_equal(self.client.pull("checked"), self.before)
        np.testing.assert_array_equal(self.client.pull_keys("checked_rows", self.keys),
                                      self.rows_before)

    def assertRefused(self, error_type, fragment, call, *args, **kwargs):
        with self.assertRaises(error_type) as caught:
            call(*args, **kwargs)
        self.assertIn(fragment, str(caught.exception))

    def test_float64(self):
        c = self.client
        self.assertRefused(TypeError, "push: grads must be a float32 array; got dtype float64",
                           c.push, "checked", np.ones(16))
        self.assertRefused(TypeError, "push_keys: grads must be a float32",
                           c.push_keys, "checked_rows", self.keys, np.ones(4))
        self.assertRefused(TypeError, "pull: out must be a float32 array",
                           c.pull, "checked", out=np.zeros(16))
        self.assertRefused(TypeError, "push: grads must be a numpy.ndarray; got list",
                           c.push, "checked", [1.0] * 16)

    def test_non_contiguous(self):
        c = self.client
        strided = np.ones((8, 4), dtype=np.float32)[:, ::2]
        self.assertRefused(ValueError, "push: grads must be C-contiguous", c.push, "checked",
                           strided)
        self.assertRefused(ValueError, "push_pull: out must be C-contiguous", c.push_pull,
                           "checked", np.ones(16, np.float32),
                           out=np.zeros((2, 16), np.float32)[:, 0:8].T)
        self.assertRefused(ValueError, "pull_keys: keys must be C-contiguous", c.pull_keys,
                           "checked_rows", np.arange(4, dtype=np.uint64)[::2])

    def test_wrong_size(self):
        c = self.client
        self.assertRefused(ValueError, "not a whole number of rows of table 'checked' (width 2)",
                           c.push, "checked", np.ones(3, np.float32))
        self.assertRefused(ValueError, "pull: out has 15 elements (shape (15,)); expected 8 keys",
                           c.pull, "checked", out=np.zeros(15, np.float32))
        self.assertRefused(ValueError, "push_pull: out has 4 elements",
                           c.push_pull, "checked", np.ones(16, np.float32),
                           out=np.zeros(4, np.float32))
        self.assertRefused(ValueError, "push_keys: grads has 6 values; expected 2 keys x width 2",
                           c.push_keys, "checked_rows", self.keys, np.ones(6, np.float32))

    def test_read_only_out(self):
        out = np.zeros(16, dtype=np.float32)
        out.flags.writeable = False
        self.assertRefused(ValueError, "pull: out is read-only", self.client.pull, "checked",
                           out=out)
        self.assertRefused(ValueError, "push_pull: out is read-only", self.client.push_pull,
                           "checked", np.ones(16, np.float32), out=out)

    def test_keys(self):
        c = self.client
        grads = np.ones((2, 2), np.float32)
        self.assertRefused(ValueError, "push_keys: keys[1] is -2; keys must be >= 0",
                           c.push_keys, "checked_rows", np.array([1, -2]), grads)
        self.assertRefused(TypeError, "keys must be a uint64 array (or int64 >= 0); got dtype "
                           "int32", c.push_keys, "checked_rows", np.array([1, 2], np.int32),
                           grads)
        self.assertRefused(ValueError, "keys must be 1-D; got shape (1, 2)",
                           c.push_keys, "checked_rows", self.keys.reshape(1, 2), grads)

    def test_out_sharing_grads(self):
        grads = np.ones(16, dtype=np.float32)
        self.assertRefused(ValueError, "out shares memory with grads", self.client.push_pull,
                           "checked", grads, out=grads)

    def test_scalar_arguments(self):
        c = self.client
        self.assertRefused(ValueError, "pull: begin=-1", c.pull, "checked", -1)
        self.assertRefused(TypeError, "push: clock must be an int", c.push, "checked",
                           np.ones(16, np.float32), clock=1.5)
        self.assertRefused(ValueError,
                           "consistency='sync': expected one of 'async', 'bsp', 'bounded'",
                           ps.Client, servers=SERVERS, consistency="sync")
        self.assertRefused(ValueError, "only consistency='bounded' takes a staleness", ps.Client,
                           servers=SERVERS, consistency="bsp", staleness=2)

    def test_bad_table_definitions(self):
        c = self.client
        self.assertRefused(ValueError, "optimizer=adamw: expected one of sgd", c.create_table,
                           "never", size=4, optimizer="adamw")
        self.assertRefused(ValueError, "learning_rate must be > 0", c.create_table, "never",
                           size=4, learning_rate=-1.0)
        self.assertRefused(TypeError, "unexpected keyword argument 'momentun'", c.create_table,
                           "never", size=4, momentun=0.9)
        self.assertRefused(ValueError, "size (the number of keys) is required", c.create_table,
                           "never")
        self.assertRefused(ValueError, "eviction='fifo'", c.create_table, "never", width=2,
                           sparse=True, eviction="fifo")
        with self.assertRaises(ps.Error) as caught:
            c.pull("never")
        self.assertEqual(caught.exception.code, "NOT_FOUND")

    def test_closed_client(self):
        client = ps.Client(servers=SERVERS)
        client.close()
        client.close()
        self.assertRefused(ValueError, "the Client is closed", client.pull, "checked")


class ConsistencyTest(unittest.TestCase):
    """Two workers: a fast one reads round 1 while the slow one has not pushed round 0.

    "bsp" holds the read until the slow push; "async" does not. Whether the
    read returned is observed through events; the only timed wait is the
    window in which a held read must not return (a correct server never
    returns it, however long the window). The test thread runs Python while
    the read is held in C++: the read released the GIL.
    """

    HELD_WINDOW = 1.0  # seconds the bsp read is watched while it must be held
    BOUND = 20.0  # every other wait: far longer than any of them should take

    def workers(self, consistency, first_id):
        fast = ps.Client(servers=SERVERS, worker_id=first_id, consistency=consistency, lease=2.0)
        slow = ps.Client(servers=SERVERS, worker_id=first_id + 1, consistency=consistency,
                         lease=2.0)
        self.addCleanup(slow.close)
        self.addCleanup(fast.close)
        fast.wait_for_workers(2, timeout=self.BOUND)
        return fast, slow

    def read_in_thread(self, read):
        """Starts read() in a thread; returns (event set when it returned, its result)."""
        returned = threading.Event()
        result = {}

        def run():
            try:
                result["values"] = read()
            except Exception as err:  # reported by the test thread
                result["error"] = err
            returned.set()

        thread = threading.Thread(target=run)
        thread.start()
        self.addCleanup(thread.join, self.BOUND)
        return returned, result

    def finish(self, returned, result):
        self.assertTrue(returned.wait(self.BOUND), "the read never returned")
        if "error" in result:
            raise result["error"]
        return result["values"]

    def test_bsp_dense_read_waits_for_the_slow_push(self):
        fast, slow = self.workers("bsp", first_id=10)
        fast.create_table("bsp_dense", size=6, learning_rate=1.0)
        fast.pull("bsp_dense", clock=0)
        slow.pull("bsp_dense", clock=0)  # round 0 read by both: pushes of round 0 may apply
        ones = np.ones(6, dtype=np.float32)
        # The Downpour step: push round 0, then read at clock 1 (held for the slow worker).
        returned, result = self.read_in_thread(
            lambda: fast.push_pull("bsp_dense", ones, clock=0))
        self.assertFalse(returned.wait(self.HELD_WINDOW),
                         "bsp: the read of round 1 returned before the slow worker pushed round 0")
        slow.push("bsp_dense", 2 * ones, clock=0)
        values = self.finish(returned, result)
        np.testing.assert_array_equal(values, np.full((6, 1), -3.0, dtype=np.float32))

    def test_bsp_key_operations_do_not_wait(self):
        # Key lists take no part in the clocks (docs/design/consistency.md): with
        # bsp, the fast worker's key push and read of round 1 return while
        # the slow worker has done nothing, which pushes only afterwards.
        fast, slow = self.workers("bsp", first_id=20)
        fast.create_table("bsp_rows", width=2, sparse=True, learning_rate=1.0)
        keys = np.array([5, 2**63 + 5], dtype=np.uint64)
        ones = np.ones((2, 2), dtype=np.float32)
        returned, result = self.read_in_thread(
            lambda: fast.push_pull_keys("bsp_rows", keys, ones, clock=0))
        np.testing.assert_array_equal(self.finish(returned, result),
                                      np.full((2, 2), -1.0, dtype=np.float32))
        slow.push_keys("bsp_rows", keys, ones, clock=0)
        np.testing.assert_array_equal(fast.pull_keys("bsp_rows", keys),
                                      np.full((2, 2), -2.0, dtype=np.float32))

    def test_async_read_does_not_wait(self):
        fast, slow = self.workers("async", first_id=30)
        fast.create_table("async_dense", size=6, learning_rate=1.0)
        ones = np.ones(6, dtype=np.float32)
        returned, result = self.read_in_thread(
            lambda: fast.push_pull("async_dense", ones, clock=0))
        # The slow worker pushes only once the fast read has returned: had it
        # waited for the slow push, this would time out.
        values = self.finish(returned, result)
        np.testing.assert_array_equal(values, np.full((6, 1), -1.0, dtype=np.float32))
        slow.push("async_dense", ones, clock=0)
        np.testing.assert_array_equal(fast.pull("async_dense", clock=1),
                                      np.full((6, 1), -2.0, dtype=np.float32))


class CheckpointTest(unittest.TestCase):
    def test_checkpoint_now(self):
        servers = os.environ["PS_CHECKPOINTED"]
        with ps.Client(servers=servers) as c:
            c.create_table("saved", size=100, learning_rate=1.0)
            c.push("saved", np.ones(100, dtype=np.float32), clock=0)
        first = ps.checkpoint(servers, timeout=10)
        self.assertTrue(first["path"].startswith(os.environ["PS_CHECKPOINT_DIR"]), first)
        self.assertTrue(os.path.exists(os.path.join(first["path"], "MANIFEST")), first)
        self.assertEqual(first["base_sequence"], 0)
        self.assertGreater(first["bytes"], 0)
        second = ps.checkpoint(servers.split(","), full=True, timeout=10)
        self.assertEqual(second["sequence"], first["sequence"] + 1)
        self.assertEqual(second["base_sequence"], 0)
        # A client asks its own cluster, reached as it reaches it.
        with ps.Client(servers=servers) as c:
            third = c.checkpoint(full=True, timeout=10)
        self.assertEqual(third["sequence"], second["sequence"] + 1)

    def test_servers_without_checkpoints(self):
        with self.assertRaises(ps.Error) as caught:
            ps.checkpoint(SERVERS, timeout=10)
        self.assertEqual(caught.exception.code, "FAILED_PRECONDITION")
        self.assertIn("does not coordinate checkpoints", caught.exception.message)


class ModuleTest(unittest.TestCase):
    def test_help_is_useful(self):
        text = ps.__doc__
        self.assertIn("ps.Client(servers=", text)
        for name in ["Client", "Error", "checkpoint"]:
            self.assertTrue(getattr(ps, name).__doc__)
        for name in ["pull", "push", "push_pull", "pull_keys", "push_keys", "push_pull_keys",
                     "pull_many", "push_many", "push_pull_many", "table_definition",
                     "create_table", "wait_for_workers", "stats", "position", "checkpoint",
                     "close"]:
            self.assertTrue(getattr(ps.Client, name).__doc__, name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
