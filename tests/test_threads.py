"""Threads sharing one Ops: ``no_grad`` is per thread (as PyTorch's), and a failing sweep's undo
removes only the entries that sweep recorded."""

import sys
import threading

import numpy as np
import pytest

import simplegrad as sg


@pytest.fixture
def switching():
    """Switch threads as often as the interpreter allows, restored afterwards."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def run(*targets):
    """Run each target on a thread of its own; re-raise the first error any of them raised."""
    errors = []

    def guarded(f):
        try:
            f()
        except BaseException as e:      # (reported on the main thread)
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(f,)) for f in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    if errors:
        raise errors[0]


def test_no_grad_is_per_thread(switching):
    op = sg.Ops()
    x = op.var(np.array([0.5, 1.0, 2.0]))
    inside, done = threading.Event(), threading.Event()
    seen = {}

    def paused():
        with op.no_grad():
            seen["paused"] = op.recording
            inside.set()
            assert done.wait(10)
            y = (x * x).sum()
            seen["no history"] = y.node.prim is None
        seen["after"] = op.recording

    def recording():
        assert inside.wait(10)
        try:
            seen["other"] = op.recording
            for _ in range(20):     # (many switches while the other thread holds no_grad)
                L = (x.sin() * x).sum()
                g = op.grad(L, x)
                np.testing.assert_allclose(g.value, np.sin(x.value) + x.value * np.cos(x.value))
                h = op.grad(g.sum(), x)     # recorded: the gradient has a history
                np.testing.assert_allclose(h.value,
                                           2 * np.cos(x.value) - x.value * np.sin(x.value))
        finally:
            done.set()

    run(paused, recording)
    assert seen == {"paused": False, "no history": True, "after": True, "other": True}
    assert op.recording


def test_no_grad_nests_per_thread():
    op = sg.Ops()
    with op.no_grad():
        with op.no_grad():
            assert not op.recording
        assert not op.recording
        assert "not recording" in repr(op)
    assert op.recording
    x = op.var(2.0)
    np.testing.assert_allclose(op.grad(x * x * x, x).value, 12.0)


def blocking_rule(started, recorded):
    """A custom_vjp identity whose rule records an entry, waits while another thread records,
    records another, then fails."""
    @sg.custom_vjp
    def ident(x):
        return x * 1.0

    def bwd(g, out, x):
        g.cos()                     # (an entry of the failing sweep before the other's)
        started.set()
        assert recorded.wait(10)
        (g * 2.0).sin()             # (and one after)
        raise RuntimeError("the rule fails")

    ident.defvjp(bwd)
    return ident


def test_failing_sweep_keeps_another_threads_entries(switching):
    op = sg.Ops()
    x = op.var(np.array([0.3, 0.7]))
    started, recorded = threading.Event(), threading.Event()
    ident = blocking_rule(started, recorded)
    L = (ident(x) * x).sum()
    before = len(op.tape)
    other = {}

    def sweep():
        with pytest.raises(RuntimeError, match="the rule fails"):
            op.grad(L, x)

    def record():
        assert started.wait(10)
        try:
            a = op.var(np.array([1.0, 2.0]))    # a leaf made while the sweep runs
            y = (x * 3.0).sin() + a
            other.update(a=a, y=y, z=(y * y).sum())
        finally:
            recorded.set()

    run(sweep, record)
    a, y, z = other["a"], other["y"], other["z"]
    # the other thread's entries are on the tape, each at its own position, right after the
    # forward (the failed sweep's entries are gone)
    tape = op.tape
    assert len(tape) == before + 5      # (x*3, sin, +a, y*y, sum)
    for v in (y, z):
        assert tape.at(v.position) is v.node
    assert [e.prim.name for e in tape.entries[before:]] == ["mul", "sin", "add", "mul", "sum"]
    assert "cos" not in op.format_trace()
    # and they differentiate: dz/dx = 2 y * 3 cos(3x), dz/da = 2 y
    gx, ga = op.grad(z, [x, a])
    yv = np.sin(3 * x.value) + a.value
    np.testing.assert_allclose(gx.value, 6 * yv * np.cos(3 * x.value))
    np.testing.assert_allclose(ga.value, 2 * yv)


def test_failing_forward_sweep_keeps_another_threads_entries(switching):
    op = sg.Ops()
    x = op.var(np.array([0.3, 0.7]))
    started, recorded = threading.Event(), threading.Event()

    @sg.custom_jvp
    def ident(x):
        return x * 1.0

    @ident.defjvp
    def ident_jvp(primals, tangents):
        (t,) = tangents
        t.cos()
        started.set()
        assert recorded.wait(10)
        raise RuntimeError("the rule fails")

    y0 = (ident(x) * x).sum()
    before = len(op.tape)
    other = {}

    def sweep():
        with pytest.raises(RuntimeError, match="the rule fails"):
            op.jvp(y0, x, np.ones(2))

    def record():
        assert started.wait(10)
        try:
            other["z"] = (x * x * x).sum()
        finally:
            recorded.set()

    run(sweep, record)
    z = other["z"]
    assert [e.prim.name for e in op.tape.entries[before:]] == ["mul", "mul", "sum"]
    assert op.tape.at(z.position) is z.node
    np.testing.assert_allclose(op.grad(z, x).value, 3 * x.value ** 2)
