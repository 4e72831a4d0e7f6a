"""The reverse sweep (grad, backward) over an Ops' recorded entries, newest first.

Functions of an ``Ops`` that use its public interface only (its ``tape``, ``recording``,
``leaf``, ``unrecorded``, ``zeros_like`` and primitive methods); ``Ops.grad`` and
``Ops.backward`` delegate here (``Ops.jvp`` to forward.py). Every derivative is computed by
calling primitives on ``o``: the Ops itself when the result is to be recorded (so it can be
printed and differentiated again), or a ``ValueOps`` when only values are wanted
(``create_graph=False``); one walk, ``sweep``, serves both. First come the checks a sweep
(reverse here, forward in forward.py) makes before it starts: the arguments, a history to
differentiate, a growing tape.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, ShapeError
from ..primitives import HELD, ValueOps
from .batching import Batched, innermost, levels_of, stacked, unstack
from .cotangents import Sparse, accumulate, add_values, check_held, densify
from .params import FREE
from .tape import BlockBegin, BlockEnd, descendants, value_of
from .variable import UNARY, Entry, Variable, handle

if TYPE_CHECKING:
    from ..primitives import PrimitiveMethods
    from .ops import Ops
    from .tape import Tape

from typing import TYPE_CHECKING

from ..errors import (
    DTypeError,
    GraphError,
    SimplegradError,
    TapeGrowthWarning,
    warn,
)
from ..primitives.core import FUSED_SIZE, describe
from .render import format_entry
from .tape import ancestors
from .variable import RELEASED, NoHistory

if TYPE_CHECKING:
    from .ops import Ops
    from .tape import Tape


# ---------------------------------------------------------------- checks first: arguments


def check_target(ops: Ops, op: str, L: Any) -> None:
    """Refuse an L that is not a Variable of ``ops``."""
    if not isinstance(L, Variable):
        raise ArgumentError(f"{op}: expected a Variable to differentiate, got "
                            f"{type(L).__name__}")
    if L.rec is not ops:
        raise GraphError(f"{op}: {L.name} belongs to another Ops")


def check_wrt(ops: Ops, op: str, w: Any) -> None:
    """Refuse a ``wrt`` that is not a Variable of ``ops`` requiring grad."""
    if not isinstance(w, Variable):
        raise ArgumentError(f"{op}: wrt must be Variables, got {type(w).__name__}")
    if w.rec is not ops:
        raise GraphError(f"{op}: {w.name} belongs to another Ops")
    if not w.requires_grad:
        raise GraphError(f"{op}: {w.name} does not require grad (created with "
                         "requires_grad=False, detached, or computed without recording)")


def check_history(op: str, L: Variable, wrt: Sequence[Variable]) -> None:
    """Refuse a derivative of L that would be zero only because L's history is gone: L's Ops
    was released after L was recorded, or L (or all that L requires grad through) was computed
    under no_grad. An L that does not depend on ``wrt`` through its recorded history keeps its
    zeros (JAX's semantics)."""
    if L.prim is not None and L.requires_grad or L.attrs is None and L.requires_grad:
        return          # (the common case, first)
    if any(L.node is w.node for w in wrt):
        return          # dL/dL is the seed
    cause = L if L.prim is None and type(L.attrs) is NoHistory else None
    if cause is None and not L.requires_grad:   # nothing it depends on requires grad: why?
        for v in ancestors(L, leaves=True):
            if v.prim is None and type(v.attrs) is NoHistory:
                cause = v
                break
    if cause is None:
        return
    what = f"{L.name}" if cause is L else f"{L.name} is computed from a value that"
    if cause.attrs is RELEASED:
        raise GraphError(f"{op}: {what} has no history: its Ops was released (op.release(), "
                         "the end of `with sg.Ops() as op:`, or a backward() that ended a step "
                         "on sg.Parameter values) after it was recorded, so no gradient can "
                         "reach what it was computed from; compute the gradient before the "
                         "release (inside the with block; for several losses of one step, "
                         "backward() their sum, or keep the step with backward(retain_graph="
                         "True) as in PyTorch), or record it again")
    raise GraphError(f"{op}: {what} was computed under op.no_grad(), which records nothing, so "
                     "it has no history to differentiate; compute it outside the no_grad block")


def check_unreached(op: str, L: Variable, wrt: Sequence[Variable]) -> None:
    """Refuse zeros that come from a release between ``wrt`` and L: L is computed from a
    value whose history was released after some ``wrt`` was made, so a path from it may have
    been cut (called only when the sweep reached no ``wrt``)."""
    oldest = min((w.position for w in wrt), default=None)
    if oldest is None:
        return
    for v in ancestors(L, leaves=True):
        if v.prim is None and v.attrs is RELEASED and v.position > oldest:
            raise GraphError(f"{op}: {L.name} is computed from {v.name}, whose history was "
                             "released (op.release(), the end of `with sg.Ops() as op:`, or a "
                             "backward() that ended a step on sg.Parameter values), so no "
                             "gradient can reach what it was computed from; compute the "
                             "gradient before the release, or record it again")


def seed_value(ops: Ops, op: str, L: Variable, seed: Any) -> np.ndarray:
    """The seed of a sweep from L as an array of L's shape and dtype (ones for a scalar L)."""
    if seed is None:
        if L.raw.size != 1:
            raise ShapeError(f"{op}: {L.name} has shape {L.shape}, not a scalar: pass "
                             f"seed= of that shape or reduce it with .sum()")
        one = np.array(1, dtype=L.dtype)    # (np.ones is a Python function: 4x the cost)
        shape = L.shape
        return one if shape == () else one.reshape(shape)
    if isinstance(seed, Variable) and seed.rec is not ops:
        raise GraphError(f"{op}: the seed {seed.name} belongs to another Ops")
    arr = np.asarray(value_of(seed))
    if arr.shape != L.shape:
        raise ShapeError(f"{op}: seed has shape {arr.shape} but {L.name} has shape {L.shape}")
    if arr.dtype.kind not in "biufc" or arr.dtype.kind == "c" and L.dtype.kind != "c":
        raise DTypeError(f"{op}: seed of dtype {arr.dtype} is not supported for "
                         f"{L.name} of dtype {L.dtype}")
    return np.array(arr, dtype=L.dtype)


# ---------------------------------------------------------------- a growing tape


GROWTH_PASSES = 100     # backward passes of new steps on one tape before it warns
GROWTH_MESSAGE = (
    f"this Ops has served {GROWTH_PASSES} backward passes of new computations and still holds "
    "every entry and array recorded since it was made or released; in a training loop record "
    "each step on its own Ops (`with sg.Ops() as op:`), call op.release() after each step, or "
    "keep the weights as sg.Parameter (freed automatically)")


def count_pass(tape: Tape, L: Variable) -> None:
    """Count a backward pass that starts a new step on a tape that keeps growing, and warn at
    each one from the ``GROWTH_PASSES``-th on (Python's filters decide repeats).

    Not counted: a pass with nothing recorded since the last one (a Jacobian's rows swept over
    one graph), and one whose L is computed from entries recorded before the last pass (a
    derivative of a derivative, a Hessian's rows: one step's nested passes). What a training
    loop on one Ops records between its passes is a new forward from the leaves.
    """
    end, last = tape.end, tape.last_pass_end
    if end == last or not tape.keep:
        return
    if last >= tape.base and builds_on(L, last):
        return
    tape.passes += 1
    if tape.passes >= GROWTH_PASSES:
        warn(GROWTH_MESSAGE, TapeGrowthWarning)


def builds_on(L: Variable, mark: int) -> bool:
    """True when L, through the entries recorded at ``mark`` or later, reaches an older entry
    that requires grad (a walk over the new entries only)."""
    stack, seen = [L.node if isinstance(L, Variable) else L], set()
    while stack:
        v = stack.pop()
        if v.prim is None or not v.requires_grad:
            continue
        if v.position < mark:
            return True
        if v.position in seen:
            continue
        seen.add(v.position)
        stack.extend(x for x in v.inputs if type(x) is Entry)
    return False


# ---------------------------------------------------------------- failures during a sweep


def note_entry(e: BaseException, out: Any, x: Any, what: str) -> None:
    """Add to ``e`` (an error not of simplegrad's) a note naming the entry ``out`` whose
    ``what`` rule failed (and its input ``x``), once: an outer sweep does not add another."""
    if isinstance(e, SimplegradError) or not isinstance(e, Exception) or \
            not isinstance(out, (Variable, Entry)) or out.prim is None:
        return
    notes = getattr(e, "__notes__", None)
    if notes and any(n.startswith("simplegrad: ") for n in notes):
        return
    to = ""
    if isinstance(x, (Variable, Entry)):
        to = f" to its input {format_entry(x) if x.prim is not None else x.name}"
    note = f"simplegrad: in the {what} of {format_entry(out)} ({describe(out.inputs)}){to}"
    if hasattr(e, "add_note"):
        e.add_note(note)
    else:                           # (Python 3.10: the attribute PEP 678 reads)
        e.__notes__ = [*(notes or []), note]


# ---------------------------------------------------------------- reverse mode


def grad(ops: Ops, L: Variable, wrt: Variable | Sequence[Variable], seed: Any = None,
         create_graph: bool = True) -> Any:
    """Gradients of L with respect to ``wrt``; sets ``.grad`` on each (see ``Ops.grad``)."""
    tw = type(wrt)          # (a list or tuple first: an ABC check costs 0.1 us)
    single = tw is not list and tw is not tuple and (
        isinstance(wrt, Variable) or not isinstance(wrt, Iterable))
    asked = [wrt] if single else list(wrt)
    if type(L) is Batched or any(type(w) is Batched for w in asked):
        out = _on_stacks(ops, L, asked, seed, create_graph)
        return out[0] if single else out
    recording = bool(create_graph or type(seed) is Batched) and ops.recording   # (batch rules)
    targets, grads = _gradients(ops, L, asked, seed, recording)
    out = []
    for a, w in zip(asked, targets):
        g = grads.get(w.node)
        if g is None:
            g = ops.zeros_like(w, recording)
        elif not recording:
            g = ops.unrecorded(g, f"d{L.name}_d{w.name}")
        elif type(g) is not Variable:
            g = as_variable(ops, g)
        w.grad = a.grad = g
        out.append(g)
    return out[0] if single else out


def _on_stacks(ops: Ops, L: Variable, asked: list, seed: Any, create_graph: bool) -> list:
    """``grad`` of values batched by vmap (every ``wrt`` at the same levels, L at some of
    them): one sweep of the stacked program from the stacked seed, the gradients wrapped back."""
    levels = levels_of(asked[0])
    for w in asked[1:]:
        if levels_of(w) != levels:
            raise ArgumentError(f"grad: {asked[0].name} and {w.name} are batched by different "
                                "vmaps; differentiate in values of the same ones")
    Ls = stacked(ops, L, levels, L.name)
    if seed is None:        # ones for a scalar per example (checked as for one example)
        if math.prod(L.shape) != 1:
            raise ShapeError(f"grad: {L.name} has shape {L.shape} per example, not a scalar: "
                             "pass seed= of that shape or reduce it with .sum()")
        seed = np.ones(Ls.shape, dtype=Ls.dtype)
    else:
        seed = stacked(ops, seed, levels, "the seed", carried=True)
    gs = grad(ops, Ls, [innermost(w) for w in asked], seed, create_graph)
    out = []
    for w, g in zip(asked, gs):
        w.grad = g = unstack(g, levels)
        out.append(g)
    return out


def gradient_values(ops: Ops, L: Variable, wrt: Sequence[Variable], seed: Any = None,
                    last: bool = False) -> list:
    """The gradients of L with respect to ``wrt`` as arrays, by a value-only sweep that records
    nothing and sets no ``.grad`` (what a transform hands back). ``last``: nothing sweeps this
    tape again (a transform's own Ops), so each entry lets go of its values once pulled back."""
    targets, grads = _gradients(ops, L, list(wrt), seed, False, last)
    out = []
    for w in targets:
        g = grads.get(w.node)
        out.append(np.zeros(w.shape, w.dtype) if g is None else g)
    return out


def _gradients(ops: Ops, L: Variable, asked: list, seed: Any, recording: bool,
               last: bool = False) -> tuple:
    """The Variables standing for ``asked`` (a Parameter's leaf on this Ops) and the sweep's
    cotangents, keyed by entry.

    A Parameter assigned a new value after L used it has a leaf per value: its gradient is
    the sum over them (each use at the value it had), as ``backward`` gives it.
    """
    targets = [ops.leaf_for(w) for w in asked]
    check_target(ops, "grad", L)
    for w in targets:
        check_wrt(ops, "grad", w)
    check_history("grad", L, targets)
    nodes = [w.node for w in targets]
    earlier = [(t, old) for w, t in zip(asked, nodes) for old in ops.earlier_leaves(w)]
    swept = nodes + [old for _, old in earlier] if earlier else nodes
    # entries older than every wrt cannot lie on a path from them: stop there
    stop = min((w.position if w.prim is None else w.position + 1 for w in swept),
               default=ops.tape.end)
    only = descendants(ops.tape, swept, stop, L.position + 1) if ops.simplify else None
    grads = _reverse(ops, L, seed, recording, stop, set(swept), only, last)
    ops.tape.reached = any(w in grads for w in swept)   # (a transform warns when not)
    if not ops.tape.reached:
        check_unreached("grad", L, swept)
    for t, old in earlier:
        g = grads.get(old)
        if g is not None:
            total = grads.get(t)
            grads[t] = g if total is None else ops.add(total, g) if recording else total + g
    return targets, grads


def backward(ops: Ops, L: Variable, seed: Any = None, create_graph: bool = False,
             retain_graph: bool | None = None) -> None:
    """Accumulate dL/d(leaf) into ``.grad`` of every leaf that requires grad (PyTorch style);
    a step on Parameters ends with it unless ``retain_graph`` (PyTorch's; default:
    ``create_graph``)."""
    check_target(ops, "backward", L)
    check_history("backward", L, ())
    recording = bool(create_graph) and ops.recording
    # a step on free parameters ends with its value-only backward (as PyTorch's frees what it
    # saved): its history goes now, not when the next step rebinds the loss
    ends = not recording and not ops.tape.keep and not (
        create_graph if retain_graph is None else retain_graph)
    grads = _reverse(ops, L, seed, recording, 0, set(), None, ends)    # (leaves: never swept)
    for v, g in grads.items():
        if v.prim is not None or not v.requires_grad:
            continue
        if recording and type(g) is not Variable:
            g = as_variable(ops, g)
        p = ops.source_of(v)
        if p is not None:           # a Parameter's leaf: its gradient lives on the Parameter
            value = g.raw if type(g) is Variable else g
            p.grad = FREE.unrecorded(value if p.grad is None else p.grad.raw + value) \
                if not recording else (g if p.grad is None else ops.add(p.grad, g))
            continue
        ref = ops._leaves.get(v)       # the user's leaf, while it lives
        x = None if ref is None else ref()
        if x is None:
            continue
        if x.grad is None:
            x.grad = g if recording else ops.unrecorded(g, f"d{L.name}_d{x.name}")
        elif recording:
            x.grad = ops.add(x.grad, g)
        else:
            x.grad = ops.unrecorded(x.grad.raw + g, f"d{L.name}_d{x.name}")
    if ends:
        ops.release()


def as_variable(ops: Ops, x: Any) -> Variable:
    """A Variable of ``ops`` for an entry of its tape (its value replayed if it was freed);
    a Variable (a batched one too) as it is."""
    if type(x) is not Entry:
        return x
    return handle(value_of(x), x, ops)


def _reverse(ops: Ops, L: Variable, seed: Any, recording: bool, stop: int, keep: set,
             only: set | None, last: bool = False) -> dict:
    seed_array = seed if recording and type(seed) is Batched and seed.shape == L.shape else \
        seed_value(ops, "grad", L, seed)    # (a seed batched by a vmap L is not: carried)
    tape = ops.tape
    target = L.node
    if not tape.keep:               # a step on free parameters ends with its backward pass
        FREE.finish()
    count_pass(tape, L)
    if not recording:               # values only: nothing is recorded, nothing to undo
        tape.last_pass_end = tape.end   # (a ValueOps of its own: custom rules key memos by it)
        try:
            return sweep(ValueOps(), tape, target, seed_array, stop, only, keep or None, False,
                         last)
        except Exception as e:
            _failed(e)
            raise
    snap = tape.snapshot()          # (a sweep that fails is undone)
    try:
        tape.add(BlockBegin(tape.end, "grad", target))
        if isinstance(seed, Variable):
            seed_var = seed
        elif ops.simplify and seed is None:     # ones, as a constant the rules can see
            seed_array.setflags(write=False)
            seed_var = seed_array
        else:
            seed_var = ops.leaf(seed_array, None, True, "seed")
        try:
            grads = sweep(ops, tape, target, seed_var, stop, only, keep or None, True)
        except Exception as e:
            _failed(e)
            raise
        kinds = set(map(type, grads.values()))
        if kinds != {Variable}:
            for v, g in grads.items():      # a constant seed stands for itself as a leaf
                if not isinstance(g, (Variable, Entry)):
                    grads[v] = ops.leaf(g, None, False, "leaf")
        if Batched in kinds or Entry in kinds:
            found = {v: g.node if type(g) is Variable else innermost(g).node
                     if type(g) is Batched else g for v, g in grads.items()}
        else:       # (Variables only, the common case: at once)
            found = dict(zip(grads, map(_NODE, grads.values())))
        if tape.keep or tape.listeners:
            tape.add(BlockEnd(tape.end, "grad", target, found))     # (entries: no cycle)
    except BaseException:
        tape.restore(snap)
        raise
    tape.settle(snap)
    tape.last_pass_end = tape.end
    return grads


_NODE = attrgetter("node")


def _failed(e: Exception) -> None:
    """Name in ``e`` the entry the sweep was pulling back when it failed (its frame's)."""
    tb, frame = e.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code is sweep.__code__:
            frame = tb.tb_frame
        tb = tb.tb_next
    if frame is not None:
        note_entry(e, frame.f_locals.get("out"), frame.f_locals.get("x"), "gradient")


def sweep(o: PrimitiveMethods, tape: Tape, L: Entry, seed: Any, stop: int,
          only: set | None, wanted: set | None, recording: bool, last: bool = False) -> dict:
    """The reverse sweep: entries leading to L, newest first, each input's cotangent.

    ``recording``: ``o`` is the Ops, rules get the entries themselves and every cotangent is a
    recorded Variable, all of them returned (the gradient block names each); otherwise ``o``
    is a ``ValueOps``, rules get the entries' values and each cotangent is freed once pulled
    back, except those of ``wanted``. ``only``: pull back only through these entries (the
    ones a ``wrt`` reaches). ``wanted``: the Variables whose gradients were asked for (None:
    every leaf); an input older than ``stop`` (the oldest of them) gets a cotangent only
    when it is one of them. ``last`` (values only): no sweep reads this tape again, so each
    entry lets go of its value once pulled back (every entry reading it is newer, pulled back
    already), as PyTorch frees what it saved. Values only, a cotangent total is added into in
    place only while it is a buffer the sweep owns (``owned``, cotangents.add_values).
    """
    grads: dict[Entry, Any] = {L: seed}
    owned: set[Entry] = set()   # (values only: the entries whose total is the sweep's buffer)
    if L.prim is None:
        return grads
    masks: dict[Entry, Any] = {}     # cotangents zero by construction there (core.py)
    entries = tape.entries
    base = tape.base
    pullbacks = tape.pullbacks if recording and tape.keep else None
    if pullbacks is not None:       # (Pullbacks.add, inlined below: once per rule call)
        spans, pulled = pullbacks.spans, pullbacks.entries
    keep = wanted or ()
    hold = () if recording else keep    # (values only: the totals handed back as they pass)
    sparse = type(seed) is Sparse       # (whether any cotangent so far is a Sparse one)
    older = wanted is not None and stop > base  # (whether an input can be older than every wrt)
    narrowed = only is not None or older    # (whether an input may be passed over for either)
    # the entries from L back to ``stop``, newest first
    path = entries[max(stop, base) - base:L.position - base + 1]
    get = grads.get
    take = get if recording else grads.pop
    for out in reversed(path):
        g = take(out, None)
        if g is None:
            continue
        if owned:               # (handed to rules from here on: no longer the sweep's alone)
            owned.discard(out)
        if sparse and type(g) is Sparse:
            g = densify(o, tape, out, g)
            if recording:
                grads[out] = g
        if out in hold:
            grads[out] = g
        if only is not None and out not in only:
            continue
        prim = out.prim
        attrs = out.attrs
        # what the rules get: the entries themselves (recorded), or their values; an entry
        # whose value is gone stands for itself (its shape and dtype: no rule reads more of
        # it, Primitive.saves)
        if recording:
            outv = out
        else:
            outv = out.raw
            if outv is None:
                outv = out
        if out.more is None and prim.common and not masks:
            # one or two inputs and no structural zeros (the common entry): the loop below
            # without what it never needs here, the inputs read from their slots (the input
            # of a unary entry is an entry)
            x0 = out.in0
            b = out.in1
            unary = b is UNARY
            if recording:
                a, c = x0, b
                ct0 = ct1 = None    # (the cotangents of the two inputs, added up after both)
            else:
                if unary:
                    a = x0.raw
                else:
                    a = x0.raw if type(x0) is Entry else x0
                    c = b.raw if type(b) is Entry else b
                    if c is None:
                        c = b
                if a is None:
                    a = x0
            rules = prim.vjp
            # the rules for an input of the output's shape (nothing to unbroadcast) and, on
            # plain arrays of FUSED_SIZE entries or more, the fused ones (into the sweep's new
            # buffer); unless the rules were replaced
            beside, same = prim.vjp_same
            fused = None if recording else prim.vjp_fused
            if beside is not rules:
                same = rules
                fused = None
            elif fused is not None and (type(g) is not np.ndarray or g.size < FUSED_SIZE):
                fused = None        # (g has the output's shape: its value may be freed)
            shape = out.shape
            i = -1
            for x in (x0,) if unary else (x0, b):
                i += 1
                rule = rules[i]
                if rule is None or type(x) is not Entry or not x.requires_grad or narrowed and (
                        only is not None and x not in only or
                        older and x.position < stop and x not in keep):
                    continue
                f = None
                if x.shape is shape:
                    rule = same[i]
                    if fused is not None:
                        f = fused[i]
                        if f is not None:
                            if attrs:
                                ct = f(g, outv, a, **attrs) if unary else \
                                    f(g, outv, a, c, **attrs)
                            else:
                                ct = f(g, outv, a) if unary else f(g, outv, a, c)
                            if ct is None:
                                f = None
                if pullbacks is not None:
                    start = len(entries)
                if f is None:
                    if unary:
                        ct = rule(o, g, outv, a, **attrs) if attrs else rule(o, g, outv, a)
                    else:
                        ct = rule(o, g, outv, a, c, **attrs) if attrs else \
                            rule(o, g, outv, a, c)
                if ct is None:
                    continue
                dtype = x.dtype
                if ct.dtype is not dtype and ct.dtype != dtype:
                    ct = o.cast(ct, dtype)
                if not recording:   # values: added up at once (no rule reads ``grads``)
                    old = get(x)
                    if old is None:
                        grads[x] = ct
                        if f is not None and ct.flags.writeable:    # (else a value handed on)
                            owned.add(x)
                    elif type(old) is np.ndarray and type(ct) is np.ndarray and \
                            old.size < FUSED_SIZE:  # (add_values' first case, inlined)
                        grads[x] = o.add(old, ct)
                    else:
                        grads[x] = add_values(o, tape, x, old, ct, owned,
                                              f is not None and ct.flags.writeable)
                    continue
                if pullbacks is not None and len(entries) > start:
                    spans += (base + start, base + len(entries), i)
                    pulled.append(out)
                if i:
                    ct1 = ct
                else:
                    ct0 = ct
            if recording:   # all cotangents first, then accumulated in input order
                if ct0 is not None:
                    old = get(x0)
                    grads[x0] = ct0 if old is None else accumulate(o, tape, x0, old, ct0)
                if ct1 is not None:
                    old = get(b)
                    grads[b] = ct1 if old is None else accumulate(o, tape, b, old, ct1)
            else:
                g = ct = old = None     # (see the end of the loop)
                if last:
                    outv = a = c = None
                    out.raw = None     # (Entry.forget, inlined)
            continue
        inputs = out.more
        if inputs is None:
            b = out.in1
            inputs = (out.in0,) if b is UNARY else (out.in0, b)
        if recording:
            args = inputs
        else:
            args = [x if type(x) is not Entry or x.raw is None else x.raw for x in inputs]
        cts = []
        m = masks.get(out) if masks else None
        special = prim.mask is not None and (m is not None or prim.mask_source)
        masked = m is not None and prim.vjp_masked is not None
        rules = prim.vjp_masked if masked else prim.vjp
        i = -1
        for x in inputs:
            i += 1
            if type(x) is not Entry or not x.requires_grad or narrowed and (
                    only is not None and x not in only or
                    older and x.position < stop and x not in keep):
                continue    # (older than every wrt and not asked for: nothing to reach)
            start = len(entries)
            if prim.sparse_vjp:    # indexing: same dtype, added up later
                ct = Sparse(g, attrs["index"], x.shape)
                sparse = True
            elif prim.variadic:
                ct = prim.vjp[0](o, g, outv, i, *args, **(attrs or {}))
                if ct is HELD:
                    check_held(out, x, wanted, stop)
                    continue
            else:
                rule = rules[i]
                if rule is None:
                    continue
                if masked:
                    ct = rule(o, g, outv, m, *args, **attrs) if attrs else \
                        rule(o, g, outv, m, *args)
                elif attrs:
                    ct = rule(o, g, outv, *args, **attrs)
                else:
                    ct = rule(o, g, outv, *args)
            if ct is None:
                continue
            if type(ct) is not Sparse and ct.dtype is not x.dtype and ct.dtype != x.dtype:
                ct = o.cast(ct, x.dtype)
            mask = prim.mask(o, m, i, outv, *args, **(attrs or {})) if special else None
            if pullbacks is not None and len(entries) > start:
                spans += (base + start, base + len(entries), i)
                pulled.append(out)
            cts.append((x, ct, mask))
        if prim.release is not None:
            prim.release()
        for x, ct, mask in cts:    # all cotangents first, then accumulate in input order
            old = get(x)
            if old is None:
                grads[x] = ct
                if mask is not None:
                    masks[x] = mask
                continue
            grads[x] = accumulate(o, tape, x, old, ct)
            if masks:
                before = masks.pop(x, None)
                if before is not None and mask is not None:
                    masks[x] = before if before is mask else o.logical_and(before, mask)
        # the loop's names would hold the last cotangents and the totals they replaced until
        # the next entry's: free them now (arrays of the peak, in a value-only sweep)
        g = ct = old = cts = args = outv = None
        if last:
            out.raw = None     # (Entry.forget, inlined)
    if sparse:
        for v, g in grads.items():
            if type(g) is Sparse:
                grads[v] = densify(o, tape, v, g)
    return grads
