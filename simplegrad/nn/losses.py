"""Losses: cross-entropy from logits (stable, through log_softmax), nll, mse."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engine.variable import Variable
from ..errors import ArgumentError, DTypeError, OutOfBoundsError, ShapeError
from ..primitives import PrimitiveMethods
from .module import ops_of, shape_of, value_of

__all__ = ["cross_entropy", "nll", "mse"]

_REDUCTIONS = ("mean", "sum", "none")


def cross_entropy(logits: Any, targets: Any, reduction: str = "mean") -> Any:
    """-log softmax(logits)[target] per row of ``(N, C)`` logits, integer targets in [0, C)."""
    return nll(ops_of(logits).log_softmax(logits, axis=-1), targets, reduction, "cross_entropy")


def nll(logprobs: Any, targets: Any, reduction: str = "mean", _who: str = "nll") -> Any:
    """-logprobs[i, targets[i]], reduced by ``reduction`` ('mean', 'sum' or 'none')."""
    if reduction not in _REDUCTIONS:
        raise ArgumentError(f"{_who}: reduction must be one of {_REDUCTIONS}, not {reduction!r}")
    shape, tshape = shape_of(logprobs), shape_of(targets)    # one example's, under vmap
    t = np.asarray(value_of(targets))   # every example's (checks pass iff each example's do)
    if len(shape) != 2:
        raise ShapeError(f"{_who}: expected (N, C) scores, got shape {shape}")
    if t.dtype.kind not in "iu":
        raise DTypeError(f"{_who}: targets must be integer class indices, got dtype {t.dtype}")
    if tshape != shape[:1]:
        raise ShapeError(f"{_who}: targets have shape {tshape}, expected ({shape[0]},)")
    if t.size and (t.min() < 0 or t.max() >= shape[1]):
        raise OutOfBoundsError(f"{_who}: targets must lie in [0, {shape[1]}), got values from "
                               f"{t.min()} to {t.max()}")
    o = ops_of(logprobs, targets)
    if isinstance(targets, Variable):   # recorded targets (batched under vmap): a gather
        if not isinstance(logprobs, Variable):
            logprobs = o.var(logprobs, requires_grad=False)
        rows = o.take_along_axis(logprobs, o.reshape(targets, (shape[0], 1)), axis=1)
        picked = o.neg(o.reshape(rows, (shape[0],)))
    else:
        picked = o.neg(o.getitem(logprobs, (np.arange(shape[0]), t)))
    return _reduce(o, picked, reduction)


def mse(prediction: Any, target: Any, reduction: str = "mean") -> Any:
    """(prediction - target)^2, reduced by ``reduction`` ('mean', 'sum' or 'none')."""
    if reduction not in _REDUCTIONS:
        raise ArgumentError(f"mse: reduction must be one of {_REDUCTIONS}, not {reduction!r}")
    ps, ts = shape_of(prediction), shape_of(target)
    if ps != ts:
        raise ShapeError(f"mse: prediction has shape {ps} but target has shape {ts}")
    o = ops_of(prediction, target)
    d = o.sub(prediction, target)
    return _reduce(o, o.mul(d, d), reduction)


def _reduce(o: PrimitiveMethods, x: Any, reduction: str) -> Any:
    if reduction == "mean":
        return o.mean(x)
    if reduction == "sum":
        return o.sum(x)
    return x
