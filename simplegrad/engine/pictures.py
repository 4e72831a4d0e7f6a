"""Pictures of a graph (``prog.to_networkx()``, ``op.to_networkx()``): Graphviz DOT text, and
SVG or PNG drawn by Graphviz's ``dot`` program when it is installed.

One box per entry in the colour of its derivative order (``render.order_fill``, the rich
trace's colours), inputs as ellipses, constants as dashed boxes, outputs framed and labelled
by name, and a legend of the colours under the picture. A node's ``note`` (a value, a
gradient: ``values=`` and ``grads=`` of the drawing calls) prints under its line, as
micrograd's ``draw_dot`` shows ``data`` and ``grad``.

``derivation_dot(tape, outputs)`` draws an Ops' pruned derivation (``Ops._repr_svg_``,
``op.to_dot()``): one box per line ``op.format_trace(raw=False)`` prints; ``view_graph`` is
its graph, which a Program's picture (program/graph.py) draws from the Program's view too.
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
    indented body print (other labels of several lines, a value or a name under the line,
    stay centred)."""
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
        label = d["label"]
        if d.get("called"):     # the results a line is, named inside its frame
            extra = ", penwidth=2.5"
            label = f"{label}\n= {d['called']}"
        elif d["output"] or key in outputs:     # framed, and labelled with its name
            extra = f", penwidth=2.5, xlabel={_quote('output ' + (d['name'] or key))}"
        if d["role"] == "input":        # inputs are ellipses, constants dashed boxes
            label = f"{label}  {list(d['shape'])} {np.dtype(d['dtype']).name}"
            extra += ", shape=ellipse"
        elif d["role"] == "constant":
            extra += ', style="rounded,filled,dashed"'
        if d.get("note"):
            label = f"{label}\n{d['note']}"
        body = "\n " in label          # a loop's body, indented under its line
        lines.append(f"  {_quote(key)} [label={_quote(label, left=body)}, "
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


def derivation_dot(tape: Any, outputs: Any = None, values: bool = False,
                   grads: bool = False) -> str:
    """DOT text of a tape's pruned derivation: a box per printed line, an ellipse per input
    it reads, constants inline; ``values`` notes each node's value, ``grads`` each input's
    gradient (the first block's derivative of it that the derivation prints)."""
    from .derivation import Derivation, Line
    from .explain import orders
    from .render import format_value, preview
    from .tape import BlockEnd, Leaf
    from .variable import value_of

    view = Derivation(tape, outputs)
    grad_of: dict[int, Any] = {}
    if grads:
        for e in tape.events:
            if type(e) is BlockEnd and e.kind == "grad":
                for x, g in view.derivatives(e):
                    grad_of.setdefault(id(x), g)

    def note(entry: Any, leaf: Any = None) -> str:
        parts = [f"value {preview(value_of(entry))}"] if values and leaf is None else []
        d = grad_of.get(id(leaf)) if leaf is not None else None
        if d is not None:
            v = d.entry if type(d) is Line else d
            parts.append(f"grad {preview(value_of(v) if hasattr(v, 'prim') else v)}")
        return "\n".join(parts)

    leaves = [(e.var, "input", f"{e.var.name} = {format_value(e.var.raw)}", note(e.var, e.var))
              for e in tape.events if type(e) is Leaf and view.shows(e)]
    outs = [view.value(v) for v in outputs or ()]
    g, plain = view_graph(view, orders(tape), leaves, outs, note, named=not outputs)
    return dot_text(g, plain)


def view_graph(view: Any, order: dict, leaves: list, outputs: list, note: Any = None,
               named: bool = False) -> tuple[Any, set]:
    """The graph of a pruned view (``derivation.Derivation``) and the nodes whose edges need
    no argument-position label: ``leaves`` as ``(entry, role, label, note)`` nodes, a node per
    line the view prints (its derivative order from ``order``, entry -> order; the names of
    the results it is, ``view.labelled``, inside its frame), ``outputs`` (what the view
    prints them as) framed; ``named``: lines of named entries are outputs too."""
    import networkx as nx

    from .derivation import moved
    from .render import derivation_line

    outs = {id(x) for x in outputs}
    called: dict[int, list[str]] = {}       # a line -> the names of the results it is
    for labelled in view.labelled.values():
        for label, x in labelled:
            called.setdefault(id(x), []).append(label)
    g = nx.DiGraph(kind="derivation")
    key: dict[int, str] = {}
    commutative: dict[str, bool] = {}
    for v, role, label, leaf_note in leaves:
        key[id(v)] = v.name
        g.add_node(v.name, name=v.name, primitive=None, shape=v.shape, dtype=v.dtype,
                   order=0, role=role, label=label, output=id(v) in outs, note=leaf_note)
    for p in sorted(view.lines):
        line = view.lines[p]
        name = line.name if line.name not in g else f"{line.name}#{p}"
        key[id(line)] = name
        # (the edges into a commutative entry, or moved data its label spells out, need no
        # argument-position label)
        commutative[name] = moved(line) or line.prim is not None and line.prim.commutative
        k = order.get(line.entry, 0)
        g.add_node(name, name=line.name, called=" = ".join(called.get(id(line), [])),
                   primitive=None if line.prim is None else
                   line.prim.name, shape=line.shape, dtype=line.dtype, order=k,
                   role="gradient" if k else "forward", label=derivation_line(line),
                   output=id(line) in outs or (named and type(line.entry.label) is str),
                   note=note(line.entry) if note is not None else "")
        operands = line.args if line.prim is not None else \
            line.args[0].flat if moved(line) else ()
        for i, x in enumerate(operands):
            src = key.get(id(x))
            if src is None:
                continue
            if g.has_edge(src, name):
                data = g.edges[src, name]
                data["positions"] = (*data["positions"], i)
            else:
                g.add_edge(src, name, position=i, positions=(i,))
    g.graph["outputs"] = [key[id(x)] for x in outputs if id(x) in key]
    plain = {k for k in commutative if g.in_degree(k) < 2 or commutative[k]}
    return g, plain
