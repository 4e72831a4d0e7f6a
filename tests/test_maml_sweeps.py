"""The meta-gradient habit (``sg.grad`` of a function calling ``sg.grad``) and the sweep paths
it leans on: checked against central differences, the recorded sweep, and numpy."""

import itertools

import numpy as np
import pytest

import simplegrad as sg
from simplegrad import nn
from simplegrad.primitives.core import keepdims_shape
from simplegrad.primitives.reduce import _mean
from simplegrad.primitives.shape import _expand

# ---------------------------------------------------------------- MAML, end to end


def _task(rng):
    model = nn.MLP([1, 4, 3, 1], activation="tanh", rng=rng)
    xs, xq = rng.uniform(-2, 2, (5, 1)), rng.uniform(-2, 2, (6, 1))
    return model, xs, np.sin(xs), xq, np.cos(xq)


def _meta(model, xs, ys, xq, yq, steps=2, lr=0.1):
    def meta(p):
        fast = p
        for _ in range(steps):
            g = sg.grad(lambda q: nn.mse(model.apply(q, xs), ys))(fast)
            fast = {k: fast[k] - lr * g[k] for k in fast}
        return nn.mse(model.apply(fast, xq), yq)
    return meta


def test_maml_meta_gradient_matches_central_differences():
    rng = np.random.default_rng(3)
    model, *data = _task(rng)
    meta = _meta(model, *data)
    params = model.params()
    got = sg.grad(meta)(params)
    h = 1e-6
    for k, w in params.items():
        fd = np.zeros_like(w)
        for i in np.ndindex(w.shape):
            up, down = dict(params), dict(params)
            up[k], down[k] = w.copy(), w.copy()
            up[k][i] += h
            down[k][i] -= h
            fd[i] = (meta(up) - meta(down)) / (2 * h)
        np.testing.assert_allclose(got[k], fd, rtol=1e-6, atol=1e-9, err_msg=k)


def test_maml_value_only_outer_sweep_equals_the_recorded_one_bit_for_bit():
    rng = np.random.default_rng(4)
    model, *data = _task(rng)
    meta = _meta(model, *data, steps=3)
    op = sg.Ops()
    pv = {k: op.var(v, name=k) for k, v in model.params().items()}
    L = meta(pv)
    ws = list(pv.values())
    values = [g.value.copy() for g in op.grad(L, ws, create_graph=False)]
    recorded = [g.value for g in op.grad(L, ws, create_graph=True)]
    for a, b in zip(values, recorded):
        np.testing.assert_array_equal(a, b)
    by_transform = sg.grad(meta)(model.params())
    for k, a in zip(pv, values):
        np.testing.assert_array_equal(a, by_transform[k], err_msg=k)


def test_inner_gradient_records_nothing_for_the_outer_variables():
    # an inner sg.grad differentiates in identity entries of the outer Variables: its sweep
    # pulls back through them to nothing (the outer Variables are older than every wrt)
    rng = np.random.default_rng(5)
    model, xs, ys, _, _ = _task(rng)
    op = sg.Ops()
    pv = {k: op.var(v, name=k) for k, v in model.params().items()}
    g = sg.grad(lambda q: nn.mse(model.apply(q, xs), ys))(pv)
    outer = set(pv.values())
    assert not any(x in outer for e in op.tape if e.prim is not None and e.prim.name ==
                   "reshape" and e.position > g["0.weight"].position for x in e.inputs)
    assert not any(e.prim is not None and e.prim.name == "reshape" and e.position >
                   min(v.position for v in g.values()) for e in op.tape)

# ---------------------------------------------------------------- value helpers


@pytest.mark.parametrize("shape, to", [((), (2, 3)), ((1, 4), (3, 4)), ((3, 1), (3, 4)),
                                       ((4,), (2, 3, 4)), ((2, 1, 3), (5, 2, 4, 3)),
                                       ((0,), (3, 0)), ((1, 3), (0, 3))])
@pytest.mark.parametrize("layout", ["C", "F", "strided", "int8"])
def test_expand_is_numpys_broadcast_to(shape, to, layout):
    x = np.arange(1.0, 1.0 + 2 * int(np.prod(shape))).reshape(shape + (2,))[..., 0] \
        if layout == "strided" else np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape)
    if layout == "F":
        x = np.asfortranarray(x)
    if layout == "int8":
        x = x.astype(np.int8)
    got, want = _expand(x, to), np.broadcast_to(x, to)
    assert got.shape == want.shape and got.dtype == want.dtype and not got.flags.writeable
    np.testing.assert_array_equal(got, want)
    assert np.shares_memory(got, x) or got.size == 0


def test_expand_refuses_what_numpy_refuses():
    with pytest.raises(ValueError):
        _expand(np.zeros((2, 3)), (4, 3))
    with pytest.raises(ValueError):
        _expand(np.zeros((2, 3)), (3,))


@pytest.mark.parametrize("shape", [(), (3,), (3, 4), (2, 3, 4)])
def test_keepdims_shape_is_the_shape_numpy_keeps(shape):
    x = np.zeros(shape)
    axes = [None] + list(range(-len(shape), len(shape))) + \
        [tuple(range(len(shape)))[::2]] if shape else [None, ()]
    for axis in axes:
        assert keepdims_shape(shape, axis) == np.sum(x, axis=axis, keepdims=True).shape


def test_value_only_sweep_equals_the_recorded_one_on_every_kind_of_entry():
    # unary and binary entries with and without attributes, broadcasting, constants, an input
    # used twice, indexing (sparse cotangents), a variadic entry, and where (structural zeros)
    rng = np.random.default_rng(7)
    op = sg.Ops()
    x = op.var(rng.normal(size=(3, 4)), name="x")
    b = op.var(rng.normal(size=(4,)), name="b")
    h = (x * x + b).tanh() - 0.5 * x.T.T
    s = op.concatenate([h[0], h[:, 1], b], axis=0)
    w = op.where(x > 0, (abs(x) * 2.0).sqrt(), -x)
    L = (s * s).sum() + w.mean() + (h @ b).sum()
    values = [g.value.copy() for g in op.grad(L, [x, b], create_graph=False)]
    recorded = [g.value for g in op.grad(L, [x, b], create_graph=True)]
    for a, r in zip(values, recorded):
        np.testing.assert_array_equal(a, r)
    def loss(xx, bb):
        hh = np.tanh(xx * xx + bb) - 0.5 * xx
        ss = np.concatenate([hh[0], hh[:, 1], bb])
        ww = np.where(xx > 0, np.sqrt(np.abs(xx) * 2.0), -xx)
        return (ss * ss).sum() + ww.mean() + (hh @ bb).sum()

    eps = 1e-6
    for k, v in enumerate([x, b]):
        fd = np.zeros(v.shape)
        for i in np.ndindex(v.shape):
            up, down = [x.value.copy(), b.value.copy()], [x.value.copy(), b.value.copy()]
            up[k][i] += eps
            down[k][i] -= eps
            fd[i] = (loss(*up) - loss(*down)) / (2 * eps)
        np.testing.assert_allclose(values[k], fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int64, bool])
def test_mean_forward_is_numpys_mean_for_every_axis(dtype, rng):
    """The recorded mean's value equals np.mean's bit for bit (its type and shape too) for
    every axis form, keepdims, 0-d and one-element arrays; empty arrays warn as numpy does."""
    for shape in [(), (1,), (7,), (3, 4), (2, 3, 5), (10, 1)]:
        x = (rng.normal(size=shape) * 1e3).astype(dtype)
        axes = [None, *range(-len(shape), len(shape))]
        axes += [c for r in range(2, len(shape) + 1)
                 for c in itertools.combinations(range(len(shape)), r)]
        for axis in axes:
            for keepdims in (False, True):
                got, want = _mean(x, axis, keepdims), np.mean(x, axis=axis, keepdims=keepdims)
                assert type(got) is type(want) and np.shape(got) == np.shape(want)
                np.testing.assert_array_equal(got, want)
    with pytest.warns(RuntimeWarning):
        assert np.isnan(_mean(np.zeros((0,), dtype=np.float64)))
