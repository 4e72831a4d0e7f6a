"""The sweeps' bookkeeping: where they stop, what they leave behind when a rule fails."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.primitives.core import Case, Primitive


def test_grad_does_not_sweep_entries_older_than_every_wrt():
    op = sg.Ops()
    a = op.var(np.array([1.0, 2.0]))
    b = (a * 3.0).sin()                 # older than x: cannot lie on a path from x
    x = op.var(np.array([0.5, 0.25]))
    L = (b * x).sum()
    before = len(op.tape)
    gx = op.grad(L, x)
    np.testing.assert_allclose(gx.value, np.sin(np.array([3.0, 6.0])))
    # sum's expand and x's cotangent g * b; nothing for b (older than x and not asked for),
    # sin or a * 3
    assert len(op.tape) - before == 2
    assert [e.prim.name for e in op.tape[before:]] == ["expand", "mul"]
    assert op.tape[-1].in1 is b.node


def test_sweeps_pull_back_to_an_older_input_only_when_it_is_asked_for():
    # the recording and the value-only sweep agree: dL/da through b older than x, and
    # nothing for a when only x is asked
    op = sg.Ops()
    a = op.var(np.array([1.0, 2.0]))
    b = (a * 3.0).sin()
    x = op.var(np.array([0.5, 0.25]))
    L = (b * x).sum()
    for create_graph in (True, False):
        ga, gx = op.grad(L, [a, x], create_graph=create_graph)
        np.testing.assert_allclose(ga.value, 3.0 * np.cos(3.0 * a.value) * x.value, rtol=1e-15)
        np.testing.assert_allclose(gx.value, b.value, rtol=1e-15)
    before = len(op.tape)
    assert op.grad(L, [x, x])[0].node is op.tape[-1]
    assert [e.prim.name for e in op.tape[before:]] == ["expand", "mul"]


def test_jvp_records_only_entries_that_lead_to_y():
    op = sg.Ops()
    x = op.var(np.array([0.1, 0.2]))
    side = (x * 5.0).exp().sum()        # depends on x but does not lead to y
    y = (x * 2.0).sum()
    before = len(op.tape)
    t = op.jvp(y, x, np.ones(2))
    assert t.value == pytest.approx(4.0)
    assert side.prim is not None
    assert len(op.tape) - before == 2   # mul's tangent and sum's tangent only


def _failing_primitive() -> Primitive:
    def vjp(o, g, out, x):
        o.mul(g, 2.0)                   # records an entry, then fails
        raise RuntimeError("rule failed")
    return Primitive("fails", lambda x: x * 1.0, [vjp], None, "{0}.fails()", [Case(((),))])


def test_failed_sweep_leaves_tape_marks_and_counter_unchanged():
    op = sg.Ops()
    x = op.var(np.array([1.0, 2.0]))
    y = op.apply(_failing_primitive(), [x * 3.0]).sum()
    text, entries, counter = op.format_trace(), len(op.tape), op.tape.counter
    with pytest.raises(RuntimeError, match="rule failed"):
        op.grad(y, x)
    assert (op.format_trace(), len(op.tape), op.tape.counter) == (text, entries, counter)
    assert x.grad is None
    assert (x * 1.0).name == f"v{counter}"


@pytest.mark.parametrize("create_graph", [True, False])
def test_sweeps_leave_the_garbage_collector_alone(create_graph, monkeypatch):
    def switched(*args):
        raise AssertionError("a sweep switched the process-wide garbage collector")
    monkeypatch.setattr(gc, "disable", switched)
    monkeypatch.setattr(gc, "enable", switched)
    op = sg.Ops()
    x = op.var(np.ones(3))
    g = op.grad((x * x).sin().sum(), x, create_graph=create_graph)
    t = op.jvp((x * x).sum(), x, np.ones(3), create_graph=create_graph)
    np.testing.assert_allclose(g.value, 2 * np.cos(1.0) * np.ones(3), rtol=1e-15)
    assert t.item() == 6.0


@pytest.mark.slow
def test_an_entry_is_one_object_for_the_cycle_collector():
    # the design that replaced pausing the collector: an entry with one or two inputs keeps
    # them in its own slots, and a grad block stores its derivatives in one dict
    op = sg.Ops()
    x = op.var(np.ones(4))
    gc.collect()
    before = len(gc.get_objects())
    y = x
    for _ in range(250):
        y = (y * 0.5).sin()
    op.grad(y.sum(), x)
    entries = len(op.tape)
    gc.collect()        # (an entry's shape tuple holds ints only: the collector untracks it)
    added = len(gc.get_objects()) - before
    assert entries > 1000
    assert added < entries + 50


def test_entry_inputs_of_every_arity():
    op = sg.Ops()
    x, y = op.var(np.ones(2)), op.var(np.arange(2.0))
    unary, binary = x.sin(), x * y
    ternary = op.where(x > 0, x, y)
    many = op.concatenate([x, y, x, y])
    x, y = x.node, y.node               # (an entry's inputs are entries)
    assert unary.inputs == (x,) and binary.inputs == (x, y)
    assert ternary.inputs[1:] == (x, y) and many.inputs == (x, y, x, y)
    assert x.inputs == () and x.is_leaf
    binary.node.inputs = (y,)           # the setter keeps the slots consistent
    assert binary.inputs == (y,)
    binary.node.inputs = (x, y, x)
    assert binary.inputs == (x, y, x)


@pytest.mark.parametrize("how", ["grad", "backward"])
def test_value_only_backward_frees_cotangents_as_it_goes(how):
    import tracemalloc
    op = sg.Ops()
    x = op.var(np.full(50_000, 0.5))          # 400 kB per array
    y = x
    for _ in range(100):
        y = (y * 0.999).sin()
    L = y.sum()
    tracemalloc.start()
    try:
        if how == "grad":
            g = op.grad(L, x, create_graph=False)
        else:
            L.backward()
            g = x.grad
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.all(np.isfinite(g.value))
    # 200 swept entries: keeping every cotangent would peak near 80 MB; a few arrays suffice
    assert peak < 10 * x.value.nbytes, f"peak {peak / 1e6:.1f} MB"


def test_release_frees_a_finished_tape_at_once():
    import tracemalloc
    tracemalloc.start()
    try:
        for _ in range(5):
            with sg.Ops() as op:
                x = op.var(np.ones(250_000))          # 2 MB per array, ~40 arrays per step
                y = x
                for _ in range(20):
                    y = (y * 0.5).sin()
                g = op.grad(y.sum(), x, create_graph=False)
            assert len(op.tape) == 0 and op.format_trace() == ""
        live = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # without release each step's tape is cyclic garbage (80 MB a step) until gc runs
    assert live < 20e6, f"{live / 1e6:.0f} MB still live"
    np.testing.assert_allclose(g.value[:3], g.value[0])


def test_released_variables_are_leaves_that_still_work():
    op = sg.Ops()
    x = op.var(np.array([1.0, 2.0]))
    y = (x * 3.0).sin()
    op.release()
    assert y.is_leaf and x.is_leaf
    np.testing.assert_allclose(y.value, np.sin([3.0, 6.0]))
    z = (y * y).sum()                                  # new history on the same Ops
    np.testing.assert_allclose(op.grad(z, y).value, 2 * np.sin([3.0, 6.0]))
    with pytest.raises(sg.GraphError, match="history was released"):
        op.grad(z, x)                                  # the path from x was released


@pytest.mark.slow
def test_transforms_release_their_own_ops():
    import gc
    gc.collect()
    gc.disable()
    try:
        before = sum(issubclass(type(o), sg.Variable) for o in gc.get_objects())
        for _ in range(3):
            sg.hessian(lambda v: (v ** 3).sum())(np.arange(4.0))
            sg.grad(lambda v: (v.sin() * v).sum())(np.arange(4.0))
        after = sum(issubclass(type(o), sg.Variable) for o in gc.get_objects())
    finally:
        gc.enable()
    assert after - before < 10


def test_jvp_ancestor_cache_is_reset_by_release():
    op = sg.Ops()
    x = op.var(np.array([0.5, 1.5]))
    y = (x * x).sin()
    t1 = op.jvp(y, x, np.ones(2))
    t2 = op.jvp(y, x, np.array([1.0, 0.0]))        # same y: cached entry positions
    np.testing.assert_allclose(t1.value, 2 * x.value * np.cos(x.value ** 2))
    np.testing.assert_allclose(t2.value, [2 * 0.5 * np.cos(0.25), 0.0])
    op.release()
    x2 = op.var(np.array([0.5, 1.5]))
    with pytest.raises(sg.GraphError, match="released"):    # y is history-less now: no
        op.jvp(y, x2, np.ones(2))                           # silent zeros
    z = (x2 * x2).sin()                                     # recorded again: the cache is reset
    np.testing.assert_allclose(op.jvp(z, x2, np.ones(2)).value, t1.value)


def _value_sweep_program(op: sg.Ops, x, w):
    """Every path of the value-only sweep: a repeated input, broadcasting, matmul, indexing
    reads (sparse cotangents), ``where`` (masks) and a variadic primitive."""
    h = (x @ w).tanh() * x[:, :1] + w[0]        # broadcasting both ways
    h = h * h                                   # the same input twice
    picked = h[0] + h[2, ::-1] + h[0]           # indexing reads, two of one row
    col = x[:, 0]
    safe = op.where(col > 0, op.sqrt(op.where(col > 0, col, 0.0)), 0.0)  # sqrt'(0) masked
    return (picked.sum() + safe.sum() + op.concatenate([h[1], x[1]]).sum()) * 0.5


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")    # sqrt's rule at 0
def test_value_only_sweep_matches_the_recorded_gradients_and_finite_differences():
    rng = np.random.default_rng(3)
    x0 = rng.normal(size=(3, 3))
    x0[:, 0] = [0.7, -0.4, 0.0]                 # sqrt's derivative is infinite at the 0 taken
    w0 = rng.normal(size=(3, 3))
    op = sg.Ops()
    x, w = op.var(x0, name="x"), op.var(w0, name="w")
    L = _value_sweep_program(op, x, w)
    values = [g.value for g in op.grad(L, [x, w], create_graph=False)]
    recorded = [g.value for g in op.grad(L, [x, w])]
    for v, r in zip(values, recorded):          # the same arithmetic in the same order
        np.testing.assert_array_equal(v, r)
    assert np.isfinite(values[0]).all()

    def f(xv, wv):
        o = sg.Ops()
        return float(_value_sweep_program(o, o.var(xv), o.var(wv)).value)

    eps = 1e-6                                  # float64 central differences
    for k, (arr, other) in enumerate([(x0, w0), (w0, x0)]):
        fd = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            up, down = arr.copy(), arr.copy()
            up[i] += eps
            down[i] -= eps
            args_up, args_down = ((up, other), (down, other)) if k == 0 else \
                ((other, up), (other, down))
            fd[i] = (f(*args_up) - f(*args_down)) / (2 * eps)
        if k == 0:                              # sqrt(x) at 0 has no derivative: skipped
            fd[2, 0] = np.nan
        np.testing.assert_allclose(values[k][~np.isnan(fd)], fd[~np.isnan(fd)], rtol=1e-6,
                                   atol=1e-8)
