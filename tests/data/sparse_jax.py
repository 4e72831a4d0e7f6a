"""How tests/data/sparse_jax.npz was made: JAX's dense Jacobians and Hessians (float64, CPU)
of the functions of tests/test_sparsity_jax.py, written in jax.numpy, at fixed points.

Run once with JAX installed: python tests/data/sparse_jax.py (JAX 0.10.2 made the file).
The tests read the numbers only; they need no JAX.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(7)
PAIRS = RNG.integers(0, 24, size=(30, 3))
BLOCKS = RNG.standard_normal((6, 4, 4))


def banded(x):
    return jnp.concatenate([x[2:] * x[:-2] - jnp.sin(x[1:-1]) * x[:-2], jnp.cos(x[:2])]) + x ** 3


def block(x):
    b = x.reshape(6, 4)
    return (jnp.einsum("kij,kj->ki", BLOCKS, jnp.tanh(b)) * b).reshape(-1)


def arrowhead(x):
    return x[0] * (x ** 2).sum() + (jnp.sin(x) ** 2).sum()


def random_sparse(x):
    return x[PAIRS[:, 0]] * jnp.sin(x[PAIRS[:, 1]]) + x[PAIRS[:, 2]] ** 2


def bratu(u, lam=1.5):
    k, h = u.reshape(6, 4), 1.0 / 7
    p = jnp.pad(k, 1)
    lap = (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * k) / h ** 2
    return (-lap - lam * jnp.exp(k)).reshape(-1)


def rosenbrock(x):
    return (100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2).sum()


def extended_rosenbrock(x):
    odd, even = x[0::2], x[1::2]
    return (100.0 * (even - odd ** 2) ** 2 + (1.0 - odd) ** 2).sum()


JACOBIANS = {"banded": banded, "block": block, "random_sparse": random_sparse, "bratu": bratu}
HESSIANS = {"rosenbrock": rosenbrock, "arrowhead": arrowhead,
            "block": lambda x: (block(x) ** 2).sum(),
            "random_sparse": lambda x: (random_sparse(x) ** 2).sum(),
            "bratu": lambda x: (bratu(x) ** 2).sum()}


def main() -> None:
    x = np.random.default_rng(30).standard_normal(24) * 0.5
    out = {"x": x, "pairs": PAIRS, "blocks": BLOCKS}
    for name, f in JACOBIANS.items():
        out[f"jacobian_{name}"] = np.asarray(jax.jacfwd(f)(jnp.asarray(x)))
    for name, f in HESSIANS.items():
        out[f"hessian_{name}"] = np.asarray(jax.hessian(f)(jnp.asarray(x)))
    # larger ones, their nonzero entries only (row, column, value)
    big = np.random.default_rng(31).uniform(-1.2, 1.2, 400)
    out["big_x"] = big
    for name, f in (("rosenbrock", rosenbrock), ("extended_rosenbrock", extended_rosenbrock)):
        h = np.asarray(jax.hessian(f)(jnp.asarray(big)))
        r, c = np.nonzero(h)
        out[f"big_{name}"] = np.stack([r, c]).astype(np.int32)
        out[f"big_{name}_values"] = h[r, c]
    np.savez_compressed(Path(__file__).with_suffix(".npz"), **out)


if __name__ == "__main__":
    main()
