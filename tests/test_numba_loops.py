"""sg.compile(prog, backend="numba") of a scan and its gradient: each loop one kernel.

Skipped without numba (the optional [numba] extra). Oracles: closed forms (a linear
recurrence and its gradient), the numpy backend and the tape (themselves tested against
unrolled loops and closed forms in test_loops_scan.py), normwise to 1e-12 of the largest
value: the kernel's matrix-vector products add in another order than BLAS's gemv and its tanh
is the fused kernels' (within 3 ulp of numpy's). Loops a kernel cannot write run as before.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import simplegrad as sg

numba = pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path, monkeypatch):
    """Compiled kernels go to a temporary directory, never the user's cache."""
    monkeypatch.setenv("SIMPLEGRAD_CACHE_DIR", str(tmp_path / "cache"))


def close(a, b, tol=1e-12):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    assert np.abs(a - b).max(initial=0.0) <= tol * max(np.abs(b).max(initial=0.0), 1e-300)


def kernels(fn) -> int:
    """How many loops of a compiled program run as one kernel call."""
    return sum(line.strip().split("= ")[-1].startswith("loop_kernel")
               for line in fn.source.splitlines() if not line.strip().startswith("#"))


def rnn(units, width, steps, reverse=False, ys=False):
    rng = np.random.default_rng(units + steps)
    U, xs = rng.normal(size=(units, width)), rng.normal(size=(steps, width))
    h0 = rng.normal(size=units) * 0.1

    def loss(W):
        def cell(h, x):
            h = np.tanh(W @ h + U @ x)
            return h, ((h * h).sum() if ys else None)
        h, out = sg.scan(cell, h0, xs, reverse=reverse)
        return (h * h).sum() + ((out * out).sum() if ys else 0.0)
    return rng.normal(size=(units, units)) / np.sqrt(units), loss


@pytest.mark.parametrize("units,width,steps,reverse", [
    (32, 8, 200, False), (5, 3, 7, True), (17, 33, 70, False), (2, 2, 1, True)])
def test_the_gradient_of_an_rnn_scan_runs_each_loop_as_one_kernel(units, width, steps,
                                                                  reverse):
    W, loss = rnn(units, width, steps, reverse)
    op = sg.Ops()
    w = op.var(W)
    prog = op.program([w], [op.grad(loss(w), w)])
    fast, plain = sg.compile(prog, backend="numba"), sg.compile(prog)
    assert kernels(fast) == 3      # the forward, the pullback on its kept values, the else
    assert "for " not in "\n".join(line for line in fast.source.splitlines()
                                   if not line.strip().startswith("#"))
    for x in (W, W * 0.5, np.asfortranarray(W), W.T):
        close(fast(x), plain(x))
        close(fast(x), prog(x))
    close(sg.jit(sg.grad(loss), backend="numba")(W), sg.grad(loss)(W))


def test_a_linear_recurrence_against_its_closed_form():
    # h <- a * h + x_t elementwise: h_T = a^T h0 + sum_t a^(T-1-t) x_t, and
    # d sum(h_T) / d a = T a^(T-1) h0 + sum_t (T-1-t) a^(T-2-t) x_t
    rng = np.random.default_rng(5)
    T, n = 40, 6
    xs, h0 = rng.normal(size=(T, n)), rng.normal(size=n)

    def total(a):
        h, _ = sg.scan(lambda h, x: (a * h + x, None), h0, xs)
        return h.sum()
    f, g = sg.jit(total, backend="numba"), sg.jit(sg.grad(total), backend="numba")
    a = rng.uniform(0.5, 1.0, size=n)
    want = a ** T * h0 + sum(a ** (T - 1 - t) * xs[t] for t in range(T))
    dwant = T * a ** (T - 1) * h0 + sum((T - 1 - t) * a ** max(T - 2 - t, 0) * xs[t]
                                        for t in range(T - 1))
    close(f(a), want.sum(), 1e-13)
    close(g(a), dwant, 1e-13)
    assert kernels(g.programs(a)[0]) >= 2


def test_ys_swapped_carries_a_broadcast_and_a_vector_times_a_matrix():
    # two carries exchanged each step (the kernel stages them), a ys output, x @ A, a
    # (n, 1) * (n,) broadcast inside the trip
    rng = np.random.default_rng(7)
    A, xs = rng.normal(size=(4, 4)) * 0.4, rng.normal(size=(9, 4))

    def f(p):
        def step(c, x):
            a, b = c
            return (b, np.tanh(a @ A + x * p) + b * 0.1), ((a * b).sum(), a.reshape(4, 1) * b)
        (a, b), (s, outer) = sg.scan(step, (xs[0], xs[1]), xs)
        return (a * b).sum() + (s * s).sum() + (outer ** 2).sum()
    p = rng.normal(size=4)
    for fn in (f, sg.grad(f)):
        fast = sg.jit(fn, backend="numba")
        close(fast(p), sg.jit(fn)(p))
        close(fast(p), fn(p))
        assert kernels(fast.programs(p)[0]) >= 1


def test_a_loop_a_kernel_cannot_write_runs_as_before():
    # an integer carry and a sum along an axis: the loop stays numpy, the values the same
    xs = np.arange(12.0).reshape(6, 2)

    def f(s):
        def step(c, x):
            i, h = c
            return (i + 1, h * s + x.sum() * i), h
        (_, h), ys = sg.scan(step, (0, s), xs)
        return h + ys.sum()
    fn = sg.jit(f, backend="numba")
    close(fn(0.7), f(0.7))
    assert kernels(fn.programs(0.7)[0]) == 0
    # a loop inside the body: the outer loop stays a Python loop (the inner one compiled
    # with its body); the gradient as the numpy backend's
    W = np.array([[0.5, -0.2], [0.1, 0.4]])

    def nested(W):
        def step(h, x):
            return sg.fori_loop(0, 3, lambda i, c: np.tanh(W @ c + x), h), None
        return (sg.scan(step, np.ones(2), xs)[0] ** 2).sum()
    for fn in (nested, sg.grad(nested)):
        close(sg.jit(fn, backend="numba")(W), sg.jit(fn)(W))


def test_no_steps_and_a_forward_scan_of_stacked_ys():
    W, loss = rnn(3, 2, 5, ys=True)
    op = sg.Ops()
    w = op.var(W)
    prog = op.program([w], [loss(w), op.grad(loss(w), w)])
    fast = sg.compile(prog, backend="numba")
    for a, b in zip(fast(W), prog(W)):
        close(a, b)
    empty = np.zeros((0, 2))
    h, ys = sg.jit(lambda h0: sg.scan(lambda h, x: (np.tanh(h + 1.0), h * 2.0), h0, empty),
                   backend="numba")(np.ones(3))
    assert h.shape == (3,) and ys.shape == (0, 3)
    np.testing.assert_array_equal(h, np.ones(3))


@pytest.mark.slow
def test_a_kernel_is_loaded_from_the_cache_in_another_process(tmp_path):
    code = ("import numpy as np, simplegrad as sg\n"
            "from simplegrad.program import numba_loops\n"
            "xs = np.linspace(0, 1, 30).reshape(10, 3)\n"
            "f = lambda W: sg.scan(lambda h, x: (np.tanh(W @ h + x), None), np.ones(3), xs)[0]"
            ".sum()\n"
            "g = sg.jit(sg.grad(f), backend='numba')\n"
            "print(repr(g(np.eye(3) * 0.5).tolist()))\n"
            "print(sorted(v[2] for v in numba_loops._BUILT.values()))\n")
    env = {**os.environ, "SIMPLEGRAD_CACHE_DIR": str(tmp_path / "c"),
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, timeout=300) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr + runs[1].stderr
    (value, first), (again, second) = (r.stdout.splitlines() for r in runs)
    assert value == again
    assert first == "[False, False, False]" and second == "[True, True, True]"
