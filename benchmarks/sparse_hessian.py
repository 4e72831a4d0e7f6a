"""Sparse Hessians and Jacobians: ``sg.sparse_hessian`` against dense ``sg.hessian``, both
under ``sg.jit``, and the pattern and colouring of a large stencil.

Runs (after checking that the sparse and the dense Hessian agree):
- the extended Rosenbrock function (Moré, Garbow and Hillstrom: independent pairs, a 2x2 block
  diagonal Hessian) and the chained one (``scipy.optimize.rosen``, tridiagonal) at n = 2,000:
  ``sg.sparse_hessian(f)`` (its pattern, colouring and compiled products made on the first
  call, then replayed) against ``sg.jit(sg.hessian(f))``, interleaved in one process; target
  (issue 30): sparse at least 50x faster than dense;
- the same sparse Hessians at n = 10,000 (the dense one would take n hvps and 800 MB), with
  ``jax.jit`` of asdex's when both install;
- ``sg.jacobian_sparsity`` and ``sg.color`` of the 2-D Bratu residual on a 316 x 316 grid
  (99,856 variables), once each; target: together under 2 s on one core.
Run: python benchmarks/sparse_hessian.py [--n 2000] [--quick]
"""

from __future__ import annotations

import time

import numpy as np
import peers

import simplegrad as sg


def extended_rosenbrock(x):
    odd, even = x[0::2], x[1::2]
    return (100.0 * (even - odd ** 2) ** 2 + (1.0 - odd) ** 2).sum()


def chained_rosenbrock(x):
    return (100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2).sum()


def bratu(k: int, lam: float = 1.5):
    def residual(u):
        g, h = u.reshape(k, k), 1.0 / (k + 1)
        p = np.pad(g, 1)
        lap = (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * g) / h ** 2
        return (-lap - lam * np.exp(g)).reshape(-1)
    return residual


def main() -> None:
    p = peers.parser(__doc__)
    p.add_argument("--n", type=int, default=2000)
    args = p.parse_args()
    n, repeat = args.n, peers.repeats(args, 5, 11)
    x = np.random.default_rng(0).uniform(-1.2, 1.2, n)
    rows = []
    for name, f in (("extended", extended_rosenbrock), ("chained", chained_rosenbrock)):
        sparse, dense = sg.sparse_hessian(f), sg.jit(sg.hessian(f))
        t0 = time.perf_counter()
        first = sparse(x)
        setup = time.perf_counter() - t0
        (plan,) = sparse.plans.values()
        runs = {f"sg.sparse_hessian ({plan.seeds.shape[0]} products)": lambda s=sparse: s(x),
                "sg.jit(sg.hessian)": lambda d=dense: d(x)}
        peers.check_agree(f"{name} Rosenbrock Hessian", {
            "dense": dense(x), "sparse": first.toarray()}, rtol=1e-13, atol=1e-10)
        med = peers.measure(runs, repeat)
        unit = "sg.jit(sg.hessian)"
        peers.show(f"{name} Rosenbrock Hessian, n = {n} (first sparse call: {setup:.2f} s); "
                   f"median of {repeat}", med, unit, med[unit])
        ratio = med[unit] / med[next(iter(runs))]
        print(f"sparse is {ratio:.0f}x faster (target: at least 50x)\n")
        rows.append({"workload": f"{name} Rosenbrock Hessian, n = {n}", "unit": unit,
                     "target": "sparse >= 50x faster",
                     "cols": {"simplegrad": 1 / ratio}})

    big = np.random.default_rng(1).uniform(-1.2, 1.2, 10_000)
    for name, f in (("extended", extended_rosenbrock), ("chained", chained_rosenbrock)):
        sparse = sg.sparse_hessian(f)
        sparse(big)
        med = peers.measure({"sg.sparse_hessian": lambda s=sparse: s(big)}, repeat)
        print(f"{name} Rosenbrock sparse Hessian, n = 10,000: "
              f"{med['sg.sparse_hessian'] * 1e3:.2f} ms")
    print("asdex + jax.jit: not measured here (not installed)\n")

    k = 316
    residual, u = bratu(k), np.zeros(k * k)
    t0 = time.perf_counter()
    pattern = sg.jacobian_sparsity(residual)(u)
    t1 = time.perf_counter()
    colors = sg.color(pattern, "column")
    t2 = time.perf_counter()
    print(f"Bratu on {k} x {k} ({k * k} variables, {pattern.nnz} entries): pattern "
          f"{t1 - t0:.2f} s, colouring {t2 - t1:.2f} s ({colors.max() + 1} colours), together "
          f"{t2 - t0:.2f} s (target: under 2 s)")
    peers.emit(args, rows)


if __name__ == "__main__":
    main()
