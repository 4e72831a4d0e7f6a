"""solve and inv: linear systems a x = b and the inverse of a matrix.

Their rules are written with primitives only (matmul, transpose, solve, inv), so every
gradient is itself differentiable. Matrices are the last two axes; leading axes are a batch,
broadcast the way numpy.linalg does it. The matrix input is ``a``, as in numpy.linalg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import JOINT, Case, Linear, Primitive, mapped, matrix, register, shape_of, unbroadcast
from ..lazy import per_block
from ..schema import attrs
from ..series import Series, minus, new, plus
from ..shape_rules import solve, square
from ..taylor import order_of
from .matrices import as_column, swap_last
from .samplers import MATRIX, diagonally_dominant

if TYPE_CHECKING:
    from ...engine.variable import Variable
    from .. import PrimitiveMethods

# ---------------------------------------------------------------- solve


def _solve(a, b):
    vector = len(shape_of(b)) == 1
    return per_block(np.linalg.solve, "(n,n),(n)->(n)" if vector else "(n,n),(n,k)->(n,k)", a, b)


def _solve_gb(o: PrimitiveMethods, g, a, b):
    """solve(a^T, g), with g as columns when b is a vector: the cotangent of b before
    broadcasting is undone."""
    return o.solve(swap_last(o, a), as_column(o, g) if len(shape_of(b)) == 1 else g)


def _solve_vjp_a(o: PrimitiveMethods, g, out, a, b):
    gb = _solve_gb(o, g, a, b)
    if len(shape_of(b)) == 1:       # x^T of a stack of vectors: (..., 1, n)
        xs = shape_of(out)
        xt = o.reshape(out, xs[:-1] + (1, xs[-1]))
    else:
        xt = swap_last(o, out)
    return unbroadcast(o, o.neg(o.matmul(gb, xt)), shape_of(a))


def _solve_vjp_b(o: PrimitiveMethods, g, out, a, b):
    gb = _solve_gb(o, g, a, b)
    bs = shape_of(b)
    if len(bs) > 1:
        return unbroadcast(o, gb, bs)
    gb = unbroadcast(o, gb, bs + (1,))
    return o.reshape(gb, bs)


def _solve_jvp(o: PrimitiveMethods, ts, out, a, b):
    ta, tb = ts
    if ta is None:
        return o.solve(a, tb)
    vector = len(shape_of(b)) == 1
    ax = o.matmul(ta, as_column(o, out) if vector else out)
    rhs = o.neg(ax) if tb is None else o.sub(as_column(o, tb) if vector else tb, ax)
    t = o.solve(a, rhs)
    return o.reshape(t, shape_of(out)) if vector else t


def _solve_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, a: Any, b: Any) -> Series:
    """A X = B: X_k = solve(A_0, B_k - sum_{j=1..k} A_j X_{k-j}); a vector b as a column."""
    vector = len(shape_of(b)) == 1
    col = (lambda c: o.reshape(c, shape_of(c) + (1,))) if vector else (lambda c: c)
    x = new(col(out), order_of(ss))
    for k in range(1, len(x)):
        rest = None
        for j in range(1, k + 1):
            if ss[0][j] is not None and x[k - j] is not None:
                rest = plus(o, rest, o.matmul(ss[0][j], x[k - j]))
        rhs = minus(o, None if ss[1][k] is None else col(ss[1][k]), rest)
        x[k] = None if rhs is None else o.solve(a, rhs)
    if vector:
        return [out] + [None if c is None else o.reshape(c, shape_of(out)) for c in x[1:]]
    return [out] + x[1:]


SOLVE = register(Primitive(
    "solve", _solve, [_solve_vjp_a, _solve_vjp_b], _solve_jvp, "solve({0}, {1})",
    [Case(((3, 3), (3,))), Case(((3, 3), (3, 2))), Case(((2, 3, 3), (3,))),
     Case(((2, 3, 3), (2, 3, 2))), Case(((3, 3), (2, 3, 1))), Case(((1, 3, 3), (2, 3, 2))),
     Case(((2, 3, 3), (3, 2)))], linear=Linear(JOINT, (1,)),
    domain=(diagonally_dominant, lambda rng, shape: rng.uniform(-2.0, 2.0, shape)),
    batch=matrix("solve", vectors=(False, True)), taylor=_solve_taylor,
    schema=attrs(shape_rule=solve), saves=(0, "out")))

# ---------------------------------------------------------------- inv


def _inv(a):
    return per_block(np.linalg.inv, "(n,n)->(n,n)", a)


def _inv_vjp(o: PrimitiveMethods, g, out, a):
    it = swap_last(o, out)
    return o.neg(o.matmul(o.matmul(it, g), it))


def _inv_jvp(o: PrimitiveMethods, ts, out, a):
    return o.neg(o.matmul(o.matmul(out, ts[0]), out))


def inv_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, a: Any) -> Series:
    """A Z = I: Z_k = -Z_0 sum_{j=1..k} A_j Z_{k-j}."""
    z = new(out, order_of(ss))
    for k in range(1, len(z)):
        rest = None
        for j in range(1, k + 1):
            if ss[0][j] is not None and z[k - j] is not None:
                rest = plus(o, rest, o.matmul(ss[0][j], z[k - j]))
        z[k] = None if rest is None else o.neg(o.matmul(out, rest))
    return z


INV = register(Primitive(
    "inv", _inv, [_inv_vjp], _inv_jvp,
    "inv({0})", [Case(((3, 3),)), Case(((2, 3, 3),)), Case(((1, 1),))], domain=MATRIX,
    batch=mapped("inv"), taylor=inv_taylor, schema=attrs(shape_rule=square), saves=("out",)))

# ---------------------------------------------------------------- Ops methods


class SolveOps:
    """solve and inv as methods of an Ops."""

    def solve(self, a: Any, b: Any, name: str | None = None) -> Variable:
        """x with a @ x = b; b is a stack of vectors only when it is 1-D (numpy 2's rule)."""
        return self.apply(SOLVE, (a, b), None, name)

    def inv(self, a: Any, name: str | None = None) -> Variable:
        """The inverse of each square matrix in the last two axes of a."""
        return self.apply(INV, (a,), None, name)
