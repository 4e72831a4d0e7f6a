"""matrix_power: a @ a @ ... @ a (n factors; a^-1 for negative n, the identity for n = 0).

The vjp and jvp retrace a binary addition chain of matrix products (about 2 log2 |n| of
them); numpy computes the forward.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import ArgumentError
from ..core import Case, Primitive, error, mapped, register
from ..lazy import per_block
from ..schema import INT, attrs, need
from ..series import Series, cauchy, new
from ..shape_rules import powered
from ..taylor import order_of
from .matrices import check_square, matmuls, swap_last
from .samplers import diagonally_dominant
from .solve import inv_taylor

if TYPE_CHECKING:
    from ...engine.variable import Variable
    from .. import PrimitiveMethods

# ---------------------------------------------------------------- the addition chain


def _chain(n: int) -> list[tuple[int, int]]:
    """Steps (i, j) of a binary addition chain: power k+1 of the list is list[i] @ list[j]."""
    steps: list[tuple[int, int]] = []
    cur = 0                             # index of the running power; list[0] is the base
    for bit in bin(n)[3:]:
        steps.append((cur, cur))
        cur = len(steps)
        if bit == "1":
            steps.append((cur, 0))
            cur = len(steps)
    return steps


def _powers(o: PrimitiveMethods, base, n):
    ps = [base]
    for i, j in _chain(n):
        ps.append(o.matmul(ps[i], ps[j]))
    return ps


def _base(o: PrimitiveMethods, a, n):
    return a if n > 0 else o.inv(a)

# ---------------------------------------------------------------- matrix_power


def _matrix_power_vjp(o: PrimitiveMethods, g, out, a, n):
    if n == 0:
        return None
    base = _base(o, a, n)
    ps = _powers(o, base, abs(n))[:-1] + [out]
    cts: list[Any] = [None] * len(ps)
    cts[-1] = g
    for k, (i, j) in reversed(list(enumerate(_chain(abs(n)), start=1))):
        if cts[k] is None:
            continue
        for idx, part in ((i, o.matmul(cts[k], swap_last(o, ps[j]))),
                          (j, o.matmul(swap_last(o, ps[i]), cts[k]))):
            cts[idx] = part if cts[idx] is None else o.add(cts[idx], part)
    gb = cts[0]
    if n > 0:
        return gb
    bt = swap_last(o, base)             # d inv(a) = -B dA B
    return o.neg(matmuls(o, bt, gb, bt))


def _matrix_power_jvp(o: PrimitiveMethods, ts, out, a, n):
    if n == 0:
        return None
    base = _base(o, a, n)
    tb = ts[0] if n > 0 else o.neg(matmuls(o, base, ts[0], base))
    ps, dps = [base], [tb]
    for i, j in _chain(abs(n)):
        ps.append(o.matmul(ps[i], ps[j]))
        dps.append(o.add(o.matmul(dps[i], ps[j]), o.matmul(ps[i], dps[j])))
    return dps[-1]


def _matrix_power(a, n):
    return per_block(np.linalg.matrix_power, "(i,i)->(i,i)", a, n=n)


def _matrix_power_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, a: Any,
                         n: int) -> Series:
    """A^n by |n| - 1 series matrix products of A's series (of A^-1's for n < 0)."""
    if n == 0:
        return new(out, order_of(ss))
    base = ss[0] if n > 0 else inv_taylor(o, ss, o.inv(a), a)
    z = base
    for _ in range(abs(n) - 1):
        z = [o.matmul(z[0], base[0])] + [cauchy(o, o.matmul, z, base, k)
                                         for k in range(1, len(base))]
    return [out] + z[1:]


MATRIX_POWER = register(Primitive(
    "matrix_power", _matrix_power, [_matrix_power_vjp], _matrix_power_jvp,
    lambda args, attrs, render: f"matrix_power({args[0]}, {attrs['n']})",
    [Case(((3, 3),), {"n": 3}), Case(((2, 2, 2),), {"n": 2}), Case(((3, 3),), {"n": -2}),
     Case(((2, 2),), {"n": 1}), Case(((2, 2),), {"n": 0}), Case(((2, 2),), {"n": 5})],
    domain=(lambda rng, shape: diagonally_dominant(rng, shape) / shape[-1],),
    batch=mapped("matrix_power"), taylor=_matrix_power_taylor,
    schema=attrs(shape_rule=powered, n=need(INT)), saves=("inputs",)))

# ---------------------------------------------------------------- Ops methods


class MatrixPowerOps:
    """matrix_power as a method of an Ops."""

    def matrix_power(self, a: Any, n: int, name: str | None = None) -> Variable:
        """a @ a @ ... @ a (n factors; a^-1 for negative n, the identity for n = 0)."""
        check_square(self, "matrix_power", a)
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise error("matrix_power", (a,), f"n must be an int, got {n!r}",
                              ArgumentError)
        return self.apply(MATRIX_POWER, (a,), {"n": int(n)}, name)
