"""Every registered primitive's batching rule against a Python loop over the examples.

Nothing here names an operation (except the explicit loop-fallback set): a primitive added to
``sg.REGISTRY`` with its cases is picked up as it is. For each case, B = 3 examples are drawn
per batched input (shared inputs are drawn once); the batched result, recorded on an Ops
through ``Ops.apply`` with Batched inputs, must equal the stack of the per-example forwards
to 1e-10 (exactly for bool and integer outputs), and with every input batched the gradient of
the recorded batched program must equal each example's gradient (1e-9). A second test runs
every case under two nested levels.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.engine.batching import Batched, wrap
from tests.test_primitives import case_id, samplers

B = 3

# primitives without a batching rule: batching.loop applies them once per example and stacks
LOOP_FALLBACK = {
}


def _subsets(n: int) -> list[tuple[bool, ...]]:
    """Every non-empty subset of the inputs batched (up to three inputs; beyond, all, the first
    only and the last only)."""
    if n <= 3:
        return [flags for flags in itertools.product((True, False), repeat=n) if any(flags)]
    return [(True,) * n, (True,) + (False,) * (n - 1), (False,) * (n - 1) + (True,)]


def _params() -> list:
    params = []
    for prim in sg.REGISTRY.values():
        for case in prim.cases:
            for flags in _subsets(len(case.shapes)):
                tag = "".join("b" if f else "s" for f in flags)
                params.append(pytest.param(prim, case, flags,
                                           id=f"{prim.name}-{case_id(case)}-{tag}"))
    return params


@pytest.mark.parametrize(("prim", "case", "flags"), _params())
def test_batching_rule_matches_a_loop(prim: sg.Primitive, case: sg.Case, flags: tuple,
                                      rng: np.random.Generator) -> None:
    draws = samplers(prim, case)
    values = []
    for draw, shape, batched in zip(draws, case.shapes, flags):
        if batched:
            v = np.stack([np.asarray(draw(rng, shape), dtype=np.float64) for _ in range(B)])
        else:
            v = np.asarray(draw(rng, shape), dtype=np.float64)
        values.append(v)
    values = [v > 0 if i in case.conditions else v for i, v in enumerate(values)]

    def example(k: int) -> list:
        return [v[k] if b else v for v, b in zip(values, flags)]
    expected = np.stack([np.asarray(prim.forward(*example(k), **case.attrs)) for k in range(B)])

    op = sg.Ops()
    level = 10**6      # above any vmap level this process reaches
    inputs = []
    for v, b in zip(values, flags):
        x = op.var(v) if v.dtype != bool else op.greater(op.var(v.astype(float)), 0.5)
        inputs.append(wrap(x, level) if b else x)
    out = op.apply(prim, inputs, case.attrs)
    assert type(out) is Batched and out.level == level
    got = out.inner.value
    assert got.shape == expected.shape, f"{prim.name}: {got.shape} != {expected.shape}"
    assert out.shape == expected.shape[1:]
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(got, expected)
        return
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
    if not (prim.differentiable and all(flags)):
        return
    # the batched program is recorded: its gradient is every example's gradient, stacked
    w = rng.normal(size=got.shape)
    floats = [x.inner for x in inputs if x.dtype.kind == "f"]
    grads = op.grad(op.sum(op.mul(out.inner, w)), floats)
    for k in range(B):
        per = [op.var(v[k]) if v.dtype != bool else v[k] for v in values]
        y = op.apply(prim, [op.greater(op.var(p.astype(float)), 0.5) if p.dtype == bool else p
                            for p in per], case.attrs)
        want = op.grad(op.sum(op.mul(y, w[k])), [p for p in per if p.dtype.kind == "f"])
        for g, gk in zip(grads, want):
            np.testing.assert_allclose(g.value[k], gk.value, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("prim", list(sg.REGISTRY.values()), ids=list(sg.REGISTRY))
def test_every_primitive_has_a_batching_rule(prim: sg.Primitive) -> None:
    if prim.name in LOOP_FALLBACK:
        assert prim.batch is None, f"{prim.name} has a rule now: drop it from LOOP_FALLBACK"
    else:
        assert callable(prim.batch), f"{prim.name} has no batching rule (batch=...)"


def _nested_params() -> list:
    return [pytest.param(prim, case, id=f"{prim.name}-{case_id(case)}")
            for prim in sg.REGISTRY.values() for case in prim.cases]


@pytest.mark.parametrize(("prim", "case"), _nested_params())
def test_batching_rule_under_two_levels(prim: sg.Primitive, case: sg.Case,
                                        rng: np.random.Generator) -> None:
    """Two vmaps: the rule at the inner level calls primitives on the outer level's Batched
    values, which batch again; the first input is batched at both levels, the rest at the
    outer one only."""
    outer, inner = 2, 3
    draws = samplers(prim, case)
    values = []
    for i, (draw, shape) in enumerate(zip(draws, case.shapes)):
        lead = (outer, inner) if i == 0 else (outer,)
        v = np.array([np.asarray(draw(rng, shape), dtype=np.float64)
                      for _ in range(int(np.prod(lead)))]).reshape(lead + shape)
        values.append(v > 0 if i in case.conditions else v)
    expected = np.array([[np.asarray(prim.forward(values[0][a, b], *[v[a] for v in values[1:]],
                                                  **case.attrs))
                          for b in range(inner)] for a in range(outer)])
    op = sg.Ops()
    low, high = 10**6, 10**6 + 1
    inputs = []
    for i, v in enumerate(values):
        x = op.var(v) if v.dtype != bool else op.greater(op.var(v.astype(float)), 0.5)
        x = wrap(x, low)
        inputs.append(wrap(x, high) if i == 0 else x)
    out = op.apply(prim, inputs, case.attrs)
    assert type(out) is Batched and out.level == high and type(out.inner) is Batched
    got = out.inner.inner.value
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
