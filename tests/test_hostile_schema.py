"""Every primitive carries an attribute schema, and it says the truth about its cases.

For each registered primitive, every entry recorded by its check cases at orders 0, 1 and 2
(the primitive itself and every primitive its rules record) passes that entry's schema; the
schema's size rule gives the number of elements numpy's forward actually returns; and a
primitive without a size rule never returns more elements than its largest input holds (the
loader's memory bound rests on this). The schema checks themselves are tested against
hand-written answers, and ``indexed`` against numpy's own indexing on random indices.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simplegrad as sg
from simplegrad.primitives.schema import (
    AXES_OR_NONE,
    INDEX,
    PAD_WIDTH,
    Schema,
    attrs,
    broadcast,
    indexed,
    need,
    one_of,
)
from simplegrad.program.serialize import prog_shapes
from tests.test_primitives import sample
from tests.test_program import record


def test_every_primitive_has_a_schema():
    missing = [p.name for p in sg.REGISTRY.values() if not isinstance(p.schema, Schema)]
    assert not missing, f"primitives without schema=attrs(...): {missing}"


def _entries(prim, rng):
    """(entry's primitive, attrs, input shapes, output shape) of every recorded case."""
    for case in prim.cases:
        for order in (0, 1, 2):
            op, xs, outs = record(prim, case, sample(prim, case, rng), order)
            prog = op.program(xs, outs)
            yield from zip(prog.nodes, prog_shapes(prog))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("prim", list(sg.REGISTRY.values()), ids=lambda p: p.name)
def test_schemas_accept_what_is_recorded_and_size_rules_are_exact(prim, rng):
    for node, shapes in _entries(prim, rng):
        schema = node.prim.schema
        assert schema.problem(node.attrs, shapes) is None, (node.prim.name, node.attrs)
        actual = math.prod(node.shape)
        if schema.size is None:
            assert actual <= max([1, *(math.prod(s) for s in shapes)]), node.prim.name
        elif node.prim.name == "cross":       # an upper bound: (..., 2) x (..., 2) -> (...)
            assert schema.size(shapes, node.attrs or {}) >= actual
        else:
            assert schema.size(shapes, node.attrs or {}) == actual, (node.prim.name,
                                                                     node.attrs, shapes)


def test_a_schema_names_what_is_wrong():
    s = attrs(size=broadcast, axis=AXES_OR_NONE, part=need(one_of("Q", "R")))
    assert s.problem({"part": "Q"}, [(3, 4)]) is None
    assert s.problem({"part": "Q", "axis": (0, -1)}, [(3, 4)]) is None
    assert s.problem(None, [(3, 4)]) == "the attribute 'part' is missing"
    assert s.problem({"part": "X"}, [(3,)]) == "attribute 'part': must be one of 'Q', 'R' " \
                                               "(got 'X')"
    assert s.problem({"part": "Q", "axis": (0, 2)}, [(3, 4)]) == \
        "attribute 'axis': is out of range for 2 dimension(s) (got (0, 2))"
    assert s.problem({"part": "Q", "axis": (0, -2)}, [(3, 4)]) == \
        "attribute 'axis': repeats an axis (got (0, -2))"
    assert s.problem({"part": "Q", "axis": True}, [(3, 4)]) == \
        "attribute 'axis': must be None or an int or a tuple of ints (got True)"
    assert s.problem({"part": "Q", "where": False}, [(3,)]) == \
        "unknown attribute 'where' (it takes: axis, part)"
    assert PAD_WIDTH(((1, 2),), [(3,)]) is None
    assert PAD_WIDTH(((1, -2),), [(3,)]) is not None
    assert INDEX((slice(0, 3, 0),), [(3,)]) is not None
    assert INDEX((Ellipsis, Ellipsis), [(3,)]) is not None
    assert INDEX((np.array([1.5]),), [(3,)]) is not None


_items = st.one_of(
    st.none(), st.integers(-3, 2),
    st.builds(slice, st.one_of(st.none(), st.integers(-4, 4)),
              st.one_of(st.none(), st.integers(-4, 4)),
              st.one_of(st.none(), st.integers(-3, 3).filter(bool))),
    st.lists(st.integers(-2, 1), min_size=1, max_size=3).map(np.array),
    st.lists(st.integers(-2, 1), min_size=1, max_size=2).map(lambda v: np.array(v)[:, None]),
    st.lists(st.booleans(), min_size=2, max_size=2).map(np.array))


@settings(max_examples=300, deadline=None)
@given(st.lists(_items, max_size=4), st.booleans())
def test_indexed_counts_what_numpy_indexing_gives(items, ellipsis):
    shape = (2, 2, 3)
    index = tuple(items[:1] + [Ellipsis] + items[1:]) if ellipsis else tuple(items)
    x = np.zeros(shape)
    try:
        want = x[index].size
    except (IndexError, ValueError):    # numpy refuses it: the loader's forward run does too
        return
    assert indexed([shape], {"index": index}) == want
