"""A Program as a person reads it: ``prog.format()``, its picture, ``prog._repr_html_()``.

``program_view(prog)`` is the program simplified (``sg.simplify``) and then read as the pruned
derivation of an Ops is (engine/derivation.py): data movement looked through (the reshapes,
slices, transposes and concatenations that assemble a Hessian's blocks), a multiplication by
ones that only adds axes of length one folded, and an output a transform named entry by entry
(``sg.hessian`` of named Variables: ``prog.labels``) printed one line per entry (``H[x, y] =
v9``). ``program_text`` prints it and ``graph.derivation_graph`` draws it, a box per line.

The notebook view (``program_html``): the inputs, then the lines ``format()`` prints in one
collapsible ``<details>`` block per derivative order (the named results in the last), each
with its shape and dtype; every name a line reads links (``href="#..."``) to the line that
defines it, whose ``id`` starts with a prefix drawn fresh for each display (engine/html.py
draws Ops).
"""

from __future__ import annotations

import html
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine.derivation import Derivation, Line, foldable
from ..engine.html import anchor, body_html, line_html, page, prefix
from ..engine.render import derivation_line, format_value, noted
from ..engine.tape import Labels
from ..engine.variable import Entry
from .nodes import node_entry

if TYPE_CHECKING:
    from .core import Program

VNAME = re.compile(r"v(\d+)")


@dataclass
class _Entries:
    """A program's entries as the tape a Derivation reads: no blocks, its labels as events."""

    entries: list
    events: list


@dataclass
class ProgramView:
    """What ``prog.format()`` prints and its picture draws (see the module docstring)."""

    program: Any            # the simplified program
    view: Derivation
    order: dict             # entry of the view -> its derivative order
    constants: list         # the named constants the view reads, as leaves
    outputs: list           # per output: what the view prints it as
    names: list             # per output: the name the outputs line gives it
    guards: list            # (guard, what the view prints its value as)


def program_view(prog: Program) -> ProgramView:
    """The program simplified and pruned as a person reads it (see the module docstring)."""
    from .simplify import simplify
    prog = simplify(prog)
    copies: dict[Entry, Any] = {s: s for s in prog.slots}
    for c in prog.fixed:        # constants inline, as a tape holds them, but given names,
        inline = c.label is None or VNAME.fullmatch(c.label) and foldable(c.raw) and \
            np.asarray(c.raw).dtype.kind in "fc"   # indices and large captured entries:
        copies[c] = c.raw if inline else c      # leaves, as the tape's are
    entries, order = [], {}
    for e, k in zip(prog.entries, prog.orders):
        m = VNAME.fullmatch(e.label)
        v = node_entry(e.prim, tuple(copies[x] for x in e.inputs), e.attrs,
                       int(m[1]) if m else e.label, e.shape, e.dtype, e.position)
        copies[e] = v
        entries.append(v)
        order[v] = k
    outs = [copies[prog.at(r)] for r in prog.outputs]
    events = [Labels(outs[i].position + 1, outs[i], names, whole)
              for i, names, whole in getattr(prog, "labels", ())
              if type(outs[i]) is Entry and outs[i].prim is not None]
    guards = [copies[prog.at(g.ref)] for g in prog.guards]
    roots = [x for x in outs + guards if type(x) is Entry]
    view = Derivation(_Entries(entries, events), roots)
    whole = {id(outs[i]): w for i, _, w in getattr(prog, "labels", ())}
    names = [whole.get(id(x)) or _name(view.value(x)) for x in outs]
    constants = [c for c in prog.fixed if c.label is not None and c in view.leaves]
    return ProgramView(prog, view, order, constants, [view.value(x) for x in outs], names,
                       [(g, view.value(x)) for g, x in zip(prog.guards, guards)])


def _name(x: Any) -> str:
    """An operand of the view by the name it prints under (a constant by its value, as the
    pruned trace prints a structural zero: ``J[2, x] = 0.0000``)."""
    if type(x) in (Line, Entry):
        return x.name
    return format_value(x)


def program_text(prog: Program, explain: bool = False,
                 notes: dict[str, str] | None = None) -> str:
    """The program as ``prog.format()`` prints it by default: inputs, named constants, a line
    per entry of the view, the entries a transform named, outputs and guards."""
    pv = program_view(prog)
    notes = notes or {}
    view = pv.view
    lines = [f"inputs: {', '.join(i.name for i in pv.program.inputs)}"]
    lines += [f"{c.name} = {format_value(c.raw)}" for c in pv.constants]
    lines += [noted(derivation_line(view.lines[p], explain), notes.get(view.lines[p].name))
              for p in sorted(view.lines)]
    lines += [f"{name} = {_name(x)}" for named in view.labelled.values() for name, x in named]
    lines.append(f"outputs: {', '.join(pv.names)}")
    lines += [f"guard: {_name(x)} was {g.seen!r} ({g.kind}, at "
              f"{os.path.basename(g.file)}:{g.line})" for g, x in pv.guards]
    return "\n".join(lines)

NAME = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")


def program_html(prog: Program) -> str:
    """The program as HTML, the lines ``prog.format()`` prints (see the module docstring)."""
    p = prefix()
    pv = program_view(prog)
    view = pv.view
    defined = {spec.name for spec in pv.program.inputs}
    groups: dict[int, list[str]] = {0: []}
    for spec in pv.program.inputs:
        groups[0].append(line_html(f"input {spec.name}", anchor(p, spec.name),
                                   meta=f"{spec.shape} {spec.dtype.name}"))
    for c in pv.constants:
        defined.add(c.label)
        groups[0].append(line_html(f"{c.label} = {format_value(c.raw)}", anchor(p, c.label),
                                   meta=f"{np.shape(c.raw)} constant"))

    def linked(expr: str) -> str:
        return NAME.sub(lambda m: f'<a href="#{anchor(p, m[0])}">{m[0]}</a>'
                        if m[0] in defined else m[0], html.escape(expr))

    for pos in sorted(view.lines):
        line = view.lines[pos]
        text, _, rest = derivation_line(line).partition("\n")    # (a loop's body: rest)
        name, _, expr = text.partition(" = ")
        meta = f'<span class="sg-meta">{tuple(line.shape)} {np.dtype(line.dtype).name}</span>'
        groups.setdefault(pv.order.get(line.entry, 0), []).append(
            f'<div class="sg-line" id="{anchor(p, line.name)}">{html.escape(name)} = '
            f"{linked(expr)}{meta}{body_html(rest)}</div>")
        defined.add(line.name)
    last = max(groups)
    for named in view.labelled.values():    # the results a transform named, last
        for label, x in named:
            groups[last].append(
                f'<div class="sg-line">{html.escape(label)} = {linked(_name(x))}</div>')
    return page(p, groups, f"program: {len(prog.inputs)} inputs, {len(prog.entries)} entries; "
                           f"outputs {', '.join(pv.names)}")
