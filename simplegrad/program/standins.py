"""Stand-in values of declared shapes and dtypes, and the one forward run the loader still
makes on them.

Shapes and dtypes come from each primitive's shape rule (declared.py), which sees dtypes, not
values. One thing depends on a value: an integer constant in integer arithmetic (a Python
int converted to an integer input's dtype: ``x_uint8 + 300`` and ``x_int8 + 2**63`` overflow;
an integer to a negative integer power is refused: ``x_int ** -1``). An entry with an integer
constant among its inputs, an integer or bool input and no float one (``needs_values``) runs
its forward once, on its constants as they are and stand-ins of its other inputs
(``run_on_stand_ins``); nothing else runs while loading.

Stand-ins are read-only zero-stride views (0.5, 1 or True), or ``2 I + 0.1`` for square
matrices, so they cost one element (one matrix) whatever their shape. numpy's error state is
set in a context (per thread); warning filters never.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .nodes import Node


def needs_values(dtypes: Sequence[Any], int_constant: bool) -> bool:
    """Whether an entry computes in integers with an integer constant among its inputs
    (``int_constant``): no float input, an integer or bool one. Then a value may not fit
    (``x_uint8 + 300``) or be refused (``x_int ** -1``)."""
    strong = [np.dtype(d) for d in dtypes if d is not int and d is not float]
    return int_constant and not any(d.kind == "f" for d in strong) and \
        any(d.kind in "iub" for d in strong)


def run_on_stand_ins(node: Node, args: list) -> str | None:
    """What goes wrong running the entry's forward on ``args`` (constants as they are,
    stand-ins for the (shape, dtype) pairs), or None; the output is dropped."""
    values = [stand_in(*a) if type(a) is tuple else a for a in args]
    try:
        with np.errstate(all="ignore"):
            node.prim.forward(*values, **(node.attrs or {}))
    except Exception as e:      # noqa: BLE001 (numpy's refusal, reported as the format's)
        return f"{type(e).__name__}: {str(e)[:200]}"
    return None


def stand_in(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """A read-only value to run on: 2 I + 0.1 (positive definite) for square matrices, 0.5
    (1, True) elsewhere, every copy a zero-stride view."""
    if len(shape) >= 2 and shape[-1] == shape[-2] and dtype.kind != "b":
        n = shape[-1]
        m = np.full((n, n), 0.1, dtype)
        m[np.diag_indices(n)] += 2      # one array of n x n, however many matrices
        return np.broadcast_to(m, shape)
    return np.broadcast_to(np.array(0.5 if dtype.kind == "f" else 1, dtype), shape)
