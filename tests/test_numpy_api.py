"""Plain numpy functions, written with ``np.`` calls only, differentiated through sg.grad.

Each function below is ordinary numpy code: given Variables, numpy's calls record through
``__array_function__`` (and ``__array_ufunc__`` for ufuncs). Oracles: closed-form gradients
(rtol 1e-10 unless stated) and, for second order, float64 central differences via
``sg.check_grads`` at its default tolerances.
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.primitives import PrimitiveMethods, numpy_api

# ---------------------------------------------------------------- the functions


def softmax_regression_loss(W, X, y):
    logits = X @ W
    z = logits - np.max(logits, axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(len(y)), y])


def gaussian_log_likelihood(mu, S, x):
    r = x - mu
    _, logdet = np.linalg.slogdet(S)
    return -0.5 * (r @ np.linalg.solve(S, r) + logdet + len(x) * np.log(2 * np.pi))


def horner(coefficients, x):
    total = np.zeros_like(x)
    for c in coefficients:
        total = total * x + c
    return np.sum(total)


def residual_norm(w, A, b):
    return np.linalg.norm(A @ w - b)


def shuffled(x, C):
    return np.sum(np.transpose(np.reshape(np.concatenate([x, x ** 2]), (2, 3))) * C)


def relu_energy(x):
    return np.sum(np.where(x > 0, x, 0) ** 2)


def inverse_sum(A):
    return np.sum(np.linalg.inv(A))


def eigenvalue_energy(A):
    return np.sum(np.linalg.eigh(A)[0] ** 2)


def nuclear_norm(A):
    return np.sum(np.linalg.svd(A, compute_uv=False))


def log_abs_det_by_qr(A):
    R = np.linalg.qr(A)[1]
    n = np.shape(A)[0]
    return np.sum(np.log(np.abs(R[np.arange(n), np.arange(n)])))


def bilinear(u, v, M):
    return np.sum(np.outer(u, v) * M) + np.dot(u, v)


def stacked_mean(x, y):
    return np.mean(np.stack([x, y], axis=1) ** 2)


def squared_sum(A):
    return np.sum(np.linalg.matrix_power(A, 2)) + np.linalg.det(A)


# ---------------------------------------------------------------- against closed forms


def test_softmax_regression(rng):
    X, y, W = rng.normal(size=(5, 3)), np.array([0, 2, 1, 3, 2]), rng.normal(size=(3, 4))
    e = np.exp(X @ W - (X @ W).max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    want = X.T @ (p - np.eye(4)[y]) / 5
    np.testing.assert_allclose(sg.grad(softmax_regression_loss)(W, X, y), want, rtol=1e-10,
                               atol=1e-14)


def test_gaussian_log_likelihood(rng):
    B = rng.normal(size=(3, 3))
    S, mu, x = B @ B.T + 3 * np.eye(3), rng.normal(size=3), rng.normal(size=3)
    gmu, gS = sg.grad(gaussian_log_likelihood, argnums=(0, 1))(mu, S, x)
    Si, r = np.linalg.inv(S), x - mu
    np.testing.assert_allclose(gmu, Si @ r, rtol=1e-10)
    np.testing.assert_allclose(gS, 0.5 * (Si @ np.outer(r, r) @ Si - Si), rtol=1e-10)
    sg.check_grads(lambda m, s: gaussian_log_likelihood(m, s, x), [mu, S])


def test_polynomials_by_hand_and_by_polyval():
    c, x = np.array([2.0, -1.0, 0.5, 3.0]), np.array([0.3, -1.2, 2.0])
    np.testing.assert_allclose(sg.grad(lambda z: horner(c, z))(x), np.polyval(np.polyder(c), x),
                               rtol=1e-12)
    np.testing.assert_allclose(sg.grad(lambda z: np.sum(np.polyval(c, z)))(x),
                               np.polyval(np.polyder(c), x), rtol=1e-12)
    # the coefficients as the Variable: d p(x) / d c_k = x^(n-1-k)
    np.testing.assert_allclose(sg.grad(lambda p: np.polyval(p, 1.5))(c),
                               1.5 ** np.arange(3, -1, -1))


def test_residual_norm(rng):
    A, b, w = rng.normal(size=(4, 2)), rng.normal(size=4), rng.normal(size=2)
    r = A @ w - b
    np.testing.assert_allclose(sg.grad(residual_norm)(w, A, b), A.T @ r / np.linalg.norm(r),
                               rtol=1e-10)


def test_shape_functions_and_where(rng):
    x, C = rng.normal(size=3), rng.normal(size=(3, 2))
    # row k of the transposed reshape is (x_k, x_k^2): d/dx_k = C[k, 0] + 2 x_k C[k, 1]
    np.testing.assert_allclose(sg.grad(shuffled)(x, C), C[:, 0] + 2 * x * C[:, 1], rtol=1e-12)
    x = np.array([-1.0, 0.5, 2.0, 0.0])
    np.testing.assert_allclose(sg.grad(relu_energy)(x), [0.0, 1.0, 4.0, 0.0])


def test_inverse_determinant_and_matrix_power(rng):
    A = np.eye(3) * 3 + rng.uniform(-1, 1, (3, 3))
    Ai, one = np.linalg.inv(A), np.ones((3, 3))
    np.testing.assert_allclose(sg.grad(inverse_sum)(A), -Ai.T @ one @ Ai.T, rtol=1e-10)
    want = one @ A.T + A.T @ one + np.linalg.det(A) * Ai.T       # d sum(A^2) + d det(A)
    np.testing.assert_allclose(sg.grad(squared_sum)(A), want, rtol=1e-10)


def test_spectral_functions(rng):
    A = rng.normal(size=(3, 3))
    # numpy's eigh reads the lower triangle: sum w^2 = |M|_F^2, M = tril(A) + tril(A, -1)^T,
    # = sum_i A_ii^2 + 2 sum_{i>j} A_ij^2; the upper triangle is ignored (gradient 0)
    want = 4 * np.tril(A, -1) + 2 * np.diag(np.diag(A))
    np.testing.assert_allclose(sg.grad(eigenvalue_energy)(A), want, rtol=1e-10)
    h, differences = 1e-6, np.zeros_like(A)     # the same from numpy's function on arrays
    for i in np.ndindex(A.shape):
        e = np.zeros_like(A)
        e[i] = h
        differences[i] = (eigenvalue_energy(A + e) - eigenvalue_energy(A - e)) / (2 * h)
    np.testing.assert_allclose(differences, want, rtol=1e-6, atol=1e-8)
    sg.check_grads(eigenvalue_energy, [A])
    u, _, vh = np.linalg.svd(A)
    np.testing.assert_allclose(sg.grad(nuclear_norm)(A), u @ vh, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sg.grad(log_abs_det_by_qr)(A), np.linalg.inv(A).T, rtol=1e-9)
    sg.check_grads(log_abs_det_by_qr, [A])


def test_outer_dot_stack_and_mean(rng):
    u, v, M = rng.normal(size=3), rng.normal(size=3), rng.normal(size=(3, 3))
    gu, gv = sg.grad(bilinear, argnums=(0, 1))(u, v, M)
    np.testing.assert_allclose(gu, M @ v + v, rtol=1e-12)
    np.testing.assert_allclose(gv, M.T @ u + u, rtol=1e-12)
    gx, gy = sg.grad(stacked_mean, argnums=(0, 1))(u, v)
    np.testing.assert_allclose(gx, u / 3, rtol=1e-12)
    np.testing.assert_allclose(gy, v / 3, rtol=1e-12)


def test_lstsq_and_norms(rng):
    A, b = rng.normal(size=(5, 2)), rng.normal(size=5)
    np.testing.assert_allclose(sg.grad(lambda q: np.sum(np.linalg.lstsq(A, q)[0]))(b),
                               np.linalg.pinv(A).T @ np.ones(2), rtol=1e-10)
    X = rng.normal(size=(2, 3))
    f = lambda x: np.linalg.matrix_norm(x) + np.sum(np.linalg.vector_norm(x, axis=1))  # noqa: E731
    want = X / np.linalg.norm(X) + X / np.linalg.norm(X, axis=1, keepdims=True)
    np.testing.assert_allclose(sg.grad(f)(X), want, rtol=1e-12)


def test_functions_of_the_other_families_record_through_np(rng):
    A, X = rng.normal(size=(2, 3)), rng.normal(size=(3, 4))
    # d sum(A X) / dX = A^T 1
    np.testing.assert_allclose(sg.grad(lambda x: np.sum(np.einsum("ij,jk->ik", A, x)))(X),
                               A.T @ np.ones((2, 4)), rtol=1e-12)
    x = rng.normal(size=5)
    np.testing.assert_allclose(sg.grad(lambda v: np.var(v, ddof=1))(x),
                               2 * (x - x.mean()) / 4, rtol=1e-12)
    np.testing.assert_allclose(sg.grad(lambda v: np.sum(np.cumsum(v) ** 2))(x),
                               2 * np.cumsum(np.cumsum(x)[::-1])[::-1], rtol=1e-12)
    B = rng.normal(size=(2, 3, 3))           # the array API's trace: last two axes, batched
    np.testing.assert_allclose(sg.grad(lambda b: np.sum(np.linalg.trace(b) ** 2))(B),
                               2 * np.trace(B, axis1=-2, axis2=-1)[:, None, None] * np.eye(3),
                               rtol=1e-12)
    np.testing.assert_allclose(sg.grad(lambda b: np.sum(np.trace(b)))(B),   # axes 0 and 1
                               np.eye(2, 3)[:, :, None] * np.ones((1, 1, 3)), rtol=1e-12)
    np.testing.assert_allclose(sg.grad(lambda b: np.sum(np.linalg.diagonal(b)))(B),
                               np.broadcast_to(np.eye(3), (2, 3, 3)), rtol=1e-12)


def test_calls_record_the_matching_primitive():
    op = sg.Ops()
    x = op.var(np.ones((2, 3)), name="x")
    A = op.var(np.eye(2) * 2, name="A")
    calls = [(np.sum(x, axis=1), "v0 = x.sum(axis=1)"),
             (np.concatenate([x, x]), "v1 = concatenate([x, x], axis=0)"),
             (np.linalg.solve(A, x), "v2 = solve(A, x)"),
             (np.transpose(x), "v3 = x.T"),
             (np.reshape(x, (3, 2)), "v4 = x.reshape([3, 2])"),
             (np.broadcast_to(x, (4, 2, 3)), "v5 = x.expand([4, 2, 3])"),
             (np.linalg.inv(A), "v6 = inv(A)"),
             (np.astype(x, np.float32), "v7 = x.astype(dtype=float32)")]
    lines = op.format_trace().splitlines()
    for out, line in calls:
        assert isinstance(out, sg.Variable) and line in lines


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("call, text", [
    (lambda x: np.nanmedian(x), r"np\.nanmedian has no simplegrad rule for Variables \(x with "
                                r"shape .*what records instead: np\.median\(x\[mask\]\)"),
    (lambda x: np.linalg.eig(x), r"np\.linalg\.eig has no simplegrad rule"),
    (lambda x: np.fft.hfft(x), r"np\.fft\.hfft has no simplegrad rule"),
    (lambda x: np.sum(x, out=np.zeros(2)), r"np\.sum: out=.* is not supported"),
    (lambda x: np.reshape(x, (4,), order="F"), r"np\.reshape: order='F' is not supported"),
    (lambda x: np.linalg.norm(x, ord=1), r"np\.linalg\.norm: ord=1 is not supported"),
    (lambda x: np.where(x > 0), r"np\.where on Variables .* records as op\.where"),
    (lambda x: np.linalg.svd(x, hermitian=True), r"hermitian=True is not supported"),
    (lambda x: np.histogram(x), r"np\.histogram has no simplegrad rule"),
], ids=["nanmedian", "eig", "hfft", "out", "order", "ord", "where-1", "hermitian", "histogram"])
def test_unsupported_numpy_calls_raise_naming_the_function(call, text):
    op = sg.Ops()
    x = op.var(np.eye(2), name="x")
    before = len(op.tape)
    with pytest.raises(sg.ArgumentError, match=text):
        call(x)
    assert len(op.tape) == before + ("where" in text)     # np.where(x > 0) records x > 0


def test_the_table_follows_the_registry_and_the_family_methods():
    table = numpy_api.table()
    names = set(sg.REGISTRY) | {n for n in dir(PrimitiveMethods) if not n.startswith("_")}
    for name in sorted(names - {"apply"}):
        for space in (np, np.linalg):
            fn = getattr(space, name, None)
            if callable(fn) and not isinstance(fn, np.ufunc) and not (
                    space is np.linalg and (name in numpy_api.ARRAY_API or
                                            name in numpy_api.ELSEWHERE)):
                assert fn in table, f"{space.__name__}.{name} is an Ops method but not in the table"
    op = sg.Ops()
    x = op.var([1.0, 2.0, 4.0], name="x")
    try:                                # op.var makes leaves: np.var must never reach it
        v = np.var(x)
    except sg.ArgumentError:
        return
    assert v.prim is not None and v.inputs[0] is x.node


def test_ufuncs_record_exactly_the_generated_ufunc_table():
    """__array_ufunc__ (variable.py) and numpy_api.ufuncs() agree: a ufunc records, and records
    the named primitive, exactly when the generated table has it (== and != stay identity)."""
    op = sg.Ops()
    x, y = op.var([0.3, 0.6], name="x"), op.var([0.2, 0.4], name="y")
    floats, bools = [x, y], [x > 0.4, y > 0.3]
    table = numpy_api.ufuncs()
    ufuncs = {u for u in vars(np).values() if isinstance(u, np.ufunc) and u.nin <= 2}
    assert set(table) <= ufuncs and len(table) >= 25
    for ufunc in sorted(ufuncs - {np.equal, np.not_equal}, key=lambda u: u.__name__):
        name = table.get(ufunc)
        args = (bools if (name or "").startswith("logical") else floats)[:ufunc.nin]
        if name is None:
            with pytest.raises(sg.ArgumentError, match=ufunc.__name__):
                ufunc(*args)
            continue
        with np.errstate(invalid="ignore", divide="ignore"):   # arccosh(0.3) is nan: fine
            out = ufunc(*args)
            assert isinstance(out, sg.Variable), ufunc.__name__
            assert out.prim is getattr(op, name)(*args).prim, ufunc.__name__


def test_shape_queries_answer_without_recording_and_match_the_array():
    """np.shape, np.ndim and np.size of a Variable (the quick path before the table) equal
    numpy's answers on its value, record nothing, and keep the argument forms of the table
    (np.size(x, axis)); under vmap they see one example's shape."""
    op = sg.Ops()
    for shape in [(), (3,), (2, 0, 4), (3, 4)]:
        x = op.var(np.ones(shape))
        before = len(op.tape)
        got = (np.shape(x), np.ndim(x), np.size(x))
        assert got == (np.shape(x.value), np.ndim(x.value), np.size(x.value))
        assert type(got[2]) is int and len(op.tape) == before
    x = op.var(np.ones((3, 4)))
    assert np.size(x, 1) == 4 and np.size(x, axis=0) == 3
    seen = []
    sg.vmap(lambda r: seen.append((np.shape(r), np.ndim(r), np.size(r))) or r)(np.ones((5, 3)))
    assert seen == [((3,), 1, 3)]
