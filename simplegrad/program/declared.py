"""Checking a loaded program's declared shapes and dtypes, before any array is made.

Every input's and entry's declared size is checked against ``max_bytes``; then, entry by entry,
its attributes against its primitive's schema, and its declared shape and dtype against the
schema's shape rule (primitives/schema.py: the output's shape and dtype from the inputs'
declared shapes and dtypes and the attributes alone, as JAX's abstract evaluation). No forward
runs, except the narrow stand-in run of standins.py for the one thing a rule cannot see: an
integer constant in integer arithmetic (``x_int8 + 300`` overflows by its value).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import FormatError
from ..primitives.schema import ShapeRuleError
from .nodes import CONST, INPUT, NODE, Node
from .serialize import attr_problem, listed, value_spec
from .standins import needs_values, run_on_stand_ins


class Declared:
    """Checks each entry's declared shape and dtype by its primitive's shape rule."""

    def __init__(self, fail: Callable[[str, str], FormatError], max_bytes: int, inputs: list,
                 constants: list):
        self.fail = fail
        self.max_bytes = max_bytes
        self.specs: dict = {(INPUT, i): (s.shape, s.dtype) for i, s in enumerate(inputs)}
        self.values: dict = {}      # the constants, for the narrow run
        for i, c in enumerate(constants):
            self.specs[(CONST, i)] = value_spec(c.value)
            self.values[(CONST, i)] = c.value

    def check(self, nodes: list) -> None:
        """Every declared size within the limit, then every entry by its rule."""
        for where, (shape, dtype) in [(f"input {k}", s) for (kind, k), s in self.specs.items()
                                      if kind == INPUT] + \
                [(f"node {i} ({n.name})", (n.shape, n.dtype)) for i, n in enumerate(nodes)]:
            size = math.prod(shape) * dtype.itemsize
            if size > self.max_bytes:
                raise self.fail(where, f"shape {shape} needs {size} bytes, more than the "
                                       f"limit of {self.max_bytes}")
        for i, node in enumerate(nodes):
            self.entry(i, node)
            self.specs[(NODE, i)] = (node.shape, node.dtype)

    def entry(self, i: int, node: Node) -> None:
        """Entry ``i``'s attributes, then its declared shape and dtype by its rule."""
        where = f"node {i} ({node.name})"
        specs = [self.specs[(r.kind, r.index)] for r in node.args]
        shapes, dtypes = [s for s, _ in specs], [d for _, d in specs]
        why = attr_problem(node.prim, node.attrs, shapes)
        if why is not None:
            raise self.fail(where, f"{node.prim.name}: {why}")
        text = lambda: f"shapes {listed(shapes)} and dtypes {listed(dtypes)}"  # noqa: E731
        try:
            shape, dtype = node.prim.schema.abstract(shapes, dtypes, node.attrs)
        except ShapeRuleError as e:
            raise self.fail(where, f"{node.prim.name} cannot run on inputs of {text()}: {e}"
                            ) from None
        count = math.prod(shape)
        if count * dtype.itemsize > self.max_bytes:
            raise self.fail(where, f"{node.prim.name} of inputs of shapes {listed(shapes)} "
                                   f"gives {count} elements, more than the limit of "
                                   f"{self.max_bytes} bytes")
        if shape != node.shape or dtype != node.dtype:
            raise self.fail(where, f"declares shape {node.shape} and dtype {node.dtype}, but "
                                   f"{node.prim.name} of these inputs gives shape {shape} and "
                                   f"dtype {dtype}")
        if needs_values(dtypes, any(self.integer(r) for r in node.args)):
            why = run_on_stand_ins(node, [self.value(r) for r in node.args])
            if why is not None:
                raise self.fail(where, f"{node.prim.name} cannot run on inputs of {text()}: "
                                       f"{why}")

    def integer(self, r: Any) -> bool:
        """Whether the argument is an integer constant (a Python int, a numpy integer scalar
        or an integer array)."""
        v = self.values.get((r.kind, r.index))
        if type(v) is int:
            return True
        return isinstance(v, (np.ndarray, np.generic)) and v.dtype.kind in "iu"

    def value(self, r: Any) -> Any:
        """A constant as it is; a stand-in for anything else."""
        key = (r.kind, r.index)
        return self.values[key] if key in self.values else self.specs[key]
