#!/usr/bin/python3
"""Single-process PyTorch baseline for the MLP that ps_worker trains.

Same model and optimizer as the C++ defaults: a 784-256-128-10 ReLU MLP with
softmax cross-entropy, Glorot-uniform weights and zero biases, AdaGrad with
learning rate 0.05, initial accumulator 0.1 and epsilon 1e-8, mini-batches of
32 drawn from a fresh shuffle of Fashion-MNIST each epoch (the last, short
batch included). It runs on the CPU with a chosen number of threads, so its
examples/s can be set against the parameter server's on the same machine.

Run it with Debian's interpreter, which sees python3-torch:
    /usr/bin/python3 deploy/torch_mlp_baseline.py --threads 1

The last line it prints is machine-readable:
    RESULT framework=pytorch threads=1 batch_size=32 epochs=1
    examples_per_second=... test_accuracy=... train_seconds=...
(one line). examples_per_second counts the training loop only: not data
loading, not evaluation.
"""

import argparse
import os
import sys
import time

# The IDX reader of the PyTorch examples (python/examples/idx_data.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python",
                                "examples"))
try:
    import torch
    from torch import nn

    import idx_data  # NumPy
except ImportError as err:
    sys.exit(
        f"torch_mlp_baseline: cannot import {err.name} ({err}). Install Debian's packages "
        "(apt-get install -y python3-torch python3-numpy) and run this script with "
        "/usr/bin/python3, not another python3 on PATH."
    )

HIDDEN = (256, 128)
NUM_CLASSES = 10
LEARNING_RATE = 0.05
INITIAL_ACCUMULATOR = 0.1
EPSILON = 1e-8
PROGRESS_SECONDS = 5.0
EVAL_BATCH = 1000


def load_split(data_dir, prefix):
    """Returns (images float32 [n, 784] in [0, 1], labels int64 [n]) for 'train' or 't10k'."""
    try:
        images, labels = idx_data.read_split(data_dir, prefix)
    except idx_data.DataError as err:
        sys.exit(f"torch_mlp_baseline: {err}")
    return torch.from_numpy(images), torch.from_numpy(labels)


def make_mlp(dim):
    widths = (dim,) + HIDDEN + (NUM_CLASSES,)
    layers = []
    for i in range(len(widths) - 1):
        linear = nn.Linear(widths[i], widths[i + 1])
        # Glorot uniform: bound sqrt(6 / (fan_in + fan_out)), as worker/model.h.
        nn.init.xavier_uniform_(linear.weight)
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if i + 2 < len(widths):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def accuracy(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for first in range(0, x.shape[0], EVAL_BATCH):
            logits = model(x[first:first + EVAL_BATCH])
            correct += (logits.argmax(dim=1) == y[first:first + EVAL_BATCH]).sum().item()
    model.train()
    return correct / x.shape[0] if x.shape[0] else 0.0


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch_size", type=int, default=32, help="examples per mini-batch")
    p.add_argument("--epochs", type=int, default=1, help="passes over the training set")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op and inter-op threads")
    p.add_argument("--max_train_examples", type=int, default=0,
                   help="use only the first N training examples (0: all)")
    p.add_argument("--data_dir", default=idx_data.DEFAULT_DATA_DIR,
                   help="directory holding the four Fashion-MNIST .gz files")
    p.add_argument("--seed", type=int, default=1, help="seed for initialization and shuffling")
    args = p.parse_args()
    for name in ("batch_size", "epochs", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.max_train_examples < 0:
        p.error(f"--max_train_examples must be >= 0, got {args.max_train_examples}")
    return args


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(args.threads)
    torch.manual_seed(args.seed)

    x_train, y_train = load_split(args.data_dir, "train")
    x_test, y_test = load_split(args.data_dir, "t10k")
    if args.max_train_examples:
        x_train = x_train[:args.max_train_examples]
        y_train = y_train[:args.max_train_examples]
    n = x_train.shape[0]
    print(f"torch {torch.__version__}, {args.threads} thread(s); {n} training and "
          f"{x_test.shape[0]} test examples from {args.data_dir}", flush=True)

    model = make_mlp(x_train.shape[1])
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adagrad(model.parameters(), lr=LEARNING_RATE,
                                    initial_accumulator_value=INITIAL_ACCUMULATOR, eps=EPSILON)
    generator = torch.Generator().manual_seed(args.seed)

    step = 0
    examples = 0
    train_seconds = 0.0
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(n, generator=generator)
        epoch_start = time.perf_counter()
        window_start = epoch_start
        window_loss, window_steps, window_examples = 0.0, 0, 0
        for first in range(0, n, args.batch_size):
            idx = order[first:first + args.batch_size]
            xb, yb = x_train[idx], y_train[idx]
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            step += 1
            window_loss += loss.item()
            window_steps += 1
            window_examples += idx.shape[0]
            now = time.perf_counter()
            epoch_end = first + args.batch_size >= n
            if now - window_start >= PROGRESS_SECONDS or epoch_end:
                secs = now - window_start
                print(f"epoch {epoch} step {step} loss {window_loss / window_steps:.4f} "
                      f"examples/s {window_examples / secs if secs > 0 else 0.0:.0f}"
                      f"{' (epoch end)' if epoch_end else ''}", flush=True)
                window_start = now
                window_loss, window_steps, window_examples = 0.0, 0, 0
        train_seconds += time.perf_counter() - epoch_start
        examples += n

    test_accuracy = accuracy(model, x_test, y_test)
    eps = examples / train_seconds if train_seconds > 0 else 0.0
    print(f"RESULT framework=pytorch threads={args.threads} batch_size={args.batch_size} "
          f"epochs={args.epochs} examples_per_second={eps:.1f} "
          f"test_accuracy={test_accuracy:.4f} train_seconds={train_seconds:.1f}", flush=True)


if __name__ == "__main__":
    main()
