"""sg.laplacian: the collapsed Taylor pass against the trace of sg.hessian (3-layer tanh MLPs at
d = 2, 16, 100), against SymPy's closed form at d = 2, with weights, vector outputs, under vmap,
differentiated in the network's weights, and Hutchinson's estimate against its expectation."""

import numpy as np
import pytest
import sympy

import simplegrad as sg
from simplegrad.errors import ArgumentError, ShapeError


def mlp(d, width=8, seed=0, out=None):
    rng = np.random.default_rng(seed)
    W1 = rng.normal(size=(d, width)) / np.sqrt(d)
    W2 = rng.normal(size=(width, width)) / np.sqrt(width)
    w3 = rng.normal(size=(width,) if out is None else (width, out)) / np.sqrt(width)
    return W1, W2, w3


def net(params, x):
    W1, W2, w3 = params
    return np.tanh(np.tanh(np.tanh(x @ W1) @ W2)) @ w3


@pytest.mark.parametrize("d", [2, 16, 100])
def test_laplacian_equals_hessian_trace(d):
    params = mlp(d, seed=d)
    x = np.random.default_rng(1).normal(size=d)
    f = lambda x: net(params, x)
    lap = sg.laplacian(f)(x)
    np.testing.assert_allclose(lap, np.trace(sg.hessian(f)(x)), rtol=0, atol=1e-12)
    np.testing.assert_allclose(sg.laplacian(f, method="hessian")(x), lap, atol=1e-12)


@pytest.mark.slow
def test_laplacian_against_sympy():
    W1, W2, w3 = mlp(2, width=3, seed=5)
    xs = sympy.symbols("x0 x1")
    h = [sympy.tanh(sum(xs[i] * W1[i, j] for i in range(2))) for j in range(3)]
    h = [sympy.tanh(sum(h[i] * W2[i, j] for i in range(3))) for j in range(3)]
    expr = sum(sympy.tanh(h[j]) * w3[j] for j in range(3))
    lap = sympy.diff(expr, xs[0], 2) + sympy.diff(expr, xs[1], 2)
    x = np.array([0.3, -0.7])
    want = float(lap.subs({xs[0]: x[0], xs[1]: x[1]}))
    np.testing.assert_allclose(sg.laplacian(lambda x: net((W1, W2, w3), x))(x), want,
                               rtol=1e-12)


def test_weighted_and_vector_output():
    params = mlp(5, out=3, seed=2)
    rng = np.random.default_rng(3)
    x = rng.normal(size=5)
    A = rng.normal(size=(5, 2))
    W = A @ A.T         # PSD of rank 2
    f = lambda x: net(params, x)
    H = sg.hessian(f)(x)        # (3, 5, 5)
    np.testing.assert_allclose(sg.laplacian(f)(x), np.trace(H, axis1=1, axis2=2), atol=1e-12)
    np.testing.assert_allclose(sg.laplacian(f, weights=W)(x), np.sum(H * W, axis=(1, 2)),
                               atol=1e-12)
    np.testing.assert_allclose(sg.laplacian(f, method="hessian", weights=W)(x),
                               np.sum(H * W, axis=(1, 2)), atol=1e-12)


def test_under_vmap():
    params = mlp(4, seed=4)
    X = np.random.default_rng(5).normal(size=(7, 4))
    f = lambda x: net(params, x)
    got = sg.vmap(sg.laplacian(f))(X)
    want = [np.trace(sg.hessian(f)(x)) for x in X]
    np.testing.assert_allclose(got, want, atol=1e-12)
    np.testing.assert_allclose(sg.vmap(sg.laplacian(f, method="hessian"))(X), want, atol=1e-12)


def test_gradient_in_the_weights():
    params = mlp(3, seed=6)
    X = np.random.default_rng(7).normal(size=(4, 3))

    def loss(method):
        def of(W2):
            f = lambda x: net((params[0], W2, params[2]), x)
            return np.sum(sg.vmap(sg.laplacian(f, method=method))(X) ** 2)
        return of
    g = sg.grad(loss("taylor"))(params[1])
    np.testing.assert_allclose(g, sg.grad(loss("hessian"))(params[1]), atol=1e-12)
    # and once more: the Hessian of the loss in W2's entries through the recorded Laplacian
    hv = sg.hvp(loss("taylor"), params[1], np.ones_like(params[1]))
    np.testing.assert_allclose(hv, sg.hvp(loss("hessian"), params[1], np.ones_like(params[1])),
                               atol=1e-10)


def test_hutchinson_is_the_mean_of_its_quadratic_forms():
    params = mlp(6, seed=8)
    x = np.random.default_rng(9).normal(size=6)
    f = lambda x: net(params, x)
    H = sg.hessian(f)(x)
    z = np.random.default_rng(10).choice([-1.0, 1.0], size=(5, 6))
    est = sg.laplacian(f, method="hutchinson", samples=5, rng=np.random.default_rng(10))(x)
    np.testing.assert_allclose(est, np.mean(np.einsum("si,ij,sj->s", z, H, z)), atol=1e-12)
    # unbiased: the mean over many samples converges to the trace
    many = sg.laplacian(f, method="hutchinson", samples=20000, rng=np.random.default_rng(11))(x)
    off = np.sqrt(2 * np.sum(np.triu(H, 1) ** 2) * 2 / 20000)      # its standard error
    assert abs(many - np.trace(H)) < 5 * off


def test_errors():
    f = lambda x: np.sum(x ** 3)
    with pytest.raises(ArgumentError, match="method"):
        sg.laplacian(f, method="jet")
    with pytest.raises(ArgumentError, match="samples"):
        sg.laplacian(f, method="hutchinson")
    with pytest.raises(ShapeError, match="weights"):
        sg.laplacian(f, weights=np.eye(2))(np.ones(3))
    with pytest.raises(ArgumentError, match="semidefinite"):
        sg.laplacian(f, weights=-np.eye(3))(np.ones(3))


def test_polynomial_and_broadcasting():
    # f = sum(x^3) * x0 + 2 x1^2: Laplacian 6 x . x0 ... by hand
    f = lambda x: np.sum(x ** 3) * x[0] + 2.0 * x[1] ** 2
    x = np.array([1.5, -0.5, 2.0])
    # d2/dx0^2 = 12 x0^2 ... f = x0^4 + x0 (x1^3 + x2^3) + 2 x1^2
    want = 12 * x[0] ** 2 + 6 * x[0] * x[1] + 4 + 6 * x[0] * x[2]
    np.testing.assert_allclose(sg.laplacian(f)(x), want, rtol=1e-13)


def test_gradient_in_the_first_layer_under_vmap():
    # the directions meet the first layer's weights at every point alike (the shared path)
    params = mlp(5, seed=12)
    X = np.random.default_rng(13).normal(size=(6, 5))

    def loss(method):
        def of(W1):
            f = lambda x: net((W1, params[1], params[2]), x)
            return np.sum(sg.vmap(sg.laplacian(f, method=method))(X) ** 2)
        return of
    np.testing.assert_allclose(sg.grad(loss("taylor"))(params[0]),
                               sg.grad(loss("hessian"))(params[0]), atol=1e-12)
    f = lambda x: net(params, x)
    W = np.diag(np.arange(1.0, 6.0))
    want = [np.sum(sg.hessian(f)(x) * W) for x in X]
    np.testing.assert_allclose(sg.vmap(sg.laplacian(f, weights=W))(X), want, atol=1e-12)


@pytest.mark.parametrize("d", [12, 100])
def test_more_directions_than_width_under_vmap(d):
    # d directions meet a first layer of width 8 at every point alike: the walk carries 8
    # rows with the same sum of outer products instead, and stays exact
    params = mlp(d, seed=d + 1)
    X = np.random.default_rng(14).normal(size=(3, d))
    f = lambda x: net(params, x)
    H = [sg.hessian(f)(x) for x in X]
    np.testing.assert_allclose(sg.vmap(sg.laplacian(f))(X), [np.trace(h) for h in H],
                               rtol=0, atol=1e-12)
    A = np.random.default_rng(15).normal(size=(d, d))
    W = A @ A.T / d
    np.testing.assert_allclose(sg.vmap(sg.laplacian(f, weights=W))(X),
                               [np.sum(h * W) for h in H], rtol=0, atol=1e-12)
    z = np.random.default_rng(16).choice([-1.0, 1.0], size=(10, d))
    est = sg.vmap(sg.laplacian(f, method="hutchinson", samples=10,
                               rng=np.random.default_rng(16)))(X)
    np.testing.assert_allclose(est, [np.mean(np.einsum("si,ij,sj->s", z, h, z)) for h in H],
                               rtol=0, atol=1e-12)
    # x read elsewhere too: the directions are kept (the sum of cubes' Laplacian is 6 sum x)
    g = lambda x: net(params, x) + np.sum(x ** 3)
    np.testing.assert_allclose(sg.vmap(sg.laplacian(g))(X),
                               [np.trace(h) + 6 * np.sum(x) for h, x in zip(H, X)],
                               rtol=0, atol=1e-11)


def test_last_hidden_product_by_its_gram_matrix_under_vmap():
    # every point moves along the same directions and the second product's tangents are read
    # only through their sums of squares (tanh, tanh, then a linear layer): the walk forms those
    # sums from the outer products of the scales (P, width * width) and one constant table,
    # not the tangents themselves; exact, and differentiable in the last layer's weights
    params = mlp(10, width=6, seed=21)
    X = np.random.default_rng(22).normal(size=(5, 10))
    f = lambda x: net(params, x)
    with sg.Ops() as op:
        lap = sg.vmap(sg.laplacian(f))(op.var(X, requires_grad=False))
        assert any(e.shape == (5, 36) for e in op.tape.entries if hasattr(e, "shape"))
    np.testing.assert_allclose(lap.value, [np.trace(sg.hessian(f)(x)) for x in X],
                               rtol=0, atol=1e-12)

    def loss(method):
        def of(w3):
            g = lambda x: net((params[0], params[1], w3), x)
            return np.sum(sg.vmap(sg.laplacian(g, method=method))(X) ** 2)
        return of
    np.testing.assert_allclose(sg.grad(loss("taylor"))(params[2]),
                               sg.grad(loss("hessian"))(params[2]), atol=1e-12)
