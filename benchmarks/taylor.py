"""Taylor mode (sg.taylor): time against the order, and order 8 against nested gradients.

For tanh(x), x sin(x) exp(x) and log(1 + x^2) at 100 points, ``sg.taylor_derivative(f, n)``
gives the n-th derivative from one forward walk of truncated Taylor series. Printed: its
median time at n = 1, 2, 4, 8, 16, 20 and T(16) / T(8) (polynomial cost: at most 4 for
quadratic growth), then at n = 8 its ratio to PyTorch's nested ``autograd.grad`` and to
simplegrad's own nesting (``op.grad`` nested; ``sg.derivative``, which takes Taylor mode
itself now), and when installed to JAX's
Taylor mode (``jax.experimental.jet``, jitted and eager) and, for tanh, to numpy by hand (the
derivative polynomial evaluated), interleaved after checking the values (tanh against its
closed form at every order; every run against Taylor mode at 8).

At a point (issue 32): d^n tanh at x = 0.3 for n = 10, 16, 20 by ``sg.taylor_derivative``, against
the Taylor recurrence written by hand (z_k = w_{k-1} / k, w_k = -sum_j z_j z_{k-j}, z = tanh,
w = 1 - z^2) on numpy float64 scalars (the limit; the same loop on Python floats printed beside
it) and ``jax.jit`` of ``jet`` ("n/a" without JAX), with ``sg.jit`` of the same derivative
(recorded once, then replayed: a program of numbers, run on Python floats) beside them; each
run is timed over a batch of calls. Targets: ``sg.taylor_derivative`` at most 3x the hand
recurrence, and ``sg.jit`` of it (what ``jax.jit`` is to ``jet``) at most 2x ``jax.jit(jet)``.
Run: python benchmarks/taylor.py [--quick]
"""

from __future__ import annotations

import math

import numpy as np
import peers
from nth_derivative import tanh_derivative, tanh_polynomial

import simplegrad as sg

ORDERS = (1, 2, 4, 8, 16, 20)
POINT_ORDERS = (10, 16, 20)
BATCH = 50      # calls per timed sample at a point (one call is tens of microseconds)


def functions(lib):
    """The three test functions written for ``lib`` (simplegrad methods, torch or jax.numpy)."""
    if lib is None:
        return {"tanh": lambda x: x.tanh(),
                "x sin(x) exp(x)": lambda x: x * x.sin() * x.exp(),
                "log(1 + x^2)": lambda x: (1 + x * x).log()}
    return {"tanh": lib.tanh, "x sin(x) exp(x)": lambda x: x * lib.sin(x) * lib.exp(x),
            "log(1 + x^2)": lambda x: lib.log(1 + x * x)}


def jet_derivative(jax, f, n: int):
    """The n-th derivative along ones by JAX's Taylor mode (jet takes and gives derivatives)."""
    from jax.experimental import jet
    jnp = jax.numpy

    def d(x):
        series = (jnp.ones_like(x),) + (jnp.zeros_like(x),) * (n - 1)
        return jet.jet(f, (x,), (series,))[1][-1]
    return d


def nested_sg(f, x0: np.ndarray, n: int) -> np.ndarray:
    """simplegrad's nested op.grad of sums, on any f."""
    with sg.Ops() as op:
        x = op.var(x0)
        y = f(x)
        for k in range(n):
            y = op.grad(y.sum(), x, create_graph=k < n - 1)
        return np.array(y.value)


def tanh_by_hand(x0, n: int):
    """d^n tanh at x0 by the Taylor recurrence along x0 + t, on the type of x0 (numpy float64
    scalar or Python float): z_k = w_{k-1} / k, w_k = -sum_{j=0..k} z_j z_{k-j}."""
    z = [np.tanh(x0) if isinstance(x0, np.generic) else math.tanh(x0)]
    w = [1.0 - z[0] * z[0]]
    for k in range(1, n + 1):
        z.append(w[k - 1] / k)
        acc = z[0] * z[k]
        for j in range(1, k + 1):
            acc = acc + z[j] * z[k - j]
        w.append(-acc)
    return z[n] * math.factorial(n)


def batched(fn, times: int = BATCH):
    """fn called ``times`` times (one timed sample)."""
    def run():
        for _ in range(times):
            out = fn()
        return out
    return run


def at_a_point(jax, repeat: int) -> list[dict]:
    """d^10, d^16, d^20 of tanh at one point: simplegrad, the hand recurrence, jax.jit(jet)."""
    x0 = 0.3
    rows = []
    print(f"\nd^n tanh at x = {x0}, us per call (median of {repeat} round-robin samples of "
          f"{BATCH} calls)")
    print(f"{'n':>4s}{'sg':>10s}{'sg.jit':>10s}{'hand np':>10s}{'hand py':>10s}{'jax jit':>10s}"
          f"{'sg/hand':>10s}{'sg/jax':>10s}{'jit/hand':>10s}{'jit/jax':>10s}")
    for n in POINT_ORDERS:
        d = sg.taylor_derivative(lambda x: x.tanh(), n)
        jd, xa = sg.jit(d), np.asarray(x0)
        runs = {"sg": lambda d=d: d(x0),
                "sg.jit": lambda jd=jd, xa=xa: jd(xa),
                "hand np": lambda n=n: tanh_by_hand(np.float64(x0), n),
                "hand py": lambda n=n: tanh_by_hand(x0, n)}
        if jax is not None:
            jitted = jax.jit(jet_derivative(jax, jax.numpy.tanh, n))
            xj = jax.numpy.asarray(x0)
            runs["jax jit"] = lambda j=jitted, xj=xj: j(xj).block_until_ready()
        peers.check_agree(f"d^{n} tanh at {x0}", {k: fn() for k, fn in runs.items()},
                          rtol=1e-9, atol=0.0)
        med = peers.measure({k: batched(fn) for k, fn in runs.items()}, repeat)
        us = {k: v / BATCH * 1e6 for k, v in med.items()}
        hand = us["sg"] / us["hand np"]
        jax_us = us.get("jax jit")

        def vs_jax(t: float, jax_us: float | None = jax_us) -> str:
            return f"{t / jax_us:10.2f}" if jax_us is not None else f"{'n/a':>10s}"
        print(f"{n:4d}{us['sg']:10.1f}{us['sg.jit']:10.1f}{us['hand np']:10.1f}"
              f"{us['hand py']:10.1f}" + (f"{jax_us:10.1f}" if jax_us else f"{'n/a':>10s}")
              + f"{hand:10.2f}" + vs_jax(us["sg"]) + f"{us['sg.jit'] / us['hand np']:10.2f}"
              + vs_jax(us["sg.jit"]))
        rows.append({"workload": f"d^{n} tanh at a point: sg.taylor_derivative",
                     "unit": "hand recurrence (numpy)",
                     "target": "<= 3 (sg.jit <= 2x JAX jit)",
                     "cols": {"simplegrad": hand, "sg.jit": us["sg.jit"] / us["hand np"],
                              "Python floats (by hand)": us["hand py"] / us["hand np"],
                              **({"JAX jit": jax_us / us["hand np"]} if jax_us else {})}})
    print("targets: sg/hand <= 3, jit/jax <= 2")
    return rows


def main() -> None:
    args = peers.parser(__doc__).parse_args()
    repeat = peers.repeats(args, 21, 41)
    x0 = np.linspace(-1.2, 1.2, 100)
    torch, jax = peers.torch_or_none(), peers.jax_or_none()
    point_rows = at_a_point(jax, repeat)
    for n in ORDERS:
        np.testing.assert_allclose(sg.taylor_derivative(lambda x: x.tanh(), n)(x0),
                                   tanh_derivative(x0, n), rtol=1e-9,
                                   atol=1e-12 * np.abs(tanh_derivative(x0, n)).max())
    print("tanh: Taylor mode equals the closed form at n = " + ", ".join(map(str, ORDERS)))
    growth = {}
    print(f"\nsg.taylor_derivative at 100 points, ms (median of {repeat} round-robin runs)")
    print(f"{'function':18s}" + "".join(f"{'n=' + str(n):>8s}" for n in ORDERS)
          + f"{'T16/T8':>8s}")
    for name, f in functions(None).items():
        med = peers.measure({n: (lambda n=n, f=f: sg.taylor_derivative(f, n)(x0)) for n in ORDERS},
                            repeat)
        growth[name] = med[16] / med[8]
        print(f"{name:18s}" + "".join(f"{med[n] * 1e3:8.3f}" for n in ORDERS)
              + f"{growth[name]:8.2f}")

    n = 8
    rows = []
    tf = functions(torch) if torch is not None else {}
    for name, f in functions(None).items():
        runs = {"simplegrad sg.taylor_derivative": lambda f=f: sg.taylor_derivative(f, n)(x0),
                "simplegrad nested op.grad": lambda f=f: nested_sg(f, x0, n),
                "simplegrad sg.derivative (Taylor)": lambda f=f: sg.derivative(f, n)(x0)}
        if torch is not None:
            xt = torch.tensor(x0)

            def torch_run(g=tf[name], xt=xt):
                x = xt.clone().requires_grad_(True)
                y = g(x)
                for k in range(n):
                    (y,) = torch.autograd.grad(y.sum(), x, create_graph=k < n - 1)
                return y
            runs["torch eager nested autograd.grad"] = torch_run
        if name == "tanh":
            poly = tanh_polynomial(n)
            runs["numpy (by hand): P_8(tanh x)"] = lambda poly=poly: poly(np.tanh(x0))
        if jax is not None:
            jet_run = jet_derivative(jax, functions(jax.numpy)[name], n)
            xj = jax.numpy.asarray(x0)
            jitted = jax.jit(jet_run)
            runs["jax jet, jit"] = lambda j=jitted, xj=xj: j(xj).block_until_ready()
            runs["jax jet, eager"] = lambda j=jet_run, xj=xj: j(xj)
        ref = runs["simplegrad sg.taylor_derivative"]()
        peers.check_agree(f"{name}, n = {n}", {k: fn() for k, fn in runs.items()}, rtol=1e-9,
                          atol=1e-10 * np.abs(ref).max())
        med = peers.measure(runs, repeat)
        unit = "simplegrad sg.taylor_derivative"
        peers.show(f"{name}, n = {n}: ratios to Taylor mode", med, "Taylor", med[unit])
        torch_key = "torch eager nested autograd.grad"
        rows.append({"workload": f"n = 8 of {name}: sg.taylor_derivative", "unit":
                     "torch eager nested grad" if torch_key in med else "sg nested op.grad",
                     "target": "simplegrad <= 0.1",
                     "cols": {label: med[key] / med.get(torch_key, med["simplegrad nested op.grad"])
                              for key, label in (
                                  (unit, "simplegrad"), (torch_key, "torch eager"),
                                  ("numpy (by hand): P_8(tanh x)", "numpy (by hand)"),
                                  ("jax jet, jit", "JAX jit")) if key in med}})
    print("\nT(16) / T(8): " + ", ".join(f"{k} {v:.2f}" for k, v in growth.items())
          + " (target <= 4)")
    rows.append({"workload": "  Taylor mode T(16) / T(8), worst of the three",
                 "unit": "time factor", "target": "simplegrad <= 4",
                 "cols": {"simplegrad": max(growth.values())}})
    peers.emit(args, point_rows + rows)


if __name__ == "__main__":
    main()
