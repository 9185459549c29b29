#!/usr/bin/python3
"""Downpour SGD of a PyTorch MLP whose parameters live on the parameter servers.

One process is one worker, as ps_worker is. Every parameter tensor of the
torch model (nn.Linear weights and biases) is one dense table on the servers,
named <prefix>/<parameter name> ("torch_mlp/0.weight", ...). Each step the
worker
  1. computes the loss of a mini-batch of its shard and its gradients with
     autograd,
  2. pushes each tensor's gradient and reads the tensor's new values back in
     one call (Client.push_pull: the Downpour step ps_worker takes in async
     mode), straight into the tensor's memory: the NumPy arrays handed to the
     client are views of the parameters and of autograd's gradients, so
     nothing is copied on this side. The tensors' calls go out at once, from
     threads (server_parameters.py says why).
The optimizer runs on the servers (AdaGrad by default, as ps_worker's), so
torch's own optimizers are not used. With --consistency=bsp every step waits
for every worker's previous step (the servers hold the pull back).

The model and its defaults match ps_worker --model=mlp (worker/train/model.h):
784-256-128-10 ReLU layers, Glorot-uniform weights and zero biases, mean
cross-entropy, batches of 32, AdaGrad with learning rate 0.05 and initial
accumulator 0.1. Worker i of n trains on examples i, i + n, ... of
Fashion-MNIST, reshuffled every epoch. At the end it reads the parameters
back and prints, like ps_worker,
    worker i/n: test accuracy 0.8712 (10000 test examples)
    RESULT test_accuracy=0.8712
(--eval_only does only that, for a launcher once every worker is done).

    PYTHONPATH=python:bazel-bin/python /usr/bin/python3 python/examples/torch_mnist.py \\
        --servers=127.0.0.1:7000,127.0.0.1:7001 --worker_index=0 --num_workers=2
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
except ImportError as err:
    sys.exit(f"torch_mnist: cannot import {err.name} ({err}). Install Debian's python3-torch "
             "and run this script with /usr/bin/python3, not another python3 on PATH.")

import cluster_args  # noqa: E402
import idx_data  # noqa: E402
from cluster_args import ps  # noqa: E402
from server_parameters import ServerParameters  # noqa: E402
from training_log import ProgressLog  # noqa: E402

EVAL_BATCH = 1000


def make_mlp(dim, hidden, num_classes):
    """dim -> hidden[0] -> ... -> num_classes, ReLU between the layers."""
    widths = [dim] + list(hidden) + [num_classes]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    cluster_args.add_cluster_flags(p)
    p.add_argument("--consistency", default="async", choices=("async", "bsp"),
                   help="async: never wait; bsp: every step waits for all workers' last one")
    p.add_argument("--epochs", type=int, default=3, help="passes over this worker's shard")
    p.add_argument("--batch_size", type=int, default=32, help="examples per mini-batch")
    p.add_argument("--max_steps", type=int, default=0, help="stop after this many steps (0: off)")
    p.add_argument("--max_train_examples", type=int, default=0,
                   help="use only the first N training examples, before sharding (0: all)")
    p.add_argument("--hidden", default="256,128", help="hidden layer widths, comma-separated")
    cluster_args.add_optimizer_flags(p, learning_rate=0.05)
    p.add_argument("--seed", type=int, default=1, help="seed of initialization and shuffling")
    p.add_argument("--table_prefix", default="torch_mlp", help="table name prefix")
    p.add_argument("--data_dir", default=idx_data.DEFAULT_DATA_DIR,
                   help="directory with the four IDX files (gzip or plain)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (1: the servers and other workers share the cores)")
    p.add_argument("--progress_seconds", type=float, default=5.0,
                   help="seconds between progress lines")
    p.add_argument("--curve_csv", default="",
                   help="write the training curve here (ps_worker --curve_csv's columns)")
    p.add_argument("--lease_seconds", type=float, default=3.0,
                   help="worker lease: dropped from the servers' clock minimum after this long "
                        "without a heartbeat")
    p.add_argument("--wait_for_workers_seconds", type=float, default=60.0,
                   help="with bsp: wait this long for all --num_workers to join")
    p.add_argument("--resume", action="store_true",
                   help="continue from this worker's clock in the checkpoint the servers "
                        "restored (ps_server --restore), as ps_worker --resume does")
    p.add_argument("--eval_only", action="store_true",
                   help="skip training; evaluate the parameters on the servers")
    args = p.parse_args()
    cluster_args.check_cluster_flags(p, args)
    for name in ("epochs", "batch_size", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name}={getattr(args, name)}: must be >= 1")
    for name in ("max_steps", "max_train_examples"):
        if getattr(args, name) < 0:
            p.error(f"--{name}={getattr(args, name)}: must be >= 0")
    if args.lease_seconds <= 0:
        p.error(f"--lease_seconds={args.lease_seconds}: must be > 0")
    try:
        args.hidden = [int(w) for w in args.hidden.split(",") if w.strip()]
    except ValueError:
        p.error(f"--hidden={args.hidden}: expected positive integers separated by commas")
    if not args.hidden or min(args.hidden) < 1:
        p.error(f"--hidden={','.join(map(str, args.hidden))}: expected at least one width >= 1")
    return args


def accuracy(model, x, y):
    """The fraction of the rows of x that the model classifies as y says."""
    correct = 0
    with torch.no_grad():
        for first in range(0, x.shape[0], EVAL_BATCH):
            logits = model(x[first:first + EVAL_BATCH])
            correct += (logits.argmax(dim=1) == y[first:first + EVAL_BATCH]).sum().item()
    return correct / x.shape[0] if x.shape[0] else 0.0


def resume_clock(client, params, who):
    """The clock to continue at: the smallest of this worker's clocks on its
    tables in the checkpoint the servers restored (0 when they restored none)."""
    position = client.position()
    if not position["restored_from"]:
        print(f"{who}: --resume: the servers restored no checkpoint; starting from the beginning",
              flush=True)
        return 0
    clock = min((position["clocks"].get(table, 0) for table, _ in params.tables), default=0)
    print(f"{who}: --resume: servers restored {position['restored_from']} "
          f"(cut {position['restored_cut']}); this worker continues at clock {clock}", flush=True)
    return clock


def train(args, who, client, params, model, x_shard, y_shard, log, start_clock=0):
    """The Downpour loop over this worker's shard, reported through `log`.

    start_clock > 0 (--resume): the first start_clock steps are skipped, over
    the same shuffled order as the run that reached them (the permutations
    come from the seed and the worker index alone).
    """
    if args.consistency == "bsp":
        client.wait_for_workers(args.num_workers, timeout=args.wait_for_workers_seconds)
    loss_fn = nn.CrossEntropyLoss()
    rng = np.random.default_rng([args.seed, args.worker_index])
    n = x_shard.shape[0]
    clock = start_clock  # rounds this worker has pushed: the clock of its next push
    steps = examples = 0
    skip = start_clock  # steps the resumed run had done
    epoch_loss, epoch_steps = 0.0, 0
    start = time.perf_counter()
    params.pull(clock)
    done = False
    for epoch in range(1, args.epochs + 1):
        order = torch.from_numpy(rng.permutation(n))
        epoch_loss, epoch_steps = 0.0, 0
        for first in range(0, n, args.batch_size):
            if skip > 0:
                skip -= 1
                continue
            if start_clock > 0 and steps == 0:
                print(f"{who} resumed at epoch {epoch} step {first // args.batch_size + 1} "
                      f"(clock {clock})", flush=True)
            batch = order[first:first + args.batch_size]
            # set_to_none: autograd hands over fresh gradient tensors, pushed
            # from their memory, with no zeroing pass.
            model.zero_grad(set_to_none=True)
            loss = loss_fn(model(x_shard[batch]), y_shard[batch])
            loss.backward()
            params.push_pull(clock)
            clock += 1
            steps += 1
            examples += batch.shape[0]
            loss_value = loss.item()
            epoch_loss += loss_value
            epoch_steps += 1
            done = args.max_steps > 0 and steps >= args.max_steps
            log.step(epoch, steps, examples, loss_value, batch.shape[0],
                     epoch_end=done or first + args.batch_size >= n)
            if done:
                break
        if done:
            break
    seconds = time.perf_counter() - start
    # Done: stop holding back the others.
    client.leave()
    rate = examples / seconds if seconds > 0 else 0.0
    print(f"{who}: done: {steps} steps, {examples} examples in {seconds:.1f}s "
          f"({rate:.0f} examples/s), last-epoch loss {epoch_loss / max(1, epoch_steps):.4f}",
          flush=True)
    print(f"RESULT worker={args.worker_index} seconds={seconds:.3f} examples={examples} "
          f"examples_per_second={rate:.1f}", flush=True)


def main():
    args = parse_args()
    who = f"worker {args.worker_index}/{args.num_workers}"
    training = not args.eval_only
    torch.set_num_threads(args.threads)
    # As ps_worker: malloc keeps large freed blocks (no page faults per step).
    ps.tune_process_for_data_path()
    try:
        x_train, y_train, x_test, y_test, num_classes = idx_data.read_train_test(args.data_dir)
    except idx_data.DataError as err:
        sys.exit(f"torch_mnist: --data_dir: {err}")
    model = make_mlp(x_train.shape[1], args.hidden, num_classes)
    if training:
        x_shard, y_shard = idx_data.shard(x_train, y_train, args.worker_index,
                                          args.num_workers, args.max_train_examples)
        if x_shard.shape[0] == 0:
            sys.exit(f"torch_mnist: {who} has no training examples in its shard "
                     f"(--max_train_examples={args.max_train_examples})")
        x_shard = torch.from_numpy(np.ascontiguousarray(x_shard))
        y_shard = torch.from_numpy(np.ascontiguousarray(y_shard))
    x_train = y_train = None  # only the shard is needed from here on
    log = None
    if training:
        try:
            log = ProgressLog(who, args.progress_seconds, args.curve_csv)
        except ValueError as err:
            sys.exit(f"torch_mnist: {err}")
    optimizer_fields = cluster_args.optimizer_fields(args)
    stage = "connecting"
    try:
        # An evaluator reads the parameters as they are and takes no part in the clocks.
        with cluster_args.connect(args, consistency=args.consistency if training else "async",
                                  lease=args.lease_seconds if training else 0.0) as client:
            stage = "creating the tables"
            params = ServerParameters(client, model, args.table_prefix, args.seed,
                                      optimizer_fields)
            if training:
                print(f"{who}: {x_shard.shape[0]} training examples of "
                      f"{x_shard.shape[1]} pixels in {num_classes} classes, model torch_mlp "
                      f"({params.num_values} parameters in {len(params.tables)} tables), "
                      f"{client.num_servers} server(s), torch {torch.__version__}, "
                      f"{args.consistency}", flush=True)
                start_clock = 0
                if args.resume:
                    stage = "reading this worker's position (--resume)"
                    start_clock = resume_clock(client, params, who)
                stage = "training"
                train(args, who, client, params, model, x_shard, y_shard, log, start_clock)
            stage = "pulling the final parameters"
            params.pull()
    except ps.Error as err:
        sys.exit(f"torch_mnist: {who}: {stage}: {cluster_args.describe_error(err)}")
    test_accuracy = accuracy(model, torch.from_numpy(x_test), torch.from_numpy(y_test))
    print(f"{who}: test accuracy {test_accuracy:.4f} ({x_test.shape[0]} test examples)")
    print(f"RESULT test_accuracy={test_accuracy:.4f}", flush=True)
    if log:
        log.finish("accuracy", test_accuracy)


if __name__ == "__main__":
    main()
