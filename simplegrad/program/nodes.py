"""The parts of a Program: ``Ref`` (an input slot, a constant or an earlier node), ``Input``,
``Constant`` and ``Node`` (a primitive, its argument Refs, attributes, name, shape, dtype).

``Names`` makes the names of a program unique as ``sg.compile``, ``prog.save`` and
``sg.load_program`` all do (``weight``, ``weight_2``). The Program that holds them, and
``extract``, are in core.py.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterable
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


class Names:
    """Unique names for a program's entries: a name taken before gets ``_2``, ``_3``, ...
    With ``source``, names for Python source: one that is not an identifier, a keyword or a
    dunder name first becomes ``v_`` and its characters."""

    def __init__(self, reserved: Iterable[str] = (), source: bool = True) -> None:
        self.taken = set(reserved)
        self.source = source

    def take(self, name: str) -> str:
        """``name``, or the first of ``name_2``, ``name_3``, ... not taken yet."""
        plain = name.isidentifier() and not keyword.iskeyword(name) and \
            not name.startswith("__")
        base = name if plain or not self.source else \
            "v_" + "".join(c if c.isalnum() else "_" for c in name)
        text, k = base, 1
        while text in self.taken:
            k += 1
            text = f"{base}_{k}"
        self.taken.add(text)
        return text
