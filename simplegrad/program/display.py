"""A Program in a notebook: ``prog._repr_html_()``.

The inputs, then one collapsible ``<details>`` block per derivative order, each line with its
shape and dtype; every name a line reads links (``href="#..."``) to the line that defines it,
whose ``id`` starts with a prefix drawn fresh for each display (engine/html.py draws Ops).
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING

import numpy as np

from ..engine.html import anchor, body_html, line_html, page, prefix
from ..engine.render import format_value

if TYPE_CHECKING:
    from .core import Program

NAME = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")


def program_html(prog: Program) -> str:
    """The program as HTML (see the module docstring)."""
    p = prefix()
    defined = {spec.name for spec in prog.inputs}
    groups: dict[int, list[str]] = {0: []}
    for spec in prog.inputs:
        groups[0].append(line_html(f"input {spec.name}", anchor(p, spec.name),
                                   meta=f"{spec.shape} {spec.dtype.name}"))
    for c in prog.constants:
        if c.name is not None:
            defined.add(c.name)
            groups[0].append(line_html(f"{c.name} = {format_value(c.value)}", anchor(p, c.name),
                                       meta=f"{np.shape(c.value)} constant"))
    for node, order in zip(prog.entries, prog.orders):
        text, _, rest = prog.format_entry(node).partition("\n")    # (a loop's body: rest)
        name, _, expr = text.partition(" = ")
        linked = NAME.sub(lambda m: f'<a href="#{anchor(p, m[0])}">{m[0]}</a>'
                          if m[0] in defined else m[0], html.escape(expr))
        meta = f'<span class="sg-meta">{node.shape} {np.dtype(node.dtype).name}</span>'
        groups.setdefault(order, []).append(
            f'<div class="sg-line" id="{anchor(p, node.name)}">{html.escape(name)} = {linked}'
            f"{meta}{body_html(rest)}</div>")
        defined.add(node.name)
    outs = ", ".join(prog._operand(r) for r in prog.outputs)
    return page(p, groups, f"program: {len(prog.inputs)} inputs, {len(prog.entries)} entries; "
                           f"outputs {outs}")
