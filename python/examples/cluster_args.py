"""The flags that say which cluster an example worker joins, who it is and
which optimizer its tables get on the servers.

Shared by torch_mnist.py and torch_embedding.py so that both take the same
--servers / --etcd / --worker_index / --num_workers and optimizer flags as
ps_worker, and connect the same way.
"""

import sys

try:
    import paramserver as ps
except ImportError as err:
    sys.exit(
        f"cannot import the paramserver module ({err}). Build it and put it on the path:\n"
        "  bazel build //python:paramserver\n"
        "  PYTHONPATH=python:bazel-bin/python /usr/bin/python3 ...   (from the repository root)\n"
        "or install the wheel (see docs/guide/python.md)."
    )


def add_cluster_flags(parser):
    parser.add_argument("--servers", default="",
                        help="comma-separated host:port of every server, in shard order")
    parser.add_argument("--etcd", default="",
                        help="instead of --servers: a replicated cluster's etcd endpoint")
    parser.add_argument("--cluster", default="default", help="with --etcd: the cluster's name")
    parser.add_argument("--worker_index", type=int, default=0,
                        help="this worker's index in [0, num_workers)")
    parser.add_argument("--num_workers", type=int, default=1,
                        help="number of workers sharing the data")
    parser.add_argument("--timeout_seconds", type=float, default=None,
                        help="deadline of each call attempt (default: 10, or 2.5 with --etcd, "
                             "whose calls are retried across a failover)")


OPTIMIZERS = ("sgd", "adagrad", "momentum", "nesterov", "rmsprop", "adam", "ftrl")


def add_optimizer_flags(parser, learning_rate):
    parser.add_argument("--optimizer", default="adagrad", choices=OPTIMIZERS,
                        help="server-side optimizer of every table")
    parser.add_argument("--learning_rate", type=float, default=learning_rate,
                        help="optimizer learning rate")
    parser.add_argument("--initial_accumulator", type=float, default=0.1,
                        help="AdaGrad initial accumulator")
    parser.add_argument("--epsilon", type=float, default=1e-8,
                        help="AdaGrad, RMSProp and Adam epsilon")
    parser.add_argument("--momentum", type=float, default=0.9, help="momentum and nesterov")


def optimizer_fields(args):
    """create_table's optimizer arguments from add_optimizer_flags' flags."""
    return dict(optimizer=args.optimizer, learning_rate=args.learning_rate,
                initial_accumulator=args.initial_accumulator, epsilon=args.epsilon,
                momentum=args.momentum)


def check_cluster_flags(parser, args):
    """Exits through parser.error on flags that cannot work together."""
    if bool(args.servers) == bool(args.etcd):
        parser.error("give exactly one of --servers (host:port,...) and --etcd (host:port)")
    if args.num_workers < 1:
        parser.error(f"--num_workers={args.num_workers}: must be >= 1")
    if not 0 <= args.worker_index < args.num_workers:
        parser.error(f"--worker_index={args.worker_index}: must be in [0, {args.num_workers})")
    if args.timeout_seconds is not None and args.timeout_seconds <= 0:
        parser.error(f"--timeout_seconds={args.timeout_seconds}: must be > 0")


def connect(args, consistency="async", staleness=0, lease=0.0):
    """A paramserver.Client for this worker (raises paramserver.Error)."""
    where = {}
    if args.servers:
        where["servers"] = args.servers
    else:
        where["etcd"] = args.etcd
        where["cluster"] = args.cluster
    # The client's defaults for attempts and deadlines are ps_worker's, with
    # etcd too (retries that span a failover).
    return ps.Client(worker_id=args.worker_index, consistency=consistency, staleness=staleness,
                     timeout=args.timeout_seconds, lease=lease, **where)


def describe_error(err):
    """One line for a paramserver.Error: its status code and the server's message."""
    return f"{err.code}: {err.message}"
