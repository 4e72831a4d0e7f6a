"""Elementwise primitives: the ``elementwise`` builder, arithmetic, transcendental functions
(piecewise functions and ``where``: piecewise.py; more functions: unary.py, binary.py).

Each primitive states one derivative rule per input, ``d(o, g, out, x, y)``,
linear in ``g``. The vjp is that rule with broadcasting undone; the jvp is the
same rule applied to the tangents and summed (core.py, broadcasting in rules).

Structural zeros (see ``core.zero_masked``): ``where`` declares that the
untaken side of its cotangent is zero by construction; below it, each
elementwise vjp also zeroes its result there (``vjp_masked``), so ``sqrt`` or
``log`` at 0 on the untaken side contribute 0, not nan. Elsewhere IEEE results
stand: the gradient of ``sqrt`` at 0 is ``inf``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .core import (
    ANY,
    BINARY,
    EACH_ALONE,
    FUSED_SIZE,
    JOINT,
    JOINTLY,
    NONZERO,
    POSITIVE,
    UNARY,
    Case,
    FusedVjpRule,
    JvpRule,
    Linear,
    MaskRule,
    Primitive,
    PrintRule,
    Sampler,
    SymPyForm,
    TaylorRule,
    Unit,
    VjpRule,
    broadcast_to,
    broadcast_vjp,
    elementwise_mask,
    is_constant,
    masked_vjp,
    pointwise,
    read_only,
    register,
    shape_of,
    summed_jvp,
    sympy_call,
    unit_cotangent,
)
from .rewrites import involution, is_number, number_beside, operand_key, unit_side
from .schema import Schema, attrs
from .series import (
    Series,
    div_series,
    exp_series,
    minus,
    new,
    ode,
    plus,
    quotient_series,
    riccati_series,
    sin_cos_series,
    sqrt_series,
    square_coef,
    whole_power,
)
from .shape_rules import ufunc
from .taylor import linear, multilinear, order_of

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

SMALL_POWERS = 8        # x ** p for a whole p <= this (or <= the order): series products


def elementwise(name: str, forward: Callable, fmt: str | PrintRule, d: Sequence[VjpRule | None],
                domain: Sampler | tuple = ANY, cases: Sequence[Case] | None = None,
                jvp: JvpRule | None = None, mask: MaskRule = elementwise_mask,
                mask_source: bool = False, masked: bool = True,
                taylor: TaylorRule | None = None, numpy: str | None = None,
                schema: Schema | None = None,
                saves: Sequence[str | int] = ("inputs", "out"), registered: bool = True,
                fused: Sequence[FusedVjpRule | None] | None = None,
                **facts: Any) -> Primitive:
    """Register an elementwise primitive from its forward and per-input derivative rules
    (``facts``: the record's other fields, as ``Primitive`` takes them).

    A derivative rule ``d(o, g, out, *xs)`` is linear in ``g`` (so it has a vjp rule's
    signature); None means no gradient flows to that input (a derivative that is zero
    everywhere it exists, or an input that is not differentiable). ``saves``: what the rules
    read (``Primitive``); ``registered=False`` keeps it out of the registry (complex.py).
    ``fused``: per input, the rule on plain arrays of the output's shape in one new buffer
    (``FusedVjpRule``), for value-only sweeps.
    """
    nin = len(d)
    if schema is None:      # a ufunc forward: numpy's broadcasting and loop dtype
        if not isinstance(forward, np.ufunc):
            raise TypeError(f"elementwise {name!r}: the forward is not a numpy ufunc; pass "
                            "schema=attrs(shape_rule=...)")
        schema = attrs(shape_rule=ufunc(forward))
    if cases is None:
        cases = UNARY if nin == 1 else BINARY
    if callable(domain):
        domain = (domain,) * nin
    prim = Primitive(
        name, forward, [broadcast_vjp(r, i, nin) for i, r in enumerate(d)],
        jvp or summed_jvp(d), fmt, cases, **facts, domain=domain, mask=mask,
        mask_source=mask_source, elementwise=True, batch=pointwise(name), taylor=taylor,
        numpy=numpy, schema=schema, saves=saves)
    if fused is not None:
        prim.vjp_fused = tuple(fused)
    prim.vjp_same = (prim.vjp, tuple(d))
    if masked:
        prim.vjp_masked = tuple(masked_vjp(r, i, nin) for i, r in enumerate(d))
    return register(prim) if registered else prim


FINITE = "finite({0})"
BOTH_FINITE = "finite({0}) and finite({1})"    # (a decision on them hides inf and nan)
_LARGEST = "1.7976931348623157e308"     # the largest float64


def ufunc_on_floats(ufunc: np.ufunc, check: str = FINITE) -> dict[str, str]:
    """The fields of a ufunc's form on Python floats (``Primitive.python``): numpy's own loop
    on the numbers (the same double), where ``check`` holds (inputs it raises no
    floating-point error on, and that are finite)."""
    args = ", ".join(f"{{{i}}}" for i in range(ufunc.nin))
    return {"python": f"float(np.{ufunc.__name__}({args}))", "python_check": check}


# ---------------------------------------------------------------- arithmetic
#
# Identities (rewrites.py): ``x + x`` is ``x * 2.0``, ``x * -1`` is ``-x``, ``x + -y`` and
# ``-y + x`` are ``x - y``, ``x - -y`` is ``x + y``, ``--x`` is x (and each record's unit).

def _add_sub_rewrite(prim: Primitive, inputs: Sequence[Any], attrs: dict | None,
                     describe: Callable) -> tuple | None:
    x, y = describe(inputs[0]), describe(inputs[1])
    if prim is ADD and operand_key(inputs[0]) == operand_key(inputs[1]):
        return None if x.constant else (MUL, (inputs[0], 2.0), None)
    for i in ((1, 0) if prim is ADD else (1,)):
        if (x, y)[i].prim is NEG:     # neg keeps shape and dtype: broadcasting is alike
            d = (x, y)[i]
            flipped = SUB if prim is ADD else ADD
            return flipped, (inputs[1 - i], d.inputs[0]), None
    return None


def _add_sub_simplifies(prim: Primitive, inputs: Sequence[Any], attrs: dict) -> bool:
    """Beside a number only as ``x + 0`` or next to a negation; of two Variables only as
    ``x + x``, ``x - x`` or through a negation (the recording hot path: inline)."""
    a, b = inputs
    ca, cb = not hasattr(a, "prim"), not hasattr(b, "prim")
    if ca or cb:
        c, v = (a, b) if ca else (b, a)
        return type(c) is not float and type(c) is not int or c == 0 or \
            getattr(v, "prim", None) is NEG
    return a is b or b.prim is NEG or (prim is ADD and a.prim is NEG)


def _mul_rewrite(prim: Primitive, inputs: Sequence[Any], attrs: dict | None,
                 describe: Callable) -> tuple | None:
    x = unit_side(inputs, describe, -1, (0, 1))
    return None if x is None else (NEG, (x,), None)


def _mul_simplifies(prim: Primitive, inputs: Sequence[Any], attrs: dict) -> bool:
    """Only beside a number 1 or -1 (or an array: the rules look)."""
    a, b = inputs
    if hasattr(a, "prim"):
        if hasattr(b, "prim"):
            return False
        a = b
    return type(a) is not float and type(a) is not int or a == 1 or a == -1


def _div_simplifies(prim: Primitive, inputs: Sequence[Any], attrs: dict) -> bool:
    """Only over a number 1 (or beside an array: the rules look)."""
    found = number_beside(inputs)
    return found is not None and (not is_number(found[0]) or found[2] and found[0] == 1)


def _both_matrices(f: Callable) -> Callable:
    """A SymPy matrix form ``f(x, y)`` that holds when both operands are matrices."""
    def form(sp: Any, x: Any, y: Any) -> Any:
        return f(x, y) if isinstance(x, sp.MatrixExpr) and isinstance(y, sp.MatrixExpr) else None
    return form


def _scaling(sp: Any, x: Any, y: Any) -> Any:
    """A matrix scaled by a number, in SymPy (None for two matrices)."""
    return x * y if isinstance(x, sp.MatrixExpr) != isinstance(y, sp.MatrixExpr) else None


ADD = elementwise("add", np.add, "{0} + {1}", (
    lambda o, g, out, x, y: g,
    lambda o, g, out, x, y: g), rewrites=_add_sub_rewrite, simplifies=_add_sub_simplifies,
    sympy=SymPyForm(lambda sp, x, y: x + y, _both_matrices(lambda x, y: x + y)),
    linear=JOINTLY, commutative=True, ring="add", unit=Unit(0, (0, 1), exact=False),
    numba="({0} + {1})", python="({0} + {1})",
    taylor=linear("add"), numpy="{0} + {1}", saves=())

SUB = elementwise("sub", np.subtract, "{0} - {1}", (
    lambda o, g, out, x, y: g,
    lambda o, g, out, x, y: o.neg(g)), rewrites=_add_sub_rewrite, simplifies=_add_sub_simplifies,
    sympy=SymPyForm(lambda sp, x, y: x - y, _both_matrices(lambda x, y: x - y)),
    linear=JOINTLY, ring="sub", unit=Unit(0, (0,), exact=False), numba="({0} - {1})",
    python="({0} - {1})", taylor=linear("sub"),
    numpy="{0} - {1}", saves=())

def _mul_jvp(o: PrimitiveMethods, ts, out, x, y):
    """t_x y + x t_y. Recorded, the sum of both products (the rules as written, so that the
    transpose of a jvp is the vjp entry for entry); for a square on values (nothing recorded,
    as in the value-only Jacobian sweep), one product t (x + x): the same value (doubling is
    exact), unless t x is subnormal, where it is rounded once instead of twice."""
    tx, ty = ts
    if x is y and tx is ty and is_constant(tx) and is_constant(x) and tx is not None:
        return broadcast_to(o, o.mul(tx, o.add(x, x)), shape_of(out))
    return _MUL_SUMMED(o, ts, out, x, y)


_MUL_RULES = (lambda o, g, out, x, y: o.mul(g, y), lambda o, g, out, x, y: o.mul(g, x))
_MUL_SUMMED = summed_jvp(_MUL_RULES)
# in a value-only sweep on FUSED_SIZE entries or more, g * y is y itself (read-only) when g is
# the number 1 broadcast over y (the cotangent of a total): the same value, as y * 1.0 is y,
# without a pass over memory or a new array (on fewer, the checks cost more than the product)
_MUL_FUSED = (
    lambda g, out, x, y: read_only(y) if unit_cotangent(g, y) and y.size >= FUSED_SIZE else None,
    lambda g, out, x, y: read_only(x) if unit_cotangent(g, x) and x.size >= FUSED_SIZE else None)
MUL = elementwise("mul", np.multiply, "{0} * {1}", _MUL_RULES, fused=_MUL_FUSED,
    rewrites=_mul_rewrite, simplifies=_mul_simplifies,
    sympy=SymPyForm(lambda sp, x, y: x * y, _scaling),
    linear=EACH_ALONE, commutative=True, associative=operator.mul, ring="mul",
    unit=Unit(1, (0, 1), exact=True),
    numba="({0} * {1})", python="({0} * {1})", scales="times", jvp=_mul_jvp,
                  taylor=multilinear("mul", elementwise=True), numpy="{0} * {1}", saves=("inputs",))



def _div_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any, y: Any) -> Series:
    """x / y by the quotient recurrence."""
    return div_series(o, ss[0], ss[1], out)


DIV = elementwise("div", np.divide, "{0} / {1}", (
    lambda o, g, out, x, y: o.div(g, y),
    lambda o, g, out, x, y: o.neg(o.mul(g, o.div(out, y)))), simplifies=_div_simplifies,
    sympy=SymPyForm(lambda sp, x, y: x / y),
    linear=Linear(JOINT, (0,)), unit=Unit(1, (0,), exact=True), numba="({0} / {1})", scales="over",
    python="({0} / {1})", python_check="finite({1})", domain=(ANY, NONZERO), taylor=_div_taylor,
    numpy="{0} / {1}", saves=(1, "out"))

NEG = elementwise("neg", np.negative, "-{0}", (
    lambda o, g, out, x: o.neg(g),),
    reduces=involution, sympy=SymPyForm(lambda sp, x: -x, lambda sp, x: -x), ring="neg",
    linear=JOINTLY, numba="(-{0})", python="(-{0})", taylor=linear("neg"), numpy="-{0}", saves=())


def _pow_dx(o: PrimitiveMethods, g, out, x, y):
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


def _pow_dy(o: PrimitiveMethods, g, out, x, y):
    """x ** y log x, with log 1 in place of log 0: d/dy 0 ** y = 0 (for y > 0), not 0 * -inf."""
    if not is_constant(x) or np.any(np.equal(x, 0)):
        x = o.where(o.equal(x, 0), 1, x)
    return o.mul(g, o.mul(out, o.log(x)))


def _pow_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any, y: Any) -> Series:
    """x ** a for a constant a: a whole number a >= 0 (int or float) by products of series,
    exact at x = 0; any other a by the recurrence z_k = sum_j ((a + 1) j - k) x_j z_{k-j} /
    (k x_0), and where x_0 = 0 by its one-sided limit (_pow_at_zero); a varying exponent as
    exp(y log x)."""
    xs, ys = ss
    order = order_of(ss)
    if all(c is None for c in ys[1:]):
        p = _whole(y, order)
        if p is not None:
            return [out] + (whole_power(o, xs, p)[1:] if p else [None] * order)
        if not is_constant(y) or is_constant(x) and np.count_nonzero(x) == np.size(x):
            return _pow_recurrence(o, xs, y, x, out, order)
        # x_0 = 0 somewhere (or a recorded x, whose program holds at any value): the
        # recurrence divides by 1 there and its result is replaced by the limit
        zero = o.equal(x, 0)
        raw = _pow_recurrence(o, xs, y, o.where(zero, 1.0, x), o.where(zero, 1.0, out), order)
        return [out] + [o.where(zero, lim, 0.0 if c is None else c)
                        for c, lim in zip(raw[1:], _pow_at_zero(o, xs, y, zero, order))]
    logs = quotient_series(o, xs, xs, o.log(x))
    prod = multilinear("mul")(o, [ys, logs], o.mul(y, logs[0]), y, logs[0])
    return exp_series(o, prod, out)


def _whole(y: Any, order: int) -> int | None:
    """A constant exponent as an int when it is one whole number 0 <= p <= max(order,
    SMALL_POWERS) (beyond the order, x ** p has zero coefficients at 0 anyway)."""
    if type(y) is float or type(y) is int:
        p, same = y, True
    elif is_constant(y) and np.size(y) and np.asarray(y).dtype.kind in "iuf":
        a = np.asarray(y)
        p = a.flat[0]
        same = a.ndim == 0 or bool(np.all(a == p))
    else:
        return None
    return int(p) if same and 0 <= p <= max(order, SMALL_POWERS) and p == int(p) else None


def _pow_recurrence(o: PrimitiveMethods, xs: Series, y: Any, x: Any, z0: Any,
                    order: int) -> Series:
    """z_k = sum_{j=1..k} ((a + 1) j - k) x_j z_{k-j} / (k x), z_0 given."""
    z = new(z0, order)
    for k in range(1, order + 1):
        acc = None
        for j in range(1, k + 1):
            if xs[j] is not None and z[k - j] is not None:
                w = ((np.asarray(y) + 1.0) * j - k if is_constant(y)
                     else o.sub(o.mul(o.add(y, 1.0), float(j)), float(k)))
                acc = plus(o, acc, o.mul(o.mul(xs[j], z[k - j]), w))
        z[k] = None if acc is None else o.div(acc, o.mul(x, float(k)))
    return z


def _pow_at_zero(o: PrimitiveMethods, xs: Series, a: Any, zero: Any, order: int) -> list:
    """Coefficients 1..order of x ** a where x_0 = 0, for a constant a: for a whole number a,
    those of the product of series (exact); for any other a, binom(a, k) 0 ** (a - k) x_1 ** k,
    which is 0 for k < a and +-inf beyond (0 ** -s = inf, as numpy and the reverse rule have
    it: the k-th derivative of x ** a at 0, times v ** k; nan where x_1 = 0)."""
    a = np.asarray(a, dtype=float)
    x1 = None if xs[1] is None else o.where(zero, xs[1], 1.0)  # 1 where the limit is unused
    out, binom, x1k = [], np.ones_like(a), x1
    for k in range(1, order + 1):
        binom = binom * (a - (k - 1)) / k
        if k > 1 and x1 is not None:
            x1k = o.mul(x1k, x1)
        c = np.where((k < a) | (binom == 0), 0.0, np.where(k == a, binom,
                                                           np.copysign(np.inf, binom)))
        if x1 is None:      # x_1 = 0: 0 * c, nan where c is infinite
            out.append(np.where(np.isinf(c), np.nan, 0.0))
        else:
            out.append(o.mul(x1k, c) if np.any(c) else 0.0)
    for p in np.unique(a[(a >= 1) & (a <= order) & (a == np.round(a))]):
        exact, hit = whole_power(o, xs, int(p)), np.equal(a, p)
        out = [o.where(hit, 0.0 if e is None else e, c) for e, c in zip(exact[1:], out)]
    return out


# np.power on numbers raises no floating-point error where the base's magnitude lies in
# [2 ** -15, 2 ** 15] and the exponent in [-64, 64] (|y log2 x| <= 960: no overflow, no
# underflow), the base being positive or the exponent whole; or where the base is zero and the
# exponent positive
_POW_ON_FLOATS = ("-64.0 <= {1} <= 64.0 and (3.0517578125e-05 <= abs({0}) <= 32768.0 and "
                  "({0} > 0.0 or {1} % 1.0 == 0.0) or {0} == 0.0 and {1} > 0.0)")

POW = elementwise("pow", np.power, "{0} ** {1}", (_pow_dx, _pow_dy),
    sympy=SymPyForm(lambda sp, x, y: x ** y), domain=(POSITIVE, ANY),
                  taylor=_pow_taylor, saves=("inputs", "out"),
                  **ufunc_on_floats(np.power, _POW_ON_FLOATS))

# ---------------------------------------------------------------- transcendental

def _exp_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """exp x: z' = z x'."""
    return exp_series(o, ss[0], out)


EXP = elementwise("exp", np.exp, "{0}.exp()", (
    lambda o, g, out, x: o.mul(g, out),), sympy=sympy_call("exp"),
    numba="_w_exp({0})", taylor=_exp_taylor, saves=("out",),
    **ufunc_on_floats(np.exp, "-708.0 < {0} < 709.0"))


def _log_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """log x: z' = x' / x."""
    return quotient_series(o, ss[0], ss[0], out)


LOG = elementwise("log", np.log, "{0}.log()", (
    lambda o, g, out, x: o.div(g, x),),
    sympy=sympy_call("log"), domain=POSITIVE, taylor=_log_taylor, saves=("inputs",),
    **ufunc_on_floats(np.log, f"0.0 < {{0}} <= {_LARGEST}"))


def _sqrt_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """sqrt x: z^2 = x."""
    return sqrt_series(o, ss[0], out)


SQRT = elementwise("sqrt", np.sqrt, "{0}.sqrt()", (
    lambda o, g, out, x: o.div(g, o.mul(out, 2)),),
    sympy=sympy_call("sqrt"), domain=POSITIVE, taylor=_sqrt_taylor, saves=("out",),
    **ufunc_on_floats(np.sqrt, f"0.0 <= {{0}} <= {_LARGEST}"))


def _sin_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """sin x, with cos x alongside."""
    return sin_cos_series(o, ss[0], out, o.cos(x), -1.0)[0]


SIN = elementwise("sin", np.sin, "{0}.sin()", (
    lambda o, g, out, x: o.mul(g, o.cos(x)),), sympy=sympy_call("sin"), taylor=_sin_taylor,
    **ufunc_on_floats(np.sin), saves=("inputs",))


def _cos_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """cos x, with sin x alongside."""
    return sin_cos_series(o, ss[0], o.sin(x), out, -1.0)[1]


COS = elementwise("cos", np.cos, "{0}.cos()", (
    lambda o, g, out, x: o.neg(o.mul(g, o.sin(x))),), sympy=sympy_call("cos"), taylor=_cos_taylor,
    **ufunc_on_floats(np.cos), saves=("inputs",))


def _tanh_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """tanh x: z' = (1 - z^2) x'."""
    w0 = 1.0 - out * out if o.plain_values else o.sub(1.0, o.mul(out, out))
    return riccati_series(o, ss[0], out, w0, -1.0)


def _tanh_d(o: PrimitiveMethods, g, out, x):
    """g (1 - out^2)."""
    return o.mul(g, o.sub(1, o.mul(out, out)))


def _tanh_fused(g, out, x):
    """g (1 - out^2) into one buffer: the rule's operations in its order (the same value)."""
    if type(g) is not np.ndarray or type(out) is not np.ndarray or out.size < FUSED_SIZE or \
            g.shape != out.shape or g.dtype is not out.dtype:
        return None
    buf = np.multiply(out, out)
    np.subtract(1, buf, out=buf)
    return np.multiply(g, buf, out=buf)


TANH = elementwise("tanh", np.tanh, "{0}.tanh()", (_tanh_d,), fused=(_tanh_fused,),
                   sympy=sympy_call("tanh"),
    numba="_w_tanh({0})", **ufunc_on_floats(np.tanh),
                   jvp=lambda o, ts, out, x: _tanh_d(o, ts[0], out, x), taylor=_tanh_taylor,
                   saves=("out",))


def _sigmoid(x: Any) -> Any:
    # exp of a non-positive number only, so large |x| never overflows
    e = np.exp(-np.abs(x))
    return np.where(np.greater_equal(x, 0), 1 / (1 + e), e / (1 + e))


def _sigmoid_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """z' = w x' with w = z - z^2."""
    z = new(out, order_of(ss))
    w = new(o.mul(out, o.sub(1.0, out)), order_of(ss))
    for k in range(1, len(z)):
        z[k] = ode(o, ss[0], w, k)
        w[k] = minus(o, z[k], square_coef(o, z, k))
    return z


SIGMOID = elementwise("sigmoid", _sigmoid, "{0}.sigmoid()", (
    lambda o, g, out, x: o.mul(g, o.mul(out, o.sub(1, out))),),
    sympy=SymPyForm(lambda sp, x: 1 / (1 + sp.exp(-x))), taylor=_sigmoid_taylor,
    schema=attrs(shape_rule=ufunc(np.absolute, np.negative, np.exp)), saves=("out",),
    # (_sigmoid's operations on the number: numpy's exp loop, the same IEEE divisions; below
    # 0, -|x| is x and its exp is taken once)
    python="(1.0 / (1.0 + float(np.exp(-abs({0})))) if {0} >= 0.0 else "
           "(_sigmoid_e := float(np.exp({0}))) / (1.0 + _sigmoid_e))",
    python_check=FINITE)

# ---------------------------------------------------------------- Ops methods

class ElementwiseOps:
    """The arithmetic and transcendental primitives as methods of an Ops."""

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
