"""The functions of primitives/unary.py against closed forms, and their stated conventions.

The registry test checks every case against finite differences; here the oracles are hand
derivatives (orders 1 and 2, by repeated ``op.grad`` on the recorded gradient) and the
conventions at ties, bounds, nan and infinities, which finite differences cannot see.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import simplegrad as sg

LN2 = np.log(2.0)

# name: (points, first derivative, second derivative)
UNARY: dict[str, tuple[np.ndarray, Callable, Callable]] = {
    "tan": (np.array([-1.1, 0.3, 1.0]), lambda x: 1 / np.cos(x) ** 2,
            lambda x: 2 * np.tan(x) / np.cos(x) ** 2),
    "arcsin": (np.array([-0.8, 0.1, 0.95]), lambda x: 1 / np.sqrt(1 - x * x),
               lambda x: x / (1 - x * x) ** 1.5),
    "arccos": (np.array([-0.8, 0.1, 0.95]), lambda x: -1 / np.sqrt(1 - x * x),
               lambda x: -x / (1 - x * x) ** 1.5),
    "arctan": (np.array([-3.0, 0.2, 5.0]), lambda x: 1 / (1 + x * x),
               lambda x: -2 * x / (1 + x * x) ** 2),
    "sinh": (np.array([-2.0, 0.5, 3.0]), np.cosh, np.sinh),
    "cosh": (np.array([-2.0, 0.5, 3.0]), np.sinh, np.cosh),
    "arcsinh": (np.array([-4.0, 0.3, 2.0]), lambda x: 1 / np.sqrt(x * x + 1),
                lambda x: -x / (x * x + 1) ** 1.5),
    "arccosh": (np.array([1.01, 1.5, 7.0]), lambda x: 1 / np.sqrt(x * x - 1),
                lambda x: -x / (x * x - 1) ** 1.5),
    "arctanh": (np.array([-0.99, 0.0, 0.5]), lambda x: 1 / (1 - x * x),
                lambda x: 2 * x / (1 - x * x) ** 2),
    "log1p": (np.array([-0.9, 1e-9, 4.0]), lambda x: 1 / (1 + x), lambda x: -1 / (1 + x) ** 2),
    "expm1": (np.array([-3.0, 1e-9, 2.0]), np.exp, np.exp),
    "log2": (np.array([0.1, 1.0, 8.0]), lambda x: 1 / (x * LN2), lambda x: -1 / (x * x * LN2)),
    "log10": (np.array([0.1, 1.0, 8.0]), lambda x: 1 / (x * np.log(10)),
              lambda x: -1 / (x * x * np.log(10))),
    "exp2": (np.array([-3.0, 0.0, 2.5]), lambda x: LN2 * 2 ** x, lambda x: LN2 ** 2 * 2 ** x),
    "square": (np.array([-3.0, 0.0, 2.5]), lambda x: 2 * x, lambda x: 2 + 0 * x),
    "reciprocal": (np.array([-3.0, 0.1, 2.5]), lambda x: -1 / x ** 2, lambda x: 2 / x ** 3),
}


def _two_orders(fn: Callable, x0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    op = sg.Ops()
    x = op.var(x0)
    d1 = op.grad(fn(x).sum(), x)
    d2 = op.grad(d1.sum(), x)
    return d1.value, d2.value


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_closed_forms_orders_1_and_2(name: str) -> None:
    points, first, second = UNARY[name]
    d1, d2 = _two_orders(lambda v: getattr(v, name)(), points)
    np.testing.assert_allclose(d1, first(points), rtol=1e-12, err_msg=f"{name} order 1")
    np.testing.assert_allclose(d2, second(points), rtol=1e-10, atol=1e-14,
                               err_msg=f"{name} order 2")
    op = sg.Ops()
    x = op.var(points)
    np.testing.assert_allclose(getattr(op, name)(x).value, getattr(np, name)(points))
    np.testing.assert_allclose(op.jvp(getattr(op, name)(x), x, np.ones(3)).value, first(points),
                               rtol=1e-12)


@pytest.mark.parametrize("name", ["floor", "ceil", "round"])
def test_rounding_has_no_gradient(name: str) -> None:
    """floor, ceil and round: derivative 0, also at their jumps; nothing enters the grad block."""
    op = sg.Ops()
    x = op.var([-1.5, -0.5, 0.0, 0.5, 1.0, 2.7])
    y = getattr(x, name)()
    np.testing.assert_array_equal(y.value, getattr(np, name)(x.value))
    before = len(op.tape)
    g = op.grad((y * 3.0).sum(), x)
    np.testing.assert_array_equal(g.value, np.zeros(6))
    assert not any(e.prim.name in ("floor", "ceil", "round") for e in op.tape[before:])
    assert op.jvp(y, x, np.ones(6)).value.tolist() == [0.0] * 6


def test_round_decimals_and_numpy_entry_points() -> None:
    op = sg.Ops()
    x = op.var([1.2345, -2.5, 0.5, 14.0], name="x")
    np.testing.assert_array_equal(x.round(2).value, np.round(x.value, 2))
    np.testing.assert_array_equal(np.round(x).value, [1.0, -2.0, 0.0, 14.0])   # halves to even
    np.testing.assert_array_equal(x.round(-1).value, [0.0, -0.0, 0.0, 10.0])
    assert op.format_trace().splitlines()[1:] == ["v0 = x.round(2)", "v1 = x.round()",
                                                  "v2 = x.round(-1)"]
    with pytest.raises(sg.ArgumentError, match="decimals"):
        op.round(x, 1.5)
    with pytest.raises(sg.ArgumentError, match="out="):
        x.round(0, out=np.zeros(4))


# ---------------------------------------------------------------- clip


def test_clip_gradient_goes_to_the_active_side_bounds_inclusive() -> None:
    op = sg.Ops()
    x = op.var([-2.0, -1.0, 0.0, 1.0, 2.0])
    lo = op.var(-1.0)
    hi = op.var([1.0, 1.0, 1.0, 1.0, 1.0])
    y = op.clip(x, lo, hi)
    np.testing.assert_array_equal(y.value, [-1.0, -1.0, 0.0, 1.0, 1.0])
    u = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    gx, glo, ghi = op.grad((y * u).sum(), [x, lo, hi])
    np.testing.assert_array_equal(gx.value, [0.0, 2.0, 3.0, 4.0, 0.0])     # x == bound: x's
    assert glo.value == 1.0                                                 # summed: broadcast
    np.testing.assert_array_equal(ghi.value, [0.0, 0.0, 0.0, 0.0, 5.0])
    t = op.jvp(y, [x, lo, hi], [np.full(5, 1.0), np.array(10.0), np.full(5, 100.0)])
    np.testing.assert_array_equal(t.value, [10.0, 1.0, 1.0, 1.0, 100.0])


def test_clip_crossed_bounds_give_a_max_everywhere() -> None:
    """a_min > a_max: numpy returns a_max, and a_max gets the whole gradient."""
    op = sg.Ops()
    x = op.var([-3.0, 0.5, 3.0])
    lo, hi = op.var(1.0), op.var(-1.0)
    y = op.clip(x, lo, hi)
    np.testing.assert_array_equal(y.value, np.clip(x.value, 1.0, -1.0))
    gx, glo, ghi = op.grad(y.sum(), [x, lo, hi])
    assert gx.value.tolist() == [0.0, 0.0, 0.0] and glo.value == 0.0 and ghi.value == 3.0


def test_clip_with_constant_and_missing_bounds() -> None:
    op = sg.Ops()
    x = op.var([-2.0, 0.5, 2.0], name="x")
    y = np.clip(x, -1, None) + x.clip(max=1.0) + x.clip(np.array([0.0, 1.0, 1.5]), 1.8)
    np.testing.assert_allclose(y.value, [-3.0, 2.0, 4.8])
    g = op.grad(y.sum(), x)
    np.testing.assert_array_equal(g.value, [1.0, 2.0, 1.0])
    text = op.format_trace()
    assert "v0 = x.clip(-1, None)" in text and "v1 = x.clip(None, 1.0)" in text
    assert "inf" not in text        # an absent bound records no comparison


def test_clip_second_order() -> None:
    op = sg.Ops()
    x = op.var([-2.0, 0.5, 2.0])
    g = op.grad(op.clip(x, -1.0, 1.0).square().sum(), x)
    np.testing.assert_array_equal(g.value, [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(op.grad(g.sum(), x).value, [0.0, 2.0, 0.0])


# ---------------------------------------------------------------- fmax, fmin


@pytest.mark.parametrize(("name", "numpy_fn"), [("fmax", np.fmax), ("fmin", np.fmin)])
def test_fmax_fmin_ties_and_nan(name: str, numpy_fn: Callable) -> None:
    nan = np.nan
    xv = np.array([1.0, 2.0, 3.0, nan, 5.0, nan])
    yv = np.array([1.0, 0.0, 4.0, 2.0, nan, nan])
    op = sg.Ops()
    x, y = op.var(xv), op.var(yv)
    out = getattr(op, name)(x, y)
    np.testing.assert_array_equal(out.value, numpy_fn(xv, yv))
    gx, gy = op.grad(out.sum(), [x, y])
    x_wins = [None, 1.0, 0.0] if name == "fmax" else [None, 0.0, 1.0]
    # ties: half each; a nan operand: the other gets all; both nan: x gets all
    np.testing.assert_array_equal(gx.value, [0.5, x_wins[1], x_wins[2], 0.0, 1.0, 1.0])
    np.testing.assert_array_equal(gy.value, [0.5, 1 - x_wins[1], 1 - x_wins[2], 1.0, 0.0, 0.0])
    t = op.jvp(out, [x, y], [np.full(6, 1.0), np.full(6, 10.0)])
    np.testing.assert_array_equal(t.value, gx.value + 10 * gy.value)


# ---------------------------------------------------------------- mod, arctan2, hypot


def test_mod_derivatives_and_operator() -> None:
    xv = np.array([5.5, -5.5, 5.5, -5.5, 0.3])
    yv = np.array([2.0, 2.0, -2.0, -2.0, 0.7])
    op = sg.Ops()
    x, y = op.var(xv, name="x"), op.var(yv, name="y")
    out = x % y
    np.testing.assert_allclose(out.value, np.remainder(xv, yv))
    assert op.remainder(x, y).value.tolist() == out.value.tolist()
    gx, gy = op.grad(out.sum(), [x, y])
    np.testing.assert_array_equal(gx.value, np.ones(5))
    np.testing.assert_array_equal(gy.value, -np.floor(xv / yv))
    # second order: both derivatives are locally constant
    np.testing.assert_array_equal(op.grad(gy.sum(), x).value, np.zeros(5))
    np.testing.assert_array_equal((7.0 % x).value, np.remainder(7.0, xv))
    assert "v0 = x % y" in op.format_trace()


def test_arctan2_and_hypot_closed_forms() -> None:
    yv = np.array([1.0, -2.0, 0.5, 3.0])
    xv = np.array([-1.0, -0.5, 2.0, 0.0])
    r2 = xv ** 2 + yv ** 2
    op = sg.Ops()
    y, x = op.var(yv), op.var(xv)
    a = op.arctan2(y, x)
    np.testing.assert_allclose(a.value, np.arctan2(yv, xv))
    gy, gx = op.grad(a.sum(), [y, x])
    np.testing.assert_allclose(gy.value, xv / r2, rtol=1e-14)
    np.testing.assert_allclose(gx.value, -yv / r2, rtol=1e-14)
    np.testing.assert_allclose(op.grad(gy.sum(), y).value, -2 * xv * yv / r2 ** 2, rtol=1e-12)
    h = op.hypot(x, y)
    hx, hy = op.grad(h.sum(), [x, y])
    np.testing.assert_allclose(hx.value, xv / np.sqrt(r2), rtol=1e-14)
    np.testing.assert_allclose(op.grad(hx.sum(), x).value, yv ** 2 / r2 ** 1.5, rtol=1e-12)
    big = op.var([1e200])
    assert np.isfinite(op.hypot(big, big).value).all()      # no overflow


# ---------------------------------------------------------------- logaddexp


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))       # 1 / (1 + exp(-z)), without overflow


@pytest.mark.parametrize(("name", "base"), [("logaddexp", np.e), ("logaddexp2", 2.0)])
def test_logaddexp_closed_forms_and_stability(name: str, base: float) -> None:
    k = np.log(base)        # d/dx log_b(b^x + b^y) = s, s = sigmoid(k (x - y)); s' = k s (1 - s)
    inf = np.inf
    xv = np.array([0.3, 1000.0, -1000.0, 800.0, 2.0, -inf, inf, -inf, inf])
    yv = np.array([-1.2, 1000.0, 0.0, 1.0, -inf, 3.0, 3.0, -inf, inf])
    op = sg.Ops()
    x, y = op.var(xv), op.var(yv)
    out = getattr(op, name)(x, y)
    np.testing.assert_array_equal(out.value, getattr(np, name)(xv, yv))
    gx, gy = op.grad(out, [x, y], seed=np.ones(9))       # (out.sum() would be inf - inf)
    s, s_other = _sigmoid(k * (xv[:5] - yv[:5])), _sigmoid(k * (yv[:5] - xv[:5]))
    # finite and one-infinite operands: the closed form; the same infinity twice: 0.5 each
    np.testing.assert_allclose(gx.value, [*s, 0.0, 1.0, 0.5, 0.5], rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(gy.value, [*s_other, 1.0, 0.0, 0.5, 0.5], rtol=1e-12,
                               atol=1e-300)
    hxx = op.grad(gx, x, seed=np.ones(9)).value
    # (sigmoid's own rule, out (1 - out), rounds a tail below 1e-16 to 0: absolute error)
    np.testing.assert_allclose(hxx[:5], k * s * s_other, rtol=1e-12, atol=1e-16)
    assert np.all(np.isfinite(hxx))
    with np.errstate(invalid="ignore"):
        g_nan = op.grad(getattr(op, name)(x, np.nan), x, seed=np.ones(9))
    assert np.all(np.isnan(g_nan.value))                   # a nan operand gives nan


# ---------------------------------------------------------------- dtype and printing


def test_float32_stays_float32() -> None:
    op = sg.Ops()
    x = op.var(np.array([0.2, 0.4], dtype=np.float32))
    y = op.var(np.array([1.5, -0.5], dtype=np.float32))
    out = (x.arcsin() + op.logaddexp(x, y) + op.fmax(x, y) + x % y + op.clip(x, 0.3, y)).sum()
    gx, gy = op.grad(out, [x, y])
    assert out.dtype == gx.dtype == gy.dtype == np.float32


def test_print_rules() -> None:
    op = sg.Ops()
    x, y = op.var([0.5], name="x"), op.var([2.0], name="y")
    x.tan(), x.log1p(), op.arctan2(y, x), op.hypot(x, y)
    op.fmin(x, y), op.logaddexp2(x, y), x.square(), x.round(3)
    lines = op.format_trace().splitlines()[2:]
    assert lines == ["v0 = x.tan()", "v1 = x.log1p()", "v2 = arctan2(y, x)", "v3 = hypot(x, y)",
                     "v4 = fmin(x, y)", "v5 = logaddexp2(x, y)", "v6 = x.square()",
                     "v7 = x.round(3)"]


def _program_text(fn, *values: np.ndarray) -> list[str]:
    """The recorded gradient and second gradient of sum(fn(...)), without the leaf lines."""
    op = sg.Ops()
    xs = [op.var(v, name=f"x{i}") for i, v in enumerate(values)]
    gs = op.grad(fn(op, *xs).sum(), xs)
    op.grad(sum((g * g).sum() for g in gs), xs)
    return op.format_trace().splitlines()[len(xs):]


@pytest.mark.parametrize(("fn", "plain", "edge"), [
    (lambda op, x, lo, hi: op.clip(x, lo, hi),
     ([0.5, -2.0], [-1.0, -1.0], [1.0, 1.0]), ([-1.0, 2.0], [-1.0, 3.0], [1.0, 1.0])),
    (lambda op, x, y: op.fmax(x, y), ([0.5, -2.0], [1.0, 1.0]), ([1.0, np.nan], [1.0, 1.0])),
    (lambda op, x, y: op.logaddexp(x, y), ([0.5, -2.0], [1.0, 1.0]),
     ([-np.inf, 800.0], [-np.inf, 800.0])),
    (lambda op, x, y: x % y, ([0.5, -2.0], [1.0, 0.3]), ([2.0, -2.0], [1.0, 1.0])),
], ids=["clip", "fmax", "logaddexp", "mod"])
def test_recorded_program_does_not_depend_on_values(fn, plain, edge) -> None:
    """Ties, bounds, nan and -inf record the same program as ordinary inputs (replayable)."""
    with np.errstate(invalid="ignore"):
        assert _program_text(fn, *map(np.array, plain)) == _program_text(fn, *map(np.array, edge))


def test_ufunc_table_names_methods_that_compute_the_ufunc() -> None:
    """The dispatch table of Variable.__array_ufunc__ (numpy_api.ufuncs()): each entry's Ops
    method computes its ufunc."""
    from simplegrad.primitives.numpy_api import ufuncs

    xv, yv = np.array([0.3, 1.7, 2.5]), np.array([0.9, -1.1, 1.3])
    zv = np.array([0.2, 0.5, 0.9])      # inside every one-input domain but arccosh's
    op = sg.Ops()
    x, y, z = op.var(xv), op.var(yv), op.var(zv)
    table = ufuncs()
    assert {np.tan, np.rint, np.log1p, np.fmax, np.remainder, np.logaddexp2} <= table.keys()
    for ufunc, name in table.items():
        args, values = ((x, y), (xv, yv)) if ufunc.nin == 2 else ((z,), (zv,))
        if name == "arccosh":
            args, values = (z + 1.0,), (zv + 1.0,)
        got = getattr(op, name)(*args).value
        assert np.all(np.isfinite(got)), name
        np.testing.assert_array_equal(got, ufunc(*values), err_msg=name)
