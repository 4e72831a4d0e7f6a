"""Shape primitives: expand, reshape, transpose, joins, casts (indexing: indexing.py).

They come in adjoint pairs: the vjp of expand is a sum, of sum an expand;
reshape and transpose invert themselves; a join's vjp slices its output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DTypeError
from .alternatives import instead
from .core import (
    JOINT,
    JOINTLY,
    ON_ENTRIES,
    PASSES_ON,
    Case,
    Linear,
    LoopForms,
    Primitive,
    SymPyForm,
    align,
    batch_size,
    dtype_of,
    error,
    full_mask,
    mapped,
    mask_down,
    method_fmt,
    register,
    shape_of,
    shift_axis,
    unbroadcast,
)
from .rewrites import reshapes_if_needed, same_shape, transposes_if_needed, undone_transpose
from .schema import (
    AXIS_OR_NONE,
    DTYPE,
    RESHAPE_SHAPE,
    SHAPE,
    attrs,
    axis,
    need,
)
from .shape_rules import cast, expanded, joined, reshaped, stacked, transposed
from .taylor import linear

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

# ---------------------------------------------------------------- expand, reshape, transpose


def _expand(x, shape):
    if type(x) is not np.ndarray and isinstance(x, np.generic):
        x = np.asarray(x)
    if type(x) is np.ndarray:   # a read-only view made directly (np.broadcast_to: 2 us more)
        strides = _broadcast_strides(x, shape)
        if strides is not None:
            out = np.ndarray(shape, x.dtype, x, 0, strides)
            out.setflags(write=False)
            return out
    return np.broadcast_to(x, shape)


def _broadcast_strides(x: np.ndarray, shape: tuple) -> tuple | None:
    """The strides of x broadcast to ``shape`` over x's own memory, or None unless x is
    contiguous (a buffer a view can be made over) and broadcasts to ``shape``."""
    if x.ndim == 0:
        return (0,) * len(shape)
    lead = len(shape) - x.ndim
    if lead < 0 or not x.flags.c_contiguous:
        return None
    strides = [0] * lead
    for n, m, s in zip(x.shape, shape[lead:], x.strides):
        if n == m:
            strides.append(s)
        elif n == 1:
            strides.append(0)
        else:
            return None
    return tuple(strides)


def _loop_copy(node: Any, shapes: list) -> tuple:
    """In a loop compiled whole: its input broadcast to its shape."""
    return ("copy",)


EXPAND = register(Primitive(
    "expand", _expand,
    [lambda o, g, out, x, shape: unbroadcast(o, g, shape_of(x))],
    lambda o, ts, out, x, shape: o.expand(ts[0], shape),
    "{0}.expand({shape})", reduces=same_shape, simplifies=reshapes_if_needed,
    sympy=SymPyForm(PASSES_ON.entry, lambda sp, x, shape: x, array=True), linear=JOINTLY,
    sized="broadcast", python="{0}",
    mask=lambda o, m, i, out, x, shape: None if m is None else mask_down(o, m, shape, shape_of(x)),
    cases=[Case(((),), {"shape": (4,)}), Case(((3, 1),), {"shape": (3, 4)}),
     Case(((3,),), {"shape": (2, 3)}), Case(((1, 4),), {"shape": (2, 3, 4)})],
    batch=lambda o, xs, batched, shape: o.expand(
        align(o, xs, batched, len(shape))[0], (batch_size(xs, batched),) + tuple(shape)),
    taylor=linear("expand"), numpy="np.broadcast_to({0}, {shape})",
    loop_forms=LoopForms(kernel=_loop_copy),
    schema=attrs(shape_rule=expanded, shape=need(SHAPE)), saves=()))


def _reshape(x, shape):
    if type(x) is np.ndarray:       # np.reshape's own work, without its dispatch layers
        return x.reshape(shape)
    return np.reshape(x, shape)


def _reshape_stacks(inputs, xs, flags, rank, attrs, stack):
    """A stack reshaped per example: its tail reshaped."""
    x = inputs[0]
    if type(x) is not stack:
        return None
    return stack(x.inner.reshape((x.inner.shape[0],) + tuple(attrs["shape"])), fresh=x.fresh)


def _reshape_diagonal(inputs, attrs, stack):
    """A diagonal stack reshaped to its own shape is itself (the identity basis still)."""
    x = inputs[0]
    return x if tuple(attrs["shape"]) == x.shape else None


def _loop_alias(node: Any, shapes: list) -> tuple:
    """In a loop compiled whole: the same elements in the same order."""
    return ("alias",)


def _loop_stacked(node: Any, args: list[str], stacked: list[bool], shapes: list,
                  steps: str) -> str | None:
    """On all steps: each step's block of the stack reshaped (row-major)."""
    return f"{args[0]}.reshape(({steps},) + {tuple(node.shape)!r})" if stacked[0] else None


RESHAPE = register(Primitive(
    "reshape", _reshape,
    [lambda o, g, out, x, shape: o.reshape(g, shape_of(x))],
    lambda o, ts, out, x, shape: o.reshape(ts[0], shape),
    "{0}.reshape({shape})", reduces=same_shape, simplifies=reshapes_if_needed,
    sympy=SymPyForm(PASSES_ON.entry, lambda sp, x, shape: x, array=True), linear=JOINTLY,
    on_stacks=_reshape_stacks, on_diagonal=_reshape_diagonal, alias=True,
    sized="reshape", python="{0}",
    mask=lambda o, m, i, out, x, shape:
        None if m is None else o.reshape(full_mask(o, m, shape_of(out)), shape_of(x)),
    cases=[Case(((),), {"shape": (1, 1)}), Case(((3, 4),), {"shape": (12,)}),
     Case(((2, 3, 4),), {"shape": (6, -1)}), Case(((3, 1),), {"shape": (3,)})],
    batch=lambda o, xs, batched, shape: o.reshape(xs[0], shape_of(xs[0])[:1] + tuple(shape)),
    taylor=linear("reshape"), numpy="{0}.reshape({shape})",
    loop_forms=LoopForms(kernel=_loop_alias, stacked=_loop_stacked),
    schema=attrs(shape_rule=reshaped, shape=need(RESHAPE_SHAPE)), saves=()))


def _transpose(x, axes=None):
    if type(x) is np.ndarray:       # np.transpose's own work, without its dispatch layers
        return x.transpose(axes)
    return np.transpose(x, axes)


def _inverse(axes):
    return None if axes is None else tuple(int(i) for i in np.argsort(axes))


def _transpose_fmt(args, attrs, render):
    axes = attrs.get("axes")
    return f"{args[0]}.T" if axes is None else f"{args[0]}.transpose({render(axes, 'axes')})"


TRANSPOSE = register(Primitive(
    "transpose", _transpose,
    [lambda o, g, out, x, axes=None: o.transpose(g, _inverse(axes))],
    lambda o, ts, out, x, axes=None: o.transpose(ts[0], axes),
    _transpose_fmt,
    reduces=undone_transpose,
    simplifies=transposes_if_needed,
    sympy=SymPyForm(None, lambda sp, x, axes=None: x.T, array=True), linear=JOINTLY,
    mask=lambda o, m, i, out, x, axes=None:
        None if m is None else o.transpose(full_mask(o, m, shape_of(out)), _inverse(axes)),
    cases=[Case(((3,),)), Case(((3, 4),)), Case(((2, 3, 4),), {"axes": (1, 0, 2)}),
     Case(((2, 3, 4),), {"axes": (2, 0, 1)})],
    batch=lambda o, xs, batched, axes=None: o.transpose(xs[0], _batch_axes(xs[0], axes)),
    taylor=linear("transpose"), numpy="{0}.transpose({axes_arg})",
    schema=attrs(shape_rule=transposed, axes=axis(none=True, many=True, one=False)), saves=()))


def _batch_axes(x, axes):
    """The permutation of a batched transpose: the batch axis stays first."""
    per = tuple(range(len(shape_of(x)) - 1))[::-1] if axes is None else tuple(axes)
    return (0,) + shift_axis(per, "transpose", x)

# ---------------------------------------------------------------- joins


def _concatenate(*xs, axis=0):
    return np.concatenate(xs, axis=axis)


def _part(i: int, xs: Sequence, axis: int) -> tuple:
    """The index selecting input i of a concatenate along ``axis`` from its output."""
    ndim = len(shape_of(xs[0]))
    ax = axis % ndim
    start = sum(shape_of(x)[ax] for x in xs[:i])
    return (slice(None),) * ax + (slice(start, start + shape_of(xs[i])[ax]),)


def _zeros_for_missing(ts, xs):
    if all(t is None for t in ts):
        return None
    return [np.zeros(shape_of(x), dtype=dtype_of(x) or np.float64) if t is None else t
            for t, x in zip(ts, xs)]


def _join_fmt(fn):
    def fmt(args, attrs, render):
        return f"{fn}([{', '.join(args)}], axis={attrs.get('axis', 0)})"
    return fmt


def _concatenate_jvp(o: PrimitiveMethods, ts, out, *xs, axis=0):
    ts = _zeros_for_missing(ts, xs)
    return None if ts is None else o.concatenate(ts, axis=axis)


CONCATENATE = register(Primitive(
    "concatenate", _concatenate,
    [lambda o, g, out, i, *xs, axis=0: o.getitem(g, _part(i, xs, axis))],
    _concatenate_jvp, _join_fmt("concatenate"),
    [Case(((3,), (2,))), Case(((3, 4), (1, 4), (2, 4)), {"axis": 0}),
     Case(((2, 3), (2, 1)), {"axis": -1})], linear=JOINTLY,
    variadic=True, batch=lambda o, xs, batched, axis=0: o.concatenate(
        _all_batched(o, xs, batched), axis=_join_axis("concatenate", axis, xs, batched, 0)),
    taylor=linear("concatenate"), schema=attrs(shape_rule=joined, axis=AXIS_OR_NONE),
    sympy=ON_ENTRIES, saves=()))


def _join_axis(op: str, axis: int, xs, batched, extra: int) -> int:
    """The axis of a batched join, checked against one example of its first batched input."""
    return shift_axis(axis, op, next(x for x, b in zip(xs, batched) if b), extra=extra)


def _all_batched(o: PrimitiveMethods, xs, batched):
    """The inputs with the shared ones expanded along the batch axis."""
    n = batch_size(xs, batched)
    return [x if b else o.expand(x, (n,) + shape_of(x)) for x, b in zip(xs, batched)]


def _stack(*xs, axis=0):
    return np.stack(xs, axis=axis)


def _stack_vjp(o: PrimitiveMethods, g, out, i, *xs, axis=0):
    ax = axis % len(shape_of(out))
    return o.getitem(g, (slice(None),) * ax + (i,))


def _stack_jvp(o: PrimitiveMethods, ts, out, *xs, axis=0):
    ts = _zeros_for_missing(ts, xs)
    return None if ts is None else o.stack(ts, axis=axis)


STACK = register(Primitive(
    "stack", _stack, [_stack_vjp], _stack_jvp, _join_fmt("stack"),
    [Case(((), ())), Case(((3,), (3,), (3,))), Case(((3, 4), (3, 4)), {"axis": 1}),
     Case(((2, 3), (2, 3)), {"axis": -1})], linear=JOINTLY,
    variadic=True, batch=lambda o, xs, batched, axis=0: o.stack(
        _all_batched(o, xs, batched), axis=_join_axis("stack", axis, xs, batched, 1)),
    taylor=linear("stack"), schema=attrs(shape_rule=stacked, axis=axis(extra=1)),
    sympy=ON_ENTRIES, saves=()))

# ---------------------------------------------------------------- dtype


def _cast(x, dtype):
    # (a constant folded on Python numbers: recorded constants of shape () are Python scalars)
    # (complex to real keeps the real part, as np.real does: the cast is real-linear)
    if np.iscomplexobj(x) and np.dtype(dtype).kind != "c":
        x = np.real(x)
    return x.astype(dtype) if hasattr(x, "astype") else np.array(x, dtype=dtype)


def _cast_numpy(shapes: list, attrs: dict, dtypes: list) -> str:
    """``{0}.astype(dtype)``, of the real part for a complex input cast to a real dtype."""
    if dtypes[0].kind == "c" and np.dtype(attrs["dtype"]).kind != "c":
        return "np.real({0}).astype({dtype})"
    return "{0}.astype({dtype})"


def _cast_reduces(prim: Primitive, inputs: Sequence[Any], attrs: dict, describe: Any) -> Any:
    """x for a cast of a computed x to its own dtype."""
    x = describe(inputs[0])
    return inputs[0] if not x.constant and x.dtype == np.dtype(attrs["dtype"]) else None


def _cast_simplifies(prim: Primitive, inputs: Sequence[Any], attrs: dict) -> bool:
    x = inputs[0]
    return not hasattr(x, "prim") or x.dtype == np.dtype(attrs["dtype"])


def _cast_sympy(sp: Any, x: Any, dtype: Any) -> Any:
    """A cast in SymPy: a condition cast to a number is 1 where it holds, 0 elsewhere; any
    other value passes on."""
    return sp.Piecewise((1, x), (0, True)) if isinstance(x, sp.logic.boolalg.Boolean) else x


def _to_inexact(attrs: dict) -> bool:
    """cast is linear only to a floating (or complex) dtype."""
    return np.issubdtype(np.dtype(attrs["dtype"]), np.inexact)


CAST = register(Primitive(
    "cast", _cast,
    [lambda o, g, out, x, dtype: o.cast(g, dtype_of(x))],
    lambda o, ts, out, x, dtype: o.cast(ts[0], dtype),
    method_fmt("astype", "dtype"),
    [Case(((3,),), {"dtype": np.dtype(np.float64)}), Case(((),), {"dtype": np.dtype(np.float64)})],
    reduces=_cast_reduces, simplifies=_cast_simplifies, sympy=SymPyForm(_cast_sympy),
    # (on floats an entry is a float64 number or a decision: a decision's cast to a number is
    # 0.0 or 1.0, a number's to a decision is bool(x), which the floats wrap it in)
    python="float({0})",
    linear=Linear(JOINT, when=_to_inexact), batch=mapped("cast"),
    taylor=linear("cast"), numpy_at=_cast_numpy,
    schema=attrs(shape_rule=cast, dtype=need(DTYPE)), saves=()))


# ---------------------------------------------------------------- Ops methods

class ShapeOps:
    """The shape primitives as methods of an Ops."""

    def expand(self, x: Any, shape: Sequence[int], name: str | None = None) -> Variable:
        """Broadcast x to ``shape`` (numpy's broadcast_to)."""
        return self.apply(EXPAND, (x,), {"shape": shape_tuple(shape)}, name)

    def reshape(self, x: Any, shape: Sequence[int], name: str | None = None) -> Variable:
        """x with a new shape holding the same number of entries (-1 infers one axis)."""
        return self.apply(RESHAPE, (x,), {"shape": shape_tuple(shape)}, name)

    def transpose(self, x: Any, axes: Sequence[int] | None = None,
                  name: str | None = None) -> Variable:
        """x with its axes permuted; reversed when ``axes`` is None."""
        return self.apply(TRANSPOSE, (x,), {"axes": None if axes is None else
                                             shape_tuple(axes)}, name)

    def concatenate(self, xs: Sequence[Any], axis: int = 0, name: str | None = None) -> Variable:
        """Join arrays along an existing axis."""
        return self.apply(CONCATENATE, tuple(xs), {"axis": int(axis)}, name)

    def stack(self, xs: Sequence[Any], axis: int = 0, name: str | None = None) -> Variable:
        """Join arrays along a new axis."""
        return self.apply(STACK, tuple(xs), {"axis": int(axis)}, name)

    def cast(self, x: Any, dtype: Any, name: str | None = None) -> Variable:
        """x converted to a floating ``dtype`` (float16, float32, float64) or a complex one
        (complex64, complex128; complex to real keeps the real part)."""
        dtype = np.dtype(dtype)
        if dtype.kind not in "fc" or dtype.itemsize > 16 or dtype.kind == "f" and \
                dtype.itemsize > 8:
            hint = instead("index") if dtype.kind in "biu" else \
                "; use float16, float32, float64, complex64 or complex128"
            raise error("cast", (x,), f"cannot differentiate values of dtype {dtype}{hint}",
                        DTypeError)
        return self.apply(CAST, (x,), {"dtype": dtype}, name)


def shape_tuple(shape: Any) -> tuple:
    """A shape argument (an int or a sequence of ints) as a tuple of ints."""
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(n) for n in shape)
