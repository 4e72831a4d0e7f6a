"""The explicit entries of the numpy function table (see numpy_api.py).

numpy functions whose name or signature differs from the Ops method that records them
(``np.broadcast_to`` is ``expand``, ``np.linalg.slogdet`` returns (sign, logabsdet),
``np.linalg.qr``, ``svd`` and ``eigh`` return numpy's signs, not the Ops methods' fixed ones,
``eigh`` and ``eigvalsh`` read one triangle as numpy does, not the symmetric part,
``np.linalg.norm`` takes ``ord``, ``np.linalg.trace`` works on the last two axes), a few
compositions of primitives, and the ufuncs whose primitive has another name. Each handler
has numpy's signature after a leading ``ops``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..errors import ArgumentError, DTypeError
from .core import error, is_constant, shape_of, value_of
from .linalg.eigh import numpy_eigh, numpy_eigvalsh
from .linalg.qr import numpy_qr
from .linalg.svd import numpy_svd

if TYPE_CHECKING:
    from . import PrimitiveMethods

Handler = Callable[..., Any]   # handler(ops, *args, **kwargs) with numpy's signature



class SlogdetResult(NamedTuple):
    """numpy's (sign, logabsdet): the sign is a constant, logabsdet is recorded."""

    sign: Any
    logabsdet: Any


def _slogdet(ops: PrimitiveMethods, a):
    return SlogdetResult(np.linalg.slogdet(value_of(a)).sign, ops.slogdet(a))


def _norm(ops: PrimitiveMethods, x, ord=None, axis=None, keepdims=False):  # noqa: A002 - numpy's name
    nd = len(shape_of(x)) if axis is None else (1 if isinstance(axis, (int, np.integer))
                                                 else len(axis))
    if not (ord is None or ord == 2 and nd == 1 or ord == "fro" and nd == 2):
        raise ArgumentError(f"np.linalg.norm: ord={ord!r} is not supported on Variables "
                            f"({describe((x,), {})}); the 2-norm of vectors and the Frobenius "
                            "norm of matrices record (ord=None, 2 or 'fro')")
    return ops.norm(x, axis=axis, keepdims=keepdims)


def _vector_norm(ops: PrimitiveMethods, x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002
    if ord != 2:
        raise ArgumentError(f"np.linalg.vector_norm: ord={ord!r} is not supported on Variables "
                            f"({describe((x,), {})}); ord=2 records")
    return ops.norm(x, axis=axis, keepdims=keepdims)


def _matrix_norm(ops: PrimitiveMethods, x, /, *, keepdims=False, ord="fro"):  # noqa: A002
    if ord != "fro":
        raise ArgumentError(f"np.linalg.matrix_norm: ord={ord!r} is not supported on Variables "
                            f"({describe((x,), {})}); ord='fro' records")
    return ops.norm(x, axis=(-2, -1), keepdims=keepdims)


def _swap_last(ops: PrimitiveMethods, x):
    nd = len(shape_of(x))
    if nd < 2:
        raise ArgumentError(f"np.linalg.matrix_transpose needs at least 2 axes "
                            f"({describe((x,), {})})")
    return ops.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _matrix_transpose(ops: PrimitiveMethods, x, /):
    return _swap_last(ops, x)


def _multi_dot(ops: PrimitiveMethods, arrays, *, out=None):
    if out is not None or len(arrays) < 2:
        raise ArgumentError("np.linalg.multi_dot on Variables takes two or more arrays and no out=")
    result = arrays[0]
    for a in arrays[1:]:
        result = ops.matmul(result, a)
    return result


def _vecdot(ops: PrimitiveMethods, x1, x2, /, *, axis=-1):
    return ops.sum(ops.mul(x1, x2), axis=axis)


def _vdot(ops: PrimitiveMethods, a, b, /):
    """np.vdot on Variables: both flattened, the first conjugated (for real values, the sum
    of the products of the entries)."""
    for v in (a, b):
        if is_constant(v) and np.iscomplexobj(v):
            raise error("np.vdot", (a, b), "a complex constant with Variables (Variables are "
                        "real)", DTypeError)
    return ops.dot(ops.reshape(a, (-1,)), ops.reshape(b, (-1,)))


def _polyval(ops: PrimitiveMethods, p, x):
    """Horner's rule: p[0] x^(n-1) + ... + p[n-1], recorded (p may be a Variable too)."""
    if is_constant(p):
        p = np.asarray(p, dtype=float)
    if len(shape_of(p)) != 1 or shape_of(p)[0] == 0:
        raise ArgumentError(f"np.polyval: p must be a non-empty 1-D array on Variables "
                            f"({describe((p, x), {})})")
    n = shape_of(p)[0]
    if n == 1:
        return ops.add(ops.mul(x, 0.0), p[0])
    result = ops.add(ops.mul(x, p[0]), p[1])
    for k in range(2, n):
        result = ops.add(ops.mul(result, x), p[k])
    return result


def _like(fill: float) -> Handler:
    def like(ops: PrimitiveMethods, a, dtype=None, order="K", subok=True, shape=None, *,
             device=None):
        return np.full(shape_of(a) if shape is None else shape, fill,
                       dtype=getattr(a, "dtype", np.float64) if dtype is None else dtype)
    return like


def _shape(ops: PrimitiveMethods, a):
    return shape_of(a)


def _ndim(ops: PrimitiveMethods, a):
    return len(shape_of(a))


def _size(ops: PrimitiveMethods, a, axis=None):
    s = shape_of(a)
    return int(np.prod(s)) if axis is None else s[axis]


def _linalg_trace(ops: PrimitiveMethods, x, /, *, offset=0, dtype=None):
    if dtype is not None:
        raise ArgumentError(f"np.linalg.trace: dtype={dtype!r} is not supported on Variables "
                            f"({describe((x,), {})})")
    return ops.trace(x, offset=offset, axis1=-2, axis2=-1)


def _linalg_diagonal(ops: PrimitiveMethods, x, /, *, offset=0):
    return ops.diagonal(x, offset=offset, axis1=-2, axis2=-1)


def _linalg_outer(ops: PrimitiveMethods, x1, x2, /):
    return ops.outer(x1, x2)


def _linalg_tensordot(ops: PrimitiveMethods, x1, x2, /, *, axes=2):
    return ops.tensordot(x1, x2, axes=axes)


def _linalg_cross(ops: PrimitiveMethods, x1, x2, /, *, axis=-1):
    return ops.cross(x1, x2, axis=axis)


RENAMED: dict[Callable, str] = {
    np.broadcast_to: "expand", np.amax: "max", np.amin: "min", np.linalg.matmul: "matmul",
    np.linalg.svdvals: "svdvals",
}
EXPLICIT: dict[Callable, Handler] = {
    np.linalg.slogdet: _slogdet, np.linalg.norm: _norm, np.linalg.vector_norm: _vector_norm,
    np.linalg.matrix_norm: _matrix_norm, np.linalg.matrix_transpose: _matrix_transpose,
    np.linalg.multi_dot: _multi_dot, np.linalg.vecdot: _vecdot, np.vdot: _vdot,
    np.polyval: _polyval,
    np.zeros_like: _like(0.0), np.ones_like: _like(1.0), np.shape: _shape, np.ndim: _ndim,
    np.size: _size,
    # the array API's np.linalg versions work on the last axes
    np.linalg.trace: _linalg_trace, np.linalg.diagonal: _linalg_diagonal,
    np.linalg.outer: _linalg_outer, np.linalg.tensordot: _linalg_tensordot,
    np.linalg.cross: _linalg_cross,
    # numpy's own signs, not op.qr's, op.svd's and op.eigh's fixed ones (decomposition.py);
    # eigh and eigvalsh read numpy's triangle (UPLO), not op.eigh's symmetric part
    np.linalg.qr: numpy_qr, np.linalg.svd: numpy_svd, np.linalg.eigh: numpy_eigh,
    np.linalg.eigvalsh: numpy_eigvalsh,
}
# numpy's names of ufuncs whose primitive is named differently
UFUNC_ALIASES = {np.subtract: "sub", np.multiply: "mul", np.true_divide: "div",
                 np.negative: "neg", np.power: "pow", np.absolute: "abs", np.rint: "round"}

# ---------------------------------------------------------------- helpers


def variables_in(args: Any, found: list) -> list:
    """The Variables among args (nested in lists, tuples and dicts), appended to found."""
    if not is_constant(args):
        found.append(args)
    elif isinstance(args, (list, tuple)):
        for a in args:
            variables_in(a, found)
    elif isinstance(args, dict):
        for a in args.values():
            variables_in(a, found)
    return found


def describe(args: Any, kwargs: dict) -> str:
    """'x with shape (2, 3), ...' for the Variables among the arguments of a call."""
    vs = variables_in([args, kwargs], [])
    return ", ".join(f"{v.name} with shape {v.shape}" for v in vs) or "no Variables"
