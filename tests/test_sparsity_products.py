"""``sg.sparse_jacobian`` and ``sg.sparse_hessian``: values equal dense ``sg.jacobian`` /
``sg.hessian`` to 1e-13 relative to the largest entry, on banded, block, arrowhead, random
sparse and PDE-stencil functions, in every mode; the plan (pattern, colours, compiled
products) made once per signature and replayed at new points."""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg

sparse = pytest.importorskip("scipy.sparse")

RNG = np.random.default_rng(7)
PAIRS = RNG.integers(0, 24, size=(30, 3))       # the random sparse function's entries
BLOCKS = RNG.standard_normal((6, 4, 4))


def banded(x):
    return np.concatenate([x[2:] * x[:-2] - np.sin(x[1:-1]) * x[:-2], np.cos(x[:2])]) + x ** 3


def block(x):
    b = x.reshape(6, 4)
    return (np.einsum("kij,kj->ki", BLOCKS, np.tanh(b)) * b).reshape(-1)


def arrowhead(x):
    return x[0] * (x ** 2).sum() + (np.sin(x) ** 2).sum()


def random_sparse(x):
    return x[PAIRS[:, 0]] * np.sin(x[PAIRS[:, 1]]) + x[PAIRS[:, 2]] ** 2


def bratu(u, lam=1.5):
    """The 2-D Bratu residual on a 6 x 4 grid, zero boundary: -Laplacian(u) - lam exp(u)."""
    k, h = u.reshape(6, 4), 1.0 / 7
    p = np.pad(k, 1)
    lap = (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * k) / h ** 2
    return (-lap - lam * np.exp(k)).reshape(-1)


def rosenbrock(x):
    return (100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2).sum()


JACOBIANS = [banded, block, random_sparse, bratu]
HESSIANS = [rosenbrock, arrowhead, lambda x: (block(x) ** 2).sum(),
            lambda x: (random_sparse(x) ** 2).sum(), lambda x: (bratu(x) ** 2).sum()]


def close(a, b) -> None:
    a = a.toarray() if hasattr(a, "toarray") else np.asarray(a)
    b = np.asarray(b).reshape(a.shape)
    scale = max(np.abs(b).max(), 1.0)
    assert np.abs(a - b).max() <= 1e-13 * scale, np.abs(a - b).max() / scale


@pytest.mark.parametrize("mode", ["fwd", "rev", "auto"])
@pytest.mark.parametrize("f", JACOBIANS, ids=lambda f: f.__name__)
def test_sparse_jacobian_equals_the_dense_one(f, mode, rng):
    jac = sg.sparse_jacobian(f, mode)
    for _ in range(2):      # the second call replays the plan at a new point
        x = rng.standard_normal(24) * 0.5
        J = jac(x)
        assert isinstance(J, sparse.csr_array) and J.shape == (np.size(f(x)), 24)
        close(J, sg.jacobian(f)(x))
    assert len(jac.plans) == 1


@pytest.mark.parametrize("method", ["star", "acyclic"])
@pytest.mark.parametrize("f", HESSIANS, ids=["rosenbrock", "arrowhead", "block",
                                             "random_sparse", "bratu"])
def test_sparse_hessian_equals_the_dense_one(f, method, rng):
    hess = sg.sparse_hessian(f, method)
    for _ in range(2):
        x = rng.standard_normal(24) * 0.5
        H = hess(x)
        assert isinstance(H, sparse.csr_array) and H.shape == (24, 24)
        close(H, sg.hessian(f)(x))
    assert len(hess.plans) == 1


def test_the_products_are_one_per_colour(rng):
    x = rng.standard_normal(40)
    hess = sg.sparse_hessian(rosenbrock)
    hess(x)
    (plan,) = hess.plans.values()
    assert plan.seeds.shape == (3, 40)                  # tridiagonal: three colours
    acyclic = sg.sparse_hessian(rosenbrock, "acyclic")
    acyclic(x)
    assert next(iter(acyclic.plans.values())).seeds.shape == (2, 40)
    diag = sg.sparse_hessian(lambda x: (np.exp(x) * x).sum())
    close(diag(x), sg.hessian(lambda x: (np.exp(x) * x).sum())(x))
    assert next(iter(diag.plans.values())).colors.max() == 0     # a diagonal: one colour


def test_a_constant_output_and_extra_arguments(rng):
    x = rng.standard_normal(5)
    J = sg.sparse_jacobian(lambda x: np.ones(3))(x)
    assert J.shape == (3, 5) and J.nnz == 0
    a = rng.standard_normal(5)
    jac = sg.sparse_jacobian(lambda x, a: a * np.sin(x))
    close(jac(x, a), np.diag(a * np.cos(x)))
    close(jac(x, 2 * a), np.diag(2 * a * np.cos(x)))
    assert len(jac.plans) == 2          # another constant, another signature


def test_refusals():
    with pytest.raises(sg.ArgumentError, match="mode must be"):
        sg.sparse_jacobian(np.sin, "both")
    with pytest.raises(sg.ArgumentError, match="method must be"):
        sg.sparse_hessian(rosenbrock, "column")
    with pytest.raises(sg.ShapeError, match="scalar"):
        sg.hessian_sparsity(np.sin)(np.ones(3))
    op = sg.Ops()
    with pytest.raises(sg.ArgumentError, match="Variable"):
        sg.sparse_hessian(rosenbrock)(op.var(np.ones(3)))


def test_a_python_branch_on_values_takes_its_own_pattern(rng):
    def f(x):
        if x[0] > 0:                    # a guard: the recorded program holds one branch
            return (x ** 3).sum()
        return x[0] * (x ** 2).sum()    # an arrowhead Hessian

    hess = sg.sparse_hessian(f)
    x = np.abs(rng.standard_normal(6))
    close(hess(x), sg.hessian(f)(x))
    assert hess(x).nnz == 6
    close(hess(-x), sg.hessian(f)(-x))      # the other branch: planned again
    assert hess(-x).nnz == 16
    close(hess(x), sg.hessian(f)(x))


def test_auto_takes_rows_for_a_dense_row_and_columns_for_a_dense_column(rng):
    def dense_row(x):
        return np.concatenate([x.sum(keepdims=True), x[2:] * x[:-2]])     # 11 outputs

    def dense_column(x):
        return x[0] * np.sin(x) + x ** 2

    x = rng.standard_normal(12)
    for f, forward in ((dense_row, False), (dense_column, True)):
        jac = sg.sparse_jacobian(f)
        close(jac(x), sg.jacobian(f)(x))
        (plan,) = jac.plans.values()
        assert plan.seeds.shape[0] <= 3                 # not 12: the other mode's count
        assert plan.seeds.shape[1:] == (np.shape(x) if forward else np.shape(f(x)))


def test_jit_of_a_sparse_hessian_replays_its_one_plan():
    # the function already compiles its products once per signature: sg.jit of it is itself,
    # and at a new point it replays the same plan (values against the dense Hessian)
    h = sg.jit(sg.sparse_hessian(arrowhead))
    assert h is not None and h.plans == {}
    for x in (RNG.standard_normal(24), RNG.standard_normal(24)):
        got = h(x)
        assert isinstance(got, sparse.csr_array)
        dense = sg.hessian(arrowhead)(x)
        np.testing.assert_allclose(got.toarray(), dense, rtol=0, atol=1e-13 * abs(dense).max())
    assert len(h.plans) == 1
    j = sg.jit(sg.sparse_jacobian(banded, mode="fwd"))
    x = RNG.standard_normal(24)
    np.testing.assert_allclose(j(x).toarray(), sg.jacobian(banded)(x), atol=1e-13)
