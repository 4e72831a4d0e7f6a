"""Transforms under ``op.no_grad()``: run on values, their results handed back unrecorded.

A derivative taken while the caller's Ops records nothing cannot be recorded there; the
transform runs on the arguments' values instead (per example inside vmap, on an Ops of its
own at the same levels), and its results return as Variables of the caller's Ops holding
values only. A function among the results (vjp's pullback) runs the same way when called.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..engine.batching import stacked, unstack
from ..engine.ops import Ops
from ..engine.variable import Variable
from ..primitives.core import value_of
from ..pytree import tree_map
from .arguments import _RUNNING, running


def run_paused(ops: Ops, fn: Callable, args: Sequence[Any]) -> Any:
    """``fn`` (the transform) on the values of ``args``, its results handed back as Variables
    of ``ops`` that hold values only; a function among the results is wrapped the same way."""
    frames = [f for f in getattr(_RUNNING, "stack", ()) if f.batch is not None and f.ops is ops]
    if frames:      # (the frames of vmaps of ops whose function runs: ``active``)
        return _paused_at(ops, frames, fn, args)
    values = tree_map(lambda a: a.raw if isinstance(a, Variable) else a, list(args))
    _RUNNING.stack, saved = [], getattr(_RUNNING, "stack", [])
    try:
        out = fn(*values)
    finally:
        _RUNNING.stack = saved
    return _unrecorded(ops, out)


def _paused_at(ops: Ops, frames: list[running], fn: Callable, args: Sequence[Any]) -> Any:
    """``run_paused`` under vmap: ``fn`` at the same levels on an Ops of its own, on every
    example's values; a function among the results (a pullback) runs there again when called,
    so that Ops lives as long as such a function does (and is freed with it)."""
    mine = Ops()
    rec = mine.recorder
    levels = [f.batch for f in frames]

    def example(a: Any) -> Variable:    # a's values at every level, batched there on mine
        return unstack(rec.var(value_of(stacked(ops, a, levels, "an argument")),
                               requires_grad=False), levels)

    def back(r: Any) -> Variable:       # a result's values, as unrecorded on ops
        return unstack(ops.unrecorded(np.array(value_of(stacked(rec, r, levels, "a result")))),
                       levels)

    def results(out: Any) -> Any:
        if callable(out):
            return lambda *a, _keep=mine: call(out, a)
        if isinstance(out, tuple) and any(callable(o) for o in out):
            return tuple(results(o) for o in out)
        return tree_map(back, out)

    def call(f: Callable, a: Sequence[Any]) -> Any:
        _RUNNING.stack, saved = [running(rec, f.batch, f.final) for f in frames], getattr(
            _RUNNING, "stack", [])
        try:
            return results(f(*tree_map(example, list(a))))
        finally:
            _RUNNING.stack = saved

    out = call(fn, args)
    if not (callable(out) or isinstance(out, tuple) and any(callable(o) for o in out)):
        rec.release()       # nothing calls back into it: its memory returns now
    return out


def _unrecorded(ops: Ops, out: Any) -> Any:
    if callable(out):
        return lambda *a: _unrecorded(ops, run_paused(ops, out, a))
    if isinstance(out, tuple) and any(callable(o) for o in out):
        return tuple(_unrecorded(ops, o) for o in out)
    return tree_map(lambda r: ops.unrecorded(np.asarray(r)) if isinstance(r, np.ndarray) or
                    np.isscalar(r) else r, out)
