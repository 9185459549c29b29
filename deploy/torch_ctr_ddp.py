#!/usr/bin/python3
"""PyTorch DistributedDataParallel baseline for ps_worker --model=embedding_mlp.

Model and optimizer as worker/train/embedding_mlp.{h,cc}: an embedding row of
width --dim per feature id (uniform in +-0.05); an example's rows, weighted by
the feature values, summed per field (--num_fields F; index:value is field 0);
the F * dim concatenation feeds --hidden ReLU units and one sigmoid output
(Xavier-uniform weights, zero biases); log-loss; AdaGrad (lr 0.05, initial
accumulator 0.1, eps 1e-8) on every parameter. As ps_worker: worker w of W
trains on examples i with i mod W == w in file order (no shuffling; --seed
seeds the initialisation), a batch's gradient SUMMED over its examples.

W processes (CPU, gloo over 127.0.0.1 and a free port) each hold a replica.
The parent parses the files once (a malformed line exits with "PATH:LINE:
...") and shares the arrays. Feature ids (uint64) become rows 0..R-1 in id
order over the training examples used; test features with other ids are
dropped (zero embedding). DDP averages the ranks' gradients: an update is the
mean of the W batch sums (one ps_worker push's scale; the PS applies W pushes
where DDP applies one update). A rank with a batch fewer runs a zero-weighted
step, so that all ranks make the same collectives.

Synchronisation: the dense MLP goes through DDP's bucketed allreduce; the
embedding gradient is sparse (EmbeddingBag(sparse=True)) and DDP passes it to
gloo's sparse allreduce, which coalesces it (one entry per distinct row),
allgathers 9 int64 of metadata, the int64 row indices and the dim float32
values, and sums on every rank, so the replicas stay identical (checked at
the end). allreduce_bytes_per_step is the payload a process hands to these
collectives per step: 4 * dense_params + 72 + U * (8 + 4 * dim) for its U
distinct rows (mean over steps and ranks); not wire bytes (a ring allreduce
sends ~2 (W-1)/W of its payload; allgather receives the W-1 other payloads).

Run it with Debian's interpreter, which sees python3-torch:
    /usr/bin/python3 deploy/torch_ctr_ddp.py --train=train.txt --test=test.txt \\
        --workers=2 --num_fields=4
Rank 0 prints "step N examples/s X loss Y" every ~5 s (X: all workers, rank
0's rate times W; Y: rank 0's mean loss since the last line), "epoch E
seconds S", and last one machine-readable line:
    RESULT framework=pytorch_ddp workers=W threads=T epochs=E seconds_per_epoch=...
    train_seconds=... examples_per_second=... test_auc=... test_logloss=...
    allreduce_bytes_per_step=... dense_params=... embedding_rows=...
examples_per_second counts all workers' examples over the training loops'
time; test_auc is rank-based (ties averaged) over the whole test file.
"""

import argparse
import gzip
import math
import os
import socket
import sys
import time

try:
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel
except ImportError as err:
    sys.exit(f"torch_ctr_ddp: cannot import {err.name} ({err}). Install Debian's packages "
             "(apt-get install -y python3-torch python3-numpy) and run this script with "
             "/usr/bin/python3, not another python3 on PATH.")

INITIAL_ACCUMULATOR = 0.1
EPSILON = 1e-8
PROGRESS_SECONDS = 5.0
EVAL_BATCH = 4096
MAX_FIELD = 65535  # kMaxLibsvmField
GLOO_METADATA_BYTES = 9 * 8  # gloo's sparse allreduce metadata per rank


def fail(message):
    sys.exit(f"torch_ctr_ddp: {message}")


def read_libsvm(path, num_fields, max_examples):
    """Parses a LibSVM/libffm file (plain or gzip) into (labels, ptr, ids, values, fields).

    Example i has features ptr[i]:ptr[i+1]; ids are uint64. Exits naming the
    file and line on a malformed line or a field >= num_fields.
    """
    labels, ptr, ids, values, fields = [], [0], [], [], []
    try:
        with open(path, "rb") as probe:
            is_gzip = probe.read(2) == b"\x1f\x8b"
        opener = gzip.open if is_gzip else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            for line_no, line in enumerate(f, 1):
                if max_examples and len(labels) >= max_examples:
                    break
                if "#" in line:
                    line = line[:line.index("#")]
                tokens = line.split()
                if not tokens:
                    continue
                where = f"{path}:{line_no}"
                try:
                    label = float(tokens[0])
                except ValueError:
                    label = None
                if label not in (0.0, 1.0, -1.0):
                    fail(f"{where}: expected a label 0, 1, -1 or +1, got '{tokens[0]}'")
                first = 2 if len(tokens) > 1 and tokens[1].startswith("qid:") else 1
                form = 0
                for tok in tokens[first:]:
                    parts = tok.split(":")
                    form = form or len(parts)
                    if len(parts) != form or form not in (2, 3):
                        fail(f"{where}: expected index:value or field:index:value (as the "
                             f"line's first feature), got '{tok}'")
                    try:
                        index, value = int(parts[-2]), float(parts[-1])
                        field = int(parts[0]) if form == 3 else 0
                    except ValueError:
                        index = -1
                    if not (parts[-2].isdigit() and 0 <= index < 2**64 and math.isfinite(value)
                            and (form == 2 or (parts[0].isdigit() and field <= MAX_FIELD))):
                        fail(f"{where}: malformed feature '{tok}'")
                    if field >= num_fields:
                        fail(f"{where}: feature '{tok}' has field {field}, but the model has "
                             f"{num_fields} field(s) (--num_fields)")
                    ids.append(index)
                    values.append(value)
                    fields.append(field)
                labels.append(1.0 if label > 0 else 0.0)
                ptr.append(len(ids))
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        fail(f"cannot read {path}: {e}")
    if not labels:
        fail(f"{path}: no examples")
    return (np.array(labels, np.float32), np.array(ptr, np.int64), np.array(ids, np.uint64),
            np.array(values, np.float32), np.array(fields, np.int64))


def to_bags(labels, ptr, rows, values, fields, num_fields, keep=None):
    """Tensors for EmbeddingBag: features sorted by (example, field), and bag_ptr.

    Bag b = example * F + field holds features bag_ptr[b]:bag_ptr[b+1]. `keep`
    (optional, per feature) drops features first.
    """
    example = np.repeat(np.arange(len(labels)), np.diff(ptr))
    if keep is not None:
        example, rows, values, fields = example[keep], rows[keep], values[keep], fields[keep]
    key = example * num_fields + fields
    order = np.argsort(key, kind="stable")
    counts = np.bincount(key, minlength=len(labels) * num_fields)
    bag_ptr = np.concatenate(([0], np.cumsum(counts)))
    return {"labels": torch.from_numpy(labels), "bag_ptr": torch.from_numpy(bag_ptr),
            "rows": torch.from_numpy(rows[order].astype(np.int64)),
            "values": torch.from_numpy(values[order])}


def shard(data, rank, world, num_fields):
    """The examples i with i mod world == rank, as contiguous bags."""
    bag_ptr = data["bag_ptr"].numpy()
    sel = np.arange(rank, len(data["labels"]), world)
    bags = (sel[:, None] * num_fields + np.arange(num_fields)).ravel()
    counts = bag_ptr[bags + 1] - bag_ptr[bags]
    new_ptr = np.concatenate(([0], np.cumsum(counts)))
    gather = np.repeat(bag_ptr[bags] - new_ptr[:-1], counts) + np.arange(new_ptr[-1])
    sel, gather = torch.from_numpy(sel), torch.from_numpy(gather)
    return {"labels": data["labels"][sel], "bag_ptr": torch.from_numpy(new_ptr),
            "rows": data["rows"][gather], "values": data["values"][gather]}


class EmbeddingMlp(nn.Module):
    def __init__(self, num_rows, dim, hidden, num_fields):
        super().__init__()
        self.width = num_fields * dim
        self.emb = nn.EmbeddingBag(num_rows, dim, mode="sum", sparse=True)
        nn.init.uniform_(self.emb.weight, -0.05, 0.05)
        # Linear(in, out).weight is out x in: w1[u][i], as embedding_mlp's w1[u * in + i].
        self.fc1, self.fc2 = nn.Linear(self.width, hidden), nn.Linear(hidden, 1)
        for layer in (self.fc1, self.fc2):
            nn.init.xavier_uniform_(layer.weight)  # bound sqrt(6 / (fan_in + fan_out))
            nn.init.zeros_(layer.bias)

    def forward(self, rows, offsets, weights):
        e = self.emb(rows, offsets, per_sample_weights=weights).view(-1, self.width)
        return self.fc2(torch.relu(self.fc1(e))).squeeze(1)  # logits


def batch(data, first, end, num_fields):
    """(rows, offsets, weights, labels) of examples first:end of `data`."""
    bag_ptr = data["bag_ptr"]
    lo, hi = int(bag_ptr[first * num_fields]), int(bag_ptr[end * num_fields])
    offsets = bag_ptr[first * num_fields:end * num_fields] - lo
    return data["rows"][lo:hi], offsets, data["values"][lo:hi], data["labels"][first:end]


def auc_and_logloss(prob, labels):
    """Rank-based AUC (ties get their average rank) and the clamped mean log-loss."""
    _, inverse, counts = np.unique(prob, return_inverse=True, return_counts=True)
    average_rank = np.cumsum(counts) - (counts - 1) / 2.0  # 1-based
    ranks = average_rank[inverse]
    pos = labels > 0.5
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    auc = ((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)
           if n_pos and n_neg else float("nan"))
    p = np.clip(prob, 1e-15, 1 - 1e-15)
    logloss = -np.mean(np.where(pos, np.log(p), np.log(1 - p)))
    return auc, logloss


def worker(rank, args, train, test, num_rows):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    world, bs, nf = args.workers, args.batch_size, args.num_fields
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model = EmbeddingMlp(num_rows, args.dim, args.hidden, nf)
    ddp = DistributedDataParallel(model)  # broadcasts rank 0's initial parameters
    optimizer = torch.optim.Adagrad(ddp.parameters(), lr=args.learning_rate,
                                    initial_accumulator_value=INITIAL_ACCUMULATOR, eps=EPSILON)
    loss_fn = nn.BCEWithLogitsLoss(reduction="sum")  # sigmoid + log-loss, summed over the batch
    mine = shard(train, rank, world, nf)
    n_mine = len(mine["labels"])
    # Every rank runs rank 0's (the largest) number of steps.
    steps_per_epoch = -(-len(range(0, len(train["labels"]), world)) // bs)
    batches = [batch(mine, s, min(s + bs, n_mine), nf) for s in range(0, n_mine, bs)]
    sparse_bytes = [GLOO_METADATA_BYTES + torch.unique(b[0]).numel() * (8 + 4 * args.dim)
                    for b in batches]
    dense_params = sum(p.numel() for n, p in model.named_parameters() if not n.startswith("emb"))
    sent_sparse, step, train_seconds = 0, 0, 0.0
    for epoch in range(1, args.epochs + 1):
        dist.barrier()
        start = window = time.perf_counter()
        window_loss, window_examples = 0.0, 0
        for j in range(steps_per_epoch):
            real = j < len(batches)
            rows, offsets, weights, labels = batches[j if real else 0]
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(ddp(rows, offsets, weights), labels)
            (loss if real else loss * 0.0).backward()  # DDP allreduces here
            optimizer.step()
            step += 1
            sent_sparse += sparse_bytes[j if real else 0]
            if rank == 0:
                window_loss += loss.item()
                window_examples += len(labels)
                now = time.perf_counter()
                if now - window >= PROGRESS_SECONDS:
                    print(f"step {step} examples/s {window_examples * world / (now - window):.0f} "
                          f"loss {window_loss / window_examples:.4f}", flush=True)
                    window, window_loss, window_examples = now, 0.0, 0
        seconds = time.perf_counter() - start
        train_seconds += seconds
        if rank == 0:
            print(f"epoch {epoch} seconds {seconds:.2f}", flush=True)
    # The mean sparse payload per step and process, and a check that the
    # replicas' embeddings agree (they must: same gradients, same AdaGrad).
    totals = torch.tensor([float(sent_sparse), float(step)], dtype=torch.float64)
    dist.all_reduce(totals)
    checksum = model.emb.weight.detach().double().sum().reshape(1)
    spread = torch.cat([checksum, -checksum])
    dist.all_reduce(spread, op=dist.ReduceOp.MAX)
    if rank == 0:
        model.eval()
        probs = []
        with torch.no_grad():
            for s in range(0, len(test["labels"]), EVAL_BATCH):
                end = min(s + EVAL_BATCH, len(test["labels"]))
                rows, offsets, weights, _ = batch(test, s, end, nf)
                probs.append(torch.sigmoid(model(rows, offsets, weights).double()).numpy())
        auc, logloss = auc_and_logloss(np.concatenate(probs), test["labels"].numpy())
        print(f"replicas' embeddings identical: {float(spread[0] + spread[1]) == 0.0}", flush=True)
        examples = len(train["labels"]) * args.epochs
        print(f"RESULT framework=pytorch_ddp workers={world} threads={args.threads} "
              f"epochs={args.epochs} seconds_per_epoch={train_seconds / args.epochs:.2f} "
              f"train_seconds={train_seconds:.2f} "
              f"examples_per_second={examples / max(train_seconds, 1e-9):.1f} test_auc={auc:.4f} "
              f"test_logloss={logloss:.4f} allreduce_bytes_per_step="
              f"{4 * dense_params + totals[0].item() / totals[1].item():.0f} "
              f"dense_params={dense_params} embedding_rows={num_rows}", flush=True)
    dist.destroy_process_group()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", required=True, help="training LibSVM/libffm file (.gz optional)")
    p.add_argument("--test", required=True, help="test LibSVM/libffm file (.gz optional)")
    p.add_argument("--workers", type=int, default=2, help="DDP processes")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--epochs", type=int, default=1, help="passes over the training file")
    p.add_argument("--batch_size", type=int, default=32, help="examples per step per worker")
    p.add_argument("--dim", type=int, default=8, help="embedding width")
    p.add_argument("--hidden", type=int, default=16, help="hidden units")
    p.add_argument("--num_fields", type=int, default=1, help="fields F (MLP input F * dim)")
    p.add_argument("--learning_rate", type=float, default=0.05, help="AdaGrad learning rate")
    p.add_argument("--max_train_examples", type=int, default=0,
                   help="use only the first N examples of the training file (0: all)")
    p.add_argument("--seed", type=int, default=1, help="seed of the initialisation")
    args = p.parse_args()
    for name in ("workers", "threads", "epochs", "batch_size", "dim", "hidden"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if not 1 <= args.num_fields <= MAX_FIELD + 1:
        p.error(f"--num_fields must be in [1, {MAX_FIELD + 1}], got {args.num_fields}")
    if args.max_train_examples < 0 or args.learning_rate <= 0:
        p.error("--max_train_examples must be >= 0 and --learning_rate > 0")
    return args


def main():
    args = parse_args()
    start = time.perf_counter()
    labels, ptr, ids, values, fields = read_libsvm(args.train, args.num_fields,
                                                   args.max_train_examples)
    if len(labels) < args.workers or not len(ids):
        fail(f"{args.train}: {len(labels)} examples with {len(ids)} features for "
             f"{args.workers} workers")
    vocab, rows = np.unique(ids, return_inverse=True)  # dense rows in id order
    train = to_bags(labels, ptr, rows, values, fields, args.num_fields)
    t_labels, t_ptr, t_ids, t_values, t_fields = read_libsvm(args.test, args.num_fields, 0)
    t_rows = np.minimum(np.searchsorted(vocab, t_ids), len(vocab) - 1)
    known = vocab[t_rows] == t_ids  # unseen ids are dropped (zero embedding)
    test = to_bags(t_labels, t_ptr, t_rows, t_values, t_fields, args.num_fields, keep=known)
    print(f"torch {torch.__version__}: {len(labels)} training examples, {len(vocab)} rows; "
          f"{len(t_labels)} test examples ({int((~known).sum())} of {len(t_ids)} features unseen);"
          f" parsed in {time.perf_counter() - start:.1f} s", flush=True)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    with socket.socket() as s:  # a free port on the loopback interface
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    mp.spawn(worker, args=(args, train, test, len(vocab)), nprocs=args.workers, join=True)


if __name__ == "__main__":
    main()
