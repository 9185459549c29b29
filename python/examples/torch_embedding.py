#!/usr/bin/python3
"""Sparse embeddings served by the parameter servers, trained with PyTorch autograd.

The model is ps_worker --model=embedding_mlp's (worker/train/embedding_mlp.h)
with one field: each feature id has an embedding row of width --embedding_dim
in a sparse table (<prefix>/emb, rows uniform in +-0.05, created on first
use); an example's rows, weighted by its feature values, are summed into one
vector (torch.nn.EmbeddingBag's "sum" mode), and an MLP with one ReLU hidden
layer of --hidden units maps it to a click logit. The MLP's weights are
dense tables (python/examples/server_parameters.py).

Each step a worker
  1. takes the unique feature ids of its mini-batch and pulls only their rows
     (Client.pull_keys), one row per id however often the batch uses it;
  2. sums the rows into bags with torch.nn.functional.embedding_bag over the
     pulled rows, so autograd gives each row's gradient summed over the bags
     that used it;
  3. back-propagates the log-loss summed over the batch (as ps_worker does, so
     a rare feature's gradient is not diluted by the batch size);
  4. pushes the rows' gradients for those ids (Client.push_keys) and the
     MLP's gradients, reading the MLP back in the same call (push_pull).
Pushes carry the step as their clock (the servers' learning-rate schedule
counts it), asynchronously. Worker i of n trains on examples i, i + n, ... .

At the end it evaluates the parameters on the servers on --test_data and
prints, like ps_worker,
    worker i/n: test auc 0.7900 accuracy 0.7700 logloss 0.4700 (100000 test examples)
    test auc 0.7900 accuracy 0.7700
    RESULT test_auc=0.7900 test_accuracy=0.7700
with the AUC computed here (rank statistic, ties averaged), and the planted
model's AUC when ps_gen_libsvm's TEST.planted.txt is beside the test file.

    bazel-bin/worker/ps_gen_libsvm --out=/tmp/train.svm --examples=200000 --features=100000
    bazel-bin/worker/ps_gen_libsvm --out=/tmp/test.svm --examples=20000 \\
        --first_example=200000 --features=100000
    PYTHONPATH=python:bazel-bin/python /usr/bin/python3 python/examples/torch_embedding.py \\
        --servers=127.0.0.1:7000,127.0.0.1:7001 --train_data=/tmp/train.svm \\
        --test_data=/tmp/test.svm
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

try:
    import torch  # noqa: E402
    from torch import nn  # noqa: E402
    from torch.nn import functional  # noqa: E402
except ImportError as err:
    sys.exit(f"torch_embedding: cannot import {err.name} ({err}). Install Debian's python3-torch "
             "and run this script with /usr/bin/python3, not another python3 on PATH.")

import cluster_args  # noqa: E402
import libsvm_data  # noqa: E402
from cluster_args import ps  # noqa: E402
from idx_data import DataError  # noqa: E402
from server_parameters import ServerParameters  # noqa: E402
from training_log import ProgressLog  # noqa: E402

EMBEDDING_INIT = 0.05
EVAL_BATCH = 4096


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    cluster_args.add_cluster_flags(p)
    p.add_argument("--train_data", default="", help="LibSVM training file (plain or gzip)")
    p.add_argument("--test_data", default="", help="LibSVM test file (plain or gzip)")
    p.add_argument("--epochs", type=int, default=1, help="passes over this worker's shard")
    p.add_argument("--batch_size", type=int, default=256, help="examples per mini-batch")
    p.add_argument("--max_steps", type=int, default=0, help="stop after this many steps (0: off)")
    p.add_argument("--max_train_examples", type=int, default=0,
                   help="read only the first N training examples, before sharding (0: all)")
    p.add_argument("--embedding_dim", type=int, default=8, help="embedding width")
    p.add_argument("--hidden", type=int, default=16, help="units of the hidden layer")
    p.add_argument("--num_buckets", type=int, default=1024,
                   help="slices (hash buckets) of the sparse table")
    cluster_args.add_optimizer_flags(p, learning_rate=0.1)
    p.add_argument("--seed", type=int, default=1, help="seed of initialization and shuffling")
    p.add_argument("--table_prefix", default="torch_embedding", help="table name prefix")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--progress_seconds", type=float, default=5.0,
                   help="seconds between progress lines")
    p.add_argument("--curve_csv", default="",
                   help="write the training curve here (ps_worker --curve_csv's columns)")
    p.add_argument("--eval_only", action="store_true",
                   help="skip training; evaluate the parameters on the servers")
    args = p.parse_args()
    cluster_args.check_cluster_flags(p, args)
    if not args.test_data:
        p.error("--test_data is required (a LibSVM file to evaluate on)")
    if not args.train_data and not args.eval_only:
        p.error("--train_data is required (a LibSVM file), or --eval_only")
    for name in ("epochs", "batch_size", "embedding_dim", "hidden", "num_buckets", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name}={getattr(args, name)}: must be >= 1")
    for name in ("max_steps", "max_train_examples"):
        if getattr(args, name) < 0:
            p.error(f"--{name}={getattr(args, name)}: must be >= 0")
    return args


class EmbeddingMlp:
    """The sparse embedding table and the dense MLP, both on the servers."""

    def __init__(self, client, args):
        self.client = client
        self.dim = args.embedding_dim
        self.emb_table = f"{args.table_prefix}/emb"
        optimizer_fields = cluster_args.optimizer_fields(args)
        client.create_table(self.emb_table, width=self.dim, sparse=True,
                            buckets=args.num_buckets, initializer="uniform",
                            init_low=-EMBEDDING_INIT, init_high=EMBEDDING_INIT, seed=args.seed,
                            **optimizer_fields)
        self.mlp = nn.Sequential(nn.Linear(self.dim, args.hidden), nn.ReLU(),
                                 nn.Linear(args.hidden, 1))
        self.mlp_params = ServerParameters(client, self.mlp, f"{args.table_prefix}/mlp",
                                           args.seed, optimizer_fields)

    def pulled_rows(self, data):
        """(unique ids, their rows as a float32 [unique, dim] array, bag index of each feature)."""
        unique_ids, inverse = np.unique(data.ids, return_inverse=True)
        rows = self.client.pull_keys(self.emb_table, unique_ids)
        return unique_ids, rows, inverse

    def logits(self, data, rows, inverse):
        """The batch's logits from rows (a torch tensor, maybe requiring grad)."""
        bags = functional.embedding_bag(
            torch.from_numpy(inverse.astype(np.int64, copy=False)), rows,
            torch.from_numpy(data.offsets[:-1]), mode="sum",
            per_sample_weights=torch.from_numpy(data.values))
        return self.mlp(bags).squeeze(1)

    def step(self, data, clock):
        """One training step on the batch `data`; returns the batch's summed log-loss."""
        unique_ids, rows, inverse = self.pulled_rows(data)
        rows = torch.from_numpy(rows).requires_grad_()
        self.mlp.zero_grad(set_to_none=True)
        loss = functional.binary_cross_entropy_with_logits(
            self.logits(data, rows, inverse), torch.from_numpy(data.labels), reduction="sum")
        loss.backward()
        self.client.push_keys(self.emb_table, unique_ids, rows.grad.numpy(), clock=clock)
        self.mlp_params.push_pull(clock)
        return loss.item()

    def predict(self, data):
        """Click probabilities of `data`'s examples with the servers' current parameters."""
        self.mlp_params.pull()
        probabilities = np.empty(len(data), dtype=np.float64)
        with torch.no_grad():
            for first in range(0, len(data), EVAL_BATCH):
                batch = data.select(np.arange(first, min(first + EVAL_BATCH, len(data))))
                _, rows, inverse = self.pulled_rows(batch)
                logits = self.logits(batch, torch.from_numpy(rows), inverse)
                probabilities[first:first + len(batch)] = torch.sigmoid(logits).numpy()
        return probabilities


def auc(labels, scores):
    """Area under the ROC curve: the Mann-Whitney statistic, tied scores sharing their rank."""
    positives = int(labels.sum())
    negatives = labels.shape[0] - positives
    if positives == 0 or negatives == 0:
        return 0.5
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    last_rank = np.cumsum(counts)  # 1-based rank of each distinct score's last copy
    mean_rank = last_rank - (counts - 1) / 2.0
    rank_sum = mean_rank[inverse][labels > 0.5].sum()
    return (rank_sum - positives * (positives + 1) / 2.0) / (positives * negatives)


def planted_auc(test_path):
    """The planted model's AUC ps_gen_libsvm wrote beside the test file, or None."""
    try:
        with open(test_path + ".planted.txt", encoding="utf-8") as f:
            for line in f:
                if line.startswith("planted_auc="):
                    return float(line.split("=", 1)[1])
    except (OSError, ValueError):
        pass
    return None


def train(args, who, client, model, data, log):
    """The training loop over this worker's shard, reported through `log`."""
    rng = np.random.default_rng([args.seed, args.worker_index])
    n = len(data)
    steps = examples = 0
    epoch_loss, epoch_examples = 0.0, 0
    start = time.perf_counter()
    # The MLP as the servers hold it (every step after this reads it back).
    model.mlp_params.pull()
    done = False
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(n)
        epoch_loss, epoch_examples = 0.0, 0
        for first in range(0, n, args.batch_size):
            batch = data.select(order[first:first + args.batch_size])
            loss = model.step(batch, clock=steps)
            steps += 1
            examples += len(batch)
            epoch_loss += loss
            epoch_examples += len(batch)
            done = args.max_steps > 0 and steps >= args.max_steps
            log.step(epoch, steps, examples, loss / len(batch), len(batch),
                     epoch_end=done or first + args.batch_size >= n)
            if done:
                break
        if done:
            break
    seconds = time.perf_counter() - start
    client.leave()
    rate = examples / seconds if seconds > 0 else 0.0
    print(f"{who}: done: {steps} steps, {examples} examples in {seconds:.1f}s "
          f"({rate:.0f} examples/s), last-epoch log-loss "
          f"{epoch_loss / max(1, epoch_examples):.4f}", flush=True)
    print(f"RESULT worker={args.worker_index} seconds={seconds:.3f} examples={examples} "
          f"examples_per_second={rate:.1f}", flush=True)


def main():
    args = parse_args()
    who = f"worker {args.worker_index}/{args.num_workers}"
    torch.set_num_threads(args.threads)
    # As ps_worker: malloc keeps large freed blocks (no page faults per step).
    ps.tune_process_for_data_path()
    try:
        test = libsvm_data.read_libsvm(args.test_data)
        train_data = None
        if not args.eval_only:
            train_data = libsvm_data.read_libsvm(args.train_data, args.worker_index,
                                                 args.num_workers, args.max_train_examples)
    except DataError as err:
        sys.exit(f"torch_embedding: {err}")
    if len(test) == 0:
        sys.exit(f"torch_embedding: --test_data={args.test_data} holds no examples")
    if train_data is not None and len(train_data) == 0:
        sys.exit(f"torch_embedding: {who} has no training examples in its shard of "
                 f"{args.train_data}")
    log = None
    if train_data is not None:
        try:
            log = ProgressLog(who, args.progress_seconds, args.curve_csv)
        except ValueError as err:
            sys.exit(f"torch_embedding: {err}")
    stage = "connecting"
    try:
        # An evaluator takes no part in the servers' clocks: no lease.
        with cluster_args.connect(args, lease=0.0 if args.eval_only else 3.0) as client:
            stage = "creating the tables"
            model = EmbeddingMlp(client, args)
            if train_data is not None:
                print(f"{who}: {len(train_data)} training examples "
                      f"({train_data.ids.shape[0]} features), embedding width "
                      f"{args.embedding_dim}, hidden {args.hidden}, {client.num_servers} "
                      f"server(s), torch {torch.__version__}", flush=True)
                stage = "training"
                train(args, who, client, model, train_data, log)
            stage = "evaluating"
            probabilities = model.predict(test)
    except ps.Error as err:
        sys.exit(f"torch_embedding: {who}: {stage}: {cluster_args.describe_error(err)}")
    labels = test.labels
    clipped = np.clip(probabilities, 1e-7, 1 - 1e-7)
    logloss = float(-np.mean(labels * np.log(clipped) + (1 - labels) * np.log(1 - clipped)))
    test_auc = auc(labels, probabilities)
    test_accuracy = float(np.mean((probabilities > 0.5) == (labels > 0.5)))
    print(f"{who}: test auc {test_auc:.4f} accuracy {test_accuracy:.4f} logloss {logloss:.4f} "
          f"({len(test)} test examples)")
    planted = planted_auc(args.test_data)
    if planted is not None:
        print(f"{who}: the planted model's test auc is {planted:.4f}")
    print(f"test auc {test_auc:.4f} accuracy {test_accuracy:.4f}")
    print(f"RESULT test_auc={test_auc:.4f} test_accuracy={test_accuracy:.4f}", flush=True)
    if log:
        log.finish("auc", test_auc)


if __name__ == "__main__":
    main()
