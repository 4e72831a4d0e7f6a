"""Custom rules: ``custom_vjp`` and ``custom_jvp``, a Python function recorded as one entry
whose derivative is the user's rule; the pytrees through that entry; and the machinery
(``CustomFunction``) that ``checkpoint`` (checkpoint.py) shares.

Each turns a Python function into a ``Primitive`` made at run time and kept out
of ``REGISTRY``. Calling the function records ONE entry, printed as the call a
reader would write (``v7 = softplus(v3)``, ``v9 = checkpoint(block)(v3, W)``);
keyword arguments become the entry's attributes (constants, never
differentiated). The entry's rules use the vocabulary of ``primitives/core.py``:
given ``o`` = the recording Ops they run the user's code on the recorded
Variables, so whatever they compute is on the tape and can be differentiated
again; given ``o`` = VALUES they run the same code on Variables of a scratch Ops
and hand back arrays.

Which Ops records the call: ``recording_ops`` of the arguments (Parameters join it); with
Parameters only, or no Variable, the transform running around the call, else the implicit
Ops of Parameters. The forward and the rules run with their Ops around them (``running``),
so transforms inside them may close over the function's arguments. The forward records on a
scratch Ops (``ForwardOps``): a Variable that requires grad read through its closure (a
Parameter, a Variable of the caller's Ops) is refused, the rule giving it no gradient; one
that takes none is a constant, and an input of the entry when the Ops recording the call held
it before the call (``Closures``: the forward raises ``ReadsClosureError`` on reading it, and
the call is recorded again with it), so that a replay hands the forward its value at the
replay's inputs. (A value the forward computes from the closure alone, on the closure's Ops,
before it meets an argument, stays as recorded.) A forward that fails leaves the caller's
tape as it was.

Closures over vmapped values: under ``sg.vmap`` the function (made per example, JAX's
``outer(x)``) may read the vmap's examples through its closure. The entry, having no batching
rule, is recorded once per example with its inputs sliced; a batched value recorded before
the call is one more input (``Closures``), and for every vmap level such a value is batched at
the entry takes that level's example numbers as an input too (``Examples``: a forward reading
a batched value at a level the entry has no numbers for raises ``ReadsBatchedError`` and the
call is recorded again). The forward reads each batched value as its example: its input, or
(computed in the forward) at the entry's example numbers. The rules run on the recording Ops,
where such a value is batched, so what they return for it is every example's;
``at_examples`` keeps the entry's own (a value-only rule runs on a scratch Ops that reads them
as the forward does). Otherwise a rule sees one example, so transforms it calls (a Jacobian the
rule takes) run at none of the vmaps' levels but those of a batched value it is handed or
reads (``rule_running``): they would lift its primals to the whole batch.

Pytree arguments and outputs: the entry's inputs are the leaves of the arguments, a pytree
output is raveled into its one output and sliced back, and the rule sees the call's
structures (``g`` and ``out`` as the output, one cotangent per argument, ``None`` for a whole
argument or a leaf). A ``Packing`` is made per call (``pack``) and rides on the entry as its
``_pack`` attribute (compared by value, so equal calls share a key); the forward fills in the
output's structure, which the rules read to rebuild ``g`` and ``out`` for the user's rule and
to flatten the cotangents it returns. ``nondiff_argnums`` (as JAX's) are kept off the inputs
and reach the rule first: ``bwd(*nondiff, g, out, *other_inputs)``.

``custom_vjp``. API choice: ``f = custom_vjp(forward)`` then ``f.defvjp(bwd)`` with ``bwd(g,
out, *inputs, **attrs)`` returning one cotangent per input (``None`` for "no gradient"): every
built-in vjp rule's signature minus ``o``. The tape keeps the inputs and the output, so there
is no ``ctx``, and one rule serves recorded and value-only sweeps. JAX's ``f.defvjp(fwd,
bwd)`` works too (``FromResiduals``: fwd runs again in the backward, recording its residuals).
A ``bwd`` written with simplegrad operations works at every order; one that returns numpy
arrays, or a nonzero cotangent that does not depend on the Variable ``g`` (made from
``g.value``), or one that read the raw value of the output or of an input that requires grad
(``np.cos(x.value)``: the rule's handles are ``Watched``), works at first order
(``raw_backward`` records it), and differentiating its result again raises
``NotDifferentiableError``. Forward mode uses ``f.defjvp(rule)`` when
given (``JVPRule``, below); else it is derived from the vjp, ``J t`` being the gradient with
respect to a fresh ``u`` (of ones) of ``<bwd(u), t>``, which is right only when ``bwd`` is
linear in ``u``: that is tested once per function (``linear_in_cotangent``) and a rule that is
not (gradient clipping) makes forward mode raise, naming the function.

``linear_in_cotangent`` is the test: forward mode through a custom_vjp is the transpose of its
vjp rule, which is right only when the rule is linear in its cotangent ``g`` (gradient
clipping, ``g -> clip(g, -c, c)``, is not). It runs the rule on values at the entry's
primal point, at two fixed-seed random cotangents ``u1``, ``u2`` of the output's shape, and
checks additivity with homogeneity (``bwd(a u1 + b u2) = a bwd(u1) + b bwd(u2)``, a = 1.75,
b = -0.625) and homogeneity at scales 1e6 and 1e-6 (``bwd(s u1) = s bwd(u1)``; float16: 16
and 1/16), each to 1e-4 (float32: 3.5e-3, float16: 0.3) relative to the largest term
compared: a rule that is not linear misses by order one (a small shift ``g + c`` at the
1e-6 scale), and a linear one computed in lower precision (float32 inside a float64 rule)
still passes. Six rule calls, once per function (the caller caches the answer); a rule whose
values are not finite there is given the benefit of the doubt.

A user's jvp rule (``JVPRule``) is ``rule(primals, tangents) -> (primal_out, tangent_out)``,
JAX's ``custom_jvp`` signature (with ``nondiff_argnums``: ``rule(*nondiff, primals,
tangents)``), primals and tangents being tuples of the differentiated arguments in the call's
structures. Given ``o`` = the recording Ops, the rule runs on the entry's recorded Variables,
so its tangent is recorded and can be differentiated again; given ``o`` = VALUES it runs on
Variables of a scratch Ops and hands back an array. A tangent that is ``None`` (an input that
does not move) reaches the rule as zeros. A rule that returns numpy arrays works at first
order; differentiating its tangent again raises ``NotDifferentiableError``.

``custom_jvp`` (``jax.custom_jvp``): ``f = sg.custom_jvp(fn)`` then ``f.defjvp(rule)``.
Forward mode (``jvp``, ``jacfwd``, ``hessian``'s forward pass, ``derivative``) runs the rule.
Reverse mode transposes it: the rule is linear in its tangents, so the cotangent of input i
for the output cotangent ``g`` is the gradient in fresh tangents ``t`` (zeros) of
``<rule(primals, t)[1], g>``, recorded (one reverse sweep of the tangent program the rule
records) so that it is a function of ``g`` and the primals and differentiates again, at every
order. A rule that is not linear in its tangents gives a wrong gradient, as in JAX. Pytrees,
the recording Ops, closures and vmap (one entry per example) are as for ``custom_vjp``.
"""

from __future__ import annotations

import copyreg
import functools
import inspect
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..engine.batching import Batched, innermost, levels_of, wrap
from ..engine.ops import Ops
from ..engine.params import FREE
from ..engine.reverse import as_variable
from ..engine.tape import ancestors
from ..engine.variable import Entry, Variable, entry_of, handle
from ..errors import ArgumentError, GraphError, NotDifferentiableError, ShapeError
from ..primitives import PrimitiveMethods
from ..primitives.core import Primitive, shape_of, value_of
from ..primitives.taylor import series_by_jvps
from ..pytree import LEAF, TreeDef, prefix_leaves, tree_flatten, tree_map, tree_unflatten
from .arguments import active, around, recording_ops, running
from .ravel import ravel_pytree

# ---------------------------------------------------------------- shared machinery


class CustomFunction:
    """A function recorded as one entry of a dynamic primitive (CustomVJP, CustomJVP,
    Checkpoint)."""

    # the values its rules read (Primitive.saves): a user's rule sees the inputs and the output
    saves: tuple = ("inputs", "out")

    def __init__(self, fn: Callable, label: str):
        if not callable(fn):
            raise ArgumentError(f"{label}: expected a function, got {type(fn).__name__}")
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._label = label
        # cotangents of one entry, computed once and handed out input by input (see _vjp)
        self._memo: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._nondiff: tuple[int, ...] = ()     # argument positions never differentiated
        self.primitive = Primitive(label, self._forward, [self._vjp], self._jvp, self._fmt, [],
                                   variadic=True, saves=self.saves, taylor=self._taylor)

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickled by name where its module holds it, else by value without its memo."""
        found = functools.reduce(lambda o, part: getattr(o, part, None),
                                 self.__qualname__.split("."), sys.modules.get(self.__module__))
        if found is self and self.__module__ != "__main__":
            return self.__qualname__
        return copyreg.__newobj__, (type(self),), {**self.__dict__, "_memo": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _memo=weakref.WeakKeyDictionary())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Record one entry on the Ops of the Variable arguments (arrays in, arrays out)."""
        self._check_keywords(kwargs)
        leaves, packing = pack(self._label, args, self._nondiff)
        ops = self._ops(leaves)
        if ops is None:     # no Variable: compute the value on a throwaway Ops
            scratch = Ops()
            # numbers beside an array stay constants; numbers alone are the 0-d arrays
            alone = all(_is_number(x) for x in leaves)
            with scratch.no_grad():
                leaves = [x if _is_number(x) and not alone else scratch.var(x) for x in leaves]
                if not leaves:      # nothing to record on: the forward itself
                    return packing.structured(self._forward(_vars=(), _pack=packing, **kwargs))
                out = self._record(scratch, leaves, kwargs, packing)
                return tree_map(lambda v: v.value if isinstance(v, Variable) else v, out)
        return self._record(ops, leaves, kwargs, packing)

    def _check_keywords(self, kwargs: dict) -> None:
        for k in kwargs:
            if k.startswith("_"):
                raise ArgumentError(f"{self._label}: keyword {k!r}: names starting with '_' "
                                    "are reserved")

    def _ops(self, args: tuple) -> Ops | None:
        """The Ops that records the call (``recording_ops``): a call on Parameters only, or on
        no Variable, records on the transform running around it, else on the implicit Ops."""
        ops = recording_ops(self._label, args)
        if ops is None or ops is FREE:
            return around() or (FREE.implicit() if ops is FREE else None)
        return ops

    def _record(self, ops: Ops, args: list, kwargs: dict, packing: Packing) -> Any:
        closures: list = []     # Variables of ``ops`` the forward reads through its closure
        levels: Examples | None = None
        calls = _recording()
        calls.append((packing, ops, ops.tape.end))
        try:
            while True:
                inputs = [*args, *closures, *(() if levels is None else levels.inputs(ops))]
                attrs = dict(kwargs)
                attrs["_vars"] = tuple(i for i, x in enumerate(inputs)
                                       if isinstance(x, Variable))
                attrs["_wrt"] = tuple(i for i, x in enumerate(args)
                                      if isinstance(x, Variable) and x.requires_grad)
                attrs["_pack"] = packing
                if closures:
                    attrs["_closures"] = Closures(closures)
                if levels is not None:
                    attrs["_levels"] = levels
                try:
                    with _undone_on_failure(ops):   # the forward may record on a closure's Ops
                        y = ops.apply(self.primitive, inputs, attrs, None)
                    break
                except ReadsClosureError as e:  # again, with it as one more input
                    if any(c is e.value for c in closures) or len(closures) >= _MOST_READS:
                        raise GraphError(f"{self._label}: reads {e.value.name} through a "
                                         "closure in a way that cannot be followed; pass it "
                                         "as an argument") from None
                    closures.append(e.value)
                    if type(e.value) is Batched:    # (a rule computes every example of it)
                        levels = Examples.adding(levels, levels_of(e.value), self._label, True)
                except ReadsBatchedError as e:   # again, with the example numbers there
                    levels = Examples.adding(levels, e.levels, self._label)
        finally:
            calls.pop()
        if packing.out is None:     # an equal entry recorded before (Ops(simplify=True)) holds it
            packing = (getattr(y, "attrs", None) or {}).get("_pack", packing)
        return packing.structured(y)

    def __repr__(self) -> str:
        return f"<{self._label}>"

    # ------------------------------------------------------------ the primitive's rules

    def _forward(self, *values: Any, **attrs: Any) -> Any:
        # a scratch Ops that records (released after), around the function, so that the
        # transforms it calls can close over its arguments
        scratch = ForwardOps()
        try:
            packing = attrs["_pack"]
            positions = attrs["_vars"]
            levels = attrs.get("_levels")
            if levels is not None:  # batched values read through a closure: this example's
                values, scratch.examples = levels.split(values)
            closures = attrs.get("_closures")
            if closures is not None:    # Variables read through a closure: their values here
                values, scratch.given = closures.split(values)
            positions = tuple(i for i in positions if i < len(values))
            calls = _recording()
            if calls and calls[-1][0] is packing:   # (recording this call, not replaying it)
                scratch.caller, scratch.start = calls[-1][1:]
            with running(scratch):
                y = self._fn(*packing.call_arguments(wrap_values(scratch, values, positions)),
                             **user_attrs(attrs))
            # (an output computed from batched values alone, on their Ops: its example)
            y = tree_map(lambda v: scratch.example(v, "its output")
                         if type(v) is Batched and scratch._outer(v) else v, y)
            return packing.output_value(y)
        except GraphError as e:
            raise GraphError(f"{self._label}: {e}. The function sees its arguments as "
                             "Variables of a scratch Ops: pass every Variable it reads as "
                             "an argument") from e
        finally:
            scratch.release()

    def _vjp(self, o: PrimitiveMethods, g: Any, out: Any, i: int, *inputs: Any,
             **attrs: Any) -> Any:
        # The sweep asks input by input; every cotangent of the entry is computed at the first
        # request and kept until the last one. Nothing may outlive the sweep (a sweep may stop
        # after some inputs: it raised, or an input stopped requiring grad), so the memo is
        # keyed weakly by ``o``: a value-only sweep's own ValueOps, which dies with the sweep,
        # holds the arrays; a recorded sweep's Ops gets only weak references to the cotangents,
        # which are entries of its tape (the tape holds them, not the memo).
        memo = self._memo.get(o)
        if memo is None:
            memo = self._memo[o] = {}
        recording = isinstance(o, Ops)
        key = (id(g), id(out), *map(id, inputs))
        entry = memo.get(key)
        cts = None if entry is None else entry.cotangents(o)
        if cts is None:         # first request (or a recorded cotangent no longer held)
            for k in [k for k, e in memo.items() if e.cotangents(o) is None]:
                del memo[k]     # left by a recorded sweep that stopped early: only weak refs
            own, kept = own_inputs(inputs, attrs)
            cts = self._cotangents(o, *handles(o, g, out, own), kept)
            cts = list(cts) + [None] * (len(inputs) - len(own))
            entry = memo[key] = Pending(cts, attrs["_wrt"], (g, out, inputs), recording)
        entry.waiting.discard(i)
        if not entry.waiting:
            del memo[key]
            if not memo:
                del self._memo[o]
        return cts[i]

    def _fmt(self, args: list[str], attrs: dict, render: Callable) -> str:
        levels, closures = attrs.get("_levels"), attrs.get("_closures")
        m = 0 if levels is None else len(levels.levels)
        c = 0 if closures is None else len(closures.refs)
        n = len(args) - m - c
        shown = args[:n] + [f"{k}={render(v, k)}" for k, v in attrs.items()
                            if not k.startswith("_")]
        if c:           # (what it reads through its closure)
            shown.append(f"closure=[{', '.join(args[n:n + c])}]")
        if m:           # (the example numbers of the vmaps whose values it reads so)
            shown.append(f"example=[{', '.join(args[n + c:])}]")
        return f"{self._label}({', '.join(shown)})"

    def _as_array(self, y: Any) -> np.ndarray:
        if isinstance(y, (tuple, list)):
            raise ArgumentError(f"{self._label}: the function must return one array or Variable, "
                                f"got a {type(y).__name__}")
        v = value_of(y)
        return v if hasattr(v, "shape") else np.asarray(v)

    def _cotangents(self, o: PrimitiveMethods, g: Any, out: Any, inputs: tuple,
                    attrs: dict) -> list:
        raise NotImplementedError

    def _jvp(self, o: PrimitiveMethods, ts: list, out: Any, *inputs: Any, **attrs: Any) -> Any:
        raise NotImplementedError

    def _taylor(self, o: PrimitiveMethods, ss: list, out: Any, *inputs: Any,
                **attrs: Any) -> list:
        """Taylor mode through the entry: the series pushed through its derivative rule by
        nested jvps (primitives/taylor.py), so it holds as far as the rule differentiates."""
        return series_by_jvps(self.primitive, o, ss, out, *inputs, **attrs)
    _taylor.recorded = True     # (it records: a value-only walk runs it on a scratch Ops)


@contextmanager
def _undone_on_failure(ops: Ops) -> Iterator[None]:
    """If the block raises, leave the tape, the trace and the v-counter as they were."""
    snap = ops.tape.snapshot()
    try:
        yield
    except BaseException:
        ops.tape.restore(snap)
        raise
    ops.tape.settle(snap)


def handles(o: Any, g: Any, out: Any, inputs: tuple, ts: list | None = None) -> tuple:
    """What a sweep hands a custom rule, as the user's function sees it: entries of the
    recording Ops ``o`` as Variables of it (values only: as they are); the output and the
    inputs that require grad as ``Watched`` ones, which note a read of their raw value."""
    if not isinstance(o, Ops):
        return (g, out, inputs) if ts is None else (ts, out, inputs)

    def h(x: Any) -> Any:
        return as_variable(o, x) if type(x) is Entry else x

    def watched(x: Any) -> Any:
        if type(x) is not Entry or not x.requires_grad:
            return h(x)
        v = handle(value_of(x), x, o, Watched)
        v.read = False
        return v
    inputs = tuple(watched(x) for x in inputs)
    if ts is None:
        return h(g), watched(out), inputs
    return [h(t) for t in ts], watched(out), inputs


class Watched(Variable):
    """A Variable handed to a custom rule that notes when the rule reads its raw value
    (``.value``, ``.numpy()``, ``.item()``, ``float``, ``int``, ``bool``): a cotangent computed
    from it misses the dependence on it, so differentiating that cotangent must raise."""

    __slots__ = ("read",)

    @property
    def value(self) -> Any:
        """The numpy value (as ``Variable.value``), noted as read."""
        self.read = True
        return super().value

    def item(self) -> float:
        """The single entry as a Python number (as ``Variable.item``), noted as read."""
        self.read = True
        return super().item()

    def __float__(self) -> float:
        self.read = True
        return super().__float__()

    def __int__(self) -> int:
        self.read = True
        return super().__int__()

    def __bool__(self) -> bool:
        self.read = True
        return super().__bool__()


def rule_running(o: Ops, attrs: dict, moving: Any) -> running:
    """The frame a custom rule runs in on ``o``, the Ops transforms in it record on. Having no
    batching rule, the entry was recorded once per example of each vmap of ``o`` running
    around (or once for all, its inputs being every example's), so the rule sees one example
    and transforms in it run at none of those vmaps' levels (else the primals of a Jacobian
    the rule takes would be lifted to every example of the batch), except where something it
    computes with is batched: a cotangent or tangent of ``moving`` carried in batched (a
    pullback called under a vmap), or a value read through its closure (``Examples``)."""
    keep = {level for level, _ in attrs.get("_examples", ())}
    for v in moving:
        if type(v) is Batched:
            keep.update(level for level, _ in levels_of(v))
    return running(o, apart=tuple(level for level, _ in active(o) if level not in keep))


def _read(xs: Any) -> str | None:
    """The name of the first of ``xs`` whose raw value a rule read (``Watched``), if any."""
    for x in xs:
        if type(x) is Watched and x.read:
            return x.name
    return None


def _depends_on(c: Variable, g: Variable) -> bool:
    """True when g is among c's recorded ancestors (walking only entries newer than g)."""
    return entry_of(g) in ancestors(c, g.position, leaves=True)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def user_attrs(attrs: dict) -> dict:
    """The attributes the user passed (keyword arguments), without the bookkeeping ones."""
    return {k: v for k, v in attrs.items() if not k.startswith("_")}


def wrap_values(scratch: Ops, values: tuple, positions: tuple) -> list:
    """Values as unrecorded Variables of ``scratch`` at ``positions`` (where Variables were)."""
    args = list(values)
    for i in positions:
        args[i] = scratch.unrecorded(values[i])
    return args


def _float_dtype(x: Any) -> np.dtype:
    dtype = np.asarray(value_of(x)).dtype
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


# ---------------------------------------------------------------- the forward's scratch Ops


class ForwardOps(Ops):
    """The scratch Ops a custom function's forward records on: a Variable that requires grad
    read through a closure is refused (the rule gives gradients for the arguments only); one
    that does not is a constant. A batched value of a vmap around the call read through a
    closure is the entry's example of it when the entry has its example numbers among its
    inputs (``Examples``), else the call is recorded again with them
    (``ReadsBatchedError``)."""

    absorbs = True      # an operator on a closure's Variable and one of ours records here

    def __init__(self) -> None:
        super().__init__(borrow=True)
        self.made_in = around()     # (a forward inside a forward records on its own)
        self.examples: dict[int, int] = {}     # level -> the entry's example there
        self.given: dict[int, Any] = {}     # id of a closure's Variable -> its value here
        self.caller: Ops | None = None      # while the call is recorded: the Ops recording it
        self.start = 0                      # and where its tape ended then

    def join(self, prim: Primitive, inputs: tuple, x: Variable) -> Entry:
        """A closure's Variable that takes no gradient as a constant (the entry's input for it
        when the Ops recording the call holds it, ``Closures``); refuse any other."""
        if x.requires_grad:
            kind = "a Parameter" if x.rec is FREE else "a Variable of another Ops"
            raise GraphError(f"{prim.name}: reads {x.name} ({kind}) through a closure, and the "
                             "rule gives it no gradient")
        if id(x) in self.given:
            return self._input(x).node
        if self._could_be_input(x):
            raise ReadsClosureError(x)
        return self.leaf(x.raw, None, False).node

    def apply(self, prim: Primitive, inputs: Any, attrs: dict | None = None,
              name: str | None = None) -> Any:
        """As ``Ops.apply``, a batched value read through a closure as its example's value."""
        for x in inputs:
            if type(x) is Batched and self._outer(x):
                inputs = tuple(self.example(x, prim.name) if type(x) is Batched and
                               self._outer(x) else x for x in inputs)
                break
        return Ops.apply(self, prim, inputs, attrs, name)

    def _outer(self, x: Batched) -> bool:
        """Whether x is batched by a vmap around the call (not one the forward runs)."""
        rec = innermost(x).rec
        return rec is not self and not (isinstance(rec, Ops) and rec.within(self))

    def example(self, x: Batched, what: str) -> Variable:
        """A batched value of a vmap around the call as a constant holding the entry's example
        of it: its input for it (``Closures``), else read at the entry's example numbers
        (``Examples``)."""
        if x.requires_grad:
            raise GraphError(f"{what}: reads {x.name} (a batched Variable that requires grad) "
                             "through a closure, and the rule gives it no gradient: pass it as "
                             "an argument")
        if id(x) in self.given:
            return self._input(x)
        if self._could_be_input(x):
            raise ReadsClosureError(x)
        levels = levels_of(x)
        if any(level not in self.examples for level, _ in levels):
            raise ReadsBatchedError(levels)
        value = innermost(x).raw[tuple(self.examples[level] for level, _ in levels)]
        return self.leaf(np.asarray(value), None, False)

    def _input(self, x: Variable) -> Variable:
        got = self.given[id(x)]
        if type(got) is not Variable:   # (made on first use)
            got = self.given[id(x)] = self.leaf(np.asarray(got), None, False)
        return got

    def _could_be_input(self, x: Variable) -> bool:
        """Whether x, read through the closure while the call is recorded, was recorded before
        it by the Ops recording it (so the entry can take it as an input)."""
        if self.caller is None:
            return False
        inner = innermost(x)
        at = inner.node
        # (a leaf's position is the tape's end when it was made: nothing recorded since)
        return inner.rec is self.caller and at is not None and (
            at.position < self.start or at.prim is None and at.position == self.start)


def scratch_ops(attrs: dict, borrow: bool = True) -> Ops:
    """The scratch Ops a value-only rule runs on: for an entry with extra inputs
    (``own_inputs``), one reading what the closure holds as the forward does
    (``ForwardOps``)."""
    examples, given = attrs.get("_examples", ()), attrs.get("_given", {})
    if not examples and not given:
        return Ops(borrow=borrow)
    scratch = ForwardOps()
    scratch.examples, scratch.given = dict(examples), dict(given)
    return scratch


_CALLS = threading.local()      # .calls: the custom calls this thread is recording
_MOST_READS = 256       # Variables a forward may read through its closure as inputs


def _recording() -> list:
    """This thread's custom calls being recorded, innermost last: (packing, the Ops recording
    it, where its tape ended when the call began)."""
    calls = getattr(_CALLS, "calls", None)
    if calls is None:
        calls = _CALLS.calls = []
    return calls


class ReadsClosureError(Exception):
    """A custom function's forward, recorded, read through its closure a Variable that the Ops
    recording the call held before it: the call is recorded again with it as an input."""

    def __init__(self, value: Variable):
        super().__init__("a recorded Variable read through a closure")
        self.value = value


class Closures:
    """The Variables a custom function's forward reads through its closure that the Ops
    recording the call holds (``mask = x > 0`` read by ``y * mask``), as extra inputs of the
    entry: a replay (``sg.jit``, ``op.program``) hands the forward their values at its inputs,
    not those they had when recorded, and a value-only rule reads them the same way. Held
    weakly (the closure holds them), in reading order; compared by identity."""

    __slots__ = ("refs",)

    def __init__(self, values: list):
        self.refs = tuple(weakref.ref(v) for v in values)

    def split(self, values: tuple) -> tuple[tuple, dict]:
        """The forward's values as the function's own and a map from the id of each Variable
        read to its value here."""
        n = len(values) - len(self.refs)
        given = {}
        for r, v in zip(self.refs, values[n:]):
            x = r()
            if x is not None:
                given[id(x)] = v
        return values[:n], given

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Closures) and len(self.refs) == len(other.refs) and all(
            a() is b() for a, b in zip(self.refs, other.refs))

    def __hash__(self) -> int:
        return hash(tuple(id(r()) for r in self.refs))

    def __repr__(self) -> str:
        return f"Closures({len(self.refs)})"


class ReadsBatchedError(Exception):
    """A custom function's forward read a value batched at vmap levels its entry has no
    example numbers for: the call is recorded again with them."""

    def __init__(self, levels: list):
        super().__init__("a batched value read through a closure")
        self.levels = levels


class Examples:
    """The levels of the vmaps around a custom call whose batched values its forward reads
    through a closure (``x * y`` with ``x`` a vmap's example): the entry takes, per level, the
    number of its example (a batched ``arange``) as an extra input.

    The entry has no batching rule, so the vmap records one entry per example (batching.py's
    loop), each input sliced to that example, the numbers too. The forward then reads each
    batched value as that example of it (``ForwardOps.example``), and a rule, which runs on
    the recording Ops where such a value is batched and so computes every example at once,
    gives this entry's example of what it returns (``at_examples``).
    """

    __slots__ = ("levels",)

    def __init__(self, levels: tuple):
        self.levels = levels        # ((level, batch size), ...), lowest first

    @staticmethod
    def adding(examples: Examples | None, levels: list, label: str,
               known: bool = False) -> Examples | None:
        """``examples`` with ``levels`` added (which must be new unless ``known``)."""
        have = dict(() if examples is None else examples.levels)
        if all(level in have for level, _ in levels):
            if known:
                return examples
            raise GraphError(f"{label}: reads a batched value through a closure in a way that "
                             "cannot be followed; pass it as an argument")
        have.update(levels)
        return Examples(tuple(sorted(have.items())))

    def inputs(self, ops: Ops) -> list:
        """The entry's extra inputs: each level's example numbers."""
        return [wrap(ops.leaf(np.arange(n), None, False), level) for level, n in self.levels]

    def split(self, values: tuple) -> tuple[tuple, dict]:
        """The forward's values as the function's own and the entry's example at each level."""
        n = len(values) - len(self.levels)
        return values[:n], {level: int(np.asarray(k))
                            for (level, _), k in zip(self.levels, values[n:])}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Examples) and self.levels == other.levels

    def __hash__(self) -> int:
        return hash(self.levels)

    def __repr__(self) -> str:
        return f"Examples({self.levels})"


def own_inputs(inputs: tuple, attrs: dict) -> tuple[tuple, dict]:
    """The inputs of a custom entry that are the function's, and the attributes its rules
    see: with ``_examples``, the entry's example at each level (``Examples``), and with
    ``_given``, the values of the Variables it reads through its closure (``Closures``), when
    it has such extra inputs."""
    examples, closures = attrs.get("_levels"), attrs.get("_closures")
    if examples is None and closures is None:
        return inputs, attrs
    m = 0 if examples is None else len(examples.levels)
    c = 0 if closures is None else len(closures.refs)
    n = len(inputs) - m - c
    numbers = () if examples is None else tuple(
        (level, int(np.asarray(value_of(k))))
        for (level, _), k in zip(examples.levels, inputs[n + c:]))
    given = {} if closures is None else {
        id(r()): value_of(v) for r, v in zip(closures.refs, inputs[n:n + c]) if r() is not None}
    kept = dict(attrs, _vars=tuple(i for i in attrs["_vars"] if i < n), _examples=numbers,
                _given=given)
    return inputs[:n], kept


def at_examples(c: Any, attrs: dict) -> Any:
    """What a rule returned, at the entry's examples (``own_inputs``): a value batched at one
    of their levels (computed from a batched value read through a closure) as that example."""
    for level, k in attrs.get("_examples", ()):
        c = _example_at(c, level, k)
    return c


def _example_at(c: Any, level: int, k: int) -> Any:
    if type(c) is not Batched or c.level < level:   # (the highest level is outermost)
        return c
    if c.level == level:
        return c.inner[k]
    return wrap(_example_at(c.inner, level, k), c.level)


# ---------------------------------------------------------------- a sweep's cotangents


class Pending:
    """The cotangents of one entry while the sweep asks for them input by input.

    Weak (a recorded sweep): the cotangents' entries are the tape's, which keeps them alive,
    held weakly with their values (which point at no Ops), and the key's ids are checked
    through weak references to g and the entry (its inputs are the entry's own). Strong (a
    value-only sweep): the arrays are held, for as long as the sweep's ValueOps lives.
    """

    __slots__ = ("held", "waiting", "key_objects", "weak")

    def __init__(self, cts: list, wrt: tuple, key_objects: tuple, weak: bool):
        self.weak = weak
        self.held = [(weakref.ref(c.node), c.raw) if weak and c is not None else c
                     for c in cts]
        self.key_objects = tuple(map(weak_ref, key_objects[:2])) if weak else key_objects
        self.waiting = set(wrt)

    def cotangents(self, o: Any) -> list | None:
        """The cotangents (Variables of ``o`` when recorded), or None when one of them or of
        the key's objects is gone."""
        if not self.weak:
            return self.held
        if any(r() is None for r in self.key_objects):
            return None
        cts = []
        for h in self.held:
            if h is None:
                cts.append(None)
                continue
            e = h[0]()
            if e is None:
                return None
            cts.append(handle(h[1], e, o))
        return cts


def weak_ref(x: Any) -> Callable[[], Any]:
    """A weak reference to x; a number (which cannot have one, and is small) is held."""
    try:
        return weakref.ref(x)
    except TypeError:
        return lambda: x


# ---------------------------------------------------------------- pytrees through the entry


class Packing:
    """How one call's arguments and output map to its entry's flat inputs and output."""

    __slots__ = ("label", "n", "nondiff", "trees", "out", "shapes", "dtypes")

    def __init__(self, label: str, n: int, nondiff: tuple, trees: tuple):
        self.label = label
        self.n = n                  # number of positional arguments
        self.nondiff = nondiff      # ((position, value), ...): never differentiated
        self.trees = trees          # the structure of each other argument
        self.out: TreeDef | None = None     # the output's structure, once the forward ran
        self.shapes: list = []
        self.dtypes: list = []

    def _key(self) -> tuple:
        return (self.label, self.n, tuple(p for p, _ in self.nondiff), self.trees)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Packing) and self._key() == other._key() and all(
            a is b for (_, a), (_, b) in zip(self.nondiff, other.nondiff))

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Packing({self.trees})"

    # ------------------------------------------------------------ arguments

    def arguments(self, leaves: list) -> list:
        """The differentiated arguments (structured) from the entry's flat inputs."""
        out, k = [], 0
        for treedef in self.trees:
            m = treedef.num_leaves
            out.append(leaves[k] if treedef is LEAF else tree_unflatten(treedef, leaves[k:k + m]))
            k += m
        return out

    def held(self) -> list:
        """The nondiff arguments, in order: the rules get them first."""
        return [v for _, v in self.nondiff]

    def call_arguments(self, leaves: list) -> list:
        """Every positional argument of the function, nondiff ones in their places."""
        rest = iter(self.arguments(leaves))
        fixed = dict(self.nondiff)
        return [fixed[i] if i in fixed else next(rest) for i in range(self.n)]

    def cotangents(self, cts: Any) -> list:
        """The rule's cotangents (one per differentiated argument, a pytree or None) as one
        per flat input."""
        if len(self.trees) == 1 and not isinstance(cts, (tuple, list)):
            cts = (cts,)
        if not isinstance(cts, (tuple, list)) or len(cts) != len(self.trees):
            got = len(cts) if isinstance(cts, (tuple, list)) else type(cts).__name__
            raise ArgumentError(f"{self.label}: the backward rule must return "
                                f"{len(self.trees)} cotangent(s) (one per differentiated "
                                f"argument, None for none), got {got}")
        flat: list = []
        for i, (c, treedef) in enumerate(zip(cts, self.trees)):
            flat += prefix_leaves(c, treedef, lambda c: c is None, f"{self.label}: the "
                                  f"backward rule's cotangent for argument {i}")
        return flat

    # ------------------------------------------------------------ the output

    def output_value(self, y: Any) -> Any:
        """The forward's result as the entry's one array (a pytree raveled), noting its
        structure."""
        leaves, treedef = tree_flatten(y)
        self.out = treedef
        values = [value_of(a) for a in leaves]
        values = [v if hasattr(v, "shape") and hasattr(v, "dtype") else np.asarray(v)
                  for v in values]
        self.shapes = [tuple(v.shape) for v in values]
        self.dtypes = [np.dtype(v.dtype) for v in values]
        if treedef is LEAF:
            return values[0]
        if not values:
            raise ArgumentError(f"{self.label}: the function returned {y!r}, which holds no "
                                "array")
        dtype = np.result_type(*self.dtypes)
        return np.concatenate([np.ravel(v).astype(dtype, copy=False) for v in values])

    def structured(self, flat: Any) -> Any:
        """The entry's output (or a cotangent or tangent of it) in the output's structure."""
        if self.out is None or self.out is LEAF:
            return flat
        template = tree_unflatten(self.out, [np.zeros(s, d)
                                             for s, d in zip(self.shapes, self.dtypes)])
        return ravel_pytree(template)[1](flat)

    def flat_output(self, tree: Any) -> Any:
        """A pytree of the output's structure (a tangent) as one vector, as the entry holds
        it: recorded when it holds Variables."""
        if self.out is None or self.out is LEAF:
            return tree
        leaves, treedef = tree_flatten(tree)
        if treedef != self.out:
            raise ArgumentError(f"{self.label}: the jvp rule gave a tangent of structure "
                                f"{treedef} for an output of structure {self.out}")
        if not any(isinstance(a, Variable) for a in leaves):
            dtype = np.result_type(*self.dtypes)
            return np.concatenate([np.ravel(np.asarray(value_of(a))).astype(dtype)
                                   for a in leaves])
        return ravel_pytree(tree)[0]


def pack(label: str, args: tuple, nondiff_argnums: tuple) -> tuple[list, Packing]:
    """The entry's flat inputs for a call, and its Packing."""
    nondiff = tuple((i, args[i]) for i in nondiff_argnums if i < len(args))
    if len(nondiff) != len(nondiff_argnums):
        raise ArgumentError(f"{label}: nondiff_argnums={nondiff_argnums} names an argument "
                            f"the call with {len(args)} argument(s) does not have")
    for i, a in nondiff:
        if any(isinstance(b, Variable) for b in tree_flatten(a)[0]):
            raise ArgumentError(f"{label}: argument {i} is in nondiff_argnums but holds a "
                                "Variable; pass it as a differentiated argument (its rule may "
                                "return None for its cotangent)")
    held = {i for i, _ in nondiff}
    leaves: list = []
    trees = []
    for i, a in enumerate(args):
        if i in held:
            continue
        ls, treedef = tree_flatten(a)
        leaves += ls
        trees.append(treedef)
    return leaves, Packing(label, len(args), nondiff, tuple(trees))


def nondiff_positions(label: str, nums: Any) -> tuple[int, ...]:
    """``nondiff_argnums`` checked: a tuple of distinct argument positions (ints >= 0)."""
    if isinstance(nums, (int, np.integer)) and not isinstance(nums, bool):
        nums = (nums,)
    if not isinstance(nums, (tuple, list)) or any(
            isinstance(i, bool) or not isinstance(i, (int, np.integer)) or i < 0
            for i in nums) or len(set(nums)) != len(nums):
        raise ArgumentError(f"{label}: nondiff_argnums must be a tuple of distinct argument "
                            f"positions (ints >= 0), not {nums!r}")
    return tuple(sorted(int(i) for i in nums))


# ---------------------------------------------------------------- a user's jvp rule


class JVPRule:
    """A forward-mode rule ``rule(primals, tangents) -> (primal_out, tangent_out)``."""

    def __init__(self, label: str, rule: Callable):
        if not callable(rule):
            raise ArgumentError(f"{label}.defjvp: expected a function, got "
                                f"{type(rule).__name__}")
        self.label = label
        self.rule = rule

    def tangent(self, o: PrimitiveMethods, ts: list, out: Any, inputs: tuple,
                positions: tuple, kw: dict, given: dict | None = None) -> Any:
        """The tangent of the entry's output for the input tangents ``ts`` (``given``: the
        entry's attributes for a value-only rule, see ``own_inputs``)."""
        recording = isinstance(o, Ops)
        r = o if recording else scratch_ops(given or {})
        try:
            primals = list(inputs)
            if not recording:       # values: Variables of the scratch Ops where they were
                for i in positions:
                    primals[i] = r.unrecorded(inputs[i])
            tangents = [np.zeros(shape_of(x), dtype=_float_dtype(x)) if t is None
                        else t if recording else r.unrecorded(t)
                        for x, t in zip(inputs, ts)]
            with rule_running(r, given or {}, ts):
                got = self.rule(tuple(primals), tuple(tangents), **kw)
            t_out = self._checked(got, out)
            if not recording:
                return np.asarray(value_of(t_out))
            if isinstance(t_out, Variable) and t_out.rec is r:
                return t_out
            moving = tuple(t for t in (*ts, *inputs) if isinstance(t, Variable))
            return r.apply(_RAW_TANGENT, moving, {"value": np.asarray(value_of(t_out)),
                                                  "label": self.label}, None)
        finally:
            if not recording:
                r.release()

    def _checked(self, got: Any, out: Any) -> Any:
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise ArgumentError(f"{self.label}: the jvp rule must return a pair (primal_out, "
                                f"tangent_out), got {type(got).__name__}")
        t_out = got[1]
        if shape_of(t_out) != shape_of(out):
            raise ShapeError(f"{self.label}: the jvp rule gave a tangent of shape "
                             f"{shape_of(t_out)} for an output of shape {shape_of(out)}")
        return t_out


def _refuse(*args: Any, label: str, **attrs: Any) -> Any:
    raise NotDifferentiableError(
        f"{label}: its jvp rule returned numpy arrays instead of Variables, so its tangent "
        "cannot be differentiated again; write the rule with simplegrad operations on the "
        "primals and tangents")


_RAW_TANGENT = Primitive(
    "custom_jvp_raw", lambda *values, value, label: value, [_refuse], _refuse,
    lambda args, attrs, render: f"{attrs['label']}_jvp({', '.join(args)})", [], variadic=True)


def user_tangent(label: str, rule: Callable, o: Any, ts: list, out: Any, inputs: tuple,
                 attrs: dict) -> Any:
    """The tangent of a custom entry's output by the user's jvp rule
    ``rule(*nondiff, primals, tangents) -> (primal_out, tangent_out)``, which sees the call's
    structures (one primal and one tangent per differentiated argument)."""
    packing: Packing = attrs["_pack"]

    def flat_rule(primals: tuple, tangents: tuple, **kw: Any) -> Any:
        got = rule(*packing.held(), tuple(packing.arguments(list(primals))),
                   tuple(packing.arguments(list(tangents))), **kw)
        if isinstance(got, (tuple, list)) and len(got) == 2:
            return got[0], packing.flat_output(tree_map(lambda t: at_examples(t, attrs), got[1]))
        return got
    kw = {k: v for k, v in attrs.items() if not k.startswith("_")}
    return JVPRule(label, flat_rule).tangent(o, ts, out, inputs, attrs["_vars"], kw, attrs)


# ---------------------------------------------------------------- custom_vjp


class CustomVJP(CustomFunction):
    """A function whose gradient is a user rule: ``bwd(*nondiff, g, out, *inputs, **attrs)``."""

    def __init__(self, fn: Callable, nondiff_argnums: tuple[int, ...] = ()):
        super().__init__(fn, getattr(fn, "__name__", "custom"))
        self._nondiff = nondiff_positions(self._label, nondiff_argnums)
        self._bwd: Callable | None = None
        self._jvp_rule: Callable | None = None
        self._linear: bool | None = None      # is the vjp rule linear in g (linear_in_cotangent)
        self._raw = raw_backward(self._label)

    def defvjp(self, bwd: Callable, jax_bwd: Callable | None = None) -> Callable:
        """Attach the backward rule ``bwd(*nondiff, g, out, *inputs)`` (usable as a
        decorator), or JAX's pair ``defvjp(fwd, bwd)``; returns the rule given last."""
        for rule in (bwd, jax_bwd):
            if rule is not None and not callable(rule):
                raise ArgumentError(f"{self._label}.defvjp: expected a function, got "
                                    f"{type(rule).__name__}")
        self._bwd = bwd if jax_bwd is None else FromResiduals(bwd, jax_bwd)
        self._linear = None
        return bwd if jax_bwd is None else jax_bwd

    def defjvp(self, rule: Callable) -> Callable:
        """Attach a forward-mode rule ``rule(primals, tangents) -> (primal_out, tangent_out)``
        (usable as a decorator); returns ``rule``."""
        JVPRule(self._label, rule)     # (checks it)
        self._jvp_rule = rule
        return rule

    def _cotangents(self, o: PrimitiveMethods, g: Any, out: Any, inputs: tuple,
                    attrs: dict) -> list:
        if isinstance(o, Ops):
            return self._call_bwd(o, g, out, inputs, attrs)
        return self._bwd_values(g, out, inputs, attrs)

    def _bwd_values(self, g: Any, out: Any, inputs: tuple, attrs: dict) -> list:
        """The rule's cotangents as arrays (None for none), run on a scratch Ops."""
        scratch = scratch_ops(attrs)
        try:
            cts = self._checked(self._run_bwd(scratch.unrecorded(g), scratch.unrecorded(out),
                                              wrap_values(scratch, inputs, attrs["_vars"]),
                                              attrs), inputs)
            return [None if c is None else np.asarray(value_of(c)) for c in cts]
        finally:
            scratch.release()

    def _run_bwd(self, g: Variable, out: Any, inputs: Any, attrs: dict) -> list:
        """The user's cotangents, one per flat input (the rule sees the call's structures)."""
        if self._bwd is None:
            raise NotDifferentiableError(f"{self._label}: no backward rule; attach one with "
                                         f"@{self._label}.defvjp")
        packing: Packing = attrs["_pack"]
        args = (*packing.held(), packing.structured(g), packing.structured(out),
                *packing.arguments(list(inputs)))
        if isinstance(self._bwd, FromResiduals):      # JAX's fwd sees every argument
            args = (packing, packing.structured(g), packing.call_arguments(list(inputs)))
        ops = getattr(g, "rec", None)
        if not isinstance(ops, Ops):
            return packing.cotangents(self._bwd(*args, **user_attrs(attrs)))
        with rule_running(ops, attrs, (g,)):    # transforms in the rule record on its Ops
            cts = packing.cotangents(self._bwd(*args, **user_attrs(attrs)))
        return [at_examples(c, attrs) for c in cts]

    def _call_bwd(self, r: Ops, g: Variable, out: Variable, inputs: Any, attrs: dict,
                  strict: bool = True) -> list:
        """The user's cotangents, recorded on ``r``; raw arrays go through the _bwd entry, and so
        does a nonzero recorded cotangent that does not depend on g (made from ``g.value``):
        right as a value but not as a function of g, so differentiating it again must raise.
        So do all of them when the rule read the raw value of the output or of an input that
        requires grad (``Watched``; ``strict``): they are right as values, not as functions of
        it. (``strict=False``: the caller differentiates them in g only, ``_tangent``.)"""
        if not isinstance(g, Variable):     # the constant seed of an Ops that simplifies
            g = r.leaf(np.asarray(g), None, False, "seed")     # (the rule gets a Variable)
        cts = self._checked(self._run_bwd(g, out, inputs, attrs), inputs)
        read = _read((out, *inputs)) if strict else None
        for i, c in enumerate(cts):
            if c is None:
                continue
            recorded = isinstance(c, Variable) and c.rec is r
            frozen = recorded and g.requires_grad and not _depends_on(c, g) and (
                np.any(c.raw != 0) or not np.any(g.raw != 0))
            if not recorded or frozen or read is not None:
                cts[i] = r.apply(self._raw, (g, out, *inputs),
                                 {"ct": np.asarray(value_of(c)), "position": i,
                                  "frozen": frozen, "read": read}, None)
        return cts

    def _checked(self, cts: Any, inputs: Any) -> list:
        n = len(inputs)
        if n == 1 and not isinstance(cts, (tuple, list)):
            cts = (cts,)
        if not isinstance(cts, (tuple, list)) or len(cts) != n:
            got = len(cts) if isinstance(cts, (tuple, list)) else type(cts).__name__
            raise ArgumentError(f"{self._label}: the backward rule must return {n} cotangent(s) "
                                f"(one per input, None for none), got {got}")
        for i, (c, x) in enumerate(zip(cts, inputs)):
            if c is not None and shape_of(c) != shape_of(x):
                raise ShapeError(f"{self._label}: the backward rule gave a cotangent of shape "
                                 f"{shape_of(c)} for input {i} of shape {shape_of(x)}")
        return list(cts)

    def _jvp(self, o: PrimitiveMethods, ts: list, out: Any, *inputs: Any, **attrs: Any) -> Any:
        # J t = d/du <bwd(u), t>, with u a fresh cotangent of ones (bwd is linear in u, so its
        # value does not matter, but a nonzero one shows a cotangent that ignores u)
        if all(t is None for t in ts):
            return None
        inputs, attrs = own_inputs(inputs, attrs)
        ts, out, inputs = handles(o, None, out, inputs, ts[:len(inputs)])
        if self._jvp_rule is not None:
            return user_tangent(self._label, self._jvp_rule, o, ts, out, inputs, attrs)
        self._check_linear(out, inputs, attrs)
        if isinstance(o, Ops):
            return self._tangent(o, ts, out, inputs, attrs, True)
        r = scratch_ops(attrs, borrow=False)
        try:
            jt = self._tangent(r, ts, r.unrecorded(out), wrap_values(r, inputs, attrs["_vars"]),
                               attrs, False)
            return None if jt is None else jt.raw
        finally:
            r.release()

    def _tangent(self, r: Ops, ts: list, out: Variable, inputs: Any, attrs: dict,
                 create_graph: bool) -> Variable | None:
        u = r.leaf(np.ones(out.shape, dtype=out.dtype), None, True, "seed")
        pairing = None
        for c, t in zip(self._call_bwd(r, u, out, inputs, attrs, False), ts):
            if c is not None and t is not None:
                term = r.sum(r.mul(c, t))
                pairing = term if pairing is None else r.add(pairing, term)
        if pairing is None:
            return None
        jt = r.grad(pairing, u, create_graph=create_graph)
        u.grad = None
        read = _read((out, *inputs)) if create_graph else None
        if read is not None:    # right as a value, not as a function of what the rule read
            moving = tuple(t for t in ts if isinstance(t, Variable))
            jt = r.apply(self._raw, (*moving, out, *inputs),
                         {"ct": np.asarray(value_of(jt)), "position": 0, "frozen": False,
                          "read": read}, None)
        return jt

    def _check_linear(self, out: Any, inputs: tuple, attrs: dict) -> None:
        """Raise unless the vjp rule is linear in g (``linear_in_cotangent``, once per function)."""
        if self._linear is None:
            values = tuple(value_of(x) for x in inputs)
            self._linear = linear_in_cotangent(
                lambda u: self._bwd_values(u, value_of(out), values, attrs), out)
        if not self._linear:
            raise NotDifferentiableError(
                f"{self._label}: its backward rule is not linear in the cotangent g, so forward "
                "mode (jvp, hessian, hvp, jacobian(mode='fwd')) cannot be derived from it; give "
                f"a forward rule with @{self._label}.defjvp, or use reverse mode")


def custom_vjp(fn: Callable | None = None, nondiff_argnums: tuple[int, ...] = ()) -> Any:
    """``fn`` as one recorded operation whose gradient is the rule given to ``.defvjp``
    (arguments at ``nondiff_argnums`` are never differentiated and reach the rule first);
    without ``fn``, the decorator with those options."""
    if fn is None:
        return lambda f: CustomVJP(f, nondiff_argnums)
    return CustomVJP(fn, nondiff_argnums)


class FromResiduals:
    """JAX's pair as one rule: ``fwd(*args) -> (out, residuals)`` run again on the recorded
    arguments (so the residuals are recorded too and every order works), then
    ``bwd(*nondiff, residuals, g)`` giving one cotangent per differentiated argument."""

    def __init__(self, fwd: Callable, bwd: Callable):
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, packing: Packing, g: Any, args: list, **attrs: Any) -> Any:
        """The cotangents of the call with arguments ``args`` for output cotangent g."""
        result = self.fwd(*args, **attrs)
        if not isinstance(result, tuple) or len(result) != 2:
            raise ArgumentError(f"{packing.label}: the fwd given to defvjp must return a pair "
                                f"(output, residuals), got {type(result).__name__}")
        return self.bwd(*packing.held(), result[1], g)


# ---------------------------------------------------------------- a backward made of raw arrays


def raw_backward(label: str) -> Primitive:
    """The primitive recording a cotangent that a vjp rule gave as an array (or computed from
    ``g.value``): right as a value, and differentiating it raises, naming the function."""

    def refuse(*args: Any, **attrs: Any) -> Any:
        if attrs.get("read") is not None:
            raise NotDifferentiableError(
                f"{label}: its backward rule read the value of {attrs['read']} (.value, "
                "float(), .item()), which requires grad, so what it computed from it does not "
                "depend on it as a function: its gradient cannot be differentiated again (grad "
                "of grad, hessian, or a jvp through it); write the backward with simplegrad "
                "operations on the Variables themselves (x.cos(), not np.cos(x.value))")
        if attrs.get("frozen"):
            raise NotDifferentiableError(
                f"{label}: its backward rule returned a cotangent for input "
                f"{attrs['position']} that does not depend on the cotangent g (computed from "
                "g.value, say), so its gradient cannot be differentiated again (grad of grad, "
                "or a jvp through it); write the backward with simplegrad operations on g itself")
        raise NotDifferentiableError(
            f"{label}: its backward rule returned numpy arrays instead of Variables, so its "
            "gradient cannot be differentiated again (grad of grad, or a jvp through it); "
            "write the backward with simplegrad operations on g, out and the inputs")

    def fmt(args: list[str], attrs: dict, render: Callable) -> str:
        return f"{label}_bwd({', '.join(args)})[{attrs['position']}]"
    return Primitive(f"{label}_bwd", _raw_forward, [refuse], refuse, fmt, [], variadic=True)


def _raw_forward(*values: Any, ct: np.ndarray, position: int, frozen: bool,
                 read: str | None = None) -> np.ndarray:
    return ct


# ---------------------------------------------------------------- is a vjp rule linear in g


def linear_in_cotangent(cotangents: Callable[[np.ndarray], list], out: Any) -> bool:
    """Whether ``cotangents(u)`` (one array or None per input) is linear in ``u`` (see the
    module docstring for the test and its tolerance)."""
    out = np.asarray(value_of(out))
    dtype = out.dtype if out.dtype.kind == "f" else np.dtype(np.float64)
    rng = np.random.default_rng(0)
    u1, u2 = (rng.standard_normal(out.shape).astype(dtype) for _ in range(2))
    c1, c2 = cotangents(u1), cotangents(u2)
    a, b = 1.75, -0.625
    big = min(1e6, float(np.finfo(dtype).max) ** 0.25)     # (float16: 16)
    cases = [(a * u1 + b * u2, [(a, c1), (b, c2)]), (big * u1, [(big, c1)]),
             (u1 / big, [(1 / big, c1)])]
    tol = max(1e-4, 10 * float(np.sqrt(np.finfo(dtype).eps)))
    for u, terms in cases:
        for k, got in enumerate(cotangents(u.astype(dtype))):
            parts = [s * np.asarray(c[k], dtype=np.float64) for s, c in terms
                     if c[k] is not None]
            want = sum(parts) if parts else 0.0
            scale = sum(float(np.max(np.abs(p), initial=0.0)) for p in parts)
            have = 0.0 if got is None else np.asarray(got, dtype=np.float64)
            diff = float(np.max(np.abs(have - want), initial=0.0))
            if diff > tol * scale:      # (nan compares False: the benefit of the doubt)
                return False
    return True


# ---------------------------------------------------------------- custom_jvp


class CustomJVP(CustomFunction):
    """A function whose derivative is a user tangent rule (``.defjvp``)."""

    def __init__(self, fn: Callable, nondiff_argnums: tuple[int, ...] = ()):
        super().__init__(fn, getattr(fn, "__name__", "custom"))
        self._nondiff = nondiff_positions(self._label, nondiff_argnums)
        self._rule: Callable | None = None

    def defjvp(self, rule: Callable) -> Callable:
        """Attach the tangent rule ``rule(primals, tangents) -> (primal_out, tangent_out)``
        (usable as a decorator); returns ``rule``."""
        if not callable(rule):
            raise ArgumentError(f"{self._label}.defjvp: expected a function, got "
                                f"{type(rule).__name__}")
        self._rule = rule
        return rule

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """As ``CustomFunction.__call__``, keyword arguments that name parameters of the
        function taken as positional ones (JAX's ``custom_jvp``: the rule sees them among the
        primals, defaults filled in)."""
        if kwargs:
            args, kwargs = _positional(self._fn, args, kwargs)
        return super().__call__(*args, **kwargs)

    def _checked_rule(self) -> Callable:
        if self._rule is None:
            raise NotDifferentiableError(f"{self._label}: no tangent rule; attach one with "
                                         f"@{self._label}.defjvp")
        return self._rule

    def _jvp(self, o: PrimitiveMethods, ts: list, out: Any, *inputs: Any, **attrs: Any) -> Any:
        if all(t is None for t in ts):
            return None
        inputs, attrs = own_inputs(inputs, attrs)
        ts, out, inputs = handles(o, None, out, inputs, ts[:len(inputs)])
        return user_tangent(self._label, self._checked_rule(), o, ts, out, inputs, attrs)

    def _cotangents(self, o: PrimitiveMethods, g: Any, out: Any, inputs: tuple,
                    attrs: dict) -> list:
        rule = self._checked_rule()
        recording = isinstance(o, Ops)
        r = o if recording else scratch_ops(attrs)
        try:
            if recording:
                xs, gv, ov = list(inputs), g, out
            else:
                xs = wrap_values(r, inputs, attrs["_vars"])
                gv, ov = r.unrecorded(g), r.unrecorded(out)
            wrt = attrs["_wrt"]
            ts = [r.var(np.zeros(shape_of(x), _float_dtype(x))) if i in wrt else None
                  for i, x in enumerate(inputs)]
            t_out = user_tangent(self._label, rule, r, ts, ov, tuple(xs), attrs)
            cts: list = [None] * len(inputs)
            moving = [t for t in ts if t is not None]
            if not moving:
                return cts
            pairing = r.sum(r.mul(t_out, gv))
            gs = r.grad(pairing, moving, create_graph=recording)
            for i, t, c in zip(wrt, moving, gs):
                t.grad = None
                cts[i] = c if recording else np.asarray(value_of(c))
            return cts
        finally:
            if not recording:
                r.release()


def _positional(fn: Callable, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args`` and ``kwargs`` bound to ``fn``'s parameters as positional arguments only
    (defaults filled in); as they are when they cannot all be (keyword-only parameters,
    ``**kwargs``, no signature)."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return args, kwargs
    bound.apply_defaults()
    if bound.kwargs:
        return args, kwargs
    return bound.args, {}


def custom_jvp(fn: Callable | None = None, nondiff_argnums: tuple[int, ...] = ()) -> Any:
    """``fn`` as one recorded operation whose derivative is the tangent rule given to
    ``.defjvp`` (forward mode directly, reverse mode by its transpose); without ``fn``, the
    decorator with those options."""
    if fn is None:
        return lambda f: CustomJVP(f, nondiff_argnums)
    return CustomJVP(fn, nondiff_argnums)
