"""Attribute schemas: the names, types and ranges of the attributes a primitive records.

Each record carries one (``Primitive(..., schema=attrs(axis=AXIS_OR_NONE, keepdims=BOOL))``).
A saved program's attributes are checked against it before anything reaches numpy
(program/load.py), and ``prog.save`` checks the same, so what saves loads. A check sees the
value and the shapes of the entry's inputs, and answers None (fine) or what is wrong.

A schema may also say how many elements the output has, from the inputs' shapes and the
attributes alone (``size=``): primitives whose output can be larger than their largest input
(broadcasting, repeat, tile, pad, matmul, ...) must, so a file cannot make the loader allocate
more than it declares. ``tests/test_hostile_schema.py`` checks every record against its cases.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Check = Callable[[Any, Sequence[tuple]], "str | None"]
SizeRule = Callable[[Sequence[tuple], dict], int]

# the dtypes a saved program holds (values, constants, array attributes)
DTYPES = frozenset(np.dtype(t).name for t in (
    bool, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64))
INT_RANGE = (-2**63, 2**64)     # Python ints a program holds (int64 and uint64 values)
MAX_RANK = 32                   # numpy's limit on dimensions (64 in numpy 2; 32 is ample)


@dataclass(frozen=True)
class Schema:
    """The attributes a primitive accepts (name -> check), which of them it needs, and the
    output's element count when it can exceed the largest input's."""

    checks: dict
    required: frozenset
    size: SizeRule | None = None

    def problem(self, attrs: dict | None, shapes: Sequence[tuple]) -> str | None:
        """What is wrong with ``attrs`` for inputs of ``shapes``, or None."""
        attrs = attrs or {}
        for k in attrs:
            if k not in self.checks:
                known = ", ".join(sorted(self.checks)) or "none"
                return f"unknown attribute {k!r} (it takes: {known})"
        for k in sorted(self.required - set(attrs)):
            return f"the attribute {k!r} is missing"
        for k, v in attrs.items():
            why = self.checks[k](v, shapes)
            if why is not None:
                return f"attribute {k!r}: {why} (got {_show(v)})"
        return None


class need:  # noqa: N801 (read as a word in a declaration: attrs(shape=need(SHAPE)))
    """Marks an attribute the primitive cannot do without."""

    def __init__(self, check: Check):
        self.check = check


def attrs(*, size: SizeRule | None = None, **checks: Check | need) -> Schema:
    """A schema: ``attrs(axis=AXIS_OR_NONE, keepdims=BOOL)``; ``need(...)`` marks required
    attributes, ``size=`` the output's element count."""
    required = frozenset(k for k, c in checks.items() if isinstance(c, need))
    return Schema({k: c.check if isinstance(c, need) else c for k, c in checks.items()},
                  required, size)


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."

# ---------------------------------------------------------------- value checks


def is_int(v: Any) -> bool:
    """An integer (Python or numpy, never bool) that a program can hold."""
    return (type(v) is int or isinstance(v, np.integer)) and INT_RANGE[0] <= int(v) < INT_RANGE[1]


def is_bool(v: Any) -> bool:
    """True or False (Python or numpy)."""
    return type(v) is bool or isinstance(v, np.bool_)


def is_real(v: Any) -> bool:
    """A real number: an int, a float (nan and infinities included) or a numpy one."""
    return is_int(v) or type(v) is float or isinstance(v, np.floating)


def BOOL(v: Any, shapes: Sequence[tuple]) -> str | None:  # noqa: N802 (a constant's name)
    """True or False."""
    return None if is_bool(v) else "must be True or False"


def REAL(v: Any, shapes: Sequence[tuple]) -> str | None:  # noqa: N802
    """A real number."""
    return None if is_real(v) else "must be a number"


def integer(lo: int | None = None, hi: int | None = None) -> Check:
    """An int in [lo, hi] (either bound optional)."""
    def check(v: Any, shapes: Sequence[tuple]) -> str | None:
        if not is_int(v) or (lo is not None and v < lo) or (hi is not None and v > hi):
            return f"must be an int in [{lo if lo is not None else ''}, " \
                   f"{hi if hi is not None else ''}]"
        return None
    return check


INT = integer(-2**62, 2**62)


def one_of(*choices: str) -> Check:
    """One of the strings given."""
    def check(v: Any, shapes: Sequence[tuple]) -> str | None:
        return None if type(v) is str and v in choices else \
            f"must be one of {', '.join(map(repr, choices))}"
    return check


def ints(lo: int = -2**62, rank: bool = False) -> Check:
    """A tuple of ints >= lo (one per dimension of the first input when ``rank``)."""
    def check(v: Any, shapes: Sequence[tuple]) -> str | None:
        if type(v) is not tuple or len(v) > MAX_RANK or not all(is_int(n) and n >= lo
                                                                for n in v):
            return f"must be a tuple of at most {MAX_RANK} ints >= {lo}"
        if rank and len(v) != len(shapes[0]):
            return f"must have one entry per dimension ({len(shapes[0])})"
        return None
    return check


def axis(of: int = 0, extra: int = 0, none: bool = False, many: bool = False,
         one: bool = True) -> Check:
    """An axis of input ``of`` (with ``extra`` dimensions more): an int (when ``one``), a
    tuple of distinct ones (when ``many``), or None (when ``none``)."""
    def check(v: Any, shapes: Sequence[tuple]) -> str | None:
        if v is None and none:
            return None
        ndim = len(shapes[min(of, len(shapes) - 1)]) + extra
        if one and is_int(v):
            return None if -ndim <= v < ndim else f"is out of range for {ndim} dimension(s)"
        if many and type(v) is tuple and all(is_int(a) for a in v):
            if not all(-ndim <= a < ndim for a in v):
                return f"is out of range for {ndim} dimension(s)"
            return None if len({int(a) % ndim for a in v}) == len(v) else "repeats an axis"
        kinds = [k for k, ok in (("None", none), ("an int", one), ("a tuple of ints", many))
                 if ok]
        return f"must be {' or '.join(kinds)}"
    return check


AXIS = axis()
AXIS_OR_NONE = axis(none=True)
AXES_OR_NONE = axis(none=True, many=True)
AXES = axis(many=True, one=False)
SHAPE = ints(lo=0)


def DTYPE(v: Any, shapes: Sequence[tuple]) -> str | None:  # noqa: N802
    """A numpy dtype a program can hold."""
    return None if isinstance(v, np.dtype) and v.name in DTYPES else \
        f"must be a dtype among {', '.join(sorted(DTYPES))}"


def int_array(v: Any, shapes: Sequence[tuple]) -> str | None:
    """An integer array (gather indices)."""
    return None if isinstance(v, np.ndarray) and v.dtype.kind in "iu" else \
        "must be an array of integers"


def REAL_OR_ARRAY(v: Any, shapes: Sequence[tuple]) -> str | None:  # noqa: N802
    """A real number, or a float array that broadcasts with the inputs (betainc's a, b)."""
    if is_real(v):
        return None
    if not isinstance(v, np.ndarray) or v.dtype.kind != "f" or v.ndim > MAX_RANK:
        return "must be a number or an array of floats"
    try:
        np.broadcast_shapes(v.shape, *shapes)
    except ValueError:
        return f"shape {v.shape} does not broadcast with the input's {shapes[0] if shapes else ()}"
    return None


def _index_item(i: Any) -> bool:
    if i is None or i is Ellipsis or is_int(i):
        return True
    if isinstance(i, slice):
        parts = (i.start, i.stop, i.step)
        return all(p is None or is_int(p) for p in parts) and i.step != 0
    return isinstance(i, np.ndarray) and i.dtype.kind in "iub"


def INDEX(v: Any, shapes: Sequence[tuple]) -> str | None:  # noqa: N802
    """A tuple of ints, slices, None, one Ellipsis, integer or bool arrays."""
    if type(v) is not tuple or len(v) > MAX_RANK or not all(_index_item(i) for i in v) or \
            sum(i is Ellipsis for i in v) > 1:
        return "must be a tuple of ints, slices (step != 0), None, one ..., integer or " \
               "bool arrays"
    return None


def INDICES(v: Any, shapes: Sequence[tuple]) -> str | None:  # noqa: N802
    """One index per input."""
    if type(v) is not tuple or len(v) != len(shapes) or \
            any(INDEX(i, shapes) is not None for i in v):
        return f"must be a tuple of {len(shapes)} index tuple(s)"
    return None


def PAD_WIDTH(v: Any, shapes: Sequence[tuple]) -> str | None:  # noqa: N802
    """One (before, after) pair of ints >= 0 per dimension."""
    if type(v) is not tuple or len(v) != len(shapes[0]) or not all(
            type(p) is tuple and len(p) == 2 and all(is_int(n) and n >= 0 for n in p)
            for p in v):
        return f"must be {len(shapes[0])} (before, after) pair(s) of ints >= 0"
    return None


def SUBSCRIPTS(v: Any, shapes: Sequence[tuple]) -> str | None:  # noqa: N802
    """Explicit einsum subscripts: one term of letters per input, '->', the output's."""
    if type(v) is not str or v.count("->") != 1:
        return "must be explicit einsum subscripts ('ij,jk->ik')"
    lhs, out = v.split("->")
    terms = lhs.split(",")
    letters = set(string.ascii_letters)
    if len(terms) != len(shapes) or not set(lhs.replace(",", "") + out) <= letters:
        return f"must have {len(shapes)} term(s) of letters"
    if len(set(out)) != len(out) or not set(out) <= set(lhs):
        return "the output letters must be distinct and appear in an input"
    sizes: dict = {}
    for term, shape in zip(terms, shapes):
        if len(term) != len(shape):
            return f"the term {term!r} does not match an input of shape {shape}"
        for c, n in zip(term, shape):
            m = sizes.setdefault(c, n)
            if m != n and 1 not in (m, n):
                return f"the letter {c!r} has sizes {m} and {n}"
            sizes[c] = max(m, n)
    return None

# ---------------------------------------------------------------- output sizes


def broadcast(shapes: Sequence[tuple], attrs: dict) -> int:
    """Elementwise primitives: the inputs' broadcast shape."""
    return math.prod(np.broadcast_shapes(*shapes))


def broadcast_with(*names: str) -> SizeRule:
    """The broadcast shape of the inputs and of the array attributes ``names``."""
    def size(shapes: Sequence[tuple], attrs: dict) -> int:
        return math.prod(np.broadcast_shapes(*shapes, *(np.shape(attrs[n]) for n in names
                                                        if n in attrs)))
    return size


def _batch(*shapes: tuple) -> tuple:
    return np.broadcast_shapes(*shapes)


def matmul_size(shapes: Sequence[tuple], attrs: dict) -> int:
    """numpy's matmul: stacked matrices, a 1-D operand read as a vector."""
    a, b = shapes
    if not a or not b:
        raise ValueError("matmul needs inputs of at least one dimension")
    rows = a[-2:-1] if len(a) > 1 else ()
    cols = b[-1:] if len(b) > 1 else ()
    if a[-1] != (b[-2] if len(b) > 1 else b[0]):
        raise ValueError(f"shapes {a} and {b} do not multiply")
    return math.prod(_batch(a[:-2], b[:-2])) * math.prod(rows) * math.prod(cols)


def solve_size(shapes: Sequence[tuple], attrs: dict) -> int:
    """numpy 2's solve: b is a vector when 1-D, otherwise stacked columns."""
    a, b = shapes
    if len(a) < 2 or a[-1] != a[-2] or not b:
        raise ValueError(f"solve needs square matrices and a right-hand side, got {a}, {b}")
    if len(b) == 1:
        return math.prod(a[:-1])
    return math.prod(_batch(a[:-2], b[:-2])) * b[-2] * b[-1]


def lstsq_size(shapes: Sequence[tuple], attrs: dict) -> int:
    """lstsq of one (m, n) matrix and b of shape (m,) or (m, k): (n,) or (n, k)."""
    a, b = shapes
    if len(a) != 2 or len(b) not in (1, 2) or a[0] != b[0]:
        raise ValueError(f"lstsq needs a (m, n) matrix and b of (m,) or (m, k), got {a}, {b}")
    return a[1] * (b[1] if len(b) == 2 else 1)


def einsum_size(shapes: Sequence[tuple], attrs: dict) -> int:
    """The product of the output letters' sizes."""
    lhs, out = attrs["subscripts"].split("->")
    sizes: dict = {}
    for term, shape in zip(lhs.split(","), shapes):
        for c, n in zip(term, shape):
            sizes[c] = max(sizes.get(c, n), n)      # a letter of size 1 broadcasts
    return math.prod(sizes[c] for c in out)


def joined(shapes: Sequence[tuple], attrs: dict) -> int:
    """concatenate and stack: the inputs' elements together."""
    return sum(math.prod(s) for s in shapes)


def to_shape(shapes: Sequence[tuple], attrs: dict) -> int:
    """A primitive whose ``shape`` attribute is the output's shape."""
    return math.prod(attrs["shape"])


def reshaped(shapes: Sequence[tuple], attrs: dict) -> int:
    """reshape: as many elements as the input."""
    return math.prod(shapes[0])


def repeated(shapes: Sequence[tuple], attrs: dict) -> int:
    """repeat: every entry along the axis (or of the flattened input) repeated."""
    shape, r, ax = shapes[0], attrs["repeats"], attrs.get("axis")
    n = math.prod(shape) if ax is None else shape[ax]
    rest = 1 if ax is None else math.prod(shape[:ax] + shape[ax + 1:])
    if is_int(r):
        return r * n * rest
    if len(r) not in (1, n):
        raise ValueError(f"{len(r)} repeats for {n} entries")
    return (sum(r) if len(r) == n else r[0] * n) * rest


def tiled(shapes: Sequence[tuple], attrs: dict) -> int:
    """tile: the input times every repetition."""
    return math.prod(shapes[0]) * math.prod(attrs["reps"])


def padded(shapes: Sequence[tuple], attrs: dict) -> int:
    """pad: each dimension widened by its (before, after)."""
    return math.prod(n + b + a for n, (b, a) in zip(shapes[0], attrs["pad_width"]))


def gathered(shapes: Sequence[tuple], attrs: dict) -> int:
    """take_along_axis: the indices broadcast against the input off the axis."""
    x, ax = shapes[0], attrs["axis"]
    idx = shapes[1] if len(shapes) > 1 else np.shape(attrs["indices"])
    if len(idx) != len(x) or not x:
        raise ValueError(f"indices of shape {idx} for an input of shape {x}")
    ax %= len(x)
    return math.prod(_batch(x[:ax] + x[ax + 1:], idx[:ax] + idx[ax + 1:])) * idx[ax]


def indexed(shapes: Sequence[tuple], attrs: dict) -> int:
    """getitem: slices' lengths times the broadcast shape of the array (and int) indices."""
    shape, index = shapes[0], attrs["index"]
    taken = sum(i.ndim if isinstance(i, np.ndarray) and i.dtype == bool else
                0 if i is None or i is Ellipsis else 1 for i in index)
    if taken > len(shape):
        raise ValueError(f"{taken} indices for an input of {len(shape)} dimension(s)")
    items = []
    for i in index:
        items.extend([slice(None)] * (len(shape) - taken) if i is Ellipsis else [i])
    items.extend([slice(None)] * (len(shape) - sum(i is not None for i in items)))
    total, advanced, d = 1, [], 0
    for i in items:
        if i is None:
            continue
        if isinstance(i, slice):
            total *= len(range(*i.indices(shape[d])))
            d += 1
        elif isinstance(i, np.ndarray) and i.dtype == bool:
            if i.shape != shape[d:d + i.ndim]:
                raise ValueError(f"a mask of shape {i.shape} for dimensions {shape[d:]}")
            advanced.append((int(np.count_nonzero(i)),))
            d += i.ndim
        else:
            advanced.append(np.shape(i))
            d += 1
    return total * math.prod(_batch(*advanced)) if advanced else total

# ---------------------------------------------------------------- common schemas

NONE = attrs()                                          # no attributes, no larger output
BROADCAST = attrs(size=broadcast)                       # elementwise primitives
REDUCING = attrs(axis=AXES_OR_NONE, keepdims=BOOL)      # sum, mean, max, any, ...


def _reshape_shape(v: Any, shapes: Sequence[tuple]) -> str | None:
    why = ints(lo=-1)(v, shapes)
    return why or (None if v.count(-1) <= 1 else "may hold one -1 at most")


RESHAPE_SHAPE = _reshape_shape
