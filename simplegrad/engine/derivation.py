"""The derivation a person reads: a tape pruned to what was asked, at print time.

The tape keeps exactly what was recorded (``op.format_trace()`` prints it in the seed's form).
``prune(tape, outputs)`` makes the view that ``op.print_trace``, ``sg.trace`` and the command
line print by default: only the entries that what was asked needs (the gradients each ``grad``
asked for, the values differentiated, named entries, the outputs given), with entries that
compute the same value merged (``v12 = v11 * v6; v13 = v11 * v6`` is one line), entries of
constants alone folded into their value when it is small (the seed's ``ones.expand``), chains
of multiplications by numbers folded into one (``a * 2.0 * 2.0`` is ``a * 4.0``), identities
applied (``x * 1``, a reshape to the same shape), and the gradient lines of each block kept
to the ``wrt`` it was asked for. Nothing here changes the tape; entries keep their names.

Data movement is looked through (the plumbing of Hessians and Jacobians: reshapes, slices,
transposes, concatenations, scatters): an entry of a moving primitive whose entries are each
one printed value of one entry (or a constant) is that value when it has one entry, and prints
as the array of them when it is small (``v25 = [[v22, v19]]``). An entry of a value of several
entries is a ``Pick`` of it; moved data whose entries are all of one such value, in order, is
that value (of its shape, or but for axes of length one where a transform named the result),
and in a transposed order a transpose of it; other moved data that holds Picks prints as its
primitive, its entries noted for the entries that read it. A multiplication by ones of a shape
that does not broadcast the other operand to a new shape is that operand (``[1.0000] * v9``
from a Hessian's basis tangents). An entry a transform named entry by entry
(``label_entries``: ``sg.hessian`` and ``sg.jacobian`` of named Variables) prints one line per
entry instead (``H[x, y] = v19``) when each is such a value, else one line under its whole
name (``H[x, x] = v46``, the line whose entries it is).

The rules are those of ``sg.simplify``, through the same step (``rewrites.simplified``),
applied to tape entries and to the Lines made of them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..primitives.rewrites import FOLD, Operand, Same, describe_variable, reduces_to, simplified
from ..primitives.shape import TRANSPOSE
from ..primitives.sparsity_rules import MOVING, flows, landing
from .tape import Asked, BlockBegin, BlockEnd, Labels, Leaf
from .variable import Entry, Variable, entry_of

if TYPE_CHECKING:
    from ..primitives.core import Primitive
    from .ops import Ops
    from .tape import Tape

SMALL = 8       # folded constants with at most this many entries print inline
ENTRIES = 64    # moved arrays of at most this many entries print as arrays of their values


def foldable(value: Any) -> bool:
    """Whether a constant value is folded into the lines that read it: a small one, or one
    whose entries are all equal (it prints as ``full([100, 1], 1.0)``)."""
    if np.size(value) <= SMALL:
        return True
    arr = np.asarray(value)
    return arr.dtype.kind in "fiub" and bool(np.all(arr == arr.flat[0]))


def asked(ops: Ops, L: Variable, wrt: Variable | list, grads: Any, names: list[str] | None,
          create_graph: bool) -> Any:
    """Note on the tape what a ``grad`` call asked for, and give named gradients their alias
    entries (``dW = v12``, so a cotangent the sweep shares keeps its v-number); returns the
    gradients as ``Ops.grad`` does."""
    single = isinstance(wrt, Variable) or not isinstance(wrt, list)
    wanted = [wrt] if single else wrt
    found = [grads] if single else list(grads)
    recorded = create_graph and ops.recording and all(
        type(g) is Variable and g.rec is ops for g in found)
    tape = ops.tape
    if recorded and tape.keep:
        tape.add(Asked(tape.end, L.node, tuple(ops.leaf_for(w).node for w in wanted),
                       tuple(g.node for g in found)))
    if names is None:
        return grads
    named = []
    for w, g, n in zip(wanted, found, names):
        if recorded:            # an alias entry: a reshape to the same shape, named
            g = ops.reshape(g, g.shape, name=n)
            w.grad = g
        else:                   # a fresh unrecorded value: naming it renames nothing
            g.name = n
        named.append(g)
    return named[0] if single else named


def label_entries(ops: Ops, v: Any, names: Sequence[str], whole: str) -> None:
    """Note on the tape names for the entries of ``v`` (C order) and for ``v`` itself that the
    pruned trace prints them under (nothing when ``v`` is not a recorded Variable of ``ops``)."""
    tape = ops.tape
    if type(v) is Variable and v.rec is ops and ops.recording and tape.keep and \
            v.node.prim is not None and len(names) == math.prod(v.shape):
        tape.add(Labels(tape.end, v.node, tuple(names) if len(names) <= ENTRIES else (),
                        whole))


def output_labels(tape: Tape, outputs: Sequence[Any]) -> tuple[tuple[int, tuple, str], ...]:
    """``(i, names, whole)`` for each of ``outputs`` (entries) a transform named entry by entry
    (``label_entries``): what a Program extracted from the tape keeps of the names."""
    at = {id(e.entry): e for e in tape.events if type(e) is Labels}
    return tuple((i, at[id(v)].names, at[id(v)].whole) for i, v in enumerate(outputs)
                 if id(v) in at)


class Pick:
    """Entry ``at`` (C order) of a value of several entries (a Line or a leaf): what moved
    data holds of it, looked through until the data is that value again (``_whole``)."""

    __slots__ = ("of", "at")

    def __init__(self, of: Any, at: int):
        self.of, self.at = of, at


class Line:
    """One entry as the derivation prints it: its name, primitive, operands and attributes
    (operands are leaves, constants or other Lines), and the tape entry it stands for; a
    primitive of None is an entry computed from constants alone, printed as its value, or
    data moved about, its one argument the object array of the operands its entries are."""

    __slots__ = ("name", "prim", "args", "attrs", "entry", "shape", "dtype")

    def __init__(self, entry: Entry, prim: Primitive | None, args: tuple,
                 attrs: dict | None):
        self.entry, self.name = entry, entry.name
        self.prim, self.args, self.attrs = prim, args, attrs
        self.shape, self.dtype = entry.shape, entry.dtype


def moved(line: Line) -> bool:
    """Whether a line is data moved about: printed as the array of the operands it holds."""
    a = line.args[0] if line.prim is None else None
    return type(a) is np.ndarray and a.dtype == object


def _describe(x: Any) -> Operand:
    if type(x) is Line:
        return Operand(x.shape, x.dtype, False, None, x.prim, x.args, x.attrs,
                       type(x.entry.label) is str)
    return describe_variable(x)


def _shape(x: Any) -> tuple:
    return tuple(x.shape) if type(x) in (Line, Entry) else tuple(np.shape(x))


def _as_numbers(prim: Primitive, args: tuple, v: Entry) -> tuple:
    """The operands of an elementwise entry of two, with a constant array of one entry, or of
    entries all the record's unit, read as that number where it does not broadcast the other
    operand to a new shape, or both are of one entry (which the view takes for one another):
    the plumbing of Hessians and Jacobians, ``[1.0000] * v9`` is ``1.0 * v9``, which the unit
    rule folds to v9, and ``[2.0000] * y`` is ``2.0 * y``; the result's dtype unchanged.
    ``args`` itself when none is."""
    out = list(args)
    for i in (0, 1):
        c, x = args[i], args[1 - i]
        if type(c) is not np.ndarray or c.ndim == 0 or c.dtype.kind not in "fiu" or \
                type(x) not in (Line, Entry) or c.size > SMALL or not np.all(c == c.flat[0]):
            continue
        number = c.flat[0].item()
        if c.size > 1 and (prim.unit is None or number != prim.unit.value):
            continue        # (only ones spread out: ``full([4], 3.0) * b`` says what it is)
        shape = _shape(x)
        if np.result_type(x.dtype, number) != np.dtype(v.dtype) or not (
                np.broadcast_shapes(shape, c.shape) == shape or
                math.prod(shape) == 1 == math.prod(v.shape)):
            continue
        out[i] = number
    return args if all(a is b for a, b in zip(out, args)) else tuple(out)


class Derivation:
    """A tape pruned to what was asked (see the module docstring)."""

    def __init__(self, tape: Tape, outputs: Sequence[Any] | None = None):
        self.tape = tape
        events = tape.events
        self.leaf_kind = {e.var: e.kind for e in events if type(e) is Leaf}
        self.asked: dict[int, Asked] = {}       # id(BlockEnd) -> the grad call it answered
        for i, e in enumerate(events):
            if type(e) is BlockEnd and e.kind == "grad":
                j = i + 1
                while j < len(events) and type(events[j]) is Leaf:   # (zeros for unreached)
                    j += 1
                if j < len(events) and type(events[j]) is Asked and events[j].target is e.target:
                    self.asked[id(e)] = events[j]
        roots = self._roots(outputs)
        self.sub: dict[Entry, Any] = {}      # entry or seed -> what it prints as
        self.lines: dict[int, Line] = {}        # position -> its line, for entries kept
        # a line of moved data that prints as its primitive -> what its entries are (Picks)
        self.known: dict[int, np.ndarray] = {}
        self._named = {id(e.entry) for e in events if type(e) is Labels}
        self._build(roots)
        # position -> the (name, operand) lines a labelled entry prints as
        self.labelled: dict[int, list[tuple[str, Any]]] = {}
        for e in events:
            if type(e) is Labels and e.entry.prim is not None:
                x = self.value(e.entry)
                whole = self._whole(self.known[id(x)], e.entry, True) \
                    if type(x) is Line and id(x) in self.known else None
                if whole is not None and whole[1] is None:  # (reshaped on its way: v33
                    self.sub[e.entry] = whole[0]            # for its (2,) of (1, 2))
                values = self.entries_of(self.value(e.entry)) if e.names else None
                if values is not None and any(type(x) is Pick for x in values.flat):
                    values = None       # entries of a line of several: named whole
                self.labelled[e.entry.position] = [(e.whole, self.value(e.entry))] \
                    if values is None else list(zip(e.names, values.flat))
        self._keep([x for r in roots for x in (
            [x for _, x in self.labelled[r.position]] if r.position in self.labelled
            else [self.value(r)])])

    # ------------------------------------------------------------ what was asked

    def _roots(self, outputs: Sequence[Any] | None) -> list[Entry]:
        tape = self.tape
        roots = [entry_of(v) for v in outputs or ()]
        roots = [v for v in roots if type(v) is Entry]
        depth = 0
        read: set[int] = set()
        top: list[Entry] = []
        m, events = 0, tape.events
        for v in tape.entries:
            if v is None:
                continue
            while m < len(events) and events[m].position <= v.position:
                depth += self._depth(events[m])
                m += 1
            read.update(id(x) for x in v.inputs if type(x) is Entry)
            if type(v.label) is str:
                roots.append(v)         # named: L0, an alias, a user's name
            elif depth == 0 and outputs is None:
                top.append(v)
        roots += [v for v in top if id(v) not in read]      # the user's own results
        for e in events:
            if type(e) is BlockBegin:
                roots.append(e.target)
            elif type(e) is Asked:
                roots += e.grads
            elif type(e) is Labels:
                roots.append(e.entry)
            elif type(e) is BlockEnd and id(e) not in self.asked:
                roots += [g for x, g in e.pairs
                          if e.kind == "jvp" or self.leaf_kind.get(x) == "leaf"]
        return [v for v in roots if type(v) is Entry]

    @staticmethod
    def _depth(event: Any) -> int:
        return 1 if type(event) is BlockBegin else -1 if type(event) is BlockEnd else 0

    # ------------------------------------------------------------ the rules

    def value(self, x: Any) -> Any:
        """What an operand prints as: a Line, a leaf, or a constant."""
        if type(x) is not Entry:
            if type(x) is not Variable:
                return x
            x = x.node
        return self.sub.get(x, x)

    def _build(self, roots: list[Entry]) -> None:
        from .tape import ancestors, value_of
        keep_as_is = set(roots)
        for v, kind in self.leaf_kind.items():
            if kind == "seed" and v not in keep_as_is and foldable(v.raw):
                self.sub[v] = v.raw     # (a leaf keeps its value)
        table: dict = {}
        for v in ancestors(roots):
            args = tuple(self.value(x) for x in v.inputs)
            prim, attrs = v.prim, v.attrs
            named = type(v.label) is str
            if named:           # a given name is printed as recorded
                self.sub[v] = self.lines.setdefault(v.position, Line(v, prim, args, attrs))
                continue
            if prim.elementwise and len(args) == 2:
                numbers = _as_numbers(prim, args, v)
                same = None if numbers is args else reduces_to(prim, numbers, attrs, _describe)
                if same is not None:        # ``[1.0000] * v9`` is v9
                    self.sub[v] = same
                    continue
                args = numbers
            step = simplified(prim, args, attrs, _describe)
            if step is FOLD:
                if foldable(value_of(v)):
                    if v not in keep_as_is:
                        self.sub[v] = v.raw     # constants only: fold to the value
                        continue
                    self.sub[v] = self.lines[v.position] = Line(v, None, (v.raw,), None)
                    continue                # asked for: a line of its value
                step = simplified(prim, args, attrs, _describe, fold=False)
            if type(step) is Same:
                self.sub[v] = step.input
                continue
            prim, args, attrs, key = step
            moved = self._moved(prim, args, attrs, v) if prim.sparsity is MOVING else None
            if moved is not None and moved.size > 1 and \
                    all(x is moved.flat[0] for x in moved.flat):
                moved = None        # one value spread: its expand says it better
            whole = None if moved is None else self._whole(moved, v)
            if whole is not None:       # another value's entries, as they are: that value
                of, axes = whole
                if axes is None:
                    self.sub[v] = of
                    continue
            if whole is not None and not (len(args) == 1 and args[0] is whole[0]):
                step = simplified(TRANSPOSE, (of,), {"axes": axes}, _describe)
                if type(step) is Same:
                    self.sub[v] = step.input
                    continue
                prim, args, attrs, key = step   # ... or transposed: a line saying so (as
                moved = None                    # the entry does, when it reads that value)
            elif whole is not None:
                moved = None
            if moved is not None and not any(type(x) is Pick for x in moved.flat):
                if moved.size == 1:
                    self.sub[v] = moved.flat[0]
                else:
                    self.sub[v] = self.lines[v.position] = Line(v, None, (moved,), None)
                continue
            line = table.get(key)
            if line is None:
                line = table[key] = self.lines[v.position] = Line(v, prim, args, attrs)
                if moved is not None:   # (entries of lines of several: printed as moved)
                    self.known[id(line)] = moved
            self.sub[v] = line

    def _whole(self, moved: np.ndarray, v: Entry, named: bool = False
               ) -> tuple[Any, tuple | None] | None:
        """``(value, None)`` when a moving entry's entries are all those of one value of
        several, in order, and it prints as that value: of the same shape, or but for axes of
        length one when the entry is a result a transform named (``named``, or noted so: a
        Hessian's block, ``H[x, x] = v26``); ``(value, axes)`` when they are its transpose by
        ``axes``; else None."""
        first = moved.flat[0]
        if type(first) is not Pick:
            return None
        of = first.of
        at = [x.at if type(x) is Pick and x.of is of else -1 for x in moved.flat]
        if moved.size != math.prod(of.shape) or -1 in at:
            return None

        def fits(shape: tuple) -> bool:
            return shape == tuple(v.shape) or (named or id(v) in self._named) and \
                [n for n in shape if n != 1] == [n for n in v.shape if n != 1]
        if at == list(range(len(at))):
            return (of, None) if fits(tuple(of.shape)) else None
        index = np.arange(len(at)).reshape(of.shape)
        for axes in itertools.permutations(range(index.ndim)) if index.ndim <= 4 else ():
            turned = index.transpose(axes)
            if turned.reshape(-1).tolist() == at and fits(turned.shape):
                return of, axes
        return None

    def _keep(self, roots: list[Any]) -> None:
        """Drop the lines no root needs; note the leaves that are read."""
        live: set[int] = set()
        self.leaves: set[Entry] = set()
        stack = list(roots)
        while stack:
            x = stack.pop()
            if type(x) is Entry:
                self.leaves.add(x)
            elif type(x) is Line and id(x) not in live:
                live.add(id(x))
                stack.extend(x.args[0].flat if moved(x) else x.args)
        self.lines = {p: line for p, line in self.lines.items() if id(line) in live}

    # ------------------------------------------------------------ data movement

    def entries_of(self, x: Any) -> np.ndarray | None:
        """The operands the entries of ``x`` are, as an object array of its shape (a value
        of one entry is itself; a constant its numbers), or None where one is not known."""
        shape = tuple(np.shape(x)) if type(x) not in (Line, Entry) else tuple(x.shape)
        if type(x) is Line and x.prim is None:
            value = x.args[0]
            return value if moved(x) else np.asarray(value).astype(object)
        if type(x) is Line and id(x) in self.known:
            return self.known[id(x)]
        if type(x) in (Line, Entry):
            size = math.prod(shape)
            if size > ENTRIES or np.dtype(x.dtype).kind != "f":
                return None
            out = np.empty(shape, dtype=object)
            if size == 1:
                out.flat[0] = x
            else:               # entries of a value of several: each a Pick of it
                out.flat[:] = [Pick(x, k) for k in range(size)]
            return out
        value = np.asarray(x)
        return value.astype(object) if value.dtype.kind in "fiub" else None

    def _moved(self, prim: Primitive, args: tuple, attrs: dict | None,
               v: Entry) -> np.ndarray | None:
        """The operands the entries of a moving entry are (see ``entries_of``), or None."""
        size = math.prod(v.shape)
        if size > ENTRIES or np.dtype(v.dtype).kind != "f" or prim is not v.prim or \
                len(args) != len(v.inputs):
            return None
        xs, parts = [], []
        for x, recorded in zip(args, v.inputs):     # (an operand may be a reshape looked
            shape = tuple(np.shape(recorded))         # through: the recorded shapes hold)
            if type(x) in (Line, Entry):
                xs.append(np.zeros(shape, dtype=x.dtype))
                part = self.entries_of(x)
            else:
                xs.append(np.reshape(x, shape) if np.size(x) == math.prod(shape) else x)
                part = self.entries_of(x) if np.asarray(x).dtype.kind == "f" else None
            parts.append(None if part is None or part.size != math.prod(shape)
                         else part.reshape(shape))
        moving = [flows(prim, i, x) for i, x in enumerate(xs)]
        for i, x in enumerate(args):
            if type(x) in (Line, Entry) and (not moving[i] or parts[i] is None):
                return None     # an index computed on the tape, or a value of unknown entries
        out = np.empty(size, dtype=object)
        found = np.zeros(size, dtype=bool)
        base = None
        for i in range(len(xs)):
            if not moving[i]:
                continue
            try:
                base, code, count = landing(prim, xs, attrs or {}, i)
            except Exception:           # a forward that refuses zeros: not looked through
                return None
            if (count > 1).any() or (parts[i] is None and (count > 0).any()):
                return None     # entries summed, or a constant's we cannot read
            flat = None if parts[i] is None else parts[i].reshape(-1)
            for k in np.nonzero(count == 1)[0]:
                x_k = flat[int(code[k]) - 1]
                if type(x_k) not in (Line, Entry, Pick) and x_k == 0:
                    continue            # a zero of a constant adds nothing
                if found[k]:
                    return None         # two values added: computed, not moved
                out[k], found[k] = x_k, True
        if base is None:
            return None
        for k in np.nonzero(~found)[0]:
            out[k] = np.asarray(base).reshape(-1)[k].item()
        return out.reshape(v.shape)

    # ------------------------------------------------------------ what prints

    def shows(self, item: Any) -> bool:
        """Whether a leaf or an entry has a line in the derivation."""
        if type(item) is Leaf:
            return item.kind != "seed" and item.var in self.leaves
        return item.position in self.lines and self.lines[item.position].entry is item

    def derivatives(self, event: BlockEnd) -> list[tuple[Entry, Any]]:
        """The (variable, derivative) lines a block ends with: the wrt it was asked for."""
        asked = self.asked.get(id(event))
        if event.kind == "jvp":
            return [(x, self.value(g)) for x, g in event.pairs]
        if asked is None:
            return [(x, self.value(g)) for x, g in event.pairs
                    if self.leaf_kind.get(x) == "leaf"]
        found = event.derivatives
        return [(w, self.value(g)) for w, g in zip(asked.wrt, asked.grads)
                if found.get(w) is g]
