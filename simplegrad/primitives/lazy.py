"""Forwards on lazy arrays: a dask array in gives a dask array out, nothing computed.

Most forwards call numpy functions that dask dispatches (``np.tanh``, ``np.sum(axis=)``,
``np.matmul``), so they need nothing here. The few numpy has and dask lacks, or has only for
one 2-D block (``np.linalg.*``, ``np.add.at``, ``argsort``), go through ``per_block``: on
numpy arrays it is the numpy function; on dask arrays it is ``dask.array.apply_gufunc`` of that
function with the core axes (the matrix, the sorted axis) whole in each block, so a stack of
matrices runs block by block on the workers. A forward that still cannot stay lazy raises
``MaterializeError`` naming the primitive (``refuse``); a Program run with
``materialize=True`` then computes that entry's inputs and goes on.

dask is never imported here: a dask array exists only if its module has been imported.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import MaterializeError


def dask_array(*xs: Any) -> Any:
    """The ``dask.array`` module when one of ``xs`` is a dask array, else None."""
    da = sys.modules.get("dask.array")
    array = getattr(da, "Array", None)
    if array is None:
        return None
    return da if any(isinstance(x, array) for x in xs) else None


def is_lazy(x: Any) -> bool:
    """Whether ``x`` is an array of another library: one that implements numpy's dispatch
    protocols (``__array_function__`` or ``__array_ufunc__``)."""
    return not isinstance(x, (np.ndarray, np.generic)) and (
        hasattr(x, "__array_function__") or hasattr(x, "__array_ufunc__"))


def refuse(name: str, *xs: Any, reason: str = "") -> None:
    """Raise MaterializeError for primitive ``name`` when one of ``xs`` is a lazy array."""
    lazy = [x for x in xs if is_lazy(x)]
    if lazy:
        kinds = ", ".join(f"{type(x).__name__} of shape {tuple(x.shape)}" for x in lazy)
        raise MaterializeError(f"{name}: would compute its input ({kinds}) to run in numpy"
                               f"{': ' + reason if reason else ''}; pass materialize=True to "
                               "allow it")


def result_dtype(*xs: Any) -> np.dtype:
    """The floating dtype numpy's linear algebra returns for these inputs."""
    return np.result_type(*[getattr(x, "dtype", np.float64) for x in xs], 1.0)


def per_block(fn: Callable, signature: str, *xs: Any, axes: Sequence | None = None,
              dtypes: Any = None, sizes: dict | None = None, **kwargs: Any) -> Any:
    """``fn(*xs, **kwargs)``; on dask arrays, fn per block with its core axes whole (lazy).

    ``signature`` is the generalized-ufunc signature of fn (``"(n,n)->()"``), ``axes`` where
    its core axes are (default: the last ones), ``dtypes`` the output dtype(s) (default: the
    linear-algebra result type), ``sizes`` the sizes of core axes only outputs have.
    """
    da = dask_array(*xs)
    if da is None:
        return fn(*xs, **kwargs)
    outputs = signature.split("->")[1].count("(")
    if dtypes is None:
        dtype = result_dtype(*xs)
        dtypes = dtype if outputs == 1 else [dtype] * outputs
    if outputs == 1 and np.dtype(dtypes).kind == "f" and \
            any(np.dtype(x.dtype).kind == "c" for x in xs):
        # a real output of complex inputs: dask would cast a complex sample to it, warning
        meta = np.empty((0,) * xs[0].ndim, dtypes)
        return da.apply_gufunc(fn, signature, *xs, axes=axes, allow_rechunk=True, meta=meta,
                               output_sizes=sizes, **kwargs)
    return da.apply_gufunc(fn, signature, *xs, axes=axes, allow_rechunk=True,
                           output_dtypes=dtypes, output_sizes=sizes, **kwargs)


def blockwise(fn: Callable) -> Callable:
    """An elementwise forward ``fn(x)`` that runs block by block on a dask array (lazy)."""
    def forward(x: Any) -> Any:
        if dask_array(x) is None:
            return fn(x)
        return per_block(fn, "()->()", x, dtypes=np.result_type(x.dtype, np.float16))
    forward.__name__ = forward.__qualname__ = fn.__name__
    forward.__doc__ = fn.__doc__
    return forward


def scan_along(fn: Callable, x: Any, axis: Any, dtype: Any) -> Any:
    """``fn(x, axis)`` for a scan along one axis; on a dask array, per block with that axis
    whole (lazy)."""
    if dask_array(x) is None or axis is None:
        return fn(x, axis)
    return per_block(lambda b: fn(b, -1), "(i)->(i)", x, axes=[(axis,), (axis,)], dtypes=dtype)


def whole(fn: Callable, shape: tuple, dtype: Any, /, *xs: Any, **kwargs: Any) -> Any:
    """``fn(*xs, **kwargs)`` (an array of ``shape``); on dask arrays, one task that gets each
    input whole: lazy, for a forward with no blockwise form (a scatter)."""
    da = dask_array(*xs)
    if da is None:
        return fn(*xs, **kwargs)
    delayed = sys.modules["dask"].delayed(fn, pure=True)
    return da.from_delayed(delayed(*xs, **kwargs), tuple(shape), dtype=dtype,
                           meta=np.empty((0,) * len(shape), dtype))
