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
