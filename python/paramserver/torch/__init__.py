"""paramserver.torch: PyTorch models whose parameters live on the parameter servers.

- ShardedEmbeddingBag(table, dim, mode="sum", optimizer=..., client=c): an
  nn.Module like nn.EmbeddingBag whose rows are a sparse table on the
  servers: forward pulls the batch's rows, backward pushes their gradients
  (summed per row), with ps_worker's row cache and key-list caching.
- ServerParameters(model.parameters(), client, ...): a model's dense
  parameters kept on the servers, one dense table each, used as a torch
  optimizer is (zero_grad(), step()): step() pushes the gradients stamped
  with the step as clock and reads the new values, under the Client's
  consistency ("async", "bounded" or "bsp").
- Trainer(model, client, loss, params=...): ps_worker's loop (progress
  lines, curve CSV, staleness, a tqdm bar), checkpoints asked of the servers
  and --resume at this worker's clock.

The servers run the optimizer: torch's optimizers are not used. Needs
Debian's python3-torch (and python3-tqdm for the bar), run with
/usr/bin/python3. See docs/guide/python.md.

Example (the whole of python/examples/torch_embedding.py is one)::

    import paramserver as ps
    from paramserver.torch import ServerParameters, ShardedEmbeddingBag, Trainer

    client = ps.Client(servers="127.0.0.1:7000", worker_id=0, key_list_caching=True)
    emb = ShardedEmbeddingBag("ctr/emb", 8, "sum", "adagrad", client=client)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    params = ServerParameters(mlp.named_parameters(), client, prefix="ctr/mlp",
                              optimizer="adagrad")
    model = torch.nn.ModuleDict({"emb": emb, "mlp": mlp})

    def loss(batch):
        logits = mlp(emb(batch.ids, batch.offsets, batch.values)).squeeze(1)
        return F.binary_cross_entropy_with_logits(logits, batch.labels, reduction="sum")

    Trainer(model, client, loss, params=params, loss_reduction="sum").fit(data)
"""

try:
    import torch  # noqa: F401  (Debian's python3-torch)
except ImportError as err:  # pragma: no cover - depends on the machine
    raise ImportError(f"paramserver.torch needs PyTorch ({err}): install Debian's python3-torch "
                      "and run /usr/bin/python3, not another python3 on PATH") from err

from ._embedding import ShardedEmbeddingBag  # noqa: E402
from ._metrics import auc, binary_metrics  # noqa: E402
from ._parameters import ServerParameters  # noqa: E402
from ._row_cache import RowCache  # noqa: E402
from ._trainer import Trainer  # noqa: E402

__all__ = ["RowCache", "ServerParameters", "ShardedEmbeddingBag", "Trainer", "auc",
           "binary_metrics"]
