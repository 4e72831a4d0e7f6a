"""``jacobian(mode="auto")``: the cost model decides as its formula says, walks the graph only
where the sizes leave the answer open, and the Jacobian it returns is the chosen mode's."""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.engine.tape import ancestors
from simplegrad.transforms import jacobians
from simplegrad.transforms.jacobians import (
    ENTRY_FWD,
    ENTRY_REV,
    WORK_FWD,
    WORK_REV,
    prefers_forward,
)

SIZES = [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (4, 2), (5, 2), (1, 200), (200, 1), (3, 3),
         (6, 3), (7, 3), (10, 1000), (1000, 10), (100, 100), (30, 5), (5, 30), (40, 20)]


def _model_by_hand(xs, ys) -> bool:
    """The documented model, written out: one walk, every entry's work summed."""
    n, m = sum(x.size for x in xs), sum(y.size for y in ys)
    entries = ancestors(list(ys), start=min(x.position for x in xs), stop=set(xs))
    work = sum(max(v.size, sum(getattr(a, "size", 1) for a in v.inputs)) for v in entries)
    return len(entries) * ENTRY_FWD + n * work * WORK_FWD < \
        len(entries) * ENTRY_REV + m * work * WORK_REV


def _recorded(n: int, m: int, rng: np.random.Generator):
    W = rng.normal(size=(m, n))
    op = sg.Ops()
    x = op.var(rng.normal(size=n))
    return x, (W @ x).tanh() * 2.0 + W @ x.sin()


@pytest.mark.parametrize("n, m", SIZES, ids=lambda v: str(v))
def test_the_decision_is_the_formula(n, m, rng):
    x, y = _recorded(n, m, rng)
    assert prefers_forward([x], [y]) == _model_by_hand([x], [y])


def test_reductions_and_several_outputs_decide_as_the_formula(rng):
    op = sg.Ops()
    a, b = op.var(rng.normal(size=(3, 4))), op.var(rng.normal(size=5))
    ys = [(a * a).sum(axis=0), a.sum() * b.exp(), b[:2] * 3.0]
    for xs in ([a], [b], [a, b]):
        assert prefers_forward(xs, ys) == _model_by_hand(xs, ys)
        assert prefers_forward(xs, ys[:1]) == _model_by_hand(xs, ys[:1])


@pytest.mark.parametrize("n, m", [(1, 3), (3, 3), (5, 30), (10, 1000), (100, 100), (1, 200),
                                  (1000, 1), (1000, 10)], ids=lambda v: str(v))
def test_where_the_sizes_decide_no_graph_is_walked(n, m, rng, monkeypatch):
    # forward when m WORK_REV >= n WORK_FWD whatever the graph (the forward sweep is the cheaper
    # per entry too); reverse for one wide input whose size outweighs every entry recorded
    # since it
    x, y = _recorded(n, m, rng)
    want = _model_by_hand([x], [y])

    def refuse(*args, **kwargs):
        raise AssertionError("the cost model walked the graph")
    monkeypatch.setattr(jacobians, "ancestors", refuse)
    assert ENTRY_REV >= ENTRY_FWD
    assert prefers_forward([x], [y]) == want == (m * WORK_REV >= n * WORK_FWD)


def test_a_wide_input_on_a_long_tape_walks_the_graph(rng, monkeypatch):
    W, op = rng.normal(size=(10, 1000)), sg.Ops()
    x = op.var(rng.normal(size=1000))
    c = op.var(np.ones(3))
    for _ in range(200):        # entries recorded after x that y does not read
        c = c * 1.5
    y = (W @ x).tanh()
    walks = []
    monkeypatch.setattr(jacobians, "ancestors",
                        lambda *a, **k: walks.append(1) or ancestors(*a, **k))
    assert prefers_forward([x], [y]) == _model_by_hand([x], [y]) is False
    assert walks == [1]


@pytest.mark.parametrize("n, m", [(6, 3), (30, 5), (2, 1), (200, 1)], ids=lambda v: str(v))
def test_where_the_sizes_leave_it_open_the_graph_decides(n, m, rng, monkeypatch):
    x, y = _recorded(n, m, rng)
    walks = []
    monkeypatch.setattr(jacobians, "ancestors",
                        lambda *a, **k: walks.append(1) or ancestors(*a, **k))
    assert prefers_forward([x], [y]) == _model_by_hand([x], [y])
    assert walks == [1]


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
