"""Programs at other input sizes: which sizes follow an input's (resize.py uses them).

A program recorded with a batch of 32 holds that 32 in places: node shapes, the ``shape`` of
an ``expand`` (a seed spread over the batch) or a ``reshape``, and the count a mean divides
its cotangent by (``Count``, found by ``extract`` in the mean's pullback from the reduction's
record). ``analyze`` finds which of them follow which input axis: every axis of an input, a
constant and a node is a dimension, and dimensions are joined into classes that must have one
size. Shape primitives join by their attributes (``expand`` aligns its input from the right,
``reshape`` matches a prefix and a suffix); every other entry is probed, its forward run on
stand-ins of its inputs with one class changed from n to n + 1 (from 0 to 2: a 1 would
broadcast against the other 0s): the output axes that become that size join that class
(and a class that cannot change alone tries with another of its size, as a matmul's
contracted axes must; an entry whose ``shape`` attribute is its output's, a scatter, is probed
with that shape changed too). A class a recorded entry fixes (the axis of a constant, the part
of a reshape that mixes axes, an entry that fails the probe, an axis a scatter adds into at
recorded positions, the axes a pullback recorded no division for as their count was 1) is
pinned by that entry.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ..engine.variable import Entry
from .nodes import CONST, INPUT, NODE, Ref, ref_of, refs_of

if TYPE_CHECKING:
    from .core import Program


class Count(NamedTuple):
    """Constant ``const`` is the number of entries of node ``node`` along ``axes`` (all when
    None) less ``ddof``, or ``times`` divided by that number. ``const`` None: that number was
    1 when recorded, so no division by it was recorded and those axes keep their sizes."""

    const: int | None
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
        self.nodes = [self._new_dims(node.shape) for node in prog.entries]
        self.prog = prog
        for k in prog.counts or ():
            if k.const is None:
                self._pin_uncounted(k)
        for a, b in prog.alike:
            for d, e in zip(self.dims(a), self.dims(b)):
                self.union(d, e)
        reshapes = []       # after every other join: a flattened batch can be unflattened
        for node, out in zip(prog.entries, self.nodes):
            if node.prim.sized == "reshape":
                reshapes.append((node, self.dims(ref_of(node.in0)), out))
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

    def _pin_uncounted(self, k: Count) -> None:
        """A reduction's pullback recorded with no division by its count (1 when recorded)
        pins the axes it reduces."""
        dims = self.nodes[k.node]
        for a in range(len(dims)) if k.axes is None else k.axes:
            if self.size[dims[a]] != 1:
                self.pins.append((dims[a], f"the gradient {self.prog.entries[k.node].name} "
                                           "would divide by the count of entries along this "
                                           f"axis less ddof {k.ddof}, which was 1 (so no "
                                           "division was recorded)"))

    # ------------------------------------------------------------ one entry

    def _node(self, node: Entry, out: tuple) -> None:
        args = [self.dims(r) for r in refs_of(node)]
        sized = node.prim.sized
        if sized == "broadcast":
            x = args[0]
            for i, d in enumerate(x):
                o = out[len(out) - len(x) + i]
                if self.size[d] == self.size[o]:
                    self.union(d, o)
        else:
            self._probe_all(node, args, out)
            if sized in ("scatter", "scatter_along"):
                self._pin_scattered(node, out)

    def _pin_scattered(self, node: Entry, out: tuple) -> None:
        """A scatter adds at recorded positions: every axis of its output that an index does
        not take whole (``:``) keeps its size (a gradient's shape follows its variable's, the
        positions do not)."""
        if node.prim.sized == "scatter":
            fixed = {a for index in node.attrs["indices"] for a in _addressed(index, len(out))}
        else:
            fixed = set(range(len(out)))        # take_along_axis's positions: a whole array
        for a in sorted(fixed):
            if self.size[out[a]] != 1:
                self.pins.append((out[a], f"{node.name} = {node.prim.name}(...) adds at "
                                          "recorded positions along this axis"))

    def _reshape(self, node: Entry, x: tuple, out: tuple) -> None:
        size = self.size
        x, out = self._factors(x), self._factors(out)
        target = tuple(node.attrs["shape"])
        # the prefix and suffix stop at the -1 numpy infers (of an empty array, a 0 there
        # equals another 0 by chance)
        j = target.index(-1) if len(out) == len(target) and -1 in target else None
        p = 0
        while p < min(len(x), len(out) if j is None else j) and size[x[p]] == size[out[p]]:
            p += 1
        q = 0
        last = min(len(x), len(out)) - p if j is None else \
            min(min(len(x), len(out)) - p, len(out) - 1 - j)
        while q < last and size[x[-1 - q]] == size[out[-1 - q]]:
            q += 1
        if math.prod(size[d] for d in x[p:len(x) - q]) != \
                math.prod(size[d] for d in out[p:len(out) - q]):
            p = q = 0       # an empty array's: its 0s matched by chance
        for k in [*range(p), *range(-q, 0)]:
            self.union(x[k], out[k])
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

    def _probe_all(self, node: Entry, args: list, out: tuple) -> None:
        classes = list(dict.fromkeys(self.find(d) for dims in args for d in dims
                                     if self.size[d] != 1))
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

    def _probe(self, node: Entry, args: list, group: set) -> list | None:
        """The output axes that follow ``group`` when its size n becomes n + 1, or 2 from 0 (1
        would broadcast) (None when the entry fails or changes otherwise)."""
        n = self.size[next(iter(group))]
        m = n + 1 if n else 2
        values = []
        for r, dims in zip(refs_of(node), args):
            shape = tuple(m if self.find(d) in group else self.size[d] for d in dims)
            changed = any(self.find(d) in group for d in dims)
            if r.kind == CONST and not changed:
                values.append(self.prog.constants[r.index].value)
            else:
                values.append(stand_in(shape, self._dtype(r)))
        for attrs in _attr_variants(node, n, m):
            try:
                with np.errstate(all="ignore"):
                    shape = np.shape(node.prim.forward(*values, **attrs))
            except Exception:       # any failure: the entry does not take that size
                continue
            follow = [o for o, (new, old) in enumerate(zip(shape, node.shape)) if new != old]
            ok = len(shape) == len(node.shape) and all(shape[o] == m and node.shape[o] == n
                                                       for o in follow)
            return follow if ok else None
        return None

    def _dtype(self, r: Ref) -> np.dtype:
        if r.kind == INPUT:
            return self.prog.inputs[r.index].dtype
        if r.kind == NODE:
            return np.dtype(self.prog.entries[r.index].dtype)
        return np.result_type(self.prog.constants[r.index].value)


# the ``Primitive.sized`` of records whose ``shape`` attribute is their output's shape (a
# scatter's, the array's it fills)
OUTPUT_SHAPE = frozenset({"broadcast", "scatter", "scatter_along"})


def _addressed(index: tuple, ndim: int) -> set[int]:
    """The axes of an array of ``ndim`` axes that ``index`` does not take whole."""
    index = index if isinstance(index, tuple) else (index,)
    used = sum(i is not None and i is not Ellipsis for i in index)
    axes, a = set(), 0
    for i in index:
        if i is Ellipsis:
            a += ndim - used
        elif i is not None:
            if not (isinstance(i, slice) and i == slice(None)):
                axes.add(a)
            a += 1
    return axes


def _attr_variants(node: Entry, n: int, m: int) -> Iterator[dict]:
    """The attributes to probe ``node`` with when a size n becomes m: its own, or for an
    ``OUTPUT_SHAPE`` entry its shape with some of its n's made m (fewest first)."""
    attrs = node.attrs or {}
    if node.prim.sized not in OUTPUT_SHAPE:
        yield attrs
        return
    at = [k for k, size in enumerate(attrs["shape"]) if size == n][:4]
    for r in range(1, len(at) + 1):
        for chosen in itertools.combinations(at, r):
            yield dict(attrs, shape=tuple(m if k in chosen else size for k, size in
                                          enumerate(attrs["shape"])))


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
        ok = isinstance(k, list) and len(k) == 5 and (k[0] is None or type(k[0]) is int and
                                                      0 <= k[0] < len(constants)) and \
            type(k[1]) is int and 0 <= k[1] < len(nodes)
        ok = ok and (k[2] is None or isinstance(k[2], list) and all(
            type(a) is int and 0 <= a < len(nodes[k[1]].shape) for a in k[2]))
        ok = ok and type(k[3]) in (int, float) and 0 <= k[3] < 2**31 and \
            (k[4] is None or type(k[4]) is float and math.isfinite(k[4]))
        if not ok or k[0] is not None and type(constants[k[0]].value) not in (int, float):
            raise fail(f"counts {i}", "must be [constant (a number) or null, node, axes of "
                                      f"that node or null, ddof, times or null], got "
                                      f"{str(k)[:80]}")
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
