"""register_pytree_node (JAX's signature) and ravel_pytree (jax.flatten_util's), in every
transform.

Oracles: closed forms (1e-12), float64 central differences (eps 1e-6, atol = rtol = 1e-6),
loops over examples, and JAX's documented semantics written out (flattening order: dict keys
sorted, a registered node's children in the order its flatten gives them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pytest

import simplegrad as sg

CLOSE = {"atol": 1e-12, "rtol": 1e-12}
FD = {"atol": 1e-6, "rtol": 1e-6}


@dataclass
class Params:
    """A user's parameters: a registered node whose aux data is a label."""

    w: Any
    b: Any
    label: str = "layer"


def _flatten(p: Params) -> tuple:
    return (p.w, p.b), p.label


def _unflatten(label: str, children: list) -> Params:
    return Params(*children, label=label)


sg.register_pytree_node(Params, _flatten, _unflatten)


class Pair(NamedTuple):
    a: Any
    b: Any


W = np.array([[0.3, -0.5], [1.1, 0.2]])
B = np.array([0.7, -0.4])
X = np.array([0.9, -1.3])


def loss(p: Params, x: np.ndarray) -> Any:
    return ((p.w @ x + p.b).tanh() ** 2).sum()


def loss_np(w: np.ndarray, b: np.ndarray, x: np.ndarray) -> float:
    return float(np.sum(np.tanh(w @ x + b) ** 2))


def fd(fn, a: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    out = np.zeros(a.shape + np.shape(fn(a)))
    for idx in np.ndindex(a.shape):
        e = np.zeros_like(a)
        e[idx] = eps
        out[idx] = (np.asarray(fn(a + e)) - np.asarray(fn(a - e))) / (2 * eps)
    return np.moveaxis(out, list(range(a.ndim)), list(range(-a.ndim, 0))) if np.shape(
        fn(a)) else out

# ---------------------------------------------------------------- register_pytree_node


def test_registered_class_flattens_and_rebuilds_with_its_aux_data():
    p = Params(W, B, "first")
    leaves, treedef = sg.tree_flatten({"p": p, "k": [1.0]})
    assert leaves[0] == 1.0 and leaves[1] is W and leaves[2] is B    # keys sorted: k, p
    back = sg.tree_unflatten(treedef, leaves)
    assert isinstance(back["p"], Params) and back["p"].label == "first"
    assert "Params(*, *)" in repr(treedef)
    doubled = sg.tree_map(lambda a: a * 2, p)
    assert doubled.label == "first"
    np.testing.assert_array_equal(doubled.w, 2 * W)


def test_registering_twice_or_a_builtin_raises():
    with pytest.raises(sg.ArgumentError, match="Params is already a pytree node"):
        sg.register_pytree_node(Params, _flatten, _unflatten)
    with pytest.raises(sg.ArgumentError, match="dict is already a pytree node"):
        sg.register_pytree_node(dict, _flatten, _unflatten)
    with pytest.raises(sg.ArgumentError, match="expected a class"):
        sg.register_pytree_node(3, _flatten, _unflatten)


def test_grad_of_a_registered_class_comes_back_as_that_class():
    g = sg.grad(loss)(Params(W, B), X)
    assert isinstance(g, Params) and g.label == "layer"
    np.testing.assert_allclose(g.w, fd(lambda w: loss_np(w, B, X), W), **FD)
    np.testing.assert_allclose(g.b, fd(lambda b: loss_np(W, b, X), B), **FD)


def test_jacobian_hessian_and_jvp_of_a_registered_class():
    p = Params(W, B)
    h = sg.hessian(loss)(p, X)
    np.testing.assert_allclose(h.b.b, fd(lambda b: fd(lambda c: loss_np(W, c, X), b, 1e-4), B,
                                         1e-4), atol=1e-5, rtol=1e-5)
    assert h.w.b.shape == (2, 2, 2)
    _, t = sg.jvp(loss, (p, X), (Params(np.ones((2, 2)), np.zeros(2)), np.zeros(2)))
    want = (loss_np(W + 1e-6, B, X) - loss_np(W - 1e-6, B, X)) / 2e-6
    np.testing.assert_allclose(t, want, **FD)
    j = sg.jacobian(lambda q: q.w @ X + q.b)(p)
    np.testing.assert_allclose(j.b, np.eye(2), **CLOSE)


def test_vmap_maps_over_a_registered_class_and_returns_it():
    ws = np.stack([W, 2 * W, -W])
    out = sg.vmap(lambda q: Params(q.w.sum(), q.b * 2, q.label), in_axes=(Params(0, None),))(
        Params(ws, B))
    assert isinstance(out, Params)
    np.testing.assert_allclose(out.w, ws.sum(axis=(1, 2)), **CLOSE)
    np.testing.assert_allclose(out.b, np.broadcast_to(2 * B, (3, 2)), **CLOSE)

# ---------------------------------------------------------------- ravel_pytree


def test_ravel_pytree_order_dtype_and_roundtrip():
    tree = {"z": np.arange(3, dtype=np.int32), "a": Pair(np.ones((2, 2), np.float32), 2.5),
            "p": Params(W, B)}
    flat, unravel = sg.ravel_pytree(tree)
    # JAX's order: keys sorted (a, p, z); namedtuple fields; the registered node's children
    want = np.concatenate([np.ones(4), [2.5], W.ravel(), B, np.arange(3)])
    assert flat.dtype == np.float64 and flat.shape == (14,)
    np.testing.assert_array_equal(flat, want)
    back = unravel(flat * 2)
    assert back["z"].dtype == np.int32 and back["a"].a.dtype == np.float32
    assert isinstance(back["a"], Pair) and isinstance(back["p"], Params)
    np.testing.assert_array_equal(back["z"], 2 * np.arange(3))
    np.testing.assert_array_equal(back["p"].w, 2 * W)
    np.testing.assert_array_equal(back["a"].b, 5.0)


def test_ravel_pytree_of_nothing_and_wrong_length():
    flat, unravel = sg.ravel_pytree({})
    assert flat.shape == (0,) and unravel(flat) == {}
    _, unravel = sg.ravel_pytree([W, B])
    with pytest.raises(sg.ShapeError, match=r"unravel expects a vector of shape \(6,\).*\(5,\)"):
        unravel(np.zeros(5))


def test_gradient_through_ravel_and_through_unravel():
    p = Params(W, B)
    flat, unravel = sg.ravel_pytree(p)
    # through unravel: the gradient in the flat vector is the raveled tree gradient
    g_flat = sg.grad(lambda v: loss(unravel(v), X))(flat)
    g_tree = sg.grad(loss)(p, X)
    np.testing.assert_allclose(g_flat, np.concatenate([g_tree.w.ravel(), g_tree.b]), **CLOSE)
    np.testing.assert_allclose(g_flat, fd(lambda v: loss_np(v[:4].reshape(2, 2), v[4:], X),
                                          flat), **FD)
    # through ravel: d/dp sum(ravel(p) ** 3) = 3 p ** 2 per leaf
    g = sg.grad(lambda q: (sg.ravel_pytree(q)[0] ** 3).sum())(p)
    np.testing.assert_allclose(g.w, 3 * W ** 2, **CLOSE)
    np.testing.assert_allclose(g.b, 3 * B ** 2, **CLOSE)


def test_hessian_in_the_flat_vector_equals_the_tree_blocks():
    p = Params(W, B)
    flat, unravel = sg.ravel_pytree(p)
    h = sg.hessian(lambda v: loss(unravel(v), X))(flat)
    blocks = sg.hessian(loss)(p, X)
    want = np.block([[blocks.w.w.reshape(4, 4), blocks.w.b.reshape(4, 2)],
                     [blocks.b.w.reshape(2, 4), blocks.b.b]])
    np.testing.assert_allclose(h, want, **CLOSE)
    np.testing.assert_allclose(h, h.T, **CLOSE)


def test_ravel_pytree_under_vmap_is_one_example_at_a_time():
    ws = np.stack([W, 2 * W, 3 * W])
    flats = sg.vmap(lambda q: sg.ravel_pytree(q)[0], in_axes=(Params(0, None),))(Params(ws, B))
    want = np.stack([sg.ravel_pytree(Params(w, B))[0] for w in ws])
    np.testing.assert_allclose(flats, want, **CLOSE)
    _, unravel = sg.ravel_pytree(Params(W, B))
    ws_back = sg.vmap(lambda v: unravel(v).w)(want)
    np.testing.assert_allclose(ws_back, ws, **CLOSE)


def test_ravel_pytree_of_variables_records_and_of_parameters_joins_them():
    op = sg.Ops()
    w = op.var(W)
    flat, unravel = sg.ravel_pytree({"w": w, "c": 2.0})
    assert isinstance(flat, sg.Variable) and flat.shape == (5,)
    (g,) = op.grad((unravel(flat * flat)["w"]).sum(), [w])
    np.testing.assert_allclose(g.value, 2 * W, **CLOSE)
    param = sg.Parameter(B)
    flat_p, _ = sg.ravel_pytree([param, np.ones(2)])
    np.testing.assert_allclose(flat_p.value, [0.7, -0.4, 1.0, 1.0], **CLOSE)


def test_vjp_linearize_taylor_and_check_grads_take_a_registered_class():
    p = Params(W, B)
    out, pullback = sg.vjp(lambda q: Params(q.w * 2, q.b.sin()), p)
    assert isinstance(out, Params)
    (ct,) = pullback(Params(np.ones((2, 2)), np.ones(2)))
    np.testing.assert_allclose(ct.w, 2 * np.ones((2, 2)), **CLOSE)
    np.testing.assert_allclose(ct.b, np.cos(B), **CLOSE)
    _, jvp_fn = sg.linearize(lambda q: loss(q, X), p)
    tangent = Params(np.ones((2, 2)), np.zeros(2))
    want = (loss_np(W + 1e-6, B, X) - loss_np(W - 1e-6, B, X)) / 2e-6
    np.testing.assert_allclose(jvp_fn(tangent), want, **FD)
    d = sg.taylor(lambda q: loss(q, X), (p,), (tangent,), 1)[1]
    np.testing.assert_allclose(d, want, **FD)
    sg.check_grads(lambda q: loss(q, X), [p], order=2)
