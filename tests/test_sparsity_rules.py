"""Every registered primitive's index-dependency rule against its dense Jacobian.

For every record and check case (the inputs of tests/test_primitives.py), at three random
draws: the rule's pattern of each input holds every nonzero of the dense Jacobian
(``sg.jacobian`` of the primitive in that input, the others held), an input it gives no
dependence has a zero Jacobian, and where the rule is exact and the primitive has no mask
(smooth: a Jacobian entry nonzero somewhere is nonzero at a random point) the pattern is the
union of the nonzeros. Nothing here names a primitive but the conservative list.
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.primitives import REGISTRY
from simplegrad.primitives.sparsity_rules import DENSE_BLOCK, RULES, rule_for
from tests.test_primitives import apply_with, case_id, real_view, sample

DRAWS = 3


def _params() -> list:
    return [pytest.param(prim, case, id=f"{prim.name}-{case_id(case)}")
            for prim in sg.REGISTRY.values() for case in prim.cases]


def _inputs(prim: sg.Primitive, case: sg.Case, rng: np.random.Generator) -> list:
    xs = sample(prim, case, rng)
    return [x > 0 if i in case.conditions else x for i, x in enumerate(xs)]


def _pattern(dep: tuple | None, out_size: int, in_size: int) -> np.ndarray:
    p = np.zeros((out_size, in_size), bool)
    if dep is not None:
        rows, cols = dep
        assert rows.shape == cols.shape
        assert rows.size == 0 or (rows.min() >= 0 and rows.max() < out_size and
                                  cols.min() >= 0 and cols.max() < in_size)
        p[rows, cols] = True
    return p


@pytest.mark.parametrize(("prim", "case"), _params())
def test_rule_holds_the_jacobian(prim: sg.Primitive, case: sg.Case,
                                 rng: np.random.Generator) -> None:
    rule = rule_for(prim)
    seen: dict[int, np.ndarray] = {}
    patterns: dict[int, np.ndarray] = {}
    for _ in range(DRAWS):
        xs = _inputs(prim, case, rng)
        out = np.asarray(prim.forward(*xs, **case.attrs))
        deps = rule(prim, xs, out.shape, case.attrs)
        assert len(deps) == len(xs)
        for i, (x, dep) in enumerate(zip(xs, deps)):
            if x.dtype == bool:
                assert dep is None, f"input {i} is a mask: no dependence"
                continue
            pattern = _pattern(dep, out.size, x.size)
            assert patterns.setdefault(i, pattern).shape == pattern.shape
            patterns[i] = patterns[i] | pattern
            if not prim.differentiable:
                assert dep is None
                continue
            f, (part,) = real_view(apply_with(prim, case, xs, (i,)), [x])
            jac = np.asarray(sg.jacobian(f)(part), dtype=float)     # complex: (re, im) pairs
            p_out, p_in = (2 if np.iscomplexobj(a) else 1 for a in (out, x))
            nonzero = (jac.reshape(out.size, p_out, x.size, p_in) != 0).any(axis=(1, 3))
            missing = nonzero & ~pattern
            assert not missing.any(), (
                f"{prim.name} input {i}: the rule {rule!r} misses {np.argwhere(missing)[:5]}")
            seen[i] = seen.get(i, np.zeros_like(nonzero)) | nonzero
    if rule.exact and prim.mask is None:
        for i, nonzero in seen.items():
            np.testing.assert_array_equal(patterns[i], nonzero,
                                          err_msg=f"{prim.name} input {i}: not exact")


def test_every_primitive_has_a_rule_of_its_kind() -> None:
    """A record is named in the table, or elementwise, or not differentiable: the dense rule
    (every output on every input) is for primitives made outside the registry."""
    for prim in sg.REGISTRY.values():
        assert prim.name in RULES or prim.elementwise or not prim.differentiable, prim.name
    assert set(DENSE_BLOCK) <= set(RULES)
    bare = sg.Primitive("bare", np.sin, [lambda o, g, out, x: g], None, "bare({0})", [])
    deps = rule_for(bare)(bare, [np.ones(3)], (2,), {})
    np.testing.assert_array_equal(_pattern(deps[0], 2, 3), np.ones((2, 3), bool))


def test_a_scatter_with_repeated_indices_keeps_every_source() -> None:
    prim = sg.REGISTRY["scatter_add"]
    attrs = {"indices": ((np.array([1, 1, 0]),),), "shape": (2,)}
    deps = rule_for(prim)(prim, [np.ones(3)], (2,), attrs)
    np.testing.assert_array_equal(_pattern(deps[0], 2, 3), [[0, 0, 1], [1, 1, 0]])


@pytest.mark.parametrize(("prim", "case"), [p for p in _params()
                                            if rule_for(p.values[0]).constants])
def test_a_constant_factors_zeros_leave_entries_out(prim: sg.Primitive, case: sg.Case,
                                                    rng: np.random.Generator) -> None:
    """With the other input a constant holding zeros, the pattern is the Jacobian's nonzeros
    exactly (a product is linear in each input: its coefficients are the constant's)."""
    rule = rule_for(prim)
    for i in range(len(case.shapes)):
        xs = _inputs(prim, case, rng)
        fixed = [j != i for j in range(len(xs))]
        xs = [x * (rng.random(x.shape) < 0.5) if f else x for x, f in zip(xs, fixed)]
        out = np.asarray(prim.forward(*xs, **case.attrs))
        dep = rule(prim, xs, out.shape, case.attrs, fixed=fixed)[i]
        jac = np.asarray(sg.jacobian(apply_with(prim, case, xs, (i,)))(xs[i]), dtype=float)
        np.testing.assert_array_equal(_pattern(dep, out.size, xs[i].size),
                                      jac.reshape(out.size, xs[i].size) != 0)


def test_each_rule_sits_on_its_record():
    # a fact about a primitive goes on its record: rule_for reads prim.sparsity
    for name, rule in RULES.items():
        assert REGISTRY[name].sparsity is rule, name
    assert rule_for(REGISTRY["matmul"]) is REGISTRY["matmul"].sparsity
