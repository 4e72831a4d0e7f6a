"""cholesky: the lower triangular L with L L^T = (a + a^T) / 2, for a complex a L L^H =
(a + a^H) / 2 (the Hermitian part; rules in JAX's convention, complex.py).

Its rules are written with primitives only (matmul, solve, transpose, a constant mask), so
every order works. Matrices are the last two axes; leading axes are a batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..complex import is_complex
from ..core import Case, Primitive, mapped, register, shape_of
from ..lazy import per_block
from ..schema import attrs
from ..series import Series, minus, new, plus
from ..shape_rules import square
from ..taylor import order_of
from .matrices import hermitian, swap_last, sym
from .samplers import positive_definite

if TYPE_CHECKING:
    from ...engine.variable import Variable
    from .. import PrimitiveMethods

# ---------------------------------------------------------------- cholesky


def _cholesky_numpy(a):
    at = np.swapaxes(a, -1, -2)
    return np.linalg.cholesky((a + (np.conj(at) if np.iscomplexobj(a) else at)) / 2)


def _cholesky(a):
    return per_block(_cholesky_numpy, "(n,n)->(n,n)", a)


def _phi(out: Any) -> np.ndarray:
    """The constant mask of Phi: lower triangle of ones with a halved diagonal."""
    n = shape_of(out)[-1]
    return np.tril(np.ones((n, n))) - 0.5 * np.eye(n)


def _cholesky_vjp(o: PrimitiveMethods, g, out, a):
    # Murray (2016): abar = sym(L^-T Phi(L^T gL) L^-1); here z = (L^-T Phi L^-1)^T
    lt = swap_last(o, out)
    p = o.mul(o.matmul(lt, g), _phi(out))
    if is_complex(out):     # z^T = L^-T Phi conj(L)^-1, made Hermitian
        z = o.solve(o.conj(lt), swap_last(o, o.solve(lt, p)))
        return o.mul(o.add(swap_last(o, z), o.conj(z)), 0.5)
    z = o.solve(lt, swap_last(o, o.solve(lt, p)))
    return sym(o, z)


def _cholesky_jvp(o: PrimitiveMethods, ts, out, a):
    # dL = L Phi(L^-1 sym(t) L^-T); sym(t) is symmetric, so solve(L, (L^-1 sym(t))^T) is the
    # symmetric middle factor
    if is_complex(out):     # dL = L Phi(L^-1 herm(t) L^-H)
        x = o.solve(out, o.conj(swap_last(o, o.solve(out, hermitian(o, ts[0])))))
        return o.matmul(out, o.mul(x, _phi(out)))
    x = o.solve(out, swap_last(o, o.solve(out, sym(o, ts[0]))))
    return o.matmul(out, o.mul(x, _phi(out)))


def _cholesky_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, a: Any) -> Series:
    """L L^T = A: L_k is cholesky's jvp at A_k - sum_{j=1..k-1} L_j L_{k-j}^T."""
    z = new(out, order_of(ss))
    for k in range(1, len(z)):
        rest = None
        for j in range(1, k):
            if z[j] is not None and z[k - j] is not None:
                rest = plus(o, rest, o.matmul(z[j], swap_last(o, z[k - j])))
        rhs = minus(o, ss[0][k], rest)
        z[k] = None if rhs is None else _cholesky_jvp(o, [rhs], out, a)
    return z


CHOLESKY = register(Primitive(
    "cholesky", _cholesky, [_cholesky_vjp], _cholesky_jvp, "cholesky({0})",
    [Case(((3, 3),)), Case(((2, 3, 3),)), Case(((1, 1),)), Case(((4, 4),))],
    domain=(positive_definite,), batch=mapped("cholesky"), taylor=_cholesky_taylor,
    schema=attrs(shape_rule=square), saves=("out",)))

# ---------------------------------------------------------------- Ops methods


class CholeskyOps:
    """cholesky as a method of an Ops."""

    def cholesky(self, a: Any, name: str | None = None) -> Variable:
        """Lower Cholesky factor L of (a + a^T) / 2 ((a + a^H) / 2 for a complex a), which
        must be positive definite."""
        return self.apply(CHOLESKY, (a,), None, name)
