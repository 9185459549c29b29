#!/usr/bin/python3
"""ps_worker --model=mlp in PyTorch, written with paramserver.torch.

One process is one worker, as ps_worker is. The torch MLP's weights and
biases are dense tables on the servers (ServerParameters: <prefix>/0.weight,
...), updated there by the optimizer (AdaGrad by default, as ps_worker's);
Trainer runs ps_worker's loop: each step computes a minibatch's mean
cross-entropy and its gradients with autograd, pushes them stamped with the
step as clock and reads the new values back into the tensors' memory, under
--consistency (async, bounded or bsp). Worker i of n trains on examples i,
i + n, ... of Fashion-MNIST, reshuffled every epoch, and prints ps_worker's
lines (staleness included), then `worker i/n: test accuracy X (N test
examples)` and `RESULT test_accuracy=X` (--eval_only does only that, for a
launcher once every worker is done). --checkpoint_every_steps and --resume:
docs/guide/python.md.

The model and its defaults match ps_worker --model=mlp (worker/train/model.h):
784-256-128-10 ReLU layers, Glorot-uniform weights and zero biases, batches
of 32, AdaGrad with learning rate 0.05 and initial accumulator 0.1.

    PYTHONPATH=python:bazel-bin/python /usr/bin/python3 python/examples/torch_mnist.py \\
        --servers=127.0.0.1:7000,127.0.0.1:7001 --worker_index=0 --num_workers=2
"""

import argparse
import sys

import numpy as np
import torch
from torch import nn

import paramserver as ps
import paramserver.flags as psflags
from paramserver.torch import ServerParameters, Trainer

import idx_data  # beside this file

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
    psflags.add_cluster_flags(p)
    psflags.add_optimizer_flags(p, learning_rate=0.05)
    Trainer.add_flags(p, epochs=3, batch_size=32)
    p.add_argument("--hidden", default="256,128", help="hidden layer widths, comma-separated")
    p.add_argument("--max_train_examples", type=int, default=0,
                   help="use only the first N training examples, before sharding (0: all)")
    p.add_argument("--table_prefix", default="torch_mlp", help="table name prefix")
    p.add_argument("--data_dir", default=idx_data.DEFAULT_DATA_DIR,
                   help="directory with the four IDX files (gzip or plain)")
    args = psflags.parse(p)
    Trainer.check_flags(p, args)
    if args.max_train_examples < 0:
        p.error(f"--max_train_examples={args.max_train_examples}: must be >= 0")
    try:
        args.hidden = [int(w) for w in args.hidden.split(",") if w.strip()]
    except ValueError:
        p.error(f"--hidden={args.hidden}: expected positive integers separated by commas")
    if not args.hidden or min(args.hidden) < 1:
        p.error(f"--hidden={','.join(map(str, args.hidden))}: expected at least one width >= 1")
    return args


def main():
    args = parse_args()
    who = psflags.who(args)
    ps.tune_process_for_data_path()
    try:
        x_train, y_train, x_test, y_test, num_classes = idx_data.read_train_test(args.data_dir)
    except idx_data.DataError as err:
        sys.exit(f"torch_mnist: --data_dir: {err}")
    x_shard, y_shard = idx_data.shard(x_train, y_train, args.worker_index, args.num_workers,
                                      args.max_train_examples)
    if x_shard.shape[0] == 0 and not args.eval_only:
        sys.exit(f"torch_mnist: {who} has no training examples in its shard "
                 f"(--max_train_examples={args.max_train_examples})")
    train = (torch.from_numpy(np.ascontiguousarray(x_shard)),
             torch.from_numpy(np.ascontiguousarray(y_shard)))
    model = make_mlp(x_train.shape[1], args.hidden, num_classes)
    loss_fn = nn.CrossEntropyLoss()
    stage = "connecting"
    try:
        with psflags.connect(args, training=not args.eval_only) as client:
            stage = "creating the tables"
            params = ServerParameters(model.named_parameters(), client, prefix=args.table_prefix,
                                      optimizer=psflags.optimizer(args), seed=args.seed)
            trainer = Trainer.from_flags(args, model, client, lambda b: loss_fn(model(b[0]), b[1]),
                                         params=params)
            if not args.eval_only:
                side = int(round(x_train.shape[1] ** 0.5))
                print(f"{who}: {x_shard.shape[0]} training examples of {side}x{side} images in "
                      f"{num_classes} classes, model {args.table_prefix} ({params.num_values} "
                      f"parameters), {client.num_servers} server(s)", flush=True)
                stage = "training"
                trainer.fit(train)
            stage = "pulling the final parameters"
            params.pull(clock=0)  # the servers' values now (a read that never waits)
    except ps.Error as err:
        sys.exit(f"torch_mnist: {who}: {stage}: {psflags.describe(err)}")
    except ValueError as err:
        sys.exit(f"torch_mnist: {who}: {stage}: {err}")
    predicted = trainer.predict(torch.from_numpy(x_test), lambda x: model(x).argmax(dim=1),
                                batch_size=EVAL_BATCH)
    trainer.report_accuracy(float(np.mean(predicted == y_test)) if y_test.size else 0.0,
                            y_test.shape[0])


if __name__ == "__main__":
    main()
