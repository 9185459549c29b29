"""Trainer: ps_worker's training loop for a PyTorch model on the servers.

One process is one worker, as ps_worker is. fit(data) runs epochs over this
worker's examples in minibatches (reshuffled every epoch from the seed and
the worker index); each step
  1. sets the clock of every ShardedEmbeddingBag of the model,
  2. computes loss(batch) and back-propagates it (the bags push their rows'
     gradients during backward),
  3. pushes the dense parameters' gradients and reads their new values
     (ServerParameters.step()),
all stamped with the step's clock. Under "bounded" or "bsp" consistency it
first waits for every worker to join.

It prints ps_worker's lines (worker/train/trainer.cc for a model of dense
parameters only, worker/train/sparse_trainer.cc for one with embedding
bags), writes ps_worker's curve CSV, and draws a tqdm bar on stderr.

Checkpoints: the servers take them (docs/guide/checkpoints.md). With
checkpoint_every_steps = N, worker 0 asks for one every N of its steps, from
a thread of its own (the cut waits for every worker with a lease, this one
included, so training goes on meanwhile; one due while the last is still
being taken is skipped, said in a line), and once more when it is done. With resume, the worker reads its
clock c in the checkpoint the servers restored (Client.position(): the
smallest over the model's tables), skips its first c steps drawing the same
shuffles, and continues at that epoch, step and clock.

Not thread-safe: one fit at a time.
"""

import argparse
import sys
import math
import resource
import threading
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import torch
from torch import nn

from ._embedding import ShardedEmbeddingBag
from ._metrics import binary_metrics
from ._parameters import ServerParameters
from ._progress import Progress


def _select(data: Any, indices: np.ndarray) -> Any:
    """The examples `indices` of data: data[indices], or of each of a tuple's arrays."""
    if isinstance(data, (tuple, list)):
        return type(data)(part[indices] for part in data)
    return data[indices]


def _length(data: Any) -> int:
    return len(data[0]) if isinstance(data, (tuple, list)) else len(data)


class Trainer:
    """Trains `model` through `client`, with ps_worker's loop, lines and flags.

    Args:
        model: the torch module; its ShardedEmbeddingBag modules are found.
        client: the paramserver.Client of this worker.
        loss: loss(batch) -> a scalar tensor to back-propagate; batch is
            data[indices] (a tuple's arrays each indexed, for a tuple).
        params: the model's dense parameters on the servers, or None.
        loss_reduction: "mean" when loss() is the batch's mean, "sum" when
            it is its sum (the lines show a per-example loss either way).
        worker_index, num_workers: who this worker is (the lines' "worker
            i/n"; the shuffles' seed).
        epochs, batch_size, seed, shuffle: the loop (shuffle=False keeps
            the data's order, as ps_worker's sparse models do).
        max_steps: stop at this step (counted as the lines count them,
            from the start of training: a resumed run counts the steps
            before its clock); 0: off.
        progress_seconds: seconds between progress lines.
        curve_csv: write the training curve here ("": none).
        progress_bar: True, False, or None (a bar when stderr is a terminal).
        checkpoint_every_steps: worker 0 asks the servers for a checkpoint
            every this many steps, and once more at its end, after leaving
            (with leave_when_done) (0: never).
        checkpoint_timeout: seconds the servers may wait for the cut.
        resume: continue at this worker's clock in the restored checkpoint.
        wait_for_workers_seconds: with bounded or bsp, the wait for all
            num_workers to join.
        leave_when_done: leave the cluster when fit() ends (the others
            stop waiting for this worker).
    """

    def __init__(self, model: nn.Module, client: Any, loss: Callable[[Any], torch.Tensor], *,
                 params: Optional[ServerParameters] = None, loss_reduction: str = "mean",
                 worker_index: int = 0, num_workers: int = 1, epochs: int = 1,
                 batch_size: int = 32, seed: int = 1, shuffle: bool = True, max_steps: int = 0,
                 progress_seconds: float = 5.0, curve_csv: str = "",
                 progress_bar: Optional[bool] = None, checkpoint_every_steps: int = 0,
                 checkpoint_timeout: float = 60.0, resume: bool = False,
                 wait_for_workers_seconds: float = 60.0, leave_when_done: bool = True) -> None:
        if loss_reduction not in ("mean", "sum"):
            raise ValueError(f"Trainer: loss_reduction={loss_reduction!r}: 'mean' or 'sum'")
        for name, value in (("epochs", epochs), ("batch_size", batch_size),
                            ("num_workers", num_workers)):
            if value < 1:
                raise ValueError(f"Trainer: {name}={value}: must be >= 1")
        if max_steps < 0 or checkpoint_every_steps < 0 or progress_seconds < 0:
            raise ValueError("Trainer: max_steps, checkpoint_every_steps and progress_seconds "
                             "must be >= 0")
        self.model = model
        self.client = client
        self.loss = loss
        self.params = params
        self.bags: List[ShardedEmbeddingBag] = [
            m for m in model.modules() if isinstance(m, ShardedEmbeddingBag)]
        self.loss_reduction = loss_reduction
        self.worker_index = worker_index
        self.num_workers = num_workers
        self.who = f"worker {worker_index}/{num_workers}"
        self.epochs = epochs
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.max_steps = max_steps
        self.progress_seconds = progress_seconds
        self.checkpoint_every_steps = checkpoint_every_steps if worker_index == 0 else 0
        self.checkpoint_timeout = checkpoint_timeout
        self.resume = resume
        self.wait_for_workers_seconds = wait_for_workers_seconds
        self.leave_when_done = leave_when_done
        self.progress = Progress(curve_csv, progress_bar)
        self._checkpoint: Optional[threading.Thread] = None
        self._checkpoint_step = 0  # the step self._checkpoint was asked at
        self._checkpoint_error: Optional[BaseException] = None

    # ---- flags --------------------------------------------------------------

    @staticmethod
    def add_flags(parser: argparse.ArgumentParser, *, epochs: int = 1,
                  batch_size: int = 32) -> None:
        """The loop's flags, named as ps_worker's (and --checkpoint_every_steps)."""
        g = parser.add_argument_group("training loop (as ps_worker)")
        g.add_argument("--epochs", type=int, default=epochs, help="passes over this worker's data")
        g.add_argument("--batch_size", type=int, default=batch_size, help="examples per step")
        g.add_argument("--max_steps", type=int, default=0,
                       help="stop at this step, counted from the start of training (0: off)")
        g.add_argument("--seed", type=int, default=1, help="seed of the tables and shuffles")
        g.add_argument("--progress_seconds", type=float, default=5.0,
                       help="seconds between progress lines")
        g.add_argument("--curve_csv", default="",
                       help="write the training curve here (ps_worker --curve_csv's columns)")
        g.add_argument("--progress_bar", default="auto", choices=("auto", "on", "off"),
                       help="a tqdm bar on stderr (auto: when it is a terminal)")
        g.add_argument("--checkpoint_every_steps", type=int, default=0,
                       help="worker 0 asks the servers (started with --checkpoint_dir) for a "
                            "checkpoint every N of its steps and when it is done (0: never)")
        g.add_argument("--resume", action="store_true",
                       help="continue from this worker's clock in the checkpoint the servers "
                            "restored (ps_server --restore), as ps_worker --resume does")
        g.add_argument("--eval_only", action="store_true",
                       help="skip training; evaluate the parameters on the servers")
        g.add_argument("--threads", type=int, default=1,
                       help="torch threads (1: the servers and other workers share the cores)")

    @staticmethod
    def check_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
        """Exits through parser.error on add_flags' flags that cannot work."""
        for name in ("epochs", "batch_size", "threads"):
            if getattr(args, name) < 1:
                parser.error(f"--{name}={getattr(args, name)}: must be >= 1")
        for name in ("max_steps", "checkpoint_every_steps", "progress_seconds"):
            if getattr(args, name) < 0:
                parser.error(f"--{name}={getattr(args, name)}: must be >= 0")

    @classmethod
    def from_flags(cls, args: argparse.Namespace, model: nn.Module, client: Any,
                   loss: Callable[[Any], torch.Tensor], **kwargs: Any) -> "Trainer":
        """A Trainer from add_flags' and paramserver.flags' flags; kwargs win.

        Also sets torch's threads to --threads (torch.set_num_threads).
        """
        torch.set_num_threads(args.threads)
        settings = dict(
            worker_index=args.worker_index, num_workers=args.num_workers, epochs=args.epochs,
            batch_size=args.batch_size, seed=args.seed, max_steps=args.max_steps,
            progress_seconds=args.progress_seconds,
            curve_csv="" if args.eval_only else args.curve_csv,
            progress_bar={"auto": None, "on": True, "off": False}[args.progress_bar],
            checkpoint_every_steps=args.checkpoint_every_steps, resume=args.resume,
            wait_for_workers_seconds=getattr(args, "wait_for_workers_seconds", 60.0))
        settings.update(kwargs)
        return cls(model, client, loss, **settings)

    # ---- training -----------------------------------------------------------

    def resume_clock(self) -> int:
        """This worker's clock in the restored checkpoint: the smallest over
        the model's tables (0 when the servers restored none)."""
        position = self.client.position()
        if not position["restored_from"]:
            self.progress.line(f"{self.who}: --resume: the servers restored no checkpoint; "
                               "starting from the beginning")
            return 0
        tables = [bag.table for bag in self.bags]
        if self.params is not None:
            tables += [table for table, _ in self.params.tables]
        clock = min((position["clocks"].get(table, 0) for table in tables), default=0)
        self.progress.line(f"{self.who}: --resume: servers restored {position['restored_from']} "
                           f"(cut {position['restored_cut']}); this worker continues at clock "
                           f"{clock}")
        return clock

    def fit(self, data: Any) -> Dict[str, Any]:
        """Trains on `data` (this worker's examples: len(data) and
        data[indices], or a tuple of arrays); returns the run's statistics.

        Raises paramserver.Error from the servers (after leaving the
        cluster), and ValueError for empty data.
        """
        n = _length(data)
        if n == 0:
            raise ValueError(f"{self.who}: no training examples")
        try:
            stats = self._fit(data, n)
        finally:
            self.progress.close_bar()
            if self.leave_when_done:
                self.client.leave()
            self._wait_for_checkpoint()
        if self.leave_when_done:
            # Once left: a cut above this worker's clock must not wait for it.
            self._maybe_checkpoint(stats["steps"], final=True)
        return stats

    def _fit(self, data: Any, n: int) -> Dict[str, Any]:
        start_clock = self.resume_clock() if self.resume else 0
        if self.client.consistency != "async":
            self.client.wait_for_workers(self.num_workers, timeout=self.wait_for_workers_seconds)
        self.model.train()
        for bag in self.bags:
            bag.clock = start_clock
        if self.params is not None:
            self.params.clock = start_clock
            self.params.pull()
        steps_per_epoch = math.ceil(n / self.batch_size)
        total = steps_per_epoch * self.epochs
        if self.max_steps:
            total = min(total, self.max_steps)
        self.progress.start_bar(total, min(start_clock, total), self.who)
        run = _Run(self, start_clock)
        rng = np.random.default_rng([self.seed, self.worker_index])
        step = 0  # steps since the start of training, the skipped ones included
        done = False
        for epoch in range(1, self.epochs + 1):
            order = rng.permutation(n) if self.shuffle else np.arange(n)
            run.start_epoch()
            for first in range(0, n, self.batch_size):
                step += 1
                done = self.max_steps > 0 and step >= self.max_steps
                if step <= start_clock:
                    if done:
                        break
                    continue
                if run.steps == 0 and start_clock > 0:
                    self.progress.line(f"{self.who} resumed at epoch {epoch} step {step} "
                                       f"(clock {run.clock})")
                indices = order[first:first + self.batch_size]
                epoch_end = done or first + self.batch_size >= n
                run.step(_select(data, indices), len(indices), epoch, step, epoch_end)
                # The last step's is the final one, taken once this worker
                # has left (asked now, its cut could wait for a round this
                # worker never pushes: the servers' first mark can be
                # refused by the step's own push still in flight, and the
                # next is further ahead).
                if not (done and self.leave_when_done):
                    self._maybe_checkpoint(step, final=False)
                if done:
                    break
            if done:
                break
        return run.finish(step)

    # ---- checkpoints --------------------------------------------------------

    def _wait_for_checkpoint(self) -> None:
        if self._checkpoint is not None:
            self._checkpoint.join()
            self._checkpoint = None

    def _maybe_checkpoint(self, step: int, final: bool) -> None:
        """Every checkpoint_every_steps steps, a checkpoint asked from a thread,
        unless the one before still runs: its cut may wait for this worker's
        next rounds, which waiting for it would never push (the due one is
        skipped); final: one now, after the one before, waited for. Raises
        the error of a failed one."""
        if not self.checkpoint_every_steps:
            return
        if self._checkpoint_error is not None:
            error, self._checkpoint_error = self._checkpoint_error, None
            raise error
        if final:
            self._take_checkpoint(step)
            if self._checkpoint_error is not None:
                error, self._checkpoint_error = self._checkpoint_error, None
                raise error
            return
        if step % self.checkpoint_every_steps:
            return
        if self._checkpoint is not None and self._checkpoint.is_alive():
            self.progress.line(f"{self.who}: checkpoint at step {step} skipped: the one asked at "
                               f"step {self._checkpoint_step} is still being taken")
            return
        self._wait_for_checkpoint()
        if self._checkpoint_error is not None:
            error, self._checkpoint_error = self._checkpoint_error, None
            raise error
        self._checkpoint_step = step
        self._checkpoint = threading.Thread(target=self._take_checkpoint, args=(step,),
                                            name="checkpoint", daemon=True)
        self._checkpoint.start()

    def _take_checkpoint(self, step: int) -> None:
        try:
            result = self.client.checkpoint(timeout=self.checkpoint_timeout)
        except BaseException as err:  # raised in the training thread
            self._checkpoint_error = err
            return
        self.progress.line(f"{self.who}: checkpoint {result['path']} asked at step {step}: cut "
                           f"{result['cut']}, {result['bytes']} bytes in "
                           f"{result['seconds']:.3f}s")

    # ---- evaluation ---------------------------------------------------------

    def report_progress(self, seconds: float, epoch: int, step: int, examples: int, loss: float,
                        examples_per_second: float, staleness: float) -> None:
        """Sends a progress point to the servers (their web UI); a failure is said once."""
        try:
            self.client.report_progress("pytorch", seconds, epoch, step, examples,
                                        max(0.0, loss), examples_per_second, staleness)
        except Exception as err:  # pylint: disable=broad-except
            if not getattr(self, "_report_warned", False):
                self._report_warned = True
                print(f"{self.who}: progress not reported to the servers (said once): {err}",
                      file=sys.stderr, flush=True)

    def predict(self, data: Any, predict: Callable[[Any], torch.Tensor],
                batch_size: int = 4096) -> np.ndarray:
        """predict(batch) over all of `data` in batches, in eval mode and
        without gradients (the bags read the servers' rows, not the cache);
        the outputs concatenated as one NumPy array."""
        was_training = self.model.training
        self.model.eval()
        outputs = []
        try:
            with torch.no_grad():
                n = _length(data)
                for first in range(0, n, batch_size):
                    indices = np.arange(first, min(first + batch_size, n))
                    outputs.append(predict(_select(data, indices)).numpy())
        finally:
            self.model.train(was_training)
        return np.concatenate(outputs) if outputs else np.zeros(0)

    def report_auc(self, labels: np.ndarray, probabilities: np.ndarray) -> Dict[str, float]:
        """Prints ps_worker's test lines for a binary classifier and ends the curve."""
        m = binary_metrics(labels, probabilities)
        self.progress.line(f"{self.who}: test auc {m['auc']:.4f} accuracy {m['accuracy']:.4f} "
                           f"logloss {m['logloss']:.4f} ({len(labels)} test examples)")
        self.progress.line(f"test auc {m['auc']:.4f} accuracy {m['accuracy']:.4f}")
        self.progress.line(f"RESULT test_auc={m['auc']:.4f} test_accuracy={m['accuracy']:.4f}")
        self.progress.finish("auc", m["auc"])
        return m

    def report_accuracy(self, accuracy: float, examples: int) -> None:
        """Prints ps_worker's test lines for a classifier and ends the curve."""
        self.progress.line(f"{self.who}: test accuracy {accuracy:.4f} ({examples} test examples)")
        self.progress.line(f"RESULT test_accuracy={accuracy:.4f}")
        self.progress.finish("accuracy", accuracy)


class _Run:
    """One fit's steps, totals and progress lines."""

    def __init__(self, trainer: Trainer, start_clock: int) -> None:
        self.t = trainer
        self.sparse = bool(trainer.bags)  # the lines of ps_worker's sparse models
        self.clock = start_clock
        self.steps = 0  # trained in this run
        self.examples = 0
        self.start = time.perf_counter()
        self.next_line = self.start + trainer.progress_seconds
        self.keys_at_start = self._keys()
        # The window since the last line (dense lines), and the epoch.
        self.window_start = self.start
        self.window_loss = 0.0
        self.window_steps = 0
        self.window_examples = 0
        self.epoch_loss = 0.0  # summed per example
        self.epoch_examples = 0
        self.epoch_steps = 0
        self.epoch_step_loss = 0.0  # summed per step (dense)
        self.last_epoch_loss = 0.0
        self.last_bar = self.start

    def _keys(self):
        bags = self.t.bags
        return (sum(b.keys_used for b in bags), sum(b.keys_pulled for b in bags),
                sum(b.keys_pushed for b in bags))

    def start_epoch(self) -> None:
        if self.epoch_examples:
            self.last_epoch_loss = self._epoch_mean()
        self.epoch_loss = self.epoch_step_loss = 0.0
        self.epoch_examples = self.epoch_steps = 0

    def _epoch_mean(self) -> float:
        if self.sparse:
            return self.epoch_loss / max(1, self.epoch_examples)
        return self.epoch_step_loss / max(1, self.epoch_steps)

    def step(self, batch: Any, size: int, epoch: int, step: int, epoch_end: bool) -> None:
        t = self.t
        for bag in t.bags:
            bag.clock = self.clock
        if t.params is not None:
            t.params.zero_grad()
        loss = t.loss(batch)
        loss.backward()
        if t.params is not None:
            t.params.step()
        self.clock += 1
        value = loss.item()
        mean = value / size if t.loss_reduction == "sum" else value
        self.steps += 1
        self.examples += size
        self.epoch_loss += mean * size
        self.epoch_examples += size
        self.epoch_step_loss += mean
        self.epoch_steps += 1
        self.window_loss += mean
        self.window_steps += 1
        self.window_examples += size
        now = time.perf_counter()
        if self.sparse:
            self._sparse_line(now, epoch, step)
        else:
            self._dense_line(now, epoch, step, epoch_end)
        if now - self.last_bar >= 1.0:
            postfix = {"loss": f"{self.window_loss / max(1, self.window_steps):.4f}",
                       "ex/s": f"{self.examples / (now - self.start):.0f}"}
            if t.params is not None:
                postfix["staleness"] = f"{t.params.mean_staleness:.1f}"
            t.progress.advance(1, **postfix)
            self.last_bar = now
        else:
            t.progress.advance(1)

    def _staleness(self) -> float:
        return self.t.params.mean_staleness if self.t.params is not None else 0.0

    def _sparse_line(self, now: float, epoch: int, step: int) -> None:
        # As RunSparseTraining: totals since the start, the epoch's log-loss.
        if now < self.next_line:
            return
        seconds = now - self.start
        used, pulled, pushed = (a - b for a, b in zip(self._keys(), self.keys_at_start))
        loss = self._epoch_mean()
        t = self.t
        t.progress.line(
            f"{t.who}: epoch {epoch} step {step}: {self.examples} examples, "
            f"{self.examples / seconds:.0f} examples/s, {used / seconds:.0f} keys/s "
            f"({100.0 * pulled / max(1, used):.0f}% pulled, {100.0 * pushed / max(1, used):.0f}% "
            f"pushed), log-loss {loss:.4f}")
        t.progress.point(seconds, epoch, step, self.examples, loss, self.examples / seconds,
                         self._staleness())
        t.report_progress(seconds, epoch, step, self.examples, loss, self.examples / seconds,
                          self._staleness())
        self.next_line = now + t.progress_seconds

    def _dense_line(self, now: float, epoch: int, step: int, epoch_end: bool) -> None:
        # As DownpourRun::ReportProgress: the window since the last line.
        if now - self.window_start < self.t.progress_seconds and not epoch_end:
            return
        seconds = now - self.window_start
        loss = self.window_loss / max(1, self.window_steps)
        rate = self.window_examples / seconds if seconds > 0 else 0.0
        t = self.t
        p = t.params
        staleness, max_staleness, lag, waited = (
            (p.mean_staleness, p.max_staleness, p.max_clock_lag, p.waited_seconds)
            if p is not None else (0.0, 0, 0, 0.0))
        t.progress.line(
            f"{t.who} epoch {epoch} step {step} loss {loss:.4f} examples/s {rate:.0f} "
            f"staleness mean {staleness:.1f} max {max_staleness} clock lag max {lag} "
            f"waited {waited:.2f}s of {now - self.start:.2f}s"
            f"{' (epoch end)' if epoch_end else ''}")
        t.progress.point(now - self.start, epoch, step, self.examples, loss, rate, staleness)
        t.report_progress(now - self.start, epoch, step, self.examples, loss, rate, staleness)
        self.window_start = now
        self.window_loss = 0.0
        self.window_steps = self.window_examples = 0

    def finish(self, step: int) -> Dict[str, Any]:
        t = self.t
        seconds = time.perf_counter() - self.start
        t.progress.close_bar()  # the last lines below it
        rate = self.examples / seconds if seconds > 0 else 0.0
        loss = self._epoch_mean() if self.epoch_examples else self.last_epoch_loss
        used, pulled, pushed = (a - b for a, b in zip(self._keys(), self.keys_at_start))
        p = t.params
        stats = dict(steps=step, examples=self.examples, seconds=seconds,
                     examples_per_second=rate, mean_loss_last_epoch=loss, keys=used,
                     keys_pulled=pulled, keys_pushed=pushed, clock=self.clock)
        peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        if p is not None:
            stats.update(mean_staleness=p.mean_staleness, max_staleness=p.max_staleness,
                         max_clock_lag=p.max_clock_lag, wait_seconds=p.waited_seconds,
                         pushes=p.pushes, pulls=p.pulls)
        if self.sparse:
            dense_bytes = 4 * p.num_values * (p.pushes + p.pulls) if p is not None else 0
            t.progress.line(
                f"{t.who}: done: {step} steps, {self.examples} examples in {seconds:.1f}s "
                f"({rate:.0f} examples/s, {used / max(seconds, 1e-9):.0f} keys/s, {pulled} keys "
                f"pulled), last-epoch log-loss {loss:.4f}, 0 bad lines skipped")
            if p is not None:
                t.progress.line(
                    f"{t.who}: dense tables: staleness mean {p.mean_staleness:.1f} max "
                    f"{p.max_staleness}, clock lag max {p.max_clock_lag}, waited "
                    f"{p.waited_seconds:.2f}s")
            t.progress.line(
                f"RESULT worker={t.worker_index} partition=0 seconds={seconds:.3f} "
                f"examples={self.examples} keys={used} keys_pulled={pulled} keys_pushed={pushed} "
                f"dense_bytes={dense_bytes} allreduce_rounds=0")
        else:
            staleness, max_staleness, lag, waited, pushes, pulls, values = (
                (p.mean_staleness, p.max_staleness, p.max_clock_lag, p.waited_seconds, p.pushes,
                 p.pulls, p.num_values) if p is not None else (0.0, 0, 0, 0.0, 0, 0, 0))
            t.progress.line(
                f"{t.who}: done: {step} steps, {self.examples} examples in {seconds:.1f}s "
                f"({rate:.0f} examples/s), last-epoch loss {loss:.4f}, staleness mean "
                f"{staleness:.1f} max {max_staleness}, clock lag max {lag}, waited "
                f"{waited:.2f}s ({100.0 * waited / seconds if seconds > 0 else 0.0:.1f}% idle)")
            histogram = p.lag_histogram if p is not None else []
            t.progress.line(f"{t.who}: clock lag histogram of its pulls (0..16+): "
                            f"{' '.join(map(str, histogram))}")
            t.progress.line(
                f"RESULT worker={t.worker_index} seconds={seconds:.3f} wait_seconds={waited:.3f} "
                f"examples={self.examples} algorithm=downpour pushes={pushes} pulls={pulls} "
                f"value_bytes_pushed={4 * pushes * values} value_bytes_pulled={4 * pulls * values} "
                f"peak_rss_mib={peak_rss_mib:.1f}")
        return stats
