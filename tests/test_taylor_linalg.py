"""Taylor mode through the decompositions (eigh, svd, qr, pinv, lstsq) and through custom_jvp /
custom_vjp functions, whose series are pushed through their jvp rules by nested jvps: to order
6 against mpmath's high-precision derivatives of a closed form and against nested
sg.derivative; eigenvectors at a repeated eigenvalue raise as their jvp does."""

import math

import mpmath
import numpy as np
import pytest

import simplegrad as sg

RNG = np.random.default_rng(0)
A = RNG.normal(size=(3, 3))
A = A + A.T
B = RNG.normal(size=(3, 3))
B = B + B.T
R = RNG.normal(size=(4, 3))
S = RNG.normal(size=(4, 3))
T0 = 0.3
ORDER = 6


def nested(f, n):
    return sg.derivative(f, n)(T0) if n else f(T0)


def check_series(f, order=ORDER, rtol=1e-8, atol=1e-9):
    got = sg.taylor(f, T0, 1.0, order)
    for n in range(order + 1):
        np.testing.assert_allclose(got[n], nested(f, n), rtol=rtol, atol=atol,
                                   err_msg=f"order {n}")


def test_eigenvalues_against_mpmath():
    """The larger eigenvalue of [[a, b], [b, d]] (entries linear in t) in closed form."""
    a0, b0, d0, a1, b1, d1 = 1.0, 0.4, -0.5, 0.3, -0.7, 0.2
    M = lambda t: np.stack([np.stack([a0 + a1 * t, b0 + b1 * t]),
                            np.stack([b0 + b1 * t, d0 + d1 * t])])
    f = lambda t: np.linalg.eigvalsh(M(t))[1]
    mpmath.mp.dps = 40

    def lam(t):
        a, b, d = a0 + a1 * t, b0 + b1 * t, d0 + d1 * t
        return (a + d) / 2 + mpmath.sqrt(((a - d) / 2) ** 2 + b * b)
    got = sg.taylor(f, T0, 1.0, ORDER)
    for n in range(ORDER + 1):
        want = float(mpmath.diff(lam, mpmath.mpf(T0), n))
        np.testing.assert_allclose(got[n], want, rtol=1e-10, atol=1e-12, err_msg=f"order {n}")


@pytest.mark.parametrize("name, f", [
    ("eigvalsh", lambda t: np.linalg.eigvalsh(A + t * B)),
    ("eigh vectors", lambda t: np.abs(np.linalg.eigh(A + t * B)[1])),
    ("singular values", lambda t: np.linalg.svd(R + t * S, compute_uv=False)),
    ("svd vectors", lambda t: np.abs(np.linalg.svd(R + t * S, full_matrices=False)[0])),
    ("qr", lambda t: np.linalg.qr(R + t * S)[1]),
    ("pinv", lambda t: np.linalg.pinv(R + t * S)),
    ("lstsq", lambda t: np.linalg.lstsq(R + t * S, np.arange(4.0), rcond=None)[0]),
], ids=lambda v: v if isinstance(v, str) else "")
def test_decompositions_against_nested_derivatives(name, f):
    check_series(f)


def test_eigenvectors_at_a_repeated_eigenvalue_raise():
    f = lambda t: np.linalg.eigh(np.eye(3) + t * np.diag([1.0, 1.0, 2.0]))[1]
    with pytest.raises(sg.SimplegradError):
        sg.taylor(f, 0.0, 1.0, 2)
    # the eigenvalues alone keep their first derivative there (1 + t, 1 + t, 1 + 2 t); the
    # second, as nested jvps, needs the eigenvectors' derivative and raises the same way
    g = lambda t: np.linalg.eigvalsh(np.eye(3) + t * np.diag([1.0, 1.0, 2.0]))
    np.testing.assert_allclose(sg.taylor(g, 0.0, 1.0, 1)[1], [1.0, 1.0, 2.0], atol=1e-12)
    for how in (lambda: sg.taylor(g, 0.0, 1.0, 2), lambda: sg.derivative(g, 2)(0.0)):
        with pytest.raises(sg.LinAlgError, match="distinct"):
            how()


@sg.custom_jvp
def softplus(x):
    return np.log1p(np.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t / (1 + np.exp(-x))


@sg.custom_vjp
def cube(x):
    return x ** 3


@cube.defvjp
def _cube_vjp(g, out, x):
    return (3 * x * x * g,)


def test_custom_jvp_series():
    got = sg.taylor(lambda t: np.sin(softplus(t * 2.0)), T0, 1.0, ORDER)
    for n in range(ORDER + 1):
        want = sg.derivative(lambda t: np.sin(np.log1p(np.exp(t * 2.0))), n)(T0) if n else \
            np.sin(np.log1p(np.exp(T0 * 2.0)))
        np.testing.assert_allclose(got[n], want, rtol=1e-10, atol=1e-12, err_msg=f"order {n}")


def test_custom_vjp_series():
    got = sg.taylor(lambda t: cube(np.cos(t)), T0, 1.0, ORDER)
    mpmath.mp.dps = 40
    for n in range(ORDER + 1):
        want = float(mpmath.diff(lambda t: mpmath.cos(t) ** 3, mpmath.mpf(T0), n))
        np.testing.assert_allclose(got[n], want, rtol=1e-10, atol=1e-12, err_msg=f"order {n}")


def test_custom_series_recorded_and_differentiated_again():
    """grad in x of D2 of softplus along ones is softplus''' (x)."""
    x = np.array([0.3, -1.2])
    g = sg.grad(lambda x: np.sum(sg.taylor(softplus, x, np.ones(2), 2)[2]))(x)
    s = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(g, s * (1 - s) * (1 - 2 * s), rtol=1e-12)
    assert math.isfinite(float(np.sum(g)))
