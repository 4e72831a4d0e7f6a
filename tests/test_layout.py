"""Layout operations: values against numpy, derivatives at orders 1-2, sort at ties, masks.

Oracles: numpy's own functions for values; sg.check_grads (float64 central differences,
eps=1e-6, atol=rtol=1e-6, reverse and forward mode, orders 1 and 2) for derivatives;
hand-derived gradients for sort at ties and for where-masks passing through flip and roll.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.errors import ArgumentError, AxisError, OutOfBoundsError, ShapeError

TOL = {"atol": 1e-6, "rtol": 1e-6}

# (id, simplegrad call on (op, x), numpy call on an array, input shape)
LAYOUTS = [
    ("squeeze", lambda o, x: o.squeeze(x), np.squeeze, (1, 3, 1)),
    ("squeeze-axis", lambda o, x: x.squeeze(axis=0), lambda a: np.squeeze(a, 0), (1, 3, 1)),
    ("expand_dims", lambda o, x: o.expand_dims(x, (0, -1)),
     lambda a: np.expand_dims(a, (0, -1)), (2, 3)),
    ("moveaxis", lambda o, x: o.moveaxis(x, 0, -1), lambda a: np.moveaxis(a, 0, -1), (2, 3, 4)),
    ("moveaxis-many", lambda o, x: o.moveaxis(x, [0, 1], [2, 0]),
     lambda a: np.moveaxis(a, [0, 1], [2, 0]), (2, 3, 4)),
    ("swapaxes", lambda o, x: x.swapaxes(0, 2), lambda a: a.swapaxes(0, 2), (2, 3, 4)),
    ("flip", lambda o, x: o.flip(x), np.flip, (2, 3)),
    ("flip-axis", lambda o, x: o.flip(x, axis=1), lambda a: np.flip(a, 1), (2, 3)),
    ("roll", lambda o, x: o.roll(x, 2), lambda a: np.roll(a, 2), (2, 3)),
    ("roll-axes", lambda o, x: o.roll(x, (1, -1), axis=(0, 1)),
     lambda a: np.roll(a, (1, -1), axis=(0, 1)), (2, 3)),
    ("pad", lambda o, x: o.pad(x, 1), lambda a: np.pad(a, 1), (2, 3)),
    ("pad-widths", lambda o, x: o.pad(x, ((0, 2), (1, 0)), constant_values=-1.0),
     lambda a: np.pad(a, ((0, 2), (1, 0)), constant_values=-1.0), (2, 3)),
    ("repeat", lambda o, x: x.repeat(2), lambda a: a.repeat(2), (2, 3)),
    ("repeat-axis", lambda o, x: o.repeat(x, 3, axis=0), lambda a: np.repeat(a, 3, 0), (2, 3)),
    ("repeat-counts", lambda o, x: o.repeat(x, [2, 0, 1], axis=1),
     lambda a: np.repeat(a, [2, 0, 1], 1), (2, 3)),
    ("tile", lambda o, x: o.tile(x, 2), lambda a: np.tile(a, 2), (2, 3)),
    ("tile-longer", lambda o, x: o.tile(x, (2, 1, 2)), lambda a: np.tile(a, (2, 1, 2)), (2, 3)),
    ("ravel", lambda o, x: x.ravel(), np.ravel, (2, 3)),
    ("flatten", lambda o, x: x.flatten(), lambda a: a.flatten(), (2, 3)),
    ("broadcast_to", lambda o, x: o.broadcast_to(x, (2, 2, 3)),
     lambda a: np.broadcast_to(a, (2, 2, 3)), (2, 3)),
    ("sort", lambda o, x: x.sort(), np.sort, (2, 3)),
    ("sort-axis0", lambda o, x: o.sort(x, axis=0), lambda a: np.sort(a, 0), (3, 2)),
    ("sort-flat", lambda o, x: o.sort(x, axis=None), lambda a: np.sort(a, None), (2, 3)),
    ("take", lambda o, x: x.take([4, 0, 0]), lambda a: a.take([4, 0, 0]), (2, 3)),
    ("take-axis", lambda o, x: o.take(x, [[2, 0], [1, 1]], axis=1),
     lambda a: np.take(a, [[2, 0], [1, 1]], axis=1), (2, 3)),
    ("take-recorded", lambda o, x: o.take(x, o.argsort(x[0]), axis=1),
     lambda a: np.take(a, np.argsort(a[0]), axis=1), (2, 3)),
    ("take-recorded-scalar", lambda o, x: o.take(x, o.argsort(x[0])[0], axis=1),
     lambda a: np.take(a, np.argsort(a[0])[0], axis=1), (2, 3)),
    ("take_along_axis", lambda o, x: o.take_along_axis(x, np.array([[1, 0, 1]]), axis=0),
     lambda a: np.take_along_axis(a, np.array([[1, 0, 1]]), axis=0), (2, 3)),
    ("take_along_axis-recorded",
     lambda o, x: o.take_along_axis(x, o.argsort(x, axis=0)[:1], axis=0),
     lambda a: np.take_along_axis(a, np.argsort(a, axis=0)[:1], axis=0), (2, 3)),
    ("hstack", lambda o, x: o.hstack([x, x[:, :1]]), lambda a: np.hstack([a, a[:, :1]]), (2, 3)),
    ("hstack-vectors", lambda o, x: o.hstack([x[0], x[1, 0]]),
     lambda a: np.hstack([a[0], a[1, 0]]), (2, 3)),
    ("vstack", lambda o, x: o.vstack([x, x[0]]), lambda a: np.vstack([a, a[0]]), (2, 3)),
]


@pytest.mark.parametrize("name, f, reference, shape", LAYOUTS, ids=[p[0] for p in LAYOUTS])
def test_layout_matches_numpy_and_differentiates_at_order_2(name, f, reference, shape, rng):
    a = rng.permutation(np.prod(shape)).reshape(shape) + rng.uniform(0.1, 0.4, shape)
    op = sg.Ops()
    np.testing.assert_array_equal(f(op, op.var(a)).value, reference(a))
    # distinct values at least 0.6 apart: the sort order is fixed within eps of the samples
    sg.check_grads(lambda x: f(x.ops, x), [a], order=2, **TOL)


@pytest.mark.parametrize("sections, axis", [(2, 0), (3, 1), ([1, 2], 1), ([2], 0)])
@pytest.mark.parametrize("fn", ["split", "array_split"])
def test_split_parts_match_numpy_and_differentiate(fn, sections, axis, rng):
    a = rng.uniform(-1.0, 1.0, (4, 3))
    op = sg.Ops()
    parts = getattr(op, fn)(op.var(a), sections, axis=axis)
    expected = getattr(np, fn)(a, sections, axis=axis)
    assert len(parts) == len(expected)
    for p, e in zip(parts, expected):
        assert p.prim.name == "getitem"
        np.testing.assert_array_equal(p.value, e)
    weights = [np.arange(e.size, dtype=float).reshape(e.shape) for e in expected]

    def f(x):
        ps = getattr(x.ops, fn)(x, sections, axis=axis)
        return sum(((p * p) * w).sum() for p, w in zip(ps, weights))
    sg.check_grads(f, [a], order=2, **TOL)


def test_array_split_unequal_parts():
    op = sg.Ops()
    parts = op.array_split(op.var(np.arange(5.0)), 3)
    assert [p.shape for p in parts] == [(2,), (2,), (1,)]


# ---------------------------------------------------------------- sort

def test_sort_records_argsort_and_gather():
    op = sg.Ops()
    x = op.var([3.0, 1.0, 2.0], name="x")
    y = x.sort()
    assert op.format_trace().splitlines()[-2:] == [
        "v0 = x.argsort(axis=0)", f"{y.name} = take_along_axis(x, v0, axis=0)"]
    assert y.inputs[1].dtype == np.int64 and not y.inputs[1].requires_grad


def test_sort_gradient_at_ties_follows_the_stable_order():
    # x = [1, 1, 0]: the stable order is [2, 0, 1], so sorted position k's cotangent w[k] goes
    # to input argsort[k]: d/dx <w, sort(x)> = [w[1], w[2], w[0]]
    op = sg.Ops()
    x = op.var([1.0, 1.0, 0.0])
    w = np.array([10.0, 20.0, 30.0])
    g = op.grad((x.sort() * w).sum(), x)
    np.testing.assert_array_equal(g.value, [20.0, 30.0, 10.0])
    # second order: the gradient is linear in w and piecewise constant in x, so zero
    np.testing.assert_array_equal(op.grad((g * g).sum(), x).value, np.zeros(3))
    # forward mode: the tangent is permuted the same way
    np.testing.assert_array_equal(op.jvp(x.sort(), x, np.array([1.0, 2.0, 3.0])).value,
                                  [3.0, 1.0, 2.0])


def test_sort_square_second_derivative_closed_form():
    # f(x) = sum_k w_k sort(x)_k^2: df/dx_i = 2 w_{rank(i)} x_i, d2f/dx_i2 = 2 w_{rank(i)}
    xv = np.array([0.5, -1.0, 2.0, 0.0])
    w = np.array([1.0, 2.0, 3.0, 4.0])
    rank = np.argsort(np.argsort(xv))
    op = sg.Ops()
    x = op.var(xv)
    g = op.grad((x.sort() ** 2 * w).sum(), x)
    np.testing.assert_allclose(g.value, 2 * w[rank] * xv, rtol=1e-15)
    np.testing.assert_allclose(op.grad(g.sum(), x).value, 2 * w[rank], rtol=1e-15)


def test_sort_gradient_program_does_not_depend_on_the_values():
    def lines(values):
        op = sg.Ops()
        x = op.var(np.array(values))
        g = op.grad((x.sort() ** 2 * np.arange(4.0)).sum(), x)
        op.grad(g.sum(), x)
        return op.format_trace().splitlines()[1:]
    assert lines([3.0, 1.0, 2.0, 0.0]) == lines([0.0, 1.0, 2.0, 3.0])


def test_sort_gradient_program_replays_at_new_inputs():
    # recorded where x is [3, 1, 2, 0], run where the order is reversed: the argsort entry is
    # part of the program, so the replayed gradient is the fresh recording's, not a stale one
    w = np.arange(4.0)

    def record(values):
        op = sg.Ops()
        x = op.var(np.array(values))
        g = op.grad((x.sort() ** 2 * w).sum(), x)
        return op.program([x], [g, op.grad(g.sum(), x)]), g.value

    program, _ = record([3.0, 1.0, 2.0, 0.0])
    there = [0.5, 1.5, 2.5, 3.5]
    got = program(np.array(there))
    _, fresh = record(there)
    np.testing.assert_allclose(got[0], fresh, rtol=1e-15)
    np.testing.assert_allclose(got[0], 2 * w * np.array(there), rtol=1e-15)
    np.testing.assert_allclose(got[1], 2 * w, rtol=1e-15)


# ---------------------------------------------------------------- masks of where

# f(x) = where(x > 0, sqrt(x) * x, 0) = x^(3/2) on x > 0: f' = 1.5 sqrt(x), f'' = 0.75 / sqrt(x)
MASKED = {
    "flip": lambda x: x.ops.where(x.ops.flip(x) > 0, x.ops.flip(x.sqrt() * x), 0.0),
    "roll": lambda x: x.ops.where(x.ops.roll(x, 2) > 0, x.ops.roll(x.sqrt() * x, 2), 0.0),
    "moveaxis": lambda x: x.ops.where(
        x.reshape(2, 3).swapaxes(0, 1) > 0, (x.sqrt() * x).reshape(2, 3).swapaxes(0, 1), 0.0),
    "squeeze": lambda x: x.ops.where(
        x > 0, x.ops.squeeze(x.ops.expand_dims(x.sqrt() * x, 0)), 0.0),
}


@pytest.mark.parametrize("variant", list(MASKED))
def test_where_mask_passes_through_rearrangements_at_order_2(variant):
    xv = np.array([0.0, 1.0, 4.0, -1.0, 0.25, 0.0])
    pos = xv > 0
    safe = np.where(pos, xv, 1.0)
    op = sg.Ops()
    x = op.var(xv)
    with warnings.catch_warnings():     # the untaken values may warn; the gradients are exact
        warnings.simplefilter("ignore", RuntimeWarning)
        y = MASKED[variant](x).sum()
        g = op.grad(y, x)
        h = op.grad(g.sum(), x)
    np.testing.assert_allclose(g.value, np.where(pos, 1.5 * np.sqrt(safe), 0.0), rtol=1e-14)
    np.testing.assert_allclose(h.value, np.where(pos, 0.75 / np.sqrt(safe), 0.0), rtol=1e-14)


# ---------------------------------------------------------------- errors

def test_layout_errors_raise_before_recording():
    op = sg.Ops()
    x = op.var(np.ones((2, 3)))
    idx, idx0 = op.argsort(x), op.argsort(x[0])
    calls = [
        (lambda: op.squeeze(x, 1), ShapeError),
        (lambda: op.moveaxis(x, 0, 5), AxisError),
        (lambda: op.flip(x, 2), AxisError),
        (lambda: op.roll(x, (1, 2), axis=0), ArgumentError),
        (lambda: op.pad(x, 1, mode="reflect"), ArgumentError),
        (lambda: op.pad(x, -1), ArgumentError),
        (lambda: op.repeat(x, [1, 2], axis=1), ArgumentError),
        (lambda: op.split(x, 2, axis=1), ShapeError),
        (lambda: op.take(x, [0.5]), ArgumentError),
        (lambda: op.take_along_axis(x, np.array([0, 1]), axis=0), ShapeError),
        (lambda: op.take_along_axis(x, idx, axis=3), AxisError),
        (lambda: op.take_along_axis(np.ones(3), op.var(np.zeros(3)), 0), ArgumentError),
        (lambda: op.take_along_axis(np.ones(2), idx0, 0), OutOfBoundsError),
        (lambda: op.take_along_axis(x, x, axis=0), ArgumentError),
        (lambda: op.expand_dims(x, 3), AxisError),
        (lambda: op.take(x, [6]), OutOfBoundsError),           # after a ravel it would record
        (lambda: op.take_along_axis(x, np.array([-7]), axis=None), OutOfBoundsError),
        (lambda: op.take_along_axis(x, np.ones((3, 1), dtype=int), axis=1), ShapeError),
        (lambda: op.hstack([x, op.var(np.ones(4))]), ShapeError),
        (lambda: op.vstack([x, op.var(np.ones(4))]), ShapeError),
        (lambda: op.split(x, [1], axis=2), AxisError),
    ]
    for call, kind in calls:
        before = len(op.tape)
        with pytest.raises(kind):
            call()
        assert len(op.tape) == before, call


def test_out_of_range_indices_raise_index_error():
    op = sg.Ops()
    x = op.var(np.ones(3))
    with pytest.raises(OutOfBoundsError, match="take_along_axis"):
        op.take_along_axis(x, np.array([3]), axis=0)
