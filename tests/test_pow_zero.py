"""pow at zero: the derivatives PyTorch, JAX and autograd agree on, at orders 1-3 and in jvp.

Closed forms, exact: d/dx x ** 0 = 0 everywhere (x = 0 included, where y x ** (y - 1) is
0 * inf); d/dy 0 ** y = 0 for y > 0 (x ** y log x is 0 * -inf), and so are its higher
derivatives; x ** 1.0 has first derivative 1 and second derivative 0 at 0.
Order k is the gradient of the sum of order k - 1, recorded (create_graph=True); the last
order is also taken value-only. The exponent is a Python number, a constant array, or a
Variable (the zero test is then a recorded comparison, valid at any input).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import simplegrad as sg

X = np.array([0.0, 1.5, 0.0, -0.7])


def _derivatives(f, wrt: sg.Variable, order: int = 3) -> list[np.ndarray]:
    """Order 1..order of sum(f()) with respect to wrt (elementwise functions: diagonal)."""
    op = wrt.ops
    d = f()
    out = []
    for _ in range(order):
        plain = op.grad(d.sum(), wrt, create_graph=False).value
        d = op.grad(d.sum(), wrt)
        np.testing.assert_array_equal(plain, d.value)
        out.append(d.value)
    return out


def _jvps(f, wrt: sg.Variable, order: int = 3) -> list[np.ndarray]:
    """Forward mode: jvp of jvp ... along ones, recorded and value-only."""
    op = wrt.ops
    t = f()
    out = []
    ones = np.ones(wrt.shape)
    for _ in range(order):
        plain = op.jvp(t, wrt, ones, create_graph=False).value
        t = op.jvp(t, wrt, ones)
        np.testing.assert_array_equal(plain, t.value)
        out.append(t.value)
    return out


@pytest.fixture(autouse=True)
def _quiet():
    # the untaken side of the recorded where computes 0 ** -1 (inf) on purpose
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


EXPONENTS = {
    "number": lambda op: 0.0,
    "array": lambda op: np.zeros(4),
    "variable": lambda op: op.var(np.zeros(4), name="y"),
}


@pytest.mark.parametrize("kind", list(EXPONENTS))
def test_x_pow_0_has_derivative_0_everywhere(kind):
    op = sg.Ops()
    x = op.var(X, name="x")
    y = EXPONENTS[kind](op)
    for d in _derivatives(lambda: x ** y, x) + _jvps(lambda: x ** y, x):
        np.testing.assert_array_equal(d, np.zeros(4))
    if kind == "variable":      # the zero test is on the tape, not a Python branch
        assert "= equal(y, 0)" in op.format_trace()


@pytest.mark.parametrize("kind", ["number", "variable"])
def test_mixed_exponents_with_a_zero(kind):
    # x = [0, 1.5, 0, -0.7], y = [0, 1, 2, 3]: d/dx = [0, 1, 0, 3 * 0.49]
    op = sg.Ops()
    x = op.var(X)
    y = np.array([0.0, 1.0, 2.0, 3.0])
    y = op.var(y) if kind == "variable" else y
    d1, d2, d3 = _derivatives(lambda: x ** y, x)
    np.testing.assert_allclose(d1, [0.0, 1.0, 0.0, 3 * 0.49], rtol=1e-15)
    np.testing.assert_allclose(d2, [0.0, 0.0, 2.0, 6 * -0.7], rtol=1e-15)
    np.testing.assert_allclose(d3, [0.0, 0.0, 0.0, 6.0], rtol=1e-15)
    np.testing.assert_allclose(_jvps(lambda: x ** y, x)[0], d1, rtol=1e-15)


@pytest.mark.parametrize("base", ["number", "variable"])
@pytest.mark.parametrize("y0", [0.5, 1.0, 2.5])
def test_0_pow_y_has_y_derivative_0_for_positive_y(base, y0):
    op = sg.Ops()
    y = op.var(np.full(3, y0), name="y")
    x = op.var(np.zeros(3), name="x") if base == "variable" else 0.0
    assert np.array_equal((x ** y).value, np.zeros(3))
    for d in _derivatives(lambda: x ** y, y) + _jvps(lambda: x ** y, y):
        np.testing.assert_array_equal(d, np.zeros(3))


def test_0_pow_y_keeps_its_y_derivative_away_from_0():
    op = sg.Ops()
    x = op.var([0.0, 2.0])
    y = op.var([1.5, 1.5])
    dx, dy = op.grad((x ** y).sum(), [x, y])
    np.testing.assert_allclose(dy.value, [0.0, 2.0 ** 1.5 * np.log(2.0)], rtol=1e-15)
    np.testing.assert_allclose(dx.value, [0.0, 1.5 * 2.0 ** 0.5], rtol=1e-15)


@pytest.mark.parametrize("kind", ["number", "variable"])
def test_x_pow_1_has_second_derivative_0_at_0(kind):
    op = sg.Ops()
    x = op.var([0.0, 0.0, 2.0])
    y = op.var(np.ones(3)) if kind == "variable" else 1.0
    d1, d2, d3 = _derivatives(lambda: x ** y, x)
    np.testing.assert_array_equal(d1, np.ones(3))
    np.testing.assert_array_equal(d2, np.zeros(3))
    np.testing.assert_array_equal(d3, np.zeros(3))
    t1, t2, t3 = _jvps(lambda: x ** y, x)
    np.testing.assert_array_equal(t1, np.ones(3))
    np.testing.assert_array_equal(t2, np.zeros(3))
    np.testing.assert_array_equal(t3, np.zeros(3))
