"""Piecewise elementwise primitives: relu, sign, abs, maximum, minimum, and ``where``.

Their rules weigh ``g`` by a mask computed with recorded comparisons (``v8 = v3 > 0``): a mask
is locally constant, so it is exact at every order, and the recorded gradient stays valid at
any input; their Taylor rule is their jvp per coefficient (``linear``).

``where`` is the source of structural zeros (see ``core.zero_masked``): it declares
that the untaken side of its cotangent is zero by construction, and the elementwise vjps below
it zero their result there. Forward mode needs nothing: ``where`` selects tangents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError
from .core import (
    ANY,
    JOINT,
    NONZERO,
    Case,
    Linear,
    SymPyForm,
    broadcast_to,
    is_constant,
    mask_down,
    shape_of,
    sympy_call,
)
from .elementwise import BOTH_FINITE, FINITE, elementwise, ufunc_on_floats
from .rewrites import repeated_choice
from .schema import attrs
from .series import Series, cauchy, sqrt_series
from .shape_rules import CHOSEN, RECTIFIED, broadcasting
from .taylor import linear

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

# ---------------------------------------------------------------- piecewise functions


def _relu(x: Any) -> Any:
    return np.maximum(x, 0)


def _step(o: PrimitiveMethods, x: Any) -> Any:
    """1 where x > 0, else 0, in x's dtype: recorded, so valid at any input."""
    return o.cast(o.greater(x, 0), x.dtype)


RELU = elementwise("relu", _relu, "{0}.relu()", (
    lambda o, g, out, x: o.mul(g, _step(o, x)),),
    sympy=SymPyForm(lambda sp, x: sp.Max(x, 0)), domain=NONZERO, taylor=linear("relu"),
    numpy="np.maximum({0}, 0)", schema=attrs(shape_rule=broadcasting(RECTIFIED)), saves=("inputs",),
    python="float(np.maximum({0}, 0))", python_check=FINITE)

SIGN = elementwise("sign", np.sign, "{0}.sign()", (None,),
    sympy=sympy_call("sign"), taylor=linear("sign"), saves=(), **ufunc_on_floats(np.sign, FINITE))

def _abs_d(o: PrimitiveMethods, g: Any, out: Any, x: Any) -> Any:
    """g sign(x); for a complex x, g conj(x) / |x| (JAX's convention, complex.py), whose
    second derivative is not zero as sign's is."""
    if getattr(x, "dtype", None) is not None and x.dtype.kind == "c":
        return o.mul(g, o.div(o.conj(x), o.abs(x)))
    return o.mul(g, o.sign(x))


def _abs_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, x: Any) -> Series:
    """|x|: piecewise linear on reals (its jvp per coefficient); for a complex x the square
    root of the real series z conj(z), whose k-th coefficient is the sum of Re(z_j conj(z_k-j))."""
    if getattr(x, "dtype", None) is None or x.dtype.kind != "c":
        return _abs_linear(o, ss, out, x)
    zs = ss[0]
    bars = [None if c is None else o.conj(c) for c in zs]
    squares = [None] + [cauchy(o, o.mul, zs, bars, k) for k in range(1, len(zs))]
    part = out.dtype      # the real dtype of x's parts
    squares = [None if c is None else o.cast(c, part) for c in squares]
    return sqrt_series(o, squares, out)


_abs_linear = linear("abs")
ABS = elementwise("abs", np.abs, "{0}.abs()", (
    _abs_d,),
    sympy=sympy_call("Abs"), domain=NONZERO, taylor=_abs_taylor, saves=("inputs",),
    python="abs({0})")


def _share(o: PrimitiveMethods, x: Any, y: Any, sense: float) -> Any:
    """Weight of x in maximum (sense 1) or minimum (sense -1): 1 where it wins, 0.5 on a tie,
    0 where it loses; (sign(x - y) * sense + 1) / 2, recorded."""
    return o.mul(o.add(o.mul(o.sign(o.sub(x, y)), sense), 1), 0.5)


MAXIMUM = elementwise("maximum", np.maximum, "maximum({0}, {1})", (
    lambda o, g, out, x, y: o.mul(g, _share(o, x, y, 1.0)),
    lambda o, g, out, x, y: o.mul(g, _share(o, y, x, 1.0))),
    sympy=SymPyForm(lambda sp, x, y: sp.Max(x, y)),
    commutative=True, taylor=linear("maximum"), saves=("inputs",),
    **ufunc_on_floats(np.maximum, BOTH_FINITE))

MINIMUM = elementwise("minimum", np.minimum, "minimum({0}, {1})", (
    lambda o, g, out, x, y: o.mul(g, _share(o, x, y, -1.0)),
    lambda o, g, out, x, y: o.mul(g, _share(o, y, x, -1.0))),
    sympy=SymPyForm(lambda sp, x, y: sp.Min(x, y)),
    commutative=True, taylor=linear("minimum"), saves=("inputs",),
    **ufunc_on_floats(np.minimum, BOTH_FINITE))


# ---------------------------------------------------------------- where


def _where_mask(o: PrimitiveMethods, m, i, out, cond, x, y):
    """Input 1's cotangent is zero where cond is false, input 2's where it is true."""
    own = o.logical_not(cond) if i == 1 else cond
    if m is not None:
        own = o.logical_or(own, m)
    return mask_down(o, own, shape_of(out), shape_of((cond, x, y)[i]))


def _where_jvp(o: PrimitiveMethods, ts, out, cond, x, y):
    _, tx, ty = ts
    if tx is None and ty is None:
        return None
    return broadcast_to(o, o.where(cond, 0 if tx is None else tx, 0 if ty is None else ty),
                        shape_of(out))


WHERE = elementwise("where", np.where, "where({0}, {1}, {2})", (
    None,
    lambda o, g, out, cond, x, y: o.where(cond, g, 0),
    lambda o, g, out, cond, x, y: o.where(cond, 0, g)), reduces=repeated_choice,
    sympy=SymPyForm(lambda sp, c, x, y: sp.Piecewise((x, c), (y, True))),
    linear=Linear(JOINT, (1, 2)), numba="({1} if {0} else {2})",
    python="({1} if {0} else {2})", python_check="finite({1}) and finite({2})",   # (both made)
    cases=[Case(((3,), (3,), (3,)), conditions=(0,)),
           Case(((3, 4), (3, 1), (1, 4)), conditions=(0,)),
           Case(((2, 3, 4), (2, 3, 4), (3, 4)), conditions=(0,)),
           Case(((3,), (), (3,)), conditions=(0,)), Case(((3, 1), (3, 4), ()), conditions=(0,))],
    domain=(NONZERO, ANY, ANY),
    jvp=_where_jvp, mask=_where_mask, mask_source=True, masked=False, taylor=linear("where"),
    schema=attrs(shape_rule=broadcasting(CHOSEN)), saves=(0,))


# ---------------------------------------------------------------- Ops methods

class PiecewiseOps:
    """The piecewise primitives and ``where`` as methods of an Ops."""

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

    def heaviside(self, x1: Any, x2: Any, name: str | None = None) -> Variable:
        """numpy's step: 0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0 (nan where x1 is nan);
        recorded as ``where`` entries, so x2 gets the gradient where x1 == 0 and x1 gets none."""
        steps = self.where(self.greater(x1, 0), 1.0, x2)
        if is_constant(x1) and not np.isnan(x1).any():
            return self.where(self.less(x1, 0), 0.0, steps, name=name)
        return self.where(self.isnan(x1), np.nan, self.where(self.less(x1, 0), 0.0, steps),
                          name=name)
