"""Well-defined programs whose naive gradients are NaN elsewhere get the mathematical answer.

Conventions (README, "Safe gradients"): the untaken side of ``where`` contributes exactly zero
even where its local derivative is infinite or undefined; the norm of a zero vector has
subgradient 0; logsumexp over an all -inf slice has gradient 0. IEEE results stay where the
mathematics itself is infinite (sqrt'(0) = inf). Each is checked at orders 1 and 2 against
hand-derived values.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import simplegrad as sg

X = np.array([0.0, 1.0, 4.0, -1.0])


@pytest.fixture(autouse=True)
def _quiet():
    # the forward values themselves may warn (sqrt(-1), log(0)); the gradients must not be nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


@pytest.mark.parametrize("name, first, second", [
    # d/dx sqrt(x) = 1 / (2 sqrt(x)), d2/dx2 = -1 / (4 x^(3/2)): finite derivative at 0 is inf
    ("sqrt", [0.0, 0.5, 0.25, 0.0], [0.0, -0.25, -1 / 32, 0.0]),
    # d/dx log(x) = 1 / x, d2/dx2 = -1 / x^2: the untaken value itself is -inf at 0
    ("log", [0.0, 1.0, 0.25, 0.0], [0.0, -1.0, -1 / 16, 0.0]),
])
def test_where_untaken_branch_is_zero_at_orders_1_and_2(name, first, second):
    op = sg.Ops()
    x = op.var(X)
    y = op.where(x.value > 0, getattr(op, name)(x), 0.0).sum()
    g = op.grad(y, x)
    np.testing.assert_array_equal(g.value, first)
    np.testing.assert_array_equal(op.grad(g.sum(), x).value, second)


def test_where_mask_survives_elementwise_chain_and_other_branch():
    # where(x > 0, 3 * sqrt(x) ** 3, x * 2): the untaken sides of both branches are masked
    op = sg.Ops()
    x = op.var(X)
    y = op.where(x.value > 0, op.sqrt(x) ** 3 * 3.0, x * 2.0).sum()
    g = op.grad(y, x)
    expected = np.where(X > 0, 4.5 * np.sqrt(np.maximum(X, 0)), 2.0)
    np.testing.assert_allclose(g.value, expected, rtol=1e-15)


def test_sqrt_at_zero_keeps_ieee_inf():
    op = sg.Ops()
    x = op.var(0.0)
    assert np.isinf(op.grad(op.sqrt(x), x).value)


def test_naive_overflow_stays_nan_not_silently_zero():
    # log(1 + exp(800)) overflows in the forward: its gradient must not become a silent 0
    op = sg.Ops()
    x = op.var(800.0)
    assert np.isnan(op.grad(op.log(1.0 + op.exp(x)), x).value)


def test_where_untaken_branch_in_value_only_sweep():
    op = sg.Ops()
    x = op.var(X)
    g = op.grad(op.where(x.value > 0, op.sqrt(x), 0.0).sum(), x, create_graph=False)
    np.testing.assert_array_equal(g.value, [0.0, 0.5, 0.25, 0.0])
    assert len(op.tape) == 3


def test_where_forward_mode_selects_tangents():
    op = sg.Ops()
    x = op.var(X)
    y = op.where(x.value > 0, op.sqrt(x), 0.0)
    t = op.jvp(y, x, np.ones(4))
    np.testing.assert_array_equal(t.value, [0.0, 0.5, 0.25, 0.0])


def test_norm_of_zero_vector_has_zero_subgradient_at_orders_1_and_2():
    op = sg.Ops()
    x = op.var(np.zeros(3))
    g = op.grad(op.norm(x), x)
    np.testing.assert_array_equal(g.value, np.zeros(3))
    h = op.grad(g.sum(), x)
    np.testing.assert_array_equal(h.value, np.zeros(3))


def test_logsumexp_all_minus_inf_has_zero_gradient_at_orders_1_and_2():
    op = sg.Ops()
    x = op.var(np.array([[-np.inf, -np.inf], [0.0, np.log(3.0)]]))
    y = op.logsumexp(x, axis=1)
    assert y.value[0] == -np.inf
    g = op.grad((y * np.array([1.0, 2.0])).sum(), x)    # the -inf row has cotangent 1
    # softmax of the finite row is [1/4, 3/4]; the -inf row gets exactly 0
    np.testing.assert_allclose(g.value, [[0.0, 0.0], [0.5, 1.5]], rtol=1e-15)
    h = op.grad(g[1, 0], x)
    # d/dx (2 p0) = 2 p0 (e0 - p)  ->  [2/4 * 3/4, -2/4 * 3/4] on the finite row
    np.testing.assert_allclose(h.value, [[0.0, 0.0], [0.375, -0.375]], rtol=1e-14)


# ---------------------------------------------------------------- masks through shape primitives
# f(x) = where(x > 0, sqrt(x) * x, 0) = x^(3/2) on x > 0: f' = 1.5 sqrt(x), f'' = 0.75 / sqrt(x)
# there, and 0 where the untaken branch is chosen (x <= 0), at 0 included. The condition is a
# recorded comparison and the mask machinery is value-independent, so the same recorded program
# serves every input. Each variant puts a shape primitive between the where and the sqrt.

def _f(x):
    return (x.sqrt() * x)


SHAPED = {
    "plain": lambda x: x.ops.where(x > 0, _f(x), 0.0),
    "reshape": lambda x: x.ops.where(x.reshape(2, 3) > 0, _f(x).reshape(2, 3), 0.0),
    "transpose": lambda x: x.ops.where(x.reshape(2, 3).T > 0, _f(x.reshape(2, 3)).T, 0.0),
    "slice": lambda x: x.ops.where(x[1:] > 0, _f(x)[1:], 0.0),
    "broadcast-condition": lambda x: x.ops.where(
        (x > 0).reshape(6, 1), _f(x).reshape(6, 1), np.zeros((6, 4))),
    "broadcast-branch": lambda x: x.ops.where(
        (x.reshape(6, 1) > 0).expand(6, 4), _f(x).reshape(6, 1), 0.0),
}


def _expected(xv: np.ndarray, variant: str) -> tuple[np.ndarray, np.ndarray]:
    pos = xv > 0
    safe = np.where(pos, xv, 1.0)
    first = np.where(pos, 1.5 * np.sqrt(safe), 0.0)
    second = np.where(pos, 0.75 / np.sqrt(safe), 0.0)
    weight = {"broadcast-condition": 4.0, "broadcast-branch": 4.0}.get(variant, 1.0)
    first, second = first * weight, second * weight
    if variant == "slice":
        first[0] = second[0] = 0.0
    return first, second


@pytest.mark.parametrize("values", [[0.0, 1.0, 4.0, -1.0, 0.25, 0.0],
                                    [0.0, 1.0, 0.0, 1.0, 9.0, 0.0],
                                    [0.0, -1.0, 2.0, 0.0, 0.0, 0.0]])
@pytest.mark.parametrize("variant", list(SHAPED))
def test_where_mask_survives_shape_primitives_at_orders_1_and_2(variant, values):
    xv = np.array(values)
    op = sg.Ops()
    x = op.var(xv)
    y = SHAPED[variant](x).sum()
    g = op.grad(y, x)
    h = op.grad(g.sum(), x)
    first, second = _expected(xv, variant)
    np.testing.assert_allclose(g.value, first, rtol=1e-14, atol=0)
    np.testing.assert_allclose(h.value, second, rtol=1e-14, atol=0)
    # value-only sweeps and forward mode agree
    np.testing.assert_allclose(op.grad(y, x, create_graph=False).value, first, rtol=1e-14)
    np.testing.assert_allclose(op.jvp(g, x, np.ones(6)).value, second, rtol=1e-14)


@pytest.mark.parametrize("variant", list(SHAPED))
def test_where_gradient_program_does_not_depend_on_the_values(variant):
    def lines(values):
        op = sg.Ops()
        x = op.var(np.array(values))
        g = op.grad(SHAPED[variant](x).sum(), x)
        op.grad(g.sum(), x)
        return op.format_trace().splitlines()[1:]     # all but x's value line
    assert lines([0.0, 1.0, 4.0, -1.0, 0.25, 0.0]) == lines([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])


def test_issue_case_second_derivative_at_zero_with_two_entries():
    # where(x > 0, sqrt(x) * x, 0) at x = [0, 1]: once nan at 0, now 0
    op = sg.Ops()
    x = op.var([0.0, 1.0])
    g = op.grad(op.where(x > 0, x.sqrt() * x, 0.0).sum(), x)
    np.testing.assert_array_equal(op.grad(g.sum(), x).value, [0.0, 0.75])


@pytest.mark.parametrize("cond", [True, np.bool_(True), np.array(True), np.array([True])])
def test_scalar_constant_conditions_stay_bool_and_differentiate(cond):
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    y = op.where(cond, x * x, 0.0).sum()
    np.testing.assert_array_equal(op.grad(y, x).value, [2.0, 4.0])
    h = op.grad(op.grad(y, x).sum(), x)
    np.testing.assert_array_equal(h.value, [2.0, 2.0])
