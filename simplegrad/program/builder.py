"""``Builder``: what ``extract`` collects a Program's parts with (inputs, constants each once,
nodes), as the entries the Program holds (``nodes.program_entries``): each part is added by its
``Ref``s and kept as an entry reading the earlier ones. It imports no Program, so the Program
can print itself simplified.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..engine.tape import value_of
from ..engine.variable import Entry
from ..primitives.core import Primitive
from ..primitives.rewrites import constant_key
from .nodes import (
    CONST,
    INPUT,
    NODE,
    Constant,
    Input,
    Ref,
    constant_entry,
    fill_inputs,
    slot_entry,
)


class Builder:
    """Collects inputs, constants (each once) and nodes for a Program
    (``Program.of_entries(b.slots, b.fixed, b.nodes, b.orders, outputs, single)``); ``nodes``
    are entries."""

    def __init__(self, inputs: list[Input]):
        self.inputs = inputs
        self.slots = [slot_entry(INPUT, i, x.name, tuple(x.shape), np.dtype(x.dtype))
                      for i, x in enumerate(inputs)]
        self.constants: list[Constant] = []
        self.fixed: list[Entry] = []
        self.nodes: list[Entry] = []
        self.orders: list[int] = []
        self._parts = {INPUT: self.slots, CONST: self.fixed, NODE: self.nodes}
        self._by_key: dict = {}

    def constant(self, value: Any, name: str | None = None, key: Any = None) -> Ref:
        """A constant's ref, shared with an equal constant added before."""
        key = ("value", constant_key(value)) if key is None else key
        r = self._by_key.get(key)
        if r is None:
            if isinstance(value, np.ndarray) and value.flags.writeable:
                value = value.copy()
                value.setflags(write=False)
            r = self._by_key[key] = Ref(CONST, len(self.constants))
            self.constants.append(Constant(value, name))
            self.fixed.append(constant_entry(value, name, r.index))
        return r

    def capture(self, v: Entry) -> Ref:
        """An entry's recorded value (replayed if it was freed) as a named constant (an
        unrecorded one prints inline)."""
        return self.constant(value_of(v), None if v.label is None else v.name, ("var", id(v)))

    def node(self, prim: Primitive, args: Sequence[Ref], attrs: dict | None, name: str,
             shape: tuple, dtype: Any, order: int = 0) -> Ref:
        """Add a node: ``prim`` of ``args`` (Refs to parts added before), with its attributes,
        name, shape, dtype and derivative order; its ref."""
        e = Entry()
        e.prim = prim
        fill_inputs(e, args, self._parts)
        e.attrs = attrs
        e.position = len(self.nodes)
        e.label = name
        e.shape = shape
        e.dtype = dtype
        e.requires_grad = False
        e.raw = None
        self.nodes.append(e)
        self.orders.append(order)
        return Ref(NODE, e.position)
