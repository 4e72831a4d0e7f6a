"""prod, cumsum, cumprod, var, std, argmax and argmin against closed forms.

The tricky rules are products with zero entries: d prod / d x_i is the product of the other
entries, and d^2 prod / d x_i d x_j (i != j) the product of all but those two, which a rule
dividing by x gets wrong (nan, or 0 where it is not). Oracles below are those products written
out with loops; orders 1 and 2 come from repeated ``op.grad`` and from ``op.jvp``.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import re
from pathlib import Path

import numpy as np
import pytest

import simplegrad as sg


def _prod_except(x: np.ndarray, skip: tuple) -> float:
    return float(np.prod([v for k, v in enumerate(x) if k not in skip]))


def _prod_grad(x: np.ndarray) -> np.ndarray:
    return np.array([_prod_except(x, (i,)) for i in range(len(x))])


def _prod_hessian(x: np.ndarray) -> np.ndarray:
    n = len(x)
    return np.array([[0.0 if i == j else _prod_except(x, (i, j)) for j in range(n)]
                     for i in range(n)])


VECTORS = {
    "no zero": np.array([1.5, -2.0, 0.5, 3.0]),
    "one zero": np.array([1.5, 0.0, -0.5, 3.0]),
    "two zeros": np.array([0.0, -2.0, 0.0, 3.0]),
    "three zeros": np.array([0.0, 0.0, 2.0, 0.0]),
}


@pytest.mark.parametrize("name", list(VECTORS))
def test_prod_orders_1_and_2_with_zeros(name: str) -> None:
    xv = VECTORS[name]
    op = sg.Ops()
    x = op.var(xv)
    g = op.grad(x.prod(), x)
    np.testing.assert_allclose(g.value, _prod_grad(xv), rtol=1e-15)
    rows = [op.grad(g[i], x).value for i in range(4)]           # order 2, row by row
    np.testing.assert_allclose(np.array(rows), _prod_hessian(xv), rtol=1e-15)
    np.testing.assert_allclose(sg.hessian(lambda v: v.prod())(xv), _prod_hessian(xv), rtol=1e-15)
    # forward mode, and forward over reverse
    v = np.array([0.3, -1.0, 2.0, 0.7])
    np.testing.assert_allclose(op.jvp(x.prod(), x, v).value, _prod_grad(xv) @ v, rtol=1e-14)
    np.testing.assert_allclose(op.jvp(g, x, v).value, _prod_hessian(xv) @ v, rtol=1e-14)
    # value-only sweep
    np.testing.assert_allclose(op.grad(x.prod(), x, create_graph=False).value, _prod_grad(xv))


def test_prod_third_order_with_three_zeros() -> None:
    """d^3 prod / dx_0 dx_1 dx_3 at (0, 0, 2, 0) is x_2 = 2; every other third derivative 0."""
    xv = VECTORS["three zeros"]
    op = sg.Ops()
    x = op.var(xv)
    g = op.grad(x.prod(), x)
    h = op.grad(g[0], x)
    t = op.grad(h[1], x)
    np.testing.assert_array_equal(t.value, [0.0, 0.0, 0.0, 2.0])


@pytest.mark.parametrize(("axis", "keepdims"), [(1, False), (0, True), ((0, 1), False),
                                                (None, True), ((1, 0), False)])
def test_prod_over_axes_with_zeros(axis, keepdims) -> None:
    xv = np.array([[1.5, 0.0, 2.0], [0.0, 0.0, 4.0], [0.5, -1.0, 3.0], [2.0, 1.0, -1.0]])
    op = sg.Ops()
    x = op.var(xv)
    p = x.prod(axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(p.value, np.prod(xv, axis=axis, keepdims=keepdims))
    u = np.arange(1.0, 1.0 + p.size).reshape(p.shape)
    g = op.grad((p * u).sum(), x)
    # oracle: each entry's slice, the other entries' product, times that slice's u
    axes = sg.primitives.core.normalize_axes(axis, 2)
    expected = np.zeros_like(xv)
    ukd = np.broadcast_to(u.reshape(np.prod(xv, axis=axis, keepdims=True).shape), xv.shape)
    for i, j in itertools.product(range(4), range(3)):
        sel = tuple(slice(None) if a in axes else (i, j)[a] for a in range(2))
        block = xv[sel].ravel()
        pos = (i, j)[axes[0]] if len(axes) == 1 else i * 3 + j
        expected[i, j] = ukd[i, j] * _prod_except(block, (pos,))
    np.testing.assert_allclose(g.value, expected, rtol=1e-14)
    # second order in the direction of ones: sum_j d^2 / dx_ij dx_kl
    gg = op.grad(g.sum(), x)
    eps = 1e-6
    num = np.zeros_like(xv)
    for k in np.ndindex(xv.shape):
        d = np.zeros_like(xv)
        d[k] = eps
        num[k] = (_grad_sum(xv + d, axis, keepdims, u) - _grad_sum(xv - d, axis, keepdims, u)) / (
            2 * eps)
    np.testing.assert_allclose(gg.value, num, atol=1e-8)


def _grad_sum(xv, axis, keepdims, u) -> float:
    op = sg.Ops()
    x = op.var(xv)
    return float(op.grad((x.prod(axis=axis, keepdims=keepdims) * u).sum(), x).value.sum())


def test_np_prod_and_trace() -> None:
    op = sg.Ops()
    x = op.var([[1.0, 2.0], [3.0, 4.0]], name="x")
    assert np.prod(x, axis=1).value.tolist() == [2.0, 12.0]
    assert "v0 = x.prod(axis=1)" in op.format_trace()
    with pytest.raises(sg.ArgumentError, match="dtype"):
        x.prod(dtype=np.float32)
    with pytest.raises(sg.errors.AxisError, match="prod"):
        op.prod(x, axis=2)


# ---------------------------------------------------------------- cumsum, cumprod


def test_cumsum_reverse_cumsum_and_flattening() -> None:
    xv = np.arange(6.0).reshape(2, 3)
    op = sg.Ops()
    x = op.var(xv, name="x")
    u = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    g = op.grad((x.cumsum(axis=1) * u).sum(), x)
    np.testing.assert_array_equal(g.value, np.cumsum(u[:, ::-1], axis=1)[:, ::-1])
    flat = np.cumsum(xv)
    c = np.cumsum(x)        # numpy's axis=None flattens
    np.testing.assert_array_equal(c.value, flat)
    g = op.grad((c * np.arange(6.0)).sum(), x)
    np.testing.assert_array_equal(g.value, np.cumsum(np.arange(6.0)[::-1])[::-1].reshape(2, 3))
    text = op.format_trace()
    assert "v0 = x.cumsum(axis=1)" in text and "x.cumsum()" in text
    np.testing.assert_array_equal(op.jvp(x.cumsum(axis=0), x, np.ones((2, 3))).value,
                                  [[1.0] * 3, [2.0] * 3])


def _cumprod_jacobian(x: np.ndarray) -> np.ndarray:
    n = len(x)
    return np.array([[_prod_except(x[:i + 1], (j,)) if j <= i else 0.0 for j in range(n)]
                     for i in range(n)])


def _cumprod_second(x: np.ndarray, u: np.ndarray) -> np.ndarray:
    """d^2 <u, cumprod(x)> / dx_j dx_l = sum_{i >= max(j, l)} u_i prod_{k <= i, k != j, l}."""
    n = len(x)
    return np.array([[0.0 if j == m else sum(u[i] * _prod_except(x[:i + 1], (j, m))
                                              for i in range(max(j, m), n))
                      for m in range(n)] for j in range(n)])


@pytest.mark.parametrize("xv", [np.array([1.5, -2.0, 0.5, 3.0, 0.7]),
                                np.array([1.5, 0.0, 0.5, 3.0, 0.7]),
                                np.array([0.0, 2.0, 0.0, 3.0, -1.0]),
                                np.array([2.0, 0.0, 0.0, 0.0, 1.0])],
                         ids=["no zero", "one zero", "two zeros", "three zeros"])
def test_cumprod_orders_1_and_2_with_zeros(xv: np.ndarray) -> None:
    """Guaranteed at every order: the rules multiply and add, never divide."""
    u = np.array([1.0, -2.0, 0.5, 3.0, 1.5])
    op = sg.Ops()
    x = op.var(xv)
    c = x.cumprod()
    np.testing.assert_array_equal(c.value, np.cumprod(xv))
    g = op.grad((c * u).sum(), x)
    np.testing.assert_allclose(g.value, u @ _cumprod_jacobian(xv), rtol=1e-14)
    hess = np.array([op.grad(g[j], x).value for j in range(5)])
    np.testing.assert_allclose(hess, _cumprod_second(xv, u), rtol=1e-14, atol=1e-15)
    v = np.array([0.3, -1.0, 2.0, 0.7, 1.1])
    np.testing.assert_allclose(op.jvp(c, x, v).value, _cumprod_jacobian(xv) @ v, rtol=1e-14)
    np.testing.assert_allclose(op.jvp(g, x, v).value, _cumprod_second(xv, u) @ v, rtol=1e-14,
                               atol=1e-15)


def test_cumprod_along_an_axis_with_zeros_and_its_cost() -> None:
    xv = np.array([[1.0, 0.0, 2.0, 3.0], [0.0, 2.0, 0.0, 1.0], [1.5, 2.0, -1.0, 0.5]])
    op = sg.Ops()
    x = op.var(xv)
    g = op.grad(x.cumprod(axis=1).sum(), x)
    expected = np.array([np.ones(4) @ _cumprod_jacobian(row) for row in xv])
    np.testing.assert_allclose(g.value, expected, rtol=1e-14)
    # the vjp is a log-depth scan: recorded entries grow with log2(n), not n
    op = sg.Ops()
    x = op.var(np.ones(1024))
    loss = x.cumprod().sum()
    start = len(op.tape)
    op.grad(loss, x)
    assert len(op.tape) - start < 100


@pytest.mark.parametrize("fn", ["prod", "cumprod"])
def test_order_3_with_zeros_against_finite_differences(fn: str) -> None:
    """Third derivatives (all mode combinations) with two zeros in the slice."""
    xv = np.array([[0.0, 1.5, 0.0, -2.0], [0.5, 0.0, 0.0, 0.0]])
    sg.check_grads(lambda v: getattr(v, fn)(axis=1), [xv], order=3, atol=1e-6, rtol=1e-6)


# ---------------------------------------------------------------- var, std


@pytest.mark.parametrize("ddof", [0, 1, 2])
def test_var_std_closed_forms(ddof: int) -> None:
    xv = np.array([0.5, -1.0, 2.0, 3.5, 0.0])
    n = len(xv)
    c = xv - xv.mean()
    op = sg.Ops()
    x = op.var(xv)
    v, s = x.var(ddof=ddof), np.std(x, ddof=ddof)
    np.testing.assert_allclose([v.value, s.value], [np.var(xv, ddof=ddof), np.std(xv, ddof=ddof)])
    gv, gs = op.grad(v, x), op.grad(s, x)
    np.testing.assert_allclose(gv.value, 2 * c / (n - ddof), rtol=1e-14)
    np.testing.assert_allclose(gs.value, c / ((n - ddof) * np.std(xv, ddof=ddof)), rtol=1e-14)
    hv = np.array([op.grad(gv[i], x).value for i in range(n)])
    np.testing.assert_allclose(hv, 2 / (n - ddof) * (np.eye(n) - 1 / n), rtol=1e-14, atol=1e-15)
    sd = np.std(xv, ddof=ddof)
    hs = np.array([op.grad(gs[i], x).value for i in range(n)])
    expected = ((np.eye(n) - 1 / n) / ((n - ddof) * sd)
                - np.outer(c, c) / ((n - ddof) ** 2 * sd ** 3))
    np.testing.assert_allclose(hs, expected, rtol=1e-12, atol=1e-15)


def test_var_std_axes_and_conventions() -> None:
    xv = np.array([[1.0, 2.0, 4.0], [3.0, 3.0, 3.0]])
    op = sg.Ops()
    x = op.var(xv, name="x")
    s = x.std(axis=1, keepdims=True)
    np.testing.assert_allclose(s.value, np.std(xv, axis=1, keepdims=True))
    g = op.grad(s.sum(), x)
    assert g.value[1].tolist() == [0.0, 0.0, 0.0]     # a constant slice: gradient 0
    assert np.all(np.isfinite(op.grad(g.sum(), x).value))
    v = np.var(x, axis=0, correction=1)
    np.testing.assert_allclose(v.value, np.var(xv, axis=0, ddof=1))
    assert "x.var(axis=0, ddof=1)" in op.format_trace()
    with pytest.raises(sg.ArgumentError, match="degrees of freedom"):
        x.var(axis=0, ddof=2)
    with pytest.raises(sg.ArgumentError, match="ddof"):
        op.std(x, ddof="1")


# ---------------------------------------------------------------- argmax, argmin


def test_argmax_argmin_match_numpy_and_carry_no_gradient() -> None:
    xv = np.array([[1.0, 3.0, 3.0, -1.0], [2.0, -4.0, 0.5, -4.0], [0.0, 0.0, 0.0, 0.0]])
    op = sg.Ops()
    x = op.var(xv, name="x")
    for fn in ("argmax", "argmin"):
        for axis, keepdims in [(None, False), (0, False), (1, True), (-1, False), (None, True)]:
            r = getattr(x, fn)(axis=axis, keepdims=keepdims)
            expected = getattr(np, fn)(xv, axis=axis, keepdims=keepdims)
            assert r.dtype == np.int64 and r.shape == expected.shape
            np.testing.assert_array_equal(r.value, expected)
            assert not r.requires_grad
    assert np.argmax(x).value == 1                      # np.argmax calls x.argmax()
    assert "x.argmin(axis=1, keepdims=True)" in op.format_trace()
    with pytest.raises(sg.ArgumentError, match="axis"):
        op.argmax(x, axis=(0, 1))
    with pytest.raises(sg.errors.AxisError):
        op.argmin(x, axis=2)


def test_docs_example_prints_what_it_says() -> None:
    """The docs' block on products and scans (docs/linalg.md), run as written."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "linalg.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S)
                 if "x.prod()" in b)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "docs/linalg.md", "exec"), {"sg": sg, "np": np})  # noqa: S102
    assert out.getvalue().splitlines() == ["[0. 0. 0. 0.]", "[0. 0. 0. 6.]",
                                           "[1. 2. 8.] 2.333333333333333"]


def _program_text(fn, xv: np.ndarray) -> list[str]:
    """The recorded gradient and second gradient of sum(fn(x)) at xv, without the leaf line."""
    op = sg.Ops()
    x = op.var(xv, name="x")
    g = op.grad((fn(x) * np.arange(1.0, 1.0 + fn(x).size).reshape(fn(x).shape)).sum(), x)
    op.grad((g * g).sum(), x)
    return op.format_trace().splitlines()[1:]


@pytest.mark.parametrize("fn", [lambda v: v.prod(axis=1), lambda v: v.cumprod(axis=0),
                                lambda v: v.std(axis=1), lambda v: np.cumsum(v)],
                         ids=["prod", "cumprod", "std", "cumsum"])
def test_recorded_program_does_not_depend_on_values(fn) -> None:
    """The same program is recorded with and without zeros (so it replays at any input)."""
    plain = np.array([[1.5, -2.0, 0.5], [3.0, 0.7, 2.0]])
    zeros = np.array([[0.0, -2.0, 0.0], [1.0, 1.0, 1.0]])
    assert _program_text(fn, plain) == _program_text(fn, zeros)


def test_prod_gradient_program_replays_at_zeros() -> None:
    """Recorded at a point without zeros, the order-1 and order-2 program is right at zeros."""
    op = sg.Ops()
    x = op.var(VECTORS["no zero"])
    g = op.grad(x.prod(), x)
    rows = [op.grad(g[i], x) for i in range(4)]
    prog = op.program([x], [g, *rows])
    for name in ("one zero", "two zeros", "three zeros"):
        got = prog(VECTORS[name])
        np.testing.assert_allclose(got[0], _prod_grad(VECTORS[name]), rtol=1e-15)
        np.testing.assert_allclose(np.array(got[1:]), _prod_hessian(VECTORS[name]), rtol=1e-15)
