"""Pytrees: nested dicts, lists and tuples of arrays, flattened to leaves and rebuilt.

A pytree is a leaf (an array, a number, a Variable: anything else) or a node: a dict (its
keys visited in sorted order, as JAX does), a list, a tuple (a namedtuple keeps its type),
None (a node with no children), or an instance of a class given to ``register_pytree_node``
(JAX's signature: ``flatten(obj) -> (children, aux_data)``,
``unflatten(aux_data, children) -> obj``). ``tree_flatten`` gives the leaves, left to right, and a
``TreeDef`` that ``tree_unflatten`` rebuilds the same structure from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import ArgumentError

__all__ = ["TreeDef", "tree_flatten", "tree_unflatten", "tree_map", "tree_leaves",
           "tree_structure", "register_pytree_node", "is_node", "node_children", "prefix_leaves"]

_LEAF = "leaf"
# the user's node classes: cls -> (flatten, unflatten)
_NODES: dict[type, tuple[Callable, Callable]] = {}


def register_pytree_node(cls: type, flatten: Callable, unflatten: Callable) -> None:
    """Make instances of ``cls`` pytree nodes: ``flatten(obj) -> (children, aux_data)``,
    ``unflatten(aux_data, children) -> obj`` (``jax.tree_util.register_pytree_node``)."""
    if not isinstance(cls, type):
        raise ArgumentError(f"register_pytree_node: expected a class, got {cls!r}")
    if not callable(flatten) or not callable(unflatten):
        raise ArgumentError(f"register_pytree_node: flatten and unflatten of {cls.__name__} "
                            "must be functions")
    if cls in _NODES or cls in (dict, list, tuple, type(None)):
        raise ArgumentError(f"register_pytree_node: {cls.__name__} is already a pytree node")
    _NODES[cls] = (flatten, unflatten)


def is_node(tree: Any) -> bool:
    """Whether ``tree`` is a pytree node (a container), not a leaf."""
    return tree is None or isinstance(tree, (dict, list, tuple)) or type(tree) in _NODES


class TreeDef:
    """The structure of a pytree without its leaves."""

    __slots__ = ("kind", "meta", "children", "num_leaves")

    def __init__(self, kind: Any, meta: Any, children: tuple[TreeDef, ...]):
        self.kind = kind            # "leaf", dict, list, tuple, a namedtuple class, or None
        self.meta = meta            # the sorted keys of a dict
        self.children = children
        self.num_leaves = 1 if kind == _LEAF else sum(c.num_leaves for c in children)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TreeDef) and self.kind == other.kind
                and self.meta == other.meta and self.children == other.children)

    def __hash__(self) -> int:
        try:
            return hash((self.kind, self.meta, self.children))
        except TypeError:       # a registered node's aux_data need not be hashable
            return hash((self.kind, self.children))

    def __repr__(self) -> str:
        return f"TreeDef({_describe(self)})"


def tree_flatten(tree: Any) -> tuple[list[Any], TreeDef]:
    """The leaves of ``tree`` (left to right, dict keys sorted) and its structure."""
    leaves: list[Any] = []
    return leaves, _flatten(tree, leaves)


def tree_unflatten(treedef: TreeDef, leaves: Any) -> Any:
    """The pytree of structure ``treedef`` holding ``leaves`` in order."""
    leaves = list(leaves)
    if len(leaves) != treedef.num_leaves:
        raise ArgumentError(f"tree_unflatten: the structure {_describe(treedef)} has "
                            f"{treedef.num_leaves} leaves but {len(leaves)} were given")
    it = iter(leaves)
    return _build(treedef, it)


def tree_leaves(tree: Any) -> list[Any]:
    """The leaves of ``tree``, in flattening order."""
    return tree_flatten(tree)[0]


def tree_structure(tree: Any) -> TreeDef:
    """The structure of ``tree``."""
    return tree_flatten(tree)[1]


def tree_map(f: Callable, tree: Any, *rest: Any) -> Any:
    """``f`` applied leaf by leaf to ``tree`` (and the matching leaves of ``rest``)."""
    leaves, treedef = tree_flatten(tree)
    others = []
    for i, other in enumerate(rest):
        other_leaves, other_def = tree_flatten(other)
        if other_def != treedef:
            raise ArgumentError(f"tree_map: tree {i + 1} has structure {_describe(other_def)}, "
                                f"but the first tree has {_describe(treedef)}")
        others.append(other_leaves)
    return tree_unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])

def node_children(tree: Any) -> tuple[Any, Any, list] | None:
    """One level of a node: ``(kind, meta, children)`` (a dict's keys sorted), or None for a
    leaf. ``kind`` is as in ``TreeDef`` (list and tuple for plain ones)."""
    if not is_node(tree) or tree is None:
        return (None, None, []) if tree is None else None
    node = _NODES.get(type(tree))
    if node is not None:
        children, aux = node[0](tree)
        return type(tree), aux, list(children)
    if isinstance(tree, dict):
        keys = sorted(tree)
        return dict, tuple(keys), [tree[k] for k in keys]
    kind = type(tree) if hasattr(tree, "_fields") else (list if isinstance(tree, list)
                                                         else tuple)
    return kind, None, list(tree)


def prefix_leaves(prefix: Any, treedef: TreeDef, covers: Callable[[Any], bool],
                  what: str) -> list:
    """One value per leaf of ``treedef`` from ``prefix``, a tree matching ``treedef`` down to
    where it stops: a ``covers(p)`` value (None, an int axis, ...) stands for a whole subtree,
    and a leaf of ``treedef`` takes whatever ``prefix`` holds there (JAX's tree prefixes:
    vmap's axes, a rule's cotangents). ``what`` opens the error for a mismatch."""
    out: list = []
    stack = [(prefix, treedef, "")]
    while stack:
        p, d, path = stack.pop()
        if covers(p):
            out.extend([p] * d.num_leaves)
            continue
        one = node_children(p)
        if d.kind == _LEAF and one is None:
            out.append(p)
            continue
        same = one is not None and (one[0] == d.kind or {one[0], d.kind} <= {list, tuple}) \
            and one[1] == d.meta and len(one[2]) == len(d.children)
        if not same:
            got = f"{p!r}" if one is None else _describe(tree_structure(p))
            raise ArgumentError(f"{what}{path}: {got} is not a prefix of the structure "
                                f"{_describe(d)}")
        names = d.meta if d.kind is dict else range(len(d.children))
        stack.extend(reversed([(c, dc, f"{path}[{k!r}]")
                               for k, c, dc in zip(names, one[2], d.children)]))
    return out


LEAF = TreeDef(_LEAF, None, ())     # the structure of every single leaf (shared)

# ---------------------------------------------------------------- internals


def _flatten(tree: Any, leaves: list) -> TreeDef:
    if tree is None:
        return TreeDef(None, None, ())
    node = _NODES.get(type(tree))
    if node is not None:
        children, aux = node[0](tree)
        return TreeDef(type(tree), aux, tuple(_flatten(c, leaves) for c in children))
    if isinstance(tree, dict):
        try:
            keys = tuple(sorted(tree))
        except TypeError:
            raise ArgumentError("a pytree dict needs keys that sort (all str, say), got "
                                f"{sorted(map(repr, tree))}") from None
        return TreeDef(dict, keys, tuple(_flatten(tree[k], leaves) for k in keys))
    if isinstance(tree, (list, tuple)):
        kind = type(tree) if hasattr(tree, "_fields") else (list if isinstance(tree, list)
                                                             else tuple)
        return TreeDef(kind, None, tuple(_flatten(c, leaves) for c in tree))
    leaves.append(tree)
    return LEAF


def _build(treedef: TreeDef, it: Any) -> Any:
    kind = treedef.kind
    if kind == _LEAF:
        return next(it)
    if kind is None:
        return None
    children = [_build(c, it) for c in treedef.children]
    if kind in _NODES:
        return _NODES[kind][1](treedef.meta, children)
    if kind is dict:
        return dict(zip(treedef.meta, children))
    if kind is list:
        return children
    if kind is tuple:
        return tuple(children)
    return kind(*children)      # a namedtuple


def _describe(treedef: TreeDef) -> str:
    kind = treedef.kind
    if kind == _LEAF:
        return "*"
    if kind is None:
        return "None"
    inner = [_describe(c) for c in treedef.children]
    if kind in _NODES:
        return f"{kind.__name__}(" + ", ".join(inner) + ")"
    if kind is dict:
        return "{" + ", ".join(f"{k!r}: {s}" for k, s in zip(treedef.meta, inner)) + "}"
    if kind is list:
        return "[" + ", ".join(inner) + "]"
    body = ", ".join(inner) + ("," if len(inner) == 1 else "")
    return ("" if kind is tuple else kind.__name__) + "(" + body + ")"
