"""Workers pushing known increments through a replicated cluster, from Python.

Each of --workers threads (one paramserver.Client and worker id each) adds
+1 to every key of a dense table (push and push_pull, alternately) and to
every row of a sparse table (push_keys, keys up to 2**64 - 1), SGD at rate
1 with gradients of -1, until --stop_file appears, and then --after_stop
rounds more; the test kills and restarts a server meanwhile. Every push is
counted once acknowledged; one that raises leaves its outcome unknown and
fails the run. Then the sums are read back: each dense key must equal the
dense pushes acknowledged, each sparse row the sparse ones; exits 1 naming
the first wrong key.

  exactly_once_worker.py --etcd=127.0.0.1:2379 --cluster=c --started_file=F --stop_file=S
"""

import argparse
import os
import sys
import threading
import time

import numpy as np

import paramserver as ps

SPARSE_KEYS = np.array([0, 1, 4097, 2**32 + 3, 2**63 - 1, 2**63, 2**63 + 12345, 2**64 - 1],
                       dtype=np.uint64)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--etcd", required=True)
    p.add_argument("--cluster", required=True)
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--keys", type=int, default=20000, help="keys of the dense table")
    p.add_argument("--started_file", required=True,
                   help="written once every worker has had a push acknowledged")
    p.add_argument("--stop_file", required=True, help="the test writes it: finish up")
    p.add_argument("--after_stop", type=int, default=20,
                   help="rounds each worker still pushes once the stop file is there")
    p.add_argument("--max_seconds", type=float, default=90,
                   help="fail when the stop file has not come by then")
    return p.parse_args()


class Worker(threading.Thread):
    def __init__(self, args, worker_id, started):
        super().__init__(name=f"worker {worker_id}")
        self.args = args
        self.worker_id = worker_id
        self.started = started
        self.dense_pushes = 0
        self.sparse_pushes = 0
        self.error = None

    def run(self):
        try:
            self.push_until_stopped()
        except ps.Error as err:
            self.error = f"worker {self.worker_id}: {err} (after {self.dense_pushes} dense and " \
                         f"{self.sparse_pushes} sparse pushes acknowledged)"
        except Exception as err:  # into the verdict, not lost in a thread's traceback
            self.error = f"worker {self.worker_id}: {type(err).__name__}: {err}"

    def push_until_stopped(self):
        args = self.args
        minus_one = np.full(args.keys, -1.0, dtype=np.float32)
        pulled = np.empty(args.keys, dtype=np.float32)
        row_grads = np.full((len(SPARSE_KEYS), 2), -1.0, dtype=np.float32)
        deadline = time.monotonic() + args.max_seconds
        rounds_left = None
        clock = 0
        with ps.Client(etcd=args.etcd, cluster=args.cluster, worker_id=self.worker_id) as client:
            while rounds_left is None or rounds_left > 0:
                if clock % 2 == 0:
                    client.push("sum", minus_one, clock=clock)
                else:
                    client.push_pull("sum", minus_one, clock=clock, out=pulled)
                self.dense_pushes += 1
                client.push_keys("rows", SPARSE_KEYS, row_grads, clock=clock)
                self.sparse_pushes += 1
                if clock == 0:
                    self.started.one_more()
                clock += 1
                if rounds_left is not None:
                    rounds_left -= 1
                elif os.path.exists(args.stop_file):
                    rounds_left = args.after_stop
                elif time.monotonic() > deadline:
                    raise RuntimeError(f"no stop file after {args.max_seconds} s")


class Started:
    """Writes the started file once every worker has had a push acknowledged."""

    def __init__(self, path, workers):
        self.path = path
        self.remaining = workers
        self.lock = threading.Lock()

    def one_more(self):
        with self.lock:
            self.remaining -= 1
            if self.remaining == 0:
                with open(self.path, "w"):
                    pass


def main():
    args = parse_args()
    admin_id = args.workers  # the workers are 0 .. workers - 1
    with ps.Client(etcd=args.etcd, cluster=args.cluster, worker_id=admin_id) as admin:
        admin.create_table("sum", size=args.keys, optimizer="sgd", learning_rate=1.0)
        admin.create_table("rows", width=2, sparse=True, optimizer="sgd", learning_rate=1.0)
    started = Started(args.started_file, args.workers)
    workers = [Worker(args, w, started) for w in range(args.workers)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    errors = [w.error for w in workers if w.error is not None]
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    dense = sum(w.dense_pushes for w in workers)
    sparse = sum(w.sparse_pushes for w in workers)
    with ps.Client(etcd=args.etcd, cluster=args.cluster, worker_id=admin_id) as reader:
        sums = reader.pull("sum")[:, 0]
        rows = reader.pull_keys("rows", SPARSE_KEYS)
    wrong_dense = np.flatnonzero(sums != dense)
    wrong_rows = np.flatnonzero((rows != sparse).any(axis=1))
    print(f"RESULT dense_pushes={dense} sparse_pushes={sparse} wrong_keys={len(wrong_dense)} "
          f"wrong_rows={len(wrong_rows)}")
    if len(wrong_dense):
        key = wrong_dense[0]
        print(f"dense key {key} is {sums[key]}, expected {dense}", file=sys.stderr)
    if len(wrong_rows):
        row = wrong_rows[0]
        print(f"sparse key {SPARSE_KEYS[row]} is {rows[row]}, expected {sparse}", file=sys.stderr)
    return 1 if len(wrong_dense) or len(wrong_rows) else 0


if __name__ == "__main__":
    sys.exit(main())
