"""Programs: part of a tape as data of its own, run again at new inputs, simplified.

``extract(inputs, outputs)`` (``op.program``) takes the entries between some Variables (the
inputs) and the outputs, in tape order, and keeps them as ``Node``s: a primitive, arguments
(``Ref``s to an input slot, an earlier node or a constant), attributes and the tape's name.
Leaves that are not inputs, and entries not computed from the inputs, become constants holding
their recorded values. Nothing refers back to the tape, so a Program can be simplified, saved
and compiled; calling it runs each primitive's numpy forward on new values.

A Program is fixed at recording time: Python control flow on values (``if x > 0:``)
took one branch when the tape was recorded, and the program keeps that branch (as
``torch.jit.trace`` and ``jax.make_jaxpr`` do).

``sg.simplify`` (simplifier.py) rewrites a Program with the rules of ``simplegrad.rules``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..primitives.core import Primitive

INPUT, CONST, NODE = "input", "const", "node"


class Ref(NamedTuple):
    """An argument of a node: input slot, constant or earlier node (``kind``), by ``index``."""

    kind: str
    index: int

    def __repr__(self) -> str:
        return f"{self.kind}[{self.index}]"


class Input(NamedTuple):
    """An input slot of a program: its name, shape and dtype."""

    name: str
    shape: tuple
    dtype: np.dtype


class Constant(NamedTuple):
    """A value fixed in the program; named when it was a Variable on the tape."""

    value: Any      # a Python number or a read-only numpy array
    name: str | None = None


class Node(NamedTuple):
    """One entry: ``prim.forward(*args, **attrs)``, with its name, shape, dtype and derivative
    order (0 forward, k inside an order-k gradient block)."""

    prim: Primitive
    args: tuple
    attrs: dict | None
    name: str
    shape: tuple
    dtype: np.dtype
    order: int = 0
