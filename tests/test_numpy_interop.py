"""numpy functions on Variables: recorded as primitives where a rule exists, refused otherwise."""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg


@pytest.fixture
def env():
    op = sg.Ops()
    return op, op.var(np.array([0.5, 2.0]), name="x")


@pytest.mark.parametrize("fn, derivative", [
    (np.exp, np.exp), (np.log, lambda v: 1 / v), (np.sqrt, lambda v: 0.5 / np.sqrt(v)),
    (np.sin, np.cos), (np.cos, lambda v: -np.sin(v)), (np.tanh, lambda v: 1 - np.tanh(v) ** 2),
    (np.negative, lambda v: -np.ones_like(v)), (np.absolute, np.sign),
], ids=lambda f: getattr(f, "__name__", ""))
def test_unary_ufuncs_are_recorded_with_their_derivative(env, fn, derivative):
    op, x = env
    y = fn(x)
    assert isinstance(y, sg.Variable) and y.prim is not None
    np.testing.assert_allclose(y.value, fn(x.value))
    np.testing.assert_allclose(op.grad(y.sum(), x).value, derivative(x.value), rtol=1e-14)


def test_binary_ufuncs_and_numpy_on_the_left(env):
    op, x = env
    A = np.array([[1.0, 2.0], [3.0, 4.0]])
    cases = [np.add(1.0, x), np.subtract(x, 1.0), np.multiply(A[0], x), np.true_divide(x, 2.0),
             np.power(x, 2.0), np.maximum(x, 1.0), np.minimum(x, 1.0), A @ x,
             np.float64(2) * x]
    assert all(isinstance(c, sg.Variable) for c in cases)
    g = op.grad((A @ x).sum(), x)
    np.testing.assert_array_equal(g.value, A.sum(axis=0))      # d/dx sum(A x) = A^T 1


def test_reductions_through_numpy_functions(env):
    op, x = env
    for fn in (np.sum, np.mean, np.max, np.min):
        y = fn(x)
        assert isinstance(y, sg.Variable) and y.value == fn(x.value)
    np.testing.assert_array_equal(op.grad(np.mean(x * x), x).value, x.value)  # d/dx mean x^2


def test_comparisons_record_and_equality_stays_identity(env):
    _, x = env
    a = np.array([1.0, 1.0])
    assert np.greater(a, x).value.tolist() == [True, False]
    assert (a > x).value.tolist() == [True, False]
    assert isinstance(a > x, sg.Variable)
    assert (x == a) is False and (a == x) is False and (x != a) is True
    assert x == x


@pytest.mark.parametrize("call", [
    lambda x: np.asarray(x), lambda x: np.nanmedian(x), lambda x: np.cbrt(x),
    lambda x: np.add.reduce(x), lambda x: np.exp(x, out=np.zeros(2)),
    lambda x: np.sum(x, dtype=np.int64),
], ids=["asarray", "nanmedian", "cbrt", "reduce", "out", "dtype"])
def test_what_numpy_cannot_record_is_refused_clearly(env, call):
    op, x = env
    before = len(op.tape)
    with pytest.raises(sg.ArgumentError, match="x"):
        call(x)
    assert len(op.tape) == before


def test_constants_are_copied_unless_nothing_can_write_them(env):
    op, x = env
    y = op.var([3.0, 4.0])
    value = x.value                         # a leaf's value: read-only all the way down
    kept = y * value
    assert kept.inputs[1] is value          # recorded as it is, no copy
    a = np.array([1.0, 2.0])
    view = a.view()
    view.flags.writeable = False            # read-only view of a writable array: copied
    for constant in (a, view):
        z = y * constant
        a[0] = 100.0
        np.testing.assert_array_equal(op.grad(z.sum(), y).value, [1.0, 2.0])
        a[0] = 1.0
