"""Pytrees: flatten/unflatten/map, and every transform on nested dicts, lists and tuples."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import simplegrad as sg

TOL = dict(atol=1e-6, rtol=1e-6)
Pair = namedtuple("Pair", ["a", "b"])


def test_flatten_sorts_dict_keys_and_round_trips():
    tree = {"w": np.ones(2), "b": [1.0, (2.0, None)], "a": Pair(3.0, {"z": 4.0})}
    leaves, treedef = sg.tree_flatten(tree)
    assert [np.shape(x) for x in leaves] == [(), (), (), (), (2,)]
    assert leaves[:4] == [3.0, 4.0, 1.0, 2.0]          # a (a, b.z), b, then w
    back = sg.tree_unflatten(treedef, leaves)
    assert isinstance(back["a"], Pair) and back["b"][1][1] is None
    assert back["b"] == [1.0, (2.0, None)]
    assert treedef.num_leaves == 5 and sg.tree_structure(back) == treedef
    assert "None" in repr(treedef)


def test_tree_map_with_several_trees_and_mismatch():
    a = {"x": 1.0, "y": [2.0, 3.0]}
    b = {"x": 10.0, "y": [20.0, 30.0]}
    assert sg.tree_map(lambda u, v: u + v, a, b) == {"x": 11.0, "y": [22.0, 33.0]}
    with pytest.raises(sg.ArgumentError, match="structure"):
        sg.tree_map(lambda u, v: u + v, a, {"x": 1.0, "y": [2.0]})
    with pytest.raises(sg.ArgumentError, match="leaves"):
        sg.tree_unflatten(sg.tree_structure(a), [1.0])
    assert sg.tree_leaves(None) == []


def loss(params, x):
    """A small network: sum(tanh(x W + b)^2) + |c|^2."""
    h = (x @ params["W"] + params["b"]).tanh()
    return (h * h).sum() + (params["extra"][0] ** 2).sum()


def loss_np(params, x):
    h = np.tanh(x @ params["W"] + params["b"])
    return np.sum(h * h) + np.sum(params["extra"][0] ** 2)


@pytest.fixture
def params(rng):
    return {"W": rng.normal(size=(3, 2)), "b": rng.normal(size=(2,)),
            "extra": (rng.normal(size=(2,)),)}


@pytest.fixture
def x(rng):
    return rng.normal(size=(4, 3))


def grad_closed_form(params, x):
    z = x @ params["W"] + params["b"]
    h = np.tanh(z)
    dz = 2 * h * (1 - h * h)
    return {"W": x.T @ dz, "b": dz.sum(0), "extra": (2 * params["extra"][0],)}


def test_grad_of_a_dict(params, x):
    g = sg.grad(loss)(params, x)
    want = grad_closed_form(params, x)
    assert sorted(g) == ["W", "b", "extra"] and isinstance(g["extra"], tuple)
    for got, exp in zip(sg.tree_leaves(g), sg.tree_leaves(want)):
        np.testing.assert_allclose(got, exp, **TOL)


def test_value_and_grad_argnums_tuple(params, x):
    value, (gp, gx) = sg.value_and_grad(loss, argnums=(0, 1))(params, x)
    assert value == pytest.approx(loss_np(params, x))
    z = x @ params["W"] + params["b"]
    h = np.tanh(z)
    np.testing.assert_allclose(gx, (2 * h * (1 - h * h)) @ params["W"].T, **TOL)
    np.testing.assert_allclose(gp["b"], grad_closed_form(params, x)["b"], **TOL)


def test_grad_of_a_list_and_nested_grad(rng):
    xs = [rng.normal(size=3), rng.normal(size=2)]
    g = sg.grad(lambda ps: (ps[0] ** 3).sum() * (ps[1] ** 2).sum())(xs)
    a, b = xs
    np.testing.assert_allclose(g[0], 3 * a ** 2 * np.sum(b ** 2), **TOL)
    np.testing.assert_allclose(g[1], 2 * b * np.sum(a ** 3), **TOL)
    # grad of (sum of the gradient's leaves) through a pytree: nests
    gg = sg.grad(lambda ps: sum(v.sum() for v in sg.grad(
        lambda qs: (qs[0] ** 3).sum() + (qs[1] ** 3).sum())(ps)))(xs)
    np.testing.assert_allclose(gg[0], 6 * a, **TOL)
    np.testing.assert_allclose(gg[1], 6 * b, **TOL)


def test_vjp_and_jvp_with_pytree_outputs(params, x):
    f = lambda p: {"h": (x @ p["W"]).tanh(), "s": (p["b"] * p["extra"][0]).sum()}
    out, vjp_fn = sg.vjp(f, params)
    u = {"h": np.ones((4, 2)), "s": np.array(2.0)}
    (cot,) = vjp_fn(u)
    h = np.tanh(x @ params["W"])
    np.testing.assert_allclose(out["h"], h, **TOL)
    np.testing.assert_allclose(cot["W"], x.T @ (1 - h * h), **TOL)
    np.testing.assert_allclose(cot["b"], 2 * params["extra"][0], **TOL)
    np.testing.assert_allclose(cot["extra"][0], 2 * params["b"], **TOL)
    with pytest.raises(sg.ArgumentError, match="structure"):
        vjp_fn({"h": np.ones((4, 2))})
    # jvp along a tangent pytree, against central differences of f
    t = sg.tree_map(lambda a: np.ones_like(a) * 0.3, params)
    _, tangent = sg.jvp(f, (params,), (t,))
    eps = 1e-6
    hi = f_np = lambda p: {"h": np.tanh(x @ p["W"]), "s": np.sum(p["b"] * p["extra"][0])}
    plus = hi(sg.tree_map(lambda a, d: a + eps * d, params, t))
    minus = f_np(sg.tree_map(lambda a, d: a - eps * d, params, t))
    for k in ("h", "s"):
        np.testing.assert_allclose(tangent[k], (plus[k] - minus[k]) / (2 * eps), atol=1e-6)


def test_jacobian_of_pytrees_both_modes(rng):
    p = {"a": rng.normal(size=2), "b": rng.normal(size=(2, 2))}
    f = lambda p: [p["a"] * p["a"], (p["b"] @ p["a"]).sum()]
    for mode in ("rev", "fwd"):
        J = sg.jacobian(f, mode=mode)(p)
        a, B = p["a"], p["b"]
        np.testing.assert_allclose(J[0]["a"], np.diag(2 * a), **TOL)
        np.testing.assert_allclose(J[0]["b"], np.zeros((2, 2, 2)), **TOL)
        np.testing.assert_allclose(J[1]["a"], B.sum(0), **TOL)
        np.testing.assert_allclose(J[1]["b"], np.outer(np.ones(2), a), **TOL)


def test_hessian_of_a_dict_and_of_argnums_tuple(rng):
    p = {"a": rng.normal(size=2), "b": rng.normal(size=3)}
    f = lambda p: (p["a"] ** 2).sum() * (p["b"] ** 3).sum()
    H = sg.hessian(f)(p)
    a, b = p["a"], p["b"]
    np.testing.assert_allclose(H["a"]["a"], 2 * np.eye(2) * np.sum(b ** 3), **TOL)
    np.testing.assert_allclose(H["a"]["b"], np.outer(2 * a, 3 * b ** 2), **TOL)
    np.testing.assert_allclose(H["b"]["a"], np.outer(3 * b ** 2, 2 * a), **TOL)
    np.testing.assert_allclose(H["b"]["b"], np.diag(6 * b) * np.sum(a ** 2), **TOL)
    g = lambda a, b: (a ** 2).sum() * (b ** 3).sum()
    (Haa, Hab), (Hba, Hbb) = sg.hessian(g, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(Hab, H["a"]["b"], **TOL)
    np.testing.assert_allclose(Hbb, H["b"]["b"], **TOL)


def test_hvp_curried_with_a_dict_matches_the_hessian(params, x):
    flat = {"W": params["W"], "b": params["b"], "c": params["extra"][0]}
    f = lambda p: loss({"W": p["W"], "b": p["b"], "extra": (p["c"],)}, x)
    v = sg.tree_map(lambda a: np.full_like(a, 0.5), flat)
    Hv = sg.hvp(f)(flat, v)
    H = sg.hessian(f)(flat)
    for name in flat:
        want = sum(np.tensordot(H[name][other], v[other], axes=v[other].ndim) for other in flat)
        np.testing.assert_allclose(Hv[name], want, **TOL)
    np.testing.assert_allclose(H["c"]["c"], 2 * np.eye(2), **TOL)
    np.testing.assert_allclose(H["c"]["W"], np.zeros((2, 3, 2)), **TOL)
    # the old form keeps working, and agrees on a single array
    w = params["W"]
    g = lambda W: loss({**params, "W": W}, x)
    np.testing.assert_allclose(sg.hvp(g, w, np.ones_like(w)), sg.hvp(g)(w, np.ones_like(w)))
    with pytest.raises(sg.ArgumentError, match="hvp"):
        sg.hvp(g, w)
    with pytest.raises(sg.ArgumentError, match="structure"):
        sg.hvp(f)(flat, {"W": params["W"]})


def test_hvp_against_finite_differences_of_the_gradient(params, x):
    v = sg.tree_map(lambda a: np.linspace(-1, 1, a.size).reshape(a.shape), params)
    Hv = sg.hvp(lambda p: loss(p, x))(params, v)
    eps = 1e-5
    gp = sg.grad(loss)(sg.tree_map(lambda a, d: a + eps * d, params, v), x)
    gm = sg.grad(loss)(sg.tree_map(lambda a, d: a - eps * d, params, v), x)
    fd = sg.tree_map(lambda a, b: (a - b) / (2 * eps), gp, gm)
    for got, want in zip(sg.tree_leaves(Hv), sg.tree_leaves(fd)):
        np.testing.assert_allclose(got, want, atol=1e-6)


def test_nested_transforms_of_pytrees_record_on_the_callers_ops(params, x):
    op = sg.Ops()
    p = sg.tree_map(op.var, params)
    g = sg.grad(loss)(p, x)
    assert all(isinstance(v, sg.Variable) and v.ops is op for v in sg.tree_leaves(g))
    s = sum(v.sum() for v in sg.tree_leaves(g))
    gg = op.grad(s, [p["b"]])[0]
    hv = sg.hvp(lambda q: loss(q, x))(params, sg.tree_map(np.ones_like, params))
    np.testing.assert_allclose(gg.value, hv["b"], **TOL)


def test_check_grads_accepts_pytrees(params, x):
    sg.check_grads(loss, [params, x], order=2)
    sg.check_grads(lambda p: {"y": (p["W"] * 2).sin(), "z": [p["b"].exp()]}, [params], order=1)
    bad = sg.custom_vjp(lambda v: v.sin())
    bad.defvjp(lambda g, out, v: g * 2.0)
    with pytest.raises(sg.GradientCheckError):
        sg.check_grads(lambda p: bad(p["b"]).sum() + p["W"].sum(), [params], order=1,
                       modes=("rev",))


def test_pytree_transforms_nested_inside_check_grads(rng):
    """Hessian blocks, hvps, Jacobians and vjps of dicts, recorded and differentiated again."""
    p = {"a": rng.normal(size=2), "b": rng.normal(size=3)}
    f = lambda q: (q["a"] ** 2).sum() * (q["b"] ** 3).sum() + (q["a"].sin() * q["b"][:2]).sum()
    v = {"a": rng.normal(size=2), "b": rng.normal(size=3)}
    sg.check_grads(lambda q: sg.hessian(f)(q)["a"]["b"], [p], order=1)
    sg.check_grads(lambda q: sg.hvp(f)(q, v), [p], order=1)
    sg.check_grads(lambda q: sg.jacobian(lambda r: {"y": r["a"] * r["b"][:2]},
                                         mode="fwd")(q)["y"]["b"], [p], order=1)
    sg.check_grads(lambda q: sg.vjp(lambda r: [r["a"].exp(), r["b"].sum()], q)[1](
        [np.ones(2), np.array(2.0)])[0]["a"], [p], order=1)
