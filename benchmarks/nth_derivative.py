"""The n-th derivative of tanh by nesting first-order derivatives, n = 1..8, and its growth.

x holds 100 points; each run returns d^n tanh / dx^n at every point (elementwise, by nested
gradients of sums). Runs, interleaved per order after checking every value against the closed
form (the derivatives of tanh are polynomials in tanh): simplegrad nested ``op.grad`` (as
PyTorch nests; also on an ``Ops(simplify=True)``), nested ``op.jvp`` (what ``sg.derivative``
did before it took Taylor mode) and ``sg.derivative`` (Taylor mode from order 2), and when
installed PyTorch eager (nested ``torch.autograd.grad``), HIPS autograd (nested
``elementwise_grad``) and JAX (nested ``jax.grad`` under ``vmap``, jitted; compile time
excluded), and numpy by hand (the derivative polynomial in tanh, built once, evaluated).
Ratios are to PyTorch at the same order; growth per order is (T(8) / T(1)) ** (1 / 7).

At one point: d^10 tanh / dx^10 at x = 0.3 by ``sg.jit`` of ``sg.grad`` nested ten times (its
program recorded with the rules from the second pass on and simplified with ``expand=True``
before it is compiled), against ``jax.jit`` of ``jax.grad`` nested ten times (n/a without JAX)
and P_10(tanh x) by hand; printed with the entries of the compiled program and of the plain
recording. JAX takes a minute or two to trace and compile grad^10, so this part runs in a
process of its own, started first, beside the orders (on another core where there is one).
Run: python benchmarks/nth_derivative.py [--orders 8] [--quick]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import peers

import simplegrad as sg


def tanh_polynomial(n: int) -> np.polynomial.Polynomial:
    """P_n with d^n tanh / dx^n = P_n(tanh x): P_0 = t, P_{k+1} = P_k' (1 - t^2)."""
    poly = np.polynomial.Polynomial([0.0, 1.0])
    for _ in range(n):
        poly = poly.deriv() * np.polynomial.Polynomial([1.0, 0.0, -1.0])
    return poly


def tanh_derivative(x: np.ndarray, n: int) -> np.ndarray:
    """d^n tanh / dx^n in closed form."""
    return tanh_polynomial(n)(np.tanh(x))


def nested_grad(x0: np.ndarray, n: int, simplify: bool = False) -> np.ndarray:
    """simplegrad: n nested reverse sweeps of sums, as one writes it in PyTorch (``simplify``:
    on an ``Ops(simplify=True)``, so each sweep differentiates the simplified graph)."""
    with sg.Ops(simplify=simplify) as op:
        x = op.var(x0)
        y = x.tanh()
        for k in range(n):
            y = op.grad(y.sum(), x, create_graph=k < n - 1)
        return np.array(y.value)


def nested_jvp(x0: np.ndarray, n: int) -> np.ndarray:
    """simplegrad: n nested forward sweeps along ones."""
    with sg.Ops() as op:
        x = op.var(x0)
        y = x.tanh()
        ones = np.ones_like(x0)
        for k in range(n):
            y = op.jvp(y, x, ones, create_graph=k < n - 1)
        return np.array(y.value)


def runs_for(n: int, x0: np.ndarray, torch, autograd, jax) -> tuple[dict, dict]:
    """The runs of order n and the table column each belongs to."""
    deriv = sg.derivative(lambda x: x.tanh(), n)
    poly = tanh_polynomial(n)
    runs = {"numpy (by hand): P_n(tanh x)": lambda: poly(np.tanh(x0)),
            "simplegrad nested op.grad": lambda: nested_grad(x0, n),
            "simplegrad nested op.grad, Ops(simplify=True)": lambda: nested_grad(x0, n, True),
            "simplegrad nested op.jvp": lambda: nested_jvp(x0, n),
            "simplegrad sg.derivative (Taylor mode)": lambda: deriv(x0)}
    cols = {"simplegrad nested op.grad": "simplegrad",
            "numpy (by hand): P_n(tanh x)": "numpy (by hand)"}
    if torch is not None:
        xt = torch.tensor(x0)

        def torch_run():
            x = xt.clone().requires_grad_(True)
            y = torch.tanh(x)
            for k in range(n):
                (y,) = torch.autograd.grad(y.sum(), x, create_graph=k < n - 1)
            return y
        runs["torch eager nested autograd.grad"] = torch_run
        cols["torch eager nested autograd.grad"] = "torch eager"
    if autograd is not None:
        import autograd.numpy as anp
        g = anp.tanh
        for _ in range(n):
            g = autograd.elementwise_grad(g)
        runs["autograd nested elementwise_grad"] = lambda g=g: g(x0)
        cols["autograd nested elementwise_grad"] = "autograd"
    if jax is not None:
        g = jax.numpy.tanh
        for _ in range(n):
            g = jax.grad(g)
        jitted = jax.jit(jax.vmap(g))
        xj = jax.numpy.asarray(x0)
        runs["jax jit(vmap(nested grad))"] = lambda: jitted(xj).block_until_ready()
        cols["jax jit(vmap(nested grad))"] = "JAX jit"
    return runs, cols


def at_a_point(args, jax, n: int = 10, x0: float = 0.3) -> list[dict]:
    """d^n tanh at one point: sg.jit(sg.grad^n) against jax.jit(grad^n) and by hand, measured
    round-robin in this process; its table row printed as a JSON line too."""
    g = lambda x: x.tanh()      # noqa: E731
    for _ in range(n):
        g = sg.grad(g)
    jitted = sg.jit(g)
    x = np.array(x0)
    poly = tanh_polynomial(n)
    runs = {f"simplegrad sg.jit(sg.grad^{n})": lambda: jitted(x),
            f"numpy (by hand): P_{n}(tanh x)": lambda: poly(np.tanh(x0))}
    if jax is not None:
        gj = jax.numpy.tanh
        for _ in range(n):
            gj = jax.grad(gj)
        gjit = jax.jit(gj)
        runs[f"jax jit(grad^{n})"] = lambda: gjit(x0).block_until_ready()
    peers.check_agree(f"d^{n} tanh at {x0}", {"closed form": poly(np.tanh(x0)),
                                              **{k: fn() for k, fn in runs.items()}}, rtol=1e-12)
    with sg.Ops() as op:       # the plain recording, for its size
        v = op.var(x)
        recorded = len(op.program([v], [g(v)]).entries)
    compiled = len(jitted.programs(x)[0].program.entries)
    med = peers.measure(runs, peers.repeats(args, 15, 41))
    sgk, hand = f"simplegrad sg.jit(sg.grad^{n})", f"numpy (by hand): P_{n}(tanh x)"
    jk = f"jax jit(grad^{n})"
    unit = jk if jax is not None else hand
    peers.show(f"d^{n} tanh at one point, nesting grad; median of round-robin runs", med, unit,
               med[unit])
    ratio = f"{med[sgk] / med[jk]:.2f}" if jax is not None else "n/a"
    print(f"sg.jit(sg.grad^{n}) / jax.jit(grad^{n}): {ratio}; / by hand: "
          f"{med[sgk] / med[hand]:.1f}; compiled program {compiled} entries "
          f"(plain recording {recorded})")
    cols = {"simplegrad": med[sgk] / med[unit], "numpy (by hand)": med[hand] / med[unit]}
    if jax is not None:
        cols["JAX jit"] = 1.0
    row = {"workload": f"d^{n} tanh at a point, sg.jit(sg.grad^{n}) ({compiled} entries)",
           "unit": unit, "target": "simplegrad <= 10 (x JAX jit)", "cols": cols}
    print(json.dumps(row))      # (for the run that started this one)
    return [row]


def main() -> None:
    p = peers.parser(__doc__)
    p.add_argument("--orders", type=int, default=8)
    p.add_argument("--point", action="store_true",
                   help="only d^10 tanh at one point (the run of the orders starts it beside)")
    args = p.parse_args()
    if args.point:      # (on another core, where there is one: JAX traces it for a minute)
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        at_a_point(args, peers.jax_or_none())
        return
    point = subprocess.Popen([sys.executable, __file__, "--point",
                              *(["--quick"] if args.quick else []),
                              *(["--repeat", str(args.repeat)] if args.repeat else [])],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    repeat = peers.repeats(args, 9, 21)
    x0 = np.linspace(-1.5, 1.5, 100)
    torch, autograd, jax = peers.torch_or_none(), peers.autograd_or_none(), peers.jax_or_none()
    per_order: dict[int, dict[str, float]] = {}
    cols: dict = {}
    for n in range(1, args.orders + 1):
        runs, cols = runs_for(n, x0, torch, autograd, jax)
        if jax is not None:
            t0 = time.perf_counter()
            runs["jax jit(vmap(nested grad))"]()
            compile_s = time.perf_counter() - t0
        want = tanh_derivative(x0, n)
        results = {"closed form": want, **{k: fn() for k, fn in runs.items()}}
        peers.check_agree(f"order {n}", results, rtol=1e-9, atol=1e-9 * np.abs(want).max())
        per_order[n] = peers.measure(runs, repeat)
        if jax is not None:
            print(f"  jax compile (first call) at order {n}: {compile_s:.3f} s")
    top = args.orders
    unit = ("torch eager nested autograd.grad" if torch is not None
            else "simplegrad nested op.grad")
    print(f"\nn-th derivative of tanh at 100 points; median of {repeat} round-robin runs")
    print(f"{'run':46s}" + "".join(f"{'n=' + str(n):>9s}" for n in per_order) + f"{'growth':>9s}")
    for label in per_order[1]:
        ts = [per_order[n][label] for n in per_order]
        growth = (ts[-1] / ts[0]) ** (1 / max(top - 1, 1))
        print(f"{label:46s}" + "".join(f"{t * 1e3:9.3f}" for t in ts) + f"{growth:9.2f}")
    print(f"(ms; growth = (T({top}) / T(1)) ** (1 / {top - 1}) per order)")
    last = per_order[top]
    print(f"ratios at n = {top} to {unit}: " + ", ".join(
        f"{k} {t / last[unit]:.2f}" for k, t in last.items()))
    growth = {cols.get(k, k): (per_order[top][k] / per_order[1][k]) ** (1 / max(top - 1, 1))
              for k in per_order[1] if k in cols}
    simplified = "simplegrad nested op.grad, Ops(simplify=True)"
    out = point.communicate()[0]
    print(f"\n{out}", end="")
    if point.returncode != 0:
        sys.exit(f"nth_derivative: the run at one point failed (exit {point.returncode})")
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    peers.emit(args, [
        {"workload": f"n-th derivative of tanh by nesting, n = {top}", "unit": unit,
         "target": "none (Taylor rows)",
         "cols": {cols[k]: t / last[unit] for k, t in last.items() if k in cols}},
        {"workload": "  the same nesting on Ops(simplify=True)", "unit": unit, "target": "",
         "cols": {"simplegrad": last[simplified] / last[unit]}},
        {"workload": f"  growth per order, n = 1..{top} (time factor, not a ratio)",
         "unit": "x per order", "target": "", "cols": growth}, *rows])


if __name__ == "__main__":
    main()
