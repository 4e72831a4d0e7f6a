"""nn under vmap sees one example: every deterministic layer and loss gives what a loop gives.

The oracle is the untransformed function run once per example in a Python loop: values and
per-example gradients (``vmap(grad(loss))``) must agree with it to 1e-12. Dropout draws one
mask per example; BatchNorm1d in training mode refuses vmap (its statistics are the batch's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import simplegrad as sg
from simplegrad import nn

B = 5
TOL = {"rtol": 1e-12, "atol": 1e-12}


def _loop(f: Callable, args: tuple, in_axes: tuple) -> Any:
    """f once per example (arrays in, arrays out), the results stacked leaf by leaf."""
    def pick(a: Any, k: int) -> Any:
        return {key: v[k] for key, v in a.items()} if isinstance(a, dict) else a[k]
    outs = [f(*[a if ax is None else pick(a, k) for a, ax in zip(args, in_axes)])
            for k in range(B)]
    if isinstance(outs[0], dict):
        return {key: np.stack([np.asarray(o[key]) for o in outs]) for key in outs[0]}
    return np.stack([np.asarray(o.value if isinstance(o, sg.Variable) else o)
                     for o in outs])


def _agree(f: Callable, *args: Any, in_axes: tuple | None = None) -> None:
    in_axes = in_axes or (0,) * len(args)
    got, want = sg.vmap(f, in_axes=in_axes)(*args), _loop(f, args, in_axes)
    if isinstance(want, dict):
        assert got.keys() == want.keys()
        for key in want:
            assert got[key].shape == want[key].shape, key
            np.testing.assert_allclose(got[key], want[key], **TOL, err_msg=key)
            assert np.abs(want[key]).max() > 0, f"{key}: a zero gradient checks nothing"
        return
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, **TOL)


@pytest.fixture
def data(rng: np.random.Generator) -> dict:
    return {"X": rng.normal(size=(B, 3)), "X2": rng.normal(size=(B, 2, 3)),
            "y": rng.integers(0, 4, size=B), "y2": rng.integers(0, 4, size=(B, 2)),
            "T": rng.normal(size=(B, 4)), "idx": rng.integers(0, 7, size=(B, 3))}


def _models(rng: np.random.Generator) -> dict:
    return {
        "Linear": nn.Linear(3, 4, rng=rng),
        "MLP": nn.MLP([3, 5, 4], activation="tanh", rng=rng),
        "Sequential": nn.Sequential(nn.Linear(3, 6, rng=rng), nn.LayerNorm(6),
                                    nn.LeakyReLU(0.1), nn.Linear(6, 4, rng=rng),
                                    nn.Softplus()),
        "activations": nn.Sequential(nn.Linear(3, 4, rng=rng), nn.ReLU(), nn.Identity(),
                                     nn.Linear(4, 4, rng=rng), nn.Sigmoid(),
                                     nn.Linear(4, 4, rng=rng), nn.Tanh()),
    }


MODELS = ["Linear", "MLP", "Sequential", "activations"]


@pytest.mark.parametrize("name", MODELS)
def test_model_forward(name: str, data: dict, rng: np.random.Generator) -> None:
    model = _models(rng)[name]
    p = model.params()
    _agree(lambda x: model(x), data["X"])                       # one example: a vector
    _agree(lambda x: model.apply(p, x[None]), data["X"])        # a batch of one
    _agree(lambda x: model.apply(p, x), data["X2"])             # a batch of two per example
    _agree(lambda p, x: model.apply(p, x), p, data["X"], in_axes=(None, 0))


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("loss", ["cross_entropy", "nll", "mse"])
def test_per_example_gradients(name: str, loss: str, data: dict,
                               rng: np.random.Generator) -> None:
    model = _models(rng)[name]
    p = model.params()
    if loss == "mse":
        def f(p, x, t):
            return nn.mse(model.apply(p, x[None]), t[None])
        _agree(sg.grad(f), p, data["X"], data["T"], in_axes=(None, 0, 0))
        _agree(f, p, data["X"], data["T"], in_axes=(None, 0, 0))
        return
    pick = nn.cross_entropy if loss == "cross_entropy" else \
        (lambda s, y, reduction="mean": nn.nll(nn.ops_of(s).log_softmax(s, axis=-1), y,
                                               reduction))

    def one(p, x, y):           # the issue's form: one example as a batch of one
        return pick(model.apply(p, x[None]), y[None])

    def two(p, x, y):           # two rows per example, integer targets per row
        return pick(model.apply(p, x), y, reduction="sum")

    _agree(sg.grad(one), p, data["X"], data["y"], in_axes=(None, 0, 0))
    _agree(one, p, data["X"], data["y"], in_axes=(None, 0, 0))
    _agree(sg.grad(two), p, data["X2"], data["y2"], in_axes=(None, 0, 0))
    _agree(lambda p, x, y: pick(model.apply(p, x), y, reduction="none"),
           p, data["X2"], data["y2"], in_axes=(None, 0, 0))
    # shared targets (a constant for every example) and gradients with respect to x
    _agree(sg.grad(lambda x: pick(model.apply(p, x[None]), np.array([1]))), data["X"])


def test_the_issue_layernorm(data: dict) -> None:
    """LayerNorm of one example normalises that example (not zeros, not the bias)."""
    ln = nn.LayerNorm(3)
    got = sg.vmap(lambda x: ln(x[None]))(data["X"])
    want = (data["X"] - data["X"].mean(1, keepdims=True)) / np.sqrt(
        data["X"].var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got[:, 0], want, **TOL)
    ln2 = nn.LayerNorm((2, 3))
    p = {"weight": np.linspace(0.5, 2.0, 6).reshape(2, 3), "bias": np.arange(6.0).reshape(2, 3)}
    _agree(lambda x: ln2.apply(p, x), data["X2"])
    _agree(sg.grad(lambda p, x, t: nn.mse(ln2.apply(p, x), t)), p, data["X2"], data["X2"] ** 2,
           in_axes=(None, 0, 0))


def test_embedding(data: dict, rng: np.random.Generator) -> None:
    emb = nn.Embedding(7, 4, rng=rng)
    p = emb.params()
    _agree(lambda i: emb(i), data["idx"])
    _agree(lambda i: emb.apply(p, i), data["idx"])
    _agree(lambda p, i: emb.apply(p, i), p, data["idx"], in_axes=(None, 0))
    _agree(sg.grad(lambda p, i, t: nn.mse(emb.apply(p, i)[:, 0], t)), p, data["idx"], data["X"],
           in_axes=(None, 0, 0))
    with pytest.raises(sg.OutOfBoundsError, match="Embedding"):
        sg.vmap(lambda i: emb(i))(data["idx"] + 7)


def test_batchnorm_eval(data: dict, rng: np.random.Generator) -> None:
    bn = nn.BatchNorm1d(3)
    bn(rng.normal(1.0, 2.0, size=(16, 3)))          # training: running statistics move
    bn.eval()
    p = {"weight": np.array([1.5, 0.5, 2.0]), "bias": np.array([0.1, -0.2, 0.3])}
    _agree(lambda x: bn(x[None]), data["X"])
    _agree(lambda x: bn.apply(p, x), data["X2"])
    _agree(sg.grad(lambda p, x, t: nn.mse(bn.apply(p, x), t)), p, data["X2"], data["X2"] ** 2,
           in_axes=(None, 0, 0))


def test_batchnorm_training_refuses_vmap(data: dict) -> None:
    bn = nn.BatchNorm1d(3)
    before = bn.state_dict()
    with pytest.raises(sg.ArgumentError, match=r"BatchNorm1d.*training.*vmap"):
        sg.vmap(lambda x: bn(x))(data["X2"])
    with pytest.raises(sg.ArgumentError, match="BatchNorm1d"):
        sg.vmap(sg.grad(lambda p, x: bn.apply(p, x).sum()), in_axes=(None, 0))(
            bn.params(), data["X2"])
    for key, value in bn.state_dict().items():      # the running statistics did not move
        np.testing.assert_array_equal(value, before[key])


def test_dropout_one_mask_per_example() -> None:
    p, X = 0.5, np.ones((6, 40))
    d = nn.Dropout(p, np.random.default_rng(3))
    out = sg.vmap(lambda x: d(x[None]))(X)
    assert out.shape == (6, 1, 40)                  # not (6, 6, 1, 40)
    assert set(np.unique(out)) == {0.0, 1 / (1 - p)}
    assert len({row.tobytes() for row in out[:, 0]}) == 6, "examples share a mask"
    # the draws of the loop, in its order
    loop = nn.Dropout(p, np.random.default_rng(3))
    np.testing.assert_array_equal(out, np.stack([loop(x[None]) for x in X]))
    # gradients: each example's own mask
    g = sg.vmap(sg.grad(lambda x: d(x).sum()))(X)
    assert set(np.unique(g)) == {0.0, 2.0} and len({r.tobytes() for r in g}) == 6
    # two levels: one mask per pair of examples
    out2 = sg.vmap(sg.vmap(lambda x: d(x)))(np.ones((3, 4, 20)))
    assert out2.shape == (3, 4, 20) and set(np.unique(out2)) == {0.0, 2.0}
    assert len({r.tobytes() for r in out2.reshape(12, 20)}) == 12
    d.eval()
    np.testing.assert_array_equal(sg.vmap(lambda x: d(x[None]))(X), X[:, None])


def test_shape_errors_name_one_example(data: dict) -> None:
    """A wrong shape is reported as the function sees it: one example's."""
    with pytest.raises(sg.ShapeError, match=r"expected \(N, C\) scores, got shape \(4,\)"):
        sg.vmap(lambda x, y: nn.cross_entropy(x, y))(data["T"], data["y"])
    with pytest.raises(sg.ShapeError, match=r"targets have shape \(\), expected \(1,\)"):
        sg.vmap(lambda x, y: nn.cross_entropy(x[None], y))(data["T"], data["y"])
    with pytest.raises(sg.ShapeError, match=r"\(3,\) but target has shape \(4,\)"):
        sg.vmap(lambda x, t: nn.mse(x, t))(data["X"], data["T"])
    with pytest.raises(sg.ShapeError, match=r"Linear: the input has shape \(4,\)"):
        sg.vmap(nn.Linear(3, 2))(data["T"])


def test_ensembles_and_two_levels(data: dict, rng: np.random.Generator) -> None:
    """vmap over stacked parameters (an ensemble), and over two batch axes of the input."""
    model = nn.MLP([3, 4, 4], activation="tanh", rng=rng)
    ps = [nn.MLP([3, 4, 4], activation="tanh", rng=rng).params() for _ in range(B)]
    stacked = {k: np.stack([p[k] for p in ps]) for k in ps[0]}
    _agree(lambda p, x: model.apply(p, x), stacked, data["X2"][0], in_axes=(0, None))
    _agree(sg.grad(lambda p, x, y: nn.cross_entropy(model.apply(p, x), y)), stacked,
           data["X2"][0], data["y2"][0], in_axes=(0, None, None))
    ln = nn.Sequential(nn.LayerNorm(3), nn.Linear(3, 2, rng=rng))
    got = sg.vmap(sg.vmap(lambda x: ln(x)))(data["X2"])
    want = np.stack([[ln.predict(x) for x in xs] for xs in data["X2"]])
    np.testing.assert_allclose(got, want, **TOL)
