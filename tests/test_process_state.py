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


# ---------------------------------------------------------------- vmap in threads


def _tanh_x(x):
    """sum(tanh(x) * x) of one example; its gradient is (1 - tanh^2) x + tanh."""
    return (x.tanh() * x).sum()


def _closed_grad(x0: np.ndarray) -> np.ndarray:
    t = np.tanh(x0)
    return (1 - t * t) * x0 + t


def _closed_hessian_diag(x0: np.ndarray) -> np.ndarray:
    t = np.tanh(x0)
    dt = 1 - t * t
    return -2 * t * dt * x0 + 2 * dt        # d/dx of (1 - t^2) x + t, hand-derived


def test_vmap_of_grad_in_two_threads_at_once():
    # levels and finality live on each thread's own transform stack: two threads switching
    # every microsecond in the middle of vmap(grad), vmap(vmap(grad)) and vmap(hessian) each
    # get their closed forms
    import threading

    together = threading.Barrier(2)
    worst = [None, None]

    def work(k: int) -> None:
        rng = np.random.default_rng(k)
        together.wait()
        err = 0.0
        for _ in range(25):
            xs = rng.normal(size=(4, 3))
            err = max(err, np.abs(sg.vmap(sg.grad(_tanh_x))(xs) - _closed_grad(xs)).max())
            xss = rng.normal(size=(2, 3, 2))
            got = sg.vmap(sg.vmap(sg.grad(_tanh_x)))(xss)
            err = max(err, np.abs(got - _closed_grad(xss)).max())
            h = sg.vmap(sg.hessian(_tanh_x))(xs)
            want = np.stack([np.diag(_closed_hessian_diag(x)) for x in xs])
            err = max(err, np.abs(h - want).max())
        worst[k] = err

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert worst[0] is not None and worst[1] is not None, "a thread failed"
    assert max(worst) < 1e-12


def test_the_levels_of_vmaps_in_two_threads_are_independent():
    # each thread counts its own levels: the same calls in two fresh threads, started together
    # after this thread has run vmaps of its own, see the same levels
    import threading

    from simplegrad.engine.batching import Batched

    sg.vmap(sg.vmap(_tanh_x))(np.ones((2, 2, 3)))       # levels used up in this thread
    together = threading.Barrier(2)
    seen: list[list] = [[], []]

    def work(k: int) -> None:
        def record(x):
            seen[k].append(x.level if type(x) is Batched else None)
            return _tanh_x(x)
        together.wait()
        for _ in range(3):
            sg.vmap(record)(np.ones((2, 3)))
            sg.vmap(sg.vmap(record))(np.ones((2, 2, 3)))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen[0] == seen[1] == [1, 3, 4, 6, 7, 9], seen


def _snapshot(modules: list) -> dict:
    """Every module-level set, dict, list and counter of ``modules``: what it holds now."""
    import collections.abc as abc
    import itertools

    out = {}
    for mod in modules:
        for name, v in vars(mod).items():
            if name.startswith("__"):
                continue
            key = f"{mod.__name__}.{name}"
            if isinstance(v, abc.MutableMapping):
                out[key] = [(k, id(x)) for k, x in v.items()]
            elif isinstance(v, (abc.MutableSet, abc.MutableSequence)):
                out[key] = sorted(map(id, v)) if isinstance(v, abc.MutableSet) else \
                    [id(x) for x in v]
            elif isinstance(v, itertools.count):
                out[key] = repr(v)
    return out


def test_no_module_level_state_of_engine_or_transforms_changes_at_run_time():
    # looked at before, inside the innermost functions of running transforms, and after: every
    # module-level container and counter of engine/ and transforms/ holds what it held (a
    # first run fills the memos of first use, such as ops.py's simplifying classes)
    import importlib
    import pkgutil

    import simplegrad.engine
    import simplegrad.transforms

    modules = [importlib.import_module(m.name) for pkg in (simplegrad.engine, simplegrad.transforms)
               for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]

    def workload() -> None:
        xs = np.array([[0.3, -0.7, 1.1], [0.5, 0.2, -1.3]])
        np.testing.assert_allclose(sg.vmap(sg.grad(probe))(xs), _closed_grad(xs), rtol=1e-13)
        np.testing.assert_allclose(sg.vmap(sg.vmap(sg.grad(probe)))(xs[:, None]),
                                   _closed_grad(xs[:, None]), rtol=1e-13)
        np.testing.assert_allclose(sg.vmap(sg.hessian(probe))(xs)[:, [0, 1, 2], [0, 1, 2]],
                                   _closed_hessian_diag(xs), rtol=1e-13)
        np.testing.assert_allclose(sg.jacobian(sg.grad(probe), mode="fwd")(xs[0]),
                                   np.diag(_closed_hessian_diag(xs[0])), rtol=1e-13,
                                   atol=1e-15)
        np.testing.assert_allclose(sg.jit(sg.grad(probe))(xs[0]), _closed_grad(xs[0]),
                                   rtol=1e-13)
        op = sg.Ops()
        x = op.var(xs)
        np.testing.assert_allclose(sg.vmap(sg.grad(probe))(x).value, _closed_grad(xs),
                                   rtol=1e-13)
        with op.no_grad():
            np.testing.assert_allclose(sg.vmap(sg.grad(probe))(x).value, _closed_grad(xs),
                                       rtol=1e-13)

    inside: list[dict] = []

    def probe(x):
        inside.append(_snapshot(modules))
        return _tanh_x(x)

    workload()
    inside.clear()
    before = _snapshot(modules)
    workload()
    after = _snapshot(modules)
    assert inside
    for seen in [*inside, after]:
        changed = sorted(k for k in before.keys() | seen.keys()
                         if before.get(k) != seen.get(k))
        assert not changed, f"module-level state changed at run time: {changed}"
