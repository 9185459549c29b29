"""paramserver.torch against real ps_server processes (started by torch_test.sh).

  torch_test.py                 the tests (unittest); PS_SERVERS: a 2-server cluster
  torch_test.py resume_train    a Trainer's 25 steps with checkpoints (PS_SERVERS: a
                                1-server cluster with --checkpoint_dir); saves its
                                final values to PS_SNAPSHOT
  torch_test.py resume_continue after the server restored: the values are the saved
                                ones, and a Trainer with resume continues at clock 25
"""

import contextlib
import io
import os
import re
import sys
import tempfile
import threading
import time
import unittest

import numpy as np
import torch
from torch import nn
from torch.nn import functional

import paramserver as ps
import paramserver.flags as psflags
from paramserver.torch import (RowCache, ServerParameters, ShardedEmbeddingBag, Trainer, auc,
                               binary_metrics)

SERVERS = os.environ.get("PS_SERVERS", "")
_table_counter = iter(range(1 << 30))


def fresh(name):
    """A table name no other test uses (the tests share the servers)."""
    return f"{name}_{next(_table_counter)}"


def sgd(values, grads, rate):
    """What the servers' SGD computes, in float32."""
    return (values - np.float32(rate) * grads).astype(np.float32)


class RecordingClient:
    """A Client that records the clock of every push_keys, and otherwise is the client."""

    def __init__(self, client):
        self._client = client
        self.push_clocks = []

    def __getattr__(self, name):
        return getattr(self._client, name)

    def push_keys(self, table, keys, grads, *, clock=0):
        self.push_clocks.append(clock)
        return self._client.push_keys(table, keys, grads, clock=clock)


class CutAheadClient:
    """A Client whose checkpoint() returns only once the worker has pushed
    the round `ahead` rounds past its clock when asked, or has left (as a cut
    marked ahead of the worker waits for its rounds), and fails after 20 s;
    records the clocks it was asked at. Otherwise it is the client."""

    def __init__(self, client, ahead):
        self._client = client
        self._ahead = ahead
        self._pushed = -1
        self._left = False
        self._cond = threading.Condition()
        self.asked_at = []

    def __getattr__(self, name):
        return getattr(self._client, name)

    def push_pull_many(self, tables, *, clock=0):
        info = self._client.push_pull_many(tables, clock=clock)
        with self._cond:
            self._pushed = max(self._pushed, clock)
            self._cond.notify_all()
        return info

    def leave(self):
        self._client.leave()
        with self._cond:
            self._left = True
            self._cond.notify_all()

    def checkpoint(self, *, full=False, timeout=60.0):
        with self._cond:
            asked = self._pushed + 1
            self.asked_at.append(asked)
            if not self._cond.wait_for(lambda: self._left or self._pushed >= asked + self._ahead,
                                       timeout=20):
                raise RuntimeError(f"the cut at {asked + self._ahead + 1} waited 20 s for rounds "
                                   f"the worker did not push (it pushed up to {self._pushed})")
        return {"path": "ckpt", "cut": asked + self._ahead + 1, "bytes": 0, "seconds": 0.0}


# ---- pieces without servers --------------------------------------------------


class RowCacheTest(unittest.TestCase):
    def test_serves_a_row_up_to_staleness_clocks_after_its_pull(self):
        cache = RowCache(width=2, staleness=2, capacity=10)
        keys = np.array([5, 2**64 - 1], np.uint64)
        cache.insert(keys, 3, np.array([[1, 2], [3, 4]], np.float32))
        for clock, served in ((3, True), (4, True), (5, True), (6, False)):
            out = np.zeros((3, 2), np.float32)
            hit = cache.lookup(np.array([5, 9, 2**64 - 1], np.uint64), clock, out)
            np.testing.assert_array_equal(hit, [served, False, served])
            if served:
                np.testing.assert_array_equal(out, [[1, 2], [0, 0], [3, 4]])
        self.assertEqual((cache.hits, cache.misses), (6, 6))
        # Pulled again at 6: served until 8 with the new values.
        cache.insert(np.array([5], np.uint64), 6, np.array([[7, 8]], np.float32))
        out = np.zeros((1, 2), np.float32)
        self.assertTrue(cache.lookup(np.array([5], np.uint64), 8, out)[0])
        np.testing.assert_array_equal(out, [[7, 8]])

    def test_full_cache_drops_the_rows_pulled_longest_ago(self):
        cache = RowCache(width=1, staleness=100, capacity=16)
        for clock in range(4):  # keys 4c .. 4c + 3 at clock c
            keys = np.arange(4 * clock, 4 * clock + 4, dtype=np.uint64)
            cache.insert(keys, clock, keys.astype(np.float32).reshape(-1, 1))
        self.assertEqual(len(cache), 16)
        cache.insert(np.array([100, 101], np.uint64), 4, np.ones((2, 1), np.float32))
        self.assertLessEqual(len(cache), 16)
        out = np.zeros((20, 1), np.float32)
        hit = cache.lookup(np.array(list(range(16)) + [100, 101, 102, 103], np.uint64), 4, out)
        self.assertFalse(hit[:2].any(), "the oldest rows (clock 0) should have made room")
        self.assertTrue(hit[4:16].all(), "rows pulled later should have stayed")
        np.testing.assert_array_equal(hit[16:], [True, True, False, False])
        np.testing.assert_array_equal(out[4:16, 0], np.arange(4, 16))


class MetricsTest(unittest.TestCase):
    def test_auc_matches_the_pairwise_definition_with_ties(self):
        rng = np.random.default_rng(7)
        labels = (rng.random(400) < 0.3).astype(np.float32)
        scores = np.round(rng.random(400) + 0.3 * labels, 1)  # many ties
        positives, negatives = scores[labels > 0.5], scores[labels < 0.5]
        wins = (positives[:, None] > negatives[None, :]).sum()
        ties = (positives[:, None] == negatives[None, :]).sum()
        expected = (wins + 0.5 * ties) / (positives.size * negatives.size)
        self.assertAlmostEqual(auc(labels, scores), expected, places=12)
        self.assertEqual(auc(np.ones(3), np.array([0.1, 0.5, 0.9])), 0.5)
        m = binary_metrics(np.array([0, 1, 1, 0]), np.array([0.2, 0.9, 0.4, 0.1]))
        self.assertEqual((m["auc"], m["accuracy"]), (1.0, 0.75))
        self.assertAlmostEqual(m["logloss"], -np.mean(np.log([0.8, 0.9, 0.4, 0.9])), places=12)


class FlagsTest(unittest.TestCase):
    def parser(self):
        import argparse
        p = argparse.ArgumentParser()
        psflags.add_cluster_flags(p)
        psflags.add_optimizer_flags(p)
        Trainer.add_flags(p)
        return p

    def test_ps_workers_flag_names_and_errors(self):
        args = psflags.parse(self.parser(), ["--servers=h:1", "--worker_index=1",
                                             "--num_workers=2", "--tls_ca=ca.pem",
                                             "--token_file=t", "--key_caching", "--resume",
                                             "--checkpoint_every_steps=5"])
        self.assertEqual(psflags.who(args), "worker 1/2")
        self.assertEqual(psflags.optimizer(args)["optimizer"], "adagrad")
        for argv, message in ((["--servers=h:1", "--worker_index=2", "--num_workers=2"],
                               r"--worker_index=2: must be in \[0, 2\)"),
                              ([], "give exactly one of --servers"),
                              (["--servers=h:1", "--tls_cert=c.pem"], "--tls_cert and --tls_key")):
            stderr = io.StringIO()
            with self.subTest(argv=argv), contextlib.redirect_stderr(stderr), \
                    self.assertRaises(SystemExit) as exit:
                psflags.parse(self.parser(), argv)
            self.assertEqual(exit.exception.code, 2)
            self.assertRegex(stderr.getvalue(), message)

    def test_token_file(self):
        with tempfile.NamedTemporaryFile("w", dir=os.environ.get("TEST_TMPDIR")) as f:
            f.write("  s3cret-token\n")
            f.flush()
            self.assertEqual(psflags.read_token(f.name), "s3cret-token")
        with self.assertRaisesRegex(ValueError, "--token_file=/no/such/file: cannot read it"):
            psflags.read_token("/no/such/file")


# ---- against servers ---------------------------------------------------------


class ServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = ps.Client(servers=SERVERS)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()


class EmbeddingBagTest(ServerTest):
    # Keys over the whole uint64 range (both servers hold some); 3 is used twice
    # in bag 1 and once in bag 0, 7 three times.
    IDS = np.array([3, 2**63 + 5, 3, 7, 2**64 - 1, 7, 7, 123456789], np.uint64)
    OFFSETS = np.array([0, 2, 5, 7], np.int64)

    def local_bags(self, rows, inverse, mode, weights=None):
        weight = torch.from_numpy(rows.copy()).requires_grad_()
        out = functional.embedding_bag(torch.from_numpy(inverse), weight,
                                       torch.from_numpy(self.OFFSETS), mode=mode,
                                       per_sample_weights=weights)
        return weight, out

    def check_step(self, mode, weights):
        table = fresh(f"bag_{mode}")
        bag = ShardedEmbeddingBag(table, 4, mode, {"optimizer": "sgd", "learning_rate": 0.5},
                                  client=self.client)
        unique, inverse = np.unique(self.IDS, return_inverse=True)
        before = self.client.pull_keys(table, unique)
        untouched = np.array([4, 2**63 + 6], np.uint64)
        untouched_before = self.client.pull_keys(table, untouched)
        self.assertTrue((np.abs(before) <= 0.05).all() and np.abs(before).max() > 0,
                        "rows start uniform in +-0.05")
        torch_weights = None if weights is None else torch.from_numpy(weights)
        out = bag(self.IDS, self.OFFSETS, weights)
        weight, expected = self.local_bags(before, inverse, mode, torch_weights)
        torch.testing.assert_close(out, expected, rtol=0, atol=0)
        target = torch.from_numpy(np.random.default_rng(1).standard_normal((4, 4), np.float32))
        (out * target).sum().backward()  # pushes the rows' gradients
        (expected * target).sum().backward()
        after = self.client.pull_keys(table, unique)
        np.testing.assert_allclose(after, sgd(before, weight.grad.numpy(), 0.5), rtol=1e-6,
                                   atol=1e-7)
        self.assertGreater(np.abs(after - before).min(), 0, "every used row moved")
        np.testing.assert_array_equal(self.client.pull_keys(table, untouched), untouched_before)
        self.assertEqual((bag.keys_used, bag.keys_pulled, bag.keys_pushed, bag.pushes),
                         (5, 5, 5, 1))
        return table, bag

    def test_sum_pulls_and_pushes_land_on_the_right_rows(self):
        weights = np.linspace(0.5, 2.0, len(self.IDS)).astype(np.float32)
        table, _ = self.check_step("sum", weights)
        # A key the batch did not use reads as the initializer wrote it.
        row = self.client.pull_keys(table, np.array([8], np.uint64))
        self.assertTrue((np.abs(row) <= 0.05).all())

    def test_mean(self):
        self.check_step("mean", None)

    def test_two_dimensional_ids_and_evaluation_do_not_push(self):
        table = fresh("bag_eval")
        bag = ShardedEmbeddingBag(table, 3, optimizer="sgd", client=self.client)
        ids = torch.tensor([[1, 2], [2, 3]])
        bag.eval()
        out = bag(ids)
        self.assertFalse(out.requires_grad)
        rows = self.client.pull_keys(table, np.array([1, 2, 3], np.uint64))
        torch.testing.assert_close(out, torch.from_numpy(np.stack([rows[0] + rows[1],
                                                                   rows[1] + rows[2]])))
        bag.train()
        with torch.no_grad():
            bag(ids)
        self.assertEqual((bag.keys_pulled, bag.pushes), (0, 0))

    def test_clock_moves_on_after_each_push(self):
        recorder = RecordingClient(self.client)
        bag = ShardedEmbeddingBag(fresh("bag_clock"), 2, optimizer="sgd", client=recorder)
        ids = np.array([[1, 2]], np.uint64)
        for _ in range(3):
            bag(ids).sum().backward()
        # Two forwards before one backward share a clock.
        (bag(ids).sum() + bag(ids).sum()).backward()
        bag.clock = 10
        bag(ids).sum().backward()
        self.assertEqual(recorder.push_clocks, [0, 1, 2, 3, 3, 10])

    def test_row_cache_reuses_rows_within_the_bound(self):
        table = fresh("bag_cache")
        bag = ShardedEmbeddingBag(table, 2, optimizer={"optimizer": "sgd", "learning_rate": 1.0},
                                  client=self.client, row_cache_staleness=2, init_range=0)
        other = ps.Client(servers=SERVERS, worker_id=1)
        one = np.array([[5]], np.uint64)
        self.addCleanup(other.close)

        def read(clock, ids=one):
            bag.clock = clock
            with torch.no_grad():  # a training forward without a push
                return bag.train()._pull_cached(ids.reshape(-1), clock).copy()

        np.testing.assert_array_equal(read(0), [[0, 0]])
        other.push_keys(table, np.array([5], np.uint64), np.ones((1, 2), np.float32))
        np.testing.assert_array_equal(read(1), [[0, 0]])  # cached at 0, reused at 1 and 2
        np.testing.assert_array_equal(read(2), [[0, 0]])
        self.assertEqual(bag.keys_pulled, 1)
        # A new key at clock 2 is pulled, the cached one not.
        both = read(2, np.array([5, 6], np.uint64))
        np.testing.assert_array_equal(both, [[0, 0], [0, 0]])
        self.assertEqual(bag.keys_pulled, 2)
        np.testing.assert_array_equal(read(3), [[-1, -1]])  # 3 > 0 + 2: pulled again
        self.assertEqual(bag.keys_pulled, 3)
        # Through forward and backward: the step at clock 4 reuses both rows.
        bag.clock = 4
        out = bag(np.array([[5, 6]], np.uint64))
        np.testing.assert_array_equal(out.detach().numpy(), [[-1, -1]])
        self.assertEqual(bag.keys_pulled, 3)
        out.sum().backward()
        self.assertEqual(bag.keys_pushed, 2)  # pushes are not affected by the cache
        np.testing.assert_array_equal(self.client.pull_keys(table, np.array([5, 6], np.uint64)),
                                      [[-2, -2], [-1, -1]])

    def test_key_list_caching_sends_the_pushed_keys_once(self):
        def hits():
            return sum(s["key_list_hits"] for s in self.client.stats())

        keys = np.arange(1000, 1400, dtype=np.uint64).reshape(4, 100)
        for caching, expect_hits in ((False, False), (True, True)):
            with ps.Client(servers=SERVERS, key_list_caching=caching) as client:
                bag = ShardedEmbeddingBag(fresh("bag_lists"), 2, optimizer="sgd", client=client)
                before = hits()
                bag(keys).sum().backward()  # the push names the pull's key lists
                self.assertEqual(hits() > before, expect_hits, f"key_list_caching={caching}")

    def test_an_existing_table_must_fit(self):
        table = fresh("bag_existing")
        ShardedEmbeddingBag(table, 4, optimizer="adagrad", client=self.client)
        ShardedEmbeddingBag(table, 4, client=self.client)  # optimizer=None: uses it
        with self.assertRaisesRegex(ValueError, f"table '{table}' on the servers has width 4, "
                                                "not 5"):
            ShardedEmbeddingBag(table, 5, client=self.client)
        with self.assertRaises(ps.Error) as err:
            ShardedEmbeddingBag(fresh("bag_missing"), 4, client=self.client)
        self.assertEqual(err.exception.code, "NOT_FOUND")
        with self.assertRaisesRegex(ValueError, "mode='max'"):
            ShardedEmbeddingBag(table, 4, "max", client=self.client)


class ServerParametersTest(ServerTest):
    def test_step_pushes_gradients_and_reads_the_values_after(self):
        torch.manual_seed(0)
        model = nn.Linear(3, 2)
        params = ServerParameters(model.named_parameters(), self.client, prefix=fresh("linear"),
                                  optimizer={"optimizer": "sgd", "learning_rate": 0.5})
        params.pull()
        bound = (6.0 / 5) ** 0.5
        w = model.weight.detach().numpy().copy()
        self.assertTrue((np.abs(w) <= bound).all() and np.abs(w).max() > 0, "Glorot-uniform")
        np.testing.assert_array_equal(model.bias.detach().numpy(), [0, 0])
        x = torch.tensor([[1.0, -2.0, 0.5], [0.0, 1.0, 1.0]])
        for step in range(3):
            w, b = model.weight.detach().numpy().copy(), model.bias.detach().numpy().copy()
            params.zero_grad()
            model(x).pow(2).sum().backward()
            gw, gb = model.weight.grad.numpy().copy(), model.bias.grad.numpy().copy()
            params.step()
            np.testing.assert_allclose(model.weight.detach().numpy(), sgd(w, gw, 0.5), rtol=1e-6)
            np.testing.assert_allclose(model.bias.detach().numpy(), sgd(b, gb, 0.5), rtol=1e-6)
            self.assertEqual(params.clock, step + 1)
        # The servers hold what the tensors hold.
        table = params.tables[0][0]
        np.testing.assert_array_equal(self.client.pull(table).reshape(2, 3),
                                      model.weight.detach().numpy())
        self.assertEqual((params.pushes, params.max_staleness), (3, 0))

    def test_bsp_with_two_workers(self):
        prefix = fresh("bsp")
        clients = [ps.Client(servers=SERVERS, worker_id=10 + w, consistency="bsp", lease=2.0)
                   for w in range(2)]
        for c in clients:
            self.addCleanup(c.close)
        models = [nn.Linear(2, 2) for _ in range(2)]
        params = [ServerParameters(m.parameters(), c, prefix=prefix,
                                   optimizer={"optimizer": "sgd", "learning_rate": 1.0})
                  for m, c in zip(models, clients)]
        seen = [[], []]
        errors = []

        def work(w):
            try:
                clients[w].wait_for_workers(2, timeout=30)
                params[w].pull()
                start = models[w].weight.detach().numpy().copy()
                for step in range(5):
                    if w == 1:
                        time.sleep(0.2)  # the slow worker: worker 0 must wait for its push
                    params[w].zero_grad()
                    models[w].weight.grad = torch.full((2, 2), float(w + 1))
                    # No gradient for the bias: zeros are pushed, its rounds go on.
                    params[w].step()
                    seen[w].append(start - models[w].weight.detach().numpy())
                clients[w].leave()
            except Exception as err:  # reported by the main thread
                errors.append(err)

        threads = [threading.Thread(target=work, args=(w,)) for w in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        # After step t every worker read both workers' pushes of rounds <= t:
        # 1 + 2 per round, never a round short (BSP).
        for w in range(2):
            for step, moved in enumerate(seen[w]):
                np.testing.assert_allclose(moved, np.full((2, 2), 3.0 * (step + 1)), rtol=1e-6)
        self.assertGreater(params[0].waited_seconds, 0.5, "worker 0 waited for the slow one")
        np.testing.assert_array_equal(models[0].bias.detach().numpy(), [0, 0])
        for p in params:
            self.assertLessEqual(p.max_staleness, 1)
            self.assertEqual(p.max_clock_lag, 0)


# ---- the Trainer -------------------------------------------------------------


class ToyCtr:
    """Examples of 3 feature ids each (one bag): ids 0..24 for clicks, 25..49
    for the others. Supports len() and data[indices], as Trainer needs."""

    def __init__(self, n, seed=0):
        rng = np.random.default_rng(seed)
        self.labels = (rng.random(n) < 0.5).astype(np.float32)
        ids = rng.integers(0, 25, size=(n, 3)) + 25 * (1 - self.labels[:, None]).astype(np.int64)
        self.ids = ids.astype(np.uint64)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, rows):
        batch = ToyCtr.__new__(ToyCtr)
        batch.ids, batch.labels = self.ids[rows], self.labels[rows]
        return batch


class CtrModel(nn.Module):
    def __init__(self, client, prefix, optimizer="adagrad"):
        super().__init__()
        self.emb = ShardedEmbeddingBag(f"{prefix}/emb", 4, "sum", optimizer, client=client)
        self.mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        self.params = ServerParameters(self.mlp.named_parameters(), client,
                                       prefix=f"{prefix}/mlp", optimizer=optimizer)

    def forward(self, batch):
        return self.mlp(self.emb(batch.ids)).squeeze(1)

    def loss(self, batch):
        return functional.binary_cross_entropy_with_logits(
            self(batch), torch.from_numpy(batch.labels), reduction="sum")


SPARSE_LINE = re.compile(
    r"^worker 0/1: epoch \d+ step \d+: \d+ examples, \d+ examples/s, \d+ keys/s "
    r"\(\d+% pulled, \d+% pushed\), log-loss \d+\.\d{4}$")
DENSE_LINE = re.compile(
    r"^worker 0/1 epoch \d+ step \d+ loss \d+\.\d{4} examples/s \d+ staleness mean \d+\.\d "
    r"max \d+ clock lag max \d+ waited \d+\.\d\ds of \d+\.\d\ds( \(epoch end\))?$")


class TrainerTest(ServerTest):
    def linear_trainer(self, client, prefix, **options):
        """A Trainer of nn.Linear(2, 1) (loss: the sum of its outputs) whose
        parameters are tables named after `prefix`, pushed through `client`."""
        model = nn.Linear(2, 1)
        params = ServerParameters(model.parameters(), client, prefix=fresh(prefix),
                                  optimizer="sgd")
        return Trainer(model, client, lambda b: model(b[0]).sum(), params=params, **options)

    def run_trainer(self, trainer, data):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            stats = trainer.fit(data)
        return stats, out.getvalue().splitlines()

    def test_embedding_model_prints_ps_workers_sparse_lines_and_curve(self):
        client = ps.Client(servers=SERVERS, worker_id=20, lease=2.0)
        self.addCleanup(client.close)
        model = CtrModel(client, fresh("trainer_ctr"))
        curve = os.path.join(os.environ.get("TEST_TMPDIR", tempfile.gettempdir()), "curve.csv")
        trainer = Trainer(model, client, model.loss, params=model.params, loss_reduction="sum",
                          epochs=2, batch_size=50, progress_seconds=0, curve_csv=curve)
        stats, lines = self.run_trainer(trainer, ToyCtr(400))
        self.assertEqual((stats["steps"], stats["examples"], stats["clock"]), (16, 800, 16))
        progress = [line for line in lines if ": epoch " in line]
        self.assertEqual(len(progress), 16, lines)
        for line in progress:
            self.assertRegex(line, SPARSE_LINE)
        self.assertRegex(lines[-3], r"^worker 0/1: done: 16 steps, 800 examples in \d+\.\ds "
                                    r"\(\d+ examples/s, \d+ keys/s, \d+ keys pulled\), "
                                    r"last-epoch log-loss \d\.\d{4}, 0 bad lines skipped$")
        self.assertRegex(lines[-2], r"^worker 0/1: dense tables: staleness mean 0\.0 max 0, "
                                    r"clock lag max \d+, waited \d+\.\d\ds$")
        self.assertRegex(lines[-1], r"^RESULT worker=0 partition=0 seconds=[0-9.]+ examples=800 "
                                    r"keys=\d+ keys_pulled=\d+ keys_pushed=\d+ dense_bytes=\d+ "
                                    r"allreduce_rounds=0$")
        self.assertEqual(model.emb.clock, 15)  # the last step's
        self.assertEqual(model.params.clock, 16)
        # It learned: click and no-click examples use different ids.
        probabilities = trainer.predict(ToyCtr(400, seed=1), lambda b: torch.sigmoid(model(b)))
        labels = ToyCtr(400, seed=1).labels
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            metrics = trainer.report_auc(labels, probabilities)
        self.assertGreater(metrics["auc"], 0.6)
        self.assertIn(f"RESULT test_auc={metrics['auc']:.4f} test_accuracy=", out.getvalue())
        with open(curve) as f:
            rows = f.read().splitlines()
        self.assertEqual(rows[0], "seconds,epoch,step,examples,loss,examples_per_second,"
                                  "staleness,test_metric,test_value")
        self.assertEqual(len(rows), 18)
        self.assertTrue(rows[-1].endswith(f",auc,{metrics['auc']:.4f}"), rows[-1])

    def test_dense_model_prints_ps_workers_lines_and_a_bar(self):
        try:
            import tqdm  # noqa: F401
        except ImportError:
            self.fail("the bar needs Debian's python3-tqdm (deploy/setup.sh installs it)")
        client = ps.Client(servers=SERVERS, worker_id=21, lease=2.0)
        self.addCleanup(client.close)
        model = nn.Sequential(nn.Linear(4, 3))
        params = ServerParameters(model.parameters(), client, prefix=fresh("trainer_dense"),
                                  optimizer="adagrad")
        x = torch.randn(64, 4)
        y = (x[:, 0] > 0).long()
        trainer = Trainer(model, client, lambda b: functional.cross_entropy(model(b[0]), b[1]),
                          params=params, batch_size=16, epochs=2, progress_seconds=1e9,
                          progress_bar=True)
        bar = io.StringIO()
        with contextlib.redirect_stderr(bar):
            stats, lines = self.run_trainer(trainer, (x, y))
        self.assertEqual(stats["steps"], 8)
        epoch_ends = [line for line in lines if line.endswith("(epoch end)")]
        self.assertEqual(len(epoch_ends), 2, lines)
        for line in epoch_ends:
            self.assertRegex(line, DENSE_LINE)
        self.assertRegex(lines[-3], r"^worker 0/1: done: 8 steps, 128 examples in \d+\.\ds "
                                    r"\(\d+ examples/s\), last-epoch loss \d\.\d{4}, staleness "
                                    r"mean 0\.0 max 0, clock lag max \d+, waited \d+\.\d\ds "
                                    r"\(\d+\.\d% idle\)$")
        self.assertRegex(lines[-2], r"^worker 0/1: clock lag histogram of its pulls "
                                    r"\(0\.\.16\+\): \d+( \d+){16}$")
        self.assertEqual(sum(map(int, lines[-2].split(": ")[-1].split())), 9)  # 1 + 8 steps
        self.assertRegex(lines[-1], r"^RESULT worker=0 seconds=[0-9.]+ wait_seconds=[0-9.]+ "
                                    r"examples=128 algorithm=downpour pushes=8 pulls=9 ")
        self.assertRegex(bar.getvalue(), r"worker 0/1: 100%.*8/8")

    def test_a_checkpoint_due_while_the_last_is_taken_is_skipped_not_waited_for(self):
        # Each checkpoint's cut lies 3 rounds past the worker when asked,
        # one is due every 2 steps: waiting for the last at the next due
        # step would wait for rounds the waiting worker never pushes.
        client = ps.Client(servers=SERVERS, worker_id=23)
        self.addCleanup(client.close)
        cuts = CutAheadClient(client, ahead=3)
        trainer = self.linear_trainer(cuts, "trainer_cut_ahead", batch_size=1, max_steps=12,
                                      checkpoint_every_steps=2, progress_seconds=1e9)
        stats, lines = self.run_trainer(trainer, (torch.ones(12, 2),))
        self.assertEqual(stats["steps"], 12)
        skipped = [line for line in lines if "skipped: the one asked at step" in line]
        self.assertTrue(skipped, lines)
        self.assertRegex(skipped[0], r"^worker 0/1: checkpoint at step \d+ skipped: the one "
                                     r"asked at step \d+ is still being taken$")
        # Steps 2-10 (the last step's is the final one, asked once left).
        self.assertEqual(len(cuts.asked_at), 5 - len(skipped) + 1, lines)

    def test_progress_points_reach_the_servers(self):
        client = ps.Client(servers=SERVERS, worker_id=24)
        self.addCleanup(client.close)
        trainer = self.linear_trainer(client, "trainer_progress", batch_size=2,
                                      progress_seconds=0)
        self.run_trainer(trainer, (torch.ones(8, 2),))
        for server in client.stats():
            workers = [w for w in server["workers"] if w["worker_id"] == 24]
            self.assertEqual(len(workers), 1, server["workers"])
            self.assertEqual(workers[0]["job"], "pytorch")
            self.assertEqual([p["step"] for p in workers[0]["points"]][-1], 4)
        with self.assertRaises(ps.Error):
            client.report_progress("pytorch", 1.0, 1, 1, 10, -1.0, 1.0, 0.0)

    def test_resume_without_a_restored_checkpoint_starts_at_zero(self):
        client = ps.Client(servers=SERVERS, worker_id=22)
        self.addCleanup(client.close)
        trainer = self.linear_trainer(client, "trainer_resume", batch_size=4, resume=True,
                                      progress_seconds=1e9)
        stats, lines = self.run_trainer(trainer, (torch.ones(8, 2),))
        self.assertIn("worker 0/1: --resume: the servers restored no checkpoint; starting from "
                      "the beginning", lines)
        self.assertEqual(stats["clock"], 2)


# ---- resume across a restart (torch_test.sh runs the phases) -----------------


def resume_phase(phase):
    """Trains CtrModel through a Trainer on a 1-server cluster that checkpoints
    (resume_train), or checks and continues it once the server restored the
    newest checkpoint (resume_continue)."""
    snapshot = os.environ["PS_SNAPSHOT"]
    client = ps.Client(servers=SERVERS, worker_id=0, lease=2.0)
    model = CtrModel(client, "resumed")
    data = ToyCtr(400)
    probe = np.arange(50, dtype=np.uint64)
    if phase == "resume_train":
        trainer = Trainer(model, client, model.loss, params=model.params, loss_reduction="sum",
                          batch_size=10, max_steps=25, checkpoint_every_steps=10,
                          progress_seconds=1e9)
        trainer.fit(data)
        model.params.pull(clock=0)
        np.savez(snapshot, rows=client.pull_keys("resumed/emb", probe),
                 **{name: p.detach().numpy() for name, p in model.mlp.named_parameters()})
    else:
        saved = np.load(snapshot)
        model.params.pull(clock=0)
        for name, p in model.mlp.named_parameters():
            np.testing.assert_array_equal(p.detach().numpy(), saved[name], err_msg=name)
        np.testing.assert_array_equal(client.pull_keys("resumed/emb", probe), saved["rows"])
        print("restored values: the MLP and the embedding rows as the first run left them")
        recorder = RecordingClient(client)
        model.emb.client = recorder
        trainer = Trainer(model, client, model.loss, params=model.params, loss_reduction="sum",
                          batch_size=10, max_steps=30, resume=True, progress_seconds=1e9)
        stats = trainer.fit(data)
        assert recorder.push_clocks == [25, 26, 27, 28, 29], recorder.push_clocks
        assert (stats["steps"], stats["clock"], model.params.clock) == (30, 30, 30), stats
        print("resumed pushes at clocks", recorder.push_clocks)
    client.close()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("resume_"):
        resume_phase(sys.argv[1])
    else:
        unittest.main()
