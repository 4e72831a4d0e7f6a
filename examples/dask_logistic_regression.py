"""Logistic regression on data no process holds: a gradient program recorded once, run on Dask.

A dataset of 10^7 rows x 32 features (2.6 GB) is generated lazily by ``dask.array`` from a
seed, chunk by chunk, on the workers of a ``distributed.LocalCluster``, and kept there: each
worker holds its chunks, no process holds the dataset, and this one fetches only the 10^5 rows
it checks against numpy. The loss and its gradient are recorded ONCE, on one chunk-sized
example, as a simplegrad program; every step of gradient descent runs that program on every
chunk where the chunk is held (``sg.map_chunks``) and averages the chunks' gradients by a tree
reduction. Only the 33 numbers of the gradient come back to this process.

Checks: on the first 10^5 rows (small enough for numpy) the map_chunks gradient equals the
closed form X^T (sigmoid(X w + b) - y) / n written in numpy, to 1e-10; after training, the
accuracy on that subset is within a point of scikit-learn's (nearly unregularized)
LogisticRegression fitted on it, and the weights point the same way as its coefficients.

Run: python examples/dask_logistic_regression.py [--rows N] [--chunk N] [--steps N]
     [--workers N] [--quick]       (needs: pip install 'simplegrad[dask,examples]')
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from rich.console import Console

import simplegrad as sg

FEATURES = 32


def data(da, rows: int, chunk: int, seed: int = 0):
    """Lazy X (rows x 32, standard normal) and labels y drawn from a true logistic model."""
    rng = da.random.default_rng(seed)
    w_true = np.random.default_rng(seed + 1).normal(0, 3 / np.sqrt(FEATURES), FEATURES)
    X = rng.standard_normal((rows, FEATURES), chunks=(chunk, FEATURES))
    u = rng.random(rows, chunks=chunk)
    y = (u < 1 / (1 + np.exp(-(X @ w_true + 0.5)))).astype(np.float64)
    return X, y


def gradient_program(X0: np.ndarray, y0: np.ndarray) -> sg.Program:
    """The mean logistic loss and its gradient in (w, b), recorded on one chunk."""
    op = sg.Ops()
    x, t = op.var(X0, name="X"), op.var(y0, name="y")
    w, b = op.var(np.zeros(FEATURES), name="w"), op.var(0.0, name="b")
    z = x @ w + b
    # -log sigmoid(z) for y = 1 and -log(1 - sigmoid(z)) for y = 0: log(1 + e^z) - y z
    loss = op.mean(op.logaddexp(0.0, z) - t * z, name="loss")
    gw, gb = op.grad(loss, [w, b])
    return op.program([x, t, w, b], [loss, gw, gb])


def closed_form(X: np.ndarray, y: np.ndarray, w: np.ndarray, b: float) -> np.ndarray:
    """The gradient in (w, b) by hand: X^T (sigmoid(X w + b) - y) / n."""
    r = 1 / (1 + np.exp(-(X @ w + b))) - y
    return np.append(X.T @ r, r.sum()) / len(y)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10**7)
    parser.add_argument("--chunk", type=int, default=50_000)
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true",
                        help="40,000 rows on a threaded cluster (what CI runs)")
    args = parser.parse_args(argv)
    console = Console(highlight=False, markup=False)
    try:
        import dask.array as da
        import distributed
    except ImportError:
        print("this example needs dask: pip install 'simplegrad[dask]'", file=sys.stderr)
        return 1
    if args.quick:
        args.rows, args.chunk, args.steps = 40_000, 10_000, 12
    if args.rows % args.chunk:
        print(f"--rows ({args.rows}) must be a multiple of --chunk ({args.chunk}): the "
              "program is recorded on one chunk", file=sys.stderr)
        return 1
    X, y = data(da, args.rows, args.chunk)
    prog = gradient_program(*(np.asarray(a) for a in (X[:args.chunk], y[:args.chunk])))
    console.print(f"data: {args.rows:,} x {FEATURES} (lazy, {X.nbytes / 1e9:.2f} GB, "
                  f"{X.numblocks[0]} chunks); gradient program: {len(prog)} entries, recorded "
                  f"on {args.chunk:,} rows")
    with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1,
                                  processes=not args.quick, dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        X, y = client.persist([X, y])       # made once, on the workers: each holds its chunks
        sub = min(args.rows, 10**5 // args.chunk * args.chunk or args.chunk)
        Xs, ys = client.compute([X[:sub], y[:sub]], sync=True)
        w, b = np.zeros(FEATURES), 0.0
        _, gw, gb = client.compute(sg.map_chunks(prog, X[:sub], y[:sub], w, b,
                                                 reduce="mean"), sync=True)
        error = np.max(np.abs(np.append(gw, gb) - closed_form(Xs, ys, w, b)))
        console.print(f"gradient on the first {sub:,} rows against numpy's closed form: "
                      f"largest difference {error:.1e}")
        assert error < 1e-10, error
        lr = 4.0
        for step in range(1, args.steps + 1):
            start = time.perf_counter()
            loss, gw, gb = client.compute(sg.map_chunks(prog, X, y, w, b, reduce="mean"),
                                          sync=True)
            w, b = w - lr * gw, b - lr * gb
            console.print(f"step {step:3d}  loss {float(loss):.6f}  |grad| "
                          f"{np.linalg.norm(np.append(gw, gb)):.2e}  "
                          f"({args.rows / (time.perf_counter() - start):,.0f} rows/s)")
        accuracy = client.compute(((X @ w + b > 0) == (y > 0.5)).mean(), sync=True)
    console.print(f"final accuracy on all {args.rows:,} rows: {accuracy:.4f}")
    return compare(console, Xs, ys, w, b)


def compare(console: Console, X: np.ndarray, y: np.ndarray, w: np.ndarray, b: float) -> int:
    """Accuracy and direction against scikit-learn's fit on the subset (when installed)."""
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        console.print("scikit-learn is not installed: skipped its comparison")
        console.print("all checks passed")
        return 0
    fit = LogisticRegression(C=1e6, max_iter=1000).fit(X, y)
    ours = np.mean((X @ w + b > 0) == (y > 0.5))
    theirs = fit.score(X, y)
    coef = np.append(fit.coef_[0], fit.intercept_)
    cosine = np.dot(np.append(w, b), coef) / np.linalg.norm(np.append(w, b)) / np.linalg.norm(coef)
    console.print(f"on the subset: accuracy {ours:.4f}, scikit-learn's {theirs:.4f}; cosine of "
                  f"the weights with its coefficients {cosine:.5f}")
    assert abs(ours - theirs) < 0.01 and cosine > 0.99, (ours, theirs, cosine)
    console.print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
