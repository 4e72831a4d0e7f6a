"""Every primitive's shape rule (its abstract evaluation) agrees with numpy's forward.

For every registered primitive and every check case, the rule's (shape, dtype) equals
``np.shape`` and the dtype of the forward run on random data: over float64, float32, the
integer dtypes and bool (each input cast), over broadcasting variants of the case's shapes (a
leading axis added to one input or to all, a leading axis shrunk to 1), and with Python
numbers (NEP 50's weak scalars) for each input, and over the case's attributes with each
optional one left out or set to None where the schema allows it; then on random shapes,
dtypes and schema-valid attributes (hypothesis), and for the broadcasting, reduction, shape
and matmul rules against numpy's own functions. Where the forward refuses the inputs (a
shape that does not broadcast, bool subtraction, float16 in linalg), the rule refuses them
too; only refusals that depend on the values drawn (a singular matrix, an integer to a
negative power) and terabyte allocations are skipped. A primitive without a rule is listed
by name.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simplegrad as sg
from simplegrad.primitives.core import Primitive
from simplegrad.primitives.schema import Schema, ShapeRuleError, attrs
from simplegrad.program.standins import stand_in
from tests.test_primitives import samplers

DTYPES = [np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8, np.uint64,
          np.uint8, np.bool_]
# refusals that depend on the values numpy was given, not on shapes and dtypes
BY_VALUE = re.compile(r"singular|positive definite|negative integer powers|did not converge",
                      re.IGNORECASE)

# where the rule is stricter than the forward, as numpy is: eigh's forward symmetrizes
# (a + a.T) / 2 first, which broadcasts a (1, n) input to (n, n) (numpy.linalg.eigh and op.eigh
# refuse it); matmul's forward multiplies when x's last axis is 1 (an outer product), without
# checking that y has one row (np.matmul refuses (3, 1) @ (3, 4); the forward gives (3, 4))
# cholesky's forward answers an empty stack of non-square matrices where numpy refuses it;
# betainc's forward ignores inputs beyond x, a and b (the rule refuses them)
STRICTER = {"eigh": lambda shapes, a: shapes[0][-1] != shapes[0][-2],
            "cholesky": lambda shapes, a: shapes[0][-1] != shapes[0][-2],
            "matmul": lambda shapes, a: min(map(len, shapes)) >= 2 and shapes[0][-1] == 1 and
            shapes[1][-2] != 1,
            "betainc": lambda shapes, a: len(shapes) - 1 + ("a" in a) + ("b" in a) > 2}
CHECKED = []    # one entry per comparison made (the test asserts it compared many)


def missing_rules(registry: dict) -> list[str]:
    """The names of the primitives whose schema has no shape rule."""
    return sorted(name for name, p in registry.items()
                  if not isinstance(p.schema, Schema) or p.schema.rule is None)


def test_every_primitive_has_a_shape_rule():
    assert missing_rules(sg.REGISTRY) == []


def test_a_primitive_without_a_rule_is_listed():
    bare = Primitive("bare", np.negative, [None], None, "-{0}", [], schema=attrs())
    assert missing_rules({**sg.REGISTRY, "bare": bare}) == ["bare"]
    assert missing_rules({"none": Primitive("none", np.negative, [None], None, "-{0}", [])}) \
        == ["none"]
    with pytest.raises(ShapeRuleError, match="no shape rule"):
        bare.schema.abstract([(3,)], [np.dtype(float)], None)


def _variants(shapes: tuple) -> list[tuple]:
    """The case's shapes, then broadcasting variants of them."""
    out = [shapes]
    for i, s in enumerate(shapes):
        if s:
            out.append(shapes[:i] + ((2,) + s,) + shapes[i + 1:])
            if s[0] != 1:
                out.append(shapes[:i] + ((1,) + s[1:],) + shapes[i + 1:])
    out.append(tuple((2,) + s for s in shapes))
    return list(dict.fromkeys(out))


def _forward(prim: Primitive, args: list, attrs_: dict) -> tuple:
    """(shape, dtype) of the forward, or the exception it raised."""
    try:
        with np.errstate(all="ignore"):
            out = prim.forward(*args, **attrs_)
        return np.shape(out), np.result_type(out)
    except Exception as e:      # noqa: BLE001 (what numpy refuses, the rule must refuse)
        return e


def _spec(a: Any) -> tuple:
    """(shape, dtype) of an input as the loader sees it: Python numbers weak."""
    if type(a) in (int, float):
        return (), type(a)
    return np.shape(a), np.result_type(a)


def _check(prim: Primitive, args: list, attrs_: dict, where: str) -> None:
    specs = [_spec(a) for a in args]
    shapes, dtypes = [s for s, _ in specs], [d for _, d in specs]
    if prim.schema.problem(attrs_, shapes) is not None:
        return              # the loader refuses these attributes before the rule
    got = _forward(prim, args, attrs_)
    if isinstance(got, Exception):
        if BY_VALUE.search(str(got)) or isinstance(got, MemoryError):
            return          # a value numpy refuses, or terabytes the loader's limit refuses
        with pytest.raises(ShapeRuleError):
            prim.schema.abstract(shapes, dtypes, attrs_)
            pytest.fail(f"{where}: the forward raised {type(got).__name__}: {got}, the rule "
                        f"did not")
        return
    want = (tuple(got[0]), np.dtype(got[1]))
    CHECKED.append(where)
    try:
        rule = prim.schema.abstract(shapes, dtypes, attrs_)
    except ShapeRuleError as e:
        if prim.name in STRICTER and STRICTER[prim.name](shapes, attrs_):
            return
        pytest.fail(f"{where}: the forward gave {want}, the rule raised {e}")
    assert rule == want, where


def _inputs(prim: Primitive, case: sg.Case, shapes: tuple, rng: np.random.Generator) -> list:
    """Float64 inputs of ``shapes``, from the case's samplers where they take the shape."""
    out = []
    for draw, s in zip(samplers(prim, case), shapes):
        try:
            out.append(np.asarray(draw(rng, s), dtype=np.float64))
        except ValueError:      # a matrix sampler given a variant's shape
            out.append(rng.uniform(-2.0, 2.0, s))
    return out


def _cast(case: sg.Case, xs: list, dtype: Any) -> list:
    return [x > 0 if i in case.conditions else x.astype(dtype) for i, x in enumerate(xs)]


def _attr_variants(prim: Primitive, case: sg.Case) -> list[dict]:
    """The case's attributes, each optional one left out (the forward's default), and each
    set to None where the schema allows it."""
    out = [case.attrs]
    for name, check in prim.schema.checks.items():
        if name in case.attrs and name not in prim.schema.required:
            out.append({k: v for k, v in case.attrs.items() if k != name})
        if case.attrs.get(name) is not None and check(None, case.shapes) is None:
            out.append({**case.attrs, name: None})
    return out


@pytest.mark.filterwarnings("ignore")       # numpy's, on random data (cross's 2-vectors, ...)
@pytest.mark.parametrize("prim", list(sg.REGISTRY.values()), ids=lambda p: p.name)
def test_the_rule_gives_what_numpy_gives(prim, rng):
    before = len(CHECKED)
    for k, case in enumerate(prim.cases):
        for a in _attr_variants(prim, case)[1:]:
            for dtype in (np.float64, np.int32):
                _check(prim, _cast(case, _inputs(prim, case, case.shapes, rng), dtype), a,
                       f"{prim.name} case {k} attributes {a} {np.dtype(dtype)}")
        for variant in _variants(case.shapes):
            xs = _inputs(prim, case, variant, rng)
            dtypes = DTYPES if variant == case.shapes else [np.float64, np.int64]
            for dtype in dtypes:
                _check(prim, _cast(case, xs, dtype), case.attrs,
                       f"{prim.name} case {k} shapes {variant} {np.dtype(dtype)}")
        xs = _cast(case, _inputs(prim, case, case.shapes, rng), np.float32)
        for i, x in enumerate(xs):
            if i not in case.conditions:     # a Python number (weak), whatever the case's shape
                for number in (float(x.flat[0]) if x.size else 0.5, int(x.flat[0]) if x.size
                               else 1):
                    args = xs[:i] + [number] + xs[i + 1:]
                    _check(prim, args, case.attrs,
                           f"{prim.name} case {k} input {i} a Python {type(number).__name__}")
    assert len(CHECKED) - before >= 7 * len(prim.cases) // 2, "too few inputs were compared"


# ---------------------------------------------------------------- random shapes

_shape = st.lists(st.integers(0, 3), max_size=3).map(tuple)
_axis = st.integers(-3, 2) | st.none()
# primitive: (numpy's own function of the inputs and attributes, attributes from a draw)
_RANDOM = {
    "add": (np.add, lambda d: {}),
    "where": (np.where, lambda d: {}),
    "matmul": (np.matmul, lambda d: {}),
    "concatenate": (lambda *xs, axis: np.concatenate(xs, axis=axis),
                    lambda d: {"axis": d.draw(_axis)}),
    "stack": (lambda *xs, axis: np.stack(xs, axis=axis),
              lambda d: {"axis": d.draw(st.integers(-3, 3))}),
    "expand": (np.broadcast_to, lambda d: {"shape": d.draw(_shape)}),
    "sum": (np.sum, lambda d: {"axis": d.draw(_axis), "keepdims": d.draw(st.booleans())}),
    "reshape": (np.reshape,
                lambda d: {"shape": d.draw(st.lists(st.integers(-1, 4), max_size=3).map(tuple))}),
    "tile": (np.tile, lambda d: {"reps": d.draw(st.lists(st.integers(0, 2), max_size=3)
                                                .map(tuple))}),
    "transpose": (np.transpose, lambda d: {"axes": d.draw(st.permutations(range(3)).map(tuple)
                                                          | st.none())}),
    "diagonal": (np.diagonal, lambda d: {"offset": d.draw(st.integers(-3, 3))}),
}
_ARITY = {"where": 3, "add": 2, "matmul": 2}


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_rules_on_random_shapes_are_numpys(data):
    """Random shapes (sizes 0 to 3, ranks 0 to 3) and attributes: the rule's shape and dtype
    are those of numpy's own function on zeros of those shapes, or both refuse (attributes
    the schema refuses are skipped)."""
    name = data.draw(st.sampled_from(sorted(_RANDOM)))
    prim, (numpy_fn, draw_attrs) = sg.REGISTRY[name], _RANDOM[name]
    arity = _ARITY.get(name, data.draw(st.integers(1, 3)) if prim.variadic else 1)
    args = [np.zeros(data.draw(_shape)) for _ in range(arity)]
    attrs_ = draw_attrs(data)
    shapes, dtypes = [a.shape for a in args], [a.dtype for a in args]
    if prim.schema.problem(attrs_, shapes) is not None:
        return
    try:
        out = numpy_fn(*args, **attrs_)
    except (ValueError, TypeError, IndexError):
        with pytest.raises(ShapeRuleError):
            prim.schema.abstract(shapes, dtypes, attrs_)
        return
    assert prim.schema.abstract(shapes, dtypes, attrs_) == (np.shape(out), out.dtype), \
        (name, shapes, attrs_)


# ---------------------------------------------------------------- random attributes

_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-4, 4), st.sampled_from([2**62, -2**62, 10**12]),
    st.floats(-3, 3), st.lists(st.integers(-2, 4), max_size=3).map(tuple),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=3).map(tuple),
    st.sampled_from(["Q", "R", "U", "S", "Vh", "eigenvalues", "eigenvectors", "L", "numpy",
                     "ij,jk->ik", "i->", "ii->i", "ab,b->a"]),
    st.lists(st.integers(-3, 3), max_size=4).map(lambda v: np.array(v, dtype=int)),
    st.lists(st.sampled_from([0, 1, -1, slice(None), slice(0, 2), None, Ellipsis,
                              np.array([0, 1]), np.array([True, False])]), max_size=3)
    .map(tuple),
    st.sampled_from([np.dtype("float32"), np.dtype("int8"), np.dtype("bool")]))
_INPUT_DTYPES = [np.float64, np.float32, np.float16, np.int64, np.int8, np.uint8, np.bool_]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
@settings(max_examples=400, deadline=None)
@given(st.data())
def test_rules_on_random_attributes_and_inputs(data):
    """Any primitive, random small shapes and dtypes (Python numbers for some 0-d inputs) and
    random attributes its schema accepts: the rule agrees with the forward run on stand-ins
    (0.5, 1 or True; 2 I + 0.1 for square matrices), or both refuse."""
    prim = data.draw(st.sampled_from(sorted(sg.REGISTRY.values(), key=lambda p: p.name)))
    n = data.draw(st.integers(1, 3)) if prim.variadic else len(prim.vjp)
    args = []
    for _ in range(n):
        shape = data.draw(st.lists(st.integers(0, 3), max_size=3).map(tuple))
        if not shape and data.draw(st.booleans()):
            args.append(data.draw(st.sampled_from([1, 0.5])))
        else:
            args.append(np.array(stand_in(shape, np.dtype(data.draw(st.sampled_from(
                _INPUT_DTYPES))))))
    attrs_ = {k: data.draw(_VALUES) for k in sorted(prim.schema.checks)
              if data.draw(st.booleans())}
    _check(prim, args, attrs_, f"{prim.name} {[_spec(a) for a in args]} {attrs_}")


def test_pad_refuses_a_fill_its_dtype_cannot_hold_as_numpy_does():
    # numpy: 300 overflows int8 (OverflowError), -1 wraps into uint8 (255)
    pad = sg.primitives.REGISTRY["pad"]
    attrs_ = {"constant_values": 300, "pad_width": ((1, 1),)}
    with pytest.raises(OverflowError):
        pad.forward(np.zeros(2, np.int8), **attrs_)
    with pytest.raises(ShapeRuleError):
        pad.schema.abstract([(2,)], [np.dtype(np.int8)], attrs_)
    attrs_["constant_values"] = -1
    assert pad.forward(np.zeros(2, np.uint8), **attrs_).dtype == np.uint8
    assert pad.schema.abstract([(2,)], [np.dtype(np.uint8)], attrs_) == ((4,), np.uint8)
