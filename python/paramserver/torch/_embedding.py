"""ShardedEmbeddingBag: torch.nn.EmbeddingBag over a table on the servers.

The rows live in a table of the parameter servers (sparse: any uint64 id,
a row made at its first push), not in the module. Each forward pulls the
rows of the batch's distinct ids only (Client.pull_keys), one row per id
however often the batch uses it, and sums (or averages) them into bags with
torch.nn.functional.embedding_bag; in training, autograd gives each pulled
row its gradient summed over the bags that used it, and a hook on the rows
pushes those gradients (Client.push_keys) during backward, stamped with the
module's clock. The optimizer runs on the servers: no torch optimizer
touches these rows.

As ps_worker's sparse models (worker/train/sparse_row_io.h):
- row_cache_staleness = tau > 0: a row pulled at clock c is reused up to
  clock c + tau, and only the other ids are pulled (RowCache). Pushes are
  not affected.
- The Client's key_list_caching (ps_worker --key_caching) sends a key list
  a server holds as its signature: a step's push of the rows it pulled
  sends their ids once.

The clock: a forward in training pulls and pushes at `clock`; the first
forward after a push moves it on by one, so forward + backward steps run at
0, 1, 2, ... and several forwards before one backward share a clock. The
Trainer sets it before each step (and to the resumed clock).

Not thread-safe: one forward or backward at a time.
"""

from typing import Any, Optional

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from ._row_cache import RowCache
from ._tables import Optimizer, check_existing, optimizer_fields


def _keys_of(ids: Any) -> np.ndarray:
    """ids as a 1-D uint64 NumPy array (its own memory when it already is one)."""
    if isinstance(ids, torch.Tensor):
        if ids.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"ShardedEmbeddingBag: ids must be an integer tensor; got {ids.dtype}")
        ids = ids.detach().cpu().numpy()
    ids = np.asarray(ids)
    if ids.dtype == np.uint64:
        return ids.reshape(-1)
    if ids.dtype.kind != "i":
        raise TypeError(f"ShardedEmbeddingBag: ids must be uint64 or int64; got {ids.dtype}")
    if ids.size and ids.min() < 0:
        raise ValueError("ShardedEmbeddingBag: ids must be >= 0 (table keys are uint64)")
    return ids.reshape(-1).astype(np.uint64)


def _tensor(values: Any, dtype: torch.dtype) -> torch.Tensor:
    if isinstance(values, torch.Tensor):
        return values.to(dtype)
    return torch.from_numpy(np.ascontiguousarray(values)).to(dtype)


class ShardedEmbeddingBag(nn.Module):
    """Bags of embedding rows kept in a table on the parameter servers.

    Args:
        table: the table's name on the servers.
        dim: the row width (the table's width).
        mode: "sum" or "mean" of each bag's rows (torch.nn.EmbeddingBag's).
        optimizer: how the servers update the rows, used to create the table
            when it does not exist: a name ("adagrad") or a dict of
            Client.create_table's optimizer keywords (e.g.
            paramserver.flags.optimizer(args)). None: the table must exist.
        client: the paramserver.Client (keyword).
        buckets: the sparse table's slices (0: 1024).
        init_range: rows start uniform in [-init_range, init_range) (0:
            zeros), drawn by the servers from `seed` and the key, so every
            worker sees the same initial row.
        seed: the table's seed.
        row_cache_staleness, row_cache_rows: the row cache (0: off).

    Raises:
        ValueError: a bad mode or size; an existing table of another width.
        paramserver.Error: from create_table (ALREADY_EXISTS when a
            different table of that name exists), or NOT_FOUND when
            optimizer is None and no table exists.

    Counters (cumulative): keys_used (distinct ids per training forward),
    keys_pulled, keys_pushed, pushes.
    """

    def __init__(self, table: str, dim: int, mode: str = "sum", optimizer: Optimizer = None, *,
                 client: Any, buckets: int = 0, init_range: float = 0.05, seed: int = 1,
                 row_cache_staleness: int = 0, row_cache_rows: int = 1 << 20) -> None:
        super().__init__()
        call = "ShardedEmbeddingBag"
        if mode not in ("sum", "mean"):
            raise ValueError(f"{call}: mode={mode!r}: expected 'sum' or 'mean'")
        if dim < 1:
            raise ValueError(f"{call}: dim={dim}: must be >= 1")
        if row_cache_staleness < 0 or row_cache_rows < 0:
            raise ValueError(f"{call}: row_cache_staleness and row_cache_rows must be >= 0")
        self.table = table
        self.dim = dim
        self.mode = mode
        self.client = client
        fields = optimizer_fields(call, optimizer)
        if fields is not None:
            init = (dict(initializer="uniform", init_low=-init_range, init_high=init_range)
                    if init_range > 0 else dict(initializer="zeros"))
            client.create_table(table, width=dim, sparse=True, buckets=buckets, seed=seed,
                                **init, **fields)
        check_existing(call, client, table, dim)
        self.cache = (RowCache(dim, row_cache_staleness, row_cache_rows)
                      if row_cache_staleness > 0 else None)
        self._clock = 0
        self._pushed_at: Optional[int] = None  # the clock of the last push
        self.keys_used = 0
        self.keys_pulled = 0
        self.keys_pushed = 0
        self.pushes = 0

    @property
    def clock(self) -> int:
        """The clock of the next training forward's pull and push."""
        return self._clock

    @clock.setter
    def clock(self, value: int) -> None:
        self._clock = int(value)
        self._pushed_at = None

    def extra_repr(self) -> str:
        cache = f", row_cache_staleness={self.cache.staleness}" if self.cache else ""
        return f"table={self.table!r}, dim={self.dim}, mode={self.mode!r}{cache}"

    def forward(self, input: Any, offsets: Any = None,
                per_sample_weights: Any = None) -> torch.Tensor:
        """Bags as torch.nn.EmbeddingBag's forward: `input` is 1-D ids with
        `offsets` (the start of each bag), or 2-D (bags x ids per bag).

        ids: uint64 or int64 (>= 0) NumPy arrays or int64 tensors.
        per_sample_weights (mode "sum"): one weight per id.

        Returns a float32 tensor (bags, dim); in training it carries the
        hook that pushes the rows' gradients when backward reaches them.
        """
        if offsets is None:
            shape = np.shape(input)
            if len(shape) != 2:
                raise ValueError("ShardedEmbeddingBag: 1-D ids need offsets (the start of each "
                                 "bag); or pass 2-D ids, one bag per row")
            offsets = np.arange(0, shape[0] * shape[1], shape[1], dtype=np.int64)
        keys = _keys_of(input)
        unique, inverse = np.unique(keys, return_inverse=True)
        training = self.training and torch.is_grad_enabled()
        if training:
            if self._pushed_at is not None and self._pushed_at >= self._clock:
                self._clock = self._pushed_at + 1
            rows = torch.from_numpy(self._pull_cached(unique, self._clock)).requires_grad_()
            clock = self._clock
            rows.register_hook(lambda grad: self._push(unique, grad, clock))
            self.keys_used += len(unique)
        else:
            rows = torch.from_numpy(self.client.pull_keys(self.table, unique))
        weights = None if per_sample_weights is None else _tensor(per_sample_weights,
                                                                  torch.float32)
        return functional.embedding_bag(torch.from_numpy(inverse.astype(np.int64, copy=False)),
                                        rows, _tensor(offsets, torch.int64), mode=self.mode,
                                        per_sample_weights=weights)

    def _pull_cached(self, keys: np.ndarray, clock: int) -> np.ndarray:
        """The rows of `keys` (distinct) at `clock`: fresh cached ones, the others pulled."""
        if self.cache is None:
            self.keys_pulled += len(keys)
            return self.client.pull_keys(self.table, keys)
        rows = np.empty((len(keys), self.dim), dtype=np.float32)
        missing = ~self.cache.lookup(keys, clock, rows)
        if missing.any():
            missing_keys = keys[missing]
            pulled = self.client.pull_keys(self.table, missing_keys)
            rows[missing] = pulled
            self.cache.insert(missing_keys, clock, pulled)
            self.keys_pulled += len(missing_keys)
        return rows

    def _push(self, keys: np.ndarray, grad: torch.Tensor, clock: int) -> None:
        grads = np.ascontiguousarray(grad.detach().numpy(), dtype=np.float32)
        self.client.push_keys(self.table, keys, grads, clock=clock)
        self._pushed_at = clock if self._pushed_at is None else max(self._pushed_at, clock)
        self.keys_pushed += len(keys)
        self.pushes += 1
