"""``sg.ravel_pytree``: a pytree as one flat vector and the function rebuilding it
(``jax.flatten_util.ravel_pytree``).

The leaves are raveled in flattening order (dict keys sorted, registered nodes by their
``flatten``) and concatenated in their common dtype (``np.result_type``); ``unravel`` slices
a vector of that length back into the leaves' shapes and dtypes. On Variables both ways are
recorded primitives (``reshape``, ``concatenate``, ``getitem``, ``cast``), so gradients flow
through either, at every order and under vmap (shapes are one example's); on arrays both are
numpy and give arrays. An integer leaf unraveled from a Variable keeps the vector's float
dtype: a cast to an integer has no derivative.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine.variable import Variable
from ..errors import ShapeError
from ..pytree import tree_flatten, tree_unflatten
from .arguments import leaf_shape, recording_ops


def ravel_pytree(tree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``(flat, unravel)``: the leaves of ``tree`` as one 1-d vector, and its inverse."""
    leaves, treedef = tree_flatten(tree)
    shapes = [tuple(leaf_shape(a)) for a in leaves]
    dtypes = [_dtype(a) for a in leaves]
    dtype = np.result_type(*dtypes) if leaves else np.dtype(np.float64)
    sizes = [math.prod(s) for s in shapes]
    total = sum(sizes)
    ops = recording_ops("ravel_pytree", leaves)
    if ops is None:
        flat = np.concatenate([np.ravel(np.asarray(a, dtype=dtype)) for a in leaves]) \
            if leaves else np.zeros(0, dtype)
    else:
        parts = [ops.reshape(a if a.dtype == dtype else ops.cast(a, dtype), (n,))
                 if isinstance(a, Variable) else np.ravel(np.asarray(a, dtype=dtype))
                 for a, n in zip(leaves, sizes)]
        flat = parts[0] if len(parts) == 1 else ops.concatenate(parts)

    def unravel(vector: Any) -> Any:
        """The pytree of ``tree``'s structure, shapes and dtypes holding ``vector``'s entries."""
        shape = tuple(leaf_shape(vector))
        if shape != (total,):
            raise ShapeError(f"ravel_pytree: unravel expects a vector of shape ({total},) (the "
                             f"{len(leaves)} leaves of {treedef}), got shape {shape}")
        out, lo = [], 0
        for s, n, dt in zip(shapes, sizes, dtypes):
            if isinstance(vector, Variable):
                piece = vector.rec.reshape(vector.rec.getitem(vector, slice(lo, lo + n)), s)
                # (a cast to an integer has no derivative: such a leaf keeps the float dtype)
                out.append(piece if piece.dtype == dt or dt.kind != "f"
                           else vector.rec.cast(piece, dt))
            else:
                out.append(np.asarray(vector[lo:lo + n]).reshape(s).astype(dt, copy=True))
            lo += n
        return tree_unflatten(treedef, out)
    return flat, unravel


def _dtype(a: Any) -> np.dtype:
    return a.dtype if isinstance(a, Variable) else np.asarray(a).dtype
