"""Checking a loaded program's declared shapes and dtypes: each entry's attributes against
its schema, its output's element count (the schema's size rule) against the limit, then its
forward once on stand-ins of its declared inputs.

Stand-ins are read-only zero-stride views (0.5, 1 or True), or ``2 I + 0.1`` for square
matrices so that every matrix function can take them; an entry's output is compared with what
it declares and dropped, so at most one entry's values are alive at a time. Constants that
are scalars (Python's or numpy's) are used as they are: numpy's type promotion depends on
them. numpy's error state is set in a context (per thread); warning filters never.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import FormatError
from .nodes import CONST, INPUT, NODE, Node, Ref
from .serialize import attr_problem


class StandIns:
    """Runs each entry's forward on stand-ins of its declared inputs and checks what it
    declares; at most one entry's values are alive at a time, and entries alike (primitive,
    input shapes and dtypes, attributes) run once."""

    def __init__(self, fail: Callable[[str, str], FormatError], max_bytes: int, inputs: list,
                 constants: list):
        self.fail = fail
        self.max_bytes = max_bytes
        self.specs = {(INPUT, i): (s.shape, s.dtype) for i, s in enumerate(inputs)}
        self.values = {}
        self.seen: dict = {}        # (primitive, inputs, attrs) -> (shape, dtype)
        for i, c in enumerate(constants):
            if isinstance(c.value, np.ndarray):
                self.specs[(CONST, i)] = (c.value.shape, c.value.dtype)
            else:
                self.values[(CONST, i)] = c.value       # a Python or numpy scalar, as is

    def check(self, nodes: list) -> None:
        limit = self.max_bytes
        for kind, items in ((INPUT, self.specs.items()), (NODE, enumerate(nodes))):
            for key, spec in items:
                shape, dtype = spec if kind == INPUT else (spec.shape, spec.dtype)
                size = math.prod(shape) * dtype.itemsize
                if size > limit:
                    where = f"input {key[1]}" if kind == INPUT else f"node {key} ({spec.name})"
                    raise self.fail(where, f"shape {shape} needs {size} bytes, more than the "
                                           f"limit of {limit}")
        for i, node in enumerate(nodes):
            self.entry(i, node)
            self.specs[(NODE, i)] = (node.shape, node.dtype)

    def entry(self, i: int, node: Node) -> None:
        where = f"node {i} ({node.name})"
        shapes = [self.shape_of(r) for r in node.args]
        why = attr_problem(node.prim, node.attrs, shapes)
        if why is not None:
            raise self.fail(where, f"{node.prim.name}: {why}")
        text = ", ".join(str(s) for s in shapes)
        try:
            rule = node.prim.schema.size
            count = None if rule is None else rule(shapes, node.attrs or {})
        except Exception as e:      # the size rule found inputs the primitive cannot take
            raise self.fail(where, f"{node.prim.name} cannot take inputs of shapes {text}: "
                                   f"{e}") from None
        if count is not None and count * node.dtype.itemsize > self.max_bytes:
            raise self.fail(where, f"{node.prim.name} of inputs of shapes {text} gives {count} "
                                   f"elements, more than the limit of {self.max_bytes} bytes")
        key = self.key(node)
        if key not in self.seen:
            self.seen[key] = self.run(node, where, text)
        shape, dtype = self.seen[key]
        if shape != node.shape or dtype != node.dtype:
            raise self.fail(where, f"declares shape {node.shape} and dtype {node.dtype}, but "
                                   f"{node.prim.name} of these inputs gives shape {shape} and "
                                   f"dtype {dtype}")

    def run(self, node: Node, where: str, text: str) -> tuple:
        """The shape and dtype of the entry's forward on stand-ins (the values dropped)."""
        made: dict = {}
        args = [self.value(r, made) for r in node.args]
        try:
            with np.errstate(all="ignore"):
                out = node.prim.forward(*args, **(node.attrs or {}))
            return np.shape(out), np.result_type(out)
        except Exception as e:
            raise self.fail(where, f"{node.prim.name} cannot run on inputs of shapes {text} "
                                   f"with attrs {str(node.attrs)[:120]}: {type(e).__name__}: "
                                   f"{str(e)[:200]}") from None

    def key(self, node: Node) -> Any:
        """What the entry's result depends on (entries alike run once), or a fresh object
        when an attribute is an array."""
        attrs = repr(node.attrs)
        if "array(" in attrs:
            return object()
        args = tuple(self.specs.get((r.kind, r.index)) or
                     (type(self.values[(r.kind, r.index)]), repr(self.values[(r.kind, r.index)]))
                     for r in node.args)
        return node.prim.name, args, attrs

    def shape_of(self, r: Ref) -> tuple:
        key = (r.kind, r.index)
        return self.specs[key][0] if key in self.specs else np.shape(self.values[key])

    def value(self, r: Ref, made: dict) -> Any:
        key = (r.kind, r.index)
        if key not in self.specs:
            return self.values[key]
        spec = self.specs[key]
        if spec not in made:
            made[spec] = stand_in(*spec)
        return made[spec]


def stand_in(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """A read-only value to check shapes with: 2 I + 0.1 (positive definite) for square
    matrices, 0.5 (1, True) elsewhere, every copy a zero-stride view."""
    if len(shape) >= 2 and shape[-1] == shape[-2] and dtype.kind != "b":
        n = shape[-1]
        m = np.full((n, n), 0.1, dtype)
        m[np.diag_indices(n)] += 2      # one array of n x n, however many matrices
        return np.broadcast_to(m, shape)
    return np.broadcast_to(np.array(0.5 if dtype.kind == "f" else 1, dtype), shape)
