"""Batched tangents and vmap: a 100x100 Hessian and per-sample gradients, against torch.func.

Workloads (float64, one process, measured round-robin; medians and same-run ratios):
1. the Hessian of sum(tanh(W x)), W 100x100: simplegrad's column-by-column ``sg.hessian``,
   ``batching.hessian_batched`` (every basis tangent in one batched forward sweep), the
   closed form in numpy, and ``torch.func.hessian`` when torch is installed;
2. per-sample gradients of an MLP loss (batch 64, 100-64-10, tanh, squared error) in the
   first layer's weights and biases: ``sg.vmap(sg.grad(loss))``, hand-written numpy, and
   ``torch.func.vmap(torch.func.grad(loss))``.
All results are checked to agree before timing. Run: python benchmarks/batching.py [--repeat 15]
"""

from __future__ import annotations

import argparse

import numpy as np
from timing import interleaved_medians

import simplegrad as sg
from simplegrad.batching import hessian_batched

try:
    import torch
    import torch.func as tf
except ImportError:        # torch is never a dependency
    torch = None


def hessian_runs(n: int, rng: np.random.Generator) -> tuple[dict, str]:
    """The Hessian workload: runs keyed by label, and the label ratios are taken against."""
    W = rng.normal(size=(n, n)) / np.sqrt(n)
    x0 = rng.normal(size=n)

    def f(x):
        return (W @ x).tanh().sum()

    def batched():
        with sg.Ops() as op:
            x = op.var(x0)
            return np.array(hessian_batched(op, f(x), x).value)

    def closed():
        t = np.tanh(W @ x0)
        return (W.T * (-2 * t * (1 - t * t))) @ W

    runs = {"numpy closed form": closed, "sg.hessian (a jvp per column)": lambda: sg.hessian(f)(x0),
            "hessian_batched (one sweep)": batched}
    if torch is not None:
        Wt, xt = torch.tensor(W), torch.tensor(x0)
        hess = tf.hessian(lambda x: torch.tanh(Wt @ x).sum())
        runs["torch.func.hessian"] = lambda: hess(xt).numpy()
    _agree(runs)
    return runs, "torch.func.hessian" if torch is not None else "numpy closed form"


def per_sample_runs(batch: int, rng: np.random.Generator) -> tuple[dict, str]:
    """The per-sample gradient workload."""
    d_in, d_hidden, d_out = 100, 64, 10
    W1 = rng.normal(size=(d_hidden, d_in)) / np.sqrt(d_in)
    b1 = rng.normal(size=d_hidden) * 0.1
    W2 = rng.normal(size=(d_out, d_hidden)) / np.sqrt(d_hidden)
    X, Y = rng.normal(size=(batch, d_in)), rng.normal(size=(batch, d_out))

    def loss(W1, b1, x, y):
        return ((W2 @ (W1 @ x + b1).tanh() - y) ** 2).sum()
    per_sample = sg.vmap(sg.grad(loss, argnums=(0, 1)), in_axes=(None, None, 0, 0))

    def numpy_by_hand():
        h = np.tanh(X @ W1.T + b1)
        r = 2 * (h @ W2.T - Y)
        d = (r @ W2) * (1 - h * h)
        return np.einsum("bi,bj->bij", d, X), d

    runs = {"numpy by hand": numpy_by_hand,
            "sg.vmap(sg.grad)": lambda: per_sample(W1, b1, X, Y)}
    if torch is not None:
        W1t, b1t, W2t, Xt, Yt = (torch.tensor(a) for a in (W1, b1, W2, X, Y))

        def tloss(W1, b1, x, y):
            return ((W2t @ torch.tanh(W1 @ x + b1) - y) ** 2).sum()
        tgrad = tf.vmap(tf.grad(tloss, argnums=(0, 1)), in_dims=(None, None, 0, 0))
        runs["torch.func.vmap(grad)"] = lambda: tuple(g.numpy() for g in tgrad(W1t, b1t, Xt, Yt))
    _agree(runs)
    return runs, "torch.func.vmap(grad)" if torch is not None else "numpy by hand"


def _agree(runs: dict) -> None:
    """Every run gives the same arrays as the first (to 1e-9)."""
    results = {label: fn() for label, fn in runs.items()}
    first_label, first = next(iter(results.items()))
    for label, res in results.items():
        for a, b in zip(_arrays(first), _arrays(res)):
            if not np.allclose(a, b, rtol=1e-9, atol=1e-9):
                raise AssertionError(f"{label} disagrees with {first_label}")


def _arrays(res) -> list:
    return list(res) if isinstance(res, tuple) else [res]


def report(title: str, runs: dict, base: str, repeat: int) -> None:
    """Print the medians and their ratios to ``base``."""
    medians = interleaved_medians(runs, repeat)
    print(f"{title}; median of {repeat} round-robin runs")
    print(f"{'measurement':36s} {'ms':>9s} {'x ' + base:>28s}")
    for label, t in medians.items():
        print(f"{label:36s} {t * 1e3:9.3f} {t / medians[base]:28.2f}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    if torch is not None:
        torch.set_num_threads(1)    # numpy's BLAS and torch on equal terms on a shared machine
    rng = np.random.default_rng(0)
    runs, base = hessian_runs(args.n, rng)
    report(f"Hessian {args.n}x{args.n} of sum(tanh(W x))", runs, base, args.repeat)
    runs, base = per_sample_runs(args.batch, rng)
    report(f"per-sample gradients, MLP 100-64-10, batch {args.batch}", runs, base, args.repeat)


if __name__ == "__main__":
    main()
