"""Elementwise primitives: arithmetic, transcendental functions, piecewise functions.

Each primitive states one derivative rule per input, ``d(o, g, out, x, y)``,
linear in ``g``. The vjp is that rule with broadcasting undone; the jvp is the
same rule applied to the tangents and summed. Piecewise rules (relu, abs,
maximum, minimum) weigh ``g`` by a mask computed with recorded comparisons
(``v8 = v3 > 0``): a mask is locally constant, so it is exact at every order,
and the recorded gradient stays valid at any input.

Structural zeros (see ``core.zero_masked``): ``where`` declares that the
untaken side of its cotangent is zero by construction; below it, each
elementwise vjp also zeroes its result there (``vjp_masked``), so ``sqrt`` or
``log`` at 0 on the untaken side contribute 0, not nan. Elsewhere IEEE results
stand: the gradient of ``sqrt`` at 0 is ``inf``. Forward mode needs nothing:
``where`` selects tangents.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError
from . import taylor as tr
from .core import (
    ANY,
    BINARY,
    NONZERO,
    POSITIVE,
    UNARY,
    Case,
    Primitive,
    Sampler,
    broadcast_to,
    elementwise_mask,
    is_constant,
    mask_down,
    pointwise,
    register,
    shape_of,
    unbroadcast,
    zero_masked,
)

if TYPE_CHECKING:
    from ..engine.variable import Variable


def _vjp_rule(rule: Callable | None, i: int, nin: int) -> Callable | None:
    if rule is None or nin == 1:
        return rule

    def vjp(o, g, out, *xs, **attrs):
        c = rule(o, g, out, *xs, **attrs)
        shape = xs[i].shape     # inputs that get cotangents are Variables or arrays
        return c if c.shape == shape else unbroadcast(o, c, shape)
    return vjp


def _masked_vjp_rule(rule: Callable | None, i: int, nin: int) -> Callable | None:
    """The vjp used below a ``where``: zero where the mask m holds, then unbroadcast."""
    if rule is None:
        return None

    def vjp(o, g, out, m, *xs, **attrs):
        c = zero_masked(o, rule(o, g, out, *xs, **attrs), m)
        return c if nin == 1 else unbroadcast(o, c, xs[i].shape)
    return vjp


def _jvp_rule(rules: Sequence[Callable | None]) -> Callable:
    def jvp(o, ts, out, *xs, **attrs):
        acc = None
        for rule, t in zip(rules, ts):
            if t is not None and rule is not None:
                c = rule(o, t, out, *xs, **attrs)
                acc = c if acc is None else o.add(acc, c)
        return None if acc is None else broadcast_to(o, acc, shape_of(out))
    return jvp


def elementwise(name: str, forward: Callable, fmt: str, d: Sequence[Callable | None],
                domain: Sampler | tuple = ANY, cases: Sequence[Case] | None = None,
                jvp: Callable | None = None, mask: Callable = elementwise_mask,
                mask_source: bool = False, masked: bool = True,
                taylor: Callable | None = None, numpy: str | None = None) -> Primitive:
    """Register an elementwise primitive from its forward and per-input derivative rules.

    A rule of None means no gradient flows to that input (a derivative that is zero
    everywhere it exists, or an input that is not differentiable).
    """
    nin = len(d)
    if cases is None:
        cases = UNARY if nin == 1 else BINARY
    if callable(domain):
        domain = (domain,) * nin
    prim = Primitive(
        name, forward, [_vjp_rule(r, i, nin) for i, r in enumerate(d)],
        jvp or _jvp_rule(d), fmt, cases, domain=domain, mask=mask, mask_source=mask_source,
        elementwise=True, batch=pointwise(name), taylor=taylor, numpy=numpy)
    if masked:
        prim.vjp_masked = tuple(_masked_vjp_rule(r, i, nin) for i, r in enumerate(d))
    return register(prim)

# ---------------------------------------------------------------- arithmetic

ADD = elementwise("add", np.add, "{0} + {1}", (
    lambda o, g, out, x, y: g,
    lambda o, g, out, x, y: g), taylor=tr.linear("add"), numpy="{0} + {1}")

SUB = elementwise("sub", np.subtract, "{0} - {1}", (
    lambda o, g, out, x, y: g,
    lambda o, g, out, x, y: o.neg(g)), taylor=tr.linear("sub"), numpy="{0} - {1}")

MUL = elementwise("mul", np.multiply, "{0} * {1}", (
    lambda o, g, out, x, y: o.mul(g, y),
    lambda o, g, out, x, y: o.mul(g, x)), taylor=tr.multilinear("mul"), numpy="{0} * {1}")

DIV = elementwise("div", np.divide, "{0} / {1}", (
    lambda o, g, out, x, y: o.div(g, y),
    lambda o, g, out, x, y: o.neg(o.mul(g, o.div(out, y)))),
    domain=(ANY, NONZERO), taylor=tr.div, numpy="{0} / {1}")

NEG = elementwise("neg", np.negative, "-{0}", (
    lambda o, g, out, x: o.neg(g),), taylor=tr.linear("neg"), numpy="-{0}")


def _pow_dx(o, g, out, x, y):
    """y x ** (y - 1), and 0 where y == 0 (x ** 0 is constant, even at x = 0, where the
    formula gives 0 * inf); the test is recorded unless y is a constant."""
    if is_constant(y):
        zero = np.equal(y, 0)
        if not zero.any():
            if np.all(np.equal(y, 2)):
                return o.mul(g, o.mul(x, 2))
            return o.mul(g, o.mul(y, o.pow(x, o.sub(y, 1))))
        if zero.ndim == 0:      # x ** 0 for a constant 0: the derivative is 0 everywhere
            return o.mul(g, 0.0)
    else:
        zero = o.equal(y, 0)
    return o.mul(g, o.where(zero, 0, o.mul(y, o.pow(x, o.sub(y, 1)))))


def _pow_dy(o, g, out, x, y):
    """x ** y log x, with log 1 in place of log 0: d/dy 0 ** y = 0 (for y > 0), not 0 * -inf."""
    if not is_constant(x) or np.any(np.equal(x, 0)):
        x = o.where(o.equal(x, 0), 1, x)
    return o.mul(g, o.mul(out, o.log(x)))


POW = elementwise("pow", np.power, "{0} ** {1}", (_pow_dx, _pow_dy), domain=(POSITIVE, ANY),
                  taylor=tr.power)

# ---------------------------------------------------------------- transcendental

EXP = elementwise("exp", np.exp, "{0}.exp()", (
    lambda o, g, out, x: o.mul(g, out),), taylor=tr.exp)

LOG = elementwise("log", np.log, "{0}.log()", (
    lambda o, g, out, x: o.div(g, x),), domain=POSITIVE, taylor=tr.log)

SQRT = elementwise("sqrt", np.sqrt, "{0}.sqrt()", (
    lambda o, g, out, x: o.div(g, o.mul(out, 2)),), domain=POSITIVE, taylor=tr.sqrt)

SIN = elementwise("sin", np.sin, "{0}.sin()", (
    lambda o, g, out, x: o.mul(g, o.cos(x)),), taylor=tr.sin)

COS = elementwise("cos", np.cos, "{0}.cos()", (
    lambda o, g, out, x: o.neg(o.mul(g, o.sin(x))),), taylor=tr.cos)

TANH = elementwise("tanh", np.tanh, "{0}.tanh()", (
    lambda o, g, out, x: o.mul(g, o.sub(1, o.mul(out, out))),), taylor=tr.tanh)


def _sigmoid(x: Any) -> Any:
    # exp of a non-positive number only, so large |x| never overflows
    e = np.exp(-np.abs(x))
    return np.where(np.greater_equal(x, 0), 1 / (1 + e), e / (1 + e))


SIGMOID = elementwise("sigmoid", _sigmoid, "{0}.sigmoid()", (
    lambda o, g, out, x: o.mul(g, o.mul(out, o.sub(1, out))),), taylor=tr.sigmoid)

# ---------------------------------------------------------------- piecewise


def _relu(x: Any) -> Any:
    return np.maximum(x, 0)


def _step(o: Any, x: Any) -> Any:
    """1 where x > 0, else 0, in x's dtype: recorded, so valid at any input."""
    return o.cast(o.greater(x, 0), x.dtype)


RELU = elementwise("relu", _relu, "{0}.relu()", (
    lambda o, g, out, x: o.mul(g, _step(o, x)),), domain=NONZERO, taylor=tr.linear("relu"),
    numpy="np.maximum({0}, 0)")

SIGN = elementwise("sign", np.sign, "{0}.sign()", (None,), taylor=tr.linear("sign"))

ABS = elementwise("abs", np.abs, "{0}.abs()", (
    lambda o, g, out, x: o.mul(g, o.sign(x)),), domain=NONZERO, taylor=tr.linear("abs"))


def _share(o: Any, x: Any, y: Any, sense: float) -> Any:
    """Weight of x in maximum (sense 1) or minimum (sense -1): 1 where it wins, 0.5 on a tie,
    0 where it loses; (sign(x - y) * sense + 1) / 2, recorded."""
    return o.mul(o.add(o.mul(o.sign(o.sub(x, y)), sense), 1), 0.5)


MAXIMUM = elementwise("maximum", np.maximum, "maximum({0}, {1})", (
    lambda o, g, out, x, y: o.mul(g, _share(o, x, y, 1.0)),
    lambda o, g, out, x, y: o.mul(g, _share(o, y, x, 1.0))), taylor=tr.linear("maximum"))

MINIMUM = elementwise("minimum", np.minimum, "minimum({0}, {1})", (
    lambda o, g, out, x, y: o.mul(g, _share(o, x, y, -1.0)),
    lambda o, g, out, x, y: o.mul(g, _share(o, y, x, -1.0))), taylor=tr.linear("minimum"))


def _where_mask(o, m, i, out, cond, x, y):
    """Input 1's cotangent is zero where cond is false, input 2's where it is true."""
    own = o.logical_not(cond) if i == 1 else cond
    if m is not None:
        own = o.logical_or(own, m)
    return mask_down(o, own, shape_of(out), shape_of((cond, x, y)[i]))


def _where_jvp(o, ts, out, cond, x, y):
    _, tx, ty = ts
    if tx is None and ty is None:
        return None
    return broadcast_to(o, o.where(cond, 0 if tx is None else tx, 0 if ty is None else ty),
                        shape_of(out))


WHERE = elementwise("where", np.where, "where({0}, {1}, {2})", (
    None,
    lambda o, g, out, cond, x, y: o.where(cond, g, 0),
    lambda o, g, out, cond, x, y: o.where(cond, 0, g)),
    cases=[Case(((3,), (3,), (3,)), conditions=(0,)),
           Case(((3, 4), (3, 1), (1, 4)), conditions=(0,)),
           Case(((2, 3, 4), (2, 3, 4), (3, 4)), conditions=(0,)),
           Case(((3,), (), (3,)), conditions=(0,)), Case(((3, 1), (3, 4), ()), conditions=(0,))],
    domain=(NONZERO, ANY, ANY),
    jvp=_where_jvp, mask=_where_mask, mask_source=True, masked=False, taylor=tr.linear("where"))


# ---------------------------------------------------------------- Ops methods

class ElementwiseOps:
    """The elementwise primitives as methods of an Ops."""

    def add(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x + y, with numpy broadcasting."""
        return self.apply(ADD, (x, y), None, name)

    def sub(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x - y, with numpy broadcasting."""
        return self.apply(SUB, (x, y), None, name)

    def mul(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x * y, with numpy broadcasting."""
        return self.apply(MUL, (x, y), None, name)

    def div(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x / y, with numpy broadcasting."""
        return self.apply(DIV, (x, y), None, name)

    def neg(self, x: Any, name: str | None = None) -> Variable:
        """-x."""
        return self.apply(NEG, (x,), None, name)

    def pow(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x ** y, with numpy broadcasting."""
        return self.apply(POW, (x, y), None, name)

    def exp(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise e ** x."""
        return self.apply(EXP, (x,), None, name)

    def log(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise natural logarithm."""
        return self.apply(LOG, (x,), None, name)

    def sqrt(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise square root."""
        return self.apply(SQRT, (x,), None, name)

    def sin(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise sine."""
        return self.apply(SIN, (x,), None, name)

    def cos(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise cosine."""
        return self.apply(COS, (x,), None, name)

    def tanh(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise hyperbolic tangent."""
        return self.apply(TANH, (x,), None, name)

    def sigmoid(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise logistic function 1 / (1 + e ** -x), stable for large |x|."""
        return self.apply(SIGMOID, (x,), None, name)

    def relu(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise max(x, 0); its derivative at 0 is 0."""
        return self.apply(RELU, (x,), None, name)

    def abs(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise |x|; its derivative at 0 is 0."""
        return self.apply(ABS, (x,), None, name)

    def maximum(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Elementwise maximum; a tie sends half the gradient to each side."""
        return self.apply(MAXIMUM, (x, y), None, name)

    def minimum(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Elementwise minimum; a tie sends half the gradient to each side."""
        return self.apply(MINIMUM, (x, y), None, name)

    def sign(self, x: Any, name: str | None = None) -> Variable:
        """Elementwise -1, 0 or 1; its derivative is 0."""
        return self.apply(SIGN, (x,), None, name)

    def where(self, cond: Any, x: Any, y: Any, name: str | None = None) -> Variable:
        """x where ``cond`` holds, else y; the untaken side gets exactly zero gradient.

        ``cond`` is a recorded bool entry (``x > 0``) or a constant bool array.
        """
        if is_constant(cond):
            cond = np.asarray(cond)
        if cond.dtype != bool:
            raise ArgumentError(f"where: the condition must be bool, not {cond.dtype} (compare, "
                                "as in x > 0)")
        return self.apply(WHERE, (cond, x, y), None, name)
