"""Python client of the parameter server: NumPy arrays in, NumPy arrays out.

A Client connects to the servers of a job (a static list of servers, or a
replicated cluster found through etcd), creates tables, and moves float32
values between NumPy arrays and the servers: a pull writes straight into an
array's memory, a push sends straight from it. It wraps the C++ client
library (worker/client/ps_client.h), so routing, retries with
de-duplication (a retried push is applied once), consistency and failover
are the C++ workers'.

Example::

    import numpy as np
    import paramserver as ps

    with ps.Client(servers=["127.0.0.1:7000", "127.0.0.1:7001"]) as c:
        c.create_table("w", size=1000, width=4, optimizer="sgd", learning_rate=0.1)
        w = c.pull("w")                          # float32, shape (1000, 4)
        grads = np.ones_like(w)
        w = c.push_pull("w", grads, clock=0)     # applies w -= 0.1 * grads, reads w back
        c.create_table("emb", width=8, sparse=True)
        keys = np.array([3, 2**63 + 5], dtype=np.uint64)
        rows = c.pull_keys("emb", keys)          # shape (2, 8)
        c.push_keys("emb", keys, np.ones((2, 8), dtype=np.float32), clock=0)

Arrays: values are float32 arrays, C-contiguous and aligned, of any shape
with the right number of elements; keys are 1-D uint64 arrays (int64 with no
negative key is read as uint64). Nothing is converted: any other array
raises TypeError (not an ndarray, wrong dtype) or ValueError (layout, size,
read-only out, negative key) naming the call and the argument, and nothing
is sent.

Errors: a call that fails raises paramserver.Error, with .code (the status
code's name, e.g. "UNAVAILABLE", "NOT_FOUND", "INVALID_ARGUMENT") and
.message (the C++ client's, naming the server, table or keys).

Threads: the GIL is released while a call waits on the network (pulls,
pushes, create_table, wait_for_workers, stats, position, checkpoint), so
other threads run meanwhile. One Client may be shared by several threads.

Also: paramserver.flags (ps_worker's command-line flags for Python workers)
and paramserver.torch (PyTorch modules whose parameters live on the
servers: ShardedEmbeddingBag, ServerParameters, Trainer).
"""

import math
import operator
import pkgutil
from collections.abc import Sequence
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

# From the Bazel tree, `python/` holds this file and `bazel-bin/python/` the
# compiled module: with both on sys.path, look for it in either.
__path__ = pkgutil.extend_path(__path__, __name__)

from . import _paramserver  # noqa: E402  (after __path__ is extended)
from ._errors import Error  # noqa: E402

__version__ = "0.1.0"
__all__ = ["Client", "Error", "checkpoint", "tune_process_for_data_path", "__version__"]

Values = npt.NDArray[np.float32]


def _count(call: str, name: str, value: Any, bits: int = 64) -> int:
    """`value` as an int in [0, 2**bits), or TypeError / ValueError naming it."""
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{call}: {name} must be an int; got {type(value).__name__}") from None
    if not 0 <= number < 2**bits:
        raise ValueError(f"{call}: {name}={number}: must be in [0, 2**{bits})")
    return number


def _positive(call: str, name: str, value: Any, bits: int = 64) -> int:
    """`value` as an int in [1, 2**bits)."""
    number = _count(call, name, value, bits)
    if number < 1:
        raise ValueError(f"{call}: {name}={number}: must be >= 1")
    return number


def _number(call: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{call}: {name} must be a number; got {type(value).__name__}")
    return float(value)


def _seconds(call: str, name: str, value: Any, zero_allowed: bool = False) -> float:
    """`value` as a finite number of seconds > 0 (>= 0 when zero_allowed)."""
    seconds = _number(call, name, value)
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero_allowed):
        bound = ">= 0" if zero_allowed else "> 0"
        raise ValueError(f"{call}: {name}={value}: must be a finite number of seconds {bound}")
    return seconds


def _text(call: str, name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{call}: {name} must be a str; got {type(value).__name__}")
    return value


def _optional_text(call: str, name: str, value: Optional[str]) -> str:
    return "" if value is None else _text(call, name, value)


def _servers(call: str, servers: Union[str, Sequence[str]]) -> str:
    """The cluster spec "host:port,host:port" (the C++ side checks its entries)."""
    if isinstance(servers, str):
        return servers
    if not isinstance(servers, Sequence) or not all(isinstance(s, str) for s in servers):
        raise TypeError(f"{call}: servers must be a list of 'host:port' strings (shard order) "
                        f"or one comma-separated string; got {servers!r}")
    return ",".join(servers)


def _ops(call: str, ops: Any, size: int, shape: str) -> List[tuple]:
    """`ops` as a list of tuples of `size` items, or TypeError naming the bad one."""
    ops = list(ops)
    for i, op in enumerate(ops):
        if not isinstance(op, tuple) or len(op) != size:
            raise TypeError(f"{call}: ops[{i}] must be a tuple {shape}; "
                            f"got {type(op).__name__}")
    return ops


def _begins(call: str, begins: Optional[Sequence[int]], n: int) -> List[int]:
    if begins is None:
        return [0] * n
    return [_count(call, f"begins[{i}]", b) for i, b in enumerate(begins)]


class Client:
    """A worker's connection to every server of a job.

    Give either ``servers`` (a static cluster: "host:port" of each server, in
    shard order, as a list or one comma-separated string, like ps_worker's
    --servers) or ``etcd`` and ``cluster`` (a replicated cluster: calls go to
    each shard's primary and follow failovers). Connecting waits up to
    ``connect_timeout`` seconds for the servers and checks that they form
    one cluster.

    Args:
        servers: the static cluster's servers, in shard order.
        etcd: instead of servers, a replicated cluster's etcd ("host:port").
        cluster: with etcd, the cluster's name (ps_server --cluster).
        worker_id: this worker's id; with a lease, one live process per id.
        consistency: "async" (pulls never wait), "bsp" (a pull at clock t
            waits until every live worker has pushed its rounds < t) or
            "bounded" (waits for rounds < t - staleness).
        staleness: with "bounded", the rounds a pull may be behind.
        timeout: seconds per call attempt; default 10, or 2.5 with etcd.
        connect_timeout: seconds to wait for the servers (and etcd's ring).
        max_attempts: attempts per call (failed ones are retried with the
            same request id, so a push is applied once); default 3, or 40
            with etcd, enough to span a failover.
        lease: > 0: register with the servers and renew the lease by
            heartbeats every lease / 4 seconds, so that this worker counts
            in the servers' clock minimum ("bsp", "bounded",
            wait_for_workers). 0: no heartbeats.
        token: the token sent with every call (see docs/ops/security.md).
        ca_cert, cert, key: PEM files for TLS: the CA that signed the
            servers' certificates, and this process's certificate and key
            (ps_worker's --tls_ca, --tls_cert, --tls_key).
        slice_size, virtual_nodes: the placement; must match the servers'
            (defaults: the servers' defaults).
        key_list_caching: a key list (pull_keys, push_keys,
            push_pull_keys) sent to a server once is sent again as its
            signature alone while the server holds it (ps_worker's
            --key_caching): a step that pulls and then pushes the same
            rows sends their keys once.

    Raises:
        Error: UNAVAILABLE or DEADLINE_EXCEEDED naming a server that did not
            answer in time; FAILED_PRECONDITION when the servers do not form
            one cluster as given; ALREADY_EXISTS when another live process
            holds this worker id; etcd's errors.
        TypeError, ValueError: bad arguments.

    Use it as a context manager, or call close(): closing leaves the
    cluster (the servers stop waiting for this worker).
    """

    def __init__(self, servers: Union[str, Sequence[str], None] = None, *,
                 etcd: Optional[str] = None, cluster: str = "default", worker_id: int = 0,
                 consistency: str = "async", staleness: int = 0,
                 timeout: Optional[float] = None, connect_timeout: float = 30.0,
                 max_attempts: Optional[int] = None, lease: float = 0.0,
                 token: Optional[str] = None, ca_cert: Optional[str] = None,
                 cert: Optional[str] = None, key: Optional[str] = None,
                 slice_size: Optional[int] = None, virtual_nodes: Optional[int] = None,
                 key_list_caching: bool = False) -> None:
        call = "Client"
        if (servers is None) == (etcd is None):
            raise ValueError(f"{call}: give exactly one of servers (a static cluster) and etcd "
                             "(a replicated cluster, with cluster=NAME)")
        spec = "" if servers is None else _servers(call, servers)
        where = f"servers={spec}" if spec else f"etcd={etcd} cluster={cluster}"
        self._description = f"{where} worker_id={worker_id} consistency={consistency}"
        # What checkpoint() needs to reach the same cluster the same way.
        self._cluster_args = dict(servers=spec or None, etcd=etcd, cluster=cluster, token=token,
                                  ca_cert=ca_cert, cert=cert, key=key)
        self._client = _paramserver.Client(
            servers=spec,
            etcd=_optional_text(call, "etcd", etcd),
            cluster=_text(call, "cluster", cluster),
            worker_id=_count(call, "worker_id", worker_id, bits=32),
            consistency=_text(call, "consistency", consistency),
            staleness=_count(call, "staleness", staleness, bits=32),
            timeout=None if timeout is None else _seconds(call, "timeout", timeout),
            connect_timeout=_seconds(call, "connect_timeout", connect_timeout),
            max_attempts=(None if max_attempts is None
                          else _positive(call, "max_attempts", max_attempts, bits=31)),
            lease=_seconds(call, "lease", lease, zero_allowed=True),
            token=_optional_text(call, "token", token),
            ca_cert=_optional_text(call, "ca_cert", ca_cert),
            cert=_optional_text(call, "cert", cert),
            key=_optional_text(call, "key", key),
            slice_size=None if slice_size is None else _positive(call, "slice_size", slice_size),
            virtual_nodes=(None if virtual_nodes is None
                           else _positive(call, "virtual_nodes", virtual_nodes, bits=31)),
            key_list_caching=bool(key_list_caching))
        self._worker_id = worker_id
        self._consistency = consistency
        self._staleness = staleness

    def __repr__(self) -> str:
        return f"<paramserver.Client {self._description}>"

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        """Leaves the cluster and closes the connections; idempotent.

        Pending work finishes first. Any later call raises ValueError.
        """
        self._client.close()

    @property
    def num_servers(self) -> int:
        """The number of servers (shards) of the cluster."""
        return self._client.num_servers

    @property
    def worker_id(self) -> int:
        """This worker's id, as given to the constructor."""
        return self._worker_id

    @property
    def consistency(self) -> str:
        """"async", "bsp" or "bounded", as given to the constructor."""
        return self._consistency

    @property
    def staleness(self) -> int:
        """With "bounded", the rounds a pull may be behind; 0 otherwise."""
        return self._staleness

    def table_definition(self, table: str) -> Dict[str, Any]:
        """The definition of `table` as the servers hold it, as a dict.

        Keys as in proto::TableDef: "name", "kind" ("TABLE_DENSE" or
        "TABLE_SPARSE"), "width", "num_keys", "initializer", "optimizer",
        "learning_rate", ... Raises Error NOT_FOUND naming the table when no
        server holds it.
        """
        return self._client.table_definition(_text("table_definition", "table", table))

    def create_table(self, name: str, *, size: Optional[int] = None, width: int = 1,
                     sparse: bool = False, buckets: int = 0, initializer: str = "zeros",
                     init_low: float = 0.0, init_high: float = 0.0, init_mean: float = 0.0,
                     init_stddev: float = 0.0, seed: int = 0, optimizer: str = "sgd",
                     learning_rate: float = 0.05, **hyper: Any) -> None:
        """Creates a table on every server; a no-op where an identical one exists.

        Args:
            name: the table's name.
            size: a dense table's number of keys (required), keys [0, size).
                Ignored for a sparse table.
            width: values (float32) per key.
            sparse: any uint64 key, a row made at its first push.
            buckets: a sparse table's slices (0: 1024).
            initializer: "zeros", "uniform" (in [init_low, init_high)) or
                "normal" (init_mean, init_stddev), drawn from `seed`.
            optimizer: the server-side update rule: "sgd", "adagrad",
                "momentum", "nesterov", "rmsprop", "adam" or "ftrl".
            learning_rate: the optimizer's learning rate (FTRL's alpha).
            **hyper: the optimizer's other parameters, as ps_worker's flags
                of the same names (their defaults hold for those not
                given; only the chosen rule's are used): initial_accumulator,
                epsilon, momentum, beta1, beta2, rho, ftrl_beta, l1, l2,
                weight_decay, clip_value, clip_norm, lr_schedule
                ("constant", "step", "inv_sqrt"), lr_step_clocks, lr_gamma,
                lr_decay_offset, warmup_clocks; and a sparse table's
                admission and eviction: admit_after_pushes,
                admit_probability, evict_after_clocks, evict_after_seconds,
                max_rows, eviction ("lru" or "lfu").

        Raises:
            ValueError: a definition the servers would refuse (checked here,
                before anything is sent), an unknown optimizer or schedule.
            TypeError: an unknown keyword argument.
            Error: ALREADY_EXISTS when the servers hold a different table of
                that name; a server's error, naming it.
        """
        call = "create_table"
        self._client.create_table(
            _text(call, "name", name),
            None if size is None else _count(call, "size", size),
            _count(call, "width", width, bits=32), bool(sparse),
            _count(call, "buckets", buckets, bits=32), _text(call, "initializer", initializer),
            _number(call, "init_low", init_low), _number(call, "init_high", init_high),
            _number(call, "init_mean", init_mean), _number(call, "init_stddev", init_stddev),
            _count(call, "seed", seed), _text(call, "optimizer", optimizer),
            _number(call, "learning_rate", learning_rate), hyper)

    def pull(self, table: str, begin: int = 0, end: Optional[int] = None, *, clock: int = 0,
             out: Optional[np.ndarray] = None) -> Values:
        """Reads keys [begin, end) of a table.

        Args:
            end: None: the end of a dense table.
            clock: this worker's clock (rounds pushed so far); with "bsp" or
                "bounded" the pull waits for the other workers' rounds.
            out: the array to read into (float32, C-contiguous, writable,
                exactly (end - begin) * width elements, any shape); None: a
                new one.

        Returns:
            `out`, or a new float32 array of shape (end - begin, width).

        Raises:
            Error: NOT_FOUND for an unknown table; INVALID_ARGUMENT for a
                reversed range or keys outside the table;
                DEADLINE_EXCEEDED when a consistent read waited too long.
        """
        call = "pull"
        return self._client.pull(
            _text(call, "table", table), _count(call, "begin", begin),
            None if end is None else _count(call, "end", end), _count(call, "clock", clock), out)

    def push(self, table: str, grads: np.ndarray, begin: int = 0, *, clock: int = 0) -> None:
        """Sends gradients for keys [begin, begin + grads.size / width).

        The servers apply them with the table's optimizer. `grads` is
        float32 and C-contiguous, any shape, a whole number of rows; it is
        sent from its own memory and must not change until push returns.

        Raises:
            Error: as pull; when a push of several parts fails, the message
                says which parts were applied.
        """
        call = "push"
        self._client.push(_text(call, "table", table), grads, _count(call, "begin", begin),
                          _count(call, "clock", clock))

    def push_pull(self, table: str, grads: np.ndarray, begin: int = 0, *, clock: int = 0,
                  out: Optional[np.ndarray] = None) -> Values:
        """The Downpour step: pushes `grads` (as push) and reads the same keys back.

        With "async" consistency both go in one round trip per server; with
        "bsp" or "bounded" it pushes, then pulls at clock + 1. `out` must not
        share memory with `grads`.

        Returns:
            `out`, or a new float32 array of shape (keys, width), holding
            the values after the push.
        """
        call = "push_pull"
        return self._client.push_pull(_text(call, "table", table), grads,
                                      _count(call, "begin", begin), _count(call, "clock", clock),
                                      out)

    def push_pull_many(self, ops: Sequence[Tuple[str, np.ndarray, np.ndarray]], *,
                       clock: int = 0, begins: Optional[Sequence[int]] = None) -> Dict[str, Any]:
        """push_pull of several dense tables in one call: a model's tensors at once.

        Each op is (table, grads, out): grads are pushed to the table from
        key begins[i] (default 0) and the values after the push are read
        into `out` (required; float32, C-contiguous, writable, the size of
        grads). One round trip per server carries every op, so a model of
        many small tables pays one round trip a step, not one per table.
        Every op is checked before anything is sent; no `out` may share
        memory with another op's grads or out. With "bsp" or "bounded" it
        pushes, then reads at clock + 1 (which may wait).

        Returns:
            What the read learned (see pull_many): {"versions", "params_clock",
            "waited"}; the versions count this push.
        """
        call = "push_pull_many"
        ops = _ops(call, ops, 3, "(table, grads, out)")
        return self._client.push_pull_many(
            [_text(call, f"ops[{i}] table", op[0]) for i, op in enumerate(ops)],
            [op[1] for op in ops], _begins(call, begins, len(ops)), [op[2] for op in ops],
            _count(call, "clock", clock))

    def pull_many(self, ops: Sequence[Tuple[str, np.ndarray]], *, clock: int = 0,
                  begins: Optional[Sequence[int]] = None) -> Dict[str, Any]:
        """pull of several dense tables in one call (one round trip per server).

        Each op is (table, out): out (float32, C-contiguous, writable, whole
        rows of the table's width) gets the values of the keys from
        begins[i] (default 0) on, as many keys as it holds rows. With "bsp"
        or "bounded" the read waits as pull does at `clock`.

        Returns:
            {"versions": uint64 array of shape (ops, servers), the largest
            version of op i's keys on server s (pushes applied before the
            read; 0 where the op has no keys there), "params_clock": every
            live worker's rounds below it had been applied, "waited":
            seconds the longest server held the read}.
        """
        call = "pull_many"
        ops = _ops(call, ops, 2, "(table, out)")
        return self._client.pull_many(
            [_text(call, f"ops[{i}] table", op[0]) for i, op in enumerate(ops)],
            _begins(call, begins, len(ops)), [op[1] for op in ops], _count(call, "clock", clock))

    def push_many(self, ops: Sequence[Tuple[str, np.ndarray]], *, clock: int = 0,
                  begins: Optional[Sequence[int]] = None) -> np.ndarray:
        """push of several dense tables in one call (one round trip per server).

        Each op is (table, grads), grads pushed from key begins[i] (default
        0). Every op is checked before anything is sent.

        Returns:
            The versions the push reached: a uint64 array of shape (ops,
            servers), the largest version of op i's keys on server s with
            this push applied (0 where the op has no keys there).
        """
        call = "push_many"
        ops = _ops(call, ops, 2, "(table, grads)")
        return self._client.push_many(
            [_text(call, f"ops[{i}] table", op[0]) for i, op in enumerate(ops)],
            [op[1] for op in ops], _begins(call, begins, len(ops)), _count(call, "clock", clock))

    def pull_keys(self, table: str, keys: np.ndarray, *,
                  out: Optional[np.ndarray] = None) -> Values:
        """Reads the rows of `keys` (uint64, or int64 >= 0, 1-D), of any table.

        A sparse table's key without a row reads as the initializer's
        values. `out` as for pull, with len(keys) * width elements. Key
        reads and pushes take no part in the consistency clocks
        (docs/design/consistency.md): they never wait, whatever the Client's
        consistency.

        Returns:
            `out`, or a new float32 array of shape (len(keys), width).
        """
        return self._client.pull_keys(_text("pull_keys", "table", table), keys, out)

    def push_keys(self, table: str, keys: np.ndarray, grads: np.ndarray, *,
                  clock: int = 0) -> None:
        """Sends gradients for `keys`: len(keys) * width float32 values, key-major.

        `clock` is recorded as for push; the push is never held for other
        workers (see pull_keys).
        """
        call = "push_keys"
        self._client.push_keys(_text(call, "table", table), keys, grads,
                               _count(call, "clock", clock))

    def push_pull_keys(self, table: str, keys: np.ndarray, grads: np.ndarray, *,
                       clock: int = 0, out: Optional[np.ndarray] = None) -> Values:
        """push_keys, then the same rows read back (one round trip with "async").

        `out` must not share memory with `grads`.

        Returns:
            `out`, or a new float32 array of shape (len(keys), width).
        """
        call = "push_pull_keys"
        return self._client.push_pull_keys(_text(call, "table", table), keys, grads,
                                           _count(call, "clock", clock), out)

    def wait_for_workers(self, n: int, timeout: float = 60.0) -> None:
        """Waits until every server counts at least `n` live workers.

        Needs a lease (Client(lease=...)). Raises Error: FAILED_PRECONDITION
        without a lease; DEADLINE_EXCEEDED naming the count reached after
        `timeout` seconds.
        """
        call = "wait_for_workers"
        self._client.wait_for_workers(_count(call, "n", n, bits=31),
                                      _seconds(call, "timeout", timeout))

    def leave(self) -> None:
        """Stops the heartbeats and tells the servers this worker is done.

        The others no longer wait for it. Idempotent; close() leaves too.
        """
        self._client.leave()

    def report_progress(self, job: str, seconds: float, epoch: int, step: int, examples: int,
                        loss: float, examples_per_second: float, staleness: float) -> None:
        """Sends a progress point of this worker to every server (their web UI
        and Stats' "workers"), as ps_worker does: `job` names the run; the
        rest are the point's figures. Raises paramserver.Error when a server
        refuses it (a negative or non-finite figure)."""
        self._client.report_progress(job, seconds, epoch, step, examples, loss,
                                     examples_per_second, staleness)

    def stats(self) -> List[Dict[str, Any]]:
        """Every server's statistics (the Stats RPC), one dict per server.

        Each has "server" (its index), "tables" ({name: {"pulls", "rows",
        "server_clock", "staleness_histogram", "wait_us_total", ...}}),
        "memory_bytes", "memory_budget_bytes", the key-list cache's counts
        and, in a replicated cluster, "replication".
        """
        servers = self._client.stats()
        for server in servers:
            server["tables"] = {t["table"]: t for t in server["tables"]}
        return servers

    def checkpoint(self, *, full: bool = False, timeout: float = 60.0) -> Dict[str, Any]:
        """paramserver.checkpoint() of this client's cluster, reached as this client reaches it.

        The same servers (or etcd and cluster), token and TLS files. The
        cut waits for the workers with a lease to finish their rounds below
        it, this one included: call it from another thread than the one
        that trains (the GIL is released while it waits).
        """
        return checkpoint(full=full, timeout=timeout, **self._cluster_args)

    def position(self) -> Dict[str, Any]:
        """Where this worker stands after the servers restored a checkpoint.

        Returns {"restored_from": path ("" when nothing was restored),
        "restored_cut": int, "clocks": {table: rounds this worker completed}}.
        """
        return self._client.position()


def checkpoint(servers: Union[str, Sequence[str], None] = None, *, etcd: Optional[str] = None,
               cluster: str = "default", full: bool = False, timeout: float = 60.0,
               token: Optional[str] = None, ca_cert: Optional[str] = None,
               cert: Optional[str] = None, key: Optional[str] = None) -> Dict[str, Any]:
    """Takes a checkpoint of the cluster now, as ``ps_admin checkpoint`` does.

    Asks the server that coordinates the cluster's checkpoints (started with
    --checkpoint_dir): server 0 of a static cluster, the primary of shard 0
    of a replicated one, and waits until it is written.

    Args:
        servers: a static cluster's servers, in shard order (server 0 first).
        etcd: instead of servers, a replicated cluster's etcd ("host:port").
        cluster: with etcd, the cluster's name (ps_server --cluster).
        full: a full checkpoint even when an incremental one could be taken.
        timeout: seconds the servers may wait for the workers to finish the
            rounds before the cut (at least their --checkpoint_timeout_seconds);
            the call waits 30 s more for the writing.
        token, ca_cert, cert, key: as for Client.

    Returns:
        {"path", "sequence", "base_sequence" (0: a full checkpoint), "cut",
        "bytes", "seconds"}.

    Raises:
        Error: FAILED_PRECONDITION when the server asked does not
            coordinate checkpoints; DEADLINE_EXCEEDED naming a server that
            did not finish in time; UNAVAILABLE when it cannot be reached
            (or shard 0 has no primary).
    """
    call = "checkpoint"
    if (servers is None) == (etcd is None):
        raise ValueError(f"{call}: give exactly one of servers (a static cluster) and etcd "
                         "(a replicated cluster, with cluster=NAME)")
    return _paramserver.checkpoint(
        servers="" if servers is None else _servers(call, servers),
        etcd=_optional_text(call, "etcd", etcd), cluster=_text(call, "cluster", cluster),
        full=bool(full),
        timeout=_seconds(call, "timeout", timeout), token=_optional_text(call, "token", token),
        ca_cert=_optional_text(call, "ca_cert", ca_cert),
        cert=_optional_text(call, "cert", cert), key=_optional_text(call, "key", key))


def tune_process_for_data_path() -> None:
    """Tunes this process as ps_worker tunes itself: call once, at the start.

    malloc keeps large freed blocks instead of returning them to the kernel
    (multi-megabyte pulls do not page-fault each time), and Abseil's mutex
    deadlock detection is turned off. It affects the whole process.
    """
    _paramserver.tune_process_for_data_path()
