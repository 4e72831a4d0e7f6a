"""A Program's parts are tape entries: input slots and constants as leaf entries, nodes as
entries reading them; ``prog.nodes`` is the same program as ``Node``s of ``Ref``s.

Oracle: programs written out by hand (the Refs and values each entry must have), and the
tape the program was extracted from (the entries' primitives, names, shapes and attributes).
"""

from __future__ import annotations

import pickle

import numpy as np

import simplegrad as sg
from simplegrad.engine.variable import Entry
from simplegrad.primitives.elementwise import ADD, MUL, TANH
from simplegrad.program.core import Program
from simplegrad.program.nodes import (
    CONST,
    INPUT,
    NODE,
    Constant,
    Input,
    Node,
    Ref,
    ref_of,
    refs_of,
)

F64 = np.dtype(np.float64)


def _by_hand() -> Program:
    """y = tanh(x * 2.0) + c, with c a named constant array."""
    c = np.array([0.5, -1.0])
    return Program([Input("x", (2,), F64)], [Constant(2.0), Constant(c, "c")],
                   [Node(MUL, (Ref(INPUT, 0), Ref(CONST, 0)), None, "v1", (2,), F64),
                    Node(TANH, (Ref(NODE, 0),), None, "v2", (2,), F64, 1),
                    Node(ADD, (Ref(NODE, 1), Ref(CONST, 1)), None, "y", (2,), F64, 1)],
                   [Ref(NODE, 2)], single=True)


def test_the_parts_are_entries_reading_each_other():
    prog = _by_hand()
    x, = prog.slots
    two, c = prog.fixed
    v1, v2, y = prog.entries
    assert all(type(e) is Entry for e in (x, two, c, v1, v2, y))
    assert (x.prim, x.raw, x.label, x.shape, x.dtype) == (None, None, "x", (2,), F64)
    assert (two.prim, two.raw, two.label, c.label) == (None, 2.0, None, "c")
    assert v1.inputs == (x, two) and v2.inputs == (v1,) and y.inputs == (v2, c)
    assert [e.position for e in prog.entries] == [0, 1, 2]
    assert prog.orders == (0, 1, 1)
    assert [ref_of(e) for e in (x, two, c, v1, v2, y)] == [
        Ref(INPUT, 0), Ref(CONST, 0), Ref(CONST, 1), Ref(NODE, 0), Ref(NODE, 1), Ref(NODE, 2)]
    assert refs_of(y) == (Ref(NODE, 1), Ref(CONST, 1))
    assert prog.at(Ref(CONST, 1)) is c and prog.at(Ref(NODE, 0)) is v1


def test_nodes_show_the_entries_as_refs():
    prog = _by_hand()
    assert prog.nodes == (
        Node(MUL, (Ref(INPUT, 0), Ref(CONST, 0)), None, "v1", (2,), F64, 0),
        Node(TANH, (Ref(NODE, 0),), None, "v2", (2,), F64, 1),
        Node(ADD, (Ref(NODE, 1), Ref(CONST, 1)), None, "y", (2,), F64, 1))
    x = np.array([0.25, -0.75])
    np.testing.assert_array_equal(prog(x), np.tanh(x * 2.0) + np.array([0.5, -1.0]))
    assert prog.format(raw=True).splitlines() == [
        "inputs: x", "c = [ 0.5000, -1.0000]", "v1 = x * 2.0", "v2 = v1.tanh()", "y = v2 + c",
        "outputs: y"]


def test_an_extracted_program_mirrors_its_tape():
    op = sg.Ops()
    x = op.var(np.array([0.1, 0.2, 0.3]), name="x")
    s = x * 3.0
    h = s.sin()
    out = h.sum(axis=0, keepdims=True)
    prog = op.program(x, out)
    assert [(e.prim, e.label, e.shape, e.attrs) for e in prog.entries] == [
        (v.prim, v.name, v.shape, v.attrs) for v in (s, h, out)]
    assert prog.entries[0].inputs == (prog.slots[0], prog.fixed[0])
    assert prog.fixed[0].raw == 3.0


def test_pickled_programs_rebuild_their_entries():
    prog = _by_hand()
    again = pickle.loads(pickle.dumps(prog))
    assert again.nodes == prog.nodes
    assert again.entries[2].inputs == (again.entries[1], again.fixed[1])
    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(again(x), prog(x))


def test_simplify_makes_entries_of_its_own():
    op = sg.Ops()
    x = op.var(np.array([1.0, 2.0]), name="x")
    y = (x * 2.0) * 0.5 + (x * 2.0) * 0.5 + x.sin() * 1.0      # x + x + sin(x) when simplified
    prog = op.program(x, y)
    simple = sg.simplify(prog)
    assert not set(simple.entries) & set(prog.entries)
    assert [e.position for e in simple.entries] == list(range(len(simple)))
    assert [c.position for c in simple.fixed] == list(range(len(simple.constants)))
    for e in simple.entries:
        for a in e.inputs:
            assert a in simple.entries[:e.position] or a in simple.slots or a in simple.fixed
    assert [e.prim.name for e in simple.entries] == ["mul", "sin", "add"]
    np.testing.assert_array_equal(simple(np.array([0.5, 4.0])), prog(np.array([0.5, 4.0])))
