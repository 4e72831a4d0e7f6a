"""pinv and lstsq: the Moore-Penrose pseudo-inverse and least-squares solutions.

Both differentiate at full rank: there the rank is locally constant and the pseudo-inverse
smooth (Golub & Pereyra's formula, written with matmul).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import ArgumentError, ShapeError
from ..core import (
    JOINT,
    REGISTRY,
    Case,
    Linear,
    Primitive,
    error,
    mapped,
    register,
    shape_of,
    value_of,
)
from ..lazy import per_block
from ..schema import attrs
from ..shape_rules import lstsq, pinv
from ..taylor import nested_jvps
from .matrices import as_column, check_matrices, matmuls, swap_last
from .samplers import spread_singular

if TYPE_CHECKING:
    from ...engine.variable import Variable
    from .. import PrimitiveMethods

# ---------------------------------------------------------------- pinv


def _pinv(a):
    return per_block(np.linalg.pinv, "(m,n)->(n,m)", a)


def _pinv_vjp(o: PrimitiveMethods, g, out, a):
    # Golub & Pereyra: dX = -X dA X + X X^T dA^T (I - A X) + (I - X A) dA^T X^T X, transposed
    x, xt, gt = out, swap_last(o, out), swap_last(o, g)
    first = o.neg(matmuls(o, xt, g, xt))
    second = o.matmul(o.sub(gt, matmuls(o, a, x, gt)), o.matmul(x, xt))
    third = o.matmul(o.matmul(xt, x), o.sub(gt, matmuls(o, gt, x, a)))
    return o.add(o.add(first, second), third)


def _pinv_jvp(o: PrimitiveMethods, ts, out, a):
    x, xt, tt = out, swap_last(o, out), swap_last(o, ts[0])
    first = o.neg(matmuls(o, x, ts[0], x))
    second = o.matmul(o.matmul(x, xt), o.sub(tt, matmuls(o, tt, a, x)))
    third = o.matmul(o.sub(tt, matmuls(o, x, a, tt)), o.matmul(xt, x))
    return o.add(o.add(first, second), third)


PINV = register(Primitive(
    "pinv", _pinv, [_pinv_vjp], _pinv_jvp, "pinv({0})",
    [Case(((3, 3),)), Case(((4, 2),)), Case(((2, 4),)), Case(((2, 3, 2),))],
    domain=(spread_singular,), batch=mapped("pinv"), taylor=nested_jvps("pinv"),
    schema=attrs(shape_rule=pinv),
    saves=("inputs", "out")))

# ---------------------------------------------------------------- lstsq


def _lstsq_numpy(a, b):
    return np.linalg.lstsq(a, b)[0]


def _lstsq(a, b):
    vector = len(shape_of(b)) == 1
    return per_block(_lstsq_numpy, "(m,n),(m)->(n)" if vector else "(m,n),(m,k)->(n,k)", a, b)


def _as_columns(o: PrimitiveMethods, x, vector):
    return as_column(o, x) if vector else x


def _lstsq_vjp_a(o: PrimitiveMethods, g, out, a, b):
    # x = A^+ b, so dx = dA^+ b + A^+ db with dA^+ from pinv's rule; r = b - A x
    vector = len(shape_of(b)) == 1
    p = o.pinv(a)
    gx, xx, bb = (_as_columns(o, v, vector) for v in (g, out, b))
    r = o.sub(bb, o.matmul(a, xx))
    pg = o.matmul(swap_last(o, p), gx)
    first = o.neg(o.matmul(pg, swap_last(o, xx)))
    second = o.matmul(r, swap_last(o, o.matmul(p, pg)))
    z = o.sub(gx, o.matmul(swap_last(o, a), pg))
    third = o.matmul(o.matmul(swap_last(o, p), xx), swap_last(o, z))
    return o.add(o.add(first, second), third)


def _lstsq_vjp_b(o: PrimitiveMethods, g, out, a, b):
    return o.matmul(swap_last(o, o.pinv(a)), g)


def _lstsq_jvp(o: PrimitiveMethods, ts, out, a, b):
    ta, tb = ts
    vector = len(shape_of(b)) == 1
    p = o.pinv(a)
    parts = [] if tb is None else [o.matmul(p, tb)]
    if ta is not None:
        xx, bb = _as_columns(o, out, vector), _as_columns(o, b, vector)
        r = o.sub(bb, o.matmul(a, xx))
        tat = swap_last(o, ta)
        first = o.neg(matmuls(o, p, ta, xx))
        second = matmuls(o, p, swap_last(o, p), tat, r)
        u = matmuls(o, tat, swap_last(o, p), xx)
        third = o.sub(u, matmuls(o, p, a, u))
        da = o.add(o.add(first, second), third)
        parts.append(o.reshape(da, shape_of(out)) if vector else da)
    return parts[0] if len(parts) == 1 else o.add(parts[0], parts[1])


LSTSQ = register(Primitive(
    "lstsq", _lstsq, [_lstsq_vjp_a, _lstsq_vjp_b], _lstsq_jvp, "lstsq({0}, {1})[0]",
    [Case(((4, 2), (4,))), Case(((4, 2), (4, 3))), Case(((2, 3), (2,))), Case(((3, 3), (3, 2)))],
    linear=Linear(JOINT, (1,)),
    domain=(spread_singular, lambda rng, shape: rng.uniform(-2.0, 2.0, shape)),
    plain=False,         # op.lstsq returns numpy's 4-tuple, the forward only x
    batch=lambda o, xs, batched: _batch_lstsq(o, xs, batched), taylor=nested_jvps("lstsq"),
    schema=attrs(shape_rule=lstsq), saves=("inputs", "out")))


def _batch_lstsq(o: PrimitiveMethods, xs, batched):
    """x = pinv(a) b, the same minimum-norm least-squares solution: numpy's lstsq does not map
    over leading axes, pinv and matmul do."""
    a, b = xs
    return REGISTRY["matmul"].batch(o, [o.pinv(a), b], batched)

# ---------------------------------------------------------------- Ops methods


class PseudoInverseOps:
    """pinv and lstsq as methods of an Ops."""

    def pinv(self, a: Any, name: str | None = None) -> Variable:
        """The Moore-Penrose pseudo-inverse of each matrix (differentiable at full rank)."""
        check_matrices(self, "pinv", a)
        return self.apply(PINV, (a,), None, name)

    def lstsq(self, a: Any, b: Any, rcond: Any = None, name: str | None = None) -> tuple:
        """numpy's (x, residuals, rank, s): x minimises |a x - b| (recorded), as do residuals
        and s; rank is a Python int."""
        sa, sb = shape_of(a), shape_of(b)
        if len(sa) != 2 or len(sb) not in (1, 2) or sb[0] != sa[0]:
            raise error("lstsq", (a, b), "needs a of shape (m, n) and b of shape (m,) or "
                              "(m, k)", ShapeError)
        if rcond is not None:
            raise error("lstsq", (a, b), "rcond= other than None is not supported",
                              ArgumentError)
        x = self.apply(LSTSQ, (a, b), None, name)
        s = self.svdvals(a)
        rank = int(np.linalg.matrix_rank(np.asarray(value_of(a))))
        if rank < sa[1] or sa[0] <= sa[1]:
            residuals = np.zeros((0,))
        else:
            r = self.sub(b, self.matmul(a, x))
            residuals = self.sum(self.mul(r, r), axis=0)
            if len(sb) == 1:
                residuals = self.reshape(residuals, (1,))
        return x, residuals, rank, s
