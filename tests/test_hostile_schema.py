"""Every primitive carries an attribute schema, and it says the truth about its cases.

For each registered primitive, every entry recorded by its check cases at orders 0, 1 and 2
(the primitive itself and every primitive its rules record, Python-number constants
included) passes that entry's schema, and the schema's shape rule gives exactly the shape and
dtype the tape recorded (the loader's checks and its memory bound rest on this). The schema
checks themselves are tested against hand-written answers, and ``index_shape`` against
numpy's own indexing on random indices.
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
    ShapeRuleError,
    attrs,
    need,
    one_of,
)
from simplegrad.primitives.shape_rules import SAME, broadcasting, index_shape
from simplegrad.program.serialize import prog_specs
from tests.test_primitives import sample
from tests.test_program import record


def test_every_primitive_has_a_schema():
    missing = [p.name for p in sg.REGISTRY.values() if not isinstance(p.schema, Schema)]
    assert not missing, f"primitives without schema=attrs(...): {missing}"


def _entries(prim, rng):
    """(entry, its inputs' shapes and dtypes) of every entry recorded by the cases."""
    for case in prim.cases:
        for order in (0, 1, 2):
            op, xs, outs = record(prim, case, sample(prim, case, rng), order)
            prog = op.program(xs, outs)
            yield from zip(prog.nodes, prog_specs(prog))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("prim", list(sg.REGISTRY.values()), ids=lambda p: p.name)
def test_schemas_accept_what_is_recorded_and_shape_rules_are_exact(prim, rng):
    for node, (shapes, dtypes) in _entries(prim, rng):
        schema = node.prim.schema
        assert schema.problem(node.attrs, shapes) is None, (node.prim.name, node.attrs)
        assert schema.abstract(shapes, dtypes, node.attrs) == (node.shape, node.dtype), \
            (node.prim.name, node.attrs, shapes, dtypes)
        assert schema.size(shapes, dtypes, node.attrs) == math.prod(node.shape)


def test_a_schema_names_what_is_wrong():
    s = attrs(shape_rule=broadcasting(SAME), axis=AXES_OR_NONE, part=need(one_of("Q", "R")))
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
    st.lists(st.booleans(), min_size=2, max_size=2).map(np.array),
    st.lists(st.booleans(), min_size=6, max_size=6).map(lambda v: np.array(v).reshape(2, 3)),
    st.booleans().map(np.array),                                    # a 0-d mask
    st.lists(st.integers(-3, 2), min_size=0, max_size=2).map(lambda v: np.array(v, int)))


@settings(max_examples=400, deadline=None)
@given(st.lists(_items, max_size=4), st.booleans())
def test_index_shape_is_what_numpy_indexing_gives(items, ellipsis):
    shape = (2, 2, 3)
    index = tuple(items[:1] + [Ellipsis] + items[1:]) if ellipsis else tuple(items)
    x = np.zeros(shape)
    try:
        want = x[index].shape
    except (IndexError, ValueError):    # numpy refuses it: so does the rule
        with pytest.raises(ShapeRuleError):
            index_shape(shape, index)
        return
    assert index_shape(shape, index) == want
