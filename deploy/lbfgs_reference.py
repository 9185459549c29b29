#!/usr/bin/python3
"""Single-process L-BFGS reference for sparse logistic regression.

The reference that a distributed L-BFGS run (Sandblaster, issue 29) is
compared with: SciPy's L-BFGS-B on the whole of a LibSVM file, minimizing

    f(w) = (1/n) sum_i log(1 + exp(-s_i x_i.w)) + (l2 / 2) |w|^2

with s_i = +1 for a label > 0 and -1 otherwise, w one weight per feature
index present (duplicate indices of a line add up), starting at w = 0.

    /usr/bin/python3 deploy/lbfgs_reference.py --data FILE [--l2 1e-4]
        [--memory 10] [--max_iterations 500] [--gtol 1e-8] [--curve CSV]
        [--check_gradient] [--bias]

--bias adds a constant feature 1 to every example (the bias of ps_lbfgs
--bias, regularized as the other weights).

Prints `RESULT initial_loss=...` (at w = 0: log 2), a progress line per
iteration (loss, seconds) and
`RESULT reference_loss=... data_loss=... iterations=... grad_norm=...
seconds=...` (data_loss: f without its l2 term);
--curve writes the iterations as CSV (iteration, seconds, loss, data_loss);
--check_gradient compares the gradient with finite differences at a random
point first and prints `RESULT gradient_error=...`. A malformed line is
reported with the file and line number. Uses Debian's python3-numpy and
python3-scipy (deploy/setup.sh).
"""

import argparse
import sys
import time

import numpy as np
from scipy import optimize, sparse, special


def fail(message):
    print(f"lbfgs_reference.py: {message}", file=sys.stderr)
    sys.exit(1)


def read_libsvm(path):
    """The file's examples as a CSR matrix and their signs (+1 / -1)."""
    rows, cols, vals, signs = [], [], [], []
    column_of = {}
    try:
        with open(path, encoding="ascii") as f:
            for number, line in enumerate(f, 1):
                tokens = line.split("#", 1)[0].split()
                if not tokens:
                    continue
                try:
                    label = float(tokens[0])
                except ValueError:
                    fail(f"{path}:{number}: label '{tokens[0]}' is not a number")
                if label not in (0.0, 1.0, -1.0):
                    fail(f"{path}:{number}: label {tokens[0]} is not 0, 1, -1 or +1")
                row = len(signs)
                signs.append(1.0 if label > 0 else -1.0)
                for token in tokens[1:]:
                    if token.startswith("qid:"):
                        continue
                    parts = token.split(":")
                    if len(parts) != 2:
                        fail(f"{path}:{number}: feature '{token}' is not index:value")
                    try:
                        index, value = int(parts[0]), float(parts[1])
                    except ValueError:
                        fail(f"{path}:{number}: feature '{token}' is not index:value")
                    if index < 0 or not np.isfinite(value):
                        fail(f"{path}:{number}: feature '{token}' has a negative index or a non-finite value")
                    rows.append(row)
                    cols.append(column_of.setdefault(index, len(column_of)))
                    vals.append(value)
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    if not signs:
        fail(f"{path}: no examples")
    x = sparse.csr_matrix((vals, (rows, cols)), shape=(len(signs), max(1, len(column_of))))
    x.sum_duplicates()
    return x, np.asarray(signs)


def objective(w, x, s, l2):
    """f(w) and its gradient."""
    margin = -s * (x @ w)
    loss = np.mean(np.logaddexp(0.0, margin)) + 0.5 * l2 * (w @ w)
    grad = x.T @ (-s * special.expit(margin)) / x.shape[0] + l2 * w
    return loss, grad


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="LibSVM file")
    parser.add_argument("--l2", type=float, default=1e-4, help="L2 strength (>= 0)")
    parser.add_argument("--memory", type=int, default=10, help="pairs (s, y) kept (m)")
    parser.add_argument("--max_iterations", type=int, default=500)
    parser.add_argument("--gtol", type=float, default=1e-8, help="stop at this gradient norm (max)")
    parser.add_argument("--curve", help="write iteration,seconds,loss,data_loss here")
    parser.add_argument("--check_gradient", action="store_true")
    parser.add_argument("--bias", action="store_true",
                        help="give every example a constant feature 1 (a bias, regularized as "
                             "the other weights: ps_lbfgs --bias)")
    args = parser.parse_args()
    if args.l2 < 0 or args.memory < 1 or args.max_iterations < 1:
        fail(f"--l2 must be >= 0 and --memory, --max_iterations >= 1; got {args.l2}, "
             f"{args.memory}, {args.max_iterations}")

    x, s = read_libsvm(args.data)
    if args.bias:
        x = sparse.hstack([x, np.ones((x.shape[0], 1))], format="csr")
    print(f"lbfgs_reference.py: {x.shape[0]} examples, {x.shape[1]} features, "
          f"{x.nnz} nonzeros, l2 {args.l2}", flush=True)
    if args.check_gradient:
        point = np.random.default_rng(1).normal(scale=0.1, size=x.shape[1])
        error = optimize.check_grad(lambda w: objective(w, x, s, args.l2)[0],
                                    lambda w: objective(w, x, s, args.l2)[1], point)
        print(f"RESULT gradient_error={error:.3e}", flush=True)

    print(f"RESULT initial_loss={objective(np.zeros(x.shape[1]), x, s, args.l2)[0]:.12g}",
          flush=True)
    start = time.monotonic()
    curve = []

    def record(w):
        # One product x.w per iteration (the optimizer's own evaluations are
        # not visible here): the curve's times include it.
        seconds = time.monotonic() - start
        data_loss = np.mean(np.logaddexp(0.0, -s * (x @ w)))
        loss = data_loss + 0.5 * args.l2 * (w @ w)
        curve.append((len(curve) + 1, seconds, loss, data_loss))
        print(f"iteration {len(curve)} loss {loss:.10f} seconds {seconds:.3f}", flush=True)

    result = optimize.minimize(objective, np.zeros(x.shape[1]), args=(x, s, args.l2), jac=True,
                               method="L-BFGS-B", callback=record,
                               options={"maxcor": args.memory, "maxiter": args.max_iterations,
                                        "gtol": args.gtol, "ftol": 0.0})
    seconds = time.monotonic() - start
    loss, grad = objective(result.x, x, s, args.l2)
    if args.curve:
        with open(args.curve, "w", encoding="ascii") as f:
            f.write("iteration,seconds,loss,data_loss\n")
            for row in curve:
                f.write(f"{row[0]},{row[1]:.6f},{row[2]:.12g},{row[3]:.12g}\n")
    data_loss = np.mean(np.logaddexp(0.0, -s * (x @ result.x)))
    print(f"RESULT reference_loss={loss:.12g} data_loss={data_loss:.12g} iterations={result.nit} "
          f"grad_norm={np.linalg.norm(grad):.3e} seconds={seconds:.3f} "
          f"examples={x.shape[0]} features={x.shape[1]} converged={int(result.success)}")


if __name__ == "__main__":
    main()
