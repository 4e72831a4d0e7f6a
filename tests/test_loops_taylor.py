"""sg.taylor through loops and branches: a loop's Taylor rule is the loop of its body's (the
carry carrying its coefficients), a cond's the cond of its branches', checked against closed
forms at orders 1-4, on values and recorded (differentiated again)."""

import math

import numpy as np
import pytest

import simplegrad as sg


def squarings(k):
    return lambda x: sg.fori_loop(0, k, lambda i, c: c * c, x)


@pytest.mark.parametrize("k", [1, 3])
def test_taylor_of_a_fori_loop_of_squarings(k):
    x, n = 1.07, 2 ** k
    got = sg.taylor(squarings(k), x, 1.0, 4)
    exact = [math.perm(n, j) * x ** (n - j) for j in range(5)]
    assert np.allclose(got, exact, rtol=1e-13)


def test_taylor_of_a_scan_over_xs_with_a_closed_over_weight():
    xs = np.array([0.3, -0.2, 0.5, 0.1])
    c0 = 1.3

    def f(w):
        def step(c, x):
            return c * np.exp(w * x), c
        c, ys = sg.scan(step, c0, xs)
        return c + ys.sum()
    w = 0.7
    before = np.concatenate([[0.0], np.cumsum(xs)])      # the exponent's factor at each c
    exact = [c0 * before[-1] ** j * np.exp(w * before[-1]) +
             sum(c0 * p ** j * np.exp(w * p) for p in before[:-1]) for j in range(5)]
    assert np.allclose(sg.taylor(f, w, 1.0, 4), exact, rtol=1e-13)


def newton_sqrt(a):
    return sg.while_loop(lambda x: abs(x * x - a) > 1e-14 * a,
                         lambda x: 0.5 * (x + a / x), a + 1.0)


@pytest.mark.parametrize("a", [2.0, 30.0, 1e4])
def test_taylor_of_a_while_loop_newton_solve(a):
    exact = [a ** 0.5, 0.5 * a ** -0.5, -0.25 * a ** -1.5, 0.375 * a ** -2.5,
             -0.9375 * a ** -3.5]
    assert np.allclose(sg.taylor(newton_sqrt, a, 1.0, 4), exact, rtol=1e-9)


@pytest.mark.parametrize("x", [0.8, -0.8])
def test_taylor_of_a_cond_takes_the_branch_taken(x):
    f = lambda x: sg.cond(x > 0, lambda a: np.exp(2 * a), lambda a: np.sin(a), x)
    if x > 0:
        exact = [2.0 ** j * np.exp(2 * x) for j in range(5)]
    else:
        exact = [np.sin(x), np.cos(x), -np.sin(x), -np.cos(x), np.sin(x)]
    assert np.allclose(sg.taylor(f, x, 1.0, 4), exact, rtol=1e-13)


def test_recorded_taylor_of_a_loop_differentiates_again():
    x, n = 1.07, 8
    third = lambda x: sg.taylor(squarings(3), x, 1.0, 3)[3]
    assert np.allclose(third(x), math.perm(n, 3) * x ** (n - 3), rtol=1e-13)
    assert np.allclose(sg.grad(third)(x), math.perm(n, 4) * x ** (n - 4), rtol=1e-13)
    a = 30.0
    second = lambda a: sg.taylor(newton_sqrt, a, 1.0, 2)[2]
    assert np.allclose(sg.grad(second)(a), 0.375 * a ** -2.5, rtol=1e-9)


def test_taylor_of_a_loop_under_vmap():
    a = np.array([2.0, 30.0, 1e4])
    got = sg.vmap(lambda a: sg.taylor(newton_sqrt, a, 1.0, 3))(a)
    exact = [a ** 0.5, 0.5 * a ** -0.5, -0.25 * a ** -1.5, 0.375 * a ** -2.5]
    assert np.allclose(np.array(got), exact, rtol=1e-9)
