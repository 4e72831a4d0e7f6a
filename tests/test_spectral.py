"""eigh, svd, qr, pinv, lstsq and matrix_power against closed forms and numpy.

The registry test checks every case at orders 1 and 2 against finite differences; here the
oracles are formulas: the eigenvalues of a 2x2 symmetric matrix and their first and second
derivatives, d sigma_i = u_i^T dA v_i, d tr(A^-1) = -A^-T A^-T, d tr(A^3) = 3 (A^2)^T.
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.primitives.linalg.samplers import spread_singular, symmetric_spread

# ---------------------------------------------------------------- eigh


def _eig2(a: float, b: float, c: float) -> tuple:
    """Eigenvalues of [[a, b], [b, c]] and the gradient and d2/db2 of the larger one."""
    h, r = (a - c) / 2, np.hypot((a - c) / 2, b)
    top = (a + c) / 2 + r
    grad = np.array([0.5 + h / (2 * r), b / r, 0.5 - h / (2 * r)])     # d/da, d/db, d/dc
    return ((a + c) / 2 - r, top), grad, h * h / r ** 3


def test_eigh_2x2_values_and_derivatives_match_the_closed_form() -> None:
    a, b, c = 1.3, 0.4, -0.2
    (lo, hi), (da, db, dc), d2b = _eig2(a, b, c)
    op = sg.Ops()
    A = op.var([[a, b], [b, c]], name="A")
    w = op.eigvalsh(A)
    np.testing.assert_allclose(w.value, [lo, hi], rtol=1e-14)
    g = op.grad(w[1], A)
    # the input is symmetrised, so b's derivative splits evenly over A[0, 1] and A[1, 0]
    np.testing.assert_allclose(g.value, [[da, db / 2], [db / 2, dc]], rtol=1e-12)
    # second order: d/dA01 of dhi/dA01 is (1/2)^2 d2/db2 (both entries move b by 1/2)
    h = op.grad(g[0, 1], A)
    np.testing.assert_allclose(h.value[0, 1], d2b / 4, rtol=1e-10)
    np.testing.assert_allclose(op.grad(w.sum(), A).value, np.eye(2), atol=1e-14)   # trace


def test_eigh_decomposes_the_symmetric_part_with_fixed_signs(rng) -> None:
    x = symmetric_spread(rng, (2, 4, 4))
    op = sg.Ops()
    w, v = op.eigh(op.var(x))
    s = (x + np.swapaxes(x, -1, -2)) / 2
    np.testing.assert_allclose((v.value * w.value[..., None, :]) @ np.swapaxes(v.value, -1, -2),
                               s, atol=1e-12)
    np.testing.assert_allclose(w.value, np.linalg.eigvalsh(s), rtol=1e-12)
    biggest = np.take_along_axis(v.value, np.abs(v.value).argmax(axis=-2)[..., None, :], -2)
    assert np.all(biggest > 0)


def test_eigh_records_two_entries_from_one_decomposition(monkeypatch) -> None:
    calls = []
    real = np.linalg.eigh
    monkeypatch.setattr(np.linalg, "eigh", lambda a: calls.append(1) or real(a))
    op = sg.Ops()
    A = op.var([[2.0, 1.0], [1.0, 3.0]], name="A")
    w, v = op.eigh(A)
    assert len(calls) == 1
    assert op.format_trace().splitlines()[1:] == ["v0 = eigh(A).eigenvalues",
                                                   "v1 = eigh(A).eigenvectors"]


def test_svd_rules_record_the_other_factors_from_one_decomposition(monkeypatch) -> None:
    calls = []
    real = np.linalg.svd
    monkeypatch.setattr(np.linalg, "svd", lambda a, **kw: calls.append(1) or real(a, **kw))
    op = sg.Ops()
    A = op.var([[2.0, 1.0], [1.0, 3.0]], name="A")
    U, S, Vh = op.svd(A)
    op.grad(U.sum(), A)                     # the vjp records svd(A).S and svd(A).Vh: one svd
    assert len(calls) == 2


def test_eigenvectors_at_repeated_eigenvalues_raise_when_differentiated() -> None:
    op = sg.Ops()
    A = op.var(np.diag([1.0, 1.0, 2.0]), name="A")
    w, v = op.eigh(A)
    np.testing.assert_allclose(op.grad(w.sum(), A).value, np.eye(3))   # values: fine
    loss = v[:, 0].sum()
    before = len(op.tape)
    with pytest.raises(sg.LinAlgError, match="eigh: .*eigenvectors.*A has repeated"):
        op.grad(loss, A)
    assert len(op.tape) == before
    with pytest.raises(sg.LinAlgError):
        sg.jvp(lambda a: a.ops.eigh(a).eigenvectors, (np.eye(2),), (np.ones((2, 2)),))


# ---------------------------------------------------------------- svd


def test_singular_value_gradient_is_u_v_transposed(rng) -> None:
    x = rng.normal(size=(4, 3))
    u, s, vh = np.linalg.svd(x, full_matrices=False)
    op = sg.Ops()
    A = op.var(x)
    S = op.svdvals(A)
    np.testing.assert_allclose(S.value, s, rtol=1e-13)
    for i in range(3):      # d sigma_i = u_i^T dA v_i: the gradient is outer(u_i, v_i)
        np.testing.assert_allclose(op.grad(S[i], A).value, np.outer(u[:, i], vh[i]),
                                   atol=1e-12)


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4), (2, 3, 2)])
def test_svd_reconstructs_with_fixed_signs(rng, shape) -> None:
    x = spread_singular(rng, shape)
    op = sg.Ops()
    U, S, Vh = op.svd(op.var(x), full_matrices=False)
    np.testing.assert_allclose(U.value @ (S.value[..., None] * Vh.value), x, atol=1e-12)
    biggest = np.take_along_axis(U.value, np.abs(U.value).argmax(axis=-2)[..., None, :], -2)
    assert np.all(biggest > 0)
    # a sign-invariant function of the vectors: U diag(S) Vh is a, so its gradient is g
    g = rng.normal(size=shape)
    rebuilt = op.matmul(op.mul(U, S.reshape(S.shape[:-1] + (1, S.shape[-1]))), Vh)
    np.testing.assert_allclose(op.grad(op.sum(op.mul(rebuilt, g)), U.inputs[0]).value, g,
                               atol=1e-10)


def test_singular_vectors_at_repeated_singular_values_raise() -> None:
    op = sg.Ops()
    A = op.var(np.eye(3)[:, :2] * 2.0, name="A")
    U, S, Vh = op.svd(A, full_matrices=False)
    with pytest.raises(sg.LinAlgError, match="svd: .*singular vectors"):
        op.grad(U.sum(), A)
    np.testing.assert_allclose(op.grad(S.sum(), A).value, np.eye(3)[:, :2], atol=1e-14)
    B = op.var(np.diag([2.0, 0.0]), name="B")            # distinct, but one is zero
    with pytest.raises(sg.LinAlgError, match="svd: .*nonzero singular values, but B"):
        op.grad(op.svd(B).Vh.sum(), B)
    with pytest.raises(sg.LinAlgError, match="nonzero"):
        sg.jvp(lambda b: b.ops.svd(b).U, (np.diag([2.0, 0.0]),), (np.ones((2, 2)),))


# ---------------------------------------------------------------- qr, pinv, lstsq


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4)])
def test_qr_is_numpys_up_to_signs_with_a_nonnegative_diagonal(rng, shape) -> None:
    x = rng.normal(size=shape)
    op = sg.Ops()
    Q, R = op.qr(op.var(x))
    np.testing.assert_allclose(Q.value @ R.value, x, atol=1e-12)
    assert np.all(np.diagonal(R.value) >= 0)
    np.testing.assert_allclose(np.abs(R.value), np.abs(np.linalg.qr(x).R), atol=1e-12)
    np.testing.assert_allclose(np.triu(R.value), R.value)


def test_pinv_of_an_invertible_matrix_has_the_inverse_gradient(rng) -> None:
    x = np.eye(3) * 3 + rng.uniform(-1, 1, (3, 3))
    op = sg.Ops()
    A = op.var(x)
    P = op.pinv(A)
    inv = np.linalg.inv(x)
    np.testing.assert_allclose(P.value, inv, atol=1e-12)
    # d tr(A^-1) = -tr(A^-1 dA A^-1): the gradient is -(A^-1 A^-1)^T
    np.testing.assert_allclose(op.grad(P[0, 0] + P[1, 1] + P[2, 2], A).value,
                               -(inv @ inv).T, atol=1e-12)


def test_lstsq_returns_numpys_tuple_and_its_solution_gradient(rng) -> None:
    a, b = rng.normal(size=(5, 2)), rng.normal(size=5)
    op = sg.Ops()
    A, B = op.var(a), op.var(b)
    x, residuals, rank, s = op.lstsq(A, B)
    want = np.linalg.lstsq(a, b)
    np.testing.assert_allclose(x.value, want[0], rtol=1e-12)
    np.testing.assert_allclose(residuals.value, want[1], rtol=1e-12)
    assert rank == want[2] == 2
    np.testing.assert_allclose(s.value, want[3], rtol=1e-12)
    # x = (a^T a)^-1 a^T b: d x_0 / d b is row 0 of (a^T a)^-1 a^T
    np.testing.assert_allclose(op.grad(x[0], B).value, np.linalg.solve(a.T @ a, a.T)[0],
                               atol=1e-12)
    sg.check_grads(lambda p, q: p.ops.lstsq(p, q)[1], [a, b], order=2)


# ---------------------------------------------------------------- matrix_power


def test_matrix_power_gradient_of_the_trace_of_a_cube(rng) -> None:
    x = rng.uniform(-1, 1, (3, 3))
    op = sg.Ops()
    A = op.var(x)
    P = op.matrix_power(A, 3)
    np.testing.assert_allclose(P.value, x @ x @ x, rtol=1e-12)
    np.testing.assert_allclose(op.grad(P[0, 0] + P[1, 1] + P[2, 2], A).value,
                               3 * (x @ x).T, rtol=1e-12)
    np.testing.assert_allclose(op.matrix_power(A, -1).value, np.linalg.inv(x), rtol=1e-10)
    assert np.all(op.grad(op.matrix_power(A, 0).sum(), A).value == 0)


@pytest.mark.parametrize("n", [1, 2, 6, 7, -3])
def test_matrix_power_chain_matches_numpy_and_differentiates(rng, n) -> None:
    x = np.eye(2) + rng.uniform(-0.3, 0.3, (2, 2))
    op = sg.Ops()
    np.testing.assert_allclose(op.matrix_power(op.var(x), n).value,
                               np.linalg.matrix_power(x, n), rtol=1e-12)
    sg.check_grads(lambda a: a.ops.matrix_power(a, n), [x], order=2)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("call, kind, text", [
    (lambda op, x: op.eigh(x), sg.ShapeError, "eigh: needs square matrices"),
    (lambda op, x: op.svd(x), sg.ArgumentError, "full_matrices=False"),
    (lambda op, x: op.qr(x, mode="raw"), sg.ArgumentError, "mode='raw'"),
    (lambda op, x: op.matrix_power(x, 2), sg.ShapeError, "matrix_power: needs square"),
    (lambda op, x: op.matrix_power(op.var(np.eye(2)), 1.5), sg.ArgumentError, "n must be"),
    (lambda op, x: op.lstsq(x, np.ones(2)), sg.ShapeError, "lstsq: needs a of shape"),
    (lambda op, x: op.eigh(x, name="w"), sg.ShapeError, "square"),
    (lambda op, x: op.svd(x, full_matrices=False, name="u"), sg.ArgumentError,
     "one name per output"),
], ids=["eigh", "svd-full", "qr-mode", "power-shape", "power-n", "lstsq", "eigh-name",
        "svd-name"])
def test_bad_arguments_raise_before_recording(call, kind, text) -> None:
    op = sg.Ops()
    x = op.var(np.ones((3, 2)), name="x")
    before = len(op.tape)
    with pytest.raises(kind, match=text):
        call(op, x)
    assert len(op.tape) == before


def test_named_outputs_print_in_the_trace() -> None:
    op = sg.Ops()
    A = op.var(np.array([[3.0, 1.0], [1.0, 2.0]]), name="A")
    op.svd(A, name=("U", "S", "Vh"))
    op.qr(A, name=("Q", "R"))
    op.matrix_power(A, 3)
    op.lstsq(A, np.ones(2))
    assert op.format_trace().splitlines()[1:6] == [
        "U = svd(A).U", "S = svd(A).S", "Vh = svd(A).Vh", "Q = qr(A).Q", "R = qr(A).R"]
    assert "v0 = matrix_power(A, 3)" in op.format_trace()
    assert "v1 = lstsq(A, [1.0000, 1.0000])[0]" in op.format_trace()
