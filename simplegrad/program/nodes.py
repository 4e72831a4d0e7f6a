"""The parts of a Program: ``Ref`` (an input slot, a constant or an earlier node), ``Input``,
``Constant`` and ``Node`` (a primitive, its argument Refs, attributes, name, shape, dtype).

The Program that holds them, and ``extract``, are in core.py.
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
