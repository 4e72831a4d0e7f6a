"""Ops: one tape, one v-counter, and the one recording path (``apply``).

The Variables recorded on an Ops hold it (``x.rec``); its tape holds entries, which point at
no Variable and no Ops, so an Ops and its Variables are freed by reference counting as soon as
the user lets go of them. The tape is in tape.py, the sweeps that differentiate it in
reverse.py and forward.py, the text made from it in render.py.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import ArgumentError, GraphError
from ..primitives import PrimitiveMethods
from ..primitives.core import Primitive
from . import derivation, forward, nonfinite, render
from . import reverse as sweeps
from .batching import Batched
from .batching import apply as apply_batched
from .events import Leaf
from .html import Display
from .operands import check_name, float_array, recordable, translate
from .params import FREE, Adoptions, JoinsParameters
from .sharing import rules_for_pass, simplifying
from .tape import Tape
from .variable import UNARY, UNRECORDED, Entry, Variable, leaf_variable

_new = object.__new__
_OTHER = object()     # (apply: an input that is neither a Variable of the Ops nor a number)

# ---------------------------------------------------------------- Ops


class Ops(JoinsParameters, PrimitiveMethods, Display):
    """One tape and one v-counter: every primitive called on it records one entry.

    Each entry keeps only the values its primitive's rules read (``Primitive.saves``); every
    other value lives as long as the Variable that holds it. ``keep_values=True`` keeps every
    value on the tape instead (for an Ops whose entries forward sweeps will read again: the
    transforms that sweep forward; a freed value is otherwise recomputed by replay when one
    is needed).

    ``borrow=True`` records the caller's float arrays (leaves and constants) as read-only views,
    not copies: for an Ops that lives no longer than the call that made it (the transforms').
    ``keep_trace=False`` keeps no events (leaves, derivative blocks), only the entries: there is
    then no complete trace to print (what free Parameters record on).

    ``simplify=True`` records with the rules of ``sg.simplify`` (common subexpressions shared,
    identities removed, a gradient's sweep pruned to the entries on a path from ``wrt`` to L:
    sharing.py), so a nested derivative is taken of the simplified graph; off by default, so a
    trace is exactly what the program asked for. ``from_derivatives=True`` (transforms' own
    Ops) applies them in its recorded derivative passes from the second on
    (``sharing.rules_for_pass``). An Ops that simplifies keeps every value (a shared entry is
    handed out again).
    """

    absorbs = False     # True for an Ops that records a block reading other Ops' Variables
    made_in: Any = None    # for such an Ops: the Ops running when it was made
    outputs: tuple | None = None    # what a traced function returned (sg.trace sets it)
    _rules = False      # True once it records with the rules (sharing.simplifying)

    def within(self, other: Any) -> bool:
        """Whether this Ops was made while ``other`` ran (following ``made_in``)."""
        o = self.made_in
        while o is not None:
            if o is other:
                return True
            o = o.made_in
        return False


    def __init__(self, echo: bool = False, simplify: bool = False, keep_trace: bool = True,
                 borrow: bool = False, keep_values: bool = False, *,
                 from_derivatives: bool = False):
        self.tape = Tape(keep=bool(keep_trace))
        self.borrow = bool(borrow)
        self.recording = True
        self.simplify = bool(simplify) and not from_derivatives
        self.keep_values = bool(keep_values or self.simplify)
        self._adoptions: Adoptions | None = None    # the leaves standing for Parameters here
        self._leaves: dict[Entry, weakref.ref] = {}    # leaf entry -> its Variable, for backward
        self.echo = echo
        self._cse: dict = {}
        # recorded passes without the rules still to come (None: not made from_derivatives)
        self._plain_passes = 1 if simplify and from_derivatives else None
        if self.simplify:
            self.__class__ = simplifying(type(self))    # (not a bound method: no cycle)

    @property
    def recorder(self) -> Ops:
        """This Ops (it records itself; kept for code written when a recorder stood behind it)."""
        return self

    def __repr__(self) -> str:
        state = "" if self.recording else ", not recording"
        return f"<Ops: {len(self.tape)} entries, next v{self.tape.counter}{state}>"

    @property
    def echo(self) -> bool:
        """Whether each line is printed as it is recorded."""
        return render.echo in self.tape.listeners

    @echo.setter
    def echo(self, on: bool) -> None:
        listeners = self.tape.listeners
        if on and render.echo not in listeners:
            listeners.append(render.echo)
        elif not on and render.echo in listeners:
            listeners.remove(render.echo)

    # ------------------------------------------------------------ the trace

    def format_trace(self, explain: bool = False, block: int | None = None,
                     raw: bool = True) -> str:
        """The trace as text, in the seed's format.

        ``explain=True`` appends to each gradient entry the forward entry and input it pulls
        back through (``# d(v1 = v0 * b)/dv0``); ``block`` keeps one derivative block (-1: the
        newest); ``raw=False``: the derivation pruned to what was asked (derivation.py).
        """
        return "\n".join(render.lines(self.tape, explain, block, raw, self.outputs))

    def print_trace(self, console: Any = None, explain: bool = False,
                    block: int | None = None, raw: bool = False) -> None:
        """Print the derivation pruned to what was asked (``raw=True``: the whole tape) with
        rich colours by role and derivative order, a legend, and the entries per order."""
        render.print_rich(self.tape, console, explain, block, raw, self.outputs)

    def find_nonfinite(self, v: Variable) -> nonfinite.NonFinite | None:
        """Where a nan or inf first appears among v's ancestors (None when all are finite)."""
        if isinstance(v, Entry):
            return nonfinite.find_nonfinite(self.tape, v)
        if not isinstance(v, Variable) or v.rec is not self:
            raise ArgumentError("find_nonfinite: expected a Variable of this Ops")
        return nonfinite.find_nonfinite(self.tape, v.node)

    def release(self) -> None:
        """Forget the recorded history so its memory returns now; Variables keep their values.

        Nothing else needs it (an Ops nobody holds is freed by reference counting, with its
        tape): it is for an Ops you keep. Afterwards every Variable of this Ops is a leaf (no
        history) and the trace is empty; a gradient of one that was computed raises GraphError
        (it can no longer reach what it was computed from).
        """
        self.tape.clear()
        self._leaves.clear()
        if self.simplify:
            self._cse.clear()
        if self._adoptions is not None:
            self._adoptions.prune()

    def __enter__(self) -> Ops:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    @contextmanager
    def no_grad(self) -> Iterator[None]:
        """Within the block, primitives compute values and record nothing (a gradient of
        such a value raises GraphError: it has no history)."""
        before = self.recording
        self.recording = False
        try:
            yield
        finally:
            self.recording = before

    # ------------------------------------------------------------ derivatives (sweeps.py)

    def grad(self, L: Variable, wrt: Variable | Sequence[Variable], seed: Any = None,
             create_graph: bool = True, name: str | Sequence[str] | None = None) -> Any:
        """Gradients of L with respect to ``wrt``, computed by recorded primitives.

        Sets ``.grad`` on each of ``wrt`` (replacing it) and returns the gradients
        in order (a single Variable when ``wrt`` is one). ``name`` names the gradients (one
        name, or one per ``wrt``): each named gradient is an alias entry of its own
        (``dW = v12``), so a cotangent the sweep shares keeps its v-number.
        """
        single = isinstance(wrt, (Variable, Entry)) or not isinstance(wrt, Iterable)
        wrt = wrt if single else list(wrt)
        if type(L) is Entry:            # entries of this tape stand for their Variables
            L = sweeps.as_variable(self, L)
        if single and type(wrt) is Entry:
            wrt = sweeps.as_variable(self, wrt)
        elif not single and any(type(w) is Entry for w in wrt):
            wrt = [sweeps.as_variable(self, w) if type(w) is Entry else w for w in wrt]
        names = None if name is None else [name] if isinstance(name, str) else list(name)
        count = 1 if single else len(wrt)
        if names is not None and (len(names) != count or not all(
                isinstance(n, str) and n.isidentifier() for n in names)):
            raise ArgumentError(f"grad: name= needs {count} identifier(s), one per wrt, got "
                                f"{name!r}")
        plain = rules_for_pass(self, create_graph, [wrt] if single else wrt)
        try:
            grads = sweeps.grad(self, L, wrt, seed, create_graph)
        finally:
            if plain is not None:
                self.__class__ = plain
        return derivation.asked(self, L, wrt, grads, names, bool(create_graph))

    def backward(self, L: Variable, seed: Any = None, create_graph: bool = False,
                 retain_graph: bool | None = None) -> None:
        """Accumulate dL/d(leaf) into ``.grad`` of every leaf that requires grad (PyTorch style)."""
        plain = rules_for_pass(self, create_graph)
        try:
            sweeps.backward(self, L, seed, create_graph, retain_graph)
        finally:
            if plain is not None:
                self.__class__ = plain

    def jvp(self, y: Variable, xs: Variable | Sequence[Variable], tangents: Any,
            create_graph: bool = True) -> Variable:
        """The tangent of y along ``tangents`` of ``xs``, by a forward sweep of recorded jvps."""
        plain = rules_for_pass(self, create_graph)
        try:
            return forward.jvp(self, y, xs, tangents, create_graph)
        finally:
            if plain is not None:
                self.__class__ = plain

    # ------------------------------------------------------------ leaves

    def var(self, value: Any, name: str | None = None, requires_grad: bool = True) -> Variable:
        """A leaf holding a float copy of ``value`` (float64 unless it is float16/32/64; a
        read-only view instead of a copy on an Ops that borrows)."""
        arr = float_array(value, name, self.borrow)
        return self.leaf(arr, check_name(name), bool(requires_grad))

    def named_var(self, value: Any, name: str) -> Variable:
        """A named leaf; its name prints in the trace and consumes no v-number."""
        if name is None:
            raise ArgumentError("named_var needs a name")
        return self.var(value, name=name)

    def leaf(self, value: Any, name: str | None = None, requires_grad: bool = True,
             kind: str = "leaf", source: Variable | None = None) -> Variable:
        """A leaf holding ``value`` itself (made read-only, not copied), with a leaf event."""
        arr = value if type(value) is np.ndarray else np.asarray(value)
        arr.flags.writeable = False
        tape = self.tape
        v = self._bare(arr, tape.number() if name is None else name, requires_grad)
        if requires_grad and kind == "leaf":    # backward() sets its .grad while it lives
            self._leaves[v.node] = weakref.ref(v)
        if tape.keep or tape.listeners:     # (a tape that keeps no trace records no event)
            tape.add(Leaf(v.node.position, v.node, kind,
                          source if source is None or source.rec is FREE else source.node))
            v.raw = v.node.raw      # (a listener may have wrapped it: sg.jit watches)
        return v

    def unrecorded(self, value: Any, name: str | None = None) -> Variable:
        """A Variable of this Ops that is on no tape and takes no v-number."""
        if type(value) is not np.ndarray and isinstance(value, np.generic):
            value = np.asarray(value)
        return self._bare(value, name, False)

    def zeros_like(self, w: Variable, record: bool = True) -> Variable:
        """Zeros of w's shape and dtype: a recorded leaf, or unrecorded when ``record`` is off.

        The zeros standing for the tangent of a bool or integer entry require no grad.
        """
        z = np.zeros(w.shape, dtype=w.dtype)
        if record:
            return self.leaf(z, None, w.dtype.kind == "f", "zeros")
        z.flags.writeable = False
        return self.unrecorded(z)

    def detach(self, x: Variable) -> Variable:
        """A new leaf with x's value through which no gradient flows."""
        if not self.recording:
            return self.unrecorded(x.raw)
        return self.leaf(x.raw, None, False, "detach", source=x)

    def _bare(self, value: Any, label: str | int | None, requires_grad: bool) -> Variable:
        """A Variable computed by no primitive; its position is where its dependents can start."""
        return leaf_variable(value, self, label, requires_grad, self.tape.end)

    # ------------------------------------------------------------ recording

    def apply(self, prim: Primitive, inputs: Sequence[Any], attrs: dict | None = None,
              name: str | None = None) -> Any:
        """Record ``prim`` on ``inputs`` with ``attrs`` (every primitive method calls this).

        An input is a Variable of this Ops, an entry of its tape (what the sweeps hand the
        rules), or a constant; the result is a Variable holding the value, whose entry keeps
        the values the primitive's rules read.
        """
        if type(inputs) is not tuple:
            inputs = tuple(inputs)
        n = len(inputs)
        values = None   # one or two inputs, each a Variable, an entry or a Python number
        if n == 2:      # (the common calls): read without a value list
            a, b = inputs
            ta, tb = type(a), type(b)
            if ta is Variable and a.rec is self:
                na = a.node
                if tb is Variable and b.rec is self:
                    nb = b.node
                    nodes, values = (na, nb), (a.raw, b.raw)
                    requires = na.requires_grad or nb.requires_grad
                elif tb is Entry:
                    nodes, values = (na, b), (a.raw, b.raw)
                    requires = na.requires_grad or b.requires_grad
                elif tb is float or tb is int:
                    nodes, values, requires = (na, b), (a.raw, b), na.requires_grad
            elif ta is Entry:
                if tb is Variable and b.rec is self:
                    nb = b.node
                    nodes, values = (a, nb), (a.raw, b.raw)
                    requires = a.requires_grad or nb.requires_grad
                elif tb is Entry:
                    nodes, values = inputs, (a.raw, b.raw)
                    requires = a.requires_grad or b.requires_grad
                elif tb is float or tb is int:
                    nodes, values, requires = inputs, (a.raw, b), a.requires_grad
            elif ta is float or ta is int:
                if tb is Variable and b.rec is self:
                    nb = b.node
                    nodes, values, requires = (a, nb), (a, b.raw), nb.requires_grad
                elif tb is Entry:
                    nodes, values, requires = inputs, (a, b.raw), b.requires_grad
        elif n == 1:
            a = inputs[0]
            ta = type(a)
            if ta is Variable and a.rec is self:
                na = a.node
                nodes, values, requires = (na,), (a.raw,), na.requires_grad
            elif ta is Entry:
                nodes, values, requires = inputs, (a.raw,), a.requires_grad
        convert = False
        if values is None:
            values = []
            nodes = []
            requires = None         # None until an input is a Variable of this Ops
            for x in inputs:
                tx = type(x)
                if tx is Variable and x.rec is self or tx is Entry:
                    values.append(x.raw)
                    node = x.node if tx is Variable else x
                    nodes.append(node)
                    requires = requires or node.requires_grad
                elif tx is float or tx is int:
                    values.append(x)
                    nodes.append(x)
                else:               # constants, free or foreign Variables, batched values
                    convert = True
                    values.append(x)
                    nodes.append(x)
        if convert:
            for x in inputs:
                if type(x) is Variable and x.rec is not self and x.rec.absorbs and \
                        not self.within(x.rec):
                    # a block recording on an Ops of its own reads this Variable through a
                    # closure (``w * x``, w of this Ops): the block's Ops records it
                    return x.rec.apply(prim, inputs, attrs, name)
            for x in inputs:
                if type(x) is Batched:      # inside vmap: batching.py
                    return apply_batched(self, prim, inputs, attrs, name)
            nodes, values, requires = recordable(self, prim, inputs)
        if requires is None:    # constants only: fold, record nothing
            return prim.forward(*values, **attrs) if attrs else prim.forward(*values)
        try:
            if attrs:
                value = prim.forward(*values, **attrs)
            elif n == 2:        # (no argument tuple to build: the common call)
                value = prim.forward(values[0], values[1])
            else:
                value = prim.forward(*values)
        except Exception as e:  # numpy's message, with our names and shapes
            err = translate(prim, inputs, e)
            if err is e:
                raise
            try:
                raise err from e
            finally:    # (the frame would hold the error that holds the frame: a cycle)
                del err
        if type(value) is not np.ndarray and isinstance(value, np.generic):
            value = np.asarray(value)
        if not self.recording:      # no history: op.grad of it says why (reverse.py)
            out = self.unrecorded(value)
            out.node.attrs = UNRECORDED
            return out
        tape = self.tape
        e = _new(Entry)             # leaf_entry's work inlined: this is the hot path
        e.prim = prim
        if n == 2:                  # set_inputs, inlined: this is the hot path
            e.in0, e.in1 = nodes
            e.more = None
        elif n == 1:
            e.in0 = nodes[0]
            e.in1 = UNARY
            e.more = None
        else:
            e.in0 = e.in1 = None
            e.more = tuple(nodes)
        e.attrs = attrs
        entries = tape.entries
        e.position = tape.base + len(entries)
        if name is None:
            name = tape.counter
            tape.counter = name + 1
        elif type(name) is not str:
            name = check_name(name)
        e.label = name
        e.shape = value.shape
        e.dtype = value.dtype
        e.requires_grad = requires and prim.differentiable
        if self.keep_values or prim.saves_out:
            e.raw = value
        else:                       # only what the rules read (Primitive.saves)
            e.raw = None
        if not self.keep_values:
            kept = prim.saved_inputs
            if kept is None:        # (every input: the inputs' values are kept with them)
                if n == 2:
                    x, y = nodes
                    if type(x) is Entry and x.raw is None:
                        x.raw = values[0]
                    if type(y) is Entry and y.raw is None:
                        y.raw = values[1]
                else:
                    for i, x in enumerate(nodes):
                        if type(x) is Entry and x.raw is None:
                            x.raw = values[i]
            elif kept:
                for i in kept:
                    if i < n:       # (an input held as an attribute instead is kept there)
                        x = nodes[i]
                        if type(x) is Entry and x.raw is None:
                            x.raw = values[i]
        entries.append(e)
        if tape.listeners:
            for listen in tape.listeners:
                listen(e)
            if e.raw is not None:       # (a listener may have wrapped it: sg.jit watches)
                value = e.raw
        out = _new(Variable)        # handle()'s work inlined
        out.raw = value
        out.node = e
        out.rec = self
        out.grad = None
        return out

    def record_exactly(self, prim: Primitive, inputs: Sequence[Any], attrs: dict | None = None,
                       name: str | None = None) -> Any:
        """Record ``prim`` as asked, even on an Ops that simplifies (no rule, no sharing)."""
        return self.apply(prim, inputs, attrs, name)

    def program(self, inputs: Variable | Sequence[Variable],
                outputs: Variable | Sequence[Variable]) -> Any:
        """The entries between ``inputs`` and ``outputs`` as an ``sg.Program`` (replayable)."""
        from ..program.core import extract
        for v in [outputs] if isinstance(outputs, Variable) else list(outputs):
            if isinstance(v, Variable) and v.rec is not self:
                raise GraphError(f"program: {v.name} belongs to another Ops")
        return extract(inputs, outputs, self)

    def to_networkx(self, outputs: Variable | Sequence[Variable] | None = None) -> Any:
        """The tape (or the entries ``outputs`` need) as a ``networkx.DiGraph``."""
        from ..program.graph import tape_graph
        return tape_graph(self, outputs)


FREE.recorder = Ops    # free computations record on an Ops of their own (params.py)
