"""vmap's pytree in_axes/out_axes, axis_size, out_axes=None and keyword arguments, against a
loop of the unmapped function (JAX's semantics: an int or None in the prefix tree covers its
whole subtree; keyword arguments are mapped over axis 0).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

import simplegrad as sg

CLOSE = {"atol": 1e-12, "rtol": 1e-12}
N = 4


class State(NamedTuple):
    pos: np.ndarray
    vel: np.ndarray


def f(tree, c):
    return {"y": (tree["a"] * tree["b"][0]).sin() + tree["b"][1], "s": (tree["a"] * c).sum()}


def f_np(tree, c):
    return {"y": np.sin(tree["a"] * tree["b"][0]) + tree["b"][1], "s": np.sum(tree["a"] * c)}


@pytest.fixture
def data(rng):
    tree = {"a": rng.standard_normal((N, 3)), "b": (rng.standard_normal((3, N)), 0.5)}
    return tree, rng.standard_normal(3)


def test_pytree_in_axes_match_a_loop(data):
    tree, c = data
    out = sg.vmap(f, in_axes=({"a": 0, "b": (1, None)}, None))(tree, c)
    for k in range(N):
        want = f_np({"a": tree["a"][k], "b": (tree["b"][0][:, k], 0.5)}, c)
        np.testing.assert_allclose(out["y"][k], want["y"], **CLOSE)
        np.testing.assert_allclose(out["s"][k], want["s"], **CLOSE)


def test_pytree_out_axes_place_each_leaf(data):
    tree, c = data
    out = sg.vmap(f, in_axes=({"a": 0, "b": (1, None)}, None), out_axes={"y": 1, "s": 0})(
        tree, c)
    assert out["y"].shape == (3, N) and out["s"].shape == (N,)
    for k in range(N):
        want = f_np({"a": tree["a"][k], "b": (tree["b"][0][:, k], 0.5)}, c)
        np.testing.assert_allclose(out["y"][:, k], want["y"], **CLOSE)


def test_namedtuple_and_list_prefixes(rng):
    s = State(rng.standard_normal((N, 2)), rng.standard_normal(2))
    ws = [rng.standard_normal((2, N)), rng.standard_normal(2)]
    out = sg.vmap(lambda st, w: State(st.pos + st.vel * w[0], w[1] * 2),
                  in_axes=(State(0, None), [1, None]), out_axes=State(0, None))(s, ws)
    assert isinstance(out, State) and out.vel.shape == (2,)
    np.testing.assert_allclose(out.pos, s.pos + s.vel * ws[0].T, **CLOSE)
    np.testing.assert_allclose(out.vel, 2 * ws[1], **CLOSE)


def test_out_axes_none_for_an_unbatched_output_and_error_for_a_batched_one(rng):
    xs = rng.standard_normal((N, 3))
    w = rng.standard_normal(3)
    ys, const = sg.vmap(lambda x: (x * w, w.sum()), out_axes=(0, None))(xs)
    np.testing.assert_allclose(const, w.sum(), **CLOSE)
    with pytest.raises(sg.ArgumentError, match="out_axes=None needs an output that is the same"):
        sg.vmap(lambda x: x * w, out_axes=None)(xs)


def test_axis_size_maps_a_call_with_no_mapped_argument(rng):
    w = rng.standard_normal(3)
    out = sg.vmap(lambda v: v * 2, in_axes=None, axis_size=5)(w)
    np.testing.assert_allclose(out, np.broadcast_to(2 * w, (5, 3)), **CLOSE)
    out = sg.vmap(lambda: np.ones(2), axis_size=3)()
    assert out.shape == (3, 2)
    with pytest.raises(sg.ArgumentError, match="pass axis_size="):
        sg.vmap(lambda v: v, in_axes=None)(w)
    with pytest.raises(sg.ShapeError, match="axis_size=7"):
        sg.vmap(lambda v: v, axis_size=7)(np.ones((5, 2)))
    with pytest.raises(sg.ArgumentError, match="axis_size must be an int"):
        sg.vmap(lambda v: v, axis_size=2.5)


def test_keyword_arguments_are_mapped_over_axis_0(rng):
    xs = rng.standard_normal((N, 3))
    scales = rng.standard_normal(N)
    out = sg.vmap(lambda x, scale=1.0: (x * scale).sum())(xs, scale=scales)
    np.testing.assert_allclose(out, [np.sum(x * s) for x, s in zip(xs, scales)], **CLOSE)
    with pytest.raises(sg.AxisError, match="keyword argument 'scale'"):
        sg.vmap(lambda x, scale=1.0: x * scale)(xs, scale=2.0)


def test_grad_with_keywords_under_vmap_matches_a_loop(rng):
    xs = rng.standard_normal((N, 3))
    ts = rng.standard_normal((N, 3))

    def loss(w, x, target=None):
        return ((w * x - target) ** 2).sum()
    w = rng.standard_normal(3)
    gs = sg.vmap(sg.grad(loss), in_axes=(None, 0))(w, xs, target=ts)
    want = [2 * (w * x - t) * x for x, t in zip(xs, ts)]
    np.testing.assert_allclose(gs, want, **CLOSE)


def test_prefix_mismatch_errors_name_the_argument(rng):
    tree = {"a": np.ones((N, 2)), "b": np.ones((N, 2))}
    with pytest.raises(sg.ArgumentError, match=r"in_axes for argument 0: \{'a': \*\} is not a "
                                               "prefix"):
        sg.vmap(lambda t: t["a"], in_axes=({"a": 0},))(tree)
    with pytest.raises(sg.ArgumentError, match=r"in_axes holds 'x' for argument 0"):
        sg.vmap(lambda t: t["a"], in_axes=({"a": "x", "b": 0},))(tree)
    with pytest.raises(sg.ArgumentError, match="one entry per positional argument"):
        sg.vmap(lambda t: t["a"], in_axes=(0, 0))(tree)
    with pytest.raises(sg.ArgumentError, match=r"out_axes for the output: \(\*, \*\) is not"):
        sg.vmap(lambda t: t["a"], out_axes=(0, 0))(tree)


def test_nested_vmap_with_pytree_axes(rng):
    m = rng.standard_normal((2, 3, 4))
    out = sg.vmap(sg.vmap(lambda t: t["x"] * t["y"], in_axes=({"x": 0, "y": None},)),
                  in_axes=({"x": 0, "y": 0},))({"x": m, "y": np.arange(2.0)})
    np.testing.assert_allclose(out, m * np.arange(2.0)[:, None, None], **CLOSE)


def test_a_batched_keyword_argument_reaches_the_transforms_inside(rng):
    x0 = rng.standard_normal(3)
    scales = np.array([1.0, 2.0, 3.0])

    def f(x, scale=1.0):
        return (x * scale).sin().sum()
    g = sg.vmap(lambda s: sg.grad(f)(x0, scale=s))(scales)
    np.testing.assert_allclose(g, [s * np.cos(s * x0) for s in scales], **CLOSE)
    h = sg.vmap(lambda s: sg.hessian(f)(x0, scale=s))(scales)
    np.testing.assert_allclose(h, [np.diag(-s * s * np.sin(s * x0)) for s in scales], **CLOSE)
