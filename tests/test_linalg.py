"""Checks of solve, inv, det, slogdet, cholesky and norm: closed forms and finite differences.

Finite differences are float64 central differences with step EPS = 1e-5; a derivative
computed by the library passes when |ad - fd| <= RTOL * max(1, max |fd|) entrywise
(RTOL = 1e-6). Order k is checked against central differences of order k - 1 computed by
the library, so order 2 tests the recorded gradient of a recorded gradient, order 3 one
level further.
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.primitives.core import REGISTRY
from simplegrad.primitives.linalg.determinants import COFACTORS_UP_TO
from simplegrad.primitives.linalg.samplers import (
    diagonally_dominant,
    negative_det,
    positive_definite,
)

EPS = 1e-5
RTOL = 1e-6
NAMES = ("solve", "inv", "det", "slogdet", "cholesky", "norm")


def close(ad, fd, what: str, rtol: float = RTOL) -> None:
    """Fail naming ``what`` unless ad matches the finite difference fd."""
    ad, fd = np.asarray(ad, dtype=float), np.asarray(fd, dtype=float)
    assert ad.shape == fd.shape, f"{what}: shape {ad.shape} != {fd.shape}"
    assert np.all(np.isfinite(ad)), f"{what}: not finite: {ad}"
    tol = rtol * max(1.0, float(np.max(np.abs(fd), initial=0.0)))
    err = float(np.max(np.abs(ad - fd), initial=0.0))
    assert err <= tol, f"{what}: max error {err:.3g} > {tol:.3g}\nad={ad}\nfd={fd}"

# ---------------------------------------------------------------- the cases, as a table


def _case_id(name, case) -> str:
    shapes = "x".join(str(s).replace(" ", "") for s in case.shapes)
    attrs = "".join(f"-{k}={v}".replace(" ", "") for k, v in case.attrs.items())
    dom = "-" + case.domain[0].__name__ if case.domain else ""
    return f"{name}-{shapes}{attrs}{dom}"


CASES = [(REGISTRY[n], c) for n in NAMES for c in REGISTRY[n].cases]
IDS = [_case_id(p.name, c) for p, c in CASES]


def _sample(prim, case, rng):
    domain = case.domain or prim.domain
    return [domain[i](rng, s) for i, s in enumerate(case.shapes)]


def _directional(prim, case, xs, vs, w, create_graph: bool = True):
    """Ops, its leaves and the recorded scalars D^k <w, f>[v_1..v_k] for k = 0..len(vs)."""
    op = sg.Ops()
    leaves = [op.var(x) for x in xs]
    d = [op.sum(op.mul(op.apply(prim, leaves, case.attrs), w))]
    for v in vs:
        gs = op.grad(d[-1], leaves, create_graph=create_graph)
        terms = [op.sum(op.mul(g, vi)) for g, vi in zip(gs, v)]
        total = terms[0]
        for t in terms[1:]:
            total = op.add(total, t)
        d.append(total)
    return op, leaves, d


def _value(prim, case, xs, vs, w) -> float:
    """D^k <w, f>[v_1..v_k] at xs as a float (k = len(vs))."""
    return float(_directional(prim, case, xs, vs, w)[2][-1].value)


def _shift(xs, v, s):
    return [x + s * vi for x, vi in zip(xs, v)]


# ---------------------------------------------------------------- registry-style checks


@pytest.mark.parametrize(("prim", "case"), CASES, ids=IDS)
def test_order1_gradient_matches_central_differences(prim, case, rng):
    xs = _sample(prim, case, rng)
    w = rng.normal(size=prim.forward(*xs, **case.attrs).shape)
    op, leaves, d = _directional(prim, case, xs, [], w)
    grads = op.grad(d[0], leaves)
    for i, (x, g) in enumerate(zip(xs, grads)):
        fd = np.zeros(x.shape)
        for j in np.ndindex(x.shape):
            e = np.zeros(x.shape)
            e[j] = EPS
            up = [xk + e if k == i else xk for k, xk in enumerate(xs)]
            down = [xk - e if k == i else xk for k, xk in enumerate(xs)]
            fd[j] = (np.sum(w * prim.forward(*up, **case.attrs))
                     - np.sum(w * prim.forward(*down, **case.attrs))) / (2 * EPS)
        close(g.value, fd, f"order 1, input {i}")
    # the value-only sweep (create_graph=False) gives the same numbers
    plain = op.grad(d[0], leaves, create_graph=False)
    for i, (g, p) in enumerate(zip(grads, plain)):
        np.testing.assert_allclose(p.value, g.value, rtol=1e-12, atol=1e-12,
                                   err_msg=f"create_graph=False, input {i}")


@pytest.mark.parametrize(("prim", "case"), CASES, ids=IDS)
def test_order2_hessian_vector_product_matches_differences_of_gradients(prim, case, rng):
    xs = _sample(prim, case, rng)
    w = rng.normal(size=prim.forward(*xs, **case.attrs).shape)
    v = [rng.normal(size=x.shape) for x in xs]
    op, leaves, d = _directional(prim, case, xs, [v], w)
    hv = op.grad(d[1], leaves)

    def grads(at):
        o2, lv, d2 = _directional(prim, case, at, [], w)
        return [g.value for g in o2.grad(d2[0], lv, create_graph=False)]

    up, down = grads(_shift(xs, v, EPS)), grads(_shift(xs, v, -EPS))
    for i in range(len(xs)):
        close(hv[i].value, (up[i] - down[i]) / (2 * EPS), f"order 2 (H v), input {i}")


@pytest.mark.parametrize(("prim", "case"), CASES, ids=IDS)
def test_order3_directional_derivative_matches_differences_of_order2(prim, case, rng):
    xs = _sample(prim, case, rng)
    w = rng.normal(size=prim.forward(*xs, **case.attrs).shape)
    v1, v2, v3 = ([rng.normal(size=x.shape) for x in xs] for _ in range(3))
    ad = _value(prim, case, xs, [v1, v2, v3], w)
    fd = (_value(prim, case, _shift(xs, v3, EPS), [v1, v2], w)
          - _value(prim, case, _shift(xs, v3, -EPS), [v1, v2], w)) / (2 * EPS)
    close(ad, fd, "order 3", rtol=1e-5)


@pytest.mark.parametrize(("prim", "case"), CASES, ids=IDS)
def test_jvp_matches_central_differences_and_is_differentiable(prim, case, rng):
    xs = _sample(prim, case, rng)
    ts = [rng.normal(size=x.shape) for x in xs]
    f = lambda at: prim.forward(*at, **case.attrs)
    op = sg.Ops()
    leaves = [op.var(x) for x in xs]
    y = op.apply(prim, leaves, case.attrs)
    jv = op.jvp(y, leaves, ts)
    close(jv.value, (f(_shift(xs, ts, EPS)) - f(_shift(xs, ts, -EPS))) / (2 * EPS), "jvp")
    # the recorded tangent differentiated again: d <w, J(x) t> along v
    w = rng.normal(size=y.shape)
    v = [rng.normal(size=x.shape) for x in xs]
    gs = op.grad(op.sum(op.mul(jv, w)), leaves)
    ad = sum(float(np.sum(g.value * vi)) for g, vi in zip(gs, v))

    def jvp_value(at):
        o2 = sg.Ops()
        lv = [o2.var(x) for x in at]
        return float(np.sum(w * o2.jvp(o2.apply(prim, lv, case.attrs), lv, ts,
                                       create_graph=False).value))

    fd = (jvp_value(_shift(xs, v, EPS)) - jvp_value(_shift(xs, v, -EPS))) / (2 * EPS)
    close(ad, fd, "grad of jvp")


def test_every_primitive_here_is_registered_with_cases_and_an_ops_method():
    for name in NAMES:
        prim = REGISTRY[name]
        assert prim.cases and prim.jvp is not None and all(r is not None for r in prim.vjp)
        assert callable(getattr(sg.Ops(), name))

# ---------------------------------------------------------------- closed forms


def test_det_of_known_matrices():
    op = sg.Ops()
    assert op.det(op.var([[2.0, 1.0], [1.0, 3.0]])).item() == pytest.approx(5.0, abs=1e-12)
    a = op.var([[1.0, 2.0, 3.0], [0.0, 1.0, 4.0], [5.0, 6.0, 0.0]])
    assert op.det(a).item() == pytest.approx(1.0, abs=1e-12)
    batch = op.det(op.var(np.stack([np.eye(3) * 2.0, np.diag([1.0, -2.0, 3.0])])))
    np.testing.assert_allclose(batch.value, [8.0, -6.0], atol=1e-12)


def test_det_gradient_is_det_times_inverse_transpose(rng):
    a = negative_det(rng, (2, 3, 3))
    op = sg.Ops()
    x = op.var(a)
    g = op.grad(op.sum(op.det(x)), x)
    expected = np.linalg.det(a)[:, None, None] * np.linalg.inv(np.swapaxes(a, -1, -2))
    np.testing.assert_allclose(g.value, expected, rtol=1e-12, atol=1e-12)


def _adjugate_2x2(a):
    return np.array([[a[1, 1], -a[0, 1]], [-a[1, 0], a[0, 0]]])


def _adjugate_3x3(a):
    """adj(a) from its definition: adj[j, i] = (-1)^(i+j) det of a without row i, column j."""
    adj = np.zeros((3, 3))
    for i in range(3):
        for j in range(3):
            rows, cols = [r for r in range(3) if r != i], [c for c in range(3) if c != j]
            m = a[np.ix_(rows, cols)]
            adj[j, i] = (-1) ** (i + j) * (m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0])
    return adj


SINGULAR = {
    "2x2-rank1": np.array([[1.0, 2.0], [-0.5, -1.0]]),
    "2x2-zero": np.zeros((2, 2)),
    "3x3-rank2": np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]),
    "3x3-rank1": np.outer([1.0, -2.0, 0.5], [3.0, 1.0, -1.0]),
}


@pytest.mark.parametrize("name", list(SINGULAR))
def test_det_gradient_of_a_singular_matrix_is_the_adjugate_transposed(name, rng):
    a = SINGULAR[name]
    adj = _adjugate_2x2(a) if a.shape == (2, 2) else _adjugate_3x3(a)
    assert np.linalg.matrix_rank(a) < a.shape[0]
    t = rng.normal(size=a.shape)
    for create_graph in (True, False):
        op = sg.Ops()
        x = op.var(a)
        d = op.det(x)
        assert d.item() == pytest.approx(0.0, abs=1e-12)
        np.testing.assert_allclose(op.grad(d, x, create_graph=create_graph).value, adj.T,
                                   rtol=1e-12, atol=1e-12)
        # jvp: d det(a)[t] = trace(adj(a) t)
        assert op.jvp(d, x, t, create_graph=create_graph).item() == pytest.approx(
            np.trace(adj @ t), abs=1e-12)
    # a batch mixing singular and regular matrices, and orders 1 and 2 (both modes) at a
    # singular point against central differences
    batch = np.stack([a, a + np.eye(a.shape[0])])
    sg.check_grads(lambda m: m.ops.det(m), [batch], order=2)
    sg.check_grads(lambda m: m.ops.det(m), [a], order=3, modes=("rev",))


def test_det_gradient_of_a_matrix_above_the_cofactor_size_uses_the_inverse(rng):
    n = COFACTORS_UP_TO + 1
    a = diagonally_dominant(rng, (n, n))
    op = sg.Ops()
    x = op.var(a)
    g = op.grad(op.det(x), x)
    np.testing.assert_allclose(g.value, np.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-10)
    assert "inv(" in op.format_trace()


@pytest.mark.parametrize("sampler", [diagonally_dominant, negative_det],
                         ids=["positive-det", "negative-det"])
def test_slogdet_is_log_abs_det_with_gradient_inverse_transpose(sampler, rng):
    a = sampler(rng, (3, 3))
    op = sg.Ops()
    x = op.var(a)
    logdet = op.slogdet(x)
    sign = np.linalg.slogdet(x.value).sign       # the documented way to get the sign
    assert sign == np.sign(np.linalg.det(a))
    assert logdet.item() == pytest.approx(np.log(abs(np.linalg.det(a))), rel=1e-12)
    np.testing.assert_allclose(op.grad(logdet, x).value, np.linalg.inv(a).T, rtol=1e-12,
                               atol=1e-12)


def test_inv_gradient_closed_form(rng):
    a = diagonally_dominant(rng, (3, 3))
    w = rng.normal(size=(3, 3))
    op = sg.Ops()
    x = op.var(a)
    g = op.grad(op.sum(op.mul(op.inv(x), w)), x)
    ai = np.linalg.inv(a)
    np.testing.assert_allclose(g.value, -ai.T @ w @ ai.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(op.inv(x).value @ a, np.eye(3), atol=1e-12)


@pytest.mark.parametrize("bshape", [(3,), (3, 2), (4, 3, 2)], ids=["vector", "matrix", "batch"])
def test_solve_gradient_closed_form(bshape, rng):
    a = diagonally_dominant(rng, (3, 3))
    b = rng.normal(size=bshape)
    x = np.linalg.solve(a, b)
    w = rng.normal(size=x.shape)
    op = sg.Ops()
    av, bv = op.var(a), op.var(b)
    out = op.solve(av, bv)
    np.testing.assert_allclose(a @ out.value, b, atol=1e-12)
    ga, gb = op.grad(op.sum(op.mul(out, w)), [av, bv])
    gb_expected = np.linalg.solve(a.T, w[..., None] if len(bshape) == 1 else w)
    xm = x[..., None] if len(bshape) == 1 else x
    ga_expected = -np.sum(gb_expected @ np.swapaxes(xm, -1, -2), axis=0) if len(bshape) == 3 \
        else -gb_expected @ xm.T
    np.testing.assert_allclose(gb.value, gb_expected.reshape(bshape), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ga.value, ga_expected, rtol=1e-12, atol=1e-12)


def test_solve_with_vector_b_and_batched_a_follows_numpy2():
    op = sg.Ops()
    a = op.var(np.stack([np.eye(2) * 2.0, np.eye(2) * 4.0]))
    x = op.solve(a, op.var([2.0, 4.0]))
    np.testing.assert_allclose(x.value, [[1.0, 2.0], [0.5, 1.0]])

# ---------------------------------------------------------------- norm at zero


def test_norm_of_zero_vector_has_zero_gradient_at_orders_1_and_2():
    op = sg.Ops()
    x = op.var(np.zeros(3))
    n = op.norm(x)
    g = op.grad(n, x)
    np.testing.assert_array_equal(g.value, np.zeros(3))
    hv = op.grad(op.sum(op.mul(g, np.array([1.0, -2.0, 0.5]))), x)
    np.testing.assert_array_equal(hv.value, np.zeros(3))
    t = op.jvp(n, x, np.array([1.0, 2.0, 3.0]))
    assert t.item() == 0.0
    assert not np.isnan(op.grad(t, x).value).any()


def test_norm_rows_with_a_zero_row_second_derivative_matches_differences(rng):
    x0 = rng.normal(size=(3, 4))
    x0[1] = 0.0
    w = rng.normal(size=3)
    v = rng.normal(size=(3, 4))
    v[1] = 0.0      # stay on the zero row: the other rows are smooth, the zero row is 0

    def grad_at(x):
        op = sg.Ops()
        xv = op.var(x)
        return op.grad(op.sum(op.mul(op.norm(xv, axis=1), w)), xv, create_graph=False).value

    op = sg.Ops()
    xv = op.var(x0)
    g = op.grad(op.sum(op.mul(op.norm(xv, axis=1), w)), xv)
    expected = w[:, None] * x0 / np.maximum(np.linalg.norm(x0, axis=1, keepdims=True), 1e-300)
    np.testing.assert_allclose(g.value, expected, rtol=1e-12)
    assert np.all(g.value[1] == 0.0)
    hv = op.grad(op.sum(op.mul(g, v)), xv)
    fd = (grad_at(x0 + EPS * v) - grad_at(x0 - EPS * v)) / (2 * EPS)
    close(hv.value, fd, "norm order 2 with a zero row")
    assert np.all(hv.value[1] == 0.0)


def test_norm_matches_numpy_for_each_axis_form(rng):
    x = rng.normal(size=(2, 3, 4))
    op = sg.Ops()
    xv = op.var(x)
    for axis, keep in [(None, False), (2, False), ((1, 2), True), ([0, -1], False)]:
        np.testing.assert_allclose(op.norm(xv, axis=axis, keepdims=keep).value,
                                   np.linalg.norm(x, axis=None if axis is None else
                                                  (axis if isinstance(axis, int) else
                                                   tuple(axis)), keepdims=keep), rtol=1e-14)

# ---------------------------------------------------------------- cholesky


def test_cholesky_reconstructs_a_and_is_lower(rng):
    a = positive_definite(rng, (2, 4, 4))
    op = sg.Ops()
    low = op.cholesky(op.var(a)).value
    np.testing.assert_allclose(low @ np.swapaxes(low, -1, -2), a, atol=1e-12)
    np.testing.assert_array_equal(np.triu(low, 1), 0.0)


def test_cholesky_gradient_matches_differences_on_symmetric_perturbations(rng):
    a = positive_definite(rng, (4, 4))
    w = rng.normal(size=(4, 4))
    op = sg.Ops()
    x = op.var(a)
    g = op.grad(op.sum(op.mul(op.cholesky(x), w)), x).value
    np.testing.assert_allclose(g, g.T, atol=1e-14)     # the symmetric gradient
    f = lambda m: float(np.sum(w * np.linalg.cholesky(m)))
    for _ in range(5):
        e = rng.normal(size=(4, 4))
        e = e + e.T
        fd = (f(a + EPS * e) - f(a - EPS * e)) / (2 * EPS)
        close(np.sum(g * e), fd, "cholesky gradient along a symmetric perturbation")

# ---------------------------------------------------------------- printing


def test_print_rules_read_as_python():
    op = sg.Ops()
    a = op.named_var(np.eye(2) * 2.0, "A")
    b = op.named_var([1.0, 2.0], "b")
    op.solve(a, b)
    op.inv(a)
    op.det(a)
    op.slogdet(a)
    op.cholesky(a)
    op.norm(a, axis=1)
    op.norm(a, axis=(0, 1), keepdims=True)
    op.norm(b)
    lines = op.format_trace().splitlines()[2:]
    assert lines == ["v0 = solve(A, b)", "v1 = inv(A)", "v2 = det(A)",
                     "v3 = slogdet(A).logabsdet", "v4 = cholesky(A)", "v5 = norm(A, axis=1)",
                     "v6 = norm(A, axis=(0, 1), keepdims=True)", "v7 = norm(b)"]


@pytest.mark.parametrize("xs, ys", [((64, 64, 1), (64, 1, 100)), ((300, 1), (1, 300)),
                                    ((2, 1, 300, 1), (3, 1, 300)), ((8, 1), (1, 64))])
def test_outer_products_of_every_size_match_matmul(xs, ys):
    # a contraction of length 1 runs as einsum (large) or a broadcast multiply (small)
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=xs), rng.normal(size=ys)
    op = sg.Ops()
    x, y = op.var(a), op.var(b)
    out = x @ y
    np.testing.assert_array_equal(out.value, np.matmul(a, b))
    w = rng.normal(size=out.shape)
    gx, gy = op.grad((out * w).sum(), [x, y])
    # out[..., i, j] = a[..., i, 0] b[..., 0, j], so (hand-derived) dL/da[..., i, 0] =
    # sum_j w b and dL/db[..., 0, j] = sum_i w a, each summed back to its input's shape
    np.testing.assert_allclose(gx.value, _sum_to((w * b).sum(-1, keepdims=True), xs),
                               rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(gy.value, _sum_to((w * a).sum(-2, keepdims=True), ys),
                               rtol=1e-12, atol=1e-13)


def _sum_to(arr: np.ndarray, shape: tuple) -> np.ndarray:
    """arr summed over the dimensions broadcasting added to ``shape``."""
    arr = arr.sum(axis=tuple(range(arr.ndim - len(shape))))
    return arr.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1 and arr.shape[i] != 1),
                   keepdims=True)
