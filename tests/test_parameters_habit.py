"""The PyTorch habit: modules holding sg.Parameter, loss.backward(), opt.step(), zero_grad()."""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from simplegrad import nn, optim

CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.02, betas=(0.8, 0.9), weight_decay=0.05)),
    ("AdamW", dict(lr=0.02, weight_decay=0.2)),
]


def data(rng):
    return rng.normal(size=(6, 3)), rng.integers(0, 2, 6)


def test_modules_hold_parameters_and_backward_accumulates(rng):
    model = nn.MLP([3, 4, 2], rng=rng)
    x, y = data(rng)
    assert all(isinstance(p, sg.Parameter) for p in model.parameters())
    want = sg.grad(lambda p: nn.cross_entropy(model.apply(p, x), y))(model.params())
    loss = nn.cross_entropy(model(x), y)
    loss.backward()
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.value, want[name], atol=1e-12)
    nn.cross_entropy(model(x), y).backward()            # accumulates
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.value, 2 * want[name], atol=1e-12)
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_parameters_join_the_ops_of_a_variable_input(rng):
    model = nn.Linear(3, 2, rng=rng)
    x, _ = data(rng)
    op = sg.Ops()
    xv = op.var(x)
    out = (model(xv) ** 2).sum()
    assert out.ops is op
    gx = op.grad(out, xv)
    W, b = model.params()["weight"], model.params()["bias"]
    np.testing.assert_allclose(gx.value, 2 * (x @ W.T + b) @ W, atol=1e-12)


@pytest.mark.parametrize("name, kwargs", CONFIGS, ids=[c[0] + str(i) for i, c in
                                                        enumerate(CONFIGS)])
def test_step_matches_the_functional_update(name, kwargs, rng):
    model = nn.MLP([3, 4, 2], activation="tanh", rng=rng)
    params = model.params()
    functional = getattr(optim, name)(**kwargs)
    state = functional.init(params)
    opt = getattr(optim, name)(model.parameters(), **kwargs)
    for _ in range(10):
        x, y = data(rng)
        grads = sg.grad(lambda p, x=x, y=y: nn.cross_entropy(model.apply(p, x), y))(params)
        params, state = functional.update(grads, state, params)
        nn.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    for k, v in model.params().items():
        np.testing.assert_allclose(v, params[k], atol=1e-13)


@pytest.mark.parametrize("name, kwargs", CONFIGS, ids=[c[0] + str(i) for i, c in
                                                        enumerate(CONFIGS)])
def test_step_for_step_against_pytorch(name, kwargs, rng):
    torch = pytest.importorskip("torch")
    model = nn.MLP([3, 4, 2], activation="tanh", rng=rng)
    ref = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                              torch.nn.Linear(4, 2)).double()
    ref.load_state_dict({k: torch.tensor(v) for k, v in model.state_dict().items()})
    opt = getattr(optim, name)(model.parameters(), **kwargs)
    torch_opt = getattr(torch.optim, name)(ref.parameters(), **kwargs)
    for _ in range(10):
        x, y = data(rng)
        nn.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()
        torch_opt.zero_grad()
        torch.nn.functional.cross_entropy(ref(torch.tensor(x)), torch.tensor(y)).backward()
        torch_opt.step()
        for k, p in ref.named_parameters():
            np.testing.assert_allclose(model.params()[k], p.detach().numpy(), atol=1e-12)


def test_load_state_dict_assigns_in_place(rng):
    a, b = nn.MLP([2, 3, 1], rng=rng), nn.MLP([2, 3, 1], rng=rng)
    before = b.parameters()
    b.load_state_dict(a.state_dict())
    assert all(p is q for p, q in zip(before, b.parameters()))
    x = rng.normal(size=(4, 2))
    np.testing.assert_array_equal(nn.value_of(a(x)), nn.value_of(b(x)))
