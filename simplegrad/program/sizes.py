"""Programs at other input sizes: which sizes follow an input's, and the program resized.

A program recorded with a batch of 32 holds that 32 in places: node shapes, the ``shape`` of
an ``expand`` (a seed spread over the batch) or a ``reshape``, and the count a mean divides
its cotangent by (``Count``, found by ``extract`` in the mean's pullback). ``analyze`` finds
which of them follow which input axis: every axis of an input, a constant and a node is a
dimension, and dimensions are joined into classes that must have one size. Shape primitives
join by their attributes (``expand`` aligns its input from the right, ``reshape`` matches a
prefix and a suffix); every other entry is probed, its forward run on stand-ins of its inputs
with one class changed from n to n + 1: the output axes that become n + 1 join that class
(and a class that cannot change alone tries with another of its size, as a matmul's
contracted axes must). A class a recorded entry fixes (the axis of a constant, the part of a
reshape that mixes axes, an entry that fails the probe) is pinned by that entry.

``resize(prog, shapes)`` reads each class's size from the inputs given, raises ``ShapeError``
naming the entry that pins a class whose size changed, and builds the program at those sizes:
new input and node shapes, attributes and counts re-evaluated; it then runs the new program
once on stand-ins and checks every entry's shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..errors import ShapeError
from .nodes import CONST, INPUT, NODE, Constant, Input, Node, Ref

if TYPE_CHECKING:
    from .core import Program


class Count(NamedTuple):
    """Constant ``const`` is the number of entries of node ``node`` along ``axes`` (all when
    None) less ``ddof``, or ``times`` divided by that number."""

    const: int
    node: int
    axes: tuple | None
    ddof: int | float = 0
    times: float | None = None

    def value(self, shape: tuple) -> int | float:
        """The count (or ``times`` over it) for node ``node`` of ``shape``."""
        axes = range(len(shape)) if self.axes is None else self.axes
        n = math.prod(shape[a] for a in axes) - self.ddof
        return n if self.times is None else self.times / n


# ---------------------------------------------------------------- analysis


class Sizes:
    """The size classes of a program's dimensions and what pins them."""

    def __init__(self, prog: Program):
        self.parent: list[int] = []
        self.size: list[int] = []
        self.pins: list[tuple[int, str]] = []      # (class, why)
        # (dimension, the dimensions whose product it is, the entry): a reshape's -1
        self.derived: list[tuple[int, tuple, str]] = []
        self.inputs = [self._new_dims(i.shape) for i in prog.inputs]
        self.consts: list[tuple] = []
        for j, c in enumerate(prog.constants):
            dims = self._new_dims(np.shape(c.value))
            self.consts.append(dims)
            name = c.name or f"constant {j}"
            for d, n in zip(dims, np.shape(c.value)):
                if n != 1:
                    self.pins.append((d, f"the constant {name} has shape {np.shape(c.value)}"))
        self.nodes = [self._new_dims(node.shape) for node in prog.nodes]
        self.prog = prog
        for a, b in prog.alike:
            for d, e in zip(self.dims(a), self.dims(b)):
                self.union(d, e)
        reshapes = []       # after every other join: a flattened batch can be unflattened
        for node, out in zip(prog.nodes, self.nodes):
            if node.prim.name == "reshape":
                reshapes.append((node, self.dims(node.args[0]), out))
            else:
                self._node(node, out)
        for node, x, out in reshapes:
            self._reshape(node, x, out)

    def _new_dims(self, shape: Sequence[int]) -> tuple:
        start = len(self.parent)
        self.parent.extend(range(start, start + len(shape)))
        self.size.extend(int(n) for n in shape)
        return tuple(range(start, start + len(shape)))

    def find(self, d: int) -> int:
        """The class of dimension ``d``."""
        parent = self.parent
        while parent[d] != d:
            parent[d] = parent[parent[d]]
            d = parent[d]
        return d

    def union(self, a: int, b: int) -> None:
        """Join two dimensions of one size into one class."""
        a, b = self.find(a), self.find(b)
        if a != b and self.size[a] == self.size[b]:
            self.parent[max(a, b)] = min(a, b)

    def dims(self, r: Ref) -> tuple:
        """The dimensions of an argument."""
        return (self.inputs if r.kind == INPUT else self.consts if r.kind == CONST
                else self.nodes)[r.index]

    # ------------------------------------------------------------ one entry

    def _node(self, node: Node, out: tuple) -> None:
        args = [self.dims(r) for r in node.args]
        name = node.prim.name
        if name == "expand":
            x = args[0]
            for i, d in enumerate(x):
                o = out[len(out) - len(x) + i]
                if self.size[d] == self.size[o]:
                    self.union(d, o)
        else:
            self._probe_all(node, args, out)

    def _reshape(self, node: Node, x: tuple, out: tuple) -> None:
        size = self.size
        x, out = self._factors(x), self._factors(out)
        p = 0
        while p < min(len(x), len(out)) and size[x[p]] == size[out[p]]:
            self.union(x[p], out[p])
            p += 1
        q = 0
        while q < min(len(x), len(out)) - p and size[x[-1 - q]] == size[out[-1 - q]]:
            self.union(x[-1 - q], out[-1 - q])
            q += 1
        target = node.attrs["shape"]
        middle = x[p:len(x) - q]
        if len(out) == len(target) and tuple(target[p:len(out) - q]) == (-1,):
            # numpy infers it: the product of the input's middle
            self.derived.append((out[p], middle, node.name))
            return
        for d in middle:
            if size[d] != 1:
                self.pins.append((d, f"{node.name} = {node.prim.name}(...) reshapes to the "
                                     f"literal shape {list(node.attrs['shape'])}"))

    def _factors(self, dims: tuple) -> tuple:
        """The dimensions with each that is a reshape's -1 as the dimensions it is the
        product of (so that a flattened batch can be unflattened)."""
        products = {self.find(d): f for d, f, _ in self.derived}
        flat: list[int] = []
        stack = list(reversed(dims))
        while stack:
            d = stack.pop()
            if self.find(d) in products:
                stack.extend(reversed(products.pop(self.find(d))))
            else:
                flat.append(d)
        return tuple(flat)

    def _probe_all(self, node: Node, args: list, out: tuple) -> None:
        classes = list(dict.fromkeys(self.find(d) for dims in args for d in dims
                                     if self.size[d] > 1))
        for c in classes:
            c = self.find(c)
            follow = self._probe(node, args, {c})
            if follow is None:
                for e in classes:
                    e = self.find(e)
                    if e != c and self.size[e] == self.size[c]:
                        follow = self._probe(node, args, {c, e})
                        if follow is not None:
                            self.union(c, e)
                            break
            if follow is None:
                self.pins.append((c, f"{node.name} = {node.prim.name}(...) does not take "
                                     "another size along this axis"))
                continue
            if not follow and ("index" in (node.attrs or {}) or "indices" in (node.attrs or {})):
                # a recorded index along this axis (x[-1], x[:16], rows of an array) means
                # another thing at another size
                self.pins.append((c, f"{node.name} = {node.prim.name}(...) indexes this axis "
                                     "with a recorded index"))
                continue
            for o in follow:
                self.union(out[o], c)

    def _probe(self, node: Node, args: list, group: set) -> list | None:
        """The output axes that follow ``group`` when its size n becomes n + 1 (None when the
        entry fails or changes otherwise)."""
        n = self.size[next(iter(group))]
        values = []
        for r, dims in zip(node.args, args):
            shape = tuple(n + 1 if self.find(d) in group else self.size[d] for d in dims)
            changed = any(self.find(d) in group for d in dims)
            if r.kind == CONST and not changed:
                values.append(self.prog.constants[r.index].value)
            else:
                values.append(stand_in(shape, self._dtype(r)))
        try:
            with np.errstate(all="ignore"):
                shape = np.shape(node.prim.forward(*values, **(node.attrs or {})))
        except Exception:       # any failure: the entry does not take that size
            return None
        if len(shape) != len(node.shape):
            return None
        follow = []
        for o, (new, old) in enumerate(zip(shape, node.shape)):
            if new == old + 1 and old == n:
                follow.append(o)
            elif new != old:
                return None
        return follow

    def _dtype(self, r: Ref) -> np.dtype:
        if r.kind == INPUT:
            return self.prog.inputs[r.index].dtype
        if r.kind == NODE:
            return np.dtype(self.prog.nodes[r.index].dtype)
        return np.result_type(self.prog.constants[r.index].value)


def stand_in(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """A read-only value of ``shape`` to probe an entry with: 2 I + 0.1 for square matrices
    (positive definite), 0.5 (1, True) elsewhere; a zero-stride view."""
    if len(shape) >= 2 and shape[-1] == shape[-2] and dtype.kind not in "bc":
        n = shape[-1]
        return np.broadcast_to((2 * np.eye(n) + 0.1).astype(dtype), shape)
    return np.broadcast_to(np.array(0.5 if dtype.kind == "f" else 1, dtype), shape)


def analyze(prog: Program) -> Sizes:
    """The size classes of ``prog`` (cached on it)."""
    sizes = prog.__dict__.get("_sizes")
    if sizes is None:
        sizes = prog.__dict__["_sizes"] = Sizes(prog)
    return sizes

# ---------------------------------------------------------------- resizing


def resize(prog: Program, shapes: Sequence[tuple], who: str = "program") -> Program:
    """``prog`` for inputs of ``shapes``: every size that follows an input's re-evaluated."""
    if prog.counts is None:
        first = next(i for i, s in zip(prog.inputs, shapes) if tuple(s) != i.shape)
        got = shapes[prog.inputs.index(first)]
        raise ShapeError(f"{who}: input {first.name} has shape {first.shape}, got {tuple(got)} "
                         "(this program keeps no record of which sizes follow its inputs: "
                         "record it again with op.program)")
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
        old = constants[k.const]
        shape = shape_of(sz.nodes[k.node])
        if Count(*k[:4]).value(shape) <= 0:
            raise ShapeError(f"{who}: {prog.nodes[k.node].name} has shape {shape}: the count "
                             f"its reduction divides by (less ddof {k.ddof}) would be "
                             f"{Count(*k[:4]).value(shape)}")
        value = k.value(shape)
        constants[k.const] = Constant(type(old.value)(value) if isinstance(old.value, int | float)
                                      else np.asarray(value, np.result_type(old.value)),
                                      old.name)
    nodes = []
    for node, dims in zip(prog.nodes, sz.nodes):
        shape = shape_of(dims)
        attrs = node.attrs
        if node.prim.name == "expand":
            attrs = dict(attrs, shape=shape)
        elif node.prim.name == "reshape":
            attrs = dict(attrs, shape=tuple(-1 if m == -1 else n
                                            for m, n in zip(attrs["shape"], shape)))
        nodes.append(node._replace(shape=shape, attrs=attrs))
    out = type(prog)(inputs, constants, nodes, prog.outputs, prog.single, check=False,
                     counts=prog.counts)
    _check_shapes(out, who)
    return out


def _check_shapes(prog: Program, who: str) -> None:
    """Run ``prog`` once on stand-ins; every entry must give the shape it declares."""
    env: list = [stand_in(i.shape, i.dtype) for i in prog.inputs]
    env += [c.value for c in prog.constants]
    for node in prog.nodes:
        args = [env[prog._slot(r)] for r in node.args]
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


# ---------------------------------------------------------------- in saved files (load.py)


def read_counts(x: Any, constants: list, nodes: list, fail: Callable) -> list | None:
    """A saved program's ``counts`` checked (None: sizes fixed); ``fail(where, what)`` makes
    the error."""
    if x is None:
        return None
    if not isinstance(x, list) or len(x) > len(constants):
        raise fail("counts", "must be null or a list, one item per counted constant")
    out = []
    for i, k in enumerate(x):
        ok = isinstance(k, list) and len(k) == 5 and type(k[0]) is int and \
            type(k[1]) is int and 0 <= k[0] < len(constants) and 0 <= k[1] < len(nodes)
        ok = ok and (k[2] is None or isinstance(k[2], list) and all(
            type(a) is int and 0 <= a < len(nodes[k[1]].shape) for a in k[2]))
        ok = ok and type(k[3]) in (int, float) and 0 <= k[3] < 2**31 and \
            (k[4] is None or type(k[4]) is float and math.isfinite(k[4]))
        if not ok or type(constants[k[0]].value) not in (int, float):
            raise fail(f"counts {i}", "must be [constant (a number), node, axes of that node "
                                      f"or null, ddof, times or null], got {str(k)[:80]}")
        out.append((k[0], k[1], None if k[2] is None else tuple(k[2]), k[3], k[4]))
    return out


def read_alike(x: Any, inputs: list, constants: list, nodes: list, ref: Callable,
               fail: Callable) -> list:
    """A saved program's ``alike`` pairs checked; ``ref(r, where)`` reads a reference."""
    if not isinstance(x, list) or len(x) > 2**20:
        raise fail("alike", "must be a list of pairs of references")
    out = []
    for i, pair in enumerate(x):
        if not isinstance(pair, list) or len(pair) != 2:
            raise fail(f"alike {i}", "must be a pair of references")
        a, b = (ref(r, f"alike {i}") for r in pair)
        shapes = [np.shape(constants[r.index].value) if r.kind == CONST else
                  tuple((inputs if r.kind == INPUT else nodes)[r.index].shape) for r in (a, b)]
        if shapes[0] != shapes[1]:
            raise fail(f"alike {i}", f"the references have shapes {shapes[0]} and "
                                     f"{shapes[1]}, not one shape")
        out.append((a, b))
    return out
