"""``jacobian(mode="auto")``: the cost model counts each sweep's work on its stacks as the
hand count says (diagonal stacks next to the seed cost a unit, dense ones an entry's size, a
matrix product of the diagonal one pass), walks the graph only where a pass over the Jacobian
would cost more than the walk, and the Jacobian it returns is the chosen mode's."""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.engine.tape import ancestors
from simplegrad.transforms import jacobians
from simplegrad.transforms.jacobians import WALK, WORK, prefers_forward

SIZES = [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (4, 2), (5, 2), (1, 200), (200, 1), (3, 3),
         (6, 3), (7, 3), (10, 1000), (1000, 10), (100, 100), (30, 5), (5, 30), (40, 20),
         (300, 300), (200, 400), (400, 200), (1000, 1000), (20, 5000), (5000, 20)]


def _recorded(n: int, m: int, rng: np.random.Generator):
    W = rng.normal(size=(m, n))
    op = sg.Ops()
    x = op.var(rng.normal(size=n))
    return x, (W @ x).tanh() * 2.0 + W @ x.sin()


def _walks(x, n: int, m: int) -> bool:
    return n * m * WORK >= (x.rec.tape.end - x.position) * WALK


def _by_hand(x, n: int, m: int) -> bool:
    """The decision for tanh(W x) * 2 + W sin(x), counted by hand. Forward, per tangent:
    W @ I is W (0), tanh m, * 2.0 m + 1, sin of I stays diagonal (1), W @ it one pass (m), the
    sum 2m. Reverse, per cotangent: the seed passes through + as it is (1) to W @ sin(x), whose
    W^T @ I is W (0, a dense cotangent for sin: n) and to * 2.0 (1), tanh (1) and W x (1),
    whose W^T @ diag is one pass (n), added to sin's (n)."""
    if not _walks(x, n, m):
        return n <= m
    fwd, rev = 5 * m + 2, 3 * n + 5
    return n * fwd < m * rev or n * fwd == m * rev and n <= m


@pytest.mark.parametrize("n, m", SIZES, ids=lambda v: str(v))
def test_the_decision_is_the_hand_count(n, m, rng, monkeypatch):
    x, y = _recorded(n, m, rng)
    walks = []
    monkeypatch.setattr(jacobians, "ancestors",
                        lambda *a, **k: walks.append(1) or ancestors(*a, **k))
    assert prefers_forward([x], [y]) == _by_hand(x, n, m)
    assert walks == ([1] if _walks(x, n, m) else [])
    if walks:
        entries = ancestors([y], start=x.position, stop={x.node})
        assert jacobians._stacked_work(entries, [x], [y], x.position) == (5 * m + 2, 3 * n + 5)


def test_a_hidden_layer_counts_as_by_hand(rng):
    n, h, m = 3, 50, 4
    A, B = rng.normal(size=(h, n)), rng.normal(size=(m, h))
    op = sg.Ops()
    x = op.var(rng.normal(size=n))
    y = B @ (A @ x).tanh()
    entries = ancestors([y], start=x.position, stop={x.node})
    # forward: A @ I is A (0), tanh h, B @ it m h + h; reverse: B^T @ I is B (1 for the
    # seed's entry), a dense cotangent through tanh (h) and A^T @ it (h n + n)
    assert jacobians._stacked_work(entries, [x], [y], x.position) == (h + m * h + h,
                                                                       1 + h + h * n + n)


def test_reductions_reshapes_and_several_inputs_count_dense(rng):
    op = sg.Ops()
    a, b = op.var(rng.normal(size=(3, 4))), op.var(rng.normal(size=5))
    y = (a * a).sum(axis=0)
    entries = ancestors([y], start=a.position, stop={a.node})
    # forward (a 2-D input: dense seeds): a * a reads 24, the sum 12; reverse: the seed's
    # entry (1) spreads it over a 3 x 4 value (dense: the sum's 12), a * a reads 24 and a's
    # two cotangents are added (12)
    assert jacobians._stacked_work(entries, [a], [y], a.position) == (24 + 12, 1 + 12 + 24 + 12)
    z = (b.reshape((5,)) * 3.0).exp()   # elementwise and reshaped: diagonal both ways
    entries = ancestors([z], start=b.position, stop={b.node})
    assert jacobians._stacked_work(entries, [b], [z], b.position) == (3, 3)
    ys = [y, b * 2.0]                   # several inputs and outputs: dense seeds throughout
    entries = ancestors(ys, start=a.position, stop={a.node, b.node})
    assert jacobians._stacked_work(entries, [a, b], ys, a.position) == (24 + 12 + 6,
                                                                         12 + 24 + 12 + 6)


def test_a_long_tape_of_small_values_decides_by_the_sizes(rng, monkeypatch):
    W, op = rng.normal(size=(10, 1000)), sg.Ops()
    x = op.var(rng.normal(size=1000))
    c = op.var(np.ones(3))
    for _ in range(200):        # entries recorded after x that y does not read
        c = c * 1.5
    y = (W @ x).tanh()

    def refuse(*args, **kwargs):
        raise AssertionError("the cost model walked the graph")
    monkeypatch.setattr(jacobians, "ancestors", refuse)
    assert prefers_forward([x], [y]) is False


@pytest.mark.parametrize("n, m", [(10, 60), (60, 10), (20, 20), (40, 1), (1, 40), (2, 2)],
                         ids=lambda v: str(v))
def test_auto_gives_the_chosen_modes_jacobian_exactly(n, m, rng):
    W, x0 = rng.normal(size=(m, n)) / np.sqrt(n), rng.normal(size=n)

    def f(x):
        return (W @ x).tanh() * 2.0 + W @ x.sin()
    closed = (2 * (1 - np.tanh(W @ x0) ** 2))[:, None] * W + W * np.cos(x0)[None, :]
    x, y = _recorded(n, m, rng)
    chosen = "fwd" if prefers_forward([x], [y]) else "rev"
    auto = sg.jacobian(f)(x0)
    np.testing.assert_array_equal(auto, sg.jacobian(f, mode=chosen)(x0))
    np.testing.assert_allclose(auto, closed, rtol=1e-12, atol=1e-14)
