"""simplegrad.optim: closed-form updates, PyTorch step for step, and MAML through the updates."""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from simplegrad import nn, optim

TOL = dict(atol=1e-12, rtol=1e-12)


def run(opt, grads_of, params, steps):
    """``steps`` functional updates with gradients from ``grads_of(params)``."""
    state = opt.init(params)
    history = []
    for _ in range(steps):
        params, state = opt.update(grads_of(params), state, params)
        history.append(params)
    return history


def test_sgd_closed_forms():
    p0 = {"w": np.array([1.0, -2.0])}
    const = lambda p: {"w": np.array([0.5, 1.0])}
    hist = run(optim.SGD(lr=0.1), const, p0, 3)
    np.testing.assert_allclose(hist[-1]["w"], p0["w"] - 3 * 0.1 * np.array([0.5, 1.0]), **TOL)
    # momentum 0.9 with a constant gradient g: buffers g, 1.9 g, 2.71 g
    hist = run(optim.SGD(lr=0.1, momentum=0.9), const, p0, 3)
    g = np.array([0.5, 1.0])
    np.testing.assert_allclose(hist[-1]["w"], p0["w"] - 0.1 * (1 + 1.9 + 2.71) * g, **TOL)
    # Nesterov: the step is g + 0.9 * buf: 1.9 g, 2.71 g, 3.439 g
    hist = run(optim.SGD(lr=0.1, momentum=0.9, nesterov=True), const, p0, 3)
    np.testing.assert_allclose(hist[-1]["w"], p0["w"] - 0.1 * (1.9 + 2.71 + 3.439) * g, **TOL)
    # weight decay on f = 0 (gradient 0): p_t = (1 - lr wd)^t p0
    zero = lambda p: {"w": np.zeros(2)}
    hist = run(optim.SGD(lr=0.1, weight_decay=0.5), zero, p0, 4)
    np.testing.assert_allclose(hist[-1]["w"], 0.95 ** 4 * p0["w"], **TOL)


def test_adam_and_adamw_closed_forms():
    p0 = {"w": np.array([1.0, -2.0, 3.0])}
    g = np.array([0.5, -1e-3, 2.0])
    const = lambda p: {"w": g}
    # with a constant gradient the bias-corrected moments are g and g^2 at every step
    hist = run(optim.Adam(lr=0.01), const, p0, 5)
    np.testing.assert_allclose(hist[-1]["w"], p0["w"] - 5 * 0.01 * g / (np.abs(g) + 1e-8),
                               **TOL)
    want = p0["w"]
    for _ in range(5):
        want = want * (1 - 0.01 * 0.1) - 0.01 * g / (np.abs(g) + 1e-8)
    hist = run(optim.AdamW(lr=0.01, weight_decay=0.1), const, p0, 5)
    np.testing.assert_allclose(hist[-1]["w"], want, **TOL)


def adam_reference(p, grads, lr, b1, b2, eps, wd, decoupled):
    """Adam as Kingma and Ba write it (m-hat, v-hat), decay as L2 or decoupled."""
    m = v = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        if decoupled:
            p = p - lr * wd * p
        else:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return p


def test_adam_against_the_papers_formula_with_changing_gradients(rng):
    grads = [rng.normal(size=4) for _ in range(6)]
    p0 = rng.normal(size=4)
    for cls, decoupled in ((optim.Adam, False), (optim.AdamW, True)):
        opt = cls(lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.3)
        params, state = p0, opt.init(p0)
        for g in grads:
            params, state = opt.update(g, state, params)
        want = adam_reference(p0, grads, 0.05, 0.8, 0.95, 1e-6, 0.3, decoupled)
        np.testing.assert_allclose(params, want, atol=1e-12)
    assert state["step"] == 6


def test_update_errors():
    opt = optim.SGD(lr=0.1)
    state = opt.init({"a": np.zeros(2)})
    with pytest.raises(sg.ArgumentError, match="structure"):
        opt.update({"b": np.zeros(2)}, state, {"a": np.zeros(2)})
    with pytest.raises(sg.ShapeError, match="shape"):
        opt.update({"a": np.zeros(3)}, state, {"a": np.zeros(2)})
    with pytest.raises(sg.ArgumentError, match="init"):
        opt.update({"a": np.zeros(2)}, {}, {"a": np.zeros(2)})
    with pytest.raises(sg.ArgumentError, match="lr"):
        optim.Adam(lr=0.0)
    with pytest.raises(sg.ArgumentError, match="Nesterov"):
        optim.SGD(lr=0.1, nesterov=True)
    with pytest.raises(sg.ArgumentError, match="step"):
        optim.SGD(lr=0.1).step()
    with pytest.raises(sg.ArgumentError, match="Parameter"):
        optim.SGD([np.zeros(2)], lr=0.1)


# ---------------------------------------------------------------- against PyTorch

CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.02, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.05)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.02, betas=(0.85, 0.99), weight_decay=0.2)),
]


@pytest.mark.parametrize("name, kwargs", CONFIGS,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(CONFIGS)])
def test_step_for_step_against_pytorch(name, kwargs, rng):
    torch = pytest.importorskip("torch")
    model = nn.MLP([3, 4, 2], activation="tanh", rng=rng)
    ref = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                              torch.nn.Linear(4, 2)).double()
    ref.load_state_dict({k: torch.tensor(v) for k, v in model.state_dict().items()})
    torch_opt = getattr(torch.optim, name)(ref.parameters(), **kwargs)
    opt = getattr(optim, name)(**kwargs)
    params = model.params()
    state = opt.init(params)
    loss = lambda p, x, t: nn.cross_entropy(model.apply(p, x), t)
    for _ in range(15):
        x, t = rng.normal(size=(5, 3)), rng.integers(0, 2, 5)
        grads = sg.grad(loss)(params, x, t)
        params, state = opt.update(grads, state, params)
        torch_opt.zero_grad()
        torch.nn.functional.cross_entropy(ref(torch.tensor(x)), torch.tensor(t)).backward()
        torch_opt.step()
        for k, p in ref.named_parameters():
            np.testing.assert_allclose(params[k], p.detach().numpy(), atol=1e-12, rtol=1e-10)


# ---------------------------------------------------------------- higher order: MAML

def task_loss(model, x, y):
    """The function p -> mse(model with p on x, y)."""
    return lambda p: nn.mse(model.apply(p, x), y)


def maml_outer_loss(model, opt, k, params, tasks):
    """The query loss after ``k`` inner steps of ``opt`` on the support set, per task."""
    total = 0.0
    for xs, ys, xq, yq in tasks:
        fast, state = params, opt.init(params)
        for _ in range(k):
            g = sg.grad(task_loss(model, xs, ys))(fast)
            fast, state = opt.update(g, state, fast)
        total = total + nn.mse(model.apply(fast, xq), yq)
    return total


@pytest.mark.parametrize("make_opt", [lambda: optim.SGD(lr=0.1),
                                      lambda: optim.SGD(lr=0.05, momentum=0.9),
                                      lambda: optim.Adam(lr=0.05)],
                         ids=["sgd", "momentum", "adam"])
def test_maml_outer_gradient_against_finite_differences(make_opt, rng):
    model = nn.MLP([2, 6, 1], activation="tanh", rng=rng)
    tasks = []
    for _ in range(2):
        a, ph = rng.uniform(0.5, 2.0), rng.uniform(0, np.pi)
        xs, xq = rng.uniform(-2, 2, (5, 2)), rng.uniform(-2, 2, (5, 2))
        f = lambda x, a=a, ph=ph: a * np.sin(x[:, :1] + ph) * np.cos(x[:, 1:])
        tasks.append((xs, f(xs), xq, f(xq)))
    opt = make_opt()
    params = model.params()
    outer = lambda p: maml_outer_loss(model, opt, 3, p, tasks)
    g = sg.grad(outer)(params)
    eps = 1e-6
    for key in params:
        d = rng.normal(size=params[key].shape)
        hi = {**params, key: params[key] + eps * d}
        lo = {**params, key: params[key] - eps * d}
        fd = (outer(hi) - outer(lo)) / (2 * eps)
        assert np.sum(g[key] * d) == pytest.approx(fd, rel=1e-6, abs=1e-8), key
    # the adaptation matters: the query gradient at the unadapted parameters differs
    first_order = sum(sg.grad(task_loss(model, xq, yq))(params)["0.weight"]
                      for _, _, xq, yq in tasks)
    assert not np.allclose(first_order, g["0.weight"], atol=1e-6)
