"""``resize(prog, shapes)``: a program at other input sizes (the classes sizes.py finds).

Reads each size class's size from the inputs given, raises ``ShapeError`` naming the entry
that pins a class whose size changed, and builds the program at those sizes: new input and
node shapes, attributes (``OUTPUT_SHAPE`` entries' ``shape``, a reshape's target) and counts
re-evaluated; it then runs the new program once on stand-ins and checks every entry's shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ShapeError
from .nodes import INPUT, Constant, Input, constant_entry, node_entry, slot_entry
from .sizes import OUTPUT_SHAPE, Count, analyze, stand_in

if TYPE_CHECKING:
    from .core import Program


def resize(prog: Program, shapes: Sequence[tuple], who: str = "program") -> Program:
    """``prog`` for inputs of ``shapes``: every size that follows an input's re-evaluated."""
    if prog.counts is None:
        first = next(i for i, s in zip(prog.inputs, shapes) if tuple(s) != i.shape)
        got = shapes[prog.inputs.index(first)]
        raise ShapeError(f"{who}: input {first.name} has shape {first.shape}, got {tuple(got)} "
                         "(this program keeps no record of which sizes follow its inputs: "
                         "record it again with op.program, or save it before sg.simplify)")
    sz = analyze(prog)
    new: dict[int, int] = {}
    where: dict[int, tuple] = {}        # class -> (input, axis, shape given) that set it
    for spec, dims, shape in zip(prog.inputs, sz.inputs, shapes):
        shape = tuple(int(n) for n in shape)
        if len(shape) != len(spec.shape):
            raise ShapeError(f"{who}: input {spec.name} has shape {spec.shape}, got {shape}: "
                             "a program keeps the number of dimensions")
        for a, (d, n) in enumerate(zip(dims, shape)):
            c = sz.find(d)
            if new.setdefault(c, n) != n:
                other, b, got = where[c]
                if n == spec.shape[a]:      # the other input's size is the one that changed
                    (other, b, got), (spec, a, shape) = (spec, a, shape), (other, b, got)
                raise ShapeError(f"{who}: input {spec.name} has shape {spec.shape}, got "
                                 f"{shape}: its axis {a} ({shape[a]}) must have the size of "
                                 f"{other.name} axis {b} ({got[b]}), as when recorded")
            where.setdefault(c, (spec, a, shape))
            if n != sz.size[c] and sz.size[c] == 1:
                raise ShapeError(f"{who}: input {spec.name} has shape {spec.shape}, got "
                                 f"{shape}: its axis {a} was recorded with size 1, which "
                                 "broadcasts: record the program with another size there")
    for d, factors, name in sz.derived:     # in entry order: a product of products too
        c = sz.find(d)
        n = math.prod(new.get(sz.find(f), sz.size[f]) for f in factors)
        if new.setdefault(c, n) != n:
            raise ShapeError(f"{who}: {name} = reshape(...) infers size {n} (its -1), where "
                             f"the program needs {new[c]} (as recorded: {sz.size[c]})")
        where.setdefault(c, where.get(sz.find(factors[0]), (None, 0, ())) if factors else
                         (None, 0, ()))
    changed = {c for c, n in new.items() if n != sz.size[c]}
    for d, why in sz.pins:
        c = sz.find(d)
        if c in changed:
            spec, a, _ = where[c]
            what = "a size" if spec is None else f"{spec.name} axis {a}"
            raise ShapeError(f"{who}: {what} has size {new[c]}, but {why}, "
                             f"recorded with size {sz.size[c]}: that entry pins the size")

    def shape_of(dims: tuple) -> tuple:
        return tuple(new.get(sz.find(d), sz.size[d]) for d in dims)

    inputs = [Input(i.name, tuple(int(n) for n in s), i.dtype) for i, s in zip(prog.inputs,
                                                                              shapes)]
    constants = list(prog.constants)
    for k in prog.counts:
        if k.const is None:     # a pin (sizes.py), checked above
            continue
        old = constants[k.const]
        shape = shape_of(sz.nodes[k.node])
        if Count(*k[:4]).value(shape) <= 0:
            raise ShapeError(f"{who}: {prog.entries[k.node].name} has shape {shape}: the count "
                             f"its reduction divides by (less ddof {k.ddof}) would be "
                             f"{Count(*k[:4]).value(shape)}")
        value = k.value(shape)
        constants[k.const] = Constant(type(old.value)(value) if isinstance(old.value, (int, float))
                                      else np.asarray(value, np.result_type(old.value)),
                                      old.name)
    slots = [slot_entry(INPUT, i, spec.name, spec.shape, spec.dtype)
             for i, spec in enumerate(inputs)]
    fixed = [constant_entry(c.value, c.name, i) for i, c in enumerate(constants)]
    moved = {**dict(zip(prog.slots, slots)), **dict(zip(prog.fixed, fixed))}  # old -> new
    nodes = []
    for node, dims in zip(prog.entries, sz.nodes):
        shape = shape_of(dims)
        attrs = node.attrs
        if node.prim.sized in OUTPUT_SHAPE:
            attrs = dict(attrs, shape=shape)
        elif node.prim.sized == "reshape":
            attrs = dict(attrs, shape=tuple(-1 if m == -1 else n
                                            for m, n in zip(attrs["shape"], shape)))
        moved[node] = e = node_entry(node.prim, tuple(moved[x] for x in node.inputs), attrs,
                                   node.label, shape, node.dtype, len(nodes))
        nodes.append(e)
    out = type(prog).of_entries(slots, fixed, nodes, prog.orders, prog.outputs, prog.single,
                                counts=prog.counts, guards=prog.guards)
    _check_shapes(out, who)
    return out


def _check_shapes(prog: Program, who: str) -> None:
    """Run ``prog`` once on stand-ins; every entry must give the shape it declares."""
    env: list = [stand_in(i.shape, i.dtype) for i in prog.inputs]
    env += [c.value for c in prog.constants]
    for node in prog.entries:
        args = [env[prog._entry_slot(x)] for x in node.inputs]
        try:
            with np.errstate(all="ignore"):
                shape = np.shape(node.prim.forward(*args, **(node.attrs or {})))
        except Exception as e:
            raise ShapeError(f"{who}: {node.name} = {node.prim.name}(...) cannot take the new "
                             f"sizes: {type(e).__name__}: {str(e)[:200]}") from None
        if shape != tuple(node.shape):
            raise ShapeError(f"{who}: {node.name} = {node.prim.name}(...) gives shape {shape} "
                             f"at the new sizes, where its recorded sizes give {node.shape}: "
                             "it does not follow the inputs' sizes")
        env.append(stand_in(shape, np.dtype(node.dtype)))
