"""The parts of a Program: ``Ref`` (an input slot, a constant or an earlier node), ``Input``,
``Constant``, ``Node`` (a primitive, its argument Refs, attributes, name, shape, dtype) and
``Guard`` (a Python decision the program was recorded through, checked when it replays).

``Names`` makes the names of a program unique as ``sg.compile``, ``prog.save`` and
``sg.load_program`` all do (``weight``, ``weight_2``). The Program that holds them, and
``extract``, are in core.py.
"""

from __future__ import annotations

import keyword
import os
from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

from ..errors import ReplayError
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


class Guard(NamedTuple):
    """A Python decision the program was recorded through: the value ``ref`` was read as a
    ``kind`` (``"bool"``: ``if v > 0:``; ``"item"``: ``v.item()``, ``float(v)``, ``int(v)``)
    and gave ``seen``, at ``file:line`` (``text``: that line's decision). A replay whose value
    decides otherwise raises ``ReplayError``."""

    ref: Ref
    kind: str
    seen: Any
    file: str
    line: int
    text: str

    def holds(self, value: Any) -> bool:
        """Whether ``value`` decides as the recording did (nan is nan)."""
        if self.kind == "bool":
            return bool(value) == self.seen
        got = value.item() if hasattr(value, "item") else value
        return got == self.seen or (got != got and self.seen != self.seen)

    def error(self, value: Any) -> ReplayError:
        """The ``ReplayError`` of a replay whose value here is ``value``."""
        got = bool(value) if self.kind == "bool" else (
            value.item() if hasattr(value, "item") else value)
        what = f"`{self.text}`" if self.text else "a decision"
        return ReplayError(
            f"this program was recorded where {what} (at {os.path.basename(self.file)}:"
            f"{self.line}) was {self.seen!r}; at these inputs it is {got!r}: record it again, "
            "or write the branch with where()")


class Names:
    """Unique names for a program's entries: a name taken before gets ``_2``, ``_3``, ...
    With ``source``, names for Python source: one that is not an identifier, a keyword or a
    dunder name first becomes ``v_`` and its characters."""

    def __init__(self, reserved: Iterable[str] = (), source: bool = True) -> None:
        self.taken = set(reserved)
        self.suffix: dict[str, int] = {}
        self.source = source

    def take(self, name: str) -> str:
        """``name``, or the first of ``name_2``, ``name_3``, ... not taken yet."""
        plain = name.isidentifier() and not keyword.iskeyword(name) and \
            not name.startswith("__")
        base = name if plain or not self.source else \
            "v_" + "".join(c if c.isalnum() else "_" for c in name)
        text, k = base, self.suffix.get(base, 1)
        while text in self.taken:
            k += 1
            text = f"{base}_{k}"
        self.suffix[base] = k       # n copies of one name cost n steps, not n^2 / 2
        self.taken.add(text)
        return text
