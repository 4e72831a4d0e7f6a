"""The Tape: typed events, snapshot and restore, clear, listeners; and sweep details that live
on it (jvp with a repeated input, the value-only sweep's memory through indexing)."""

from __future__ import annotations

import tracemalloc

import numpy as np

import simplegrad as sg
from simplegrad.cli import seed_program
from simplegrad.engine.tape import BlockBegin, BlockEnd, Leaf


def test_the_seed_program_as_typed_events():
    op, a, b = seed_program(echo=False)
    kinds = [(type(e).__name__, getattr(e, "kind", None)) for e in op.tape.events]
    assert kinds == [("Leaf", "leaf"), ("Leaf", "leaf"), ("BlockBegin", "grad"),
                     ("Leaf", "seed"), ("BlockEnd", "grad"), ("Asked", None),
                     ("BlockBegin", "grad"), ("Leaf", "seed"), ("BlockEnd", "grad"),
                     ("Asked", None)]
    asked = op.tape.events[5]           # what the grad call asked for, in order
    assert [w.name for w in asked.wrt] == ["a", "b"] and [g.name for g in asked.grads] == \
        ["v4", "v6"]
    first_end = op.tape.events[4]
    assert isinstance(first_end, BlockEnd) and first_end.target.name == "L0"
    assert [(v.name, g.name) for v, g in first_end.pairs] == [
        ("L0", "v2"), ("v1", "v3"), ("v0", "v4"), ("b", "v6"), ("a", "v4")]
    # an event stands before the entry at its position
    begin = op.tape.events[2]
    assert isinstance(begin, BlockBegin) and begin.position == op.tape[3].position
    assert op.tape[3].name == "v3"


def test_snapshot_and_restore_forget_everything_recorded_since():
    op = sg.Ops()
    x = op.var([1.0, 2.0], name="x")
    y = (x * x).sum()
    snap = op.tape.snapshot()
    text, counter = op.format_trace(), op.tape.counter
    op.grad(y, x)
    op.var(3.0)
    assert op.tape.counter > counter and op.format_trace() != text
    op.tape.restore(snap)
    assert op.format_trace() == text and op.tape.counter == counter
    assert not op.tape.accumulations and not op.tape.pullbacks


def test_clear_keeps_positions_growing_and_old_variables_become_leaves():
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    y = x.sin()
    end = op.tape.end
    op.release()
    assert len(op.tape) == 0 and op.tape.base > end and y.is_leaf
    assert x.position < op.tape.base     # older than anything recorded after
    z = (y * 3.0).sum()             # y, a leaf now, feeds a new history
    assert z.position >= end
    np.testing.assert_allclose(op.grad(z, y).value, [3.0, 3.0])


def test_listeners_hear_every_entry_and_event():
    op = sg.Ops()
    heard = []
    op.tape.listeners.append(heard.append)
    x = op.var(2.0, name="x")
    y = x * x
    op.grad(y, x)
    assert heard[0] == Leaf(x.position, x.node, "leaf") and heard[1] is y.node
    assert isinstance(heard[2], BlockBegin) and isinstance(heard[-2], BlockEnd)
    assert type(heard[-1]).__name__ == "Asked"     # then what the grad call asked for
    assert sum(isinstance(h, sg.Entry) for h in heard) == len(op.tape)


def test_echo_is_a_listener():
    op = sg.Ops(echo=True)
    assert op.echo
    op.echo = False
    assert not op.echo and not op.tape.listeners


def test_jvp_adds_the_tangents_of_a_repeated_input():
    # y = x^3: dy = 3 x^2 (t1 + t2) when x is given twice with tangents t1 and t2
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    y = x * x * x
    t1, t2 = np.array([1.0, 0.5]), np.array([0.25, 2.0])
    expected = 3 * np.array([1.0, 4.0]) * (t1 + t2)
    for create_graph in (True, False):
        got = op.jvp(y, [x, x], [t1, t2], create_graph=create_graph)
        np.testing.assert_allclose(got.value, expected, rtol=1e-15)


def test_value_only_sweep_through_indexing_holds_a_few_cotangents():
    # 160 indexing steps (views, no forward memory): the value-only backward must free each
    # step's cotangent once pulled back, not keep all 160 (12.8 MB of 80 kB arrays)
    op = sg.Ops()
    x = op.var(np.ones(10_000))
    y = x
    for _ in range(160):
        y = y[:]
    loss = y.sum()
    tracemalloc.start()
    try:
        op.grad(loss, x, create_graph=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10 * 80_000, peak
