"""Batched tangents and vmap: a 100x100 Hessian in one sweep and per-sample gradients.

Workloads (float64, BLAS on one thread, interleaved in one process after checking that all
runs agree; medians and same-run ratios):
1. the Hessian of sum(tanh(W x)), W 100x100: ``batching.hessian_batched`` (every basis
   tangent in one batched forward sweep, recorded) and ``sg.hessian`` (the same sweep on
   values, nothing recorded), against the closed form by hand in numpy and, when installed,
   ``torch.func.hessian``, HIPS autograd's ``hessian`` and ``jax.jit(jax.hessian)``;
2. per-sample gradients of an MLP loss (batch 64, 100-64-10, tanh, squared error) in the first
   layer's weights and bias: ``sg.vmap(sg.grad(loss))`` (and through ``sg.jit``) against numpy
   by hand,
   ``torch.func.vmap(torch.func.grad(loss))``, ``jax.jit(jax.vmap(jax.grad(loss)))`` and HIPS
   autograd's ``grad`` in a loop over the examples (it has no vmap).
Ratios are to torch.func (to numpy without torch), then to numpy by hand.
Run: python benchmarks/batching.py [--n 100] [--batch 64] [--quick]
"""

from __future__ import annotations

import numpy as np
import peers

import simplegrad as sg
from simplegrad.transforms.jacobians import hessian_batched


def hessian_workload(args, torch, jax, autograd) -> dict:
    """Runs and table columns of the Hessian workload; prints its table."""
    rng = np.random.default_rng(0)
    W = rng.normal(size=(args.n, args.n)) / np.sqrt(args.n)
    x0 = rng.normal(size=args.n)

    def batched():
        with sg.Ops() as op:
            x = op.var(x0)
            return np.array(hessian_batched(op, (W @ x).tanh().sum(), x).value)

    def by_hand():
        t = np.tanh(W @ x0)
        return W.T @ ((-2 * t * (1 - t * t))[:, None] * W)

    eager = sg.hessian(lambda x: (W @ x).tanh().sum())
    runs = {"simplegrad hessian_batched (one sweep)": batched,
            "simplegrad sg.hessian (values only)": lambda: eager(x0),
            "numpy (by hand)": by_hand}
    cols = {"simplegrad hessian_batched (one sweep)": "simplegrad",
            "numpy (by hand)": "numpy (by hand)"}
    if torch is not None:
        import torch.func
        Wt, xt = torch.tensor(W), torch.tensor(x0)
        hess = torch.func.hessian(lambda x: torch.tanh(Wt @ x).sum())
        runs["torch.func.hessian"] = lambda: hess(xt)
        cols["torch.func.hessian"] = "torch.func"
    if autograd is not None:
        import autograd.numpy as anp
        hess_ag = autograd.hessian(lambda x: anp.tanh(anp.dot(W, x)).sum())
        runs["autograd hessian"] = lambda: hess_ag(x0)
        cols["autograd hessian"] = "autograd"
    if jax is not None:
        Wj, xj = jax.numpy.asarray(W), jax.numpy.asarray(x0)
        hess_jax = jax.jit(jax.hessian(lambda x: jax.numpy.tanh(Wj @ x).sum()))
        runs["jax.jit(jax.hessian)"] = lambda: hess_jax(xj).block_until_ready()
        cols["jax.jit(jax.hessian)"] = "JAX jit"
    return _measure(args, f"Hessian {args.n}x{args.n} of sum(tanh(W x)), one batched sweep",
                    runs, cols, "torch.func.hessian" if torch is not None else "numpy (by hand)")


def per_sample_workload(args, torch, jax, autograd) -> dict:
    """Runs and table columns of the per-sample gradient workload; prints its table."""
    rng = np.random.default_rng(1)
    d_in, d_hidden, d_out, b = 100, 64, 10, args.batch
    W1 = rng.normal(size=(d_hidden, d_in)) / np.sqrt(d_in)
    b1 = rng.normal(size=d_hidden) * 0.1
    W2 = rng.normal(size=(d_out, d_hidden)) / np.sqrt(d_hidden)
    X, Y = rng.normal(size=(b, d_in)), rng.normal(size=(b, d_out))

    def loss(W1, b1, x, y):
        return ((W2 @ (W1 @ x + b1).tanh() - y) ** 2).sum()
    per_sample = sg.vmap(sg.grad(loss, argnums=(0, 1)), in_axes=(None, None, 0, 0))

    def by_hand():
        h = np.tanh(X @ W1.T + b1)
        d = ((2 * (h @ W2.T - Y)) @ W2) * (1 - h * h)
        return np.einsum("bi,bj->bij", d, X), d

    jitted = sg.jit(per_sample)
    runs = {"simplegrad sg.vmap(sg.grad)": lambda: per_sample(W1, b1, X, Y),
            "simplegrad sg.jit(sg.vmap(sg.grad))": lambda: jitted(W1, b1, X, Y),
            "numpy (by hand)": by_hand}
    cols = {"simplegrad sg.vmap(sg.grad)": "simplegrad", "numpy (by hand)": "numpy (by hand)"}
    if torch is not None:
        import torch.func
        W1t, b1t, W2t, Xt, Yt = (torch.tensor(a) for a in (W1, b1, W2, X, Y))

        def tloss(W1, b1, x, y):
            return ((W2t @ torch.tanh(W1 @ x + b1) - y) ** 2).sum()
        tgrad = torch.func.vmap(torch.func.grad(tloss, argnums=(0, 1)), in_dims=(None, None, 0, 0))
        runs["torch.func.vmap(grad)"] = lambda: tgrad(W1t, b1t, Xt, Yt)
        cols["torch.func.vmap(grad)"] = "torch.func"
    if autograd is not None:        # no vmap: its grad in a loop over the examples
        import autograd.numpy as anp

        def aloss(W1, b1, x, y):
            return ((anp.dot(W2, anp.tanh(anp.dot(W1, x) + b1)) - y) ** 2).sum()
        both = autograd.grad(lambda p, x, y: aloss(p[0], p[1], x, y))   # (dW1, db1) at once

        def autograd_loop():
            gs = [both((W1, b1), x, y) for x, y in zip(X, Y)]
            return np.stack([g[0] for g in gs]), np.stack([g[1] for g in gs])
        runs["autograd grad, a loop over examples"] = autograd_loop
        cols["autograd grad, a loop over examples"] = "autograd"
    if jax is not None:
        jnp = jax.numpy
        W1j, b1j, W2j, Xj, Yj = (jnp.asarray(a) for a in (W1, b1, W2, X, Y))

        def jloss(W1, b1, x, y):
            return ((W2j @ jnp.tanh(W1 @ x + b1) - y) ** 2).sum()
        jgrad = jax.jit(jax.vmap(jax.grad(jloss, argnums=(0, 1)), in_axes=(None, None, 0, 0)))
        runs["jax.jit(jax.vmap(jax.grad))"] = lambda: jax.block_until_ready(
            jgrad(W1j, b1j, Xj, Yj))
        cols["jax.jit(jax.vmap(jax.grad))"] = "JAX jit"
    return _measure(args, f"per-sample gradients of an MLP loss (100-64-10, batch {b})",
                    runs, cols, "torch.func.vmap(grad)" if torch is not None else
                    "numpy (by hand)")


def _measure(args, title: str, runs: dict, cols: dict, unit: str) -> dict:
    peers.check_agree(title, {k: fn() for k, fn in runs.items()})
    repeat = peers.repeats(args, 21, 41)
    med = peers.measure(runs, repeat)
    peers.show(f"{title}; median of {repeat} round-robin runs", med, unit, med[unit])
    if unit != "numpy (by hand)":   # in rounds of their own: the peers' long runs evict caches
        own = peers.measure({k: fn for k, fn in runs.items()
                             if k.startswith("simplegrad") or k == "numpy (by hand)"}, repeat)
        print()
        peers.show(f"{title}, against numpy by hand (rounds of their own)", own,
                   "numpy (by hand)", own["numpy (by hand)"])
    print()
    return {"workload": title, "unit": unit, "target": "simplegrad <= 1.0",
            "cols": {cols[k]: t / med[unit] for k, t in med.items() if k in cols}}


def main() -> None:
    p = peers.parser(__doc__)
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args()
    torch, jax = peers.torch_or_none(), peers.jax_or_none()
    autograd = peers.autograd_or_none()
    rows = [hessian_workload(args, torch, jax, autograd),
            per_sample_workload(args, torch, jax, autograd)]
    peers.emit(args, rows)


if __name__ == "__main__":
    main()
