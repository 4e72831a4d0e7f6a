"""Comparisons, logical operations and truth reductions: entries of dtype bool.

They are recorded like every primitive (``v7 = v3 > 0``) but carry no gradient
(``differentiable=False``: no vjp, no tangent). Every mask a derivative rule
needs (relu's, abs's, the ties of max and min, the structural zeros below
``where``) is computed with them, so a recorded gradient holds no constant
that depends on the values and is the same program at any input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .core import (
    BINARY,
    REDUCE,
    UNARY,
    Primitive,
    SymPyForm,
    along,
    method_fmt,
    pointwise,
    register,
)
from .elementwise import BOTH_FINITE, FINITE
from .rewrites import idempotent, involution
from .schema import attrs
from .shape_rules import BOOL_OUT, reducing, ufunc

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods


def _none_jvp(o: PrimitiveMethods, ts, out, *xs, **attrs):
    return None


def _logic(name: str, forward: Callable, fmt: str | Callable, nin: int, cases=None,
           plain: bool = True, **facts: Any) -> Primitive:
    """Register a bool-valued primitive of ``nin`` inputs (``facts``: other record fields)."""
    if cases is None:
        cases = UNARY if nin == 1 else BINARY
    return register(Primitive(name, forward, [None] * nin, _none_jvp, fmt, cases, **facts,
                              plain=plain, differentiable=False,
                              batch=pointwise(name) if cases is not REDUCE else along(name),
                              schema=attrs(shape_rule=ufunc(forward)) if cases is not REDUCE else
                              reducing(BOOL_OUT), saves=()))   # (no rules: nothing read)


def _comparison(name: str, forward: Callable, fmt: str, op: str, **facts: Any) -> Primitive:
    """A comparison of two values: on Python floats (``Primitive.python``) the operator, once
    both numbers are finite (a decision on them would hide an inf or a nan)."""
    return _logic(name, forward, fmt, 2, python=f"({{0}} {op} {{1}})",
                  python_check=BOTH_FINITE, **facts)


LESS = _comparison("less", np.less, "{0} < {1}", "<",
    sympy=SymPyForm(lambda sp, x, y: sp.StrictLessThan(x, y)))
LESS_EQUAL = _comparison("less_equal", np.less_equal, "{0} <= {1}", "<=",
    sympy=SymPyForm(lambda sp, x, y: sp.LessThan(x, y)))
GREATER = _comparison("greater", np.greater, "{0} > {1}", ">",
    sympy=SymPyForm(lambda sp, x, y: sp.StrictGreaterThan(x, y)))
GREATER_EQUAL = _comparison("greater_equal", np.greater_equal, "{0} >= {1}", ">=",
    sympy=SymPyForm(lambda sp, x, y: sp.GreaterThan(x, y)))
EQUAL = _comparison("equal", np.equal, "equal({0}, {1})", "==",
    sympy=SymPyForm(lambda sp, x, y: sp.Eq(x, y)), commutative=True)
NOT_EQUAL = _comparison("not_equal", np.not_equal, "not_equal({0}, {1})", "!=",
    sympy=SymPyForm(lambda sp, x, y: sp.Ne(x, y)), commutative=True)
LOGICAL_AND = _logic("logical_and", np.logical_and, "{0} & {1}", 2, reduces=idempotent,
    python="({0} and {1})", python_check=BOTH_FINITE,
    sympy=SymPyForm(lambda sp, x, y: sp.And(x, y)), commutative=True)
LOGICAL_OR = _logic("logical_or", np.logical_or, "{0} | {1}", 2, reduces=idempotent,
    python="({0} or {1})", python_check=BOTH_FINITE,
    sympy=SymPyForm(lambda sp, x, y: sp.Or(x, y)), commutative=True)
LOGICAL_NOT = _logic("logical_not", np.logical_not, "~{0}", 1, reduces=involution,
    python="(not {0})", python_check=FINITE,
    sympy=SymPyForm(lambda sp, x: sp.Not(x)))
ISFINITE = _logic("isfinite", np.isfinite, "isfinite({0})", 1)
ISNAN = _logic("isnan", np.isnan, "isnan({0})", 1)
ISINF = _logic("isinf", np.isinf, "isinf({0})", 1)


def _any(x, axis=None, keepdims=False):
    return np.any(x, axis=axis, keepdims=keepdims)


def _all(x, axis=None, keepdims=False):
    return np.all(x, axis=axis, keepdims=keepdims)


ANY_ = _logic("any", _any, method_fmt("any", "axis", "keepdims"), 1, cases=REDUCE)
ALL_ = _logic("all", _all, method_fmt("all", "axis", "keepdims"), 1, cases=REDUCE)


class LogicOps:
    """The bool-valued primitives as methods of an Ops."""

    def less(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x < y elementwise (a bool entry, no gradient)."""
        return self.apply(LESS, (x, y), None, name)

    def less_equal(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x <= y elementwise (a bool entry, no gradient)."""
        return self.apply(LESS_EQUAL, (x, y), None, name)

    def greater(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x > y elementwise (a bool entry, no gradient)."""
        return self.apply(GREATER, (x, y), None, name)

    def greater_equal(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x >= y elementwise (a bool entry, no gradient)."""
        return self.apply(GREATER_EQUAL, (x, y), None, name)

    def equal(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x == y elementwise (a bool entry; the ``==`` operator stays identity)."""
        return self.apply(EQUAL, (x, y), None, name)

    def not_equal(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x != y elementwise (a bool entry; the ``!=`` operator stays identity)."""
        return self.apply(NOT_EQUAL, (x, y), None, name)

    def logical_and(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x & y elementwise on bools."""
        return self.apply(LOGICAL_AND, (x, y), None, name)

    def logical_or(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x | y elementwise on bools."""
        return self.apply(LOGICAL_OR, (x, y), None, name)

    def logical_not(self, x: Any, name: str | None = None) -> Variable:
        """~x elementwise on bools."""
        return self.apply(LOGICAL_NOT, (x,), None, name)

    def isfinite(self, x: Any, name: str | None = None) -> Variable:
        """True where x is neither infinite nor nan."""
        return self.apply(ISFINITE, (x,), None, name)

    def isnan(self, x: Any, name: str | None = None) -> Variable:
        """True where x is nan."""
        return self.apply(ISNAN, (x,), None, name)

    def isinf(self, x: Any, name: str | None = None) -> Variable:
        """True where x is +inf or -inf."""
        return self.apply(ISINF, (x,), None, name)

    def any(self, x: Any, axis: Any = None, keepdims: bool = False,
            name: str | None = None) -> Variable:
        """Whether any entry over ``axis`` is true (nonzero)."""
        return self.apply(ANY_, (x,), {"axis": axis, "keepdims": keepdims}, name)

    def all(self, x: Any, axis: Any = None, keepdims: bool = False,
            name: str | None = None) -> Variable:
        """Whether every entry over ``axis`` is true (nonzero)."""
        return self.apply(ALL_, (x,), {"axis": axis, "keepdims": keepdims}, name)
