"""Hessian of f(x) = sum(tanh(W x)), x in R^100: simplegrad against numpy and the peers.

Runs (interleaved in one process, after checking that all give the same Hessian):
simplegrad ``sg.hessian`` (forward-over-reverse, recorded on every call), the program it
records compiled once (``sg.compile``) and ``sg.jit(sg.hessian(f))``, the closed form by hand
in numpy (H = W^T diag(-2 t (1 - t^2)) W with t = tanh(W x)), and when installed PyTorch eager
(``torch.autograd.functional.hessian``), ``torch.func.hessian``, HIPS autograd's ``hessian``
and ``jax.jit(jax.hessian)``. Ratios are to ``torch.func.hessian`` (to numpy without torch),
then to numpy by hand measured in rounds of simplegrad and numpy only (the targets: eager
within 4x, compiled by ``sg.jit`` within 1.5x; the program recorded on a plain Ops and
compiled as recorded is shown beside them).
Run: python benchmarks/hessian.py [--n 100] [--quick]
"""

from __future__ import annotations

import numpy as np
import peers

import simplegrad as sg


def main() -> None:
    p = peers.parser(__doc__)
    p.add_argument("--n", type=int, default=100)
    args = p.parse_args()
    n, repeat = args.n, peers.repeats(args, 21, 41)
    rng = np.random.default_rng(0)
    W = rng.normal(size=(n, n)) / np.sqrt(n)
    x = rng.normal(size=n)

    def numpy_hessian():
        t = np.tanh(W @ x)
        return W.T @ ((-2 * t * (1 - t * t))[:, None] * W)

    def f(x):
        return (W @ x).tanh().sum()
    hess, jitted = sg.hessian(f), sg.jit(sg.hessian(f))
    op = sg.Ops()
    xv = op.var(x)
    compiled = sg.compile(op.program([xv], hess(xv)))
    runs = {"simplegrad sg.hessian": lambda: hess(x),
            "simplegrad sg.compile (recorded once)": lambda: compiled(x),
            "simplegrad sg.jit(sg.hessian)": lambda: jitted(x),
            "numpy (by hand)": numpy_hessian}
    cols = {"simplegrad sg.hessian": "simplegrad", "numpy (by hand)": "numpy (by hand)"}

    torch = peers.torch_or_none()
    if torch is not None:
        import torch.func
        Wt, xt = torch.tensor(W), torch.tensor(x)

        def ft(x):
            return torch.tanh(Wt @ x).sum()
        hess_func = torch.func.hessian(ft)
        runs["torch eager autograd.functional.hessian"] = (
            lambda: torch.autograd.functional.hessian(ft, xt))
        runs["torch.func.hessian"] = lambda: hess_func(xt)
        cols["torch eager autograd.functional.hessian"] = "torch eager"
        cols["torch.func.hessian"] = "torch.func"
    autograd = peers.autograd_or_none()
    if autograd is not None:
        import autograd.numpy as anp
        hess_ag = autograd.hessian(lambda x: anp.sum(anp.tanh(anp.dot(W, x))))
        runs["autograd hessian"] = lambda: hess_ag(x)
        cols["autograd hessian"] = "autograd"
    jax = peers.jax_or_none()
    if jax is not None:
        Wj = jax.numpy.asarray(W)
        hess_jax = jax.jit(jax.hessian(lambda x: jax.numpy.tanh(Wj @ x).sum()))
        xj = jax.numpy.asarray(x)
        runs["jax.jit(jax.hessian)"] = lambda: hess_jax(xj).block_until_ready()
        cols["jax.jit(jax.hessian)"] = "JAX jit"

    peers.check_agree("Hessian", {k: fn() for k, fn in runs.items()})
    med = peers.measure(runs, repeat)
    unit = "torch.func.hessian" if "torch.func.hessian" in med else "numpy (by hand)"
    title = f"Hessian {n}x{n} of sum(tanh(W x)); median of {repeat} round-robin runs"
    peers.show(title, med, unit, med[unit])
    # against numpy by hand in rounds of their own: interleaved with the peers' runs of
    # milliseconds, each sub-0.1 ms run starts with caches they evicted (every ratio to numpy
    # moved up by 1.3-1.6x)
    own = peers.measure({k: fn for k, fn in runs.items()
                         if k.startswith("simplegrad") or k == "numpy (by hand)"}, repeat)
    hand = own["numpy (by hand)"]
    print()
    peers.show(title + ", against numpy by hand (rounds of their own)", own, "numpy (by hand)",
               hand)
    peers.emit(args, [
        {"workload": f"Hessian of sum(tanh(W x)), x in R^{n}", "unit": unit,
         "target": "simplegrad <= 1.0",
         "cols": {cols[k]: t / med[unit] for k, t in med.items() if k in cols}},
        {"workload": "the same Hessian, eager `sg.hessian`", "unit": "numpy (by hand)",
         "target": "simplegrad <= 4.0",
         "cols": {"simplegrad": own["simplegrad sg.hessian"] / hand, "numpy (by hand)": 1.0}},
        {"workload": "the same Hessian compiled, `sg.jit(sg.hessian)`", "unit": "numpy (by hand)",
         "target": "simplegrad <= 1.5",
         "cols": {"simplegrad": own["simplegrad sg.jit(sg.hessian)"] / hand,
                  "numpy (by hand)": 1.0}},
        {"workload": "  the program recorded once on a plain Ops, `sg.compile` as recorded",
         "unit": "numpy (by hand)", "target": "",
         "cols": {"simplegrad": own["simplegrad sg.compile (recorded once)"] / hand,
                  "numpy (by hand)": 1.0}}])


if __name__ == "__main__":
    main()
