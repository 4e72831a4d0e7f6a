"""Elementwise primitives: arithmetic, transcendental functions, piecewise functions.

Each primitive states one derivative rule per input, ``d(o, g, out, x, y)``,
linear in ``g``. The vjp is that rule with broadcasting undone; the jvp is the
same rule applied to the tangents and summed. Piecewise rules (relu, abs,
maximum, minimum) multiply by a constant mask computed from the values: a mask
is locally constant, so it is exact at every order.

Structural zeros: ``where`` declares which entries of its inputs' cotangents are
zero by construction (the untaken side). The reverse sweep carries that mask
down through elementwise entries of the same shape (``o._zero_mask``), and their
masked vjps (``Primitive.vjp_masked``, used only there) keep those entries
exactly zero, even where the local derivative is infinite or undefined
(``sqrt`` or ``log`` at 0 on the untaken side). Where the cotangent is not
structurally zero, IEEE results stand: the gradient of ``sqrt`` at 0 is
``inf``. Forward mode needs nothing: ``where`` selects tangents.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..variable import Variable
from .core import (
    ANY,
    NONZERO,
    POSITIVE,
    Case,
    Primitive,
    Sampler,
    as_weight,
    broadcast_to,
    register,
    shape_of,
    unbroadcast,
    uniform,
    value_of,
    zero_masked,
)

UNARY = [Case(((),)), Case(((3,),)), Case(((3, 1),)), Case(((2, 3, 4),))]
BINARY = [Case(((), ())), Case(((3,), (3,))), Case(((3, 1), (1, 4))),
          Case(((2, 3, 4), (3, 4))), Case(((), (3,)))]


def _vjp_rule(rule: Callable, i: int, nin: int) -> Callable:
    if nin == 1:
        return rule

    def vjp(o, g, out, *xs, **attrs):
        c = rule(o, g, out, *xs, **attrs)
        shape = xs[i].shape     # inputs that get cotangents are Variables or arrays
        return c if c.shape == shape else unbroadcast(o, c, shape)
    return vjp


def _masked_vjp_rule(rule: Callable, i: int, nin: int) -> Callable:
    """The vjp used below a ``where``: zero where ``o._zero_mask`` holds, then unbroadcast."""
    def vjp(o, g, out, *xs, **attrs):
        c = zero_masked(o, rule(o, g, out, *xs, **attrs), o._zero_mask)
        return c if nin == 1 else unbroadcast(o, c, xs[i].shape)
    return vjp


def _jvp_rule(rules: Sequence[Callable]) -> Callable:
    def jvp(o, ts, out, *xs, **attrs):
        acc = None
        for rule, t in zip(rules, ts):
            if t is not None:
                c = rule(o, t, out, *xs, **attrs)
                acc = c if acc is None else o.add(acc, c)
        return None if acc is None else broadcast_to(o, acc, shape_of(out))
    return jvp


def elementwise(name: str, forward: Callable, fmt: str, d: Sequence[Callable],
                domain: Sampler | tuple = ANY, cases: Sequence[Case] | None = None,
                plain: bool = True, zero_masks: Callable | None = None) -> Primitive:
    """Register an elementwise primitive from its forward and per-input derivative rules."""
    nin = len(d)
    if cases is None:
        cases = UNARY if nin == 1 else BINARY
    if callable(domain):
        domain = (domain,) * nin
    prim = Primitive(
        name, forward, [_vjp_rule(r, i, nin) for i, r in enumerate(d)], _jvp_rule(d),
        fmt, cases, domain=domain, plain=plain, zero_masks=zero_masks, elementwise=True)
    prim.vjp_masked = tuple(_masked_vjp_rule(r, i, nin) for i, r in enumerate(d))
    return register(prim)

# ---------------------------------------------------------------- arithmetic

ADD = elementwise("add", np.add, "{0} + {1}", (
    lambda o, g, out, x, y: g,
    lambda o, g, out, x, y: g))

SUB = elementwise("sub", np.subtract, "{0} - {1}", (
    lambda o, g, out, x, y: g,
    lambda o, g, out, x, y: o.neg(g)))

MUL = elementwise("mul", np.multiply, "{0} * {1}", (
    lambda o, g, out, x, y: o.mul(g, y),
    lambda o, g, out, x, y: o.mul(g, x)))

DIV = elementwise("div", np.divide, "{0} / {1}", (
    lambda o, g, out, x, y: o.div(g, y),
    lambda o, g, out, x, y: o.neg(o.mul(g, o.div(out, y)))),
    domain=(ANY, NONZERO))

NEG = elementwise("neg", np.negative, "-{0}", (
    lambda o, g, out, x: o.neg(g),))


def _pow_dx(o, g, out, x, y):
    if not isinstance(y, Variable) and np.all(value_of(y) == 2):
        return o.mul(g, o.mul(x, 2))
    return o.mul(g, o.mul(y, o.pow(x, o.sub(y, 1))))


POW = elementwise("pow", np.power, "{0} ** {1}", (
    _pow_dx,
    lambda o, g, out, x, y: o.mul(g, o.mul(out, o.log(x)))),
    domain=(POSITIVE, ANY))

# ---------------------------------------------------------------- transcendental

EXP = elementwise("exp", np.exp, "{0}.exp()", (
    lambda o, g, out, x: o.mul(g, out),))

LOG = elementwise("log", np.log, "{0}.log()", (
    lambda o, g, out, x: o.div(g, x),), domain=POSITIVE)

SQRT = elementwise("sqrt", np.sqrt, "{0}.sqrt()", (
    lambda o, g, out, x: o.div(g, o.mul(out, 2)),), domain=POSITIVE)

SIN = elementwise("sin", np.sin, "{0}.sin()", (
    lambda o, g, out, x: o.mul(g, o.cos(x)),))

COS = elementwise("cos", np.cos, "{0}.cos()", (
    lambda o, g, out, x: o.neg(o.mul(g, o.sin(x))),))

TANH = elementwise("tanh", np.tanh, "{0}.tanh()", (
    lambda o, g, out, x: o.mul(g, o.sub(1, o.mul(out, out))),))


def _sigmoid(x: Any) -> Any:
    # exp of a non-positive number only, so large |x| never overflows
    e = np.exp(-np.abs(x))
    return np.where(np.greater_equal(x, 0), 1 / (1 + e), e / (1 + e))


SIGMOID = elementwise("sigmoid", _sigmoid, "{0}.sigmoid()", (
    lambda o, g, out, x: o.mul(g, o.mul(out, o.sub(1, out))),))

# ---------------------------------------------------------------- piecewise


def _relu(x: Any) -> Any:
    return np.maximum(x, 0)


RELU = elementwise("relu", _relu, "{0}.relu()", (
    lambda o, g, out, x: o.mul(g, as_weight(value_of(x) > 0, x)),), domain=NONZERO)

ABS = elementwise("abs", np.abs, "{0}.abs()", (
    lambda o, g, out, x: o.mul(g, as_weight(np.sign(value_of(x)), x)),), domain=NONZERO)


def _share(x: Any, y: Any, wins: Callable) -> np.ndarray:
    """Weight of x in maximum/minimum: 1 where it wins, 0.5 on a tie, 0 where it loses."""
    xv, yv = value_of(x), value_of(y)
    return wins(xv, yv) + 0.5 * np.equal(xv, yv)


MAXIMUM = elementwise("maximum", np.maximum, "maximum({0}, {1})", (
    lambda o, g, out, x, y: o.mul(g, as_weight(_share(x, y, np.greater), out)),
    lambda o, g, out, x, y: o.mul(g, as_weight(_share(y, x, np.greater), out))))

MINIMUM = elementwise("minimum", np.minimum, "minimum({0}, {1})", (
    lambda o, g, out, x, y: o.mul(g, as_weight(_share(x, y, np.less), out)),
    lambda o, g, out, x, y: o.mul(g, as_weight(_share(y, x, np.less), out))))


def _where(x: Any, y: Any, cond: np.ndarray) -> Any:
    return np.where(cond, x, y)


_COND = {(3,): np.array([True, False, True]), (3, 4): np.arange(12).reshape(3, 4) % 3 == 0,
         (2, 3, 4): np.arange(24).reshape(2, 3, 4) % 2 == 0}

WHERE = elementwise("where", _where, "where({cond}, {0}, {1})", (
    lambda o, g, out, x, y, cond: o.where(cond, g, 0),
    lambda o, g, out, x, y, cond: o.where(cond, 0, g)),
    cases=[Case(((3,), (3,)), {"cond": _COND[(3,)]}),
           Case(((3, 1), (1, 4)), {"cond": _COND[(3, 4)]}),
           Case(((2, 3, 4), (3, 4)), {"cond": _COND[(2, 3, 4)]}),
           Case(((), (3,)), {"cond": _COND[(3,)]})],
    domain=uniform(-2.0, 2.0), plain=False,
    zero_masks=lambda attrs, i: np.logical_not(attrs["cond"]) if i == 0 else attrs["cond"])


# ---------------------------------------------------------------- Ops methods

class ElementwiseOps:
    """The elementwise primitives as methods of an Ops."""

    def add(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x + y, with numpy broadcasting."""
        return self._apply(ADD, (x, y), None, name)

    def sub(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x - y, with numpy broadcasting."""
        return self._apply(SUB, (x, y), None, name)

    def mul(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x * y, with numpy broadcasting."""
        return self._apply(MUL, (x, y), None, name)

    def div(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x / y, with numpy broadcasting."""
        return self._apply(DIV, (x, y), None, name)

    def neg(self, x: Any, name: str | None = None) -> Variable:
        """-x."""
        return self._apply(NEG, (x,), None, name)

    def pow(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x ** y, with numpy broadcasting."""
        return self._apply(POW, (x, y), None, name)

    def exp(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise e ** x."""
        return self._apply(EXP, (x,), None, name)

    def log(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise natural logarithm."""
        return self._apply(LOG, (x,), None, name)

    def sqrt(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise square root."""
        return self._apply(SQRT, (x,), None, name)

    def sin(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise sine."""
        return self._apply(SIN, (x,), None, name)

    def cos(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise cosine."""
        return self._apply(COS, (x,), None, name)

    def tanh(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise hyperbolic tangent."""
        return self._apply(TANH, (x,), None, name)

    def sigmoid(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise logistic function 1 / (1 + e ** -x), stable for large |x|."""
        return self._apply(SIGMOID, (x,), None, name)

    def relu(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise max(x, 0); its derivative at 0 is 0."""
        return self._apply(RELU, (x,), None, name)

    def abs(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise |x|; its derivative at 0 is 0."""
        return self._apply(ABS, (x,), None, name)

    def maximum(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Elementwise maximum; a tie sends half the gradient to each side."""
        return self._apply(MAXIMUM, (x, y), None, name)

    def minimum(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Elementwise minimum; a tie sends half the gradient to each side."""
        return self._apply(MINIMUM, (x, y), None, name)

    def where(self, cond: Any, x: Any, y: Any, name: str | None = None) -> Variable:
        """x where the constant bool ``cond`` holds, else y; the untaken side gets zero gradient."""
        return self._apply(WHERE, (x, y), {"cond": self._condition(cond)}, name)
