"""``sg.diff(a, b)``: whether two derivations are equal, then how they differ in structure.

The verdict is mathematical: SymPy (where installed and the programs are elementwise or
scalar) decides whether each output's difference simplifies to 0; otherwise, or where SymPy
cannot decide, both programs run at random points near their recorded inputs and their
outputs are compared. Two correct derivatives written differently are equal.

Each line is reduced to its structure: its primitive, its attributes and its operands, where an
operand is an input (by name), a constant (by value) or an earlier line (by that line's own
structure, recursively: two lines match when they compute the same expression of the inputs).
A line of b computing what a line of a computes is aligned with it wherever it stands; the
result is falsy when every line and every output matches, and ``str()`` prints the aligned
lines side by side with what differs marked (``-`` only in a, ``+`` only in b, ``~`` the
same primitive on other operands), under a header naming the two sides and the verdict. A
name b defines that a also defines is primed on b's side (``v3'``), so no v-number reads as
the other side's; ``_repr_html_`` is the same as a table for notebooks.

An Ops (what ``sg.trace`` returns included) is read as its pruned derivation
(``engine.derivation``), a Program as its nodes.
"""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..engine.derivation import Derivation, Line
from ..engine.render import derivation_line
from ..engine.tape import Leaf
from ..engine.variable import Entry
from ..errors import ArgumentError, MissingToolError, SimplegradError
from ..primitives.rewrites import LARGE, attrs_key, constant_key
from .core import Program
from .nodes import CONST, INPUT, refs_of


@dataclass
class Diff:
    """Two derivations: whether they are equal (``equal``, ``how``), then aligned line by line
    (falsy when every line and output matches in structure)."""

    rows: list = field(default_factory=list)     # (mark, line of a or "", line of b or "")
    outputs_match: bool = True
    names: tuple[str, str] = ("a", "b")
    equal: bool | None = None       # None: could not be decided (``how`` says why)
    how: str = ""

    def __bool__(self) -> bool:
        return not self.outputs_match or any(mark != " " for mark, _, _ in self.rows)

    def verdict(self) -> str:
        """One line: whether the two sides are equal, and how that was decided."""
        if self.equal is None:
            return f"equal? undecided: {self.how}"
        return f"{'equal' if self.equal else 'NOT equal'}: {self.how}"

    def structure(self) -> str:
        """One line: how many lines differ in structure, and whether the outputs do."""
        changed = sum(mark != " " for mark, _, _ in self.rows)
        if not self:
            return f"structure: the same ({len(self.rows)} lines)"
        outs = "" if self.outputs_match else "; the outputs are other expressions"
        return f"structure: {changed} of {len(self.rows)} rows differ{outs}"

    def __str__(self) -> str:
        a, b = self.names
        width = max([len(x) for _, x, _ in self.rows] + [len(a)])
        head = [f"sg.diff: {a} (left) against {b} (right)", self.verdict(), self.structure(),
                f"  {a:<{width}} | {b}"]
        lines = [f"{mark} {x:<{width}} | {y}".rstrip() for mark, x, y in self.rows]
        return "\n".join(head + (lines or ["  (both empty)"]))

    def __repr__(self) -> str:
        changed = sum(mark != " " for mark, _, _ in self.rows)
        return f"<Diff: {self.verdict()}; {len(self.rows)} rows, {changed} differ>"

    def _repr_html_(self) -> str:
        """The verdict and the aligned lines as an HTML table (readable in light and dark
        themes: its tints are translucent over the page's own colours)."""
        tint = {"-": "rgba(220, 60, 60, 0.18)", "+": "rgba(40, 160, 70, 0.18)",
                "~": "rgba(230, 170, 20, 0.22)", " ": "transparent"}
        a, b = (html.escape(n) for n in self.names)
        rows = "".join(
            f'<tr style="background:{tint[mark]}"><td>{html.escape(mark)}</td>'
            f"<td>{html.escape(x)}</td><td>{html.escape(y)}</td></tr>"
            for mark, x, y in self.rows)
        verdict = html.escape(self.verdict())
        return (f'<div class="sg-diff" style="font-family: monospace; font-size: 12px">'
                f"<div><b>{verdict}</b></div><div>{html.escape(self.structure())}</div>"
                f'<table style="border-collapse: collapse; color: inherit">'
                f"<tr><th></th><th>{a}</th><th>{b}</th></tr>{rows}</table></div>")


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


def diff(a: Any, b: Any, names: tuple[str, str] = ("a", "b"), points: int = 5,
         seed: int = 0) -> Diff:
    """Whether two derivations (Ops, traces or Programs) are equal, and how they differ in
    structure; falsy when they match line for line."""
    ids: dict = {}
    la, outs_a = _lines(a, ids)
    lb, outs_b = _lines(b, ids)
    lb = _primed(la, lb)
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
    out = Diff(_pair_changes(rows, la, lb, prims), outs_a == outs_b, tuple(names))
    if out.outputs_match:
        out.equal, out.how = True, "the same expressions of the inputs (by structure)"
    else:
        out.equal, out.how = _equal(a, b, names, points, seed)
    return out


# ---------------------------------------------------------------- the names of side b

DEFINED = re.compile(r"^(\w+) = ")


def _primed(la: list, lb: list) -> list:
    """b's lines with every name that both sides define primed (``v3'``)."""
    ours = {m[1] for _, text in la if (m := DEFINED.match(text))}
    theirs = {m[1] for _, text in lb if (m := DEFINED.match(text))}
    clash = ours & theirs
    if not clash:
        return lb
    word = re.compile(r"\b(" + "|".join(sorted(map(re.escape, clash))) + r")\b")
    return [(k, word.sub(r"\1'", text)) for k, text in lb]


# ---------------------------------------------------------------- the verdict

def _program(x: Any) -> Program:
    """x as a Program: itself, or an Ops' outputs as a function of the inputs they read."""
    if isinstance(x, Program):
        return x
    leaves = {id(e.var) for e in x.tape.events if type(e) is Leaf}
    seen: set[int] = set()
    stack = [v.node for v in x.outputs or ()]
    used: list[Entry] = []
    while stack:                        # the leaves the outputs read, in tape order
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if id(e) in leaves:
            used.append(e)
        stack += [i for i in e.inputs if isinstance(i, Entry)]
    used.sort(key=lambda e: e.position)
    return x.program(used, list(x.outputs or ()))


def _equal(a: Any, b: Any, names: tuple, points: int, seed: int) -> tuple[bool | None, str]:
    """(equal, how it was decided) for two derivations whose structures differ."""
    try:
        pa, pb = _program(a), _program(b)
    except SimplegradError as e:
        return None, f"not replayable ({e})"
    ins_a = {i.name: i for i in pa.inputs}
    ins_b = {i.name: i for i in pb.inputs}
    if len(pa.outputs) != len(pb.outputs):
        return False, f"{len(pa.outputs)} outputs against {len(pb.outputs)}"
    if set(ins_b) - set(ins_a) and set(ins_a) - set(ins_b):
        return None, (f"the inputs differ ({', '.join(ins_a)} against {', '.join(ins_b)})")
    symbolic = _sympy_equal(pa, pb)
    if symbolic is True:
        return True, "SymPy simplifies each output's difference to 0"
    numeric = _numeric_equal(pa, pb, ins_a, ins_b, names, points, seed)
    if symbolic is False and numeric[0] is not False:
        return numeric[0], numeric[1] + " (SymPy could not simplify the difference to 0)"
    return numeric


def _sympy_equal(pa: Program, pb: Program) -> bool | None:
    """True when SymPy proves every output pair equal, False when it simplifies a difference
    to something else, None when it cannot read the programs (not installed, not
    elementwise)."""
    try:
        import sympy as sp
        ea, eb = pa.to_sympy(), pb.to_sympy()
    except (ImportError, MissingToolError, SimplegradError, TypeError, ValueError):
        return None
    try:
        for x, y in zip(ea, eb):
            d = x - y
            if sp.simplify(d) != 0 and sp.simplify(d.rewrite(sp.exp)) != 0:
                return False
    except (TypeError, ValueError, AttributeError, NotImplementedError, RecursionError):
        return None
    return True


def _numeric_equal(pa: Program, pb: Program, ins_a: dict, ins_b: dict, names: tuple,
                   points: int, seed: int, rtol: float = 1e-9) -> tuple[bool | None, str]:
    """Both programs run at ``points`` random points in (0.1, 0.9), each input drawn once and
    given to both sides by name."""
    rng = np.random.default_rng(seed)
    both = {**ins_b, **ins_a}
    for k in range(points):
        at = {n: rng.uniform(0.1, 0.9, size=i.shape).astype(i.dtype) if
              np.issubdtype(i.dtype, np.floating) else np.zeros(i.shape, i.dtype)
              for n, i in both.items()}
        try:
            ya = pa(*[at[i.name] for i in pa.inputs])
            yb = pb(*[at[i.name] for i in pb.inputs])
        except (SimplegradError, ValueError, FloatingPointError) as e:
            return None, f"the programs do not replay at random points ({e})"
        for i, (u, v) in enumerate(zip(ya, yb)):
            u, v = np.asarray(u, dtype=float), np.asarray(v, dtype=float)
            if u.shape != v.shape:
                return False, f"output {i} has shape {u.shape} against {v.shape}"
            scale = np.maximum(1.0, np.maximum(np.abs(u), np.abs(v)))
            bad = ~(np.abs(u - v) <= rtol * scale)
            if bad.any():
                j = np.unravel_index(int(np.argmax(bad)), u.shape) if u.shape else ()
                point = ", ".join(f"{n} = {np.round(x, 4).tolist()}" for n, x in at.items())
                return False, (f"at random point {k + 1} of {points}: output "
                               f"{i}{list(j) if j else ''} is {u[j]:.10g} ({names[0]}) and "
                               f"{v[j]:.10g} ({names[1]}) at {point}")
    return True, f"at {points} random points in (0.1, 0.9)"


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
