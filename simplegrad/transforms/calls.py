"""What a transform's call carries beside the differentiated arguments: keyword arguments and
``has_aux`` outputs.

Keyword arguments reach ``f`` unchanged and are never differentiated (as in JAX); they count
for which Ops the transform records on (a Variable among them belongs to the caller), and
under ``no_grad`` they are handed to the paused call with the positional ones.

``has_aux=True``: ``f`` returns ``(output, aux)``; the output is differentiated and ``aux``,
any pytree, is handed back beside the result: Variables as they are when nested (the
transform around can differentiate them, as JAX's tracers), else plain arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..engine.ops import Ops
from ..engine.variable import Variable
from ..errors import ArgumentError
from ..pytree import tree_map
from .paused import run_paused


def everything(args: Sequence[Any], kwargs: dict) -> tuple:
    """The positional and keyword arguments together, for ``context`` to find the Ops."""
    return (*args, *kwargs.values()) if kwargs else tuple(args)


def paused(ops: Ops, fn: Callable, args: Sequence[Any], kwargs: dict) -> Any:
    """``run_paused`` of ``fn(*args, **kwargs)``."""
    if not kwargs:
        return run_paused(ops, fn, args)
    n, keys = len(args), list(kwargs)
    return run_paused(ops, lambda *a: fn(*a[:n], **dict(zip(keys, a[n:]))),
                      (*args, *kwargs.values()))


def split_aux(fname: str, out: Any, has_aux: bool) -> tuple[Any, Any]:
    """``(output, aux)`` of f's result (aux None without ``has_aux``)."""
    if not has_aux:
        return out, None
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        got = f"a {type(out).__name__} of length {len(out)}" if isinstance(
            out, (tuple, list)) else type(out).__name__
        raise ArgumentError(f"{fname}: with has_aux=True, f must return a pair (output, aux), "
                            f"got {got}")
    return out[0], out[1]


def aux_result(nested: bool, aux: Any) -> Any:
    """``aux`` handed back: as it is when nested, else its Variables as arrays of their own."""
    if nested:
        return aux
    return tree_map(lambda a: np.array(a.raw) if isinstance(a, Variable) else a, aux)


def check_has_aux(fname: str, has_aux: Any) -> bool:
    """``has_aux`` checked to be a bool."""
    if not isinstance(has_aux, (bool, np.bool_)):
        raise ArgumentError(f"{fname}: has_aux must be True or False, not {has_aux!r}")
    return bool(has_aux)
