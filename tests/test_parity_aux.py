"""has_aux, keyword arguments, jacfwd/jacrev, derivative's argnums and hessian of non-scalar
outputs, with JAX's return forms written out by hand.

Oracles: closed forms (compared at 1e-12) and float64 central differences (eps 1e-6, compared
at atol = rtol = 1e-6).
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg

CLOSE = {"atol": 1e-12, "rtol": 1e-12}
FD = {"atol": 1e-6, "rtol": 1e-6}
X = np.array([0.3, -1.2, 0.7])
Y = np.array([0.5, 2.0, -0.4])


def fd_grad(fn, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of a numpy function in x: out.shape + x.shape."""
    cols = []
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = eps
        e = e.reshape(x.shape)
        cols.append((np.asarray(fn(x + e)) - np.asarray(fn(x - e))) / (2 * eps))
    out = np.shape(fn(x))
    return np.stack(cols, axis=-1).reshape(out + x.shape)


def with_aux(x):
    """A scalar output and an aux pytree (a Variable, a number and a string)."""
    y = (x.sin() * x).sum()
    return y, {"sq": x * x, "n": 3, "tag": "loss"}


def closed_grad(x):
    return np.cos(x) * x + np.sin(x)

# ---------------------------------------------------------------- has_aux


def test_grad_has_aux_returns_gradient_and_aux():
    g, aux = sg.grad(with_aux, has_aux=True)(X)
    np.testing.assert_allclose(g, closed_grad(X), **CLOSE)
    assert type(aux["sq"]) is np.ndarray and aux["n"] == 3 and aux["tag"] == "loss"
    np.testing.assert_allclose(aux["sq"], X * X, **CLOSE)


def test_value_and_grad_has_aux_nests_value_with_aux():
    (value, aux), g = sg.value_and_grad(with_aux, has_aux=True)(X)
    np.testing.assert_allclose(value, np.sum(np.sin(X) * X), **CLOSE)
    np.testing.assert_allclose(g, closed_grad(X), **CLOSE)
    np.testing.assert_allclose(aux["sq"], X * X, **CLOSE)


def test_vjp_has_aux_returns_out_pullback_aux():
    out, pullback, aux = sg.vjp(lambda x: (x.sin(), x.sum()), X, has_aux=True)
    np.testing.assert_allclose(out, np.sin(X), **CLOSE)
    (ct,) = pullback(Y)
    np.testing.assert_allclose(ct, Y * np.cos(X), **CLOSE)
    np.testing.assert_allclose(aux, X.sum(), **CLOSE)


def test_jvp_has_aux_returns_out_tangent_aux():
    out, t, aux = sg.jvp(lambda x: (x.exp(), [x.max(), "k"]), (X,), (Y,), has_aux=True)
    np.testing.assert_allclose(out, np.exp(X), **CLOSE)
    np.testing.assert_allclose(t, np.exp(X) * Y, **CLOSE)
    assert aux[1] == "k"
    np.testing.assert_allclose(aux[0], X.max(), **CLOSE)


@pytest.mark.parametrize("jac", [sg.jacobian, sg.jacfwd, sg.jacrev], ids=["auto", "fwd", "rev"])
def test_jacobians_has_aux(jac):
    j, aux = jac(lambda x: (x.tanh() * x[0], x.sum() * 2), has_aux=True)(X)
    np.testing.assert_allclose(j, fd_grad(lambda x: np.tanh(x) * x[0], X), **FD)
    np.testing.assert_allclose(aux, 2 * X.sum(), **CLOSE)


def test_jacfwd_and_jacrev_with_argnums_agree_with_the_closed_form():
    f = lambda x, y: x.sin() * y.sum()      # noqa: E731
    for jac in (sg.jacfwd, sg.jacrev):
        jx, jy = jac(f, argnums=(0, 1))(X, Y)
        np.testing.assert_allclose(jx, np.diag(np.cos(X)) * Y.sum(), **CLOSE)
        np.testing.assert_allclose(jy, np.broadcast_to(np.sin(X)[:, None], (3, 3)), **CLOSE)


def test_hessian_has_aux():
    h, aux = sg.hessian(with_aux, has_aux=True)(X)
    want = np.diag(2 * np.cos(X) - X * np.sin(X))
    np.testing.assert_allclose(h, want, **CLOSE)
    assert aux["tag"] == "loss"


def test_has_aux_needs_a_pair():
    with pytest.raises(sg.ArgumentError, match="grad: with has_aux=True.*pair"):
        sg.grad(lambda x: x.sum(), has_aux=True)(X)
    with pytest.raises(sg.ArgumentError, match="has_aux must be True or False"):
        sg.grad(lambda x: x.sum(), has_aux="yes")


def test_aux_is_never_differentiated_but_an_outer_transform_can_differentiate_it():
    # inner grad's aux is x ** 3; the outer grad of sum(aux) is 3 x ** 2 (JAX: aux is traced
    # by the transforms around)
    def outer(x):
        g, aux = sg.grad(lambda z: ((z * z).sum(), z ** 3), has_aux=True)(x)
        return aux.sum() + g.sum()
    np.testing.assert_allclose(sg.grad(outer)(X), 3 * X ** 2 + 2, **CLOSE)


def test_has_aux_under_vmap_stacks_aux():
    g, aux = sg.vmap(sg.grad(lambda x: ((x ** 3).sum(), x.sum()), has_aux=True))(
        np.stack([X, Y]))
    np.testing.assert_allclose(g, 3 * np.stack([X, Y]) ** 2, **CLOSE)
    np.testing.assert_allclose(aux, [X.sum(), Y.sum()], **CLOSE)


def test_has_aux_under_no_grad_gives_values():
    op = sg.Ops()
    x = op.var(X)
    with op.no_grad():
        g, aux = sg.grad(with_aux, has_aux=True)(x)
    np.testing.assert_allclose(g.value, closed_grad(X), **CLOSE)
    np.testing.assert_allclose(aux["sq"].value, X * X, **CLOSE)

# ---------------------------------------------------------------- keyword arguments


def scaled(x, scale=1.0, shift=None):
    y = (x * scale).sin().sum()
    return y if shift is None else y + (x * shift).sum()


def test_keyword_arguments_pass_through_every_transform_undifferentiated():
    s = 3.0
    g = sg.grad(scaled)(X, scale=s)
    np.testing.assert_allclose(g, s * np.cos(s * X), **CLOSE)
    v, g2 = sg.value_and_grad(scaled)(X, scale=s, shift=Y)
    np.testing.assert_allclose(v, np.sin(s * X).sum() + (X * Y).sum(), **CLOSE)
    np.testing.assert_allclose(g2, s * np.cos(s * X) + Y, **CLOSE)
    np.testing.assert_allclose(sg.jacobian(lambda x, k=1: x ** k)(X, k=3), np.diag(3 * X ** 2),
                               **CLOSE)
    np.testing.assert_allclose(sg.hessian(scaled)(X, scale=s), np.diag(-s * s * np.sin(s * X)),
                               **CLOSE)
    np.testing.assert_allclose(sg.hvp(scaled)(X, Y, scale=s), -s * s * np.sin(s * X) * Y,
                               **CLOSE)
    np.testing.assert_allclose(sg.derivative(lambda x, p=2: x ** p, 2)(X, p=3), 6 * X, **CLOSE)
    np.testing.assert_allclose(sg.taylor_derivative(lambda x, p=2: x ** p, 2)(X, p=3), 6 * X,
                               **CLOSE)
    np.testing.assert_allclose(sg.jacfwd(lambda x, k=1: x * k)(X, k=2.0), 2 * np.eye(3),
                               **CLOSE)


def test_the_issue_example():
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(sg.grad(lambda x, scale=1.0: (x * scale).sum())(x, scale=3.0),
                               [3.0, 3.0])


def test_keyword_variable_of_an_outer_transform_is_a_closure():
    # d/ds of grad_x sum(sin(s x)) . 1 = d/ds sum(s cos(s x)) = sum(cos(s x) - s x sin(s x))
    def outer(s):
        return sg.grad(scaled)(X, scale=s).sum()
    s = 0.7
    want = np.sum(np.cos(s * X) - s * X * np.sin(s * X))
    np.testing.assert_allclose(sg.grad(outer)(s), want, **CLOSE)


def test_keyword_arguments_under_no_grad():
    op = sg.Ops()
    x = op.var(X)
    with op.no_grad():
        g = sg.grad(scaled)(x, scale=2.0)
    np.testing.assert_allclose(g.value, 2 * np.cos(2 * X), **CLOSE)

# ---------------------------------------------------------------- derivative's argnums


def test_derivative_in_another_argument_holds_the_rest_fixed():
    f = lambda a, b: np.sin(a) * b ** 3      # noqa: E731
    a, b = 0.4, 1.3
    np.testing.assert_allclose(sg.derivative(f, 2, argnums=1)(a, b), 6 * np.sin(a) * b, **CLOSE)
    np.testing.assert_allclose(sg.derivative(f, 3, argnums=0)(a, b), -np.cos(a) * b ** 3,
                               **CLOSE)
    np.testing.assert_allclose(sg.derivative(f, 1, argnums=-1)(a, b), 3 * np.sin(a) * b ** 2,
                               **CLOSE)
    with pytest.raises(sg.ArgumentError, match="derivative: argnums must be one int"):
        sg.derivative(f, 1, argnums=(0, 1))
    with pytest.raises(sg.ArgumentError, match="derivative: argnums=2 is out of range"):
        sg.derivative(f, 1, argnums=2)(a, b)

# ---------------------------------------------------------------- hessian of non-scalar outputs


def test_hessian_of_a_vector_output_has_jax_shape():
    # f(x) = x ** 3 * x[0]: out.shape + x.shape + x.shape, against FD of the Jacobian
    def f_np_jac(x):
        return fd_grad(lambda z: z ** 3 * z[0], x, 1e-5)
    h = sg.hessian(lambda x: x ** 3 * x[0])(X)
    assert h.shape == (3, 3, 3)
    np.testing.assert_allclose(h, fd_grad(f_np_jac, X, 1e-4), atol=1e-5, rtol=1e-5)
    # closed form: d2/dxj dxk (x_i^3 x_0)
    want = np.zeros((3, 3, 3))
    for i in range(3):
        want[i, i, i] += 6 * X[i] * X[0]
        want[i, i, 0] += 3 * X[i] ** 2
        want[i, 0, i] += 3 * X[i] ** 2
    want[0, 0, 0] = 12 * X[0] ** 2
    np.testing.assert_allclose(h, want, **CLOSE)


def test_hessian_of_a_pytree_output_and_two_arguments():
    def f(x, y):
        return {"a": x * y.sum(), "b": (x * x * y).sum()}
    h = sg.hessian(f, argnums=(0, 1))(X, Y)
    assert h["a"][0][0].shape == (3, 3, 3) and h["a"][0][1].shape == (3, 3, 3)
    np.testing.assert_allclose(h["a"][0][0], 0.0, **CLOSE)
    # d2 a_i / dx_j dy_k = delta_ij
    np.testing.assert_allclose(h["a"][0][1], np.broadcast_to(np.eye(3)[:, :, None], (3, 3, 3)),
                               **CLOSE)
    np.testing.assert_allclose(h["a"][1][0], np.broadcast_to(np.eye(3)[:, None, :], (3, 3, 3)),
                               **CLOSE)
    np.testing.assert_allclose(h["b"][0][0], np.diag(2 * Y), **CLOSE)
    np.testing.assert_allclose(h["b"][0][1], np.diag(2 * X), **CLOSE)
    np.testing.assert_allclose(h["b"][1][1], 0.0, **CLOSE)


def test_hessian_of_a_vector_output_under_vmap_and_grad():
    xs = np.stack([X, Y])
    f = lambda x: {"c": x ** 3 * x[0], "s": x.sin().sum()}     # noqa: E731
    h = sg.vmap(sg.hessian(f))(xs)
    for k, x in enumerate(xs):
        one = sg.hessian(f)(x)
        np.testing.assert_allclose(h["c"][k], one["c"], **CLOSE)
        np.testing.assert_allclose(h["s"][k], np.diag(-np.sin(x)), **CLOSE)
    # d/dx sum_ijk d2(x_i^3)/dx_j dx_k = d/dx sum(6 x) = 6
    np.testing.assert_allclose(sg.grad(lambda x: sg.hessian(lambda z: z ** 3)(x).sum())(X),
                               6 * np.ones(3), **CLOSE)


def test_vmap_of_jacobian_with_a_pytree_output():
    xs = np.stack([X, Y])
    j = sg.vmap(sg.jacobian(lambda x: {"s": x.sin(), "t": (x * x).sum()}))(xs)
    np.testing.assert_allclose(j["s"], np.stack([np.diag(np.cos(r)) for r in xs]), **CLOSE)
    np.testing.assert_allclose(j["t"], 2 * xs, **CLOSE)
