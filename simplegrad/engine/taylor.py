"""Taylor propagation: truncated series pushed from x to y in one forward walk of the tape.

Each entry between x and f's output carries a truncated Taylor series, its coefficient list
``[c0, c1, ..., cK]`` in t (``c0`` is the entry itself; ``None`` is an exact zero). Each
primitive's Taylor rule, the ``taylor`` field of its record (beside its jvp, in its family
module; the shared ones in primitives/taylor.py), maps the series of the inputs to the series of
the output: products by the Cauchy product, exp, log, sin/cos, tanh, sigmoid, sqrt, pow and div by
their recurrences, linear (and piecewise linear) primitives coefficient-wise through their
own jvp. Every coefficient is computed by calling primitives on ``o``, the Ops when the
arguments are Variables (so the derivatives are recorded and can be differentiated again) or
``VALUES`` when they are arrays (``sg.taylor`` in transforms/taylor.py decides which).
Cost: O(K^2) primitive calls per nonlinear entry, against the exponential growth of nested
first-order sweeps.

A rule has the signature ``rule(o, ss, out, *xs, **attrs) -> series``: ``ss`` holds one
series per input (an input that does not depend on t has ``[x, None, ..., None]``), ``out``
and ``xs`` are the primal output and inputs, and the result is the output's series.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import NotDifferentiableError
from ..primitives.core import dtype_of, shape_of
from ..primitives.series import Series
from .batching import Batched, innermost, levels_of, stacked, union, unstack
from .forward import forward_sweep
from .tape import ancestors
from .variable import UNARY, Entry, Variable, entry_of

if TYPE_CHECKING:
    from ..primitives import PrimitiveMethods


def missing_rule(y: Variable, x: Variable) -> Variable | None:
    """The first entry between x and y that carries a tangent but whose primitive has no
    Taylor rule of its own (none, or one by nested jvps); None when every one has one."""
    y, x = innermost(y), innermost(x)
    moving = {x.node}
    for out in ancestors(y, x.position if x.prim is None else x.position + 1):
        if not out.prim.differentiable:
            continue
        if any(type(i) is Entry and i in moving for i in out.inputs):
            if out.prim.taylor is None or getattr(out.prim.taylor, "recorded", False):
                return out      # (a rule by nested jvps: sg.derivative nests them directly)
            moving.add(out)
    return None


def propagate(o: PrimitiveMethods, y: Variable, x: Variable, v: Any, order: int,
              recording: bool) -> Series:
    """The Taylor series of y when x moves along x + t v (coefficients, not derivatives);
    of values batched by vmap, on their stacks (v at some of x's levels), wrapped back."""
    if type(y) is Batched or type(x) is Batched:
        levels = levels_of(x)
        full = union(levels, levels_of(y))
        coefs = propagate(o, stacked(o, y, full, y.name), innermost(x),
                          stacked(o, v, levels, "the direction"), order, recording)
        return [c if c is None or not isinstance(c, Variable) else unstack(c, full)
                for c in coefs]
    if order == 0:
        return [y if recording else y.raw]
    start = [x if recording else x.raw, v] + [None] * (order - 1)
    return carry(o, y, {x: start}, order, recording)


def carry(o: PrimitiveMethods, y: Variable, known: dict, order: int, recording: bool) -> Series:
    """The Taylor series of y from the series ``known`` holds for some of its ancestors (any
    coefficients, not only a line x + t v): each entry's Taylor rule, one forward sweep."""
    if recording:
        def step(out: Entry, ss: list) -> Series | None:
            if not out.prim.differentiable:
                return None
            rule = out.prim.taylor or _no_rule(out)
            xs = out.inputs
            ss = [s if s is not None else [xi] + [None] * order for s, xi in zip(ss, xs)]
            res = rule(o, ss, out, *xs, **(out.attrs or {}))
            return _fitted(o, res, out.shape, out.dtype, order, out)
    else:
        def step(out: Entry, ss: list) -> Series | None:
            prim = out.prim
            if not prim.differentiable:
                return None
            rule = prim.taylor or _no_rule(out)
            attrs = out.attrs or _NO_ATTRS
            value = out.raw
            if out.shape == ():
                # 0-d values as numpy scalars: the rules' arithmetic at a point is then scalar
                # arithmetic (the same IEEE operations), not a ufunc call per term
                if out.more is None and out.in1 is UNARY:     # (one input: the common case)
                    a = out.in0
                    a = a.raw if type(a) is Entry else a
                    xs = (a[()] if type(a) is np.ndarray and a.ndim == 0 else a,)
                    ss = [_points(ss[0])]
                else:
                    xs = [_scalar(i.raw if type(i) is Entry else i) for i in out.inputs]
                    ss = [_points(s) if s is not None else [xi] + [None] * order
                          for s, xi in zip(ss, xs)]
                if type(value) is np.ndarray and value.ndim == 0:
                    value = value[()]
                if getattr(rule, "recorded", False):
                    res = _on_scratch(rule, ss, out.raw, xs, attrs)
                else:
                    res = rule(o, ss, value, *xs, **attrs)
                # (numpy scalars of the entry's dtype, or Python floats for float64, read
                # directly: the common case)
                if set(map(type, res)) <= (_KINDS.get(type(value)) or {type(value), _NONE}):
                    res[0] = out.raw
                    return res
            else:
                xs = [i.raw if type(i) is Entry else i for i in out.inputs]
                ss = [_held(s) if s is not None else [xi] + [None] * order
                      for s, xi in zip(ss, xs)]
                if getattr(rule, "recorded", False):
                    res = _on_scratch(rule, ss, value, xs, attrs)
                else:
                    res = rule(o, ss, value, *xs, **attrs)
            res = _fitted(o, res, out.shape, out.dtype, order, None)
            res[0] = out.raw
            return res

    known = {entry_of(k): v for k, v in known.items()}
    s = forward_sweep(y.rec.tape, y, list(known), known, step, what="Taylor series").get(y.node)
    if s is None:
        return [y if recording else y.raw] + [None] * order
    s[0] = y if recording else y.raw
    return s


def _no_rule(out: Entry) -> Any:
    """NotDifferentiableError: ``out``'s primitive has no Taylor rule."""
    raise NotDifferentiableError(
        f"taylor: primitive {out.prim.name!r} (entry {out.name}) has no Taylor rule; "
        "use sg.derivative (nested jvps) for this function")


def _fitted(o: PrimitiveMethods, res: Series, shape: tuple, dtype: Any, order: int,
            out: Entry | None) -> Series:
    """A rule's series with each coefficient expanded to the entry's shape and cast to its
    dtype where it is not already (a rule may give a broadcastable or wider term); c0 set to
    ``out`` when given."""
    for k in range(1, order + 1):
        c = res[k]
        if c is None:
            continue
        if out is None and getattr(c, "shape", None) == shape and \
                getattr(c, "dtype", None) == dtype:
            continue        # (a numpy value that fits: the common case, read directly)
        if shape_of(c) != shape:
            c = o.expand(c, shape)
        if dtype_of(c) != dtype:
            c = o.cast(c, dtype)
        res[k] = c
    if out is not None:
        res[0] = out
    return res


_NONE = type(None)
_NO_ATTRS: dict = {}
# the coefficient types a rule's series of a 0-d entry is kept in, by the type of its value: its
# numpy scalars, and for float64 Python floats too (the same values: a rule computing on Python
# floats gives them, and they are turned back into numpy scalars only for a rule that reads them)
_KINDS = {t: {t, _NONE} for t in (np.float16, np.float32, np.complex64, np.complex128)}
_KINDS[np.float64] = {np.float64, float, _NONE}


def _scalar(a: Any) -> Any:
    """A 0-d array as its numpy scalar; anything else as it is."""
    return a[()] if type(a) is np.ndarray and a.ndim == 0 else a


def _points(s: Series) -> Series:
    """A series at a point as a rule reads it: numpy scalars (a 0-d array's, and float64 for a
    Python float the walk held)."""
    return [c if c is None or type(c) is _F64 else _F64(c) if type(c) is float else
            c[()] if type(c) is np.ndarray and c.ndim == 0 else c for c in s]


def _held(s: Series) -> Series:
    """A series as a rule on arrays reads it: as it is, a Python float the walk held as a
    float64 scalar."""
    return [_F64(c) if type(c) is float else c for c in s]


_F64 = np.float64


def _on_scratch(rule: Any, ss: list, out: Any, xs: list, attrs: dict) -> Series:
    """A rule that records (nested jvps: ``recorded``) run on a scratch Ops for a value-only
    walk: the values become its leaves, the coefficients come back as values."""
    from .ops import Ops
    w = Ops()

    def leaf(a: Any) -> Any:
        return a if a is None or not hasattr(a, "shape") else w.var(a, requires_grad=False)
    res = rule(w, [[leaf(c) for c in s] for s in ss], out, *[leaf(x) for x in xs], **attrs)
    return [c if c is None else getattr(c, "raw", c) for c in res]
