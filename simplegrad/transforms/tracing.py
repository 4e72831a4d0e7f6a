"""``sg.trace``: run a function once on fresh Variables and keep the Ops it recorded on.

The leaves are named after the function's positional parameters, so the trace reads as the
function does (``x = [...]``, ``v2 = sin(x)``); an argument that is a pytree (a dict of
parameters) gives one leaf per array, named by its path (``params_W``, ``layers_0_b``). The
Ops records with the rules of ``sg.simplify`` (``Ops(simplify=True)``), as transforms' own
tapes do, and keeps what the function returned as its ``outputs``: ``print_trace()``,
``format_trace(raw=False)`` and the notebook display show the derivation pruned to them;
``format_trace()`` prints the whole tape as it was recorded (simplified).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

from ..engine.ops import Ops
from ..engine.variable import Variable
from ..pytree import node_children, tree_flatten, tree_leaves, tree_unflatten
from .arguments import check_callable, running


def trace(fn: Callable, *args: Any) -> Ops:
    """Run ``fn`` on fresh Variables holding ``args`` and return the Ops it recorded on, with
    what ``fn`` returned as its ``outputs``."""
    check_callable("trace", fn)
    ops = Ops(simplify=True)
    names = _param_names(fn, len(args))
    call = []
    for a, n in zip(args, names):
        values, treedef = tree_flatten(a)
        call.append(tree_unflatten(treedef, [ops.var(getattr(v, "raw", v), name=k)
                                             for v, k in zip(values, _leaf_names(a, n))]))
    with running(ops):      # transforms inside fn record here too, closures included
        out = fn(*call)
    rec = ops.recorder
    ops.outputs = tuple(v for v in tree_leaves(out) if isinstance(v, Variable) and v.rec is rec)
    return ops


def _leaf_names(tree: Any, name: str | None) -> list[str | None]:
    """Names for the leaves of one argument, in flatten order: ``name`` for an array, its
    path below ``name`` for a pytree's (``params_W``; None where a key is not a name)."""
    kids = node_children(tree)
    if kids is None:
        return [name]
    kind, meta, children = kids
    labels = meta if kind is dict else getattr(kind, "_fields", range(len(children)))
    out: list[str | None] = []
    for label, child in zip(labels, children):
        sub = f"{name}_{label}" if name is not None else None
        out += _leaf_names(child, sub if sub is not None and sub.isidentifier() else None)
    return out


def _param_names(fn: Callable, n: int) -> list[str | None]:
    """Names for the leaves: fn's positional parameter names where they exist."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names: list[str | None] = [p.name for p in params if p.kind in kinds][:n]
    names = [None if re.fullmatch(r"v\d+", s) else s for s in names]  # would look like v-numbers
    return names + [None] * (n - len(names))
