"""Recording with the rules of ``sg.simplify``: what an Ops that simplifies records with.

``simplifying(cls)`` is the recorder class ``cls`` whose ``apply`` is ``apply_simplified``: an
identity gives back its input, a rewrite records the simpler form, and an entry already on the
tape with the same primitive, inputs and attributes is that entry (hash-consing, through the
Ops's table ``_cse``, which ``release`` clears). ``record_exactly`` is the
plain ``apply`` of ``cls``: what a named result and a transform's identity entry record with.
The rules are in ``primitives/rewrites.py``; ``rules_for_pass`` says when a transform's Ops
starts using them.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..primitives import rewrites
from ..primitives.core import Primitive
from .batching import Batched
from .operands import recordable
from .tape import value_of
from .variable import Entry, Variable, handle

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
    if not self.recording or name is not None:     # a named result is recorded as asked
        return self.record_exactly(prim, inputs, attrs, name)
    nodes = []
    for x in inputs:
        tx = type(x)
        if tx is Variable and x.rec is self:
            nodes.append(x.node)
        elif tx is Entry:
            nodes.append(x)
        else:
            return _mixed(self, prim, tuple(inputs), attrs)
    # entries of this tape only (the sweeps' common case): the key is cse_key's, inline
    nodes = tuple(nodes)
    if rewrites.may_simplify(prim, nodes, attrs):
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
            nodes[i] = x.node
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
    if rewrites.may_simplify(prim, inputs, attrs):
        rewritten = rewrites.rewrite(prim, inputs, attrs)
        if rewritten is not None:   # (its inputs may be entries inside others: their values)
            prim, inputs, attrs = rewritten
            for x in inputs:
                if type(x) is Entry and x.raw is None:
                    value_of(x)
        same = rewrites.reduces_to(prim, inputs, attrs)
        if type(same) is Entry:
            for x in given:
                if type(x) is Variable and x.node is same:
                    return x
            ref = self._leaves.get(same)    # a leaf's Variable, while it lives (--x is x)
            x = None if ref is None else ref()
            return x if x is not None else handle(value_of(same), same, self)
        if type(same) is Variable and same.rec is self:
            return same
    if not shareable:
        return self.record_exactly(prim, inputs, attrs)
    return _shared(self, rewrites.cse_key(prim, inputs, attrs), prim, inputs, attrs)


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
