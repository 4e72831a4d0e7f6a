"""The numba backend: a memory-bound program, and a small one, against the numpy backend and JAX.

- chain: the value-and-gradient program of an elementwise chain of a few hundred ops on 10^5
  values (``STEPS`` rounds of h <- (1.1 h + 0.3) h - 0.2, h <- h / (1 + h^2),
  h <- 0.9 tanh h + 0.1 h: arithmetic, and one transcendental function per round),
  recorded once and compiled by ``sg.compile(prog)`` (numpy) and ``sg.compile(prog,
  backend="numba")``, against ``jax.jit(jax.value_and_grad(f))`` of the same function (the unit)
  and PyTorch eager forward + backward.
- digits: the 64-64-10 MLP training step recorded once and compiled on both backends (a small
  program, where numba's call overhead is what a fused loop must win back).

Values are checked first (the numba backend against the numpy backend, normwise 1e-12).
Run: python benchmarks/fused.py [--quick]
"""

from __future__ import annotations

import importlib.util
import time

import numpy as np
import peers
from numba_first_call import digits_program

import simplegrad as sg

STEPS = 25


def chain(h, tanh):
    for _ in range(STEPS):
        h = (h * 1.1 + 0.3) * h - 0.2
        h = h / (1 + h * h)
        h = tanh(h) * 0.9 + h * 0.1
    return h


def chain_rows(args, torch, jax, numba: bool) -> list[dict]:
    n = 100_000
    rng = np.random.default_rng(0)
    x0 = rng.uniform(-1, 1, n)
    op = sg.Ops()
    x = op.var(x0, name="x")
    L = chain(x, lambda a: a.tanh()).sum()
    prog = op.program([x], [L, op.grad(L, x)])
    op.release()
    plain = sg.compile(prog)
    runs = {"simplegrad sg.compile (numpy backend)": lambda: plain(x0)}
    cols = {}
    if numba:
        t0, cpu0 = time.perf_counter(), time.process_time()
        fast = sg.compile(prog, backend="numba")
        print(f"numba backend: compiled in {time.perf_counter() - t0:.1f} s "
              f"({time.process_time() - cpu0:.1f} s of CPU), {len(fast.kernels)} kernel(s), "
              f"fallback {fast.fallback}")
        runs["simplegrad sg.compile(backend='numba')"] = lambda: fast(x0)
        cols["simplegrad sg.compile(backend='numba')"] = "simplegrad"
        a, b = plain(x0), fast(x0)
        scale = [np.sum(np.abs(chain(x0, np.tanh))), np.max(np.abs(a[1]))]
        worst = max(float(np.max(np.abs(u - v))) / s for u, v, s in zip(a, b, scale))
        print(f"numba against numpy backend: largest normwise difference {worst:.1e}")
        if worst > 1e-12:
            raise SystemExit(f"the numba backend differs from the numpy backend by {worst:.1e}")
    else:
        cols["simplegrad sg.compile (numpy backend)"] = "simplegrad"
    if torch is not None:
        xt = torch.tensor(x0)

        def torch_run():
            t = xt.clone().requires_grad_(True)
            loss = chain(t, torch.tanh).sum()
            (g,) = torch.autograd.grad(loss, t)
            return [loss.detach(), g]
        runs["torch eager fwd + bwd"] = torch_run
        cols["torch eager fwd + bwd"] = "torch eager"
    if jax is not None:
        jnp = jax.numpy
        vg = jax.jit(jax.value_and_grad(lambda h: chain(h, jnp.tanh).sum()))
        xj = jnp.asarray(x0)

        def jax_run():
            v, g = vg(xj)
            return [v.block_until_ready(), g.block_until_ready()]
        runs["jax.jit(value_and_grad)"] = jax_run
        cols["jax.jit(value_and_grad)"] = "JAX jit"
    peers.check_agree("chain", {k: fn() for k, fn in runs.items()}, rtol=1e-9, atol=1e-9)
    med = peers.measure(runs, peers.repeats(args, 7, 21))
    unit = "jax.jit(value_and_grad)" if "jax.jit(value_and_grad)" in med else \
        "simplegrad sg.compile (numpy backend)"
    entries = len(prog.nodes)
    peers.show(f"value and gradient of a {entries}-entry elementwise chain on 10^5 values", med,
               unit, med[unit])
    rows = [{"workload": f"value and gradient program, {entries}-entry elementwise chain, 10^5 "
             "values: sg.compile(backend='numba')" if numba else "(numba not installed)",
             "unit": unit, "target": "simplegrad <= 1.0",
             "cols": {c: med[k] / med[unit] for k, c in cols.items()}}]
    if numba:
        rows.append({"workload": "  the same program, numpy backend", "unit": unit, "target": "",
                     "cols": {"simplegrad": med["simplegrad sg.compile (numpy backend)"] /
                              med[unit]}})
    return rows


def digits_rows(args) -> list[dict]:
    prog, values, _ = digits_program()    # (numba_first_call.py times the same program)
    plain, fast = sg.compile(prog), sg.compile(prog, backend="numba")
    print(f"digits step on the numba backend: {len(fast.kernels)} kernel(s), "
          f"fallback {fast.fallback}")
    runs = {"numpy backend": lambda: plain(*values), "numba backend": lambda: fast(*values)}
    peers.check_agree("digits step", {k: fn() for k, fn in runs.items()}, rtol=1e-12,
                      atol=1e-14)
    med = peers.measure(runs, peers.repeats(args, 101, 301))
    peers.show("digits MLP step 64-64-10, recorded once and compiled", med, "numpy backend",
               med["numpy backend"])
    return [{"workload": "  digits MLP step recorded once, sg.compile(backend='numba')",
             "unit": "the numpy backend", "target": "simplegrad <= 1.0",
             "cols": {"simplegrad": med["numba backend"] / med["numpy backend"]}}]


def main() -> None:
    args = peers.parser(__doc__).parse_args()
    numba = importlib.util.find_spec("numba") is not None
    if not numba:
        print("numba is not installed: the numba rows are skipped (pip install numba)")
    rows = chain_rows(args, peers.torch_or_none(), peers.jax_or_none(), numba)
    if numba:
        rows += digits_rows(args)
    peers.emit(args, rows)


if __name__ == "__main__":
    main()
