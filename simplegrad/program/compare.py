"""``sg.diff(a, b)``: two derivations aligned by structure, not by v-numbers.

Each line is reduced to its structure: its primitive, its attributes and its operands, where an
operand is an input (by name), a constant (by value) or an earlier line (by that line's own
structure, recursively: two lines match when they compute the same expression of the inputs).
A line of b computing what a line of a computes is aligned with it wherever it stands; the
result is falsy when every line and every output matches, and ``str()`` prints the aligned
lines side by side with what differs marked (``-`` only in a, ``+`` only in b, ``~`` the
same primitive on other operands).

An Ops (what ``sg.trace`` returns included) is read as its pruned derivation
(``engine.derivation``), a Program as its nodes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..engine.derivation import Derivation, Line
from ..engine.render import derivation_line
from ..engine.variable import Entry
from ..errors import ArgumentError
from ..primitives.rewrites import LARGE, attrs_key, constant_key
from .core import Program
from .nodes import CONST, INPUT, refs_of


@dataclass
class Diff:
    """Two derivations aligned line by line (falsy when they match)."""

    rows: list = field(default_factory=list)     # (mark, line of a or "", line of b or "")
    outputs_match: bool = True

    def __bool__(self) -> bool:
        return not self.outputs_match or any(mark != " " for mark, _, _ in self.rows)

    def __str__(self) -> str:
        width = max((len(a) for _, a, _ in self.rows), default=0)
        lines = [f"{mark} {a:<{width}} | {b}".rstrip() for mark, a, b in self.rows]
        if not self.outputs_match:
            lines.append("! the outputs differ")
        return "\n".join(lines) if lines else "(both empty)"

    def __repr__(self) -> str:
        changed = sum(mark != " " for mark, _, _ in self.rows)
        return f"<Diff: {len(self.rows)} rows, {changed} differ>"


def _value_key(x: Any) -> Any:
    """A constant by value, a large array too (by a digest of its bytes: the CSE key matches a
    large array only to itself, but two recordings hold equal arrays as two objects)."""
    if isinstance(x, np.ndarray) and x.size > LARGE:
        digest = hashlib.blake2b(np.ascontiguousarray(x).tobytes(), digest_size=16).digest()
        return ("array", x.dtype.str, x.shape, digest)
    return constant_key(x)


def _lines(x: Any, ids: dict) -> tuple[list[tuple[Any, str]], list[Any]]:
    """(structure id, text) per line, and the output keys, of an Ops or a Program; ``ids``
    interns structures (shared by both sides, so equal ids are equal expressions)."""

    def intern(key: Any) -> int:
        return ids.setdefault(key, len(ids))

    if isinstance(x, Program):
        keys: list = []
        out = []

        def ref_key(r):
            if r.kind == INPUT:
                return ("input", x.inputs[r.index].name)
            if r.kind == CONST:
                return ("const", _value_key(x.constants[r.index].value))
            return keys[r.index]

        for node in x.entries:
            k = intern(_key(node.prim, [ref_key(r) for r in refs_of(node)], node.attrs))
            keys.append(k)
            out.append((k, x.format_entry(node)))
        return out, [ref_key(r) for r in x.outputs]
    if hasattr(x, "tape") and hasattr(x, "format_trace"):
        view = Derivation(x.tape, x.outputs)
        line_key: dict[int, Any] = {}

        def operand(a):
            if type(a) is Line:
                return line_key[id(a)]
            if type(a) is Entry:
                return ("input", a.name)
            return ("const", _value_key(a))

        out = []
        for p in sorted(view.lines):
            line = view.lines[p]
            if line.prim is None:
                k = intern(("value", _value_key(line.args[0])))
            else:
                k = intern(_key(line.prim, [operand(a) for a in line.args], line.attrs))
            line_key[id(line)] = k
            out.append((k, derivation_line(line)))
        outs = [operand(view.value(v)) for v in x.outputs or ()]
        return out, outs
    raise ArgumentError(f"diff: expected an Ops, a trace or a Program, got {type(x).__name__}")


def _key(prim: Any, operands: list, attrs: dict | None) -> tuple:
    ops: Any = tuple(operands)
    if prim.commutative and len(ops) == 2:
        ops = frozenset(ops)
    return (prim.name, ops, attrs_key(attrs))


def diff(a: Any, b: Any) -> Diff:
    """Align two derivations (Ops, traces or Programs) by structure; falsy when they match."""
    ids: dict = {}
    la, outs_a = _lines(a, ids)
    lb, outs_b = _lines(b, ids)
    prims = {i: key[0] for key, i in ids.items()}
    # a line of b that computes what a line of a computes is its partner, wherever it stands
    free: dict[Any, list[int]] = {}
    for j, (k, _) in enumerate(lb):
        free.setdefault(k, []).append(j)
    partner: dict[int, int] = {}
    for i, (k, _) in enumerate(la):
        if free.get(k):
            partner[i] = free[k].pop(0)
    rows: list = [[(" ", text, lb[partner[i]][1]) if i in partner else ("-", text, "")]
                  for i, (_, text) in enumerate(la)]
    top: list = []              # b's other lines: after the partner of the b line before them
    after = {q: i for i, q in partner.items()}
    anchor = None
    for q, (_, text) in enumerate(lb):
        if q in after:          # (the latest row any earlier line of b stands at)
            anchor = after[q] if anchor is None else max(anchor, after[q])
        elif anchor is None:
            top.append(("+", "", text))
        else:
            rows[anchor].append(("+", "", text))
    rows = top + [row for group in rows for row in group]
    return Diff(_pair_changes(rows, la, lb, prims), outs_a == outs_b)


def _pair_changes(rows: list, la: list, lb: list, prims: dict) -> list:
    """A line only in a next to a line only in b with the same primitive: one ``~`` row."""
    prim_a = {text: prims[k] for k, text in la}
    prim_b = {text: prims[k] for k, text in lb}
    out: list = []
    for mark, ta, tb in rows:
        if out and mark in "+-" and out[-1][0] in "+-" and out[-1][0] != mark:
            last = out[-1]
            left, right = (last[1], tb) if mark == "+" else (ta, last[2])
            if prim_a.get(left) == prim_b.get(right):
                out[-1] = ("~", left, right)
                continue
        out.append((mark, ta, tb))
    return out
