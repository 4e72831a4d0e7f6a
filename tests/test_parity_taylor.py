"""sg.taylor of several (pytree) arguments and pytree outputs, against closed forms of
t -> f(x + t v) differentiated by hand (1e-10), and nested in grad and vmap.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import simplegrad as sg

CLOSE = {"atol": 1e-10, "rtol": 1e-10}


def test_two_arguments_match_the_closed_form():
    # f(a, b) = sin(a * b) along (a, b) + t (va, vb): g(t) = sin((a + t va)(b + t vb)),
    # with vb = 0 the k-th derivative is b^k sin^(k)(a b)
    a, b = 0.5, 2.0
    got = sg.taylor(lambda a, b: (a * b).sin(), (a, b), (1.0, 0.0), 4)
    want = [b ** k * math.sin(a * b + k * math.pi / 2) for k in range(5)]
    np.testing.assert_allclose(got, want, **CLOSE)


def test_both_arguments_move():
    # f(x, y) = sum(x * y): g(t) = sum((x + t u)(y + t w)); g' = sum(u y + x w), g'' = 2 sum(u w)
    x, y = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    u, w = np.array([0.3, 0.1]), np.array([-2.0, 4.0])
    got = sg.taylor(lambda x, y: (x * y).sum(), [x, y], [u, w], 3)
    np.testing.assert_allclose(got[1], np.sum(u * y + x * w), **CLOSE)
    np.testing.assert_allclose(got[2], 2 * np.sum(u * w), **CLOSE)
    np.testing.assert_allclose(got[3], 0.0, **CLOSE)


def test_one_tuple_valued_argument_and_pytree_arguments():
    got = sg.taylor(lambda t: t[0] * t[1], ((1.0, 2.0),), ((1.0, 1.0),), 2)
    np.testing.assert_allclose(got, [2.0, 3.0, 2.0], **CLOSE)
    p = {"w": np.array([1.0, -1.0]), "b": 0.5}
    v = {"w": np.array([1.0, 0.0]), "b": 1.0}
    # g(t) = exp((w0 + t) + (b + t)) summed with exp(w1 + b + t): derivatives 2^k e^(w0+b)
    #        + e^(w1+b)
    got = sg.taylor(lambda q: (q["w"] + q["b"]).exp().sum(), (p,), (v,), 3)
    want = [2.0 ** k * math.exp(1.5) + math.exp(-0.5) for k in range(4)]
    np.testing.assert_allclose(got, want, **CLOSE)


def test_pytree_output_each_coefficient_shaped_like_the_output():
    x = np.array([0.2, 0.9])
    got = sg.taylor(lambda x: {"s": x.sin(), "n": (x * x).sum()}, x, np.ones(2), 3)
    assert len(got) == 4 and all(set(c) == {"s", "n"} for c in got)
    for k, c in enumerate(got):
        np.testing.assert_allclose(c["s"], np.sin(x + k * np.pi / 2), **CLOSE)
    np.testing.assert_allclose([c["n"] for c in got], [np.sum(x * x), 2 * x.sum(), 4.0, 0.0],
                               **CLOSE)
    assert got[2]["s"].shape == (2,) and got[2]["n"].shape == ()


def test_several_arguments_nest_in_grad_and_vmap():
    # D2 of sin(a b) along (1, 0) is -b^2 sin(a b); d/da of it is -b^3 cos(a b)
    g = sg.grad(lambda a: sg.taylor(lambda a, b: (a * b).sin(), (a, 2.0), (1.0, 0.0), 2)[2])(0.5)
    np.testing.assert_allclose(g, -8 * math.cos(1.0), **CLOSE)
    a = np.array([0.5, 1.0, -0.3])
    d2 = sg.vmap(lambda a: sg.taylor(lambda a, b: (a * b).sin(), (a, 2.0), (1.0, 0.0), 2)[2])(a)
    np.testing.assert_allclose(d2, -4 * np.sin(2 * a), **CLOSE)


def test_several_arguments_errors():
    with pytest.raises(sg.ArgumentError, match="v must be a tuple or list of 2 directions"):
        sg.taylor(lambda a, b: a * b, (1.0, 2.0), np.ones(2), 2)
    with pytest.raises(sg.ShapeError, match=r"direction 1 has shape \(3,\)"):
        sg.taylor(lambda a, b: a * b, (np.ones(2), np.ones(2)), (np.ones(2), np.ones(3)), 2)
