"""What a loop's reverse sweep keeps once it is done: nothing of the tape it pulled back (the
cotangents a loop entry computes for all its inputs at once are let go with the entry), and
with ``checkpoints=k`` a while loop's reverse sweep holds about k carries."""

import gc
import weakref

import numpy as np
import pytest

import simplegrad as sg


def _rnn(h, x):
    return np.tanh(h * 0.9 + x), h


@pytest.mark.parametrize("make", ["scan", "while_loop", "cond"])
@pytest.mark.parametrize("values", [True, False])
def test_no_ops_outlives_its_loops_gradient(make, values):
    gc.disable()
    try:
        op = sg.Ops()
        h0 = op.var(np.linspace(0.1, 0.4, 4), name="h0")
        if make == "scan":
            h, ys = sg.scan(_rnn, h0, np.ones((5, 4)))
            L = (h * ys).sum()
        elif make == "while_loop":
            L = sg.while_loop(lambda c: c[1] < 5, lambda c: (c[0] * 1.1, c[1] + 1),
                              (h0, 0))[0].sum()
        else:
            L = sg.cond(True, lambda a: a * a, lambda a: a, h0).sum()
        g = op.grad(L, h0, create_graph=not values)
        expected = np.asarray(g.value if hasattr(g, "value") else g).copy()
        assert np.all(np.isfinite(expected))
        ref = weakref.ref(op)
        del op, h0, L, g
        if make == "scan":
            del h, ys
        assert ref() is None, "the loop's cotangents kept the Ops alive"
    finally:
        gc.enable()


def test_a_scan_keeps_its_carries_only_where_a_gradient_may_follow():
    from simplegrad.primitives.loops import _HISTORY
    before = len(_HISTORY)
    sg.scan(_rnn, np.ones(4), np.ones((50, 4)))                     # on arrays
    op = sg.Ops()
    h0 = op.leaf(np.ones(4), None, False)                           # nothing requires grad
    sg.scan(_rnn, h0, np.ones((50, 4)))
    assert len(_HISTORY) == before
    op = sg.Ops()
    h0 = op.var(np.ones(4))
    h, _ = sg.scan(_rnn, h0, np.ones((50, 4)))
    assert len(_HISTORY) == before + 1
    expect = sg.grad(lambda h0: sg.scan(_rnn, h0, np.ones((50, 4)))[0].sum())(np.ones(4))
    c, chain = np.ones(4), np.ones(4)     # d h_T / d h_0 = prod 0.9 (1 - h_{t+1}^2)
    for _ in range(50):
        c = np.tanh(c * 0.9 + 1)
        chain = chain * 0.9 * (1 - c * c)
    assert np.allclose(expect, chain, rtol=1e-12)
    assert np.allclose(op.grad(h.sum(), h0).value, chain, rtol=1e-12)
    del op, h0, h
    gc.collect()
    assert len(_HISTORY) == before
