"""Axes under vmap are one example's axes: out of range, they raise as they would outside.

A batching rule moves a per-example axis past the batch axis; it must check the axis against
one example's rank first, or an out-of-range axis lands in range of the stack and answers
silently. The registry is walked: every primitive with an axis attribute (``axis``, ``axes``,
``axis1``, ``axis2``) in one of its cases is tried with axes just inside and just outside
one example's rank. Outside vmap, on one example, numpy's answer decides: where it raises,
vmap raises ``sg.AxisError`` too (naming the operation, the axis and one example's shape,
with nothing recorded); where it answers, vmap answers the same for every example. ``in_axes``
and ``out_axes`` out of range raise ``sg.AxisError`` as well.
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from tests.test_primitives import case_id, samplers

B = 3
KEYS = ("axis", "axes", "axis1", "axis2")


def _params() -> list:
    params = []
    for prim in sg.REGISTRY.values():
        for case in prim.cases:
            if case.conditions:
                continue
            for key in KEYS:
                if case.attrs.get(key) is not None:
                    params.append(pytest.param(prim, case, key,
                                               id=f"{prim.name}-{case_id(case)}-{key}"))
    return params


def test_every_axis_primitive_is_covered() -> None:
    """Each primitive whose forward takes an axis has a case that sets it (so it is tried)."""
    covered = {p.values[0].name for p in _params()}
    for prim in sg.REGISTRY.values():
        names = prim.forward.__code__.co_varnames[:prim.forward.__code__.co_argcount + 2] \
            if hasattr(prim.forward, "__code__") else ()
        if any(k in names for k in KEYS):
            assert prim.name in covered, f"{prim.name}: no case sets its axis"


def _with(axis: object, bad: int) -> object:
    """The attribute with its last axis replaced by ``bad``."""
    return bad if not isinstance(axis, tuple) else axis[:-1] + (bad,)


@pytest.mark.parametrize(("prim", "case", "key"), _params())
def test_axis_under_vmap_as_outside(prim: sg.Primitive, case: sg.Case, key: str,
                                    rng: np.random.Generator) -> None:
    values = [np.stack([np.asarray(draw(rng, shape)) for _ in range(B)]) for draw, shape in
              zip(samplers(prim, case), case.shapes)]
    values = [v.astype(np.complex128 if np.iscomplexobj(v) else np.float64) for v in values]
    n = max(len(s) for s in case.shapes) + 1
    raised = 0
    for bad in (-n - 2, -n - 1, -n, n - 1, n, n + 2):
        attrs = dict(case.attrs)
        attrs[key] = _with(attrs[key], bad)
        op = sg.Ops()
        try:
            per = [np.asarray(op.apply(prim, [op.var(v[k]) for v in values], attrs).value)
                   for k in range(B)]
        except sg.AxisError:
            per = None
        except sg.SimplegradError:
            continue            # not an axis error outside (a shape mismatch): not ours here

        recorded: list[int] = []

        def f(*xs: sg.Variable, attrs: dict = attrs, recorded: list = recorded) -> sg.Variable:
            ops = xs[0].ops
            before = len(ops.tape)
            try:
                return ops.apply(prim, xs, attrs)
            finally:
                recorded.append(len(ops.tape) - before)

        if per is not None:
            got = sg.vmap(f)(*values)
            np.testing.assert_allclose(got, np.stack(per), rtol=1e-12, atol=1e-12)
            continue
        raised += 1
        with pytest.raises(sg.AxisError) as info:
            sg.vmap(f)(*values)
        message = str(info.value)
        assert message.startswith(f"{prim.name}: "), message
        assert f"axis {bad} " in message, message
        assert any(str(tuple(s)) in message for s in case.shapes), message
        assert recorded == [0], f"{prim.name}: {recorded[0]} entries recorded before raising"
        # the same with only the first input batched (the others shared by every example)
        if len(values) > 1:
            with pytest.raises(sg.AxisError):
                sg.vmap(f, in_axes=(0,) + (None,) * (len(values) - 1))(
                    values[0], *[v[0] for v in values[1:]])
    assert raised, f"{prim.name}: no out-of-range {key} was tried"


def test_the_issue_example() -> None:
    """sum(axis=5) of one example of shape (3,): numpy's AxisError, not [3, 3, 3, 3]."""
    with pytest.raises(sg.AxisError, match=r"sum: axis 5 is out of bounds .*\(3,\)"):
        sg.vmap(lambda x: x.sum(axis=5))(np.ones((4, 3)))
    with pytest.raises(np.exceptions.AxisError):        # numpy's habit catches it
        sg.vmap(lambda x: np.sum(x, axis=1))(np.ones((4, 3)))
    with pytest.raises(IndexError):
        sg.vmap(lambda x: x.mean(axis=-2))(np.ones((4, 3)))
    np.testing.assert_array_equal(sg.vmap(lambda x: x.sum(axis=-1))(np.ones((4, 3))), [3.0] * 4)


def test_axes_of_the_inner_example_under_two_vmaps() -> None:
    xs = np.ones((2, 3, 4))
    inner = sg.vmap(sg.vmap(lambda x: x.sum(axis=0)))
    np.testing.assert_array_equal(inner(xs), np.full((2, 3), 4.0))
    with pytest.raises(sg.AxisError, match=r"\(4,\)"):
        sg.vmap(sg.vmap(lambda x: x.sum(axis=1)))(xs)
    with pytest.raises(sg.AxisError):
        sg.vmap(sg.vmap(lambda x: x.softmax(axis=-2)))(xs)


def test_methods_that_rearrange_check_one_example() -> None:
    """Re-arrangements recorded as shape primitives check the axis against one example too."""
    xs = np.ones((4, 2, 3))
    for f in (lambda x: x.swapaxes(0, 2), lambda x: np.moveaxis(x, 2, 0),
              lambda x: np.expand_dims(x, 3), lambda x: x.squeeze(axis=2),
              lambda x: np.flip(x, 2), lambda x: np.cumsum(x, axis=2),
              lambda x: np.concatenate([x, x], axis=2), lambda x: np.stack([x, x], axis=3),
              lambda x: x.argmax(axis=2), lambda x: np.take_along_axis(
                  x, np.zeros((1, 1), dtype=int), axis=2)):
        with pytest.raises(sg.AxisError, match=r"\(2, 3\)"):
            sg.vmap(f)(xs)


def test_in_axes_out_of_range() -> None:
    with pytest.raises(sg.AxisError, match="in_axes 3 .* \\(2, 3, 4\\)"):
        sg.vmap(lambda x: x * 2, in_axes=3)(np.ones((2, 3, 4)))
    with pytest.raises(sg.AxisError, match="in_axes -4"):
        sg.vmap(lambda x, y: x * y, in_axes=(0, -4))(np.ones((2, 3)), np.ones((2, 3, 4)))
    assert sg.vmap(lambda x: x.sum(), in_axes=-1)(np.ones((2, 3, 4))).shape == (4,)


def test_out_axes_out_of_range() -> None:
    """A rank-3 result (examples of shape (3, 4)) takes out_axes in [-3, 3)."""
    xs = np.arange(24.0).reshape(2, 3, 4)
    for ax in (-4, 3, 7):
        with pytest.raises(sg.AxisError, match=f"out_axes {ax} .*\\(3, 4\\)"):
            sg.vmap(lambda x: x * 2, out_axes=ax)(xs)
    for ax in range(-3, 3):
        np.testing.assert_array_equal(sg.vmap(lambda x: x * 2, out_axes=ax)(xs),
                                      np.moveaxis(xs * 2, 0, ax))
    # an output the same for every example is expanded, and checked the same way
    with pytest.raises(sg.AxisError, match="out_axes 2"):
        sg.vmap(lambda x: (x * 2, np.ones(3)), out_axes=(0, 2))(xs)
    assert sg.vmap(lambda x: (x * 2, np.ones(3)), out_axes=(0, -1))(xs)[1].shape == (3, 2)
