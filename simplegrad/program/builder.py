"""``Builder``: what ``extract`` and ``sg.simplify`` collect a Program's parts with (inputs,
constants each once, nodes); it imports no Program, so the Program can print itself simplified.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engine.tape import value_of
from ..engine.variable import Entry
from ..primitives.rewrites import constant_key
from .nodes import CONST, NODE, Constant, Input, Node, Ref


class Builder:
    """Collects inputs, constants (each once) and nodes for a Program
    (``Program(b.inputs, b.constants, b.nodes, outputs, single)``)."""

    def __init__(self, inputs: list[Input]):
        self.inputs = inputs
        self.constants: list[Constant] = []
        self.nodes: list[Node] = []
        self._by_key: dict = {}

    def constant(self, value: Any, name: str | None = None, key: Any = None) -> Ref:
        """A constant's ref, shared with an equal constant added before."""
        key = ("value", constant_key(value)) if key is None else key
        r = self._by_key.get(key)
        if r is None:
            if isinstance(value, np.ndarray) and value.flags.writeable:
                value = value.copy()
                value.flags.writeable = False
            r = self._by_key[key] = Ref(CONST, len(self.constants))
            self.constants.append(Constant(value, name))
        return r

    def capture(self, v: Entry) -> Ref:
        """An entry's recorded value (replayed if it was freed) as a named constant (an
        unrecorded one prints inline)."""
        return self.constant(value_of(v), None if v.label is None else v.name, ("var", id(v)))

    def node(self, node: Node) -> Ref:
        """Add a node; its ref."""
        self.nodes.append(node)
        return Ref(NODE, len(self.nodes) - 1)

