"""ps_worker's command-line flags for Python workers (argparse).

A Python worker that takes these flags joins a cluster, authenticates and
names its optimizer as ps_worker does, so launchers (deploy/local_cluster.sh,
Slurm and Kubernetes scripts) start either kind with the same flags::

    import argparse
    import paramserver.flags as psflags

    parser = argparse.ArgumentParser()
    psflags.add_cluster_flags(parser)          # --servers | --etcd, --worker_index, TLS, token...
    psflags.add_optimizer_flags(parser, learning_rate=0.1)
    args = psflags.parse(parser)               # exits 2 naming a bad flag
    with psflags.connect(args) as client:      # a paramserver.Client
        client.create_table("w", size=10, **psflags.optimizer(args))

The names are ps_worker's (docs/guide/training.md): --servers, --etcd,
--cluster, --worker_index, --num_workers, --timeout_seconds, --consistency,
--staleness, --lease_seconds, --wait_for_workers_seconds, --key_caching,
--tls_ca, --tls_cert, --tls_key, --token_file (see docs/ops/security.md),
and the optimizer's.
"""

import argparse
from typing import Any, Dict, Optional

from . import Client, Error

OPTIMIZERS = ("sgd", "adagrad", "momentum", "nesterov", "rmsprop", "adam", "ftrl")
CONSISTENCIES = ("async", "bounded", "bsp")


def add_cluster_flags(parser: argparse.ArgumentParser, consistency: str = "async") -> None:
    """Where the cluster is, who this worker is, how it connects and authenticates."""
    g = parser.add_argument_group("cluster (as ps_worker)")
    g.add_argument("--servers", default="",
                   help="comma-separated host:port of every server, in shard order")
    g.add_argument("--etcd", default="",
                   help="instead of --servers: a replicated cluster's etcd endpoint")
    g.add_argument("--cluster", default="default", help="with --etcd: the cluster's name")
    g.add_argument("--worker_index", type=int, default=0,
                   help="this worker's index in [0, num_workers)")
    g.add_argument("--num_workers", type=int, default=1, help="number of workers sharing the data")
    g.add_argument("--timeout_seconds", type=float, default=None,
                   help="deadline of each call attempt (default: 10, or 2.5 with --etcd, "
                        "whose calls are retried across a failover)")
    g.add_argument("--consistency", default=consistency, choices=CONSISTENCIES,
                   help="async: pulls never wait; bounded: a pull waits until every worker is "
                        "at most --staleness rounds behind; bsp: bounded with staleness 0")
    g.add_argument("--staleness", type=int, default=2, help="with --consistency=bounded")
    g.add_argument("--lease_seconds", type=float, default=3.0,
                   help="worker lease: dropped from the servers' clock minimum after this long "
                        "without a heartbeat")
    g.add_argument("--wait_for_workers_seconds", type=float, default=60.0,
                   help="with bounded or bsp: wait this long for all --num_workers to join")
    g.add_argument("--key_caching", action="store_true",
                   help="send a key list a server already holds as its signature alone")
    s = parser.add_argument_group("security (as ps_worker; see docs/ops/security.md)")
    s.add_argument("--tls_ca", default="", help="PEM file of the CA that signed the servers")
    s.add_argument("--tls_cert", default="", help="PEM certificate of this worker")
    s.add_argument("--tls_key", default="", help="PEM private key of --tls_cert")
    s.add_argument("--token_file", default="",
                   help="file holding this worker's token (never on the command line)")


def add_optimizer_flags(parser: argparse.ArgumentParser, learning_rate: float = 0.05) -> None:
    """The server-side optimizer of the tables, named as ps_worker's flags."""
    g = parser.add_argument_group("optimizer, applied on the servers (as ps_worker)")
    g.add_argument("--optimizer", default="adagrad", choices=OPTIMIZERS,
                   help="server-side optimizer of every table")
    g.add_argument("--learning_rate", type=float, default=learning_rate,
                   help="optimizer learning rate")
    g.add_argument("--initial_accumulator", type=float, default=0.1,
                   help="AdaGrad initial accumulator")
    g.add_argument("--epsilon", type=float, default=1e-8,
                   help="AdaGrad, RMSProp and Adam epsilon")
    g.add_argument("--momentum", type=float, default=0.9, help="momentum and nesterov")
    g.add_argument("--beta1", type=float, default=0.9, help="Adam")
    g.add_argument("--beta2", type=float, default=0.999, help="Adam")
    g.add_argument("--l1", type=float, default=0.0, help="FTRL")
    g.add_argument("--l2", type=float, default=0.0, help="FTRL")


def optimizer(args: argparse.Namespace) -> Dict[str, Any]:
    """Client.create_table's optimizer keywords from add_optimizer_flags' flags."""
    return dict(optimizer=args.optimizer, learning_rate=args.learning_rate,
                initial_accumulator=args.initial_accumulator, epsilon=args.epsilon,
                momentum=args.momentum, beta1=args.beta1, beta2=args.beta2, l1=args.l1,
                l2=args.l2)


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Exits through parser.error (status 2) on cluster flags that cannot work."""
    if bool(args.servers) == bool(args.etcd):
        parser.error("give exactly one of --servers (host:port,...) and --etcd (host:port)")
    if args.num_workers < 1:
        parser.error(f"--num_workers={args.num_workers}: must be >= 1")
    if not 0 <= args.worker_index < args.num_workers:
        parser.error(f"--worker_index={args.worker_index}: must be in [0, {args.num_workers})")
    if args.timeout_seconds is not None and args.timeout_seconds <= 0:
        parser.error(f"--timeout_seconds={args.timeout_seconds}: must be > 0")
    if args.lease_seconds < 0:
        parser.error(f"--lease_seconds={args.lease_seconds}: must be >= 0")
    if args.staleness < 0:
        parser.error(f"--staleness={args.staleness}: must be >= 0")
    if args.tls_key and not args.tls_cert or args.tls_cert and not args.tls_key:
        parser.error("--tls_cert and --tls_key go together")


def parse(parser: argparse.ArgumentParser, argv: Optional[list] = None) -> argparse.Namespace:
    """parser.parse_args, then check(): a bad flag exits 2 with a message naming it."""
    args = parser.parse_args(argv)
    check(parser, args)
    return args


def who(args: argparse.Namespace) -> str:
    """'worker i/n', as ps_worker's lines name a worker."""
    return f"worker {args.worker_index}/{args.num_workers}"


def read_token(path: str) -> Optional[str]:
    """The token in file `path` (surrounding whitespace dropped); None for ""."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as err:
        raise ValueError(f"--token_file={path}: cannot read it: {err.strerror}") from None
    if not token:
        raise ValueError(f"--token_file={path}: the file is empty; it should hold this worker's "
                         "token (see docs/ops/security.md)")
    return token


def connect(args: argparse.Namespace, *, training: bool = True, **overrides: Any) -> Client:
    """A paramserver.Client for this worker, from add_cluster_flags' flags.

    training=False (an evaluator): async, no lease, so it takes no part in
    the servers' clocks. `overrides` go to Client() over what the flags say.

    Raises:
        ValueError: an unreadable --token_file or TLS file.
        paramserver.Error: from Client().
    """
    where: Dict[str, Any] = {}
    if args.servers:
        where["servers"] = args.servers
    else:
        where["etcd"] = args.etcd
        where["cluster"] = args.cluster
    consistency = args.consistency if training else "async"
    kwargs: Dict[str, Any] = dict(
        worker_id=args.worker_index, consistency=consistency,
        staleness=args.staleness if consistency == "bounded" else 0,
        timeout=args.timeout_seconds, lease=args.lease_seconds if training else 0.0,
        key_list_caching=args.key_caching, token=read_token(args.token_file),
        ca_cert=args.tls_ca or None, cert=args.tls_cert or None, key=args.tls_key or None)
    kwargs.update(where)
    kwargs.update(overrides)
    return Client(**kwargs)


def describe(err: Error) -> str:
    """One line for a paramserver.Error: its status code and the server's message."""
    return f"{err.code}: {err.message}"
