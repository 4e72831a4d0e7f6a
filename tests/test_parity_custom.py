"""sg.custom_jvp and custom_vjp with pytrees, None cotangents and nondiff_argnums, with JAX's
semantics written out: closed forms (1e-12), loops over examples, and float64 central
differences (eps 1e-6, atol = rtol = 1e-6) where a rule is the true derivative.

A rule that differs from f's own derivative (a straight-through rule, a scaled one) shows the
transforms use the rule and not f's recorded operations.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import simplegrad as sg

CLOSE = {"atol": 1e-12, "rtol": 1e-12}
FD = {"atol": 1e-6, "rtol": 1e-6}
X = np.array([0.3, -1.2, 0.7])
Y = np.array([2.0, 0.5, -1.0])

# ---------------------------------------------------------------- custom_jvp


@sg.custom_jvp
def sin_mul(x, y):
    return x.sin() * y


@sin_mul.defjvp
def _sin_mul_jvp(primals, tangents):
    x, y = primals
    tx, ty = tangents
    return sin_mul(x, y), x.cos() * y * tx + x.sin() * ty


@sg.custom_jvp
def straight_through(x):
    return (x * 4).round() / 4          # zero derivative almost everywhere


@straight_through.defjvp
def _straight_jvp(primals, tangents):
    return straight_through(primals[0]), tangents[0] * 2.0


def test_custom_jvp_forward_mode_uses_the_rule():
    out, t = sg.jvp(sin_mul, (X, Y), (np.ones(3), np.zeros(3)))
    np.testing.assert_allclose(out, np.sin(X) * Y, **CLOSE)
    np.testing.assert_allclose(t, np.cos(X) * Y, **CLOSE)
    _, t = sg.jvp(straight_through, (X,), (Y,))
    np.testing.assert_allclose(t, 2 * Y, **CLOSE)
    np.testing.assert_allclose(sg.jacfwd(straight_through)(X), 2 * np.eye(3), **CLOSE)


def test_custom_jvp_reverse_mode_is_the_transposed_rule():
    gx, gy = sg.grad(lambda x, y: (sin_mul(x, y) * Y).sum(), argnums=(0, 1))(X, Y)
    np.testing.assert_allclose(gx, np.cos(X) * Y * Y, **CLOSE)
    np.testing.assert_allclose(gy, np.sin(X) * Y, **CLOSE)
    np.testing.assert_allclose(sg.grad(lambda x: straight_through(x).sum())(X), 2 * np.ones(3),
                               **CLOSE)
    np.testing.assert_allclose(sg.jacrev(straight_through)(X), 2 * np.eye(3), **CLOSE)


def test_custom_jvp_at_every_order():
    # d2/dx2 sum(sin(x) y) = -sin(x) y on the diagonal, by reverse-over-reverse and by
    # forward-over-reverse; the third derivative along ones by Taylor-free nesting
    f = lambda x: sin_mul(x, Y).sum()      # noqa: E731
    np.testing.assert_allclose(sg.hessian(f)(X), np.diag(-np.sin(X) * Y), **CLOSE)
    gg = sg.grad(lambda x: sg.grad(f)(x).sum())(X)
    np.testing.assert_allclose(gg, -np.sin(X) * Y, **CLOSE)
    d3 = sg.derivative(lambda x: sin_mul(x, 2.0), 3)(0.4)
    np.testing.assert_allclose(d3, -2 * np.cos(0.4), **CLOSE)
    sg.check_grads(lambda x, y: sin_mul(x, y), [X, Y], order=2)


def test_custom_jvp_under_vmap_matches_a_loop():
    xs = np.stack([X, 2 * X, -X])
    g = sg.vmap(sg.grad(lambda x: sin_mul(x, Y).sum()))(xs)
    np.testing.assert_allclose(g, [np.cos(x) * Y for x in xs], **CLOSE)
    _, t = sg.vmap(lambda x: sg.jvp(straight_through, (x,), (np.ones(3),)))(xs)
    np.testing.assert_allclose(t, 2 * np.ones((3, 3)), **CLOSE)


@sg.custom_jvp
def affine(p, x):
    return {"y": p["w"] @ x + p["b"], "n": (x * x).sum()}


@affine.defjvp
def _affine_jvp(primals, tangents):
    (p, x), (tp, tx) = primals, tangents
    return affine(p, x), {"y": tp["w"] @ x + p["w"] @ tx + tp["b"], "n": (2 * x * tx).sum()}


W = np.array([[1.0, -0.5, 0.2], [0.3, 0.8, -1.1]])
P = {"w": W, "b": np.array([0.1, -0.2])}


def test_custom_jvp_with_pytree_arguments_and_outputs():
    out = affine(P, X)
    np.testing.assert_allclose(out["y"], W @ X + P["b"], **CLOSE)
    tp = {"w": np.ones_like(W), "b": np.zeros(2)}
    _, t = sg.jvp(affine, (P, X), (tp, Y))
    np.testing.assert_allclose(t["y"], np.ones_like(W) @ X + W @ Y, **CLOSE)
    np.testing.assert_allclose(t["n"], 2 * X @ Y, **CLOSE)
    gp = sg.grad(lambda p: affine(p, X)["y"].sum() + affine(p, X)["n"])(P)
    np.testing.assert_allclose(gp["w"], np.broadcast_to(X, (2, 3)), **CLOSE)
    np.testing.assert_allclose(gp["b"], np.ones(2), **CLOSE)
    gx = sg.grad(lambda x: affine(P, x)["n"] + affine(P, x)["y"][0])(X)
    np.testing.assert_allclose(gx, 2 * X + W[0], **CLOSE)


def test_custom_jvp_nondiff_argnums_reach_the_rule_first():
    @partial(sg.custom_jvp, nondiff_argnums=(0,))
    def power(k, x):
        return x ** k

    @power.defjvp
    def _power_jvp(k, primals, tangents):
        (x,), (t,) = primals, tangents
        return power(k, x), k * x ** (k - 1) * t
    np.testing.assert_allclose(sg.grad(lambda x: power(3, x).sum())(X), 3 * X ** 2, **CLOSE)
    np.testing.assert_allclose(sg.jvp(lambda x: power(2, x), (X,), (Y,))[1], 2 * X * Y, **CLOSE)


def test_custom_jvp_without_a_rule_raises_naming_it():
    @sg.custom_jvp
    def bare(x):
        return x * 2
    np.testing.assert_allclose(bare(X), 2 * X, **CLOSE)
    with pytest.raises(sg.NotDifferentiableError, match="bare: no tangent rule.*bare.defjvp"):
        sg.grad(lambda x: bare(x).sum())(X)
    with pytest.raises(sg.ArgumentError, match="nondiff_argnums must be a tuple"):
        sg.custom_jvp(lambda x: x, nondiff_argnums=(-1,))

# ---------------------------------------------------------------- custom_vjp with pytrees


@sg.custom_vjp
def dict_fn(p, x):
    return {"y": (p["w"] * x).sum(), "z": p["b"] * 2.0}


@dict_fn.defvjp
def _dict_fn_bwd(g, out, p, x):
    # no cotangent for x (None), and the whole of p's structure for p
    return {"w": g["y"] * x, "b": g["z"] * 2.0}, None


@pytest.mark.filterwarnings("ignore::simplegrad.DisconnectedWarning")
def test_custom_vjp_with_pytree_arguments_outputs_and_none():
    p = {"w": X, "b": np.array(0.5)}
    out = dict_fn(p, Y)
    np.testing.assert_allclose(out["y"], X @ Y, **CLOSE)
    g = sg.grad(lambda p: dict_fn(p, Y)["y"] + 3 * dict_fn(p, Y)["z"])(p)
    np.testing.assert_allclose(g["w"], Y, **CLOSE)
    np.testing.assert_allclose(g["b"], 6.0, **CLOSE)
    np.testing.assert_allclose(sg.grad(lambda x: dict_fn(p, x)["y"])(Y), np.zeros(3), **CLOSE)


def test_custom_vjp_none_inside_a_cotangent_tree_and_second_order():
    @sg.custom_vjp
    def pair_fn(t):
        return t[0] * t[1], t[0].sin()

    @pair_fn.defvjp
    def _pair_bwd(g, out, t):
        a, b = t
        return ((g[0] * b + g[1] * a.cos(), None),)
    prod = lambda a, b: pair_fn((a, b))      # noqa: E731
    # d/da sum(a b + sin a) = b + cos a; b gets no cotangent (None leaf)
    ga = sg.grad(lambda a: (prod(a, Y)[0] + prod(a, Y)[1]).sum())(X)
    np.testing.assert_allclose(ga, Y + np.cos(X), **CLOSE)
    gga = sg.grad(lambda a: sg.grad(lambda z: (prod(z, Y)[0] + prod(z, Y)[1]).sum())(a).sum())(X)
    np.testing.assert_allclose(gga, -np.sin(X), **CLOSE)


def test_custom_vjp_nondiff_argnums_as_jax():
    @partial(sg.custom_vjp, nondiff_argnums=(0,))
    def apply(fn, x):
        return fn(x)

    @apply.defvjp
    def _apply_bwd(fn, g, out, x):      # rule(*nondiff, g, out, *other_inputs)
        return (g * 2 * x,)
    np.testing.assert_allclose(apply(lambda z: z * z, X), X * X, **CLOSE)
    g = sg.grad(lambda x: apply(lambda z: z * z, x).sum())(X)
    np.testing.assert_allclose(g, 2 * X, **CLOSE)
    gs = sg.vmap(sg.grad(lambda x: apply(lambda z: z * z, x).sum()))(np.stack([X, Y]))
    np.testing.assert_allclose(gs, 2 * np.stack([X, Y]), **CLOSE)
    with pytest.raises(sg.ArgumentError, match="argument 0 is in nondiff_argnums but holds a "
                                               "Variable"):
        sg.grad(lambda x: apply(x, x).sum())(X)


def test_custom_vjp_pytree_against_finite_differences():
    @sg.custom_vjp
    def softplus_tree(t):
        return {"a": (1 + t["a"].exp()).log(), "b": (1 + t["b"].exp()).log().sum()}

    @softplus_tree.defvjp
    def _bwd(g, out, t):
        sa, sb = 1 / (1 + (-t["a"]).exp()), 1 / (1 + (-t["b"]).exp())
        return ({"a": g["a"] * sa, "b": g["b"] * sb},)

    def f_np(a, b):
        return np.sum(np.log1p(np.exp(a)) * Y) + np.log1p(np.exp(b)).sum() ** 2
    t = {"a": X, "b": Y}
    g = sg.grad(lambda t: (softplus_tree(t)["a"] * Y).sum() + softplus_tree(t)["b"] ** 2)(t)
    e = 1e-6
    fd_a = [(f_np(X + e * u, Y) - f_np(X - e * u, Y)) / (2 * e) for u in np.eye(3)]
    fd_b = [(f_np(X, Y + e * u) - f_np(X, Y - e * u)) / (2 * e) for u in np.eye(3)]
    np.testing.assert_allclose(g["a"], fd_a, **FD)
    np.testing.assert_allclose(g["b"], fd_b, **FD)


def test_custom_vjp_bad_cotangent_structure_raises():
    @sg.custom_vjp
    def two(t):
        return t["a"] + t["b"]

    two.defvjp(lambda g, out, t: ([g, g],))
    with pytest.raises(sg.ArgumentError, match=r"two: the backward rule's cotangent for "
                                               r"argument 0: \[\*, \*\] is not a prefix"):
        sg.grad(lambda t: two(t).sum())({"a": X, "b": Y})
    two.defvjp(lambda g, out, t: (g, g))
    with pytest.raises(sg.ArgumentError, match="1 cotangent"):
        sg.grad(lambda t: two(t).sum())({"a": X, "b": Y})


def test_custom_vjp_pytree_output_under_common_subexpressions():
    # Ops(simplify=True) merges the second, equal call into the first entry: its output
    # structure comes from that entry
    @sg.custom_vjp
    def two_ways(x):
        return {"a": x * 2, "b": x.sum()}
    two_ways.defvjp(lambda g, out, x: (g["a"] * 2 + g["b"],))
    op = sg.Ops(simplify=True)
    x = op.var(X)
    first, second = two_ways(x), two_ways(x)
    np.testing.assert_allclose(second["a"].value, 2 * X, **CLOSE)
    (g,) = op.grad(second["a"].sum() + first["b"], [x])
    np.testing.assert_allclose(g.value, 3 * np.ones(3), **CLOSE)


def test_custom_vjp_jax_pair_fwd_bwd_with_residuals():
    """JAX's ``f.defvjp(fwd, bwd)``: fwd(*args) -> (out, residuals), bwd(*nondiff, res, g) ->
    one cotangent per differentiated argument; at first and second order (closed forms of
    x sin y), under vmap (a loop) and with nondiff_argnums and pytree arguments."""
    @sg.custom_vjp
    def f(x, y):
        return x * np.sin(y)

    def f_fwd(x, y):
        return f(x, y), (x, np.sin(y), np.cos(y))

    def f_bwd(res, g):
        x, s, c = res
        return g * s, g * x * c

    assert f.defvjp(f_fwd, f_bwd) is f_bwd
    gx, gy = sg.grad(lambda x, y: f(x, y).sum(), argnums=(0, 1))(X, Y)
    np.testing.assert_allclose(gx, np.sin(Y), **CLOSE)
    np.testing.assert_allclose(gy, X * np.cos(Y), **CLOSE)
    h = sg.hessian(lambda y: f(X, y).sum())(Y)          # d2/dy2 x sin y = -x sin y
    np.testing.assert_allclose(h, np.diag(-X * np.sin(Y)), **CLOSE)
    gs = sg.vmap(sg.grad(lambda x: f(x, x).sum()))(np.stack([X, Y]))
    want = [np.sin(v) + v * np.cos(v) for v in (X, Y)]
    np.testing.assert_allclose(gs, want, **CLOSE)

    @partial(sg.custom_vjp, nondiff_argnums=(0,))
    def clipped(limit, t):
        return {"a": t["a"] * 1.0, "b": t["b"] * 1.0}

    def clipped_bwd(limit, res, g):          # JAX's order: nondiff first, then res, g
        assert res is None
        return ({"a": g["a"].clip(-limit, limit), "b": g["b"]},)

    clipped.defvjp(lambda limit, t: (clipped(limit, t), None), clipped_bwd)
    g = sg.grad(lambda t: (clipped(0.5, t)["a"] * 3.0).sum() + clipped(0.5, t)["b"].sum())(
        {"a": X, "b": Y})
    np.testing.assert_allclose(g["a"], np.full(3, 0.5), **CLOSE)
    np.testing.assert_allclose(g["b"], np.ones(3), **CLOSE)

    f.defvjp(lambda x, y: f(x, y), f_bwd)       # fwd must return (out, residuals)
    with pytest.raises(sg.ArgumentError, match="f: the fwd given to defvjp must return a pair"):
        sg.grad(lambda x: f(x, Y).sum())(X)
