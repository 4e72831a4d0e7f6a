"""The eager Hessian and forward-mode Jacobian on values: the closed forms, the value-only
sweep's shortcuts (elementwise forms, reshapes, the shared identity basis) giving what the
general path and the recorded sweep give, and results that are the caller's own arrays."""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.engine.batched import STACKS, Stack
from simplegrad.primitives import REGISTRY
from simplegrad.transforms.jacobians import identity


def _fd_hessian(f, x: np.ndarray, eps: float = 1e-4) -> np.ndarray:
    """Central differences of central differences, float64."""
    n = x.size
    h = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            ei, ej = np.eye(n)[i] * eps, np.eye(n)[j] * eps
            h[i, j] = (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej) + f(x - ei - ej)) / (
                4 * eps * eps)
    return h


def test_hessian_of_sum_tanh_is_the_closed_form(rng):
    W, x = rng.normal(size=(30, 30)) / np.sqrt(30), rng.normal(size=30)
    h = sg.hessian(lambda x: (W @ x).tanh().sum())(x)
    t = np.tanh(W @ x)
    np.testing.assert_allclose(h, W.T @ ((-2 * t * (1 - t * t))[:, None] * W),
                               rtol=1e-12, atol=1e-14)


def test_hessian_through_squares_reshapes_and_negations_matches_differences(rng):
    W, x = rng.normal(size=(4, 6)), rng.normal(size=6)

    def f(x):
        u = (W @ x).reshape((2, 2))
        return (-(u * u).sin()).sum() + (x * x * 0.5).exp().sum()

    def f_np(x):
        u = (W @ x).reshape((2, 2))
        return float((-np.sin(u * u)).sum() + np.exp(x * x * 0.5).sum())
    np.testing.assert_allclose(sg.hessian(f)(x), _fd_hessian(f_np, x), rtol=1e-6, atol=1e-6)


def test_results_are_the_callers_own_arrays(rng):
    W = rng.normal(size=(5, 5))
    keep = W.copy()
    for got in (sg.jacobian(lambda x: W @ x, mode="fwd")(np.ones(5)),
                sg.jacobian(lambda x: x, mode="fwd")(np.ones(5)),
                sg.jacobian(lambda x: x.reshape((5,)), mode="fwd")(np.ones(5)),
                sg.hessian(lambda x: (W @ x).tanh().sum())(np.ones(5))):
        assert got.flags.writeable
        got[...] = 7.0          # writes nothing recorded, nor W, nor the shared basis
    np.testing.assert_array_equal(W, keep)
    np.testing.assert_array_equal(sg.jacobian(lambda x: x, mode="fwd")(np.ones(5)), np.eye(5))
    np.testing.assert_array_equal(identity(5, np.dtype(np.float64)), np.eye(5))


def test_the_shared_identity_is_read_only_and_large_ones_are_not_kept():
    eye = identity(7, np.dtype(np.float32))
    assert eye.dtype == np.float32 and not eye.flags.writeable
    assert identity(7, np.dtype(np.float32)) is eye
    big = identity(600, np.dtype(np.float64))       # 2.9 MB: made for the call
    assert big.flags.writeable and big is not identity(600, np.dtype(np.float64))
    np.testing.assert_array_equal(big, np.eye(600))


def _general(prim, inputs, attrs=None) -> Stack:
    """The primitive's batching rule on the stacks: what the general path runs."""
    flags = [type(x) is Stack for x in inputs]
    xs = [x.inner if f else x for x, f in zip(inputs, flags)]
    return Stack(prim.batch(STACKS, xs, flags, **(attrs or {})))


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "neg", "tanh", "exp"])
def test_elementwise_forms_equal_the_batching_rules(name, rng):
    prim = REGISTRY[name]
    s = Stack(rng.normal(size=(4, 3, 2)) + 3.0)
    others = [rng.normal(size=(3, 2)) + 3.0, rng.normal(size=2) + 3.0, 2.5, np.ones((3, 2)),
              np.broadcast_to(np.ones(1), (3, 2)), Stack(rng.normal(size=(4, 3, 2)) + 3.0)]
    cases = [(s,)] if len(prim.vjp) == 1 else \
        [c for p in others for c in ((s, p), (p, s))]
    for inputs in cases:
        got, want = STACKS.apply(prim, inputs), _general(prim, inputs)
        assert type(got) is Stack
        np.testing.assert_array_equal(got.inner, want.inner)


def test_reshapes_of_stacks_equal_the_batching_rule(rng):
    s = Stack(rng.normal(size=(4, 6)))
    for shape in [(2, 3), (6,), (3, 2, 1)]:
        got = STACKS.reshape(s, shape)
        want = _general(REGISTRY["reshape"], (s,), {"shape": shape})
        np.testing.assert_array_equal(got.inner, want.inner)
    eye = Stack.identity(4, np.dtype(np.float64))
    assert STACKS.reshape(eye, (4,)) is eye         # the identity basis still
    assert not STACKS.reshape(eye, (2, 2)).eye
