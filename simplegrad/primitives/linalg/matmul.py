"""matmul: numpy's ``@`` for 1-D, 2-D and batched (broadcast) operands."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import (
    EACH_ALONE,
    Case,
    LoopForms,
    Primitive,
    SymPyForm,
    matrix,
    register,
    shape_of,
    unbroadcast,
)
from ..schema import attrs
from ..shape_rules import matmul
from ..taylor import multilinear
from .matrices import swap_last

if TYPE_CHECKING:
    from ...engine.variable import Variable
    from .. import PrimitiveMethods

# ---------------------------------------------------------------- matmul


def _matmul_vjp(which: int):
    def vjp(o: PrimitiveMethods, g, out, x, y):
        xs, ys = shape_of(x), shape_of(y)
        if len(xs) == 2 and len(ys) == 2:           # matrices: no promotion, no broadcasting
            return o.matmul(g, o.transpose(y)) if which == 0 else o.matmul(o.transpose(x), g)
        if len(xs) == 1 and len(ys) == 1:          # inner product: out is 0-d
            return o.mul(g, y) if which == 0 else o.mul(g, x)
        if len(xs) + len(ys) == 3:                  # matrix and vector: g is a vector
            if which == (0 if len(xs) == 2 else 1):   # the matrix: an outer product
                return (o.mul(o.reshape(g, (xs[0], 1)), y) if which == 0 else
                        o.mul(o.reshape(x, (ys[0], 1)), g))
            return o.matmul(g, o.transpose(y)) if which == 0 else o.matmul(o.transpose(x), g)
        # promote 1-D operands to matrices the way numpy does, then undo it (only the other
        # operand is read: which == 0 reads y, which == 1 reads x)
        gshape = shape_of(g)
        if len(xs) == 1:
            gshape = gshape[:-1] + (1, gshape[-1])
        if len(ys) == 1:
            gshape = gshape + (1,)
        g2 = g if gshape == shape_of(g) else o.reshape(g, gshape)
        if which == 0:
            y2 = o.reshape(y, ys + (1,)) if len(ys) == 1 else y
            d = o.matmul(g2, swap_last(o, y2))
            d = unbroadcast(o, d, (1,) + xs if len(xs) == 1 else xs)
            return d if len(xs) > 1 else o.reshape(d, xs)
        x2 = o.reshape(x, (1,) + xs) if len(xs) == 1 else x
        d = o.matmul(swap_last(o, x2), g2)
        d = unbroadcast(o, d, ys + (1,) if len(ys) == 1 else ys)
        return d if len(ys) > 1 else o.reshape(d, ys)
    return vjp


def _matmul_jvp(o: PrimitiveMethods, ts, out, x, y):
    tx, ty = ts
    parts = [o.matmul(tx, y) if tx is not None else None,
             o.matmul(x, ty) if ty is not None else None]
    parts = [p for p in parts if p is not None]
    return parts[0] if len(parts) == 1 else o.add(parts[0], parts[1])


def _large_outer(xs: tuple, ys: tuple) -> bool:
    """Whether the outer product of (..., m, 1) and (..., 1, n) is large enough, with rows
    long enough, for einsum to beat a broadcast multiply (measured: 64x64x100 1.3x faster,
    1000x1000 1.45x; 130x130 and rows of 32 slower)."""
    if ys[-1] < 64:
        return False
    return math.prod(np.broadcast_shapes(xs[:-2], ys[:-2])) * xs[-2] * ys[-1] >= 1 << 16


def _matmul(x, y):
    if type(x) is np.ndarray and type(y) is np.ndarray and x.ndim <= 2 and y.ndim <= 2 and (
            x.ndim == 1 or y.ndim == 1 or x.shape[1] != 1):
        return np.matmul(x, y)      # matrices and vectors (the common case, checked first)
    # a contraction of length 1 is an outer product (per-example gradients of a dense layer
    # are stacks of them): a broadcast multiply for small ones, and for large float ones
    # einsum, which writes the product about 1.6x faster; both several times faster than
    # matmul's loops, and exact (no sum)
    # (np.shape's dispatch costs more than the matrix product of small arrays)
    xs = x.shape if type(x) is np.ndarray else np.shape(x)
    ys = y.shape if type(y) is np.ndarray else np.shape(y)
    if len(xs) >= 2 and len(ys) >= 2 and xs[-1] == 1 == ys[-2]:
        if _large_outer(xs, ys) and np.result_type(x, y).kind == "f":
            return np.einsum("...i,...j->...ij", x[..., 0], y[..., 0, :])
        return np.multiply(x, y)
    if type(x) is np.ndarray and len(ys) >= 3 and ys[-1] == 1 and (
            x.ndim == 2 or x.ndim == 3 and x.strides[0] == 0 and ys[0] == x.shape[0] > 0):
        # one matrix (or one broadcast along a stack: a shared weight under vmap) times a
        # stack of columns, as the batched jvp of a matrix-vector vjp records it: a single
        # matrix product instead of one per column (measured 1.9x faster at 100x100x100)
        return np.matmul(y[..., 0], (x if x.ndim == 2 else x[0]).T)[..., None]
    if type(y) is np.ndarray and y.ndim == 3 and y.strides[0] == 0 and len(xs) == 3 and \
            xs[0] == y.shape[0] > 0:
        # a stack of rows times one matrix broadcast along the stack (a shared weight under
        # vmap, as per-example gradients of a dense layer record it): one matrix product
        # instead of one per example
        return np.matmul(np.reshape(x, (xs[0] * xs[1], xs[2])), y[0]).reshape(xs[:2] + y.shape[2:])
    if type(x) is np.ndarray and type(y) is np.ndarray and y.ndim == 2 and x.ndim >= 3 and \
            x.flags.c_contiguous and x.size:
        # a contiguous stack of rows times one matrix (a dense layer under vmap, with a batch
        # of tangents in front): one matrix product of all the rows, where np.matmul makes one
        # per matrix of the stack (measured 1.5x faster for 16384 stacked 1 x 64 rows)
        return np.matmul(x.reshape(-1, xs[-1]), y).reshape(xs[:-1] + y.shape[1:])
    return np.matmul(x, y)


def _matmul_numpy(shapes: list, attrs: dict, dtypes: list) -> str | None:
    """``{0} @ {1}`` where the forward is plain ``np.matmul`` for these static shapes: operands
    of one or two dimensions whose contraction is not the length-1 outer product it multiplies
    instead (stacks can take its broadcast-weight path, which depends on strides, so they keep
    the call)."""
    x, y = shapes
    if attrs or x is None or y is None or len(x) not in (1, 2) or len(y) not in (1, 2) or \
            len(x) == 2 and len(y) == 2 and x[-1] == 1:
        return None
    return "{0} @ {1}"


def _matmul_stacks(inputs, xs, flags, rank, attrs, stack):
    """matmul on stacks without its batching rule: matmul maps over the leading axes of
    operands of two or more, so on stacks of those (of one rank) and plain matrices or vectors,
    the batch axis is one more of them; vectors times a plain matrix, each v @ b, are the rows
    of one product."""
    b, sb = xs[1], flags[1]
    if rank >= 3 and all(f or np.ndim(x) <= 2 for x, f in zip(xs, flags)) or \
            rank == 2 and not sb and np.ndim(b) == 2:
        return stack(_matmul(*xs), fresh=True)
    return None


def _matmul_diagonal(inputs, attrs, stack):
    """matmul of a plain matrix or vector and a diagonal stack (example k ``d[k] e_k``): each
    ``a @ (d[k] e_k)`` is ``d[k] a[:, k]`` and each ``(d[k] e_k) @ b`` is ``d[k] b[k]``, one
    multiply for all k, bit for bit the product's (where an inf of ``a`` would put nans in the
    other rows of it); on the identity basis no multiply at all (a view of the matrix)."""
    a, b = inputs
    s, p = (b, a) if type(b) is stack else (a, b)
    if type(p) is stack:
        return None
    # (an array's attributes read directly: numpy's function forms dispatch, 0.3 us a call)
    array = type(p) is np.ndarray
    shape = p.shape if array else np.shape(p)
    if len(shape) not in (1, 2):
        return None
    d = s.diag
    k = d.shape[0]
    if p is a and shape[-1] != k or p is b and shape[0] != k:
        return None
    if len(shape) == 1:                     # v @ (d[k] e_k) and (d[k] e_k) @ v: d[k] v[k]
        return stack(np.multiply(p, d), fresh=True)
    # column k of a, or row k of b, for each k
    m = (p.T if array else np.swapaxes(p, 0, 1)) if p is a else p
    dtype = p.dtype if array and p.dtype == d.dtype else np.result_type(p, d)
    if s.eye:
        return stack(m) if m.dtype == dtype else stack(m.astype(dtype), fresh=True)
    return stack(np.multiply(m, d[:, None]), fresh=True)


# ---------------------------------------------------------------- in compiled loops
# (primitives/loops.py reads these through the record's ``loop_forms``)


def _same_float_dtype(node: Any) -> bool:
    """A float64 or float32 product of operands of its dtype, with no attributes."""
    dtype = np.dtype(node.dtype)
    return not node.attrs and dtype in (np.dtype(np.float64), np.dtype(np.float32)) and \
        all(np.dtype(x.dtype) == dtype for x in node.inputs)


def _loop_kernel(node: Any, shapes: list) -> tuple | None:
    """In a loop compiled whole: a matrix times a vector (``A @ x``: transposed; ``x @ A``)."""
    if node.attrs or len(shapes) != 2 or any(s is None for s in shapes):
        return None
    sa, sb = shapes
    if len(sa) == 2 and len(sb) == 1:
        return ("matvec", 0, 1, True)
    if len(sa) == 1 and len(sb) == 2:
        return ("matvec", 1, 0, False)
    return None


def _loop_stacked(node: Any, args: list[str], stacked: list[bool], shapes: list,
                  steps: str) -> str | None:
    """On all steps: a fixed matrix times the stack of each step's vector as one ``np.matmul``
    of the matrix and the vectors as columns, which makes per step the BLAS matrix-vector
    call ``A @ x`` makes, with the same arguments (numpy's matmul loop takes each stacked pair
    as the single one)."""
    if len(args) != 2 or not _same_float_dtype(node) or any(s is None for s in shapes):
        return None
    (a, b), (sa, sb) = args, stacked
    if sb and not sa and len(shapes[0]) == 2 and len(shapes[1]) == 1:      # A @ x
        return f"np.matmul({a}, {b}[:, :, None])[:, :, 0]"
    if sa and not sb and len(shapes[0]) == 1 and len(shapes[1]) == 2:      # x @ A
        return f"np.matmul({a}[:, None, :], {b})[:, 0, :]"
    return None


# A matrix fixed in a loop times a vector a trip makes: ``A.dot(x)``, bound once, which costs
# half of ``A @ x`` on small arrays, where both make the same BLAS call: for a matrix of two or
# more rows and columns, C- or F-contiguous, and a vector of two or more elements with a
# positive stride (an array numpy makes: a ufunc's; a carry is one from its second step, and
# its first value is checked), np.dot and np.matmul both call gemv with the same order,
# transposition, sizes, leading dimension and strides; otherwise the matmul itself.


def _loop_step(node: Any, args: list[str], kinds: list, shapes: list) -> tuple | None:
    """In a trip: a fixed matrix times a vector the trip makes, as ``matvec_of(A)``'s callable
    (``kinds``: how each operand comes, primitives/loops.py ``step_form``)."""
    if len(args) != 2 or not _same_float_dtype(node):
        return None
    (a, x), (ka, kx), (sa, sx) = args, kinds, shapes
    if ka != "fixed" or sa is None or sx is None or len(sa) != 2 or len(sx) != 1 or \
            min(*sa, *sx) < 2 or kx != "new" and not (type(kx) is tuple and kx[0] == "carry"):
        return None
    return matvec_of, [a] if type(kx) is not tuple else [a, kx[1]], x


def matvec_of(a: Any, first: Any = None) -> Callable:
    """``a.dot`` where it makes the BLAS call ``a @ x`` makes (a C- or F-contiguous matrix;
    ``first``: a vector's first value, of a positive stride), else ``a.__matmul__``."""
    if type(a) is np.ndarray and (a.flags.c_contiguous or a.flags.f_contiguous) and (
            first is None or type(first) is np.ndarray and first.strides[0] > 0 and
            first.strides[0] % first.itemsize == 0):
        return a.dot
    return a.__matmul__


MATMUL = register(Primitive(
    "matmul", _matmul, [_matmul_vjp(0), _matmul_vjp(1)], _matmul_jvp, "{0} @ {1}",
    [Case(((3,), (3,))), Case(((2, 3), (3, 4))), Case(((3,), (3, 4))), Case(((2, 3), (3,))),
     Case(((2, 2, 3), (3, 4))), Case(((1, 2, 3), (4, 3, 2))), Case(((3,), (2, 3, 4)))],
     sympy=SymPyForm(None, lambda sp, x, y: x * y, matrices=True, array=True),
    linear=EACH_ALONE, maps_rows=True, on_stacks=_matmul_stacks,
    on_diagonal=_matmul_diagonal, numpy_at=_matmul_numpy,
    batch=lambda o, xs, batched: _batch_matmul(o, xs, batched),
    taylor=multilinear("matmul"), schema=attrs(shape_rule=matmul), saves=("inputs",),
    loop_forms=LoopForms(_loop_kernel, _loop_stacked, _loop_step)))


def _batch_matmul(o: PrimitiveMethods, xs, batched):
    """A shared matrix times batched vectors is one product with the stack of rows,
    (B, k) @ a^T; the other forms go through core.matrix."""
    a, v = xs
    if not batched[0] and len(shape_of(a)) == 2 and len(shape_of(v)) == 2:
        return o.matmul(v, swap_last(o, a))
    return _MATRIX(o, xs, batched)


_MATRIX = matrix("matmul")

# ---------------------------------------------------------------- Ops methods


class MatmulOps:
    """matmul as a method of an Ops."""

    def matmul(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """x @ y with numpy's rules for 1-D, 2-D and batched (broadcast) operands."""
        return self.apply(MATMUL, (x, y), None, name)
