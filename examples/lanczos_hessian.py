"""Lanczos on the Hessian of a small network's loss, with ravel_pytree and no Hessian formed.

The parameters are a registered dataclass per layer (``sg.register_pytree_node``), a list of
them the model. ``sg.ravel_pytree`` turns them into one flat vector and back, so the Lanczos
iteration works on plain vectors while every Hessian-vector product is ``sg.hvp`` of the loss
of ``unravel(v)`` (reverse over forward, no Hessian formed). Checks:

1. each hvp against the product with the full Hessian (``sg.hessian`` of the flat loss);
2. the extreme Ritz values against ``np.linalg.eigvalsh`` of that Hessian (Lanczos with full
   reorthogonalisation, as many steps as parameters, recovers the whole spectrum);
3. the flat gradient against the tree gradient raveled, and unravel(ravel(p)) == p.

Run: python examples/lanczos_hessian.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

import simplegrad as sg


@dataclass
class Dense:
    """One layer's parameters."""

    w: Any
    b: Any


sg.register_pytree_node(Dense, lambda d: ((d.w, d.b), None), lambda _, ch: Dense(*ch))


def init(rng: np.random.Generator, sizes: list[int]) -> list[Dense]:
    return [Dense(rng.standard_normal((m, n)) / np.sqrt(m), 0.1 * rng.standard_normal(n))
            for m, n in zip(sizes[:-1], sizes[1:])]


def loss(params: list[Dense], x: np.ndarray, y: np.ndarray) -> Any:
    h = x
    for k, layer in enumerate(params):
        h = h @ layer.w + layer.b
        if k < len(params) - 1:
            h = h.tanh()
    return ((h - y) ** 2).mean()


def lanczos(matvec, n: int, steps: int, rng: np.random.Generator) -> np.ndarray:
    """The Ritz values of a symmetric operator after ``steps`` Lanczos steps (full
    reorthogonalisation)."""
    q = rng.standard_normal(n)
    qs = [q / np.linalg.norm(q)]
    alphas, betas = [], []
    for j in range(steps):
        w = matvec(qs[j])
        alphas.append(qs[j] @ w)
        for qk in qs:               # full reorthogonalisation (twice is enough)
            w = w - (qk @ w) * qk
        for qk in qs:
            w = w - (qk @ w) * qk
        beta = np.linalg.norm(w)
        if j == steps - 1 or beta < 1e-12:
            break
        betas.append(beta)
        qs.append(w / beta)
    t = np.diag(alphas) + np.diag(betas[:len(alphas) - 1], 1) + np.diag(
        betas[:len(alphas) - 1], -1)
    return np.linalg.eigvalsh(t)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller network, for the tests")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    sizes = [3, 4, 2] if args.quick else [4, 8, 3]
    params = init(rng, sizes)
    x = rng.standard_normal((16, sizes[0]))
    y = rng.standard_normal((16, sizes[-1]))
    failures: list[str] = []

    flat, unravel = sg.ravel_pytree(params)
    n = flat.size
    back = unravel(flat)
    if not all(np.array_equal(a.w, b.w) and np.array_equal(a.b, b.b)
               for a, b in zip(back, params)):
        failures.append("unravel(ravel(p)) != p")
    flat_loss = lambda v: loss(unravel(v), x, y)       # noqa: E731
    g_flat = sg.grad(flat_loss)(flat)
    g_tree = sg.ravel_pytree(sg.grad(loss)(params, x, y))[0]
    print(f"{n} parameters in {len(params)} layers; flat vs tree gradient: "
          f"{np.max(np.abs(g_flat - g_tree)):.1e}")
    if not np.allclose(g_flat, g_tree, atol=1e-12, rtol=1e-12):
        failures.append("flat gradient != tree gradient")

    hvp = sg.hvp(flat_loss)
    h = sg.hessian(flat_loss)(flat)
    v = rng.standard_normal(n)
    err = np.max(np.abs(hvp(flat, v) - h @ v))
    print(f"hvp against the full Hessian: {err:.1e}")
    if err > 1e-10:
        failures.append(f"hvp differs from H v by {err:.1e}")

    ritz = lanczos(lambda q: hvp(flat, q), n, n, rng)
    eig = np.linalg.eigvalsh(h)
    print(f"Lanczos ({n} steps): extreme Ritz values {ritz[0]: .6f} {ritz[-1]: .6f}")
    print(f"eigvalsh(H):         extreme eigenvalues {eig[0]: .6f} {eig[-1]: .6f}")
    for got, want, which in ((ritz[0], eig[0], "smallest"), (ritz[-1], eig[-1], "largest")):
        if abs(got - want) > 1e-8 * max(1.0, abs(want)):
            failures.append(f"{which} Ritz value {got} != eigenvalue {want}")

    print("all checks passed" if not failures else f"{len(failures)} check(s) failed")
    for f in failures:
        print("  -", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
