"""``sg.simplify``: a Program rewritten by the rules of ``primitives/rewrites.py``.

One pass in tape order: each entry's arguments are renamed to what earlier entries became, then
the entry is folded (all arguments constant), reduced to an input (an identity), rewritten
(``x + x``; ``(x * 2.0) * 2.0`` is ``x * 4.0``), with ``expand`` gathered into a polynomial of other
entries (add, sub, mul and neg: ``primitives/polynomials.py``; written out as entries where an
output or another primitive reads it), or shared with an earlier entry of the same CSE key;
last, entries and constants no output needs are dropped. An output with a given name (an alias
such as ``dW = v12``) is kept, so the simplified program still names its outputs. One pass
suffices: a rule looks only at an entry's arguments and at the entries that computed them, which
are final by the time the entry is reached. The step for one entry is ``rewrites.simplified``,
the one the derivation and a simplifying Ops take too. Without ``expand`` every value is the
plain program's to the bit (but ``x + 0``, as rewrites.py says); with it, to float64 round-off.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine.variable import Entry
from ..errors import ArgumentError
from ..primitives.core import Primitive
from ..primitives.loops import is_body
from ..primitives.polynomials import Expansion, Polynomial
from ..primitives.rewrites import FOLD, Operand, Same, constant_key, simplified
from .nodes import CONST, INPUT, NODE, constant_entry, node_entry, ref_of, slot_entry

if TYPE_CHECKING:
    from .core import Program


def simplify(prog: Program, expand: bool = False) -> Program:
    """An equal Program with constants folded, identities applied, common subexpressions shared
    and entries no output needs removed (see ``primitives/rewrites.py``); with ``expand``, ring
    arithmetic gathered into polynomials too (equal to float64 round-off, not to the bit)."""
    if not any(c.__name__ == "Program" for c in type(prog).__mro__):     # (core imports us)
        raise ArgumentError(f"simplify: expected a Program, got {type(prog).__name__}")
    slots = [slot_entry(INPUT, i, e.label, e.shape, e.dtype) for i, e in enumerate(prog.slots)]
    constants = _Constants()
    new: dict[Entry, Entry] = dict(zip(prog.slots, slots))      # old entry -> what it became
    new.update((c, constants.add(c.raw, c.label)) for c in prog.fixed)
    made: list[Entry] = []      # the new program's entries, in order
    orders: list[int] = []
    table: dict = {}

    def argument(x: Any) -> Entry:
        return x if type(x) is Entry else constants.add(x)

    def node(e: Entry, prim: Primitive, args: tuple, attrs: dict | None, order: int) -> Entry:
        out = node_entry(prim, args, attrs, e.label, e.shape, e.dtype, len(made))
        made.append(out)
        orders.append(order)
        return out

    fresh = _fresh_labels(prog)

    def emit(prim: Primitive, args: tuple, p: Polynomial, last: bool) -> Entry:
        """One entry of a polynomial written out (polynomials.py), through the other rules."""
        args = tuple(argument(x) for x in args)
        step = simplified(prim, args, None, _describe, argument)
        if step is FOLD:
            return constants.add(_fold(prim, args, None))
        if type(step) is Same:
            return step.input
        prim, args, attrs, key = step
        out = table.get(key)
        if out is None:
            label, order = p.tag
            shape = tuple(np.broadcast_shapes(*(tuple(x.shape) for x in args)))
            out = node_entry(prim, args, attrs, label if last else next(fresh), shape,
                             p.dtype, len(made))
            made.append(out)
            orders.append(order)
            table[key] = out
        return out

    expansion = Expansion(emit, _describe) if expand else None

    def written(x: Any) -> Entry:
        return expansion.entry(x) if type(x) is Polynomial else x   # (only with an expansion)

    named = {r.index for r in prog.outputs if r.kind == NODE and
             not re.fullmatch(r"v\d+", prog.entries[r.index].label)}
    bodies: dict[int, Any] = {}     # a loop's sub-program -> simplified (once each)
    for i, (e, order) in enumerate(zip(prog.entries, prog.orders)):
        prim, args, attrs = e.prim, tuple(new[x] for x in e.inputs), _inside(e.attrs, bodies)
        if i in named:          # an output with a given name (dW) keeps it
            new[e] = node(e, prim, tuple(written(x) for x in args), attrs, order)
            continue
        step = simplified(prim, args, attrs, _describe, argument, expansion=expansion)
        if type(step) is Polynomial:
            step.tag = (e.label, order)
            new[e] = step
        elif step is FOLD:
            new[e] = constants.add(_fold(prim, args, attrs), e.label)
        elif type(step) is Same:
            new[e] = step.input
        else:
            prim, args, attrs, key = step
            out = table.get(key)
            if out is None:
                out = table[key] = node(e, prim, args, attrs, order)
            new[e] = out
    outputs = [written(new[prog.at(r)]) for r in prog.outputs]
    guards = [(g, written(new[prog.at(g.ref)])) for g in prog.guards]
    guards = [(g, x) for g, x in guards if not _is_constant(x)]     # (folded: always holds)
    fixed, kept, orders = _without_dead(constants.entries, made, orders,
                                        [*outputs, *(x for _, x in guards)])
    out = type(prog).of_entries(slots, fixed, kept, orders, [ref_of(x) for x in outputs],
                                prog.single, guards=[g._replace(ref=ref_of(x))
                                                     for g, x in guards])
    out.labels = getattr(prog, "labels", ())      # (the outputs keep their order)
    if prog.origin is not None or prog.counts is not None:
        out.origin = prog.origin or prog        # other sizes: that one resized, simplified
        out.expanded = expand or prog.expanded
    return out


def _fresh_labels(prog: Program) -> Iterator[str]:
    """Names ``v<N>`` for entries a polynomial adds, numbered past the program's own."""
    top = max((int(e.label[1:]) for e in prog.entries
               if type(e.label) is str and re.fullmatch(r"v\d+", e.label)), default=-1)
    return (f"v{n}" for n in itertools.count(top + 1))
def _inside(attrs: dict | None, done: dict[int, Any]) -> dict | None:
    """The attributes with each sub-program (a loop's body, condition, branches) simplified."""
    if not attrs:
        return attrs

    def inner(v: Any) -> Any:
        if is_body(v):
            got = done.get(id(v))
            if got is None:
                got = done[id(v)] = v.simplified()
            return got
        if type(v) is tuple and v and all(is_body(b) for b in v):
            return tuple(inner(b) for b in v)
        return v
    out = {k: inner(v) for k, v in attrs.items()}
    return attrs if all(out[k] is attrs[k] for k in attrs) else out


def _is_constant(x: Entry) -> bool:
    return x.prim is None and x.attrs == CONST


def _describe(x: Entry) -> Operand:
    """What the rules know about an entry of the program being built."""
    if x.prim is None:
        if x.attrs == CONST:
            return Operand(x.shape, x.dtype, True, x.raw)
        return Operand(x.shape, x.dtype, False)
    return Operand(x.shape, x.dtype, False, None, x.prim, x.inputs, x.attrs)


class _Constants:
    """The constants of the program being built, each value once (the first name it came
    with); their positions are set when the unused ones are dropped."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._by_key: dict = {}

    def add(self, value: Any, name: str | None = None) -> Entry:
        """The constant leaf holding ``value``, shared with an equal one added before."""
        key = constant_key(value)
        e = self._by_key.get(key)
        if e is None:
            if isinstance(value, np.ndarray) and value.flags.writeable:
                value = value.copy()
                value.setflags(write=False)
            e = self._by_key[key] = constant_entry(value, name, len(self.entries))
            self.entries.append(e)
        return e


def _fold(prim: Primitive, args: tuple, attrs: dict | None) -> Any:
    """The value of an entry whose arguments are all constants, computed once, now."""
    values = [x.raw for x in args]
    with np.errstate(all="ignore"):     # the plain program gives the same value (and warnings)
        value = prim.forward(*values, **attrs) if attrs else prim.forward(*values)
    if type(value) is not np.ndarray and isinstance(value, np.generic):
        value = np.asarray(value)
    return value


def _without_dead(constants: list[Entry], made: list[Entry], orders: list[int],
                  roots: list[Entry]) -> tuple[list, list, list]:
    """The constants, entries and orders that ``roots`` need, each entry's position set to its
    new index."""
    need: set[Entry] = set(roots)
    for e in reversed(made):
        if e in need:
            need.update(e.inputs)
    fixed = [c for c in constants if c in need]
    for k, c in enumerate(fixed):
        c.position = k
    kept, kept_orders = [], []
    for e, order in zip(made, orders):
        if e in need:
            e.position = len(kept)
            kept.append(e)
            kept_orders.append(order)
    return fixed, kept, kept_orders
