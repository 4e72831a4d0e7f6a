"""``sg.jacobian_sparsity`` and ``sg.hessian_sparsity``: patterns propagated over the recorded
program, against the nonzeros of dense ``sg.jacobian`` / ``sg.hessian`` at random points (the
pattern holds them all; for smooth functions it is their union) and against patterns written
out by hand."""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg

pytest.importorskip("scipy")


def rosenbrock(x):
    return (100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2).sum()


def arrowhead(x):
    return x[0] * (x ** 2).sum() + (x ** 3).sum()


def stencil(u):
    """A 2-D Laplacian residual with a nonlinearity (Bratu), on the interior of a 6x5 grid."""
    u = u.reshape(6, 5)
    lap = 4 * u[1:-1, 1:-1] - u[:-2, 1:-1] - u[2:, 1:-1] - u[1:-1, :-2] - u[1:-1, 2:]
    return (lap - 0.5 * np.exp(u[1:-1, 1:-1])).reshape(-1)


def banded(x, b=2):
    n = x.shape[0]
    out = x * 0.0
    for k in range(1, b + 1):
        out = out + np.concatenate([x[k:] * x[:-k], np.zeros(k)]) \
            + np.concatenate([np.zeros(k), np.sin(x[:-k]) * x[k:]])
    return out[: n]


def _nonzeros(jac, m, n):
    return np.asarray(jac).reshape(m, n) != 0


def _union_of_jacobians(f, shape, rng, draws=4, hessian=False):
    seen = None
    for _ in range(draws):
        x = rng.standard_normal(shape)
        d = (sg.hessian if hessian else sg.jacobian)(f)(x)
        nz = np.asarray(d).reshape(-1, x.size) != 0
        seen = nz if seen is None else seen | nz
    return seen


@pytest.mark.parametrize("f,n", [(banded, 9), (stencil, 30), (np.cumsum, 5),
                                 (lambda x: np.outer(x[:3], x[3:]).ravel(), 6),
                                 (lambda x: (x.reshape(2, 3).T @ x[:2]) * x[2:5], 6)],
                         ids=["banded", "stencil", "cumsum", "outer", "matmul"])
def test_jacobian_pattern_is_the_union_of_the_nonzeros(f, n, rng):
    pattern = sg.jacobian_sparsity(f)(rng.standard_normal(n))
    assert pattern.dtype == bool
    np.testing.assert_array_equal(pattern.toarray(), _union_of_jacobians(f, (n,), rng))


def test_stencil_pattern_is_the_five_point_star(rng):
    p = sg.jacobian_sparsity(stencil)(rng.standard_normal(30)).toarray()
    assert p.shape == (12, 30)
    for r, (i, j) in enumerate((i, j) for i in range(1, 5) for j in range(1, 4)):
        want = {(i, j), (i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)}
        assert {divmod(int(c), 5) for c in np.nonzero(p[r])[0]} == want


def test_hessian_patterns(rng):
    n = 7
    tri = sg.hessian_sparsity(rosenbrock)(rng.standard_normal(n)).toarray()
    np.testing.assert_array_equal(tri, np.abs(np.subtract.outer(range(n), range(n))) <= 1)
    arrow = sg.hessian_sparsity(arrowhead)(rng.standard_normal(n)).toarray()
    want = np.eye(n, dtype=bool)
    want[0, :] = want[:, 0] = True
    np.testing.assert_array_equal(arrow, want)
    for f in (rosenbrock, arrowhead, lambda x: np.sin(stencil(x)).sum()):
        m = 30 if f not in (rosenbrock, arrowhead) else n
        p = sg.hessian_sparsity(f)(rng.standard_normal(m)).toarray()
        np.testing.assert_array_equal(p, _union_of_jacobians(f, (m,), rng, hessian=True))


def test_a_where_pattern_holds_on_both_sides_of_the_mask(rng):
    def f(x):
        return np.where(x[:-1] > 0, x[:-1] * x[1:], np.sin(x[:-1]))

    x = rng.standard_normal(8)
    p = sg.jacobian_sparsity(f)(np.abs(x)).toarray()     # recorded where every mask is true
    assert np.array_equal(p, sg.jacobian_sparsity(f)(-np.abs(x)).toarray())
    for _ in range(10):
        y = rng.standard_normal(8)
        nz = _nonzeros(sg.jacobian(f)(y), 7, 8)
        assert not (nz & ~p).any()
    want = np.eye(7, 8, dtype=bool) | np.eye(7, 8, 1, dtype=bool)
    np.testing.assert_array_equal(p, want)


def test_masks_and_rounding_contribute_no_dependence(rng):
    def f(x):
        return (x > 0) * x[::-1] + np.floor(x) + (x.sum() > 0) * 1.0

    p = sg.jacobian_sparsity(f)(rng.standard_normal(5)).toarray()
    np.testing.assert_array_equal(p, np.eye(5, dtype=bool)[::-1])
    h = sg.hessian_sparsity(lambda x: np.maximum(x, 0.0).sum() + np.abs(x).sum())
    assert h(rng.standard_normal(5)).nnz == 0


def test_indexing_by_recorded_indices(rng):
    idx = np.array([3, 0, 3, 1])

    def f(x):
        return x[idx] * 2.0 + np.take_along_axis(x, np.array([1, 1, 0, 2]), axis=0)

    p = sg.jacobian_sparsity(f)(rng.standard_normal(4)).toarray()
    want = np.zeros((4, 4), bool)
    want[np.arange(4), idx] = True
    want[np.arange(4), [1, 1, 0, 2]] = True
    np.testing.assert_array_equal(p, want)


def test_other_arguments_are_constants_and_shapes_follow(rng):
    a = rng.standard_normal((3, 4))
    p = sg.jacobian_sparsity(lambda x, a: (a * x).sum(axis=1))(rng.standard_normal((3, 4)), a)
    assert p.shape == (3, 12)
    np.testing.assert_array_equal(p.toarray(), np.kron(np.eye(3), np.ones(4)).astype(bool))
    assert sg.jacobian_sparsity(lambda x: np.ones(3))(np.ones(2)).shape == (3, 2)
    np.testing.assert_array_equal(sg.jacobian_sparsity(lambda x: x)(np.ones(3)).toarray(),
                                  np.eye(3, dtype=bool))


def test_a_constant_matrix_with_zeros_keeps_its_pattern(rng):
    n = 9
    A = np.diag(np.full(n, 2.0)) - np.diag(np.ones(n - 1), 1) - np.diag(np.ones(n - 1), -1)
    c = (np.arange(n) % 3 != 0) * 1.5
    p = sg.jacobian_sparsity(lambda x: A @ np.sin(x) + c * x + x @ A)(rng.standard_normal(n))
    np.testing.assert_array_equal(p.toarray(), A != 0)
    np.testing.assert_array_equal(sg.jacobian_sparsity(lambda x: c * x)(np.ones(n)).toarray(),
                                  np.diag(c != 0))
    # a factor computed from x is no constant, even where its value is zero
    np.testing.assert_array_equal(sg.jacobian_sparsity(lambda x: x * x)(np.zeros(4)).toarray(),
                                  np.eye(4, dtype=bool))
    h = sg.hessian_sparsity(lambda x: np.sin(A @ x).sum())(rng.standard_normal(n)).toarray()
    np.testing.assert_array_equal(h, (A != 0).astype(int) @ (A != 0) != 0)
