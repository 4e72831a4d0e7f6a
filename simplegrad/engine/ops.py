"""Ops: one tape, one v-counter, and the one recording path (``apply``).

The Variables recorded on an Ops hold it (``x.rec``); its tape holds entries, which point at
no Variable and no Ops, so an Ops and its Variables are freed by reference counting as soon as
the user lets go of them. The tape is in tape.py, the sweeps that differentiate it in
reverse.py and forward.py, the text made from it in render.py.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import (
    ArgumentError,
    AxisError,
    DTypeError,
    GraphError,
    LinAlgError,
    OutOfBoundsError,
    ShapeError,
    SimplegradError,
)
from ..primitives import PrimitiveMethods, rewrites
from ..primitives.core import Primitive, error
from . import derivation, forward, nonfinite, render
from . import reverse as sweeps
from .batching import Batched
from .batching import apply as apply_batched
from .html import Display
from .params import FREE
from .tape import Leaf, Tape, value_of
from .variable import (
    MASKED,
    UNARY,
    UNRECORDED,
    Entry,
    Variable,
    float_array,
    handle,
    leaf_variable,
)

# ---------------------------------------------------------------- operands: constants
#
# What a primitive may be given besides Variables, and the errors that name what it was given.
#
# Constants (Python numbers, bools, numpy arrays and scalars, lists) are converted once, when an
# entry records them: a 0-d constant becomes a Python number, a bool array stays bool, any other
# array becomes a read-only array of the dtype of the entry's first float Variable, or keeps its
# own when no input is a float Variable (a bool condition never makes a branch bool), copied
# unless nothing can write through it already. User data for leaves becomes a fresh float array.
#
# An Ops made with ``borrow=True`` records arrays of the right dtype as read-only views of the
# caller's memory instead of copies. The transforms use it for the Ops they make and release
# within one call: nothing recorded outlives the call, so the caller cannot write to an array
# while a tape that reads it is alive.

_SCALAR = {"b": bool, "i": int, "u": int, "c": complex}


def constant(prim: Primitive, inputs: tuple, x: Any, dtype: np.dtype | None,
             borrow: bool = False) -> Any:
    """One constant operand as it is recorded (see the module docstring); ``borrow``: an array
    of the right dtype is recorded as a read-only view of the caller's memory, not a copy."""
    if type(x) is np.ndarray and x.ndim and x.dtype == dtype:     # the common case, early
        if not x.flags.writeable and frozen(x):
            return x
        if borrow:
            out = x.view()
            out.setflags(write=False)
            return out
    if isinstance(x, (bool, np.bool_)):     # a condition or mask: stays bool
        return bool(x)
    if isinstance(x, np.ma.MaskedArray):
        raise error(prim.name, inputs, MASKED, ArgumentError)
    if not isinstance(x, (np.ndarray, np.generic, list, tuple, float, int, complex)):
        raise error(prim.name, inputs, f"cannot take a {type(x).__name__} as an operand",
                    ArgumentError)
    arr = np.asarray(x)
    if arr.dtype.kind not in "biufc":
        raise error(prim.name, inputs, f"constant of dtype {arr.dtype} is not supported",
                    DTypeError)
    if arr.ndim == 0:
        return _SCALAR.get(arr.dtype.kind, float)(arr)
    if arr.dtype.kind == "c" and dtype is not None and dtype.kind == "f":
        dtype = np.result_type(dtype, arr.dtype)    # a complex constant beside real Variables
    same = dtype is None or arr.dtype == dtype or arr.dtype.kind == "b"
    if same and frozen(arr):
        return arr          # read-only all the way down (a Variable's value): no copy
    if same and borrow:
        out = arr.view()    # no copy: the Ops lives no longer than the caller's call
    elif arr.dtype.kind == "b":             # masks and conditions stay bool
        out = arr.copy()
    else:
        out = np.array(arr, dtype=dtype)    # the caller may mutate theirs later
    out.setflags(write=False)
    return out


def recordable(ops: Ops, prim: Primitive, inputs: tuple) -> tuple:
    """Inputs other than ``ops``' Variables, entries and Python numbers, made recordable:
    another Ops' Variable is joined (``ops.join``: a free one becomes a leaf, any other is
    refused), constants are converted. Returns the inputs as recorded (entries and constants),
    their values and whether any input requires grad (None when none is a Variable)."""
    nodes = list(inputs)
    values = list(inputs)
    requires = None
    real = None     # the first float Variable's dtype: the constants' (a bool condition or an
    constants = False   # integer index never decides it; without one they keep their own)
    for i, x in enumerate(inputs):
        if isinstance(x, Variable):
            if x.rec is not ops:
                node = ops.join(prim, tuple(inputs), x)     # (a leaf entry, holding the value)
                values[i] = node.raw
            else:
                node = x.node
                values[i] = x.raw
        elif type(x) is Entry:
            node = x
            values[i] = x.raw
        else:
            if type(x) is not float and type(x) is not int:
                constants = True
            continue
        nodes[i] = node
        requires = requires or node.requires_grad
        if real is None and node.dtype.kind == "f":
            real = node.dtype
    if constants:
        frozen_inputs = tuple(inputs)
        for i, x in enumerate(nodes):
            if type(x) is not Entry and type(x) is not float and type(x) is not int:
                nodes[i] = values[i] = constant(prim, frozen_inputs, x, real, ops.borrow)
    return tuple(nodes), values, requires


def frozen(arr: np.ndarray) -> bool:
    """True when neither the array nor any array it views can be written through."""
    while isinstance(arr, np.ndarray):
        if arr.flags.writeable:
            return False
        arr = arr.base
    return True


def check_name(name: Any) -> str | None:
    """A given name as it is stored: a str, or None for a v-number."""
    if name is not None and not isinstance(name, str):
        raise ArgumentError(f"a name must be a str, got {type(name).__name__}")
    return name

# ---------------------------------------------------------------- errors

def translate(prim: Primitive, inputs: tuple, e: Exception) -> Exception:
    """numpy's exception from a forward as ours, with names and shapes (ours pass as they are)."""
    if isinstance(e, SimplegradError):     # ours already (from a custom forward, say)
        return e
    if isinstance(e, np.linalg.LinAlgError):
        kind = LinAlgError
    elif isinstance(e, np.exceptions.AxisError):
        kind = AxisError
    elif isinstance(e, IndexError):
        kind = OutOfBoundsError
    elif isinstance(e, ValueError):
        kind = ShapeError
    elif isinstance(e, TypeError):
        kind = ArgumentError
        if any(getattr(getattr(x, "dtype", None), "kind", None) == "c" for x in inputs):
            kind, e = DTypeError, f"{prim.name} does not take complex values ({e})"
    else:
        return e
    reason = str(e).strip()     # numpy's message may already name the function
    if reason.startswith(prim.name + ": "):
        reason = reason[len(prim.name) + 2:]
    return error(prim.name, inputs, reason, kind)


# ---------------------------------------------------------------- recording with the rules
#
# Recording with the rules of ``sg.simplify``: what an Ops that simplifies records with.
#
# ``simplifying(cls)`` is the recorder class ``cls`` whose ``apply`` is ``apply_simplified``: an
# identity gives back its input, a rewrite records the simpler form, and an entry already on the
# tape with the same primitive, inputs and attributes is that entry (hash-consing, through the
# Ops's table ``_cse``, which ``release`` clears). ``record_exactly`` is the
# plain ``apply`` of ``cls``: what a named result and a transform's identity entry record with.
# The rules are in ``primitives/rewrites.py`` (the step: ``simplified``, as ``sg.simplify``
# and the derivation take it, with ``recording=True``); ``rules_for_pass`` says when a
# transform's Ops starts using them.

_HASHED = 256   # constant arrays up to this many entries are compared by value when sharing


def apply_simplified(self: Any, prim: Primitive, inputs: Sequence[Any],
                     attrs: dict | None = None, name: str | None = None) -> Any:
    """Record with the rules of ``sg.simplify`` (rewrites.py): an identity gives back its
    input, a rewrite records the simpler form, and an entry already on the tape with the
    same primitive, inputs and attributes is reused (hash-consing).

    Lists and free Variables are converted and joined first, as they will be recorded.
    An entry reading a constant array of more than ``_HASHED`` entries is never shared:
    hashing its bytes would cost more than sharing saves, and its identity says nothing
    (the caller may write to it, or free it and make another).
    """
    paused = self._paused       # (``recording``, inlined: once an entry)
    if paused and _thread() in paused or name is not None:  # a named result: as asked
        return self.record_exactly(prim, inputs, attrs, name)
    if len(inputs) == 2:        # (two inputs, the common call: no list)
        a, b = inputs
        ta, tb = type(a), type(b)
        if ta is Variable and a.rec is self:
            a = a.node if a.node.raw is not None else _held(a)
        elif ta is not Entry:
            return _mixed(self, prim, tuple(inputs), attrs)
        if tb is Variable and b.rec is self:
            b = b.node if b.node.raw is not None else _held(b)
        elif tb is not Entry:
            return _mixed(self, prim, tuple(inputs), attrs)
        nodes = (a, b)
    else:
        nodes = []
        for x in inputs:
            tx = type(x)
            if tx is Variable and x.rec is self:
                nodes.append(x.node if x.node.raw is not None else _held(x))
            elif tx is Entry:
                nodes.append(x)
            else:
                return _mixed(self, prim, tuple(inputs), attrs)
        nodes = tuple(nodes)
    # entries of this tape only (the sweeps' common case): the key is cse_key's, inline
    quick = prim.simplifies     # (rewrites.may_simplify, inlined)
    if quick is not None and quick(prim, nodes, attrs):
        return _mixed(self, prim, nodes, attrs)
    if not self.tape.keep:      # (a tape that keeps no trace keeps no table)
        return self.record_exactly(prim, nodes, attrs)
    key = (prim, frozenset(nodes) if prim.commutative and len(nodes) == 2
           else nodes, rewrites.attrs_key(attrs) if attrs else ())
    return _shared(self, key, prim, nodes, attrs)


def _mixed(self: Any, prim: Primitive, inputs: tuple, attrs: dict | None) -> Any:
    """``apply_simplified`` for inputs that are not all entries of this tape, or that a rule
    may apply to: the rules see entries (a Variable of this tape as its entry)."""
    shareable = self.tape.keep      # (a tape that keeps no trace keeps no table)
    convert = False
    mine = False
    given = inputs          # (an identity gives back the Variable it was given)
    nodes = list(inputs)
    for i, x in enumerate(inputs):
        tx = type(x)
        if tx is Variable and x.rec is self:
            nodes[i] = x.node if x.node.raw is not None else _held(x)
            mine = True
        elif tx is Entry:
            mine = True
        elif tx is float or tx is int:
            continue
        elif tx is np.ndarray:      # the rules read arrays as they are
            shareable = shareable and x.size <= _HASHED
        elif tx is bool or isinstance(x, np.generic):
            continue
        elif tx is Batched or tx is Variable and x.rec is not self and x.rec.absorbs and \
                not self.within(x.rec):     # recorded elsewhere first (see apply)
            return self.record_exactly(prim, inputs, attrs)
        else:               # lists, free Variables: as they will be recorded
            convert = True
    inputs = tuple(nodes)
    if convert:
        inputs, _, requires = recordable(self, prim, inputs)
        mine = requires is not None
        shareable = shareable and all(type(c) is not np.ndarray or c.size <= _HASHED
                                      for c in inputs)
    if not mine:            # constants only: folded
        return self.record_exactly(prim, inputs, attrs)
    key = None
    step = rewrites.simplified(prim, inputs, attrs, recording=True)
    if step is not None:
        if type(step) is rewrites.Same:
            same = step.input
            if type(same) is Entry:
                for x in given:
                    if type(x) is Variable and x.node is same:
                        return x
                ref = self._leaves.get(same)    # a leaf's Variable, while it lives (--x is x)
                x = None if ref is None else ref()
                return x if x is not None else handle(value_of(same), same, self)
            if type(same) is Variable and same.rec is self:
                return same
        else:
            prim, inputs, attrs, key = step
            for x in inputs:    # (its inputs may be entries inside others: their values)
                if type(x) is Entry and x.raw is None:
                    value_of(x)
    if not shareable:
        return self.record_exactly(prim, inputs, attrs)
    return _shared(self, key or rewrites.cse_key(prim, inputs, attrs), prim, inputs, attrs)


def _held(x: Variable) -> Entry:
    """x's entry, given x's value: one recorded before its Ops began to simplify keeps only
    what its rules read, but the rules here hand entries to primitives that read them."""
    x.node.raw = x.raw
    return x.node


def _shared(self: Any, key: tuple, prim: Primitive, inputs: tuple,
            attrs: dict | None) -> Any:
    """The entry recorded under ``key`` if it is still on the tape (a failed sweep's
    entries are undone), else a new one, recorded under it."""
    got = self._cse.get(key)
    if got is not None:
        hit, ref = got
        entries = self.tape.entries
        i = hit.position - self.tape.base
        if 0 <= i < len(entries) and entries[i] is hit:
            v = ref()           # the Variable it was handed out as, while it lives
            return v if v is not None else handle(value_of(hit), hit, self)
    out = self.record_exactly(prim, inputs, attrs)
    if type(out) is Variable:
        self._cse[key] = (out.node, weakref.ref(out))
    return out


def simplifying(cls: type) -> type:
    """``cls`` recording with the rules of ``sg.simplify`` (its ``apply`` is the simplifying
    one): a subclass, so that no instance holds a bound method of itself."""
    sub = _SIMPLIFYING.get(cls)
    if sub is None:
        sub = _SIMPLIFYING[cls] = type(cls.__name__, (cls,), {
            "apply": apply_simplified, "record_exactly": cls.apply, "_rules": True,
            "__module__": cls.__module__})
    return sub


_SIMPLIFYING: dict[type, type] = {}


def rules_for_pass(ops: Any, create_graph: bool, wrt: Sequence[Any] | None = None
                   ) -> type | None:
    """A derivative pass starts: on an Ops made ``from_derivatives=True`` (a transform's own)
    that is past its first recorded pass, record this one with the rules and give back the
    class to restore when it ends (None: nothing to restore).

    A transform's own Ops records its function's forward and its first recorded pass plainly:
    they are swept once each, and the rules (about 3 us an entry) seldom shorten them by what
    they cost. A pass over recorded passes (a derivative of a derivative, a Jacobian's rows)
    is where equal entries recur and the tape grows with every order; the entries such passes
    record are shared with each other, and from the first of them on the Ops ``simplify``s:
    its sweeps are pruned to what was asked. A gradient in ``wrt`` all recorded after the last
    pass ended sweeps a fresh forward only (the next inner step of an unrolled loop, as in
    MAML), so it records plainly too.
    """
    if not create_graph or ops._plain_passes is None or ops._rules or not ops.recording:
        return None
    if ops._plain_passes:
        ops._plain_passes -= 1
        return None
    if wrt is not None and _fresh(ops, wrt):
        return None
    ops.simplify = True
    ops.keep_values = True      # (a shared entry is handed out again, with its value)
    plain = type(ops)
    ops.__class__ = simplifying(plain)      # (not a bound method: no cycle)
    return plain


def _fresh(ops: Any, wrt: Sequence[Any]) -> bool:
    """Whether every one of ``wrt`` is a Variable of ``ops`` newer than its last pass."""
    last = ops.tape.last_pass_end
    return all(type(w) is Variable and w.rec is ops and w.position >= last for w in wrt)


_thread = threading.get_ident

# ---------------------------------------------------------------- Variables of other Ops


class Adoptions:
    """Which leaf entry stands for each free Variable (a Parameter) on one Ops, and back.

    The Ops holds its leaf entries (entries point at no Variable, so nothing here makes a
    cycle) and the Parameters weakly, in plain dicts: each step of a training loop adopts
    every parameter anew. A leaf replaced while its tape still reads it (after ``p.assign``)
    still routes its gradient to p; entries whose Parameter is gone are pruned when the Ops is
    released.
    """

    __slots__ = ("leaves", "sources", "replaced")

    def __init__(self) -> None:
        self.leaves: dict[int, tuple] = {}     # id(p) -> (p weakly, its leaf entry)
        self.sources: dict[Entry, weakref.ref] = {}    # leaf entry -> its p, weakly
        self.replaced: dict[int, list] = {}    # id(p) -> p's earlier leaf entries

    def leaf(self, ops: Ops, p: Variable) -> Entry:
        """The leaf entry standing for p on ``ops``: made on first use, and again after p's
        value was replaced."""
        got = self.leaves.get(id(p))
        if got is not None and got[0]() is p:
            leaf = got[1]
            if leaf.raw is p.raw:
                return leaf
            self.replaced.setdefault(id(p), []).append(leaf)    # p.assign: kept for grad
        leaf = ops.leaf(p.raw, p.label if type(p.label) is str else None, p.requires_grad,
                        "leaf", source=p).node
        self.leaves[id(p)] = (weakref.ref(p), leaf)
        self.sources[leaf] = weakref.ref(p)
        return leaf

    def earlier(self, p: Variable) -> list[Entry]:
        """p's leaf entries on this Ops from before its value was replaced (``p.assign``)."""
        return [leaf for leaf in self.replaced.get(id(p), ()) if self.source(leaf) is p]

    def source(self, leaf: Entry) -> Variable | None:
        """The free Variable ``leaf`` stands for, if any."""
        ref = self.sources.get(leaf)
        return None if ref is None else ref()

    def prune(self) -> None:
        """After a release: forget the leaves no later sweep can reach (those of Parameters
        that are gone, and those replaced by ``p.assign``, which only the released history
        read); each live Parameter keeps its current leaf."""
        self.leaves = {k: e for k, e in self.leaves.items() if e[0]() is not None}
        current = {e[1] for e in self.leaves.values()}
        self.sources = {k: r for k, r in self.sources.items() if k in current}
        self.replaced = {}


class JoinsParameters:
    """What a Recorder does with a Variable of another Ops: a free one (a Parameter) joins as
    a leaf standing for it (``Adoptions``); any other is refused, naming the operation."""

    _adoptions: Adoptions | None

    def join(self, prim: Primitive, inputs: tuple, x: Variable) -> Entry:
        """The entry standing for x, a Variable of another Ops, here: a free Variable's leaf,
        or an error naming the operation for any other."""
        if x.rec is not FREE:
            raise error(prim.name, inputs, _foreign(x), GraphError)
        return self._adopt(x)

    def _adopt(self, p: Variable) -> Entry:
        """The leaf entry standing for the free Variable p on this Ops (``params.Adoptions``)."""
        adoptions = self._adoptions
        if adoptions is None:
            adoptions = self._adoptions = Adoptions()
        return adoptions.leaf(self, p)

    def leaf_for(self, w: Variable) -> Variable:
        """w itself, or for a free Variable (a Parameter) a Variable of the leaf standing for
        it here."""
        if isinstance(w, Variable) and w.rec is FREE:
            leaf = self._adopt(w)
            return handle(leaf.raw, leaf, self)
        return w

    def earlier_leaves(self, w: Variable) -> list[Entry]:
        """For a free Variable (a Parameter), its leaf entries here from before ``w.assign``."""
        adoptions = self._adoptions
        if adoptions is None or not isinstance(w, Variable) or w.rec is not FREE:
            return []
        return adoptions.earlier(w)

    def source_of(self, leaf: Entry | Variable) -> Variable | None:
        """The free Variable (a Parameter) a leaf of this Ops stands for, if any."""
        adoptions = self._adoptions
        if adoptions is None:
            return None
        return adoptions.source(leaf.node if isinstance(leaf, Variable) else leaf)


def _foreign(x: Variable) -> str:
    """What to do with a Variable of another Ops: its history is gone (released) or it
    belongs to another live computation."""
    tape = getattr(x.rec, "tape", None)
    if tape is not None and x.position < tape.base:
        return (f"{x.name} belongs to an Ops released since it was recorded, so it has no "
                f"history left: use {x.name}.value here as a constant, make it a leaf of this "
                f"Ops to differentiate with respect to it (op.var({x.name}.value)), or keep "
                "values that live across steps as sg.Parameter")
    return (f"{x.name} belongs to another Ops, still live: record the whole computation on "
            f"one Ops (create {x.name} there, or pass it to the transform as an argument, "
            "so that the transform records on its Ops), or keep values that live across "
            "steps as sg.Parameter")


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
    "recording with the rules" above), so a nested derivative is taken of the simplified graph;
    off by default, so a trace is exactly what the program asked for. ``from_derivatives=True``
    (transforms' own Ops) applies them in its recorded derivative passes from the second on
    (``rules_for_pass``). An Ops that simplifies keeps every value (a shared entry is
    handed out again).
    """

    absorbs = False     # True for an Ops that records a block reading other Ops' Variables
    made_in: Any = None    # for such an Ops: the Ops running when it was made
    outputs: tuple | None = None    # what a traced function returned (sg.trace sets it)
    _rules = False      # True once it records with the rules (``simplifying``)

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
        self._paused: dict[int, int] = {}   # thread -> depth of its no_grad blocks (per thread)
        self.simplify = bool(simplify) and not from_derivatives
        self.keep_values = bool(keep_values or self.simplify)
        self._adoptions: Adoptions | None = None    # the leaves standing for Parameters here
        self._leaves: dict[Entry, weakref.ref] = {}    # leaf entry -> its Variable, for backward
        if echo:
            self.echo = True        # (a listener on the tape: render.echo)
        self._cse: dict = {}
        # recorded passes without the rules still to come (None: not made from_derivatives)
        self._plain_passes = 1 if simplify and from_derivatives else None
        if self.simplify:
            self.__class__ = simplifying(type(self))    # (not a bound method: no cycle)

    @property
    def recording(self) -> bool:
        """Whether this thread records on this Ops (False inside its ``no_grad`` block)."""
        paused = self._paused
        return not paused or _thread() not in paused

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
        """Within the block, primitives called by this thread compute values and record
        nothing (a gradient of such a value raises GraphError: it has no history); other
        threads record as before, as PyTorch's ``no_grad`` is per thread."""
        paused = self._paused
        me = _thread()
        paused[me] = paused.get(me, 0) + 1
        try:
            yield
        finally:
            depth = paused.pop(me) - 1
            if depth:
                paused[me] = depth

    # ------------------------------------------------------------ derivatives (sweeps.py)

    def grad(self, L: Variable, wrt: Variable | Sequence[Variable], seed: Any = None,
             create_graph: bool = True, name: str | Sequence[str] | None = None) -> Any:
        """Gradients of L with respect to ``wrt``, computed by recorded primitives.

        Sets ``.grad`` on each of ``wrt`` (replacing it) and returns the gradients
        in order (a single Variable when ``wrt`` is one). ``name`` names the gradients (one
        name, or one per ``wrt``): each named gradient is an alias entry of its own
        (``dW = v12``), so a cotangent the sweep shares keeps its v-number.
        """
        tw = type(wrt)      # (a list or tuple first: an ABC check costs 0.1 us)
        single = tw is not list and tw is not tuple and (
            isinstance(wrt, (Variable, Entry)) or not isinstance(wrt, Iterable))
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
        arr.setflags(write=False)
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
        z.setflags(write=False)
        return self.unrecorded(z)

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
        n = len(inputs)             # (a tuple, or a list: the lists below take any sequence)
        # one or two inputs, each a Variable of this Ops, an entry or a Python number (the
        # common calls): read into x0, x1 (as recorded) and v0, v1 (their values), no lists;
        # ``like`` is an input entry whose shape an elementwise output has (no new tuple)
        lists = True
        if n == 2:
            a, b = inputs
            ta = type(a)
            tb = type(b)
            if ta is Variable and a.rec is self or ta is Entry:
                x0 = a.node if ta is Variable else a
                v0 = a.raw
                if tb is float or tb is int:
                    x1 = v1 = b
                    requires = x0.requires_grad
                    like = x0
                    lists = False
                elif tb is Variable and b.rec is self or tb is Entry:
                    x1 = b.node if tb is Variable else b
                    v1 = b.raw
                    requires = x0.requires_grad or x1.requires_grad
                    like = x0 if x0.shape is x1.shape else None
                    lists = False
            elif (ta is float or ta is int) and (tb is Variable and b.rec is self or
                                                 tb is Entry):
                x0 = v0 = a
                x1 = b.node if tb is Variable else b
                v1 = b.raw
                requires = x1.requires_grad
                like = x1
                lists = False
        elif n == 1:
            a = inputs[0]
            ta = type(a)
            if ta is Variable and a.rec is self or ta is Entry:
                x0 = like = a.node if ta is Variable else a
                v0 = a.raw
                x1 = UNARY
                requires = x0.requires_grad
                lists = False
        if lists:                   # any other call: lists
            like = None
            if type(inputs) is not tuple:
                inputs = tuple(inputs)
            values = []
            nodes = []
            requires = None         # None until an input is a Variable of this Ops
            convert = False
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
                        # a block recording on an Ops of its own reads this Variable through
                        # a closure (``w * x``, w of this Ops): the block's Ops records it
                        return x.rec.apply(prim, inputs, attrs, name)
                for x in inputs:
                    if type(x) is Batched:      # inside vmap: batching.py
                        return apply_batched(self, prim, inputs, attrs, name)
                nodes, values, requires = recordable(self, prim, inputs)
            if requires is None:    # constants only: fold, record nothing
                return prim.forward(*values, **attrs) if attrs else prim.forward(*values)
            if n == 2:
                x0, x1 = nodes
                v0, v1 = values
            elif n == 1:
                x0 = nodes[0]
                v0 = values[0]
                x1 = UNARY
            else:
                x0 = x1 = None
        try:
            if n == 2:              # (no argument tuple to build: the common calls)
                value = prim.forward(v0, v1, **attrs) if attrs else prim.forward(v0, v1)
            elif n == 1:
                value = prim.forward(v0, **attrs) if attrs else prim.forward(v0)
            else:
                value = prim.forward(*values, **attrs) if attrs else prim.forward(*values)
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
        paused = self._paused       # (``recording``, inlined: no thread is in no_grad, mostly)
        if paused and _thread() in paused:     # no history: op.grad of it says why
            out = self.unrecorded(value)
            out.node.attrs = UNRECORDED
            return out
        tape = self.tape
        # leaf_entry's and set_inputs' work inlined: the hot path (and ``Entry()``, not
        # ``object.__new__(Entry)``: a class call with no arguments builds no argument tuple)
        e = Entry()
        e.prim = prim
        e.in0 = x0
        e.in1 = x1
        e.more = None if n < 3 else tuple(nodes)
        e.attrs = attrs
        entries = tape.entries
        e.position = tape.base + len(entries)
        if name is None:
            e.label = name = tape.counter
            tape.counter = name + 1
        else:
            e.label = name if type(name) is str else check_name(name)
        e.shape = value.shape if like is None or attrs or not prim.elementwise else like.shape
        e.dtype = value.dtype
        e.requires_grad = requires and prim.differentiable
        kept = prim.saved_inputs
        # (an Ops that keeps every value may have begun to only now: inputs recorded before
        # keep what their consumers' rules read, as on any Ops)
        e.raw = value if prim.saves_out or self.keep_values else None
        if kept is None and n < 3:      # (every input, of one or two: the common rules)
            if type(x0) is Entry and x0.raw is None:
                x0.raw = v0
            if type(x1) is Entry and x1.raw is None:
                x1.raw = v1
        else:                       # only what the rules read (Primitive.saves)
            if kept is None:        # (every input: the inputs' values are kept with them)
                for i, x in enumerate(nodes):
                    if type(x) is Entry and x.raw is None:
                        x.raw = values[i]
            elif kept:
                for i in kept:
                    if i >= n:      # (an input held as an attribute instead is kept there)
                        continue
                    if n > 2:
                        x, v = nodes[i], values[i]
                    else:
                        x, v = (x0, v0) if i == 0 else (x1, v1)
                    if type(x) is Entry and x.raw is None:
                        x.raw = v
        entries.append(e)
        if tape.listeners:
            for listen in tape.listeners:
                listen(e)
            if e.raw is not None:       # (a listener may have wrapped it: sg.jit watches)
                value = e.raw
        out = Variable()            # handle()'s work inlined
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
