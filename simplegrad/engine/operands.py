"""What a primitive may be given besides Variables, and the errors that name what it was given.

Constants (Python numbers, bools, numpy arrays and scalars, lists) are converted once, when an
entry records them: a 0-d constant becomes a Python number, a bool array stays bool, any other
array becomes a read-only array of the dtype of the entry's first float Variable, or keeps its
own when no input is a float Variable (a bool condition never makes a branch bool), copied
unless nothing can write through it already. User data for leaves becomes a fresh float array.

An Ops made with ``borrow=True`` records arrays of the right dtype as read-only views of the
caller's memory instead of copies. The transforms use it for the Ops they make and release
within one call: nothing recorded outlives the call, so the caller cannot write to an array
while a tape that reads it is alive.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import (
    ArgumentError,
    AxisError,
    DTypeError,
    LinAlgError,
    OutOfBoundsError,
    ShapeError,
    SimplegradError,
)
from ..primitives.core import error
from .variable import Entry, Variable

if TYPE_CHECKING:
    from ..primitives.core import Primitive
    from .ops import Ops

MASKED = ("masked arrays are not supported (the mask would be dropped): pass "
          "np.ma.filled(m, fill), or pass m.data and apply the mask inside with "
          "np.where(np.ma.getmaskarray(m), fill, x)")
_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
_SCALAR = {"b": bool, "i": int, "u": int}


def constant(prim: Primitive, inputs: tuple, x: Any, dtype: np.dtype | None,
             borrow: bool = False) -> Any:
    """One constant operand as it is recorded (see the module docstring); ``borrow``: an array
    of the right dtype is recorded as a read-only view of the caller's memory, not a copy."""
    if type(x) is np.ndarray and x.ndim and x.dtype == dtype:     # the common case, early
        if not x.flags.writeable and frozen(x):
            return x
        if borrow:
            out = x.view()
            out.flags.writeable = False
            return out
    if isinstance(x, (bool, np.bool_)):     # a condition or mask: stays bool
        return bool(x)
    if isinstance(x, np.ma.MaskedArray):
        raise error(prim.name, inputs, MASKED, ArgumentError)
    if not isinstance(x, (np.ndarray, np.generic, list, tuple, float, int)):
        raise error(prim.name, inputs, f"cannot take a {type(x).__name__} as an operand",
                    ArgumentError)
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
        raise error(prim.name, inputs, f"constant of dtype {arr.dtype} is not supported",
                    DTypeError)
    if arr.ndim == 0:
        return _SCALAR.get(arr.dtype.kind, float)(arr)
    same = dtype is None or arr.dtype == dtype or arr.dtype.kind == "b"
    if same and frozen(arr):
        return arr          # read-only all the way down (a Variable's value): no copy
    if same and borrow:
        out = arr.view()    # no copy: the Ops lives no longer than the caller's call
    elif arr.dtype.kind == "b":             # masks and conditions stay bool
        out = arr.copy()
    else:
        out = np.array(arr, dtype=dtype)    # the caller may mutate theirs later
    out.flags.writeable = False
    return out


def recordable(ops: Ops, prim: Primitive, inputs: tuple) -> tuple:
    """Inputs other than ``ops``' Variables, entries and Python numbers, made recordable:
    another Ops' Variable is joined (``ops.join``: a free one becomes a leaf, any other is
    refused), constants are converted. Returns the inputs as recorded (entries and constants),
    their values and whether any input requires grad (None when none is a Variable)."""
    nodes = list(inputs)
    values = list(inputs)
    requires = None
    real = None     # the first float Variable's dtype: the constants' (a bool condition or an
    constants = False   # integer index never decides it; without one they keep their own)
    for i, x in enumerate(inputs):
        if isinstance(x, Variable):
            if x.rec is not ops:
                node = ops.join(prim, tuple(inputs), x)     # (a leaf entry, holding the value)
                values[i] = node.raw
            else:
                node = x.node
                values[i] = x.raw
        elif type(x) is Entry:
            node = x
            values[i] = x.raw
        else:
            if type(x) is not float and type(x) is not int:
                constants = True
            continue
        nodes[i] = node
        requires = requires or node.requires_grad
        if real is None and node.dtype.kind == "f":
            real = node.dtype
    if constants:
        frozen_inputs = tuple(inputs)
        for i, x in enumerate(nodes):
            if type(x) is not Entry and type(x) is not float and type(x) is not int:
                nodes[i] = values[i] = constant(prim, frozen_inputs, x, real, ops.borrow)
    return tuple(nodes), values, requires


def float_array(value: Any, name: str | None, borrow: bool = False) -> np.ndarray:
    """A fresh float array from user data (bool and int become float64); ``borrow``: a view of
    a float array, not a copy."""
    if isinstance(value, Variable):
        value = value.raw
    if isinstance(value, np.ma.MaskedArray):
        raise ArgumentError(f"var {name or ''}: {MASKED}")
    try:
        arr = np.asarray(value).view() if borrow else np.array(value)
    except MemoryError:
        raise
    except Exception as e:
        raise DTypeError(f"var {name or ''}: cannot make an array of {type(value).__name__}: "
                         f"{e}") from None
    if arr.dtype in _FLOATS:
        return arr
    if arr.dtype.kind in "biu":
        return arr.astype(np.float64)
    raise DTypeError(f"var {name or ''}: values of dtype {arr.dtype} cannot be differentiated; "
                     "use real floats (float16, float32 or float64)")


def frozen(arr: np.ndarray) -> bool:
    """True when neither the array nor any array it views can be written through."""
    while isinstance(arr, np.ndarray):
        if arr.flags.writeable:
            return False
        arr = arr.base
    return True


def check_name(name: Any) -> str | None:
    """A given name as it is stored: a str, or None for a v-number."""
    if name is not None and not isinstance(name, str):
        raise ArgumentError(f"a name must be a str, got {type(name).__name__}")
    return name

# ---------------------------------------------------------------- errors

def translate(prim: Primitive, inputs: tuple, e: Exception) -> Exception:
    """numpy's exception from a forward as ours, with names and shapes (ours pass as they are)."""
    if isinstance(e, SimplegradError):     # ours already (from a custom forward, say)
        return e
    if isinstance(e, np.linalg.LinAlgError):
        kind = LinAlgError
    elif isinstance(e, np.exceptions.AxisError):
        kind = AxisError
    elif isinstance(e, IndexError):
        kind = OutOfBoundsError
    elif isinstance(e, ValueError):
        kind = ShapeError
    elif isinstance(e, TypeError):
        kind = ArgumentError
    else:
        return e
    reason = str(e).strip()     # numpy's message may already name the function
    if reason.startswith(prim.name + ": "):
        reason = reason[len(prim.name) + 2:]
    return error(prim.name, inputs, reason, kind)
