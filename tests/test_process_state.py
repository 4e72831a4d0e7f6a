"""The library never touches process-wide state: the cycle collector's switch, numpy's global
error state and print options, the global random generators and the recursion limit.

Each workload runs with those switches replaced by functions that fail the test, and its
result is checked against a closed form so the run is known to have done its work.
"""

from __future__ import annotations

import gc
import random
import sys

import numpy as np
import pytest

import simplegrad as sg
import simplegrad.optim


@pytest.fixture
def guarded(monkeypatch):
    """Fail on any call that changes process-wide state."""
    def forbidden(name):
        def call(*args, **kwargs):
            raise AssertionError(f"simplegrad called {name}, which changes process-wide state")
        return call
    for module, names in ((gc, ("disable", "enable", "freeze", "set_threshold")),
                          (np, ("seterr", "set_printoptions")),
                          (np.random, ("seed",)),
                          (random, ("seed",)),
                          (sys, ("setrecursionlimit",))):
        for name in names:
            monkeypatch.setattr(module, name, forbidden(f"{module.__name__}.{name}"))
    before = (gc.isenabled(), np.geterr(), gc.get_threshold())
    yield
    assert (gc.isenabled(), np.geterr(), gc.get_threshold()) == before


def f(x):
    """sum(tanh(x) * x)."""
    return (x.tanh() * x).sum()


def test_sweeps_and_transforms(guarded):
    x0 = np.array([0.3, -0.7, 1.1])
    t = np.tanh(x0)
    dt = 1 - t * t
    want_grad = dt * x0 + t
    want_hess = np.diag(-2 * t * dt * x0 + 2 * dt)      # d/dx of (1 - t^2) x + t, hand-derived
    op = sg.Ops()
    x = op.var(x0)
    g = op.grad(f(x), x)
    np.testing.assert_allclose(g.value, want_grad, rtol=1e-13)
    np.testing.assert_allclose(op.grad(g.sum(), x).value, np.diag(want_hess), rtol=1e-13)
    np.testing.assert_allclose(op.jvp(f(x), x, np.ones(3), create_graph=False).value,
                               want_grad.sum(), rtol=1e-13)
    x2 = op.var(x0)
    f(x2).backward()
    np.testing.assert_allclose(x2.grad.value, want_grad, rtol=1e-13)
    np.testing.assert_allclose(sg.grad(f)(x0), want_grad, rtol=1e-13)
    np.testing.assert_allclose(sg.hessian(f)(x0), want_hess, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(sg.hvp(f)(x0, np.ones(3)), want_hess.sum(1), rtol=1e-12)
    per_row = sg.vmap(sg.grad(f))(np.stack([x0, 2 * x0]))
    np.testing.assert_allclose(per_row[0], want_grad, rtol=1e-13)
    series = sg.taylor(lambda x: x.tanh(), 0.4, 1.0, 3)
    th = np.tanh(0.4)
    np.testing.assert_allclose([float(np.asarray(s)) for s in series],
                               [th, 1 - th**2, -2 * th * (1 - th**2),
                                (1 - th**2) * (6 * th**2 - 2)], rtol=1e-12)


def test_compiled_programs_and_training(guarded):
    op = sg.Ops()
    x = op.var(np.array([0.5, 1.5]))
    y = f(x)
    run = sg.compile(op.program(x, [y, op.grad(y, x)]))
    x1 = np.array([-0.2, 0.9])
    value, grad = run(x1)
    t = np.tanh(x1)
    np.testing.assert_allclose(value, np.sum(t * x1), rtol=1e-13)
    np.testing.assert_allclose(grad, (1 - t * t) * x1 + t, rtol=1e-13)
    w = sg.Parameter(np.array([1.0, -2.0]))
    opt = simplegrad.optim.SGD([w], lr=0.25)
    for _ in range(3):
        opt.zero_grad()
        ((w - 3.0) ** 2).sum().backward()
        opt.step()
    # each step moves w by -0.25 * 2 (w - 3): the distance to 3 halves
    np.testing.assert_allclose(w.value, 3.0 + np.array([-2.0, -5.0]) / 8, rtol=1e-14)


def test_threads_each_on_their_own_ops():
    # with no process-wide switch in the sweeps, threads that each own an Ops differentiate
    # side by side: each result matches its closed form
    from concurrent.futures import ThreadPoolExecutor

    def work(seed: int) -> float:
        rng = np.random.default_rng(seed)
        worst = 0.0
        for _ in range(30):
            x0 = rng.normal(size=5)
            op = sg.Ops()
            x = op.var(x0)
            g = op.grad(f(x), x)
            h = op.grad(g.sum(), x)
            t = np.tanh(x0)
            dt = 1 - t * t
            worst = max(worst, np.abs(g.value - (dt * x0 + t)).max(),
                        np.abs(h.value - (-2 * t * dt * x0 + 2 * dt)).max())
        return worst

    with ThreadPoolExecutor(max_workers=4) as pool:
        errors = list(pool.map(work, range(8)))
    assert max(errors) < 1e-13


def test_threads_training_free_parameters_record_on_their_own_implicit_ops():
    # the implicit Ops of free Parameters is per thread: side-by-side training steps on
    # separate parameters neither share a tape nor mix gradients
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from simplegrad.engine.params import FREE

    together = threading.Barrier(4)
    first_ops: list = [None] * 4

    def work(k: int) -> int:
        w = sg.Parameter(np.full(3, float(k + 1)))
        loss = ((w * w) * 0.5).sum()
        first_ops[k] = loss.ops
        together.wait()                 # all four steps alive at once
        assert len({id(o) for o in first_ops}) == 4 and loss.ops is FREE.implicit()
        for step in range(20):
            if step:
                loss = ((w * w) * 0.5).sum()
            loss.backward()
            np.testing.assert_array_equal(w.grad.value, w.value)    # d(w^2 / 2)/dw = w
            w.grad = None
        return k

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(work, range(4))) == [0, 1, 2, 3]
