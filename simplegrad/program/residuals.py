"""A loop body's vjp split where it reads its cotangents: what a reverse sweep on values
keeps from the forward instead of computing it again each step (JAX calls them residuals).

A body's vjp (``Body.vjp``: the body's inputs, then one cotangent per float output) replays
the body before pulling back through it: its entries that read no cotangent are the body's
forward again. Split (``split``), they are three programs:

- the forward: the body's own program with more outputs, the values of its entries that the
  pullback reads (its entries as they are: the forward's values do not change);
- the fixed part: the entries of the vjp that read only the consts (``W.T``), run once;
- the pullback: the other entries, reading the body's inputs, the fixed values, the
  residuals and the cotangents, with the vjp's outputs.

A residual must be an entry of the body's own program (found by structure: primitive,
inputs, attributes, shape and dtype); where one is not (the vjp's trace rewrote it), or the
residuals would be more than ``MAX_RATIO`` times the carries, there is no split.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from ..primitives.loops import Aval, ones
from ..primitives.rewrites import attrs_key, constant_key
from .core import Program
from .nodes import CONST, INPUT, NODE, Input, Node, Ref

__all__ = ["Split", "split"]

MAX_RATIO = 4       # residuals per step at most this many times the carries' entries


class Split:
    """A body's vjp split: ``forward`` (the body's outputs, then the residuals), ``fixed``
    (the consts' values the pullback reads, from the consts; None: it reads none) and
    ``pullback`` (the body's inputs, the fixed values, the residuals, the cotangents -> the
    vjp's outputs; ``reads``: which of them it reads)."""

    def __init__(self, forward: Any, fixed: Any, pullback: Any, residuals: int,
                 reads: tuple[bool, ...]):
        self.forward = forward
        self.fixed = fixed
        self.pullback = pullback
        self.residuals = residuals
        self.reads = reads      # per input of the pullback, whether it reads it


def _size(aval: Aval) -> int:
    return int(np.prod(aval[0], dtype=np.int64))


def _arg_key(r: Ref, prog: Program, match: dict) -> Hashable | None:
    if r.kind == INPUT:
        return ("input", r.index)
    if r.kind == CONST:
        return ("const", constant_key(prog.constants[r.index].value))
    k = match.get(r.index)
    return None if k is None else ("node", k)


def _node_key(node: Node, prog: Program, match: dict) -> Hashable | None:
    args = []
    for r in node.args:
        a = _arg_key(r, prog, match)
        if a is None:
            return None
        args.append(a)
    ops: Any = tuple(args)
    if node.prim.commutative and len(args) == 2:
        ops = frozenset(args)
    try:
        key = (node.prim, ops, attrs_key(node.attrs), tuple(node.shape),
               np.dtype(node.dtype).str)
        hash(key)
    except TypeError:
        return None
    return key


def split(body: Any, back: Any, nc: int, nk: int, make: Any) -> Split | None:
    """``back`` (``body.vjp(...)``) split into the forward, the fixed part and the pullback
    (``make(program, ins, outs, example, name)``: a Body of a program), or None."""
    prog, bprog = body.program, back.program
    n = len(body.ins)
    if bprog.guards or prog.guards or bprog.counts or prog.counts:
        return None
    nodes = bprog.nodes
    fixed: set[int] = set()     # entries of the consts and constants alone
    moving: set[int] = set()    # entries reading a cotangent
    for k, node in enumerate(nodes):
        if any(r.kind == INPUT and r.index >= n or r.kind == NODE and r.index in moving
               for r in node.args):
            moving.add(k)
        elif all(r.kind == CONST or r.kind == INPUT and r.index < nc or
                 r.kind == NODE and r.index in fixed for r in node.args):
            fixed.add(k)
    # each entry of the replayed forward as an entry of the body's program, by structure
    own: dict[Hashable, int] = {}
    match: dict[int, int] = {}
    for k, node in enumerate(prog.nodes):
        key = _node_key(node, prog, match)
        if key is not None:
            match[k] = own.setdefault(key, k)
    found: dict[int, int] = {}
    for k, node in enumerate(nodes):
        if k in moving or k in fixed:
            continue
        key = _node_key(node, bprog, found)
        if key is not None and key in own:
            found[k] = own[key]
    # the pullback: the entries reading a cotangent, and those of the forward's values that
    # the body does not compute (``1 - t * t`` of its ``t = tanh(...)``)
    pull = sorted(k for k in range(len(nodes)) if k in moving or k not in fixed and
                  k not in found)
    read = {r.index for k in pull for r in nodes[k].args if r.kind == NODE} | \
        {r.index for r in bprog.outputs if r.kind == NODE}
    residual = sorted(k for k in read if k in found and k not in fixed)
    if not residual:
        return None
    hoisted = sorted(k for k in read if k in fixed)
    res_avals = [(tuple(nodes[k].shape), np.dtype(nodes[k].dtype)) for k in residual]
    carries = sum(_size(a) for a in body.ins[nc:nc + nk])
    if sum(_size(a) for a in res_avals) > MAX_RATIO * max(carries, 1):
        return None
    # the forward: the body's entries, the residuals' among its outputs
    extra = [Ref(NODE, found[k]) for k in residual]
    fprog = Program(prog.inputs, prog.constants, prog.nodes, [*prog.outputs, *extra],
                    alike=prog.alike)
    forward = make(fprog, body.ins, [*body.outs, *res_avals], body.example,
                   f"{body.name}.residuals")
    # the fixed part: of the consts
    at = {k: i for i, k in enumerate(sorted(fixed))}
    fixed_nodes = [Node(nodes[k].prim, tuple(Ref(NODE, at[r.index]) if r.kind == NODE else r
                                             for r in nodes[k].args),
                        nodes[k].attrs, nodes[k].name, nodes[k].shape, nodes[k].dtype)
                   for k in sorted(fixed)]
    hold_avals = [(tuple(nodes[k].shape), np.dtype(nodes[k].dtype)) for k in hoisted]
    fixed_body = None
    if hoisted:
        xprog = Program(bprog.inputs[:nc], bprog.constants, fixed_nodes,
                        [Ref(NODE, at[k]) for k in hoisted])
        fixed_body = make(xprog, body.ins[:nc], hold_avals, body.example[:nc],
                          f"{body.name}.fixed")
    # the pullback: the body's inputs, the fixed values, the residuals, the cotangents
    nh, nr = len(hoisted), len(residual)
    slot = {**{k: n + i for i, k in enumerate(hoisted)},
            **{k: n + nh + i for i, k in enumerate(residual)}}
    order = {k: i for i, k in enumerate(pull)}

    def moved(r: Ref) -> Ref:
        if r.kind == INPUT:
            return r if r.index < n else Ref(INPUT, r.index + nh + nr)
        if r.kind == NODE:
            return Ref(NODE, order[r.index]) if r.index in order else Ref(INPUT, slot[r.index])
        return r
    pull_nodes = [Node(nodes[k].prim, tuple(moved(r) for r in nodes[k].args), nodes[k].attrs,
                       nodes[k].name, nodes[k].shape, nodes[k].dtype) for k in pull]
    inputs = [*bprog.inputs[:n],
              *(Input(f"f{i}", a[0], a[1]) for i, a in enumerate(hold_avals)),
              *(Input(f"r{i}", a[0], a[1]) for i, a in enumerate(res_avals)),
              *bprog.inputs[n:]]
    pprog = Program(inputs, bprog.constants, pull_nodes, [moved(r) for r in bprog.outputs])
    ins: Sequence[Aval] = [*back.ins[:n], *hold_avals, *res_avals, *back.ins[n:]]
    example = [*back.example[:n], *(ones(*a) for a in hold_avals),
               *(ones(*a) for a in res_avals), *back.example[n:]]
    pullback = make(pprog, ins, back.outs, example, f"{body.name}.pullback")
    used = {r.index for node in pull_nodes for r in node.args if r.kind == INPUT} | \
        {r.index for r in pprog.outputs if r.kind == INPUT}
    return Split(forward, fixed_body, pullback, nr, tuple(i in used for i in range(len(ins))))
