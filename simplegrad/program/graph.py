"""Programs and tapes as graphs: networkx export, statistics, DOT text and pictures.

``program_graph(prog)`` (``prog.to_networkx()``) and ``tape_graph(ops, outputs)``
(``op.to_networkx()``) give a ``networkx.DiGraph`` with one node per input, constant and entry
and an edge from each argument to the entry that reads it. Node attributes: ``name``,
``primitive`` (None for inputs and constants), ``attrs``, ``shape``, ``dtype``, ``order`` (0
forward, k in an order-k gradient block), ``role`` (``input``, ``forward``, ``gradient`` or
``constant``), ``label`` (the trace line) and ``output``; edge attributes: ``position`` (the
argument's place in the entry's inputs; ``positions`` lists them all when an entry reads one
value twice, as ``x * x`` does).

``stats(prog)`` reads the graph: entries per primitive and per order, depth, widest level and
the bytes of intermediates alive at the peak when the entries run in tape order. ``to_dot`` and
``render`` draw it (``engine.pictures``), in the colours of the rich trace.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np

from ..engine.explain import orders
from ..engine.pictures import dot_text, run_dot, view_graph
from ..engine.render import format_entry, format_operand, format_value
from ..engine.tape import Leaf, ancestors
from ..engine.variable import Entry, Variable
from ..errors import ArgumentError, GraphError
from ..primitives.rewrites import constant_key
from .nodes import CONST, INPUT, NODE

if TYPE_CHECKING:     # (Program's methods call here: no runtime import back)
    from ..engine.ops import Ops
    from .core import Program

ROLES = ("input", "forward", "gradient", "constant")

# ---------------------------------------------------------------- networkx


class _Keys:
    """Unique node keys: the name itself, or ``name#2``, ``name#3``... when it is taken."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def __call__(self, name: str) -> str:
        key, k = name, 1
        while key in self.taken:
            k += 1
            key = f"{name}#{k}"
        self.taken.add(key)
        return key


def _role(order: int) -> str:
    return "gradient" if order > 0 else "forward"


def program_graph(prog: Program) -> nx.DiGraph:
    """The program as a DiGraph: inputs, constants and entries as nodes, arguments as edges."""
    g = nx.DiGraph(kind="program")
    keys = _Keys()
    key_of: dict[Entry, str] = {}       # an entry of the program -> its graph node
    outputs = {(r.kind, r.index) for r in prog.outputs}
    for i, spec in enumerate(prog.inputs):
        key = key_of[prog.slots[i]] = keys(spec.name)
        g.add_node(key, name=spec.name, primitive=None, attrs=None, shape=spec.shape,
                   dtype=spec.dtype, order=0, role="input", label=spec.name,
                   output=(INPUT, i) in outputs)
    for i, c in enumerate(prog.constants):
        text = format_operand(c.value)
        key = key_of[prog.fixed[i]] = keys(c.name if c.name is not None else text)
        g.add_node(key, name=c.name, primitive=None, attrs=None, shape=np.shape(c.value),
                   dtype=_dtype(c.value), order=0, role="constant",
                   label=text if c.name is None else f"{c.name} = {format_value(c.value)}",
                   output=(CONST, i) in outputs)
    for i, (node, k) in enumerate(zip(prog.entries, prog.orders)):
        key = key_of[node] = keys(node.name)
        g.add_node(key, name=node.name, primitive=node.prim.name, attrs=node.attrs,
                   shape=node.shape, dtype=node.dtype, order=k, role=_role(k),
                   label=prog.format_entry(node), output=(NODE, i) in outputs)
        for p, x in enumerate(node.inputs):
            _edge(g, key_of[x], key, p)
    g.graph["outputs"] = [key_of[prog.at(r)] for r in prog.outputs]
    return g


def tape_graph(ops: Ops, outputs: Variable | Sequence[Variable] | None = None) -> nx.DiGraph:
    """The tape as a DiGraph: every entry (or those ``outputs`` need), its leaves, constants."""
    tape = ops.tape
    if outputs is None:
        entries = [e for e in tape.entries if e is not None]
        outs: list[Entry] = []
    else:
        outs = [outputs] if isinstance(outputs, Variable) else list(outputs)
        for v in outs:
            if not isinstance(v, Variable) or v.rec is not ops:
                raise GraphError(f"to_networkx: outputs must be Variables of this Ops, got "
                                 f"{getattr(v, 'name', type(v).__name__)}")
        outs = [v.node for v in outs]
        entries = ancestors(outs)
    kinds = {id(e.var): e.kind for e in tape.events if type(e) is Leaf}
    order = orders(tape)
    g = nx.DiGraph(kind="tape")
    keys = _Keys()
    var_key: dict[int, str] = {}
    const_key: dict[Any, str] = {}
    out_ids = {id(v) for v in outs}

    def leaf(v: Entry) -> str:
        key = var_key.get(id(v))
        if key is None:
            key = var_key[id(v)] = keys(v.name)
            role = "input" if kinds.get(id(v)) == "leaf" else "constant"   # not a seed
            g.add_node(key, name=v.name, primitive=None, attrs=None, shape=v.shape,
                       dtype=v.dtype, order=order.get(v, 0), role=role,
                       label=f"{v.name} = {format_value(v.raw)}", output=id(v) in out_ids)
        # (a leaf keeps its value)
        return key

    def constant(x: Any) -> str:
        ck = constant_key(x)
        key = const_key.get(ck)
        if key is None:
            text = format_operand(x)
            key = const_key[ck] = keys(text)
            g.add_node(key, name=None, primitive=None, attrs=None, shape=np.shape(x),
                       dtype=_dtype(x), order=0, role="constant", label=text, output=False)
        return key

    for v in entries:
        key = var_key[id(v)] = keys(v.name)
        k = order.get(v, 0)
        g.add_node(key, name=v.name, primitive=v.prim.name, attrs=v.attrs, shape=v.shape,
                   dtype=v.dtype, order=k, role=_role(k), label=format_entry(v),
                   output=id(v) in out_ids)
        for p, x in enumerate(v.inputs):
            if type(x) is not Entry:
                src = constant(x)
            elif x.prim is None or id(x) not in var_key:
                src = var_key.get(id(x)) or leaf(x)
            else:
                src = var_key[id(x)]
            _edge(g, src, key, p)
    for v in outs:
        if v.prim is None:
            leaf(v)
    g.graph["outputs"] = [var_key[id(v)] for v in outs]
    return g


def _edge(g: nx.DiGraph, src: str, dst: str, position: int) -> None:
    if g.has_edge(src, dst):
        data = g.edges[src, dst]
        data["positions"] = (*data["positions"], position)
    else:
        g.add_edge(src, dst, position=position, positions=(position,))


def _dtype(x: Any) -> np.dtype | None:
    return None if isinstance(x, (bool, int, float, complex)) else np.asarray(x).dtype

# ---------------------------------------------------------------- statistics


@dataclass(frozen=True)
class Stats:
    """What ``prog.stats()`` reports about a program."""

    entries: int
    by_primitive: dict      # primitive name -> number of entries
    by_order: dict          # derivative order -> number of entries
    depth: int              # entries on the longest chain of entries
    width: int              # entries in the widest level (entries whose longest chain ties)
    peak_bytes: int         # bytes of entries alive at once, at the peak, run in tape order
    work: int = 0           # entries a run computes: a loop's body entries times its trips
                            # (a while loop's: the recorded run's, its condition once more;
                            # one trip where they are not known: a while loop in a body)
    loops: dict = field(default_factory=dict)   # loop entry -> trips (None: not known)

    def __str__(self) -> str:
        prims = ", ".join(f"{k} {n}" for k, n in self.by_primitive.items())
        ords = ", ".join(f"order {k}: {n}" for k, n in sorted(self.by_order.items()))
        return (f"{self.entries} entries ({prims}); {ords}; depth {self.depth}, widest level "
                f"{self.width}; peak live intermediates {self.peak_bytes} bytes" +
                (f"; {self.work} entries run (loops by their trips)" if self.loops else ""))


def stats(prog: Program) -> Stats:
    """Entries per primitive and per order, depth, widest level and peak live bytes."""
    g = program_graph(prog)
    entries = g.subgraph([k for k, d in g.nodes(data="role") if d in ("forward", "gradient")])
    levels = [len(level) for level in nx.topological_generations(entries)]
    by_prim = Counter(n.prim.name for n in prog.entries)
    work, loops = 0, {}
    for n in prog.entries:
        if n.prim.work is None:
            work += 1
            continue
        ran, loops[n.name] = n.prim.work(n.attrs or {})
        work += ran
    return Stats(len(prog.entries), dict(by_prim.most_common()),
                 dict(sorted(Counter(prog.orders).items())),
                 len(levels), max(levels, default=0), _peak_bytes(prog), work, loops)


def _peak_bytes(prog: Program) -> int:
    """The most bytes of entry values alive at once, each freed after the entry that reads it
    last (outputs are kept to the end); inputs and constants are not counted."""
    frees = prog.dead_after()
    size = [int(np.prod(n.shape, dtype=np.int64)) * np.dtype(n.dtype).itemsize
            for n in prog.entries]
    live = peak = 0
    for i in range(len(prog.entries)):
        live += size[i]
        peak = max(peak, live)
        live -= sum(size[j] for j in frees[i])
    return peak

# ---------------------------------------------------------------- DOT and pictures


def to_dot(prog: Program, raw: bool = False) -> str:
    """Graphviz DOT text of the program as ``prog.format()`` prints it (``raw``: as recorded):
    one box per printed line, coloured by role and order, outputs labelled by name, and a
    legend of the colours."""
    if raw:
        return dot_text(program_graph(prog))
    g, plain = derivation_graph(prog)
    return dot_text(g, plain)


def derivation_graph(prog: Program) -> tuple[nx.DiGraph, set[str]]:
    """The graph of the program as ``prog.format()`` prints it (``display.program_view``): a
    box per printed line, its inputs and the named constants it reads, the constants its lines
    print inline left out, and the entries whose edges need no argument-position label (a
    commutative primitive, moved data, or one drawn argument)."""
    from .display import program_view
    pv = program_view(prog)
    leaves = [(s, "input", s.label, "") for s in pv.program.slots]
    leaves += [(c, "constant", f"{c.label} = {format_value(c.raw)}", "")
               for c in pv.constants]
    return view_graph(pv.view, pv.order, leaves, pv.outputs)


def render(prog: Program, path: str | Path, raw: bool = False) -> Path:
    """Draw the program to ``path`` (.svg or .png) with Graphviz's ``dot`` program, as
    ``prog.format()`` prints it (``raw``: as recorded)."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("svg", "png"):
        raise ArgumentError(f"render: {path.name} must end in .svg or .png")
    path.write_bytes(run_dot(to_dot(prog, raw), fmt, path.name))
    return path
