"""``sg.simplify``: a Program rewritten by the rules of ``primitives/rewrites.py``.

One pass in tape order: each entry's arguments are renamed to what earlier entries became, then
the entry is folded (all arguments constant), reduced to an input (an identity), rewritten
(``x + x``; ``(x * 2.0) * 2.0`` is ``x * 4.0``), or shared with an earlier entry of the same CSE
key; last, entries and constants no output needs are dropped. An output with a given name (an
alias such as ``dW = v12``) is kept, so the simplified program still names its outputs. One
pass suffices: a rule looks only at an entry's arguments and at the entries that computed
them, which are final by the time the entry is reached. The step for one entry is
``rewrites.simplified``, the one the derivation and a simplifying Ops take too.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError
from ..primitives.core import Primitive
from ..primitives.rewrites import FOLD, Operand, Same, simplified
from .builder import Builder
from .nodes import CONST, INPUT, NODE, Ref

if TYPE_CHECKING:
    from .core import Program


def simplify(prog: Program) -> Program:
    """An equal Program with constants folded, identities applied, common subexpressions shared
    and entries no output needs removed (see ``primitives/rewrites.py``)."""
    if not any(c.__name__ == "Program" for c in type(prog).__mro__):     # (core imports us)
        raise ArgumentError(f"simplify: expected a Program, got {type(prog).__name__}")
    b = Builder(list(prog.inputs))
    consts = [b.constant(c.value, c.name) for c in prog.constants]
    nodes: list[Ref] = []       # old node index -> its ref in the new program
    table: dict = {}

    known: dict[Ref, Operand] = {}

    def describe(r: Ref) -> Operand:
        d = known.get(r)
        if d is not None:
            return d
        if r.kind == CONST:
            value = b.constants[r.index].value
            dtype = None if isinstance(value, bool | int | float) and not isinstance(
                value, np.generic) else np.asarray(value).dtype
            d = Operand(np.shape(value), dtype, True, value)
        elif r.kind == INPUT:
            spec = b.inputs[r.index]
            d = Operand(spec.shape, spec.dtype, False)
        else:
            n = b.nodes[r.index]
            d = Operand(n.shape, n.dtype, False, None, n.prim, n.args, n.attrs)
        known[r] = d
        return d

    def argument(x: Any) -> Ref:
        return x if isinstance(x, Ref) else b.constant(x)

    def new(r: Ref) -> Ref:
        return r if r.kind == INPUT else consts[r.index] if r.kind == CONST else nodes[r.index]

    named = {r.index for r in prog.outputs if r.kind == NODE and
             not re.fullmatch(r"v\d+", prog.nodes[r.index].name)}
    for i, node in enumerate(prog.nodes):
        prim, args, attrs = node.prim, tuple(new(r) for r in node.args), node.attrs
        if i in named:          # an output with a given name (dW) keeps it
            nodes.append(b.node(node._replace(args=args)))
            continue
        step = simplified(prim, args, attrs, describe, argument)
        if step is FOLD:
            nodes.append(_fold(b, prim, args, attrs, node.name))
        elif type(step) is Same:
            nodes.append(step.input)
        else:
            prim, args, attrs, key = step
            r = table.get(key)
            if r is None:
                r = table[key] = b.node(node._replace(prim=prim, args=args, attrs=attrs))
            nodes.append(r)
    guards = [g._replace(ref=new(g.ref)) for g in prog.guards]
    out = _without_dead(type(prog), b, [new(r) for r in prog.outputs], prog.single,
                        [g for g in guards if g.ref.kind != CONST])  # (folded: always holds)
    if prog.origin is not None or prog.counts is not None:
        out.origin = prog.origin or prog        # other sizes: that one resized, simplified
    return out


def _fold(b: Builder, prim: Primitive, args: tuple, attrs: dict | None, name: str) -> Ref:
    """Compute an entry whose arguments are all constants, once, now."""
    values = [b.constants[r.index].value for r in args]
    with np.errstate(all="ignore"):     # the plain program gives the same value (and warnings)
        value = prim.forward(*values, **attrs) if attrs else prim.forward(*values)
    if type(value) is not np.ndarray and isinstance(value, np.generic):
        value = np.asarray(value)
    return b.constant(value, name)


def _without_dead(cls: type, b: Builder, outputs: list[Ref], single: bool,
                  guards: list) -> Program:
    """The builder's program keeping only the nodes and constants the outputs and guards
    need."""
    need = [False] * len(b.nodes)
    used = [False] * len(b.constants)
    for r in [*outputs, *(g.ref for g in guards)]:
        if r.kind == NODE:
            need[r.index] = True
        elif r.kind == CONST:
            used[r.index] = True
    for i in range(len(b.nodes) - 1, -1, -1):
        if need[i]:
            for r in b.nodes[i].args:
                if r.kind == NODE:
                    need[r.index] = True
                elif r.kind == CONST:
                    used[r.index] = True
    const_map = {}
    constants = []
    for i, c in enumerate(b.constants):
        if used[i]:
            const_map[i] = Ref(CONST, len(constants))
            constants.append(c)
    node_map: dict[int, Ref] = {}
    kept = []

    def moved(r: Ref) -> Ref:
        return r if r.kind == INPUT else const_map[r.index] if r.kind == CONST else node_map[
            r.index]

    for i, n in enumerate(b.nodes):
        if need[i]:
            node_map[i] = Ref(NODE, len(kept))
            kept.append(n._replace(args=tuple(moved(r) for r in n.args)))
    return cls(b.inputs, constants, kept, [moved(r) for r in outputs], single, check=False,
               guards=[g._replace(ref=moved(g.ref)) for g in guards])
