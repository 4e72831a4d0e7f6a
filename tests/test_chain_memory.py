"""Peak memory of a deep chain's gradient (``h = tanh(h @ W)`` repeated), in every habit that
asks for no graph, against an analytic count of arrays (tracemalloc counts numpy's buffers
exactly, so the bounds are in bytes, not timings).

What must be held: each step's forward keeps ``h @ W`` and its tanh (two arrays a step; PyTorch
saves ``h`` for mm and tanh's output, the same tensor counted twice less the input: 2 steps - 1
arrays "per save"); a value-only backward works with at most five arrays beside them (the
incoming cotangent, dh, W's running total, its new contribution and their sum). The cycle
collector is paused, so only reference counting frees.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from test_training_memory import collector_paused

import simplegrad as sg

STEPS, N = 32, 128
ONE = N * N * 8     # bytes of one array


def chain(h: Any, W: Any) -> Any:
    for _ in range(STEPS):
        h = (h @ W).tanh()
    return h.sum()


def by_hand(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """dL/dW of the chain, written out in numpy."""
    hs = [X]
    for _ in range(STEPS):
        hs.append(np.tanh(hs[-1] @ W))
    g, dW = np.ones_like(X), np.zeros_like(W)
    for k in range(STEPS, 0, -1):
        gz = g * (1 - hs[k] ** 2)
        dW += hs[k - 1].T @ gz
        g = gz @ W.T
    return dW


def peak(fn: Callable[[], Any]) -> tuple[int, Any]:
    """tracemalloc's peak above the memory before ``fn`` ran."""
    with collector_paused():
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            out = fn()
            return tracemalloc.get_traced_memory()[1] - base, out
        finally:
            tracemalloc.stop()


@pytest.fixture
def data(rng):
    return rng.normal(size=(N, N)), rng.normal(size=(N, N)) / np.sqrt(N)


def habits(X: np.ndarray, W0: np.ndarray) -> dict[str, tuple[Callable[[], Any], int]]:
    """Each habit's step and the arrays it copies besides the chain's (op.var copies x and W;
    a numpy constant used with a Parameter is copied, so mutating it cannot change a gradient)."""
    def by_grad():
        return sg.grad(chain, argnums=1)(X, W0)

    def by_ops():
        op = sg.Ops()
        W = op.var(W0)
        return op.grad(chain(op.var(X, requires_grad=False), W), W, create_graph=False).value

    P = sg.Parameter(W0)

    def by_parameter():
        P.grad = None
        chain(X, P).backward()
        return P.grad.value
    return {"sg.grad": (by_grad, 0), "op.grad": (by_ops, 2), "backward": (by_parameter, 1)}


@pytest.mark.slow
@pytest.mark.parametrize("habit", ["sg.grad", "op.grad", "backward"])
def test_chain_peak_is_two_arrays_a_step_and_five_working(habit, data):
    X, W0 = data
    step, copies = habits(X, W0)[habit]
    step()      # first-call caches are not the step's memory
    got, g = peak(step)
    np.testing.assert_allclose(g, by_hand(X, W0), rtol=1e-10, atol=1e-12)
    bound = (2 * STEPS + copies + 5) * ONE + 64_000     # + the entries' own objects
    assert got <= bound, f"{habit}: peak {got / ONE:.2f} arrays, bound {bound / ONE:.2f}"
    # against what PyTorch's autograd saves, counted per save (2 STEPS - 1 arrays)
    assert got <= 1.15 * (2 * STEPS - 1) * ONE, f"{habit}: {got / ((2 * STEPS - 1) * ONE):.3f}x"


@pytest.mark.parametrize("how", ["grad", "backward"])
def test_value_only_sweep_holds_five_arrays(how, data):
    """After the forward, the value-only backward needs at most five arrays more: the sweep
    lets go of each cotangent and replaced running total when it moves to the next entry."""
    X, W0 = data
    with collector_paused():
        op = sg.Ops()
        W = op.var(W0)
        L = chain(op.var(X, requires_grad=False), W)
        if how == "grad":
            got, g = peak(lambda: op.grad(L, W, create_graph=False).value)
        else:
            got, g = peak(lambda: (L.backward(), W.grad.value)[1])
    np.testing.assert_allclose(g, by_hand(X, W0), rtol=1e-10, atol=1e-12)
    assert got <= 5 * ONE + 16_000, f"{how}: the backward held {got / ONE:.2f} arrays"


@pytest.mark.slow
@pytest.mark.parametrize("habit", ["sg.grad", "op.grad", "backward"])
def test_a_loop_of_steps_peaks_as_one_step(habit, data):
    """In a loop the previous step's loss is still bound while the next forward runs: a
    value-only backward() on Parameters frees the step's history at once (as PyTorch frees what
    it saved), and so does the end of ``with sg.Ops() as op:``, so three steps peak as one
    does, not as two graphs."""
    X, W0 = data
    step, copies = habits(X, W0)[habit]
    step()

    def loop():
        out = None
        for _ in range(3):
            out = step()        # (by_parameter's loss is a local: rebound each call)
        return out
    P = sg.Parameter(W0)

    def parameter_loop():
        loss = None
        for _ in range(3):
            P.grad = None
            loss = chain(X, P)          # the previous loss stays bound during this forward
            loss.backward()
        return P.grad.value
    def ops_loop():
        g = None
        for _ in range(3):
            with sg.Ops() as op:
                W = op.var(W0)
                L = chain(op.var(X, requires_grad=False), W)   # the last L stays bound
                g = op.grad(L, W, create_graph=False).value
        return g
    got, g = peak({"backward": parameter_loop, "op.grad": ops_loop}.get(habit, loop))
    np.testing.assert_allclose(g, by_hand(X, W0), rtol=1e-10, atol=1e-12)
    bound = (2 * STEPS + copies + 5 + 1) * ONE + 64_000     # + the last step's gradient
    assert got <= bound, f"{habit}: three steps peaked at {got / ONE:.2f} arrays"


def test_backward_on_parameters_ends_the_step():
    W = sg.Parameter(np.array([[0.5, -1.0], [2.0, 0.25]]))
    x = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]])
    h = (x @ W).tanh()
    l1, l2 = h.sum(), (h * h).sum()
    (l1 + l2).backward()                       # several losses of one step: their sum
    t = np.tanh(x @ W.value)
    np.testing.assert_allclose(W.grad.value, x.T @ ((1 + 2 * t) * (1 - t * t)), rtol=1e-12)
    np.testing.assert_allclose(l1.value, t.sum(), rtol=1e-12)     # values stay readable
    assert l1.is_leaf and h.is_leaf
    with pytest.raises(sg.GraphError, match=r"backward\(\) that ended a step.*retain_graph"):
        l2.backward()
    W.grad = None
    h = (x @ W).tanh()
    l1, l2 = h.sum(), (h * h).sum()
    l1.backward(retain_graph=True)             # PyTorch's way to backward twice
    l2.backward()
    np.testing.assert_allclose(W.grad.value, x.T @ ((1 + 2 * t) * (1 - t * t)), rtol=1e-12)
    assert l1.is_leaf
    W.grad = None
    loss = ((x @ W).tanh() ** 2).sum()
    (g,) = [loss.ops.grad(loss, W, create_graph=True)]
    g.sum().backward(create_graph=True)        # recording passes keep the history
    assert not loss.is_leaf
