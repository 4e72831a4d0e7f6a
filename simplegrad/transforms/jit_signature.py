"""The signature of a ``sg.jit`` call: its leaves, its structure, the key its programs are
cached under, which leaves the program takes as inputs, and which arguments are static.

The key holds the structure (plain dicts, lists, tuples and None walked into nested tuples,
hashed and compared in C; any other container as pytree.py's TreeDef), each traced leaf's
shape and dtype (float arrays and Python numbers), and every other leaf by value.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from ..engine.variable import Variable
from ..errors import ArgumentError
from ..pytree import is_node, tree_flatten


def call_signature(args: tuple, kwargs: dict, static_argnums: tuple[int, ...],
                   static_argnames: tuple[str, ...], positional: float) -> tuple:
    """The call's leaves, structure (a TreeDef, or None when plain), signature key and
    traced positions."""
    call = [*args, kwargs]
    leaves: list = []
    try:
        structure = _structure(call, leaves)
    except (TypeError, _OtherContainerError):    # a namedtuple, unsortable keys: pytree.py
        leaves, structure = [], None
    treedef = None
    if structure is None:
        leaves, treedef = tree_flatten(call)
        structure = treedef
    static: set[int] = set()
    if static_argnums or static_argnames:
        treedef = treedef or tree_flatten(call)[1]
        starts = [0]
        for child in treedef.children:
            starts.append(starts[-1] + child.num_leaves)
        named = treedef.children[-1]        # the keyword arguments, keys sorted
        start = starts[-2]
        for name, child in zip(named.meta, named.children):
            if name in static_argnames:
                static.update(range(start, start + child.num_leaves))
            start += child.num_leaves
        for k in static_argnums:
            if 0 <= k < positional and k >= len(args):
                continue        # passed by keyword, or left to its default
            if not -len(args) <= k < len(args):
                raise ArgumentError(f"jit: static_argnums={static_argnums!r} is out of "
                                    f"range for a call with {len(args)} argument(s)")
            k %= len(args)
            static.update(range(starts[k], starts[k + 1]))
    return (leaves, treedef, *_key(structure, leaves, static))


def positional_arguments(f: Callable) -> tuple[float, list[str], set[str]]:
    """How many arguments f takes by position (inf with ``*args`` or no signature), their
    names, and the names it takes by keyword."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):     # a builtin without a signature
        return math.inf, [], set()
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                        p.POSITIONAL_OR_KEYWORD)]
    keyword = {p.name for p in params if p.kind is not p.POSITIONAL_ONLY}
    varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
    return (math.inf if varargs else len(positional)), positional, keyword


def static_both_ways(f: Callable, nums: tuple[int, ...], names: tuple[str, ...],
                      infer: bool) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """``jax.jit``'s rule: when only one of static_argnums and static_argnames is given, the
    positional parameters of f's signature name the same arguments both ways."""
    if not infer or not (nums or names):
        return nums, names
    count, positional, keyword = positional_arguments(f)
    more_nums = tuple(positional.index(n) for n in names if n in positional)
    more_names = tuple(positional[i] for i in nums if -len(positional) <= i < len(positional)
                       and positional[i] in keyword)
    return (tuple(dict.fromkeys(nums + more_nums)), tuple(dict.fromkeys(names + more_names)))


def has_variable(args: tuple) -> bool:
    """Whether any argument is or holds a Variable."""
    for a in args:
        if type(a) is np.ndarray:
            continue
        if isinstance(a, Variable):
            return True
        if is_node(a):
            return any(isinstance(x, Variable) for x in tree_flatten(a)[0])
    return False


class _OtherContainerError(Exception):
    """A container pytree.py walks differently from a plain dict, list or tuple."""


def _structure(tree: Any, leaves: list) -> Hashable:
    """pytree.py's walk of plain dicts, lists, tuples and None (the same leaves in the same
    order), its structure as nested tuples: hashed and compared in C, not per TreeDef node."""
    t = type(tree)
    if t is dict:
        keys = tuple(sorted(tree))
        return (keys, tuple([_structure(tree[k], leaves) for k in keys]))
    if t is list or t is tuple:
        return (t, tuple([_structure(c, leaves) for c in tree]))
    if tree is None:
        return None
    if is_node(tree):       # a namedtuple, a dict subclass, a registered node
        raise _OtherContainerError
    leaves.append(tree)
    return 0


def _key(structure: Hashable, leaves: list, static: set[int]) -> tuple[Hashable, list[int]]:
    """The cache key of a call, and the positions of the leaves the program takes as inputs
    (float arrays and numbers); every other leaf is part of the key by value."""
    key: list = [structure]
    traced_at = []
    for i, a in enumerate(leaves):
        t = type(a)
        number = t is float or t is int
        if i not in static and (number or (isinstance(a, (np.ndarray, np.generic))
                                           and a.dtype.kind == "f")):
            key.append(((), t) if number else (a.shape, a.dtype))
            traced_at.append(i)
            continue
        if isinstance(a, (np.ndarray, np.generic)):
            a = np.asarray(a)
            key.append(("array", a.shape, a.dtype, a.tobytes()))
            continue
        try:
            hash(a)
        except TypeError:
            raise ArgumentError(f"jit: argument leaf {i} is a {type(a).__name__}, neither an "
                                "array nor hashable; pass arrays (traced) or hashable values "
                                "(part of the signature)") from None
        key.append((t, a))
    return tuple(key), traced_at
