"""sg.compile prints matmul as the ``@`` operator where the shapes make the forward plain
``np.matmul``, and keeps the forward's call where it does not; values are checked against the
program (run entry by entry by the registry's forward rules) and against numpy by hand."""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg


@pytest.mark.parametrize(("xs", "ys", "operator"), [
    ((3,), (3,), True), ((2, 3), (3, 4), True), ((3,), (3, 4), True), ((2, 3), (3,), True),
    ((2, 1), (1, 4), False),           # length-1 contraction: the forward multiplies
    ((2, 2, 3), (3, 4), False),        # stacks keep the forward's call
])
def test_matmul_prints_as_operator_only_when_plain(xs, ys, operator, rng):
    op = sg.Ops()
    a, b = op.var(rng.normal(size=xs)), op.var(rng.normal(size=ys))
    prog = op.program([a, b], a @ b)
    fn = sg.compile(prog)
    assert ("    v2 = v0 @ v1  #" in fn.source) is operator, fn.source
    assert ("F['matmul'](v0, v1)" in fn.source) is not operator, fn.source
    x, y = rng.normal(size=xs), rng.normal(size=ys)
    np.testing.assert_array_equal(fn(x, y), prog(x, y))
    np.testing.assert_allclose(fn(x, y), np.matmul(x, y), rtol=1e-13)


def test_mlp_step_program_is_reusable_across_batches(rng):
    """The four-parameter one-hot MLP step as a compiled program with the data as inputs: a new
    batch gives numpy's hand-written loss and gradients."""
    X, Y = rng.normal(size=(8, 5)), np.eye(3)[rng.integers(0, 3, 8)]
    params = [rng.normal(size=(5, 4)), rng.normal(size=4), rng.normal(size=(4, 3)),
              rng.normal(size=3)]
    op = sg.Ops()
    ps = [op.var(p) for p in params]
    x, y = op.var(X, requires_grad=False), op.var(Y, requires_grad=False)
    loss = -(y * ((x @ ps[0] + ps[1]).tanh() @ ps[2] + ps[3]).log_softmax(axis=1)).sum() / 8
    fn = sg.compile(op.program(ps + [x, y], [loss, *op.grad(loss, ps)]))
    assert "F['matmul']" not in fn.source
    X2, Y2 = rng.normal(size=(8, 5)), np.eye(3)[rng.integers(0, 3, 8)]
    W1, b1, W2, b2 = params
    h = np.tanh(X2 @ W1 + b1)
    z = h @ W2 + b2
    e = np.exp(z - z.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    dz = (p * Y2.sum(axis=1, keepdims=True) - Y2) / 8
    da = (dz @ W2.T) * (1 - h * h)
    want = [-np.sum(Y2 * np.log(p)) / 8, X2.T @ da, da.sum(axis=0), h.T @ dz, dz.sum(axis=0)]
    for got, w in zip(fn(*params, X2, Y2), want):
        np.testing.assert_allclose(got, w, rtol=1e-10, atol=1e-14)
