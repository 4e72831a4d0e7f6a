"""Programs: part of a tape as data of its own, run again at new inputs, simplified.

``extract(inputs, outputs)`` (``op.program``) takes the entries between some Variables (the
inputs) and the outputs, in tape order, and keeps them as entries of its own (``entries``, the
tape's type: a primitive, input entries, attributes and the tape's name), reading input slots
(``slots``, leaf entries without values) and constants (``fixed``, leaf entries holding their
values; ``nodes.program_entries``). Leaves that are not inputs, and entries not computed from
the inputs, become constants holding their recorded values. Nothing refers back to the tape,
so a Program can be simplified, saved and compiled; calling it runs each primitive's numpy
forward on new values. ``prog.nodes`` shows the entries as ``Node``s (inputs as ``Ref``s).

A Program is fixed at recording time: Python control flow on values (``if x > 0:``)
took one branch when the tape was recorded, and the program keeps that branch (as
``torch.jit.trace`` and ``jax.make_jaxpr`` do). Each such decision on a value it computes from
its inputs is one of its ``guards`` (engine/guards.py): a replay computes the value again and
raises ``ReplayError`` naming the line where the decision would go the other way.

``sg.simplify`` (simplify.py) rewrites a Program with the rules of ``primitives.rewrites``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..engine import render
from ..engine.variable import Variable
from ..errors import (
    ArgumentError,
    GraphError,
    LinAlgError,
    MaterializeError,
)
from ..primitives.core import REGISTRY, Primitive
from ..primitives.lazy import is_lazy
from ..primitives.rewrites import cse_key
from .builder import Builder
from .extraction import collect
from .inputs import RESIZED, as_array, input_value
from .nodes import CONST, INPUT, NODE, Constant, Guard, Input, Node, Ref, node_of, program_entries
from .resize import resize
from .sizes import Count

if TYPE_CHECKING:
    from ..engine.ops import Ops

__all__ = ["Program", "extract", "Builder"]


class Program:
    """A recorded sub-program independent of any tape: call it on arrays to run it again."""

    def __init__(self, inputs: Sequence[Input], constants: Sequence[Constant],
                 nodes: Sequence[Node], outputs: Sequence[Ref], single: bool = False,
                 check: bool = True, counts: Sequence[Count] | None = None,
                 alike: Sequence[tuple[Ref, Ref]] = (), guards: Sequence[Guard] = ()):
        self.inputs = tuple(Input(i.name, tuple(i.shape), np.dtype(i.dtype)) for i in inputs)
        self.constants = tuple(constants)
        nodes = tuple(nodes)
        self.outputs = tuple(outputs)
        self.single = bool(single)
        if self.single and len(self.outputs) != 1:
            raise ArgumentError(f"program: single=True needs one output, got "
                                f"{len(self.outputs)}")
        for i, node in enumerate(nodes if check else ()):
            if not isinstance(node.prim, Primitive):
                raise ArgumentError(f"program: node {i} ({node.name}) has no Primitive")
            for r in node.args:
                self._check_ref(r, i, node.name)
        self._entries(nodes)
        self._finish(counts, alike, guards)

    @classmethod
    def of_entries(cls, slots: Sequence[Any], fixed: Sequence[Any], entries: Sequence[Any],
                   orders: Sequence[int], outputs: Sequence[Ref], single: bool = False,
                   counts: Sequence[Count] | None = None, alike: Sequence[tuple] = (),
                   guards: Sequence[Guard] = ()) -> Program:
        """The program of these entries (``slots``: input leaves, ``fixed``: constant leaves,
        ``entries``: the nodes, each reading earlier ones; every ``position`` its index), as
        ``nodes.program_entries`` makes them; it holds them as they are."""
        prog = cls.__new__(cls)
        prog.slots, prog.fixed, prog.entries = tuple(slots), tuple(fixed), tuple(entries)
        prog.orders = tuple(orders)
        prog._nodes = None
        prog.inputs = tuple(Input(e.label, tuple(e.shape), np.dtype(e.dtype)) for e in slots)
        prog.constants = tuple(Constant(e.raw, e.label) for e in fixed)
        prog.outputs = tuple(outputs)
        prog.single = bool(single)
        if prog.single and len(prog.outputs) != 1:
            raise ArgumentError(f"program: single=True needs one output, got "
                                f"{len(prog.outputs)}")
        prog._finish(counts, alike, guards)
        return prog

    def _finish(self, counts: Sequence[Count] | None, alike: Sequence[tuple],
                guards: Sequence[Guard]) -> None:
        """Check the outputs, hold the guards, counts and pairs of one shape."""
        n = len(self.entries)
        for r in self.outputs:
            self._check_ref(r, n, "an output")
        # the Python decisions it was recorded through, checked when it replays
        self.guards = tuple(Guard(Ref(*g.ref), *g[1:]) for g in guards)
        for g in self.guards:
            self._check_ref(g.ref, n, "a guard")
        # None: sizes fixed as recorded; a tuple (empty included): the program replays at
        # other input sizes (sizes.py), these constants being counts that follow them
        self.counts = None if counts is None else tuple(Count(*k) for k in counts)
        # pairs of values of one shape by construction (a gradient and its variable)
        self.alike = tuple((Ref(*a), Ref(*b)) for a, b in alike)
        # the program this one simplifies (sg.simplify): other sizes resize it, then simplify
        self.origin: Program | None = None
        self.expanded = False       # ... with expand=True (polynomials.py)
        # (output index, entry names, whole name) per output a transform named entry by
        # entry (``H[x, y]``): the names ``format()`` prints them under
        self.labels: tuple = ()
        self._plan: list | None = None
        self._resized: dict = {}

    def _entries(self, nodes: tuple) -> None:
        """Hold the parts as entries (``nodes.program_entries``) and the derivative orders."""
        self.slots, self.fixed, self.entries = program_entries(self.inputs, self.constants,
                                                               nodes)
        self.orders = tuple(n.order for n in nodes)
        self._nodes: tuple | None = None

    @property
    def nodes(self) -> tuple[Node, ...]:
        """The entries as ``Node``s: primitive, input Refs, attributes, name, shape, dtype and
        derivative order."""
        nodes = self._nodes
        if nodes is None:
            nodes = self._nodes = tuple(node_of(e, k) for e, k in zip(self.entries, self.orders))
        return nodes

    def at(self, r: Ref) -> Any:
        """The entry a Ref of this program names: an input slot, a constant or a node."""
        return (self.slots if r.kind == INPUT else self.fixed if r.kind == CONST
                else self.entries)[r.index]

    def _check_ref(self, r: Any, limit: int, where: str) -> None:
        sizes = {INPUT: len(self.inputs), CONST: len(self.constants), NODE: limit}
        if not isinstance(r, Ref) or r.kind not in sizes or not 0 <= r.index < sizes[r.kind]:
            raise GraphError(f"program: {where} refers to {r!r}, which is not an input, a "
                             "constant or an earlier node")

    def __len__(self) -> int:
        return len(self.entries)

    def __getstate__(self) -> dict:
        """Pickled with registered primitives by name (their rules hold local functions), so
        ``pickle`` and ``cloudpickle`` can ship a program to another process."""
        state = dict(self.__dict__, _plan=None, _resized={})
        for key in ("_sizes", "slots", "fixed", "entries", "orders", "_nodes"):
            state.pop(key, None)
        state["nodes"] = tuple(n._replace(prim=_Registered(n.prim.name))
                               if REGISTRY.get(n.prim.name) is n.prim else n
                               for n in map(node_of, self.entries, self.orders))
        return state

    def __setstate__(self, state: dict) -> None:
        nodes = []
        for n in state["nodes"]:
            if isinstance(n.prim, _Registered):
                if n.prim.name not in REGISTRY:
                    raise GraphError(f"program: unpickling {n.name}, whose primitive "
                                     f"{n.prim.name!r} this simplegrad does not register")
                n = n._replace(prim=REGISTRY[n.prim.name])
            nodes.append(n)
        state = dict(state)
        del state["nodes"]
        self.__dict__.update(state)
        self._entries(tuple(nodes))
        self.__dict__.setdefault("counts", None)       # pickled before programs resized
        self.__dict__.setdefault("alike", ())
        self.__dict__.setdefault("guards", ())
        self.__dict__.setdefault("origin", None)
        self.__dict__.setdefault("expanded", False)
        self.__dict__.setdefault("labels", ())
        self.__dict__.setdefault("_resized", {})

    def __repr__(self) -> str:
        return (f"<Program: {len(self.inputs)} inputs, {len(self.entries)} entries, "
                f"{len(self.outputs)} outputs>")

    # ------------------------------------------------------------ running

    def __call__(self, *arrays: Any, materialize: bool = False) -> Any:
        """Run the program on new input values; one array per output (one when single).

        Arrays of other libraries that dispatch numpy's functions (dask arrays) stay what they
        are: the outputs are lazy too. A primitive that would compute such an input raises
        ``MaterializeError`` unless ``materialize=True``.
        """
        prog, inputs = self._arguments(arrays)
        try:
            outs = prog._run(inputs)
        except MaterializeError:
            if not materialize:
                raise
            outs = prog._run_materializing(inputs)
        return outs[0] if self.single else outs

    def with_shapes(self, *shapes: Sequence[int]) -> Program:
        """This program for inputs of these shapes, every size that follows an input's
        re-evaluated; ShapeError naming the entry that pins a size that changed."""
        key = tuple(tuple(int(n) for n in s) for s in shapes)
        if len(key) != len(self.inputs):
            raise ArgumentError(f"program: takes {len(self.inputs)} input shape(s), got "
                                f"{len(key)}")
        if all(k == i.shape for k, i in zip(key, self.inputs)):
            return self
        prog = self._resized.get(key)
        if prog is None:
            if self.origin is not None:
                from .simplify import simplify
                prog = simplify(self.origin.with_shapes(*key), expand=self.expanded)
            else:
                prog = resize(self, key)
            if len(self._resized) >= RESIZED:
                self._resized.pop(next(iter(self._resized)))
            self._resized[key] = prog
        return prog

    def _run(self, inputs: list) -> list:
        env = [*inputs, *(c.value for c in self.constants)]
        env.extend([None] * len(self.entries))
        k = len(self.inputs) + len(self.constants)
        ndarray, generic, asarray = np.ndarray, np.generic, np.asarray
        try:
            for forward, slots, attrs, frees in self._steps():
                if attrs:
                    value = forward(*[env[s] for s in slots], **attrs)
                elif len(slots) == 2:
                    value = forward(env[slots[0]], env[slots[1]])
                elif len(slots) == 1:
                    value = forward(env[slots[0]])
                else:
                    value = forward(*[env[s] for s in slots])
                if type(value) is not ndarray and isinstance(value, generic):
                    value = asarray(value)
                env[k] = value
                k += 1
                for s in frees:
                    env[s] = None
        except np.linalg.LinAlgError as e:
            name = self.entries[k - len(self.inputs) - len(self.constants)].name
            raise LinAlgError(f"program: computing {name}: {e}") from e
        except MaterializeError as e:
            name = self.entries[k - len(self.inputs) - len(self.constants)].name
            raise MaterializeError(f"program: computing {name}: {e}") from e
        for g in self.guards:
            value = env[self._slot(g.ref)]
            if not g.holds(value):
                raise g.error(value)
        return [env[self._slot(r)] for r in self.outputs]

    def _run_materializing(self, inputs: list) -> list:
        """The run where an entry that would compute a lazy input gets it computed."""
        env = [*inputs, *(c.value for c in self.constants)]
        slot = self._entry_slot
        for node in self.entries:
            args = [env[slot(x)] for x in node.inputs]
            try:
                env.append(node.prim.forward(*args, **(node.attrs or {})))
            except MaterializeError:
                args = [np.asarray(x) if is_lazy(x) else x for x in args]
                env.append(node.prim.forward(*args, **(node.attrs or {})))
        for g in self.guards:
            value = env[self._slot(g.ref)]
            if not g.holds(value):
                raise g.error(value)
        return [env[self._slot(r)] for r in self.outputs]

    def record(self, ops: Ops, *inputs: Any, seen: dict | None = None) -> Any:
        """Run the program by recording each node on ``ops`` (inputs may be its Variables,
        batched ones included, or arrays): the result is differentiable there. ``seen``
        collects, by the id of each entry recorded, the program's entry it stands for."""
        if len(inputs) != len(self.inputs):
            raise ArgumentError(f"program: takes {len(self.inputs)} input(s), got {len(inputs)}")
        env = [*inputs, *(_operand(ops, c.value) for c in self.constants)]
        slot = self._entry_slot
        for node in self.entries:
            env.append(ops.apply(node.prim, [env[slot(x)] for x in node.inputs],
                                 node.attrs or None))
            if seen is not None and isinstance(env[-1], Variable):
                seen.setdefault(id(env[-1].node), node)
        outs = [env[self._slot(r)] for r in self.outputs]
        return outs[0] if self.single else outs

    def _arguments(self, arrays: tuple) -> tuple[Program, list]:
        """The program for the inputs' shapes and the inputs as its values."""
        if len(arrays) != len(self.inputs):
            names = ", ".join(i.name for i in self.inputs)
            raise ArgumentError(f"program: takes {len(self.inputs)} input(s) ({names}), got "
                                f"{len(arrays)}")
        values = []
        for spec, a in zip(self.inputs, arrays):
            if isinstance(a, Variable):
                raise ArgumentError(f"program: input {spec.name} got the Variable {a.name}; "
                                    f"pass its value ({a.name}.value): a program runs on arrays")
            values.append(as_array(a))
        prog = self
        if any(tuple(v.shape) != spec.shape for v, spec in zip(values, self.inputs)):
            prog = self.with_shapes(*(v.shape for v in values))
        return prog, [input_value("program", spec, v) for spec, v in zip(prog.inputs, values)]

    def _slot(self, r: Ref) -> int:
        if r.kind == INPUT:
            return r.index
        if r.kind == CONST:
            return len(self.inputs) + r.index
        return len(self.inputs) + len(self.constants) + r.index

    def _entry_slot(self, x: Any) -> int:
        """Where an entry of the program is in a run's list of values (``_slot`` of its Ref)."""
        if x.prim is not None:
            return len(self.inputs) + len(self.constants) + x.position
        return x.position if x.attrs == INPUT else len(self.inputs) + x.position

    def _steps(self) -> list:
        """Per node: forward, argument slots, attrs, and the node slots no later node reads."""
        if self._plan is None:
            base = len(self.inputs) + len(self.constants)
            slot = self._entry_slot
            self._plan = [(n.prim.forward, tuple(slot(x) for x in n.inputs), n.attrs,
                           tuple(base + j for j in dead))
                          for n, dead in zip(self.entries, self.dead_after())]
        return self._plan

    def dead_after(self) -> list[list[int]]:
        """Per node, the nodes whose values no later node reads and no output is, once it has
        run (a node nobody reads is dead after itself)."""
        last = list(range(len(self.entries)))
        for i, node in enumerate(self.entries):
            for x in node.inputs:
                if x.prim is not None:
                    last[x.position] = i
        kept = {r.index for r in (*self.outputs, *(g.ref for g in self.guards))
                if r.kind == NODE}
        dead: list[list[int]] = [[] for _ in self.entries]
        for j, i in enumerate(last):
            if j not in kept:
                dead[i].append(j)
        return dead

    # ------------------------------------------------------------ text

    def format(self, raw: bool = False, explain: bool = False,
               notes: dict[str, str] | None = None) -> str:
        """The program as text: inputs, named constants, one line per entry, outputs; as a
        person reads it (simplified, data movement looked through, an output a transform
        named entry by entry as ``H[x, y] = v9`` lines: program/display.py) unless ``raw``;
        ``notes`` (entry name -> explanation) appended to their lines, and the bodies of its
        loops explained, with ``explain``."""
        if not raw:
            from .display import program_text
            return program_text(self, explain, notes)
        notes = notes or {}
        lines = [f"inputs: {', '.join(i.name for i in self.inputs)}"]
        lines += [f"{c.name} = {render.format_value(c.value)}" for c in self.constants
                  if c.name is not None]
        lines += [render.noted(self.format_entry(e, explain), notes.get(e.label))
                  for e in self.entries]
        lines.append(f"outputs: {', '.join(self._operand(r) for r in self.outputs)}")
        lines += [f"guard: {self._operand(g.ref)} was {g.seen!r} ({g.kind}, at "
                  f"{os.path.basename(g.file)}:{g.line})" for g in self.guards]
        return "\n".join(lines)

    def format_node(self, node: Node) -> str:
        """One node (of this program's Refs) as ``name = expression``, in the trace's style."""
        args = [self._operand(r) for r in node.args]
        if len(node.args) == 1 and render.is_alias(node.prim, not re.fullmatch(r"v\d+", node.name),
                                                    self.at(node.args[0]).shape, node.shape):
            return f"{node.name} = {args[0]}"
        return render.format_line(node.name, node.prim, args, node.attrs)

    def format_entry(self, e: Any, explain: bool = False) -> str:
        """One entry of the program as ``name = expression``, in the trace's style."""
        args = [_entry_operand(x) for x in e.inputs]
        name = e.label
        if len(args) == 1 and render.is_alias(e.prim, not re.fullmatch(r"v\d+", name),
                                              e.in0.shape, e.shape):
            return f"{name} = {args[0]}"
        return render.format_line(name, e.prim, args, e.attrs, explain)

    def _operand(self, r: Ref) -> str:
        return _entry_operand(self.at(r))

    def duplicates(self) -> list[tuple[str, str]]:
        """Pairs of node names that share a common-subexpression key (empty when simplified)."""
        seen: dict = {}
        pairs = []
        for node in self.entries:
            key = cse_key(node.prim, node.inputs, node.attrs)
            if key in seen:
                pairs.append((seen[key], node.label))
            else:
                seen[key] = node.label
        return pairs

    # ------------------------------------------------------------ out (graph.py, serialize.py)

    def to_networkx(self) -> Any:
        """The program as a ``networkx.DiGraph`` (see ``simplegrad.graph.program_graph``)."""
        from .graph import program_graph
        return program_graph(self)

    def stats(self) -> Any:
        """Entries per primitive and order, depth, widest level, peak live bytes, and the
        entries a run computes, each loop's by its trips (a ``Stats``).

        A scan's trips are its length. A while loop's (and a counted scan's, in its
        gradient) are those of the run it was recorded with: what a program knows statically,
        since a replay at other inputs takes as many as it needs. A while loop inside a body
        counts one trip (its count changes from one run of the body to the next)."""
        from .graph import stats
        return stats(self)

    def to_dot(self, raw: bool = False) -> str:
        """The program as Graphviz DOT text, one box per line ``format()`` prints (``raw``:
        per entry recorded), coloured as the rich trace is."""
        from .graph import to_dot
        return to_dot(self, raw)

    def render(self, path: Any, raw: bool = False) -> Any:
        """Draw the program as ``format()`` prints it (``raw``: as recorded) to an .svg or
        .png file with Graphviz's ``dot``; returns the path."""
        from .graph import render as draw
        return draw(self, path, raw)

    def to_sympy(self) -> list:
        """The outputs as SymPy expressions, one per output, in one symbol per input (needs
        the ``[sympy]`` extra; see ``program/symbolic.py``)."""
        from .symbolic import to_sympy
        return to_sympy(self)

    def to_latex(self) -> str:
        """The outputs' closed forms as LaTeX, one ``name = ...`` line per output."""
        from .symbolic import to_latex
        return to_latex(self)

    def _repr_latex_(self) -> str | None:
        """The closed forms for a notebook (None where SymPy or a closed form is missing)."""
        from ..errors import SimplegradError
        try:
            return "$" + self.to_latex() + "$"
        except SimplegradError:     # (no SymPy, or an entry with no closed form: no view)
            return None

    def _repr_html_(self) -> str:
        """The program as HTML for notebooks: one collapsible block per derivative order."""
        from .display import program_html
        return program_html(self)

    def _repr_svg_(self) -> str | None:
        """The program drawn by Graphviz (None without it or beyond ``MAX_PICTURE`` nodes)."""
        from ..engine.html import MAX_PICTURE
        from ..engine.pictures import has_dot, run_dot
        if not has_dot() or len(self.entries) > MAX_PICTURE:
            return None
        return run_dot(self.to_dot(), "svg", "a program").decode()

    def save(self, path: Any) -> Any:
        """Write the program to ``<path>.json`` and ``<path>.npz`` (``sg.load_program`` reads
        them); returns the two paths."""
        from .serialize import save
        return save(self, path)


def _entry_operand(x: Any) -> str:
    """An input of an entry of a program as the text shows it: a name, or a constant's value
    when it has none."""
    if x.prim is None and x.attrs == CONST and x.label is None:
        return render.format_operand(x.raw)
    return x.label


def _operand(ops: Any, value: Any) -> Any:
    """A constant as ``record`` passes it: an integer array (an index recorded as an entry)
    as a leaf that takes no gradient, so that it keeps its dtype (constants are cast)."""
    if type(value) is np.ndarray and value.dtype.kind in "iu" and hasattr(ops, "leaf"):
        return ops.leaf(value, None, False)
    return value


class _Registered(NamedTuple):
    """A registered primitive in a pickled program: its name."""

    name: str


# ---------------------------------------------------------------- extract


def extract(inputs: Variable | Sequence[Variable], outputs: Variable | Sequence[Variable],
            ops: Ops | None = None) -> Program:
    """The entries between ``inputs`` and ``outputs`` (Variables or entries) of one tape (that
    of ``ops``, or of the Variables given), as a Program."""
    b, outs, single, counts, alike, guards, labels = collect(inputs, outputs, ops)
    prog = Program.of_entries(b.slots, b.fixed, b.nodes, b.orders, outs, single,
                              counts=counts, alike=alike, guards=guards)
    prog.labels = labels
    return prog
