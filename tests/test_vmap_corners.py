"""Corners of transforms under vmap: batches of size 1 (a level whose axis has length 1 is
still a level, not a broadcast), and pullbacks made inside a vmap and vmapped again there
(torch.func's NTK-vector products).

Oracles: closed-form Hessians looped over the examples in numpy, and the NTK as an explicit
contraction of Jacobians written out by hand in numpy (float64, rtol 1e-10).
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg

RTOL = 1e-10
PICK = np.array([0, -1])


def close(got, want, rtol: float = RTOL) -> None:
    got = np.asarray(got)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-12)


# ---------------------------------------------------------------- batches of size 1

def cubes(x):
    """sum(x^3) + (x_0 x_-1)^2."""
    return (x ** 3).sum() + (x[0] * x[-1]) ** 2


def cubes_h(x: np.ndarray) -> np.ndarray:
    h = np.diag(6 * x)
    a, b = x[0], x[-1]
    if len(x) == 1:
        return h + 12 * a ** 2
    h[0, 0] += 2 * b ** 2
    h[-1, -1] += 2 * a ** 2
    h[0, -1] += 4 * a * b
    h[-1, 0] += 4 * a * b
    return h


def gathered(x):
    """sum(x[[0, -1]]^3), through a gather by an index array."""
    return (x[PICK] ** 3).sum()


def gathered_h(x: np.ndarray) -> np.ndarray:
    d = np.zeros_like(x)
    for i in PICK:
        d[i] += 6 * x[i]
    return np.diag(d)


FUNCTIONS = {"cubes": (cubes, cubes_h), "gathered": (gathered, gathered_h)}
SIZES = [(1, 3), (1, 1), (2, 1), (1, 2), (3, 2)]       # (rows of V, n)


def _data(rows: int, n: int):
    rng = np.random.default_rng(10 * rows + n)
    return rng.normal(size=n), rng.normal(size=(rows, n)), rng.normal(size=(rows, n))


PRODUCTS = {
    "hvp": lambda f, x, v: sg.hvp(f, x, v),
    "jvp_of_grad": lambda f, x, v: sg.jvp(sg.grad(f), (x,), (v,))[1],
    "vjp_of_grad": lambda f, x, v: sg.vjp(sg.grad(f), x)[1](v)[0],
}


@pytest.mark.parametrize("product", PRODUCTS)
@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("rows,n", SIZES)
def test_hessian_products_over_a_batch_of_tangents(product: str, name: str, rows: int,
                                                   n: int) -> None:
    """vmap over v of H(x) v at one x: each row of V its own product, one row or many."""
    f, h = FUNCTIONS[name]
    x, V, _ = _data(rows, n)
    prod = PRODUCTS[product]
    got = sg.vmap(lambda v: prod(f, x, v))(V)
    close(got, np.stack([h(x) @ v for v in V]))


@pytest.mark.parametrize("product", PRODUCTS)
@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("rows,n", SIZES)
def test_hessian_products_over_a_batch_of_points(product: str, name: str, rows: int,
                                                 n: int) -> None:
    """vmap over (x, v) of H(x) v: each example its own point and tangent."""
    f, h = FUNCTIONS[name]
    _, V, X = _data(rows, n)
    prod = PRODUCTS[product]
    got = sg.vmap(lambda x, v: prod(f, x, v))(X, V)
    close(got, np.stack([h(x) @ v for x, v in zip(X, V)]))


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("rows,n", SIZES)
def test_hessians_and_jacobians_over_a_batch(name: str, rows: int, n: int) -> None:
    """vmap(hessian), vmap(jacobian(grad, fwd)) and vmap(grad) at batch sizes 1 and more."""
    f, h = FUNCTIONS[name]
    _, _, X = _data(rows, n)
    want = np.stack([h(x) for x in X])
    close(sg.vmap(sg.hessian(f))(X), want)
    close(sg.vmap(sg.jacobian(sg.grad(f), mode="fwd"))(X), want)
    close(sg.vmap(sg.jacobian(sg.grad(f), mode="rev"))(X), want)


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("rows,n", SIZES)
def test_nested_vmaps_with_axes_of_size_1(name: str, rows: int, n: int) -> None:
    """Two vmaps around hvp, either of them (or both) over an axis of length 1."""
    f, h = FUNCTIONS[name]
    x, V, X = _data(rows, n)
    want = np.stack([h(x) @ v for v in V])
    inner = sg.vmap(lambda v: sg.hvp(f, x, v))
    close(sg.vmap(inner)(V[:, None, :]), want[:, None])
    close(sg.vmap(inner)(V[None]), want[None])
    both = sg.vmap(sg.vmap(lambda x, v: sg.hvp(f, x, v)))
    close(both(X[:, None], V[:, None]), np.stack([h(x) @ v for x, v in zip(X, V)])[:, None])
    # the inner vmap over the points, the outer over the tangents, one closed over
    got = sg.vmap(lambda v: sg.vmap(lambda x: sg.hvp(f, x, v))(X))(V)
    close(got, np.stack([np.stack([h(x) @ v for x in X]) for v in V]))


def test_a_closed_over_argument_at_a_level_of_size_1() -> None:
    """grad of a closure over one example of a batch of 1: the example's own gradient."""
    a = np.array([[0.5, -2.0, 1.5]])
    x0 = np.array([1.0, 2.0, 3.0])
    got = sg.vmap(lambda a: sg.grad(lambda x: (a * x ** 2).sum())(x0))(a)
    close(got, 2 * a * x0)
