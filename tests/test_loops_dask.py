"""Loops replayed on dask arrays: a program holding a ``scan`` (and its gradient: the history
scan, the reverse scan of the body's vjp, the packed outputs' parts and their adjoints),
replayed on chunked ``xs``, builds dask outputs without computing anything (a scheduler that
refuses every task is set) and computes what the numpy replay does; a ``while_loop`` whose
condition is lazy raises ``MaterializeError`` (its condition decides the trips), and with
``materialize=True`` answers as numpy does."""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")


class ComputedError(Exception):
    """A dask task ran while a program was only being built."""


def _refuse(*args, **kwargs):
    raise ComputedError("a dask task was computed before .compute()")


def rnn_program(rng):
    """A tanh RNN over 6 steps of 4 features, its loss and gradients in (h0, xs, W)."""
    op = sg.Ops()
    h0 = op.var(np.zeros(4), name="h0")
    xs = op.var(rng.normal(size=(6, 4)), name="xs")
    W = op.var(rng.normal(size=(4, 4)) / 2, name="W")

    def cell(h, x):
        h = np.tanh(h @ W + x)
        return h, h * h

    h, ys = sg.scan(cell, h0, xs)
    L = ys.sum() + (h * h).sum()
    grads = op.grad(L, [h0, xs, W])
    return op.program([h0, xs, W], [L, h, ys, *grads])


def test_a_scan_and_its_gradient_replay_lazily_on_chunked_xs():
    rng = np.random.default_rng(0)
    prog = rnn_program(rng)
    h0, X, W = np.zeros(4), rng.normal(size=(6, 4)), rng.normal(size=(4, 4)) / 2
    want = prog(h0, X, W)
    lazy = (da.from_array(h0, chunks=4), da.from_array(X, chunks=(2, 4)),
            da.from_array(W, chunks=4))
    with dask.config.set(scheduler=_refuse):
        got = prog(*lazy)
        assert all(isinstance(g, da.Array) for g in got)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.compute(), w, rtol=1e-12, atol=1e-14)


def test_a_scan_over_dask_xs_alone_stays_lazy_with_numpy_weights():
    rng = np.random.default_rng(1)
    prog = rnn_program(rng)
    X = rng.normal(size=(6, 4))
    W = rng.normal(size=(4, 4)) / 2
    want = prog(np.zeros(4), X, W)
    with dask.config.set(scheduler=_refuse):
        got = prog(np.zeros(4), da.from_array(X, chunks=(3, 4)), W)
    assert isinstance(got[0], da.Array)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12, atol=1e-14)


def newton_program():
    op = sg.Ops()
    a = op.var(np.array([2.0, 3.0]), name="a")

    def improve(x):
        return 0.5 * (x + a / x)

    def unsettled(x):
        return np.abs(x * x - a).max() > 1e-13
    r = sg.while_loop(unsettled, improve, a + 1.0)
    return op.program([a], [r, op.grad(r.sum(), a)])


def test_a_while_loop_on_a_lazy_condition_raises_materialize_error():
    prog = newton_program()
    lazy = da.from_array(np.array([2.0, 5.0]), chunks=1)
    refused = r"computing v\d+: while_loop: .*condition decides the number of trips"
    with dask.config.set(scheduler=_refuse), pytest.raises(sg.MaterializeError, match=refused):
        prog(lazy)
    root, d = prog(lazy, materialize=True)
    np.testing.assert_allclose(np.asarray(root), np.sqrt([2.0, 5.0]), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(d), 0.5 / np.sqrt([2.0, 5.0]), rtol=1e-12)
