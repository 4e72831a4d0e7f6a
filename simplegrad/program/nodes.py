"""The parts of a Program: ``Ref`` (an input slot, a constant or an earlier node), ``Input``,
``Constant``, ``Node`` (a primitive, its argument Refs, attributes, name, shape, dtype) and
``Guard`` (a Python decision the program was recorded through, checked when it replays).

A Program holds its entries as tape entries (``engine.variable.Entry``, the type a tape
records): each node an entry whose inputs are other entries of the program, each input slot a
leaf entry without a value, each constant a leaf entry holding it (``program_entries``). A
leaf's ``attrs`` says which it is (``INPUT`` or ``CONST``) and an entry's ``position`` is its
index among its kind, so ``ref_of`` gives back the ``Ref`` that source generation and the
saved format index by. ``Node`` is the same entry as a tuple of Refs: what a Program is built
from by hand or by a loader, and what ``prog.nodes`` shows.

``Names`` makes the names of a program unique as ``sg.compile``, ``prog.save`` and
``sg.load_program`` all do (``weight``, ``weight_2``). The Program that holds them, and
``extract``, are in core.py.
"""

from __future__ import annotations

import functools
import keyword
import math
import os
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..engine.variable import UNARY, Entry, leaf_entry, set_inputs
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


def ref_of(e: Entry) -> Ref:
    """The Ref of an entry of a program: its input slot, its constant or its node."""
    return Ref(NODE if e.prim is not None else e.attrs, e.position)


def refs_of(e: Entry) -> tuple:
    """The Refs of an entry's inputs (a ``Node``'s ``args``)."""
    return tuple(Ref(NODE if x.prim is not None else x.attrs, x.position) for x in e.inputs)


def slot_entry(kind: str, index: int, name: str | None, shape: tuple, dtype: Any,
               value: Any = None) -> Entry:
    """A leaf of a program: input slot ``index`` (``INPUT``, no value) or constant ``index``
    (``CONST``, holding ``value``)."""
    e = leaf_entry(value, name, False, index, kind)
    e.shape, e.dtype = shape, dtype     # (an input slot has no value to read them from)
    return e


def constant_dtype(value: Any) -> np.dtype | None:
    """A constant's dtype; None for a Python number (it takes the other operand's)."""
    if isinstance(value, (bool, int, float, complex)) and not isinstance(value, np.generic):
        return None
    return np.asarray(value).dtype


def fill_inputs(e: Entry, args: Sequence[Ref], parts: dict) -> None:
    """Set ``e``'s inputs to the entries ``args`` refer to (``parts``: kind -> its entries)."""
    if len(args) == 2:
        a, b = args
        e.in0, e.in1, e.more = parts[a.kind][a.index], parts[b.kind][b.index], None
    elif len(args) == 1:
        a = args[0]
        e.in0, e.in1, e.more = parts[a.kind][a.index], UNARY, None
    else:
        e.in0 = e.in1 = None
        e.more = tuple(parts[r.kind][r.index] for r in args)


def program_entries(inputs: Sequence[Input], constants: Sequence[Constant],
                    nodes: Sequence[Node]) -> tuple[tuple, tuple, tuple]:
    """The entries of a program given as parts: its input slots, its constants and its nodes
    (see the module docstring); each node's Refs must point at earlier parts."""
    slots = tuple(slot_entry(INPUT, i, x.name, tuple(x.shape), np.dtype(x.dtype))
                  for i, x in enumerate(inputs))
    fixed = tuple(constant_entry(c.value, c.name, i) for i, c in enumerate(constants))
    made: list[Entry] = []
    parts = {INPUT: slots, CONST: fixed, NODE: made}
    for i, n in enumerate(nodes):
        e = node_entry(n.prim, (), n.attrs, n.name, n.shape, n.dtype, i)
        fill_inputs(e, n.args, parts)
        made.append(e)
    return slots, fixed, tuple(made)


def constant_entry(value: Any, name: str | None, index: int) -> Entry:
    """Constant ``index`` of a program as a leaf holding ``value``."""
    return slot_entry(CONST, index, name, np.shape(value), constant_dtype(value), value)


def node_entry(prim: Primitive, inputs: tuple, attrs: dict | None, name: str, shape: tuple,
               dtype: Any, index: int) -> Entry:
    """Node ``index`` of a program: ``prim`` of ``inputs`` (entries of the program)."""
    e = Entry()
    e.prim = prim
    set_inputs(e, inputs)
    e.attrs = attrs
    e.position = index
    e.label = name
    e.shape = shape
    e.dtype = dtype
    e.requires_grad = False
    e.raw = None
    return e


def node_of(e: Entry, order: int) -> Node:
    """An entry of a program as a ``Node`` (its inputs as Refs)."""
    return Node(e.prim, refs_of(e), e.attrs, e.label, e.shape, e.dtype, order)


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


def literal(x: Any) -> str | None:
    """An int or a finite float as Python source, a negative one (-0.0 too) in parentheses so
    that it binds as one operand anywhere; None for anything else (nan, inf, bools, arrays:
    the caller binds a name or writes its own)."""
    if type(x) is int:
        return repr(x) if x >= 0 else f"({x!r})"
    if type(x) is float and math.isfinite(x):
        return repr(x) if math.copysign(1.0, x) > 0 else f"({x!r})"
    return None


def guard_lines(guards: Any, name: str, namespace: dict, dispatch: bool,
                numbers: bool = False) -> list[tuple]:
    """The source lines checking the guards (``(k, guard)`` pairs) on the value ``name``, each
    with its comment: a test as cheap as the recording's decision, and on failure a call that
    raises ``ReplayError`` (nan is nan there), bound in ``namespace``; ``dispatch``: arrays
    of other libraries (the check computes the value); ``numbers``: the value is a Python
    number, not an array."""
    lines = []
    for k, g in guards:
        fail = f"G{k}"
        namespace[fail] = functools.partial(_guard_failed, g)
        if dispatch:
            test = "True"
        elif g.kind == "bool":
            test = f"not {name}" if g.seen else name
        else:
            seen = g.seen
            want = repr(seen) if type(seen) is bool else literal(seen)
            if want is None:
                want = f"W{k}"
                namespace[want] = seen
            test = f"{name} != {want}" if numbers else f"{name}.item() != {want}"
        where = f"{os.path.basename(g.file)}:{g.line}"
        lines.append((f"    if {test}: {fail}({name})",
                      f"guard: {g.text or name} was {g.seen!r} (at {where})"))
    return lines


def _guard_failed(g: Guard, value: Any) -> None:
    """Raise the guard's ``ReplayError`` unless ``value`` decides as recorded."""
    if not g.holds(value):
        raise g.error(value)


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
