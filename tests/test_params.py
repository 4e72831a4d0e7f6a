"""Parameters that live across steps, freed-by-refcount implicit tapes, and one-element
conversions. Oracles: closed-form least squares, hand-computed gradients."""

from __future__ import annotations

import tracemalloc
import warnings
import weakref

import numpy as np
import pytest

import simplegrad as sg


def _data(rng, n=64):
    X = rng.standard_normal((n, 3))
    w_true = np.array([1.5, -2.0, 0.5])
    Y = X @ w_true + 0.3 + 0.01 * rng.standard_normal(n)
    return X, Y


@pytest.mark.slow
def test_pytorch_habit_loop_has_flat_memory_and_fits_least_squares(rng):
    # each step's graph holds several 80 kB arrays: a graph kept per step would add ~1 GB
    X, Y = _data(rng, 10_000)
    W, b = sg.Parameter(np.zeros(3), name="W"), sg.Parameter(0.0, name="b")
    lr = 0.1
    sizes, memory = [], []
    tracemalloc.start()
    try:
        for step in range(2000):
            loss = (((X @ W + b) - Y) ** 2).mean()
            loss.backward()
            sizes.append(len(loss.ops.tape))
            for p in (W, b):
                p.assign(p.value - lr * p.grad.value)
                p.grad = None
            if step in (200, 1999):
                memory.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    assert len(set(sizes)) == 1                          # each step records the same graph
    assert memory[1] - memory[0] < 1_000_000, memory     # flat after warm-up
    A = np.column_stack([X, np.ones(len(X))])
    exact = np.linalg.lstsq(A, Y, rcond=None)[0]
    np.testing.assert_allclose(np.append(W.value, b.value), exact, atol=1e-8)


def test_a_dropped_step_graph_is_freed_by_reference_counting():
    W = sg.Parameter(np.ones(3))
    loss = (W * W).sum()
    loss.backward()
    tape_ref = weakref.ref(loss.ops)
    entry_ref = weakref.ref(loss)
    del loss
    assert tape_ref() is None and entry_ref() is None       # no cycle: freed at once
    np.testing.assert_array_equal(W.grad.value, [2.0, 2.0, 2.0])


def test_backward_accumulates_into_parameters_until_reset():
    W = sg.Parameter([1.0, 2.0], name="W")
    (W * W).sum().backward()
    (W * 3.0).sum().backward()
    np.testing.assert_array_equal(W.grad.value, [2.0 + 3.0, 4.0 + 3.0])
    assert W.grad.ops is W.ops and W.grad.prim is None     # a free value, no history
    W.grad = None
    (W * 3.0).sum().backward()
    np.testing.assert_array_equal(W.grad.value, [3.0, 3.0])


def test_free_computations_alive_together_combine():
    W1, W2 = sg.Parameter([1.0, 2.0]), sg.Parameter([3.0, 4.0])
    a = W1 * 2.0
    b = W2 * W2
    (a + b).sum().backward()
    np.testing.assert_array_equal(W1.grad.value, [2.0, 2.0])
    np.testing.assert_array_equal(W2.grad.value, [6.0, 8.0])
    doubled = W1.grad * 2.0                 # a free gradient value computes too
    np.testing.assert_array_equal(doubled.value, [4.0, 4.0])


def test_a_parameter_joins_an_explicit_ops_as_a_leaf():
    op = sg.Ops()
    x = op.var([1.0, 2.0], name="x")
    W = sg.Parameter([3.0, 4.0], name="W")
    y = op.sum(x * W, name="y")
    g = op.grad(y, W)
    np.testing.assert_array_equal(g.value, [1.0, 2.0])
    assert W.grad is g
    trace = op.format_trace().splitlines()
    assert "W = [3.0000, 4.0000]" in trace and "v0 = x * W" in trace
    gx, gW = op.grad(y, [x, W])                 # grad of grad through the parameter's leaf
    np.testing.assert_array_equal(op.grad((gx * gW).sum(), W).value, [1.0, 2.0])


def test_assign_leaves_recorded_tapes_their_value():
    op = sg.Ops()
    W = sg.Parameter([1.0, 2.0], name="W")
    x = op.var([5.0, 7.0])
    y = (x * W * W).sum()                      # dy/dx = W^2 at the recorded W
    W.assign([10.0, 20.0])
    np.testing.assert_array_equal(op.grad(y, x).value, [1.0, 4.0])
    z = (x * W).sum()                          # recorded after assign: the new value
    np.testing.assert_array_equal(op.grad(z, x).value, [10.0, 20.0])
    with pytest.raises(sg.ShapeError, match="shape"):
        W.assign([1.0, 2.0, 3.0])


def test_a_parameter_alone_has_no_history_to_differentiate():
    W = sg.Parameter([1.0])
    with pytest.raises(sg.GraphError, match="no history"):
        W.backward()


def test_released_variables_give_a_hint():
    op = sg.Ops()
    x = op.var([1.0, 2.0], name="x")
    other = sg.Ops()
    with pytest.raises(sg.GraphError, match="Parameter"):
        other.var([1.0, 2.0]) * x


def test_reusing_one_ops_for_many_steps_warns_with_the_fix():
    # every pass from the 100th on warns; the default filter shows it once per line
    for action, count in (("default", 1), ("always", 51)):
        op = sg.Ops()
        w = op.var([1.0, 2.0])
        with warnings.catch_warnings(record=True) as caught:
            warnings.resetwarnings()
            warnings.simplefilter(action)
            for _ in range(150):
                loss = (w * w).sum()
                op.grad(loss, w, create_graph=False)
        growth = [c for c in caught if issubclass(c.category, sg.TapeGrowthWarning)]
        assert len(growth) == count and "op.release()" in str(growth[0].message)
        assert growth[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error", sg.TapeGrowthWarning)
        for _ in range(150):
            with sg.Ops() as step:
                v = step.var([1.0, 2.0])
                step.grad((v * v).sum(), v, create_graph=False)


def test_one_element_conversions():
    op = sg.Ops()
    x = op.var(2.75)
    with pytest.warns(sg.ConversionWarning):      # (x requires grad: PyTorch warns too)
        assert float(x) == 2.75 and int(x) == 2
    assert f"{x:.3f}" == "2.750" and x.item() == 2.75
    assert isinstance(x.numpy(), np.ndarray) and not x.numpy().flags.writeable
    v = op.var([1.0, 2.0])
    with pytest.raises(TypeError, match="one-element"):
        float(v)


def test_many_passes_over_one_graph_do_not_warn():
    # a Jacobian's rows sweep one recorded graph again and again: not a growing loop
    with warnings.catch_warnings():
        warnings.simplefilter("error", sg.TapeGrowthWarning)
        J = sg.jacobian(lambda v: v * 2.0, mode="rev")(np.ones(150))
    np.testing.assert_array_equal(J, 2.0 * np.eye(150))


def test_gradients_route_to_the_parameter_across_an_assign_and_many_steps():
    # leaves made for a parameter before and after p.assign both send their gradient to p
    op = sg.Ops()
    p = sg.Parameter(np.array([1.0, 2.0]))
    before = op.leaf_for(p)
    first = (before * p).sum()              # d/dp = 2 p_old
    old = p.value.copy()
    p.assign(np.array([3.0, -1.0]))
    after = op.leaf_for(p)
    assert after is not before and op.source_of(before) is p and op.source_of(after) is p
    second = op.mul(p, 3.0).sum()           # d/dp = 3; p joins op as the new leaf
    op.backward(first + second)
    np.testing.assert_allclose(p.grad.value, 2 * old + 3.0, rtol=1e-15)
    # a persistent Ops, released and reassigned every step: p is adopted anew each step and
    # the Ops' record of adoptions stops growing (white-box: the bookkeeping dicts; the two
    # leaves above are still alive and keep their entries)
    p.grad = None
    sizes = []
    for _ in range(200):
        L = op.mul(op.mul(p, p).sum(), 0.5)
        (g,) = op.grad(L, [p], create_graph=False)
        np.testing.assert_allclose(g.value, p.value, rtol=1e-15)    # d(p^2 / 2)/dp = p
        op.release()
        p.assign(p.value * 0.5)
        sizes.append((len(op._adoptions.leaves), len(op._adoptions.sources)))
    assert len(set(sizes[10:])) == 1 and max(s for _, s in sizes) <= 3
    np.testing.assert_allclose(p.value, np.array([3.0, -1.0]) * 0.5 ** 200, rtol=1e-12)
    # free values made afresh each step leave nothing behind once the tape is released
    for _ in range(50):
        op.mul(sg.Parameter(np.ones(2)), 2.0).sum()
        op.release()
    assert len(op._adoptions.leaves) <= 2 and len(op._adoptions.sources) <= 3
