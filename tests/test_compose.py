"""Every transform nested inside every other, in argument and closure form.

An inner transform is applied to h(x, p) = sum(sin(p * x)) (or its elementwise form H), where
p is the outer transform's Variable: passed to the inner transform as an argument, or read
through a closure. Its result, summed to one number s(p), has a closed form in numpy. The
outer transform is then applied to s and compared with the same transform of the closed form
done by hand: central finite differences in float64 (step and tolerance below), or a loop over
the examples for vmap.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import simplegrad as sg

X0 = np.array([0.3, -0.7, 1.1])
V0 = np.array([0.5, 1.5, -1.0])
U0 = np.array([1.0, -2.0, 0.5])
XS = np.array([[0.3, -0.7, 1.1], [1.2, 0.4, -0.2]])
P0 = np.array([0.9, 1.3, -0.6])
PS = np.array([[0.9, 1.3, -0.6], [0.2, -1.1, 0.8]])
STEP = 1e-5          # central differences in float64: error ~ STEP^2 for s, ~ STEP for s''
TOL = 2e-6

# ---------------------------------------------------------------- the inner transforms


def h(x, p):
    """sum(sin(p x)): the scalar function every inner transform is applied to."""
    return (p * x).sin().sum()


def H(x, p):
    """sin(p x), elementwise: the vector function."""
    return (p * x).sin()


def total(r) -> object:
    """The sum of every leaf of an inner result (a Variable, an array or a tuple of them)."""
    if isinstance(r, (tuple, list)):
        return sum(total(x) for x in r)
    return r.sum() if isinstance(r, sg.Variable) else np.sum(r)


SIN_SUM = sg.custom_vjp(lambda x, q: (q * x).sin().sum())
SIN_SUM.defvjp(lambda g, out, x, q: (g * q * (q * x).cos(), g * x * (q * x).cos()))


def _custom_closure(p):
    """A custom_vjp of x alone whose forward and rule read p through a closure: the rule
    gives p's part through a second custom function of (x, p)."""
    return lambda x: SIN_SUM(x, p)


# each: (closure form s(p), argument form s(p), closed form in numpy s(p))
INNER: dict[str, tuple[Callable, Callable, Callable]] = {
    "grad": (
        lambda p: total(sg.grad(lambda x: h(x, p))(X0)),
        lambda p: total(sg.grad(h)(X0, p)),
        lambda p: np.sum(p * np.cos(p * X0))),
    "value_and_grad": (
        lambda p: total(sg.value_and_grad(lambda x: h(x, p))(X0)),
        lambda p: total(sg.value_and_grad(h)(X0, p)),
        lambda p: np.sum(np.sin(p * X0)) + np.sum(p * np.cos(p * X0))),
    "vjp": (
        lambda p: total(sg.vjp(lambda x: H(x, p), X0)[1](U0)),
        lambda p: total(sg.vjp(H, X0, p)[1](U0)[0]),
        lambda p: np.sum(U0 * p * np.cos(p * X0))),
    "jvp": (
        lambda p: total(sg.jvp(lambda x: h(x, p), (X0,), (V0,))),
        lambda p: total(sg.jvp(h, (X0, p), (V0, np.zeros(3)))),
        lambda p: np.sum(np.sin(p * X0)) + np.sum(p * np.cos(p * X0) * V0)),
    "jacobian": (
        lambda p: total(sg.jacobian(lambda x: H(x, p))(X0)),
        lambda p: total(sg.jacobian(H)(X0, p)),
        lambda p: np.sum(p * np.cos(p * X0))),
    "jacobian_fwd": (
        lambda p: total(sg.jacobian(lambda x: H(x, p), mode="fwd")(X0)),
        lambda p: total(sg.jacobian(H, mode="fwd")(X0, p)),
        lambda p: np.sum(p * np.cos(p * X0))),
    "hessian": (
        lambda p: total(sg.hessian(lambda x: h(x, p))(X0)),
        lambda p: total(sg.hessian(h)(X0, p)),
        lambda p: np.sum(-p ** 2 * np.sin(p * X0))),
    "hvp": (        # argument form: the Hessian in p itself, along V0
        lambda p: total(sg.hvp(lambda x: h(x, p), X0, V0)),
        lambda p: total(sg.hvp(lambda q: h(X0, q), p, V0)),
        None),
    "derivative": (  # second derivative along ones; argument form: in p itself
        lambda p: total(sg.derivative(lambda x: h(x, p), 2)(X0)),
        lambda p: total(sg.derivative(lambda q: h(X0, q), 2)(p)),
        None),
    "taylor": (      # [h, D1, D2] along V0; argument form: in p itself
        lambda p: total(sg.taylor(lambda x: h(x, p), X0, V0, 2)),
        lambda p: total(sg.taylor(lambda q: h(X0, q), p, V0, 2)),
        None),
    "vmap": (
        lambda p: total(sg.vmap(lambda x: h(x, p))(XS)),
        lambda p: total(sg.vmap(h, in_axes=(0, None))(XS, p)),
        lambda p: sum(np.sum(np.sin(p * x)) for x in XS)),
    "checkpoint": (
        lambda p: total(sg.checkpoint(lambda x: h(x, p))(X0)),
        lambda p: total(sg.checkpoint(h)(X0, p)),
        lambda p: np.sum(np.sin(p * X0))),
    "custom_vjp": (  # closure form: a rule that reads p through its own closure
        lambda p: total(_custom_closure(p)(X0)),
        lambda p: total(SIN_SUM(X0, p)),
        lambda p: np.sum(np.sin(p * X0))),
}

# the closed forms that differ between the closure and the argument form
CLOSED_ARGUMENT = {
    "hvp": lambda p: np.sum(-X0 ** 2 * np.sin(p * X0) * V0),
    "derivative": lambda p: np.sum(-X0 ** 2 * np.sin(p * X0)),
    "taylor": lambda p: (np.sum(np.sin(p * X0)) + np.sum(X0 * np.cos(p * X0) * V0)
                         + np.sum(-X0 ** 2 * np.sin(p * X0) * V0 ** 2)),
}
CLOSED_CLOSURE = {
    "hvp": lambda p: np.sum(-p ** 2 * np.sin(p * X0) * V0),
    "derivative": lambda p: np.sum(-p ** 2 * np.sin(p * X0)),
    "taylor": lambda p: (np.sum(np.sin(p * X0)) + np.sum(p * np.cos(p * X0) * V0)
                         + np.sum(-p ** 2 * np.sin(p * X0) * V0 ** 2)),
}


def closed(name: str, form: str) -> Callable:
    ref = INNER[name][2]
    if ref is not None:
        return ref
    return (CLOSED_CLOSURE if form == "closure" else CLOSED_ARGUMENT)[name]

# ---------------------------------------------------------------- the outer transforms


def fd_grad(s: Callable, p: np.ndarray) -> np.ndarray:
    e = np.eye(p.size)
    return np.array([(s(p + STEP * e[i]) - s(p - STEP * e[i])) / (2 * STEP)
                     for i in range(p.size)])


def fd_hessian(s: Callable, p: np.ndarray) -> np.ndarray:
    e, k = np.eye(p.size), 1e-4
    return np.array([(fd_grad(s, p + k * e[i]) - fd_grad(s, p - k * e[i])) / (2 * k)
                     for i in range(p.size)])


def fd_second(s: Callable, p: np.ndarray, v: np.ndarray) -> float:
    k = 1e-4
    return (s(p + k * v) - 2 * s(p) + s(p - k * v)) / k ** 2


ONES = np.ones(3)

# each: (the outer transform of s at P0, the same of the closed form by hand, tolerance)
OUTER: dict[str, tuple[Callable, Callable, float]] = {
    "grad": (lambda s: sg.grad(s)(P0), lambda r: fd_grad(r, P0), TOL),
    "value_and_grad": (lambda s: np.concatenate([np.ravel(a) for a in sg.value_and_grad(s)(P0)]),
                       lambda r: np.concatenate([[r(P0)], fd_grad(r, P0)]), TOL),
    "vjp": (lambda s: sg.vjp(s, P0)[1](np.float64(2.0))[0], lambda r: 2 * fd_grad(r, P0), TOL),
    "jvp": (lambda s: sg.jvp(s, (P0,), (V0,))[1], lambda r: fd_grad(r, P0) @ V0, TOL),
    "jacobian": (lambda s: sg.jacobian(s)(P0), lambda r: fd_grad(r, P0), TOL),
    "hessian": (lambda s: sg.hessian(s)(P0), lambda r: fd_hessian(r, P0), 1e-4),
    "hvp": (lambda s: sg.hvp(s, P0, V0), lambda r: fd_hessian(r, P0) @ V0, 1e-4),
    "derivative": (lambda s: sg.derivative(s, 1)(P0), lambda r: fd_grad(r, P0) @ ONES, TOL),
    "taylor": (lambda s: np.array(sg.taylor(s, P0, V0, 2), dtype=float),
               lambda r: np.array([r(P0), fd_grad(r, P0) @ V0, fd_second(r, P0, V0)]), 1e-4),
    "vmap": (lambda s: sg.vmap(s)(PS), lambda r: np.array([r(p) for p in PS]), 1e-12),
    "checkpoint": (lambda s: sg.grad(lambda p: sg.checkpoint(s)(p))(P0),
                   lambda r: fd_grad(r, P0), TOL),
}

# Taylor mode refuses a primitive without a Taylor rule, naming it (README, "Taylor mode");
# custom_vjp functions have one now (the series through their rule by nested jvps)
NO_TAYLOR_RULE: tuple[str, ...] = ()

CASES = [(outer, inner, form) for outer in OUTER for inner in INNER
         for form in ("closure", "argument")]


@pytest.mark.parametrize(("outer", "inner", "form"), CASES,
                         ids=[f"{o}({i})-{f}" for o, i, f in CASES])
def test_transform_inside_transform(outer, inner, form):
    s = INNER[inner][0 if form == "closure" else 1]
    apply, by_hand, tol = OUTER[outer]
    if outer == "taylor" and inner in NO_TAYLOR_RULE:
        with pytest.raises(sg.NotDifferentiableError, match="no Taylor rule"):
            apply(s)
        return
    got = np.asarray(apply(s), dtype=float)
    want = np.asarray(by_hand(closed(inner, form)), dtype=float)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("inner", list(INNER))
def test_inner_forms_match_their_closed_forms(inner):
    """The table's closed forms are right: each inner transform at top level, p an array."""
    for form, s in (("closure", INNER[inner][0]), ("argument", INNER[inner][1])):
        np.testing.assert_allclose(float(s(P0)), closed(inner, form)(P0), rtol=1e-12)


def test_three_levels_of_closure():
    """grad of vmap of grad, each reading the outer Variables through closures."""
    def outer(p):
        def per_row(x):
            return sg.grad(lambda q: (q * p * x).sin().sum())(np.ones(3)).sum()
        return sg.vmap(per_row)(XS).sum()

    def by_hand(p):
        return sum(np.sum(p * x * np.cos(p * x)) for x in XS)
    np.testing.assert_allclose(sg.grad(outer)(P0), fd_grad(by_hand, P0), rtol=TOL, atol=TOL)
