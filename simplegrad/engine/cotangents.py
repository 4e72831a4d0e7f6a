"""Cotangents of a reverse sweep: indexing reads kept sparse and added once, cotangents
added up, and the sweep itself when only values are wanted (``sweep_values``).

reverse.py's ``_sweep`` records; ``sweep_values`` is the same walk on plain arrays with a
``ValueOps``, with nothing to record, undo or remember per pullback (the value-only path of
``grad``, ``backward`` and every transform's outermost gradient).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import NotDifferentiableError
from ..primitives import HELD
from .tape import ancestors
from .variable import UNARY, Variable

if TYPE_CHECKING:
    from ..primitives import PrimitiveMethods, ValueOps
    from .tape import Tape


class Sparse:
    """Pending cotangent contributions of indexing reads: added into one dense array once."""

    __slots__ = ("dense", "grads", "indices", "shape")

    def __init__(self, g: Any, index: tuple, shape: tuple):
        self.dense = None
        self.grads = [g]
        self.indices = [index]
        self.shape = shape


def sweep_values(o: ValueOps, tape: Tape, L: Variable, seed: Any, stop: int, keep: set,
                 only: set | None) -> dict:
    """Each input's cotangent, as arrays, by the reverse sweep from L back to ``stop``.

    Every cotangent is freed once pulled back, except those of ``keep`` (the Variables whose
    gradients were asked for); an input older than ``stop`` gets one only when it is in
    ``keep``; ``only``: pull back only through these entries.
    """
    grads: dict[Variable, Any] = {L: seed}
    if L.prim is None:
        return grads
    masks: dict[Variable, Any] = {}     # cotangents zero by construction there (core.py)
    wanted = keep or None
    entries = tape.entries
    base = tape.base
    path = ancestors(L, stop) if stop < tape.dropped else \
        entries[max(stop, base) - base:L.position - base + 1]
    pop, get = grads.pop, grads.get
    older = stop > base     # (whether an input can be older than every wrt)
    for out in reversed(path):
        g = pop(out, None)
        if g is None:
            continue
        if type(g) is Sparse:
            g = densify(o, tape, out, g)
        if out in keep:
            grads[out] = g
        if only is not None and out not in only:
            continue
        prim = out.prim
        attrs = out.attrs
        outv = out.raw
        inputs = out.more           # Variable.inputs, inlined: the sweep's hot path
        if inputs is None and not (masks or prim.sparse_vjp or prim.variadic or
                                   prim.mask_source):
            # one or two inputs and no structural zeros (the common entry): the general loop
            # below without what it never needs here
            x = out.in0
            b = out.in1
            unary = b is UNARY
            if unary:               # (the input of a recorded unary op is a Variable)
                inputs = (x,)
                a = x.raw
            else:
                inputs = (x, b)
                a = x.raw if type(x) is Variable else x
                c = b.raw if type(b) is Variable else b
            rules = prim.vjp
            i = -1
            for x in inputs:
                i += 1
                rule = rules[i]
                if rule is None or type(x) is not Variable or not x.requires_grad or \
                        only is not None and x not in only or \
                        older and x.position < stop and x not in keep:
                    continue
                if unary:
                    ct = rule(o, g, outv, a, **attrs) if attrs else rule(o, g, outv, a)
                else:
                    ct = rule(o, g, outv, a, c, **attrs) if attrs else rule(o, g, outv, a, c)
                if ct is None:
                    continue
                dtype = x.raw.dtype
                if ct.dtype is not dtype and ct.dtype != dtype:
                    ct = o.cast(ct, dtype)
                old = get(x)
                grads[x] = ct if old is None else accumulate(o, tape, x, old, ct) if \
                    type(old) is Sparse or type(ct) is Sparse else o.add(old, ct)
            g = ct = old = None
            continue
        if inputs is None:
            x = out.in0
            b = out.in1
            if b is UNARY:          # (the input of a recorded unary op is a Variable)
                inputs = (x,)
                args = (x.raw,)
            else:
                inputs = (x, b)
                args = (x.raw if type(x) is Variable else x, b.raw if type(b) is Variable else b)
        else:
            args = [x.raw if type(x) is Variable else x for x in inputs]
        m = masks.get(out) if masks else None
        special = prim.mask is not None and (m is not None or prim.mask_source)
        masked = m is not None and prim.vjp_masked is not None
        rules = prim.vjp_masked if masked else prim.vjp
        i = -1
        for x in inputs:
            i += 1
            if type(x) is not Variable or not x.requires_grad or \
                    only is not None and x not in only or \
                    older and x.position < stop and x not in keep:
                continue    # (older than every wrt and not asked for: nothing to reach)
            if prim.sparse_vjp:    # indexing: same dtype, added up later
                ct = Sparse(g, attrs["index"], x.raw.shape)
            else:
                if prim.variadic:
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
                    elif attrs:         # (one input: no argument tuple to build)
                        ct = rule(o, g, outv, args[0], **attrs) if len(args) == 1 else \
                            rule(o, g, outv, *args, **attrs)
                    elif len(args) == 2:    # (no argument tuple to build: the common calls)
                        ct = rule(o, g, outv, args[0], args[1])
                    elif len(args) == 1:
                        ct = rule(o, g, outv, args[0])
                    else:
                        ct = rule(o, g, outv, *args)
                if ct is None:
                    continue
                dtype = x.raw.dtype
                if ct.dtype is not dtype and ct.dtype != dtype:
                    ct = o.cast(ct, dtype)
            mask = prim.mask(o, m, i, outv, *args, **(attrs or {})) if special else None
            old = get(x)           # (rules read values, never ``grads``: add up at once)
            if old is None:
                grads[x] = ct
                if mask is not None:
                    masks[x] = mask
                continue
            grads[x] = accumulate(o, tape, x, old, ct) if type(old) is Sparse or \
                type(ct) is Sparse else o.add(old, ct)
            if masks:
                before = masks.pop(x, None)
                if before is not None and mask is not None:
                    masks[x] = before if before is mask else o.logical_and(before, mask)
        # the loop's names would hold the last cotangent and the total it replaced until the
        # next entry's: free them now (two arrays of the peak)
        g = ct = old = None
    for v, g in grads.items():
        if type(g) is Sparse:
            grads[v] = densify(o, tape, v, g)
    return grads


def check_held(out: Variable, x: Variable, wanted: set | None, stop: int) -> None:
    """Raise when a requested gradient passes through input ``x`` of ``out``, an input its
    primitive has no derivative in (zeros would be a silently wrong answer)."""
    if wanted is None:
        reached = x
    else:
        reached = next((v for v in [x, *ancestors(x, stop, leaves=True)] if v in wanted), None)
        if reached is None:
            return
    via = "" if reached is x else f", which {reached.name} reaches"
    raise NotDifferentiableError(
        f"grad: {out.name} = {out.prim.name}(...) has no derivative in its input {x.name} "
        f"(shape {x.shape}){via}; hold {x.name} fixed with .detach() or differentiate in other "
        "variables")


def accumulate(o: PrimitiveMethods, tape: Tape, x: Variable, old: Any, new: Any) -> Any:
    """existing + new cotangent of x, keeping indexing reads sparse until they are needed."""
    if type(new) is Sparse:
        if type(old) is Sparse:
            old.grads.extend(new.grads)
            old.indices.extend(new.indices)
            if new.dense is not None:
                old.dense = (new.dense if old.dense is None
                             else _add_existing(o, tape, x, old.dense, new.dense))
            return old
        new.dense = old
        return new
    if type(old) is Sparse:
        old.dense = new if old.dense is None else _add_existing(o, tape, x, old.dense, new)
        return old
    return _add_existing(o, tape, x, old, new)


def _add_existing(o: PrimitiveMethods, tape: Tape, x: Variable, old: Any, new: Any) -> Any:
    total = o.add(old, new)
    if type(total) is Variable and tape.keep:
        tape.accumulations[total.position] = x
    return total


def densify(o: PrimitiveMethods, tape: Tape, x: Variable, s: Sparse) -> Any:
    dense = o.scatter_add(s.grads, s.indices, s.shape)
    if type(dense) is Variable and tape.keep:
        tape.accumulations[dense.position] = x
    return dense if s.dense is None else _add_existing(o, tape, x, s.dense, dense)
