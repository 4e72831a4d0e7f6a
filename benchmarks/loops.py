"""Loops as one entry against the same loop unrolled in simplegrad: recorded entries and time.

Workloads (float64, same-run medians measured round-robin):
1. a 1,000-step scan of a 32-unit tanh RNN (h <- tanh(W h + U x_t), loss sum(h_T^2)): the
   entries the loop and its gradient record (``op.grad`` on an Ops: the scan, the history
   scan, the reverse scan and the parts of their packed outputs; the loss and its gradient,
   the same entries in the unrolled tape, counted apart) against the body's, and the eager
   gradient's time (``sg.grad`` on arrays: a sweep on values), ``sg.scan`` against the Python
   loop unrolled and against PyTorch eager unrolled (when installed); ``sg.jit`` of the
   gradient (numpy backend; and ``backend="numba"``, each loop one compiled kernel, when numba
   is installed) against ``jax.jit(jax.grad)`` of ``lax.scan`` (when JAX is installed), and
   the limit of a numpy backend beside them: the gradient written by hand in numpy (the
   numpy backend's values bit for bit, and with W's cotangent as one matrix product);
2. the Hessian in 3 parameters of a 100-step RK4 solve of a damped pendulum
   (``sg.odeint(method="rk4")``) against the same steps unrolled: entries recorded by the
   Hessian (two recorded reverse sweeps on an Ops) and ``sg.hessian``'s time.
Run: PYTHONPATH=. python benchmarks/loops.py [--quick]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import time

import numpy as np
from peers import jax_or_none, torch_or_none
from timing import interleaved_medians

import simplegrad as sg


def rnn_data(steps: int, units: int) -> tuple:
    """The RNN's weights W and U and its inputs xs (seeded: every run and peer the same)."""
    rng = np.random.default_rng(0)
    W = rng.normal(size=(units, units)) / np.sqrt(units)
    U = rng.normal(size=(units, 8)) / np.sqrt(8)
    return W, U, rng.normal(size=(steps, 8))


def rnn(steps: int, units: int):
    W, U, xs = rnn_data(steps, units)
    h0 = np.zeros(units)

    def scanned(W):
        h, _ = sg.scan(lambda h, x: (np.tanh(W @ h + U @ x), None), h0, xs)
        return (h * h).sum()

    def unrolled(W):
        h = h0
        for t in range(steps):
            h = np.tanh(W @ h + U @ xs[t])
        return (h * h).sum()
    return W, scanned, unrolled


def rnn_peers(steps: int, units: int) -> dict:
    """The same RNN's gradient in W by PyTorch eager (unrolled) and by jax.jit(jax.grad) of
    lax.scan, as functions of no arguments (those installed), with the gradients they give."""
    W, U, xs = rnn_data(steps, units)
    found = {}
    jax = jax_or_none()
    if jax is not None:
        import jax.numpy as jnp

        def loss(W):
            def cell(h, x):
                return jnp.tanh(W @ h + U @ x), None
            h, _ = jax.lax.scan(cell, jnp.zeros(units), xs)
            return (h * h).sum()
        jitted = jax.jit(jax.grad(loss))
        Wj = jnp.asarray(W)
        jitted(Wj).block_until_ready()
        found["jax.jit(grad(lax.scan))"] = (lambda: jitted(Wj).block_until_ready(),
                                            np.asarray(jitted(Wj)))
    torch = torch_or_none()
    if torch is not None:
        Ut, xt = torch.tensor(U), torch.tensor(xs)

        def torch_grad():
            Wt = torch.tensor(W, requires_grad=True)
            h = torch.zeros(units, dtype=torch.float64)
            for t in range(steps):
                h = torch.tanh(Wt @ h + Ut @ xt[t])
            (h * h).sum().backward()
            return Wt.grad.numpy()
        found["torch eager unrolled"] = (torch_grad, torch_grad())
    return found


def rnn_by_hand(steps: int, units: int) -> dict:
    """The same RNN's gradient in W written by hand in numpy, as few numpy calls a step as its
    values allow (a matrix-vector product, an add and a tanh forward; a multiply and a
    product backward): the limit of a numpy backend. "in the loop's order" adds the 200
    outer products of W's cotangent one after another, newest first, as the replay does (its
    values are the numpy backend's, bit for bit); "one matrix product" adds them in BLAS's
    order instead (to rounding)."""
    _, U, xs = rnn_data(steps, units)

    def carries(W):
        """h_0..h_T, and the cotangent of each step's pre-activation."""
        ux = np.matmul(U, xs[:, :, None])[:, :, 0]
        hs = np.empty((steps + 1, units))
        hs[0] = 0.0
        dot = W.dot
        for t, (u, row) in enumerate(zip(ux, hs[1:])):
            np.add(dot(hs[t]), u, out=row)
            np.tanh(row, out=row)
        g = 2 * hs[-1]
        slopes = 1 - hs[1:] * hs[1:]
        gs = np.empty((steps, units))
        back = W.T.dot
        for t in range(steps - 1, -1, -1):
            g = back(np.multiply(g, slopes[t], out=gs[t]))
        return hs, gs

    def in_order(W):
        hs, gs = carries(W)
        chunk = 32          # outer products a chunk, summed along the stack's first axis
        stack = np.empty((chunk + 1, units, units))
        total = np.zeros((units, units))
        for hi in range(steps, 0, -chunk):
            lo = max(hi - chunk, 0)
            newest = slice(hi - 1, lo - 1 if lo else None, -1)
            stack[0] = total
            np.multiply(gs[newest, :, None], hs[newest, None, :], out=stack[1:hi - lo + 1])
            np.add.reduce(stack[:hi - lo + 1], axis=0, out=total)
        return total

    def one_product(W):
        hs, gs = carries(W)
        return gs.T @ hs[:-1]
    return {"numpy by hand, in the loop's order": in_order,
            "numpy by hand, one matrix product": one_product}


def numba_installed() -> bool:
    return importlib.util.find_spec("numba") is not None


LOOP_ENTRIES = ("scan", "while_loop", "loop_part", "loop_placed")


def body_entries(scanned, W) -> tuple[int, int]:
    """The entries of the scan's body (one step of the loop), and those the loop itself
    records with its gradient (its entries, the parts of its packed outputs, their adjoints:
    the loss around it left out)."""
    op = sg.Ops()
    v = op.var(W)
    op.grad(scanned(v), v)
    loops = [e for e in op.tape.entries if e is not None and e.prim.name in LOOP_ENTRIES]
    body = next(e for e in loops if e.prim.name == "scan").attrs["body"]
    return len(body.program.entries), len(loops)


def pendulum(steps: int):
    t = np.linspace(0.0, 5.0, steps + 1)
    y0 = np.array([1.0, 0.0])

    def rhs(y, t, p):
        return np.stack([p[0] * y[1], -p[1] * np.sin(y[0]) - p[2] * y[1]])

    def scanned(p):
        return (sg.odeint(rhs, y0, t, p, method="rk4")[-1] ** 2).sum()

    def unrolled(p):
        y = y0
        for t0, t1 in zip(t[:-1], t[1:]):
            h = t1 - t0
            k1 = rhs(y, t0, p)
            k2 = rhs(y + k1 * (h / 2), t0 + h / 2, p)
            k3 = rhs(y + k2 * (h / 2), t0 + h / 2, p)
            k4 = rhs(y + k3 * h, t1, p)
            y = y + (k1 + k2 * 2.0 + k3 * 2.0 + k4) * (h / 6)
        return (y ** 2).sum()
    return np.array([1.0, 2.0, 0.3]), scanned, unrolled


def entries(f, x, order: int) -> int:
    op = sg.Ops()
    v = op.var(x)
    g = f(v)
    for _ in range(order):
        g = op.grad(g.sum() if g.shape else g, v)
    return len(op.tape)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    repeat = 3 if args.quick else 7
    steps = 200 if args.quick else 1000
    W, scanned, unrolled = rnn(steps, 32)
    want = sg.grad(scanned)(W)
    assert np.allclose(want, sg.grad(unrolled)(W), rtol=1e-12, atol=1e-14)
    e_scan, e_unrolled = entries(scanned, W, 1), entries(unrolled, W, 1)
    e_body, e_loop = body_entries(scanned, W)
    jitted = sg.jit(sg.grad(scanned))
    assert np.allclose(jitted(W), want, rtol=1e-12, atol=1e-14)
    compiled = {"sg.jit": jitted}
    limits = rnn_by_hand(steps, 32)
    for name, fn in limits.items():
        assert np.allclose(fn(W), want, rtol=1e-12, atol=1e-14), name
    # the numpy backend adds the outer products in the loop's order, as the replay does
    assert limits["numpy by hand, in the loop's order"](W).tobytes() == jitted(W).tobytes()
    compiled.update(limits)
    if numba_installed():
        compiled["sg.jit numba"] = sg.jit(sg.grad(scanned), backend="numba")
        assert np.allclose(compiled["sg.jit numba"](W), want, rtol=1e-12, atol=1e-14)
    peers = rnn_peers(steps, 32)
    for name, (_, got) in peers.items():
        assert np.allclose(got, want, rtol=1e-10, atol=1e-12), name
    t = interleaved_medians({"scan": lambda: sg.grad(scanned)(W),
                             "unrolled": lambda: sg.grad(unrolled)(W),
                             **{name: run for name, (run, _) in peers.items()}}, repeat)
    # the compiled gradient against jax's in turns of their own, more of them (each call is
    # a millisecond or less: three medians of it beside 10 ms eager runs swing by 2x or more),
    # by the CPU time each takes (all run on one thread of one core): on a loaded machine the
    # wall-time ratio moved between 0.6 and 3.5 within minutes, the CPU-time ratio by 5%
    jax_name = "jax.jit(grad(lax.scan))"
    t.update(interleaved_medians({**{name: functools.partial(fn, W)
                                     for name, fn in compiled.items()},
                                  **({jax_name: peers[jax_name][0]} if jax_name in peers
                                     else {})}, 10 * repeat, clock=time.process_time))
    print(f"RNN gradient ({steps} steps): the loop's entries {e_loop}, body {e_body} (loop / "
          f"body {e_loop / e_body:.1f}; target <= 3); the whole tape {e_scan}, of which the "
          f"loss and its gradient {e_scan - e_loop} (in the unrolled tape too); unrolled "
          f"{e_unrolled} ({e_unrolled / e_body:.0f}x the body)")
    print(f"  eager time scan {t['scan'] * 1e3:.1f} ms, unrolled {t['unrolled'] * 1e3:.1f} ms "
          f"(scan / unrolled {t['scan'] / t['unrolled']:.2f}; target <= 1.0)")
    if "torch eager unrolled" in t:
        print(f"  torch eager unrolled {t['torch eager unrolled'] * 1e3:.1f} ms (scan / torch "
              f"{t['scan'] / t['torch eager unrolled']:.2f}; target <= 1.0)")
    for name in compiled:
        label = name if name in limits else \
            "sg.jit(sg.grad" + (", backend='numba')" if "numba" in name else ")")
        print(f"  {label} {t[name] * 1e3:.2f} ms CPU" + (
            f", {jax_name} {t[jax_name] * 1e3:.2f} ms (/ jax {t[name] / t[jax_name]:.2f}; "
            "target <= 2)" if jax_name in t else ""))
    p, scanned, unrolled = pendulum(100)
    assert np.allclose(sg.hessian(scanned)(p), sg.hessian(unrolled)(p), rtol=1e-10)
    e_scan, e_unrolled = entries(scanned, p, 2), entries(unrolled, p, 2)
    t = interleaved_medians({"scan": lambda: sg.hessian(scanned)(p),
                             "unrolled": lambda: sg.hessian(unrolled)(p)}, repeat)
    print(f"RK4 Hessian: entries scan {e_scan}, unrolled {e_unrolled} "
          f"({e_unrolled / e_scan:.0f}x); time scan {t['scan'] * 1e3:.1f} ms, unrolled "
          f"{t['unrolled'] * 1e3:.1f} ms (scan / unrolled {t['scan'] / t['unrolled']:.2f})")


if __name__ == "__main__":
    main()
