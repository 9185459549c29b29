"""ServerParameters: a model's dense parameters kept on the parameter servers.

Each parameter tensor is one dense table of width 1, <prefix>/<name>, in
torch's layout (row-major; nn.Linear weights as out x in). It works as a
torch optimizer would, except that the update runs on the servers:

    params = ServerParameters(model.named_parameters(), client, prefix="mlp",
                              optimizer="adagrad")
    params.pull()                       # before the first forward
    for batch in batches:
        params.zero_grad()
        loss_fn(model(batch)).backward()
        params.step()                   # push the gradients; read the new values

step() pushes every parameter's gradient stamped with `clock` and reads the
values after it straight into the tensors' memory (the NumPy arrays the
client gets are views of the parameters and of autograd's gradients: nothing
is copied here), then moves the clock on. With "async" consistency the push
and the read are one round trip per server for all the tables
(Client.push_pull_many); with "bounded" or "bsp" it pushes
(Client.push_many), then reads at clock + 1 (Client.pull_many), which waits
as the Client's consistency says. A parameter without a gradient pushes
zeros, so that its table's rounds go on (bsp waits for every table).

Tables made here start as ps_worker's models' do: weights (2 or more
dimensions) Glorot-uniform, biases zeros, drawn by the servers, so every
worker starts from the same values whatever torch's initialization was.

Staleness, as ps_worker's dense trainer measures it (worker/train/
trainer.cc): for each push, the updates by other workers between the read
its gradient was computed at and the push (from the versions the servers
report); clock lag: how far behind this worker's clock the values read were.

Not thread-safe: one call at a time.
"""

import zlib
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

import numpy as np
import torch

from ._tables import Optimizer, check_existing, optimizer_fields

LAG_BUCKETS = 17  # clock lag histogram: 0 .. 15, 16 and more (as ps_worker's)


def _glorot_bound(shape: Tuple[int, ...]) -> float:
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    fan_out, fan_in = shape[0] * receptive, shape[1] * receptive
    return (6.0 / (fan_in + fan_out)) ** 0.5


class ServerParameters:
    """Dense parameters on the servers, one table each.

    Args:
        parameters: model.parameters() (tables <prefix>/0, /1, ...) or
            model.named_parameters() (tables <prefix>/<name>): float32, CPU,
            contiguous tensors.
        client: the paramserver.Client.
        prefix: the tables' name prefix.
        optimizer: the servers' update rule, to create the tables: a name or
            a dict of create_table's optimizer keywords. None: the tables
            must exist, of the tensors' sizes.
        seed: the tables' seed (each table's is derived from it and its name).

    Raises:
        ValueError: a tensor that is not float32, on the CPU and
            contiguous; an existing table of another size.
        paramserver.Error: from create_table or table_definition.
    """

    def __init__(self, parameters: Iterable[Union[torch.Tensor, Tuple[str, torch.Tensor]]],
                 client: Any, *, prefix: str = "params", optimizer: Optimizer = None,
                 seed: int = 1) -> None:
        call = "ServerParameters"
        self.client = client
        self.tables: List[Tuple[str, torch.Tensor]] = []
        fields = optimizer_fields(call, optimizer)
        for i, item in enumerate(parameters):
            name, param = item if isinstance(item, tuple) else (str(i), item)
            if (param.dtype != torch.float32 or param.device.type != "cpu"
                    or not param.is_contiguous()):
                raise ValueError(f"{call}: parameter '{name}' must be a contiguous float32 CPU "
                                 f"tensor; got {param.dtype} on {param.device}")
            table = f"{prefix}/{name}"
            if fields is not None:
                if param.dim() >= 2:
                    bound = _glorot_bound(tuple(param.shape))
                    init = dict(initializer="uniform", init_low=-bound, init_high=bound)
                else:
                    init = dict(initializer="zeros")
                # A seed per table, the same in every process (hash() is not).
                table_seed = (seed * 1000003 + zlib.crc32(name.encode())) % (1 << 63)
                client.create_table(table, size=param.numel(), seed=table_seed, **init, **fields)
            check_existing(call, client, table, 1, param.numel())
            self.tables.append((table, param))
        if not self.tables:
            raise ValueError(f"{call}: no parameters given")
        self.clock = 0  # rounds pushed: the clock of the next push
        self._zeros: Dict[str, np.ndarray] = {}
        # Staleness bookkeeping (see the module's doc).
        self.pushes = 0
        self.pulls = 0
        self._pulled: Optional[np.ndarray] = None  # versions the values were read at
        self._pushes_at_pull = 0
        self.staleness_sum = 0
        self.max_staleness = 0
        self.lag_histogram = [0] * LAG_BUCKETS
        self.max_clock_lag = 0
        self.waited_seconds = 0.0

    @property
    def num_values(self) -> int:
        return sum(param.numel() for _, param in self.tables)

    @property
    def mean_staleness(self) -> float:
        return self.staleness_sum / self.pushes if self.pushes else 0.0

    @staticmethod
    def _values(param: torch.Tensor) -> np.ndarray:
        return param.detach().numpy()  # the parameter's own memory

    def _grad(self, table: str, param: torch.Tensor) -> np.ndarray:
        if param.grad is None:
            if table not in self._zeros:
                self._zeros[table] = np.zeros(param.numel(), dtype=np.float32)
            return self._zeros[table]
        return param.grad.detach().numpy()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clears the gradients (set_to_none: autograd then hands over fresh
        tensors, pushed from their memory, with no zeroing pass)."""
        for _, param in self.tables:
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                param.grad.zero_()

    def pull(self, clock: Optional[int] = None) -> None:
        """Reads every table into its tensor, as a worker at `clock` (default:
        self.clock; with bounded or bsp the read may wait)."""
        clock = self.clock if clock is None else clock
        info = self.client.pull_many([(table, self._values(p)) for table, p in self.tables],
                                     clock=clock)
        self._record_pull(info, clock)

    def step(self) -> None:
        """Pushes every gradient at self.clock, reads the values after it, and
        moves the clock on."""
        clock = self.clock
        if self.client.consistency == "async":
            info = self.client.push_pull_many(
                [(table, self._grad(table, p), self._values(p)) for table, p in self.tables],
                clock=clock)
            self._record_push(info["versions"])
        else:
            versions = self.client.push_many(
                [(table, self._grad(table, p)) for table, p in self.tables], clock=clock)
            self._record_push(versions)
            info = self.client.pull_many([(table, self._values(p)) for table, p in self.tables],
                                         clock=clock + 1)
        self._record_pull(info, clock + 1)
        self.clock = clock + 1

    def _record_push(self, versions: np.ndarray) -> None:
        self.pushes += 1
        staleness = 0
        if self._pulled is not None and self._pulled.shape == versions.shape:
            others = (versions.astype(np.int64) - self._pulled.astype(np.int64)
                      - (self.pushes - self._pushes_at_pull))
            others = others[versions > 0]
            if others.size:
                staleness = max(0, int(others.max()))
        self.staleness_sum += staleness
        self.max_staleness = max(self.max_staleness, staleness)

    def _record_pull(self, info: Dict[str, Any], clock: int) -> None:
        self.pulls += 1
        self._pushes_at_pull = self.pushes
        self._pulled = info["versions"]
        lag = max(0, clock - int(info["params_clock"]))
        self.lag_histogram[min(lag, LAG_BUCKETS - 1)] += 1
        self.max_clock_lag = max(self.max_clock_lag, lag)
        self.waited_seconds += float(info["waited"])
