"""Laplacian of a 3-layer tanh MLP R^100 -> R over 256 points: simplegrad's collapsed Taylor
pass (``sg.laplacian``) against the trace of ``sg.hessian`` and, when installed, ``jax.jit`` of
JAX's forward-over-reverse Hessian trace.

Runs (interleaved in one process, after checking that all give the same Laplacians), each
vmapped over the points: ``sg.laplacian(f)`` (one collapsed Taylor walk), ``sg.laplacian(f,
method="hessian")`` (the trace of ``sg.hessian``) and ``jax.jit(vmap(trace(jacfwd(grad f))))``.
Ratios are to the Hessian trace (issue 31: collapsed Taylor at most 0.3x it, and at most 0.5x
JAX's).
Run: python benchmarks/laplacian.py [--d 100] [--points 256] [--quick]
"""

from __future__ import annotations

import numpy as np
import peers

import simplegrad as sg


def main() -> None:
    p = peers.parser(__doc__)
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--points", type=int, default=256)
    args = p.parse_args()
    d, m, n = args.d, args.width, args.points
    repeat = peers.repeats(args, 3, 7)
    rng = np.random.default_rng(0)
    W1, W2 = rng.normal(size=(d, m)) / np.sqrt(d), rng.normal(size=(m, m)) / np.sqrt(m)
    w3 = rng.normal(size=m) / np.sqrt(m)
    X = rng.normal(size=(n, d))

    def f(x):
        return np.tanh(np.tanh(np.tanh(x @ W1) @ W2)) @ w3

    runs = {"sg.laplacian (collapsed Taylor)": lambda: sg.vmap(sg.laplacian(f))(X),
            "trace(sg.hessian)": lambda: sg.vmap(sg.laplacian(f, method="hessian"))(X)}
    jax = peers.jax_or_none()
    if jax is not None:
        jnp = jax.numpy

        def fj(x):
            return jnp.tanh(jnp.tanh(jnp.tanh(x @ W1) @ W2)) @ w3
        lap_j = jax.jit(jax.vmap(lambda x: jnp.trace(jax.jacfwd(jax.grad(fj))(x))))
        Xj = jnp.asarray(X)
        lap_j(Xj).block_until_ready()
        runs["jax.jit forward-over-reverse trace"] = lambda: lap_j(Xj).block_until_ready()
    peers.check_agree("laplacian", {k: r() for k, r in runs.items()}, rtol=1e-9)
    med = peers.measure(runs, repeat)
    peers.show(f"Laplacian, tanh MLP {d} -> {m} -> {m} -> 1 over {n} points",
               med, "Hessian trace", med["trace(sg.hessian)"])
    taylor, hess = med["sg.laplacian (collapsed Taylor)"], med["trace(sg.hessian)"]
    row = {"workload": f"Laplacian d={d} MLP x {n} points, sg.laplacian",
           "unit": "trace(sg.hessian)", "target": "<= 0.3 (<= 0.5x JAX jit)",
           "cols": {"simplegrad": taylor / hess}}
    if jax is not None:
        jt = med["jax.jit forward-over-reverse trace"]
        row["cols"]["JAX jit"] = jt / hess
        print(f"collapsed Taylor / jax.jit: {taylor / jt:.2f} (target <= 0.5)")
    else:
        print("collapsed Taylor / jax.jit: n/a (JAX not installed)")
    peers.emit(args, [row])


if __name__ == "__main__":
    main()
