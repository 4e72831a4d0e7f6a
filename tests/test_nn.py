"""simplegrad.nn: layers and losses against closed forms, finite differences and PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from simplegrad import nn

TOL = dict(atol=1e-10, rtol=1e-10)


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_linear_on_arrays_and_on_variables(rng):
    layer = nn.Linear(3, 2, rng=rng)
    W, b = layer.params()["weight"], layer.params()["bias"]
    assert W.shape == (2, 3) and np.all(np.abs(W) <= 1 / np.sqrt(3))
    x = rng.normal(size=(4, 3))
    y = layer.predict(x)
    assert isinstance(y, np.ndarray)               # plain arrays in, plain array out
    np.testing.assert_allclose(y, x @ W.T + b, **TOL)
    recorded = layer(x)                            # sg.Parameter weights: recorded
    assert isinstance(recorded, sg.Variable)
    np.testing.assert_allclose(recorded.value, y, **TOL)
    op = sg.Ops()
    xv = op.var(x)
    yv = layer.apply({"weight": op.var(W), "bias": op.var(b)}, xv)
    assert isinstance(yv, sg.Variable) and yv.ops is op
    np.testing.assert_allclose(yv.value, y, **TOL)
    with pytest.raises(sg.ShapeError, match="Linear"):
        layer(np.ones((4, 5)))


def test_functional_gradient_of_an_mlp_against_closed_form(rng):
    model = nn.MLP([3, 5, 2], activation="tanh", rng=rng)
    assert [k for k, _ in model.named_parameters()] == ["0.weight", "0.bias", "2.weight",
                                                        "2.bias"]
    x, t = rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    params = model.params()
    g = sg.grad(lambda p: nn.mse(model.apply(p, x), t, reduction="sum"))(params)
    W1, b1, W2, b2 = (params[k] for k in ("0.weight", "0.bias", "2.weight", "2.bias"))
    h = np.tanh(x @ W1.T + b1)
    dy = 2 * (h @ W2.T + b2 - t)
    dh = dy @ W2 * (1 - h * h)
    np.testing.assert_allclose(g["2.weight"], dy.T @ h, **TOL)
    np.testing.assert_allclose(g["2.bias"], dy.sum(0), **TOL)
    np.testing.assert_allclose(g["0.weight"], dh.T @ x, **TOL)
    np.testing.assert_allclose(g["0.bias"], dh.sum(0), **TOL)
    # the module's own values are back after the functional call
    np.testing.assert_array_equal(model.params()["0.weight"], W1)


@pytest.mark.slow
def test_check_grads_through_every_layer(rng):
    model = nn.Sequential(nn.Linear(4, 6, rng=rng), nn.LayerNorm(6), nn.Sigmoid(),
                          nn.Linear(6, 5, rng=rng), nn.BatchNorm1d(5), nn.Softplus(),
                          nn.Linear(5, 3, rng=rng), nn.LeakyReLU(0.1), nn.Tanh())
    x, y = rng.normal(size=(7, 4)), rng.integers(0, 3, 7)
    sg.check_grads(lambda p: nn.cross_entropy(model.apply(p, x), y), [model.params()],
                   order=2, atol=1e-6, rtol=1e-6)


def test_state_dict_round_trip_and_errors(rng):
    a, b = nn.MLP([2, 3, 1], rng=rng), nn.MLP([2, 3, 1], rng=rng)
    assert not np.allclose(a.params()["0.weight"], b.params()["0.weight"])
    b.load_state_dict(a.state_dict())
    x = rng.normal(size=(4, 2))
    np.testing.assert_array_equal(a.predict(x), b.predict(x))
    with pytest.raises(sg.ArgumentError, match="missing keys"):
        b.load_state_dict({"0.weight": np.zeros((3, 2))})
    bad = a.state_dict()
    bad["0.weight"] = np.zeros((2, 2))
    with pytest.raises(sg.ShapeError, match="0.weight"):
        b.load_state_dict(bad)
    with pytest.raises(sg.ShapeError, match="functional_call"):
        a.apply({"0.weight": np.zeros((2, 2))}, x)
    with pytest.raises(sg.ArgumentError, match="no parameter or buffer"):
        a.apply({"0.weights": np.zeros((3, 2))}, x)
    with pytest.raises(sg.ArgumentError, match="a parameter"):
        a[0].weight = np.zeros((3, 2))
    with pytest.raises(sg.ArgumentError, match="super"):
        type("Bad", (nn.Module,), {"__init__": lambda self: setattr(self, "w", 1)})()


def test_batchnorm_training_eval_and_running_statistics(rng):
    bn = nn.BatchNorm1d(3, momentum=0.25)
    x = rng.normal(2.0, 3.0, size=(8, 3))
    y = bn.predict(x)
    mean, var_n, var_b = x.mean(0), x.var(0), x.var(0, ddof=1)
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var_n + 1e-5), **TOL)
    np.testing.assert_allclose(bn.running_mean, 0.25 * mean, **TOL)
    np.testing.assert_allclose(bn.running_var, 0.75 + 0.25 * var_b, **TOL)   # Bessel
    bn.eval()
    want = (x - bn.running_mean) / np.sqrt(bn.running_var + 1e-5)
    np.testing.assert_allclose(bn.predict(x), want, **TOL)
    seed = nn.BatchNorm1d(3, variance="unbiased")           # seed 003's normalisation
    np.testing.assert_allclose(seed.predict(x), (x - mean) / np.sqrt(var_b + 1e-5), **TOL)
    assert set(seed.state_dict()) == {"weight", "bias", "running_mean", "running_var"}
    with pytest.raises(sg.ShapeError, match="BatchNorm1d"):
        bn(np.ones((4, 2)))


def test_layernorm_embedding_dropout_activations(rng):
    x = rng.normal(size=(2, 3, 4))
    ln = nn.LayerNorm(4)
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln.predict(x), want, **TOL)
    emb = nn.Embedding(5, 2, rng=rng)
    idx = np.array([[0, 4], [4, 1]])
    np.testing.assert_array_equal(emb.predict(idx), emb.params()["weight"][idx])
    g = sg.grad(lambda p: (emb.apply(p, idx) * np.arange(8.0).reshape(2, 2, 2)).sum())(
        emb.params())["weight"]
    want = np.zeros((5, 2))
    np.add.at(want, idx, np.arange(8.0).reshape(2, 2, 2))
    np.testing.assert_allclose(g, want, **TOL)
    with pytest.raises(sg.OutOfBoundsError):
        emb(np.array([5]))
    drop = nn.Dropout(0.25, rng=np.random.default_rng(1))
    keep = np.random.default_rng(1).random((3, 4)) >= 0.25
    np.testing.assert_allclose(drop(np.ones((3, 4))), keep / 0.75, **TOL)
    drop.eval()
    np.testing.assert_array_equal(drop(np.ones((3, 4))), np.ones((3, 4)))
    with pytest.raises(sg.ArgumentError, match="rng"):
        nn.Dropout(0.5, rng=None)
    z = np.array([-800.0, -1.0, 0.5, 800.0])
    np.testing.assert_allclose(nn.ReLU()(z), np.maximum(z, 0))
    np.testing.assert_allclose(nn.Softplus()(z), np.logaddexp(0, z), **TOL)
    np.testing.assert_allclose(nn.LeakyReLU(0.1)(z), np.where(z > 0, z, 0.1 * z))
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(nn.Sigmoid()(z), 1 / (1 + np.exp(-z)), **TOL)
    np.testing.assert_allclose(nn.Tanh()(z), np.tanh(z), **TOL)
    assert nn.Identity()(z) is z


def test_cross_entropy_nll_mse(rng):
    logits = rng.normal(size=(5, 4)) * 3 + np.array([1000.0, 0, 0, 0])   # stable at 1000
    t = np.array([0, 1, 3, 3, 2])
    p = softmax(logits)
    with np.errstate(divide="ignore"):
        naive = -np.log(p[np.arange(5), t])          # softmax underflows to 0: inf
    shifted = logits - logits.max(1, keepdims=True)
    exact = -(shifted[np.arange(5), t] - np.log(np.exp(shifted).sum(1)))
    assert np.isfinite(nn.cross_entropy(logits, t))
    np.testing.assert_allclose(nn.cross_entropy(logits, t, reduction="none"), exact, **TOL)
    assert nn.cross_entropy(logits, t, reduction="sum") == pytest.approx(exact.sum(), rel=1e-12)
    onehot = np.eye(4)[t]
    g = sg.grad(lambda z: nn.cross_entropy(z, t))(logits)
    np.testing.assert_allclose(g, (p - onehot) / 5, **TOL)
    assert np.isinf(naive).any()
    lp = np.log(softmax(rng.normal(size=(5, 4))))
    assert nn.nll(lp, t) == pytest.approx(-lp[np.arange(5), t].mean(), rel=1e-12)
    a, b = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    assert nn.mse(a, b) == pytest.approx(np.mean((a - b) ** 2), rel=1e-12)
    with pytest.raises(sg.DTypeError, match="integer"):
        nn.cross_entropy(logits, t.astype(float))
    with pytest.raises(sg.OutOfBoundsError, match="targets"):
        nn.cross_entropy(logits, np.array([0, 1, 4, 0, 0]))
    with pytest.raises(sg.ShapeError, match="targets"):
        nn.cross_entropy(logits, t[:3])
    with pytest.raises(sg.ArgumentError, match="reduction"):
        nn.mse(a, b, reduction="avg")


def test_train_eval_and_repr(rng):
    model = nn.Sequential(nn.Linear(2, 2, rng=rng), nn.BatchNorm1d(2),
                          nn.Dropout(0.5, rng=rng))
    model.eval()
    assert not any(m.training for _, m in model.named_modules())
    model.train()
    assert all(m.training for _, m in model.named_modules())
    assert "BatchNorm1d(2" in repr(model) and len(model) == 3
    assert model[1] is model.children()[1]


# ---------------------------------------------------------------- against PyTorch

@pytest.mark.slow
def test_layers_match_pytorch(rng):
    torch = pytest.importorskip("torch")
    x = rng.normal(size=(6, 4))
    t = np.array([0, 2, 1, 1, 0, 2])
    model = nn.Sequential(nn.Linear(4, 5, rng=rng), nn.BatchNorm1d(5), nn.Tanh(),
                          nn.LayerNorm(5), nn.Linear(5, 3, rng=rng))
    ref = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.BatchNorm1d(5), torch.nn.Tanh(),
                              torch.nn.LayerNorm(5), torch.nn.Linear(5, 3)).double()
    ref.load_state_dict({k: torch.tensor(v) for k, v in model.state_dict().items()},
                        strict=False)
    params = model.params()
    loss, g = sg.value_and_grad(lambda p: nn.cross_entropy(model.apply(p, x), t))(params)
    out = torch.nn.functional.cross_entropy(ref(torch.tensor(x)), torch.tensor(t))
    out.backward()
    assert loss == pytest.approx(out.item(), rel=1e-12)
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(g[name], p.grad.numpy(), atol=1e-12, rtol=1e-10)
    np.testing.assert_allclose(model.state_dict()["1.running_var"],
                               ref.state_dict()["1.running_var"].numpy(), **TOL)
    model.eval()
    ref.eval()
    np.testing.assert_allclose(model.predict(x), ref(torch.tensor(x)).detach().numpy(), **TOL)


def test_functional_call_checks_shapes_of_every_parameter_form(rng):
    model = nn.MLP([2, 3, 1], rng=rng)
    x, p = rng.normal(size=(4, 2)), model.params()
    op = sg.Ops()
    want = model.predict(x)
    as_lists = {k: v.tolist() for k, v in p.items()}       # np.shape's answer, no .shape
    np.testing.assert_array_equal(model.apply(as_lists, x), want)
    np.testing.assert_array_equal(model.apply({k: op.var(v) for k, v in p.items()}, x).value,
                                  want)
    for bad in (op.var(np.zeros((3, 3))), np.zeros((3, 3)).tolist()):
        with pytest.raises(sg.ShapeError, match=r"0.weight has shape \(3, 3\).*\(3, 2\)"):
            model.apply({"0.weight": bad}, x)


def test_import_simplegrad_alone_gives_nn_and_optim():
    # a fresh interpreter: `import simplegrad as sg` is the only import, as a JAX/torch user
    # writes it; one SGD step on a Linear layer by sg.nn and sg.optim, against the hand update
    import subprocess
    import sys
    code = ("import numpy as np\nimport simplegrad as sg\n"
            "layer = sg.nn.Linear(2, 1, rng=np.random.default_rng(0))\n"
            "opt = sg.optim.SGD(layer.parameters(), lr=0.5)\n"
            "w0 = layer.weight.value.copy()\n"
            "x = np.array([[1.0, 2.0]])\n"
            "layer(x).sum().backward()\n"
            "opt.step()\n"
            # d sum(W x + b) / dW holds x's two entries, in W's layout
            "print(np.allclose(layer.weight.value, w0 - 0.5 * x.reshape(w0.shape)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "True"
