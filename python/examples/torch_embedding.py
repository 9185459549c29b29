#!/usr/bin/python3
"""ps_worker --model=embedding_mlp in PyTorch with paramserver.torch (docs/guide/python.md):
embedding rows in a sparse table on the servers, summed per field, into an MLP of dense tables."""
import argparse
import sys

import torch
from torch.nn import Linear, Module, ReLU, Sequential
from torch.nn.functional import binary_cross_entropy_with_logits as log_loss

import paramserver as ps
import paramserver.flags as psflags
from paramserver.torch import ServerParameters, ShardedEmbeddingBag, Trainer

from libsvm_data import DataError, read_libsvm  # beside this file

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
psflags.add_cluster_flags(p)
psflags.add_optimizer_flags(p, learning_rate=0.1)
Trainer.add_flags(p, batch_size=256)
for name, default in (("train_data", ""), ("test_data", ""), ("table_prefix", "torch_embedding"),
                      ("embedding_dim", 8), ("embedding_hidden", 16), ("num_fields", 1),
                      ("num_buckets", 1024), ("row_cache_staleness", 0), ("max_train_examples", 0)):
    p.add_argument(f"--{name}", type=type(default), default=default)
args = psflags.parse(p)
opt = psflags.optimizer(args)  # of every table
ps.tune_process_for_data_path()


class EmbeddingMlp(Module):
    def __init__(self, client):
        super().__init__()
        self.emb = ShardedEmbeddingBag(
            f"{args.table_prefix}/emb", args.embedding_dim, "sum", opt, client=client,
            buckets=args.num_buckets, seed=args.seed, row_cache_staleness=args.row_cache_staleness)
        self.mlp = Sequential(Linear(args.num_fields * args.embedding_dim, args.embedding_hidden),
                              ReLU(), Linear(args.embedding_hidden, 1))

    def forward(self, batch):  # click logits of a libsvm_data.LibsvmData batch
        bags = self.emb(batch.ids, batch.bag_offsets(args.num_fields), batch.values)
        return self.mlp(bags.view(len(batch), -1)).squeeze(1)


try:
    with psflags.connect(args, training=not args.eval_only) as client:
        model = EmbeddingMlp(client)
        params = ServerParameters(model.mlp.named_parameters(), client, seed=args.seed,
                                  prefix=f"{args.table_prefix}/mlp", optimizer=opt)
        trainer = Trainer.from_flags(args, model, client, lambda b: log_loss(
            model(b), torch.from_numpy(b.labels), reduction="sum"), params=params,
            loss_reduction="sum")  # the batch's sum, as ps_worker's
        if not args.eval_only:
            trainer.fit(read_libsvm(args.train_data, args.worker_index, args.num_workers,
                                    args.max_train_examples))
        params.pull(clock=0)  # the servers' MLP now (a read that never waits)
        test = read_libsvm(args.test_data)
        trainer.report_auc(test.labels, trainer.predict(test, lambda b: torch.sigmoid(model(b))))
except (ps.Error, DataError, ValueError) as err:
    sys.exit(f"torch_embedding: {psflags.who(args)}: {err}")
