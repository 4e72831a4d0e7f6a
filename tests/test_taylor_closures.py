"""Taylor mode over functions whose inner transforms close over the Taylor variable: grad,
jacobian (fwd and rev), jvp, vjp, hessian, hvp, linearize, vmap, checkpoint, jit and taylor
itself, inside ``sg.taylor``, and ``sg.taylor`` inside grad and vmap around them.

Every case is a polynomial h(eps), so its derivatives are known exactly (numpy's Polynomial,
differentiated). The JAX case is ``jet_test.py::test_scatter_add`` (JAX issue 5365): f(x) =
x[0]**5 + x[1]**5, F(t) = f(x + t eps x) with x = [1, 1], h(eps) = grad(jacfwd(F))(0) = 40 eps^2;
``jet(h, (0.,), ([1., 2., 3.],))`` returns the terms [0, 80, 480] (the derivatives of
h(eps(s)) with eps(s) = s + 2 s^2 / 2! + 3 s^3 / 3!), written in below. Nested Taylor calls
must keep their perturbations apart (Siskind and Pearlmutter's x * D(y -> x + y) = x).
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.polynomial import Polynomial

import simplegrad as sg

X = np.array([1.0, 1.0])
E = Polynomial([0.0, 1.0])      # the variable eps, for the closed forms
CLOSE = {"rtol": 1e-12, "atol": 1e-12}
ORDER = 4


def f(z):
    """JAX's test function: indexing (whose vjp is a scatter-add) and fifth powers."""
    return z[0] ** 5 + z[1] ** 5


def line(p: Polynomial, e0: float, order: int = ORDER) -> list[float]:
    """[p(e0), p'(e0), ..., p^(order)(e0)]: sg.taylor's answer along e0 + t."""
    return [float(p.deriv(k)(e0)) if k else float(p(e0)) for k in range(order + 1)]


def coefficients(h, e0: float, order: int = ORDER) -> list[float]:
    return [float(c) for c in sg.taylor(h, e0, 1.0, order)]


# ---------------------------------------------------------------- JAX's test_scatter_add


def h_closure(eps):
    mu = eps * X

    def F(t):
        return f(X + t * mu)
    return sg.grad(sg.jacobian(F, mode="fwd"))(0.0)


def h_argument(eps):
    def F(t, e):
        return f(X + t * e * X)
    return sg.grad(sg.jacobian(F, mode="fwd"))(0.0, eps)


JAX_TERMS = [0.0, 80.0, 480.0]      # jet(h, (0.,), ([1., 2., 3.],))[1], from JAX


@pytest.mark.parametrize("h", [h_closure, h_argument], ids=["closure", "argument"])
def test_jax_scatter_add_along_jax_series(h):
    """The series eps(s) = s + s^2 + s^3 / 2 (JAX's [1, 2, 3]) composed in: JAX's terms."""
    got = coefficients(lambda s: h(s + s ** 2 + s ** 3 / 2), 0.0, 3)
    np.testing.assert_allclose(got, [0.0, *JAX_TERMS], **CLOSE)


@pytest.mark.parametrize("h", [h_closure, h_argument], ids=["closure", "argument"])
@pytest.mark.parametrize("e0", [0.0, 0.5, -1.5])
def test_jax_scatter_add_along_a_line(h, e0):
    """Along eps0 + t: 40 eps^2 and its derivatives, the closure as the argument."""
    np.testing.assert_allclose(coefficients(h, e0), line(40 * E ** 2, e0), **CLOSE)


# ---------------------------------------------------------------- every transform, closed over

# F(t) = f(x + t eps x) = 2 (1 + t eps)^5: F''(0) = 40 eps^2, F'(1) = 10 eps (1 + eps)^4
SECOND = 40 * E ** 2
FIRST_AT_1 = 10 * E * (1 + E) ** 4


def _F(eps):
    return lambda t: f(X + t * eps * X)


def _vjp_grad(eps):
    _, pullback = sg.vjp(_F(eps), 1.0)
    return pullback(1.0)[0]


def _linearized(eps):
    _, f_jvp = sg.linearize(_F(eps), 1.0)
    return f_jvp(1.0)


def _transposed(eps):
    _, f_jvp = sg.linearize(_F(eps), 1.0)
    return sg.linear_transpose(f_jvp, 1.0)(1.0)[0]


TRANSFORMS = {
    "grad(jacobian fwd)": (lambda e: sg.grad(sg.jacobian(_F(e), mode="fwd"))(0.0), SECOND),
    "grad(jacobian rev)": (lambda e: sg.grad(sg.jacobian(_F(e), mode="rev"))(0.0), SECOND),
    "jacfwd(jacfwd)": (lambda e: sg.jacfwd(sg.jacfwd(_F(e)))(0.0), SECOND),
    "jacrev(grad)": (lambda e: sg.jacrev(sg.grad(_F(e)))(0.0), SECOND),
    "hessian": (lambda e: sg.hessian(_F(e))(0.0), SECOND),
    "hvp": (lambda e: sg.hvp(_F(e), 0.0, 1.0), SECOND),
    "jvp(grad)": (lambda e: sg.jvp(sg.grad(_F(e)), (0.0,), (1.0,))[1], SECOND),
    "derivative": (lambda e: sg.derivative(_F(e), 2)(0.0), SECOND),
    "taylor_derivative": (lambda e: sg.taylor_derivative(_F(e), 2)(0.0), SECOND),
    "grad": (lambda e: sg.grad(_F(e))(1.0), FIRST_AT_1),
    "value_and_grad": (lambda e: sg.value_and_grad(_F(e))(1.0)[1], FIRST_AT_1),
    "jvp": (lambda e: sg.jvp(_F(e), (1.0,), (1.0,))[1], FIRST_AT_1),
    "vjp": (_vjp_grad, FIRST_AT_1),
    "linearize": (_linearized, FIRST_AT_1),
    "linear_transpose": (_transposed, FIRST_AT_1),
    "grad(checkpoint)": (lambda e: sg.grad(sg.checkpoint(_F(e)))(1.0), FIRST_AT_1),
    "jit(grad)": (lambda e: sg.jit(sg.grad(_F(e)))(1.0), FIRST_AT_1),
    # z -> f(eps z) at z = x: the Hessian is diag(20 eps^5 z^3), its entries sum to 40 eps^5
    "hessian of a vector": (lambda e: sg.hessian(lambda z: f(e * z))(X).sum(), 40 * E ** 5),
}


@pytest.mark.parametrize("name", TRANSFORMS)
@pytest.mark.parametrize("e0", [0.0, 0.5, -1.5])
def test_transforms_inside_taylor_see_the_closed_over_variable(name, e0):
    h, p = TRANSFORMS[name]
    np.testing.assert_allclose(coefficients(h, e0), line(p, e0), **CLOSE)


R = np.array([[1.0, 1.0], [2.0, 0.5]])
POW5 = float((R ** 5).sum())        # sum over the rows of r0^5 + r1^5


def test_vmap_inside_taylor_closing_over_it():
    """sum_r f(eps r) = eps^5 sum_r (r0^5 + r1^5), per example."""
    h = lambda e: sg.vmap(lambda r: f(e * r))(R).sum()  # noqa: E731
    np.testing.assert_allclose(coefficients(h, 0.5), line(POW5 * E ** 5, 0.5), **CLOSE)


def test_vmap_of_grad_inside_taylor_closing_over_it():
    """d/dt f(r + t eps r) at t = 0 is 5 eps (r0^5 + r1^5), per example."""
    h = lambda e: sg.vmap(sg.grad(lambda t, r: f(r + t * e * r)))(np.zeros(2), R).sum()  # noqa: E731
    np.testing.assert_allclose(coefficients(h, -1.5), line(5 * POW5 * E, -1.5), **CLOSE)


def test_float32_inner_transform_of_a_float64_taylor_variable():
    """A float32 inner point (its seeds and casts folded as constants) closing over float64 eps:
    the reverse-mode Jacobian's casts back to float32 fold on Python numbers."""
    x32 = X.astype(np.float32)

    def h(eps):
        return sg.grad(sg.jacobian(lambda t: f(x32 + t * eps * x32), mode="rev"))(
            np.float32(0.0))
    np.testing.assert_allclose(coefficients(h, 0.5, 3), line(SECOND, 0.5, 3), rtol=1e-6)
    np.testing.assert_allclose(sg.grad(h)(0.5), 40.0, rtol=1e-6)


def test_cast_of_a_constant_folds_as_numpy_casts():
    """A cast of a 0-d constant (recorded as a Python number) is folded: numpy's astype."""
    op = sg.Ops()
    for a in (np.array(1.5), 1.5):
        got = op.cast(a, np.float32)
        assert not isinstance(got, sg.Variable)
        assert got.dtype == np.float32 and got.shape == () and got == np.float32(1.5)


# ---------------------------------------------------------------- taylor around taylor


NESTED = {
    # Siskind and Pearlmutter: x * D(y -> x + y)(1) = x; a confused perturbation gives 2 x
    "x * D(x + y)": (lambda e: e * sg.taylor(lambda y: e + y, 1.0, 1.0, 1)[1], E),
    "x * derivative(x + y)": (lambda e: e * sg.derivative(lambda y: e + y)(1.0), E),
    # D_y (x y) at y = x: x (the closure does not move with y, though y starts at x)
    "D(x y) at x": (lambda e: sg.taylor(lambda y: e * y, e, 1.0, 1)[1], E),
    # D2_y (x y)^3 at y = x is 6 x^3 y = 6 x^4; moving x with y would give 30 x^4
    "D2 (x y)^3 at x": (lambda e: sg.taylor(lambda y: (e * y) ** 3, e, 1.0, 2)[2], 6 * E ** 4),
    # D2 of y^3 at x^2 along x: 6 y x^2 = 6 x^4
    "point and direction from x": (lambda e: sg.taylor(lambda y: y ** 3, e * e, e, 2)[2],
                                   6 * E ** 4),
    # three levels: D_z (z y x) = y x; D_y (y * y x) at y = x is 2 x^2; times x: 2 x^3
    "three levels": (lambda e: e * sg.taylor(
        lambda y: y * sg.taylor(lambda z: z * y * e, 1.0, 1.0, 1)[1], e, 1.0, 1)[1], 2 * E ** 3),
    # a grad between: d/ds of D2_t (t x s)^4 at t = s = 1 is 48 x^4
    "taylor in grad": (lambda e: sg.grad(
        lambda s: sg.taylor(lambda t: (t * e * s) ** 4, 1.0, 1.0, 2)[2])(1.0), 48 * E ** 4),
    # D_y of grad_t (t y x)^3 at t = y = 1: d/dy 3 y^3 x^3 = 9 x^3
    "grad in taylor": (lambda e: sg.taylor(
        lambda y: sg.grad(lambda t: (t * y * e) ** 3)(1.0), 1.0, 1.0, 1)[1], 9 * E ** 3),
    # per example r: D2_t (t x r)^3 at t = 1 is 6 x^3 r^3; summed over r = 1, 2: 54 x^3
    "taylor in vmap": (lambda e: sg.vmap(
        lambda r: sg.taylor(lambda t: (t * e * r) ** 3, 1.0, 1.0, 2)[2])(np.array([1.0, 2.0]))
        .sum(), 54 * E ** 3),
}


@pytest.mark.parametrize("name", NESTED)
@pytest.mark.parametrize("e0", [0.0, 0.5, -1.5])
def test_nested_taylor_keeps_perturbations_apart(name, e0):
    h, p = NESTED[name]
    np.testing.assert_allclose(coefficients(h, e0), line(p, e0), **CLOSE)


# ---------------------------------------------------------------- taylor of these, nested


@pytest.mark.parametrize("name", ["grad(jacobian fwd)", "grad(jacobian rev)", "hessian",
                                  "vjp", "jvp"])
def test_taylor_of_closures_inside_grad_and_vmap(name):
    """d/de0 of Dk at e0 is D(k+1); under vmap, Dk per example."""
    h, p = TRANSFORMS[name]
    want = line(p, 0.5, 3)
    got = [float(sg.grad(lambda e0, k=k: sg.taylor(h, e0, 1.0, 2)[k])(0.5)) for k in range(3)]
    np.testing.assert_allclose(got, want[1:], **CLOSE)
    es = np.array([0.0, 0.5, -1.5])
    np.testing.assert_allclose(sg.vmap(lambda e0: sg.taylor(h, e0, 1.0, 2)[2])(es),
                               [float(p.deriv(2)(e)) for e in es], **CLOSE)


def test_variable_in_variables_out_through_the_closure():
    """On a Variable the coefficients are recorded: op.grad of D1 is D2."""
    op = sg.Ops()
    e = op.var(0.5, name="eps")
    out = sg.taylor(h_closure, e, 1.0, 2)
    assert all(isinstance(c, sg.Variable) for c in out)
    np.testing.assert_allclose([c.value for c in out], line(SECOND, 0.5, 2), **CLOSE)
    (g,) = op.grad(out[1], [e])
    np.testing.assert_allclose(g.value, 80.0, **CLOSE)
