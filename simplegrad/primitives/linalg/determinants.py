"""det and slogdet: the determinant of a matrix and the log of its absolute value.

Their rules are written with primitives only (getitem, det, inv, matmul), so every gradient
is itself differentiable. Matrices are the last two axes; leading axes are a batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import Case, Primitive, mapped, register, shape_of
from ..lazy import per_block
from ..schema import attrs
from ..series import Series, exp_series, new, plus, times
from ..shape_rules import determinant
from .matrices import swap_last
from .samplers import MATRIX, near_identity, negative_det
from .solve import inv_taylor

if TYPE_CHECKING:
    from ...engine.variable import Variable
    from .. import PrimitiveMethods

# ---------------------------------------------------------------- rule pieces


def _per_matrix(o: PrimitiveMethods, s: Any) -> Any:
    """A per-matrix scalar (shape = batch) reshaped to (batch, 1, 1) to scale its matrix."""
    shape = shape_of(s)
    return s if shape == () else o.reshape(s, shape + (1, 1))


def _trace_of_product(o: PrimitiveMethods, m: Any, t: Any) -> Any:
    """trace(m^T @ t) for each matrix of the batch."""
    return o.sum(o.mul(m, t), axis=(-2, -1))


def _slogdet_series(o: PrimitiveMethods, s: Series, a: Any, l0: Any) -> Series:
    """log|det A|: l' = tr(A^-1 A'), with the series of A^-1 from ``inv``."""
    w = inv_taylor(o, [s], o.inv(a), a)
    lg = new(l0, len(s) - 1)
    for k in range(1, len(lg)):
        acc = None
        for j in range(1, k + 1):
            if s[j] is not None and w[k - j] is not None:
                t = o.sum(o.mul(swap_last(o, w[k - j]), s[j]), axis=(-2, -1))
                acc = plus(o, acc, times(o, t, j))
        lg[k] = times(o, acc, 1.0 / k)
    return lg

# ---------------------------------------------------------------- det


def _det(a):
    return per_block(np.linalg.det, "(n,n)->()", a)


# Up to this size the gradient of det is the cofactor matrix built from minors: exact for
# every matrix, singular ones included, at a cost of n^2 determinants of size n - 1 (and,
# differentiated again, n^2 (n-1)^2 of size n - 2). Larger matrices use det(a) inv(a)^T,
# O(n^3), which needs a regular matrix.
COFACTORS_UP_TO = 8


def _cofactors(o: PrimitiveMethods, a: Any, out: Any) -> Any:
    """The cofactor matrix of each matrix of a: d det(a) / da = adj(a)^T."""
    n = shape_of(a)[-1]
    if n > COFACTORS_UP_TO:
        return o.mul(_per_matrix(o, out), swap_last(o, o.inv(a)))
    if n <= 1:          # 1 x 1: det is linear; 0 x 0: det is 1, its gradient empty
        return np.ones(shape_of(a))
    rest = np.array([[k for k in range(n) if k != i] for i in range(n)])    # (n, n - 1)
    minors = o.getitem(a, (Ellipsis, rest[:, None, :, None], rest[None, :, None, :]))
    signs = 1.0 - 2.0 * (np.add.outer(np.arange(n), np.arange(n)) % 2)
    return o.mul(o.det(minors), signs)          # minors: (..., n, n, n - 1, n - 1)


def _det_vjp(o: PrimitiveMethods, g, out, a):
    return o.mul(_per_matrix(o, g), _cofactors(o, a, out))


def _det_jvp(o: PrimitiveMethods, ts, out, a):
    return _trace_of_product(o, _cofactors(o, a, out), ts[0])


def _det_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, a: Any) -> Series:
    """det A = sign exp(log|det A|): z' = z l'."""
    logs = _slogdet_series(o, ss[0], a, None)
    return exp_series(o, logs, out)


DET = register(Primitive(
    "det", _det, [_det_vjp], _det_jvp, "det({0})",
    [Case(((3, 3),)), Case(((2, 3, 3),)), Case(((2, 2),), domain=(negative_det,)),
     Case(((1, 1),)), Case(((2, 9, 9),), domain=(near_identity,), label="inverse-rule")],
    domain=MATRIX, tol=1e-5, batch=mapped("det"), taylor=_det_taylor,
    schema=attrs(shape_rule=determinant), saves=("inputs", "out")))

# ---------------------------------------------------------------- slogdet


def _logabsdet_numpy(a):
    return np.linalg.slogdet(a)[1]


def _logabsdet(a):
    return per_block(_logabsdet_numpy, "(n,n)->()", a)


def _slogdet_vjp(o: PrimitiveMethods, g, out, a):
    return o.mul(_per_matrix(o, g), swap_last(o, o.inv(a)))


def _slogdet_jvp(o: PrimitiveMethods, ts, out, a):
    return _trace_of_product(o, swap_last(o, o.inv(a)), ts[0])


def _slogdet_taylor(o: PrimitiveMethods, ss: list[Series], out: Any, a: Any) -> Series:
    """log|det A|."""
    return _slogdet_series(o, ss[0], a, out)


SLOGDET = register(Primitive(
    "slogdet", _logabsdet, [_slogdet_vjp], _slogdet_jvp, "slogdet({0}).logabsdet",
    [Case(((3, 3),)), Case(((3, 3),), domain=(negative_det,)), Case(((2, 3, 3),)),
     Case(((2, 4, 4),), domain=(negative_det,))],
    domain=MATRIX, batch=mapped("slogdet"), taylor=_slogdet_taylor,
    schema=attrs(shape_rule=determinant), saves=("inputs",)))

# ---------------------------------------------------------------- Ops methods


class DeterminantOps:
    """det and slogdet as methods of an Ops."""

    def det(self, a: Any, name: str | None = None) -> Variable:
        """The determinant of each square matrix in the last two axes of a."""
        return self.apply(DET, (a,), None, name)

    def slogdet(self, a: Any, name: str | None = None) -> Variable:
        """log|det a| per matrix; its sign, a constant, is ``np.linalg.slogdet(a.value).sign``."""
        return self.apply(SLOGDET, (a,), None, name)
