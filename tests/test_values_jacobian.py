"""Jacobians and Hessians handed back as arrays run their batched forward sweep on values
(``batched_jvp_values``: each jvp rule on stacks of numpy values through the primitive's
batching rule, nothing recorded). Every registered primitive and case: the forward-mode
Jacobian equals reverse mode's rows (one vjp sweep per output entry), and the Hessian of a
weighted sum equals reverse over reverse; the identity basis' shortcut (a matrix times it is
the matrix) is exact, also where the product would spread an inf."""

from __future__ import annotations

import numpy as np
import pytest
from test_primitives import case_id, real_view, sample

import simplegrad as sg
from simplegrad.engine import batched
from simplegrad.primitives import REGISTRY
from simplegrad.transforms import jacobians


def _cases() -> list:
    return [pytest.param(prim, case, id=f"{prim.name}-{case_id(case)}")
            for prim in REGISTRY.values() if prim.differentiable for case in prim.cases]


def _function(prim: sg.Primitive, case: sg.Case):
    def f(*xs):
        op = next(x.ops for x in xs if isinstance(x, sg.Variable))
        args = [op.greater(x, 0) if i in case.conditions else x for i, x in enumerate(xs)]
        return op.apply(prim, args, case.attrs)
    return f


@pytest.mark.parametrize(("prim", "case"), _cases())
def test_forward_jacobian_on_values_equals_reverse_rows(prim, case, rng):
    f, args = real_view(_function(prim, case), sample(prim, case, rng))
    nums = tuple(i for i in range(len(args)) if i not in case.conditions)
    if not nums:
        pytest.skip("no differentiable input")
    fwd = sg.jacobian(f, argnums=nums, mode="fwd")(*args)
    rev = sg.jacobian(f, argnums=nums, mode="rev")(*args)
    for a, b in zip(sg.tree_leaves(fwd), sg.tree_leaves(rev)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)


@pytest.mark.filterwarnings("ignore::simplegrad.DisconnectedWarning")     # floor, sign, ...
@pytest.mark.parametrize(("prim", "case"), [p for p in _cases()
                                            if p.values[1] is p.values[0].cases[0]])
def test_hessian_on_values_equals_reverse_over_reverse(prim, case, rng):
    f, args = real_view(_function(prim, case), sample(prim, case, rng))
    i = next((i for i in range(len(args)) if i not in case.conditions), None)
    if i is None:
        pytest.skip("no differentiable input")
    op = sg.Ops()
    w = rng.normal(size=f(*[op.var(a) for a in args]).shape)

    def scalar(x):
        return (f(*args[:i], x, *args[i + 1:]) * w).sum()
    got = sg.hessian(scalar)(args[i])
    want = sg.jacrev(sg.grad(scalar))(args[i])
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)


def test_values_sweep_records_nothing_and_matches_the_recorded_one(rng):
    W, x0 = rng.normal(size=(6, 5)), rng.normal(size=5)
    op = sg.Ops()
    x = op.var(x0)
    y = ((W @ x).tanh() * x.sum()).exp()
    n = len(op.tape)
    basis = np.eye(5)
    got = [batched.batched_jvp_values(op, y, x, seed)
           for seed in (basis, batched.Stack.identity(5, basis.dtype))]
    assert len(op.tape) == n
    for g in got:
        np.testing.assert_allclose(g, batched.batched_jvp(op, y, x, basis).value, rtol=1e-13)


def test_matrix_times_identity_basis_is_the_matrix_exactly():
    W = np.array([[1.0, np.inf], [2.0, 3.0], [-1.0, 0.5]])
    jac = sg.jacobian(lambda x: W @ x, mode="fwd")(np.ones(2))
    np.testing.assert_array_equal(jac, W)       # numpy's I @ W^T would put nan beside the inf
    jac = sg.jacobian(lambda x: x @ W.T, mode="fwd")(np.ones(2))
    np.testing.assert_array_equal(jac, W)
    jac[0, 0] = 7.0                             # the caller's own array, not a view of W
    assert W[0, 0] == 1.0


def test_custom_primitives_take_the_recorded_sweep(rng, monkeypatch):
    seen = []

    def spy(*args, **kwargs):
        seen.append(batched_jvp_values(*args, **kwargs))
        return seen[-1]
    batched_jvp_values = batched.batched_jvp_values
    monkeypatch.setattr(jacobians, "batched_jvp_values", spy)

    @sg.custom_jvp
    def cube(x):
        return x * x * x

    @cube.defjvp
    def cube_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return cube(x), 3.0 * x * x * t
    x0 = rng.normal(size=4)
    np.testing.assert_allclose(sg.jacobian(lambda x: cube(x).sin(), mode="fwd")(x0),
                               np.diag(np.cos(x0 ** 3) * 3 * x0 ** 2), rtol=1e-12)
    assert seen == [None]       # the values sweep met the custom entry and handed over


def test_hessian_of_a_vector_output_on_values_equals_reverse_over_reverse(rng):
    W, x0 = rng.normal(size=(3, 4)), rng.normal(size=4)

    def f(x):
        return (W @ x).tanh() * x.sum()
    np.testing.assert_allclose(sg.hessian(f)(x0), sg.jacrev(sg.jacrev(f))(x0),
                               rtol=1e-10, atol=1e-12)
