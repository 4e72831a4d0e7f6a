"""erf, erfc, erfinv, betainc, trunc, cummax and cummin: values against independent answers
(math.erf, closed forms of the incomplete beta, a Python loop, SciPy when installed),
derivatives against closed forms; the registry tests check every rule against finite
differences, nested jvps and a loop.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.polynomial.hermite import hermval

import simplegrad as sg
from simplegrad.primitives.special_functions import log_beta

X = np.array([-6.0, -2.5, -1.0, -0.3, -1e-8, 0.0, 1e-300, 0.2, 0.9, 1.7, 3.3, 5.9, 27.0])

# ---------------------------------------------------------------- values


def test_erf_and_erfc_are_math_erf_entrywise():
    op = sg.Ops()
    x = op.var(X)
    np.testing.assert_array_equal(op.erf(x).value, [math.erf(v) for v in X])
    np.testing.assert_array_equal(x.erfc().value, [math.erfc(v) for v in X])
    assert x.erf().dtype == np.float64 and op.erf(op.var(X.astype(np.float32))).dtype == np.float32


def test_erfinv_inverts_erf_to_a_few_ulps():
    y = np.concatenate([np.linspace(-5.8, 5.8, 1001), [1e-300, -1e-20, 0.5]])
    x = np.array([math.erf(v) for v in y])
    keep = np.abs(x) < 1
    got = sg.Ops().var(x[keep]).erfinv().value
    # x = erf(y) is rounded: compare y against the change of y that rounding of x allows
    slack = 4 * np.spacing(np.abs(x[keep])) * np.sqrt(np.pi) / 2 * np.exp(y[keep] ** 2)
    assert np.all(np.abs(got - y[keep]) <= slack + 4 * np.spacing(np.abs(y[keep])))


def test_erfinv_tails_keep_the_digits_of_one_minus_x():
    t = np.array([1e-3, 1e-8, 1e-12, 1e-15, 2e-16])
    y = sg.Ops().var(1 - t).erfinv().value
    np.testing.assert_allclose([math.erfc(v) for v in y], 1 - (1 - t), rtol=1e-12)
    edges = sg.Ops().var([1.0, -1.0, 1.5, np.nan, -0.0]).erfinv().value
    assert edges[0] == np.inf and edges[1] == -np.inf and np.isnan(edges[2:4]).all()
    assert edges[4] == 0 and np.signbit(edges[4])


@pytest.mark.parametrize(("a", "b", "closed"), [
    (1.0, 1.0, lambda x: x),
    (3.0, 1.0, lambda x: x ** 3),
    (1.0, 2.5, lambda x: 1 - (1 - x) ** 2.5),
    (2.0, 3.0, lambda x: 6 * x ** 2 - 8 * x ** 3 + 3 * x ** 4),   # 12 int t (1-t)^2
    (0.5, 0.5, lambda x: np.where(x < 0.5, 2 / np.pi * np.arcsin(np.sqrt(x)),   # well
                                  1 - 2 / np.pi * np.arcsin(np.sqrt(1 - x)))),  # conditioned
])
def test_betainc_closed_forms(a, b, closed):
    x = np.concatenate([np.linspace(0.0, 1.0, 41), [1e-9, 1 - 1e-9]])
    got = sg.Ops().var(x).betainc(a, b).value
    np.testing.assert_allclose(got, closed(x), rtol=1e-13, atol=1e-15)


def test_betainc_symmetry_and_domain():
    rng = np.random.default_rng(1)
    a, b, x = rng.uniform(0.1, 40, 300), rng.uniform(0.1, 40, 300), rng.uniform(0, 1, 300)
    op = sg.Ops()
    left = op.betainc(a, b, op.var(x)).value
    right = op.betainc(b, a, op.var(1 - x)).value
    np.testing.assert_allclose(left + right, 1.0, rtol=0, atol=5e-14)
    bad = op.betainc(np.array([-1.0, 2.0, 2.0]), 2.0, op.var([0.5, 1.5, -0.1])).value
    assert np.isnan(bad).all()


def test_values_match_scipy_when_installed():
    special = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(2)
    op = sg.Ops()
    x = rng.uniform(-0.999999, 0.999999, 2000)
    np.testing.assert_allclose(op.var(x).erfinv().value, special.erfinv(x), rtol=1e-14)
    a, b, s = rng.uniform(0.1, 30, 2000), rng.uniform(0.1, 30, 2000), rng.uniform(0, 1, 2000)
    np.testing.assert_allclose(op.betainc(a, b, op.var(s)).value, special.betainc(a, b, s),
                               rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(log_beta(a, b), special.betaln(a, b), rtol=1e-13, atol=1e-13)


def test_scipy_ufuncs_record_on_variables():
    special = pytest.importorskip("scipy.special")
    op = sg.Ops()
    v = op.var([0.1, 0.6], name="v")
    for fn in (special.erf, special.erfc, special.erfinv):
        out = fn(v)
        assert isinstance(out, sg.Variable) and out.prim.name == fn.__name__
        np.testing.assert_allclose(out.value, fn(v.value), rtol=1e-15)
    out = special.betainc(2.0, 3.0, v)
    assert out.prim.name == "betainc"
    assert "betainc(2.0, 3.0, v)" in op.format_trace()

# ---------------------------------------------------------------- derivatives


def test_derivatives_are_the_closed_forms():
    x = np.array([-1.3, 0.2, 0.7])
    np.testing.assert_allclose(sg.grad(lambda v: v.erf().sum())(x),
                               2 / np.sqrt(np.pi) * np.exp(-x * x), rtol=1e-14)
    np.testing.assert_allclose(sg.grad(lambda v: v.erfc().sum())(x),
                               -2 / np.sqrt(np.pi) * np.exp(-x * x), rtol=1e-14)
    y = sg.Ops().var(x / 2).erfinv().value            # erfinv' = 1 / erf'(erfinv x)
    np.testing.assert_allclose(sg.grad(lambda v: v.erfinv().sum())(x / 2),
                               np.sqrt(np.pi) / 2 * np.exp(y * y), rtol=1e-14)
    s = np.array([0.1, 0.5, 0.8])
    np.testing.assert_allclose(sg.grad(lambda v: v.betainc(2.0, 3.0).sum())(s),
                               12 * s * (1 - s) ** 2, rtol=1e-13)
    h = sg.hessian(lambda v: v.betainc(2.0, 3.0).sum())(s)
    np.testing.assert_allclose(np.diag(h), 12 * (1 - s) ** 2 - 24 * s * (1 - s), rtol=1e-12)


def test_erf_taylor_series_is_hermite():
    """d^n/dx^n erf = (-1)^(n-1) 2/sqrt(pi) H_(n-1)(x) exp(-x^2), to order 8."""
    x = np.array([-0.7, 0.4, 1.1])
    got = sg.taylor(lambda v: v.erf(), x, np.ones_like(x), 8)
    for n in range(1, 9):
        want = (-1) ** (n - 1) * 2 / np.sqrt(np.pi) * hermval(x, [0] * (n - 1) + [1]) * \
            np.exp(-x * x)
        np.testing.assert_allclose(got[n], want, rtol=1e-11, atol=1e-12, err_msg=f"order {n}")


def test_erfinv_taylor_matches_nested_jvps_to_order_six():
    x = np.array([-0.9, 0.1, 0.6])
    got = sg.taylor(lambda v: v.erfinv(), x, np.ones_like(x), 6)
    for n in range(1, 7):
        np.testing.assert_allclose(got[n], sg.derivative(lambda v: v.erfinv(), n)(x),
                                   rtol=1e-9)


def test_trunc_records_and_passes_no_gradient():
    op = sg.Ops()
    x = op.var([-1.7, -0.2, 0.5, 2.9], name="x")
    t = np.trunc(x)
    assert isinstance(t, sg.Variable) and t.prim.name == "trunc"
    np.testing.assert_array_equal(x.trunc().value, [-1.0, -0.0, 0.0, 2.0])
    np.testing.assert_array_equal(op.grad((t * x).sum(), x).value, t.value)

# ---------------------------------------------------------------- cummax, cummin


def _loop_cummax(a, axis, better):
    a = np.moveaxis(a, axis, -1)
    out, idx = np.empty_like(a), np.zeros(a.shape, dtype=int)
    for pos in np.ndindex(a.shape[:-1]):
        best, at = None, 0
        for k, v in enumerate(a[pos]):
            if best is None or better(v, best):
                best, at = v, k
            out[pos + (k,)], idx[pos + (k,)] = best, at
    return np.moveaxis(out, -1, axis), np.moveaxis(idx, -1, axis)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_running_extremes_against_a_loop(name, axis, rng):
    a = rng.integers(0, 4, (3, 5, 4)).astype(float)       # many ties
    better = (lambda v, w: v > w) if name == "cummax" else (lambda v, w: v < w)
    want, idx = _loop_cummax(a, axis, better)
    op = sg.Ops()
    x = op.var(a)
    out = getattr(x, name)(axis)
    np.testing.assert_array_equal(out.value, want)
    np.testing.assert_array_equal(getattr(op, "cumarg" + name[3:])(x, axis).value, idx)
    g = rng.normal(size=a.shape)        # the cotangent of each position goes to its first tie
    want_grad = np.zeros_like(a)
    np.put_along_axis(want_grad, idx, 0, axis)
    moved_g, moved_i = np.moveaxis(g, axis, -1), np.moveaxis(idx, axis, -1)
    acc = np.zeros(moved_g.shape)
    for pos in np.ndindex(moved_g.shape[:-1]):
        for k in range(moved_g.shape[-1]):
            acc[pos + (moved_i[pos + (k,)],)] += moved_g[pos + (k,)]
    got = op.grad((out * g).sum(), x).value
    np.testing.assert_allclose(got, np.moveaxis(acc, -1, axis), rtol=1e-14)


def test_reverse_runs_from_the_end(rng):
    a = rng.normal(size=(3, 5))
    op = sg.Ops()
    x = op.var(a)
    np.testing.assert_array_equal(x.cummax(axis=1, reverse=True).value,
                                  np.maximum.accumulate(a[:, ::-1], axis=1)[:, ::-1])
    np.testing.assert_array_equal(op.cummin(x, 0, reverse=True).value,
                                  np.minimum.accumulate(a[::-1], axis=0)[::-1])
    sg.check_grads(lambda v: v.cummax(axis=1, reverse=True), [a])


def test_cummax_flattens_with_no_axis_and_batches_under_vmap(rng):
    a = rng.normal(size=(4, 3, 5))
    np.testing.assert_array_equal(sg.Ops().var(a[0]).cummax().value,
                                  np.maximum.accumulate(a[0].ravel()))
    got = sg.vmap(lambda v: v.cummin(axis=1))(a)
    np.testing.assert_array_equal(got, np.minimum.accumulate(a, axis=2))
    grads = sg.vmap(sg.grad(lambda v: (v.cummax(axis=0) ** 2).sum()))(a)
    for k in range(4):
        np.testing.assert_allclose(grads[k], sg.grad(lambda v: (v.cummax(0) ** 2).sum())(a[k]))

# ---------------------------------------------------------------- errors


def test_errors_name_the_operation_and_inputs():
    op = sg.Ops()
    x = op.var([0.2, 0.4], name="x")
    with pytest.raises(sg.ShapeError, match=r"betainc: .*shape \(3,\).*x with shape \(2,\)"):
        op.betainc(np.ones(3), 2.0, x)
    with pytest.raises(sg.ArgumentError, match="polygamma: n must be a non-negative int"):
        op.polygamma(-1, x)
    with pytest.raises(sg.AxisError, match="cummax.*x with shape"):
        x.cummax(axis=1)
    with pytest.raises(sg.ArgumentError, match="cummin: axis must be None or an int"):
        op.cummin(x, axis=1.5)
    assert len(op.tape) == 0


# ---------------------------------------------------------------- recorded a and b; gamma functions


def test_betainc_with_recorded_a_and_b_held_fixed(rng):
    a, b, x = rng.uniform(0.5, 4, 5), rng.uniform(0.5, 4, 5), rng.uniform(0.1, 0.9, 5)
    want = sg.Ops().var(x).betainc(a[:, None], b[:, None]).value       # constants, a loop
    got = sg.vmap(lambda ai, bi: ai.ops.betainc(ai, bi, x))(a, b)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    # grad in x with recorded a and b: the density x^(a-1) (1-x)^(b-1) / B(a, b)
    g = sg.vmap(sg.grad(lambda ai, bi, xs: xs.betainc(ai, bi).sum(), argnums=2),
                in_axes=(0, 0, None))(a, b, x)
    dens = x ** (a[:, None] - 1) * (1 - x) ** (b[:, None] - 1) / np.exp(
        log_beta(a[:, None], b[:, None]))
    np.testing.assert_allclose(g, dens, rtol=1e-12)
    op = sg.Ops()
    av, xv = op.var(2.0, name="a"), op.var(x, name="x")
    y = op.betainc(av, 3.0, xv)
    assert "betainc(a, 3.0, x)" in op.format_trace()
    gx = op.grad(y.sum(), xv)                    # a is held fixed: only x is asked for
    np.testing.assert_allclose(gx.value, 12 * x * (1 - x) ** 2, rtol=1e-13)
    # asking for a gradient that passes through a or b raises naming the entry, never zeros
    for create_graph in (True, False):
        with pytest.raises(sg.NotDifferentiableError, match=r"v\d+ = betainc\(\.\.\.\) has no "
                           r"derivative in its input a \(shape \(\)\)"):
            op.grad(y.sum(), [xv, av], create_graph=create_graph)
    w = op.var(0.5, name="w")
    z = op.betainc(op.exp(w, name="ew"), av, xv, name="z").sum()
    with pytest.raises(sg.NotDifferentiableError, match="input ew .*, which w reaches"):
        op.grad(z, w)
    with pytest.raises(sg.NotDifferentiableError, match="input ew"):
        z.backward()
    assert op.grad(z, xv).value.shape == x.shape    # x alone is still fine after a refusal
    with pytest.raises(sg.NotDifferentiableError, match="betainc"):
        sg.grad(lambda ai: ai.ops.betainc(ai, 2.0, x).sum())(2.0)
    with pytest.raises(sg.NotDifferentiableError, match="betainc: no tangent in a or b"):
        sg.jvp(lambda t: t.ops.betainc(t, 3.0, x), (2.0,), (1.0,))
    with pytest.raises(sg.NotDifferentiableError, match="betainc: no Taylor series in a or b"):
        sg.taylor(lambda t: t.ops.betainc(t, 3.0, x), np.array(2.0), np.array(1.0), 2)


def test_gammaln_is_inf_where_it_overflows_and_at_poles_and_infinities():
    """log |Gamma| past 2.55e305 overflows to inf with numpy's overflow warning (math.lgamma
    raised OverflowError there, and math.floor(-inf) did for -inf); at a pole and at +-inf it
    is inf, at nan nan."""
    op = sg.Ops()
    x = op.var(np.array([1e308, 2.5e305, -math.inf, math.inf, math.nan, -2.0]))
    with pytest.warns(RuntimeWarning, match="overflow"):
        got = x.gammaln().value
    assert np.isinf(got[0]) and got[1] == math.lgamma(2.5e305)
    assert np.isinf(got[2:4]).all() and np.isnan(got[4]) and np.isinf(got[5])

def test_gamma_functions_closed_forms_and_scipy():
    op = sg.Ops()
    n = op.var([1.0, 2.0, 5.0, 0.5])
    np.testing.assert_allclose(n.gammaln().value, [0.0, 0.0, np.log(24.0), np.log(np.pi) / 2],
                               atol=1e-15)
    euler = 0.5772156649015329
    np.testing.assert_allclose(n.digamma().value, [-euler, 1 - euler, 25 / 12 - euler,
                                                   -euler - 2 * np.log(2)], rtol=1e-14)
    np.testing.assert_allclose(op.polygamma(1, n).value[:1], [np.pi ** 2 / 6], rtol=1e-14)
    np.testing.assert_allclose(op.polygamma(3, n).value[:1], [np.pi ** 4 / 15], rtol=1e-14)
    np.testing.assert_allclose(sg.grad(lambda v: v.gammaln().sum())(np.array([1.0])), [-euler],
                               rtol=1e-14)
    special = pytest.importorskip("scipy.special")
    x = np.concatenate([np.geomspace(1e-3, 1e3, 200), -np.linspace(0.05, 20.95, 100)])
    for k in range(5):
        np.testing.assert_allclose(op.polygamma(k, op.var(x)).value, special.polygamma(k, x),
                                   rtol=1e-12 if k else 1e-10, atol=1e-13)
    assert special.gammaln(n).prim.name == "gammaln" and special.psi(n).prim.name == "polygamma"
