"""Pictures of a graph (``prog.to_networkx()``, ``op.to_networkx()``): Graphviz DOT text, and
SVG or PNG drawn by Graphviz's ``dot`` program when it is installed.

One box per entry in the colour of its derivative order (``render.order_fill``, the rich
trace's colours), inputs as ellipses, constants as dashed boxes, outputs framed and labelled
by name, and a legend of the colours under the picture.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import numpy as np

from ..errors import MissingToolError
from .render import LEAF_FILL, order_fill

CONSTANT_FILL = "#eeeeee"


def fill_colour(role: str, order: int) -> str:
    """The fill of a node: the rich trace's colour for its role and derivative order."""
    if role == "constant":
        return CONSTANT_FILL
    return LEAF_FILL if role == "input" else order_fill(order)


def _quote(text: str, left: bool = False) -> str:
    """A DOT string; ``left``: its lines left-justified (``\\l``), as a loop's line and its
    indented body print."""
    end = "\\l" if left else "\\n"
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", end)
    return '"' + text + (end if left else "") + '"'


def _legend(top: int) -> str:
    """An HTML-like Graphviz label: a row of colour swatches (inputs, forward, each order)."""
    cells = [("input", LEAF_FILL), ("forward", order_fill(0))]
    cells += [(f"order {k}", order_fill(k)) for k in range(1, top + 1)]
    row = "".join(f'<td bgcolor="{fill}" border="1">{name}</td>' for name, fill in cells)
    return f'<<table border="0" cellspacing="4"><tr><td>legend:</td>{row}</tr></table>>'


def dot_text(g: Any, plain: Any = ()) -> str:
    """Graphviz DOT text of a simplegrad graph (node attributes as ``program_graph`` sets);
    the edges into the nodes ``plain`` carry no argument-position label."""
    outputs = {key: i for i, key in enumerate(g.graph.get("outputs", []))}
    top = max((d for _, d in g.nodes(data="order")), default=0)
    lines = ["digraph program {", "  rankdir=TB;",
             f"  label={_legend(top)}; labelloc=b; fontname=\"monospace\"; fontsize=10;",
             '  node [shape=box, style="rounded,filled", fontname="monospace", fontsize=11];',
             '  edge [fontsize=9, color="#666666"];']
    for key, d in g.nodes(data=True):
        extra = ""
        if d["output"] or key in outputs:     # framed, and labelled with its name
            extra = f", penwidth=2.5, xlabel={_quote('output ' + (d['name'] or key))}"
        label = d["label"]
        if d["role"] == "input":        # inputs are ellipses, constants dashed boxes
            label = f"{label}  {list(d['shape'])} {np.dtype(d['dtype']).name}"
            extra += ", shape=ellipse"
        elif d["role"] == "constant":
            extra += ', style="rounded,filled,dashed"'
        lines.append(f"  {_quote(key)} [label={_quote(label, left=chr(10) in label)}, "
                     f"fillcolor={_quote(fill_colour(d['role'], d['order']))}{extra}];")
    for src, dst, d in g.edges(data=True):
        if dst in plain:
            lines.append(f"  {_quote(src)} -> {_quote(dst)};")
            continue
        label = ",".join(str(p) for p in d["positions"])
        lines.append(f"  {_quote(src)} -> {_quote(dst)} [label={_quote(label)}];")
    inputs = [k for k, role in g.nodes(data="role") if role == "input"]
    if inputs:              # the inputs on top, in order (invisible edges keep the order)
        lines.append(f"  {{rank=source; {'; '.join(_quote(k) for k in inputs)};}}")
        lines += [f"  {_quote(u)} -> {_quote(v)} [style=invis];"
                  for u, v in zip(inputs, inputs[1:])]
    lines.append("}")
    return "\n".join(lines) + "\n"


def has_dot() -> bool:
    """Whether Graphviz's ``dot`` program is on PATH."""
    return shutil.which("dot") is not None


def run_dot(text: str, fmt: str, what: str) -> bytes:
    """DOT text drawn by Graphviz's ``dot`` as ``fmt`` (svg or png) bytes."""
    dot = shutil.which("dot")
    if dot is None:
        raise MissingToolError(
            f"render: Graphviz's `dot` program was not found on PATH (drawing {what}); "
            "install the graphviz package (apt-get install graphviz, brew install graphviz "
            "or conda install graphviz), or write the DOT text to a file and draw it elsewhere")
    done = subprocess.run([dot, f"-T{fmt}"], input=text.encode(), capture_output=True,
                          check=False)
    if done.returncode != 0:
        raise MissingToolError(f"render: dot failed on {what}: "
                               f"{done.stderr.decode(errors='replace').strip()}")
    return done.stdout
