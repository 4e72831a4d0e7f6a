"""An Ops nobody holds is freed by reference counting alone; its live Variables keep working.

Variables hold the recorder behind an ``sg.Ops``, never the Ops itself; the tape holds its
entries while the Ops is held (the trace) and only what live Variables reach once it is not.
Each loop here runs with Python's cycle collector paused, so only reference counting frees.
"""

from __future__ import annotations

import gc
import tracemalloc
import weakref
from collections.abc import Callable

import numpy as np
import pytest
from test_training_memory import collector_paused

import simplegrad as sg

X = np.random.default_rng(0).standard_normal((40, 40))


def seed_habit_step(simplify: bool = False) -> Callable[[], tuple]:
    """One step as the seed writes it: a fresh Ops, op.grad with create_graph (the default),
    so x.grad is a recorded Variable computed from x, and a second-order gradient."""
    def step() -> tuple:
        op = sg.Ops(simplify=simplify)
        x = op.var(X, name="x")
        L = (op.tanh(x @ x) ** 2).sum()
        g = op.grad(L, x)
        op.grad((g * g).sum(), x)
        return weakref.ref(x.rec), float(g.value.sum())
    return step


def _ours() -> int:
    """How many Variables and recorders the cycle collector tracks right now (by type: a dead
    weak proxy that another library left in the heap raises on isinstance)."""
    return sum(issubclass(type(o), (sg.Variable, sg.Ops)) for o in gc.get_objects())


@pytest.mark.slow
@pytest.mark.parametrize("simplify", [False, True])
def test_a_fresh_ops_per_step_is_freed_by_reference_counting(simplify):
    step = seed_habit_step(simplify)
    with collector_paused():
        gc.collect()
        before = _ours()
        for _ in range(50):
            rec, _ = step()
            assert rec() is None            # the step's recorder, tape and values are gone
        assert _ours() == before            # and none of ours waits for the collector


@pytest.mark.slow
def test_a_fresh_ops_per_step_keeps_traced_memory_flat():
    step = seed_habit_step()
    with collector_paused():
        gc.collect()
        tracemalloc.start()
        try:
            # (allocator caches fill during the first several hundred steps, then the traced
            # memory stays within bytes per 200 steps: measured, and a leak would not stop)
            for _ in range(1000):
                step()
            warm = tracemalloc.get_traced_memory()[0]
            for _ in range(200):
                step()
            end = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
    assert end - warm < 64 * 1024, (warm, end)      # one step's arrays are 40x40x8 = 12.8 kB


def test_x_ops_is_the_ops_you_hold():
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    y = (x * x).sum()
    assert x.ops is op and y.ops is op and op.grad(y, x).ops is op
    assert isinstance(op, sg.Ops) and isinstance(x.rec, sg.Ops)
    assert x.rec is op and type(x.rec) is sg.Ops


def test_one_liners_work_on_an_ops_nobody_holds():
    x = sg.Ops().var(1.5)
    (x * 2).backward()
    assert x.grad.value == 2.0
    y = (sg.Ops().var(3.0) ** 2)
    x = next(v for v in y.inputs if isinstance(v, sg.Entry))    # (an entry of its tape)
    assert y.ops.grad(y, x).value == 6.0


@pytest.mark.parametrize("simplify", [False, True])
def test_variables_returned_from_a_function_keep_their_history(simplify):
    def f():
        op = sg.Ops(simplify=simplify)
        x = op.var(0.7, name="x")
        return x, (x * x).sin()

    x, y = f()
    g = y.ops.grad(y, x)                                    # d sin(x^2) = 2x cos(x^2)
    h = y.ops.grad(g, x)                                    # 2 cos(x^2) - 4x^2 sin(x^2)
    np.testing.assert_allclose(g.value, 2 * 0.7 * np.cos(0.49), rtol=1e-15)
    np.testing.assert_allclose(h.value, 2 * np.cos(0.49) - 4 * 0.49 * np.sin(0.49),
                               rtol=1e-14)
    assert isinstance(x.ops, sg.Ops)                        # the recorder, once no Ops is held


def test_a_branching_graph_differentiates_through_entries_the_tape_no_longer_lists():
    """d/dx of sum(sin(x) * cos(x) + x^3) = cos(2x) + 3x^2, at orders 1 and 2, swept after
    the Ops that recorded the forward is gone (the sweep walks the graph, not positions)."""
    def f():
        op = sg.Ops()
        x = op.var(np.array([0.3, 1.1]), name="x")
        s, c = x.sin(), x.cos()
        return x, (s * c + x ** 3).sum()

    x, L = f()
    g = L.ops.grad(L, x)
    h = L.ops.grad(g.sum(), x)
    v = np.array([0.3, 1.1])
    np.testing.assert_allclose(g.value, np.cos(2 * v) + 3 * v ** 2, rtol=1e-14)
    np.testing.assert_allclose(h.value, -2 * np.sin(2 * v) + 6 * v, rtol=1e-14)


def test_grad_set_by_op_grad_keeps_its_value_once_the_ops_is_dropped():
    def f():
        op = sg.Ops()
        x = op.var(3.0)
        g = op.grad(x * x, x)
        assert x.grad is g and g.prim is not None           # recorded while op is held
        return x

    x = f()     # a gradient is a handle of its history, which points at no handle: no cycle
    assert x.grad.value == 6.0 and x.grad.prim is not None
    assert x.ops.grad(x.grad, x).value == 2.0               # and it differentiates again


def test_a_trace_read_from_a_temporary_is_whole():
    f = sg.grad(lambda x: (x * x).sin().sum())
    held = sg.trace(f, np.array([1.0, 2.0]))
    assert sg.trace(f, np.array([1.0, 2.0])).format_trace() == held.format_trace()
    assert "dv3_dv0 = v6" in held.format_trace()


def test_no_grad_and_context_manager_through_the_ops():
    with sg.Ops() as op:
        x = op.var(2.0)
        with op.no_grad():
            y = x * 3
        assert y.prim is None and op.recording
        z = x * x
    with pytest.raises(sg.GraphError, match="released"):
        op.grad(z, x)


def test_attributes_set_on_the_ops_reach_its_recorder():
    op = sg.Ops()
    op.echo = True
    assert op.recorder.echo and op.echo
    op.echo = False
    assert not op.recorder.echo
    assert hasattr(sg.Ops, "sum") and sg.Ops.grad.__doc__.startswith("Gradients of L")
