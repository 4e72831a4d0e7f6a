"""Pytrees through a custom function's one entry: its arguments flattened to the entry's
inputs, arguments that are never differentiated (``nondiff_argnums``) kept as attributes, and
a pytree output raveled into the entry's one output and sliced back.

A ``Packing`` is made per call (``pack``) and rides on the entry as its ``_pack`` attribute
(compared by value, so equal calls share a key); the forward fills in the output's structure,
which the rules read to rebuild ``g`` and ``out`` for the user's rule, and to flatten the
cotangents it returns (``None`` for a whole argument or for one of its leaves: no gradient).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine.variable import Variable
from ..errors import ArgumentError
from ..primitives.core import value_of
from ..pytree import LEAF, TreeDef, prefix_leaves, tree_flatten, tree_unflatten
from .custom_rules import JVPRule
from .ravel import ravel_pytree


class Packing:
    """How one call's arguments and output map to its entry's flat inputs and output."""

    __slots__ = ("label", "n", "nondiff", "trees", "out", "shapes", "dtypes")

    def __init__(self, label: str, n: int, nondiff: tuple, trees: tuple):
        self.label = label
        self.n = n                  # number of positional arguments
        self.nondiff = nondiff      # ((position, value), ...): never differentiated
        self.trees = trees          # the structure of each other argument
        self.out: TreeDef | None = None     # the output's structure, once the forward ran
        self.shapes: list = []
        self.dtypes: list = []

    def _key(self) -> tuple:
        return (self.label, self.n, tuple(p for p, _ in self.nondiff), self.trees)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Packing) and self._key() == other._key() and all(
            a is b for (_, a), (_, b) in zip(self.nondiff, other.nondiff))

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Packing({self.trees})"

    # ------------------------------------------------------------ arguments

    def arguments(self, leaves: list) -> list:
        """The differentiated arguments (structured) from the entry's flat inputs."""
        out, k = [], 0
        for treedef in self.trees:
            m = treedef.num_leaves
            out.append(leaves[k] if treedef is LEAF else tree_unflatten(treedef, leaves[k:k + m]))
            k += m
        return out

    def held(self) -> list:
        """The nondiff arguments, in order: the rules get them first."""
        return [v for _, v in self.nondiff]

    def call_arguments(self, leaves: list) -> list:
        """Every positional argument of the function, nondiff ones in their places."""
        rest = iter(self.arguments(leaves))
        fixed = dict(self.nondiff)
        return [fixed[i] if i in fixed else next(rest) for i in range(self.n)]

    def cotangents(self, cts: Any) -> list:
        """The rule's cotangents (one per differentiated argument, a pytree or None) as one
        per flat input."""
        if len(self.trees) == 1 and not isinstance(cts, (tuple, list)):
            cts = (cts,)
        if not isinstance(cts, (tuple, list)) or len(cts) != len(self.trees):
            got = len(cts) if isinstance(cts, (tuple, list)) else type(cts).__name__
            raise ArgumentError(f"{self.label}: the backward rule must return "
                                f"{len(self.trees)} cotangent(s) (one per differentiated "
                                f"argument, None for none), got {got}")
        flat: list = []
        for i, (c, treedef) in enumerate(zip(cts, self.trees)):
            flat += prefix_leaves(c, treedef, lambda c: c is None, f"{self.label}: the "
                                  f"backward rule's cotangent for argument {i}")
        return flat

    # ------------------------------------------------------------ the output

    def output_value(self, y: Any) -> Any:
        """The forward's result as the entry's one array (a pytree raveled), noting its
        structure."""
        leaves, treedef = tree_flatten(y)
        self.out = treedef
        values = [value_of(a) for a in leaves]
        values = [v if hasattr(v, "shape") and hasattr(v, "dtype") else np.asarray(v)
                  for v in values]
        self.shapes = [tuple(v.shape) for v in values]
        self.dtypes = [np.dtype(v.dtype) for v in values]
        if treedef is LEAF:
            return values[0]
        if not values:
            raise ArgumentError(f"{self.label}: the function returned {y!r}, which holds no "
                                "array")
        dtype = np.result_type(*self.dtypes)
        return np.concatenate([np.ravel(v).astype(dtype, copy=False) for v in values])

    def structured(self, flat: Any) -> Any:
        """The entry's output (or a cotangent or tangent of it) in the output's structure."""
        if self.out is None or self.out is LEAF:
            return flat
        template = tree_unflatten(self.out, [np.zeros(s, d)
                                             for s, d in zip(self.shapes, self.dtypes)])
        return ravel_pytree(template)[1](flat)

    def flat_output(self, tree: Any) -> Any:
        """A pytree of the output's structure (a tangent) as one vector, as the entry holds
        it: recorded when it holds Variables."""
        if self.out is None or self.out is LEAF:
            return tree
        leaves, treedef = tree_flatten(tree)
        if treedef != self.out:
            raise ArgumentError(f"{self.label}: the jvp rule gave a tangent of structure "
                                f"{treedef} for an output of structure {self.out}")
        if not any(isinstance(a, Variable) for a in leaves):
            dtype = np.result_type(*self.dtypes)
            return np.concatenate([np.ravel(np.asarray(value_of(a))).astype(dtype)
                                   for a in leaves])
        return ravel_pytree(tree)[0]


def pack(label: str, args: tuple, nondiff_argnums: tuple) -> tuple[list, Packing]:
    """The entry's flat inputs for a call, and its Packing."""
    nondiff = tuple((i, args[i]) for i in nondiff_argnums if i < len(args))
    if len(nondiff) != len(nondiff_argnums):
        raise ArgumentError(f"{label}: nondiff_argnums={nondiff_argnums} names an argument "
                            f"the call with {len(args)} argument(s) does not have")
    for i, a in nondiff:
        if any(isinstance(b, Variable) for b in tree_flatten(a)[0]):
            raise ArgumentError(f"{label}: argument {i} is in nondiff_argnums but holds a "
                                "Variable; pass it as a differentiated argument (its rule may "
                                "return None for its cotangent)")
    held = {i for i, _ in nondiff}
    leaves: list = []
    trees = []
    for i, a in enumerate(args):
        if i in held:
            continue
        ls, treedef = tree_flatten(a)
        leaves += ls
        trees.append(treedef)
    return leaves, Packing(label, len(args), nondiff, tuple(trees))


def nondiff_positions(label: str, nums: Any) -> tuple[int, ...]:
    """``nondiff_argnums`` checked: a tuple of distinct argument positions (ints >= 0)."""
    if isinstance(nums, (int, np.integer)) and not isinstance(nums, bool):
        nums = (nums,)
    if not isinstance(nums, (tuple, list)) or any(
            isinstance(i, bool) or not isinstance(i, (int, np.integer)) or i < 0
            for i in nums) or len(set(nums)) != len(nums):
        raise ArgumentError(f"{label}: nondiff_argnums must be a tuple of distinct argument "
                            f"positions (ints >= 0), not {nums!r}")
    return tuple(sorted(int(i) for i in nums))


def user_tangent(label: str, rule: Callable, o: Any, ts: list, out: Any, inputs: tuple,
                 attrs: dict) -> Any:
    """The tangent of a custom entry's output by the user's jvp rule
    ``rule(*nondiff, primals, tangents) -> (primal_out, tangent_out)``, which sees the call's
    structures (one primal and one tangent per differentiated argument)."""
    packing: Packing = attrs["_pack"]

    def flat_rule(primals: tuple, tangents: tuple, **kw: Any) -> Any:
        got = rule(*packing.held(), tuple(packing.arguments(list(primals))),
                   tuple(packing.arguments(list(tangents))), **kw)
        if isinstance(got, (tuple, list)) and len(got) == 2:
            return got[0], packing.flat_output(got[1])
        return got
    kw = {k: v for k, v in attrs.items() if not k.startswith("_")}
    return JVPRule(label, flat_rule).tangent(o, ts, out, inputs, attrs["_vars"], kw)
