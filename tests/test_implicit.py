"""sg.custom_root and sg.fixed_point: derivatives by the implicit function theorem against
independent answers (SymPy's implicit differentiation of Kepler's equation to order 4, the
closed form of ridge regression's argmin to order 3, 200 unrolled iterations of a DEQ-style
fixed point at orders 1-2), in forward and reverse mode and under vmap (closures batched
by vmap included, against Kepler's closed-form derivatives)."""

import math

import numpy as np
import pytest
import sympy

import simplegrad as sg
from simplegrad.errors import ArgumentError


def newton(f, x0):
    x = x0
    for _ in range(60):
        x = x - f(x) / sg.derivative(f)(x)
    return x


ECC = 0.3


def kepler(M):
    """The eccentric anomaly E with E - e sin E = M."""
    return sg.custom_root(lambda E: E - ECC * np.sin(E) - M, M, newton,
                          lambda g, y: y / g(1.0))


def nested(transform, f, n):
    for _ in range(n):
        f = transform(f)
    return f


def test_kepler_root():
    E = kepler(1.1)
    assert abs(E - ECC * np.sin(E) - 1.1) < 1e-14


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("transform", [sg.derivative, sg.grad], ids=["forward", "reverse"])
def test_kepler_against_sympy(n, transform):
    M0 = 1.1
    E0 = kepler(M0)
    Es, Ms = sympy.symbols("E M")
    want = float(sympy.idiff(Es - ECC * sympy.sin(Es) - Ms, Es, Ms, n).subs({Es: E0, Ms: M0}))
    np.testing.assert_allclose(nested(transform, kepler, n)(M0), want, rtol=1e-11, atol=1e-13)


RNG = np.random.default_rng(0)
X = RNG.normal(size=(12, 4))
Y = RNG.normal(size=12)


def ridge(lam):
    """argmin_w |X w - y|^2 / 2 + lam |w|^2 / 2, as the root of the objective's gradient."""
    def objective(w):
        return 0.5 * np.sum((X @ w - Y) ** 2) + 0.5 * lam * np.sum(w * w)

    def solve(g, w0):       # g is linear in w: one Newton step is exact
        return w0 - np.linalg.solve(sg.jacobian(g)(w0), g(w0))

    def tangent_solve(g, y):
        return np.linalg.solve(sg.jacobian(g)(np.zeros(4)), y)
    return sg.custom_root(sg.grad(objective), np.zeros(4), solve, tangent_solve)


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_ridge_against_closed_form(n):
    lam = 0.7
    A = X.T @ X + lam * np.eye(4)
    w = np.linalg.solve(A, X.T @ Y)
    # d^n w / d lam^n = (-1)^n n! A^{-n} w
    want = w
    for _ in range(n):
        want = np.linalg.solve(A, want)
    want = (-1) ** n * math.factorial(n) * want
    got = nested(sg.derivative, ridge, n)(lam) if n else ridge(lam)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    if n:       # reverse mode through a scalar of it
        rev = nested(sg.grad, lambda lam: np.sum(ridge(lam)), n)(lam)
        np.testing.assert_allclose(rev, np.sum(want), rtol=1e-10, atol=1e-12)


D = 5
W = RNG.normal(size=(D, D)) * 0.4 / np.sqrt(D)
XP = RNG.normal(size=D)


def deq(x, W=W):
    return sg.fixed_point(lambda z, W, x: np.tanh(W @ z + x), np.zeros(D), W, x)


def unrolled(x, W=W):
    z = np.zeros(D)
    for _ in range(200):
        z = np.tanh(W @ z + x)
    return z


def test_deq_value_and_derivatives():
    np.testing.assert_allclose(deq(XP), unrolled(XP), atol=1e-10)
    np.testing.assert_allclose(sg.jacobian(deq)(XP), sg.jacobian(unrolled)(XP), atol=1e-9)
    loss = lambda f: (lambda x: np.sum(f(x) ** 2))
    np.testing.assert_allclose(sg.grad(loss(deq))(XP), sg.grad(loss(unrolled))(XP), atol=1e-9)
    np.testing.assert_allclose(sg.hessian(loss(deq))(XP), sg.hessian(loss(unrolled))(XP),
                               atol=1e-9)
    # in the weights too
    in_w = lambda f: (lambda W: np.sum(f(XP, W) ** 2))
    np.testing.assert_allclose(sg.grad(in_w(deq))(W), sg.grad(in_w(unrolled))(W), atol=1e-9)


def test_the_iterations_stay_off_the_tape():
    op = sg.Ops()
    x = op.var(XP)
    z = deq(x)
    n = len(op.tape.entries)
    assert n < 10, n     # one entry for the root (and its inputs), not 200 iterations
    np.testing.assert_allclose(z.value, unrolled(XP), atol=1e-10)


def test_under_vmap():
    xs = RNG.normal(size=(3, D))
    got = sg.vmap(deq)(xs)
    np.testing.assert_allclose(got, [unrolled(x) for x in xs], atol=1e-10)
    jac = sg.vmap(sg.jacobian(deq))(xs)
    np.testing.assert_allclose(jac, [sg.jacobian(unrolled)(x) for x in xs], atol=1e-9)
    hs = sg.vmap(sg.hessian(lambda x: np.sum(deq(x) ** 2)))(xs)
    np.testing.assert_allclose(hs, [sg.hessian(lambda x: np.sum(unrolled(x) ** 2))(x)
                                    for x in xs], atol=1e-9)
    # a batched start: each example its own
    z0s = RNG.normal(size=(3, D)) * 0.1
    got = sg.vmap(lambda z0, x: sg.fixed_point(lambda z, W, x: np.tanh(W @ z + x), z0, W, x))(
        z0s, xs)
    np.testing.assert_allclose(got, [unrolled(x) for x in xs], atol=1e-10)


def kepler_from(M, E0):
    """Kepler's root started from a guess of its own."""
    return sg.custom_root(lambda E: E - ECC * np.sin(E) - M, E0, newton,
                          lambda g, y: y / g(1.0))


def kepler_closed(M, n):
    """d^n E / dM^n of Kepler's equation in closed form: E' = 1 / (1 - e cos E),
    E'' = -e sin E E'^3."""
    E = float(kepler(M))
    d1 = 1.0 / (1.0 - ECC * np.cos(E))
    return {0: E, 1: d1, 2: -ECC * np.sin(E) * d1 ** 3}[n]


MS = np.array([0.4, 1.1, 2.5])


@pytest.mark.parametrize("n", [0, 1, 2])
def test_custom_root_under_vmap_reads_batched_closures(n):
    """The parameter M is batched and read through f's closure (JAX's lax.custom_root works
    so): values, first and second derivatives per example, forward and reverse mode."""
    want = [kepler_closed(M, n) for M in MS]
    for transform in (sg.derivative, sg.grad):
        got = sg.vmap(nested(transform, kepler, n))(MS)
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-13)
    # a batched start too (each example its own), with a batched closure
    starts = MS + 0.3
    got = sg.vmap(nested(sg.grad, lambda M, E0: kepler_from(M, E0), n) if n else kepler_from)(
        MS, starts)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_ridge_under_vmap_over_the_penalty(n):
    """The argmin's f is sg.grad of an objective closing over the batched penalty, and the
    tangent solve takes sg.jacobian of the linear map inside the root's rule: the closed form
    per example, forward and reverse mode to order 3."""
    lams = np.array([0.3, 0.7, 1.5])
    want = []
    for lam in lams:
        A = X.T @ X + lam * np.eye(4)
        w = np.linalg.solve(A, X.T @ Y)
        for _ in range(n):
            w = np.linalg.solve(A, w)
        want.append((-1) ** n * math.factorial(n) * w)

    def batched_ridge(lam):
        def objective(w):
            return 0.5 * np.sum((X @ w - Y) ** 2) + 0.5 * lam * np.sum(w * w)

        def solve(g, w0):
            return w0 - np.linalg.solve(sg.jacobian(g)(w0), g(w0))

        def tangent_solve(g, y):
            return np.linalg.solve(sg.jacobian(g)(np.zeros(4)), y)
        return sg.custom_root(sg.grad(objective), np.zeros(4), solve, tangent_solve)
    got = sg.vmap(nested(sg.derivative, batched_ridge, n) if n else batched_ridge)(lams)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    if n:
        rev = sg.vmap(nested(sg.grad, lambda lam: np.sum(batched_ridge(lam)), n))(lams)
        np.testing.assert_allclose(rev, np.sum(want, axis=1), rtol=1e-10, atol=1e-12)


def test_custom_root_under_vmap_beside_an_unbatched_closure():
    """A batched parameter beside one every example shares (a Variable of the Ops around):
    the gradient in the shared one sums over the examples."""
    def total(ecc):
        def one(M):
            return sg.custom_root(lambda E: E - ecc * np.sin(E) - M, M, newton,
                                  lambda g, y: y / g(1.0))
        return np.sum(sg.vmap(one)(MS))
    # dE/de = sin E / (1 - e cos E)
    Es = np.array([kepler(M) for M in MS])
    want = np.sum(np.sin(Es) / (1 - ECC * np.cos(Es)))
    np.testing.assert_allclose(sg.grad(total)(ECC), want, rtol=1e-11)


def test_fixed_point_errors():
    with pytest.raises(ArgumentError, match="max_iter"):
        sg.fixed_point(lambda z: z, 0.0, max_iter=0)
    with pytest.raises(ArgumentError, match="shape"):
        sg.fixed_point(lambda z: np.zeros(3), 0.0)
    with pytest.raises(ArgumentError, match="solve"):
        sg.custom_root(lambda z: z, 0.0, None, None)


def test_taylor_mode_through_the_root():
    """sg.taylor pushes the series through the root's rule: Kepler to order 4 as nested
    derivatives give it."""
    got = sg.taylor(kepler, 1.1, 1.0, 4)
    for n in range(1, 5):
        np.testing.assert_allclose(got[n], sg.derivative(kepler, n)(1.1), rtol=1e-11)
