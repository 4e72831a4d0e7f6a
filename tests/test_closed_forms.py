"""Derivatives of any order against closed forms, derived by hand.

Every derivative here is taken by repeated ``op.grad`` on the recorded
gradient of the previous order, so each order differentiates the program the
order before it recorded. Oracles are written out below; the hand-derived
tanh formulas are themselves checked against float64 central differences of
the formula one order lower (step 1e-5, atol 1e-8).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import simplegrad as sg

X = np.array([-1.3, -0.2, 0.4, 1.1])
RTOL = 1e-12    # the recorded programs are a few dozen float64 operations deep


def _tanh_derivatives(x: np.ndarray) -> list[np.ndarray]:
    """d^k/dx^k tanh(x) for k = 1..4, written with t = tanh(x)."""
    t = np.tanh(x)
    s = 1 - t * t                       # tanh' = 1 - t^2, and t' = s
    return [
        s,                                # 1 - t^2
        -2 * t * s,                       # -2t(1 - t^2)
        s * (6 * t * t - 2),              # -2(1 - t^2)^2 + 4t^2(1 - t^2)
        s * (16 * t - 24 * t ** 3),       # d/dx of -2 + 8t^2 - 6t^4
    ]


CLOSED_FORMS: dict[str, tuple[Callable, Callable]] = {
    # name: (apply to a Variable, the derivatives of orders 1..4)
    "exp": (lambda v: v.exp(), lambda x: [np.exp(x)] * 4),
    "sin": (lambda v: v.sin(), lambda x: [np.cos(x), -np.sin(x), -np.cos(x), np.sin(x)]),
    "tanh": (lambda v: v.tanh(), _tanh_derivatives),
}


@pytest.mark.parametrize("fn", list(CLOSED_FORMS))
def test_nth_derivative_by_repeated_grad(fn: str) -> None:
    """The k-th gradient of sum(f(x)) is f^(k)(x) elementwise, for k = 1..4."""
    apply, derivatives = CLOSED_FORMS[fn]
    op = sg.Ops()
    x = op.var(X)
    g = apply(x)
    for order, expected in enumerate(derivatives(X), start=1):
        g = op.grad(g.sum(), x)
        np.testing.assert_allclose(g.value, expected, rtol=RTOL, atol=1e-14,
                                   err_msg=f"{fn}: order {order}")


def test_tanh_hand_derivatives_agree_with_finite_differences() -> None:
    """Each hand formula is the central difference of the one before it (the oracle's own check)."""
    h = 1e-5
    orders = [np.tanh(X)] + _tanh_derivatives(X)
    up = [np.tanh(X + h)] + _tanh_derivatives(X + h)
    down = [np.tanh(X - h)] + _tanh_derivatives(X - h)
    for k in range(4):
        fd = (up[k] - down[k]) / (2 * h)
        np.testing.assert_allclose(fd, orders[k + 1], atol=1e-8, err_msg=f"order {k + 1}")


@pytest.mark.parametrize("A_kind", ["constant", "variable-no-grad"])
def test_hessian_of_quadratic_form(A_kind: str) -> None:
    """The Hessian of x^T A x, row by row from the gradient's entries, is A + A^T."""
    A = np.array([[1.0, 2.0, 0.0], [-1.0, 3.0, 4.0], [0.5, 0.0, -2.0]])
    op = sg.Ops()
    x = op.var([0.3, -0.7, 1.2])
    a = A if A_kind == "constant" else op.var(A, requires_grad=False)
    L = x @ (a @ x)
    g = op.grad(L, x)
    np.testing.assert_allclose(g.value, (A + A.T) @ x.value, rtol=RTOL)
    H = np.stack([op.grad(g[i], x).value for i in range(3)])
    np.testing.assert_allclose(H, A + A.T, rtol=RTOL, atol=1e-15)


# the seed program (002): its printed results, and the same values derived by hand
SEED_A = np.array([0.4605, 0.4061, 0.9422, 0.3946])
SEED_B = np.array([0.0850, 0.3296, 0.9888, 0.6494])
SEED_DA = np.array([1.2610, 2.1306, 5.8396, 3.3868])
SEED_DB = np.array([2.6920, 4.9204, 13.6568, 8.0724])


def test_seed_program_grad_of_grad() -> None:
    """L0 = sum((a+b)*b); L1 = |dL0/da|^2 + |dL0/db|^2; dL1/da and dL1/db as the seed prints."""
    op = sg.Ops()
    a = op.named_var(SEED_A, "a")
    b = op.var(SEED_B, name="b")
    l0 = op.sum(op.mul(op.add(a, b), b), name="L0")
    da, db = op.grad(l0, [a, b])
    # by hand: dL0/da = b, dL0/db = a + 2b
    np.testing.assert_allclose(da.value, SEED_B, rtol=RTOL)
    np.testing.assert_allclose(db.value, SEED_A + 2 * SEED_B, rtol=RTOL)
    l1 = op.sum(da * da + db * db, name="L1")
    np.testing.assert_allclose(l1.value, np.sum(SEED_B ** 2 + (SEED_A + 2 * SEED_B) ** 2),
                               rtol=RTOL)
    d2a, d2b = op.grad(l1, [a, b])
    # by hand: L1 = sum(b^2 + (a + 2b)^2), so dL1/da = 2(a + 2b), dL1/db = 2b + 4(a + 2b)
    hand_a = 2 * (SEED_A + 2 * SEED_B)
    hand_b = 4 * SEED_A + 10 * SEED_B
    np.testing.assert_allclose(d2a.value, hand_a, rtol=RTOL)
    np.testing.assert_allclose(d2b.value, hand_b, rtol=RTOL)
    assert a.grad is d2a and b.grad is d2b
    # the seed's printed four decimals
    np.testing.assert_allclose(a.grad.value, SEED_DA, atol=5e-5)
    np.testing.assert_allclose(b.grad.value, SEED_DB, atol=5e-5)


def test_third_order_mixed_partials() -> None:
    """For L = sum(a^2 b^3): d/db of d/da of L is 6ab^2 and one order more in b gives 12ab."""
    op = sg.Ops()
    a = op.var([0.5, -1.5, 2.0])
    b = op.var([1.2, 0.3, -0.8])
    L = (a ** 2 * b ** 3).sum()
    ga = op.grad(L, a)                        # 2ab^3
    gab = op.grad(ga.sum(), b)                # 6ab^2
    gabb = op.grad(gab.sum(), b)              # 12ab
    av, bv = a.value, b.value
    np.testing.assert_allclose(ga.value, 2 * av * bv ** 3, rtol=RTOL)
    np.testing.assert_allclose(gab.value, 6 * av * bv ** 2, rtol=RTOL)
    np.testing.assert_allclose(gabb.value, 12 * av * bv, rtol=RTOL)
