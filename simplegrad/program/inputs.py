"""A program's arguments: arrays (or arrays of another library, kept lazy) checked against
its inputs' shapes and dtypes before anything runs."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engine.variable import Variable
from ..errors import ArgumentError, DTypeError, ShapeError
from ..primitives.lazy import is_lazy
from .nodes import Input

RESIZED = 8     # programs at other input shapes kept per program


def as_array(a: Any) -> Any:
    """An argument as an ndarray, or as itself when it is an array of another library that
    dispatches numpy's functions (its ``.shape`` and ``.dtype`` read, never converted)."""
    return a if is_lazy(a) and hasattr(a, "shape") and hasattr(a, "dtype") else np.asarray(a)


def input_value(who: str, spec: Input, a: Any) -> Any:
    """``a`` as input ``spec`` (see ``as_array``: an array of another library is kept, its
    ``.shape``/``.dtype`` read, never converted), cast safely to the input's dtype."""
    if isinstance(a, Variable):
        raise ArgumentError(f"{who}: input {spec.name} got the Variable {a.name}; pass its "
                            f"value ({a.name}.value): a program runs on arrays")
    arr = as_array(a)
    error = input_error(who, spec, tuple(arr.shape), np.dtype(arr.dtype))
    if error is not None:
        raise error
    return arr if arr.dtype == spec.dtype else arr.astype(spec.dtype)


def input_error(who: str, spec: Input, shape: tuple, dtype: np.dtype) -> Exception | None:
    """The error an argument of this shape and dtype gets as input ``spec``, or None."""
    if shape != spec.shape:
        return ShapeError(f"{who}: input {spec.name} has shape {spec.shape}, got {shape}")
    if dtype != spec.dtype and not np.can_cast(dtype, spec.dtype, "safe"):
        return DTypeError(f"{who}: input {spec.name} has dtype {spec.dtype}, got {dtype}; "
                          f"convert it with .astype({spec.dtype.name!r})")
    return None
