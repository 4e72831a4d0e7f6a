"""sg.linearize (jax.linearize): f runs once; jvp_fn evaluates the recorded linear map, alone,
under vmap and under grad.

Oracles: closed forms (1e-12) and float64 central differences (eps 1e-6, atol = rtol = 1e-6);
f counts its calls, so "without re-running f" is checked directly.
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg

CLOSE = {"atol": 1e-12, "rtol": 1e-12}
FD = {"atol": 1e-6, "rtol": 1e-6}
X = np.array([0.3, -1.2, 0.7])
W = np.array([[0.5, -0.2], [1.5, 0.3], [-0.7, 0.9]])


class Counted:
    """f(x, p) = {"u": sin(x) * x, "v": tanh(p["w"].T @ x)}, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, x, p):
        self.calls += 1
        return {"u": x.sin() * x, "v": (p["w"].T @ x).tanh()}


def f_np(x, w):
    return np.concatenate([np.sin(x) * x, np.tanh(w.T @ x)])


def tangent_closed(x, w, tx, tw):
    """The tangent of f_np along (tx, tw), by hand."""
    du = (np.cos(x) * x + np.sin(x)) * tx
    dv = (1 - np.tanh(w.T @ x) ** 2) * (tw.T @ x + w.T @ tx)
    return du, dv


def test_linearize_runs_f_once_and_matches_the_closed_form(rng):
    f = Counted()
    out, jvp_fn = sg.linearize(f, X, {"w": W})
    np.testing.assert_allclose(out["u"], np.sin(X) * X, **CLOSE)
    for _ in range(3):
        tx, tw = rng.standard_normal(3), rng.standard_normal((3, 2))
        t = jvp_fn(tx, {"w": tw})
        du, dv = tangent_closed(X, W, tx, tw)
        np.testing.assert_allclose(t["u"], du, **CLOSE)
        np.testing.assert_allclose(t["v"], dv, **CLOSE)
    assert f.calls == 1


def test_linearize_against_finite_differences(rng):
    _, jvp_fn = sg.linearize(lambda x: (x.exp() * x[0]).cumsum(), X)
    v = rng.standard_normal(3)
    e = 1e-6
    want = ((np.exp(X + e * v) * (X + e * v)[0]).cumsum()
            - (np.exp(X - e * v) * (X - e * v)[0]).cumsum()) / (2 * e)
    np.testing.assert_allclose(jvp_fn(v), want, **FD)


def test_vmap_of_jvp_fn_is_the_jacobian_without_running_f_again():
    f = Counted()
    _, jvp_fn = sg.linearize(lambda x: f(x, {"w": W})["v"], X)
    jt = sg.vmap(jvp_fn)(np.eye(3))         # rows: J e_k = column k of J
    w_x = W.T @ X
    want = ((1 - np.tanh(w_x) ** 2)[:, None] * W.T).T
    np.testing.assert_allclose(jt, want, **CLOSE)
    assert f.calls == 1


def test_grad_through_jvp_fn_is_the_transposed_map():
    _, jvp_fn = sg.linearize(lambda x: x.sin() * x, X)
    u = np.array([1.0, -2.0, 0.5])
    # grad_t <u, J t> = J^T u; J is diagonal here
    g = sg.grad(lambda t: (jvp_fn(t) * u).sum())(np.zeros(3))
    np.testing.assert_allclose(g, (np.cos(X) * X + np.sin(X)) * u, **CLOSE)


def test_linearize_nested_in_grad_differentiates_in_the_primal():
    # d/dx <ones, J(x) ones> for f = x ** 3: sum(3 x ** 2) -> 6 x
    g = sg.grad(lambda x: sg.linearize(lambda z: z ** 3, x)[1](np.ones(3)).sum())(X)
    np.testing.assert_allclose(g, 6 * X, **CLOSE)


def test_linearize_inside_vmap_per_example():
    xs = np.stack([X, 2 * X])
    ts = sg.vmap(lambda x: sg.linearize(lambda z: z.sin(), x)[1](np.ones(3)))(xs)
    np.testing.assert_allclose(ts, np.cos(xs), **CLOSE)


def test_jvp_fn_keeps_the_primals_it_was_made_at():
    x = X.copy()
    _, jvp_fn = sg.linearize(lambda z: z * z, x)
    x[:] = 100.0                # the caller's array changes afterwards: J is still 2 X
    np.testing.assert_allclose(jvp_fn(np.ones(3)), 2 * X, **CLOSE)


def test_linearize_errors():
    _, jvp_fn = sg.linearize(lambda x, y: x * y, X, X)
    with pytest.raises(sg.ArgumentError, match="one tangent per primal \\(2\\), got 1"):
        jvp_fn(X)
    with pytest.raises(sg.ShapeError, match=r"tangent leaf 1 has shape \(2,\).*\(3,\)"):
        jvp_fn(X, np.ones(2))
    with pytest.raises(sg.ArgumentError, match="give at least one primal"):
        sg.linearize(lambda: 1.0)
