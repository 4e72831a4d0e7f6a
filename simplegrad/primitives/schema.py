"""Attribute schemas: the names, types and ranges of the attributes a primitive records, and
its shape rule.

Each record carries one (``Primitive(..., schema=attrs(shape_rule=..., axis=AXIS_OR_NONE))``).
A saved program's attributes are checked against it before anything reaches numpy
(program/load.py), and ``prog.save`` checks the same, so what saves loads. A check sees the
value and the shapes of the entry's inputs, and answers None (fine) or what is wrong.

The shape rule (``shape_rule=``) is the primitive's abstract evaluation, as JAX's abstract_eval
rules: the output's shape and dtype from the inputs' shapes and dtypes and the attributes
alone, raising ``ShapeRuleError`` for inputs the primitive cannot take. The loader checks every
entry's declared shape and dtype against it before any array is made, and the output's element
count (``Schema.size``) bounds what replaying it allocates. The rules are in shape_rules.py;
``tests/test_shape_rules.py`` checks every record's rule against numpy's forward on its cases.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ShapeError

Check = Callable[[Any, Sequence[tuple]], "str | None"]
# (shapes, dtypes, attrs) -> (shape, dtype); an input's dtype is a numpy dtype, or ``int`` /
# ``float`` for a Python number (NEP 50's weak scalars: ``x * 2.0`` keeps x's float32)
ShapeRule = Callable[[Sequence[tuple], Sequence[Any], dict], "tuple[tuple, np.dtype]"]

# the dtypes a saved program holds (values, constants, array attributes)
DTYPES = frozenset(np.dtype(t).name for t in (
    bool, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128))
INT_RANGE = (-2**63, 2**64)     # Python ints a program holds (int64 and uint64 values)
MAX_RANK = 32                   # numpy's limit on dimensions (64 in numpy 2; 32 is ample)


class ShapeRuleError(ShapeError):
    """Input shapes, dtypes or attributes that a primitive cannot take together (its shape
    rule's refusal)."""


@dataclass(frozen=True)
class Schema:
    """The attributes a primitive accepts (name -> check), which of them it needs, and its
    shape rule (the output's shape and dtype)."""

    checks: dict
    required: frozenset
    rule: ShapeRule | None = None

    def abstract(self, shapes: Sequence[tuple], dtypes: Sequence[Any],
                 attrs: dict | None) -> tuple[tuple, np.dtype]:
        """The output's shape and dtype for inputs of ``shapes`` and ``dtypes`` (attributes
        already checked by ``problem``); raises ShapeRuleError saying what does not fit."""
        if self.rule is None:
            raise ShapeRuleError("the primitive declares no shape rule")
        try:
            shape, dtype = self.rule(shapes, dtypes, attrs or {})
        except ShapeRuleError:
            raise
        except (TypeError, ValueError, IndexError, ArithmeticError) as e:     # numpy's refusal
            raise ShapeRuleError(f"{type(e).__name__}: {str(e)[:200]}") from None
        if any(n >= 2**63 for n in shape):
            raise ShapeRuleError(f"a dimension of shape {shape} exceeds numpy's limit of 2**63")
        return tuple(int(n) for n in shape), np.dtype(dtype)

    def size(self, shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict | None) -> int:
        """The output's element count (from the shape rule)."""
        return math.prod(self.abstract(shapes, dtypes, attrs)[0])

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


def attrs(*, shape_rule: ShapeRule | None = None, **checks: Check | need) -> Schema:
    """A schema: ``attrs(shape_rule=reduction(SAME), axis=AXIS_OR_NONE, keepdims=BOOL)``;
    ``need(...)`` marks required attributes."""
    required = frozenset(k for k, c in checks.items() if isinstance(c, need))
    return Schema({k: c.check if isinstance(c, need) else c for k, c in checks.items()},
                  required, shape_rule)


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."

# ---------------------------------------------------------------- value checks


def is_held_int(v: Any) -> bool:
    """An integer (Python or numpy, never bool) that a program can hold."""
    return (type(v) is int or isinstance(v, np.integer)) and INT_RANGE[0] <= int(v) < INT_RANGE[1]


def is_bool(v: Any) -> bool:
    """True or False (Python or numpy)."""
    return type(v) is bool or isinstance(v, np.bool_)


def is_real(v: Any) -> bool:
    """A real number: an int, a float (nan and infinities included) or a numpy one."""
    return is_held_int(v) or type(v) is float or isinstance(v, np.floating)


def BOOL(v: Any, shapes: Sequence[tuple]) -> str | None:  # noqa: N802 (a constant's name)
    """True or False."""
    return None if is_bool(v) else "must be True or False"


def REAL(v: Any, shapes: Sequence[tuple]) -> str | None:  # noqa: N802
    """A real number."""
    return None if is_real(v) else "must be a number"


def integer(lo: int | None = None, hi: int | None = None) -> Check:
    """An int in [lo, hi] (either bound optional)."""
    def check(v: Any, shapes: Sequence[tuple]) -> str | None:
        if not is_held_int(v) or (lo is not None and v < lo) or (hi is not None and v > hi):
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
        if type(v) is not tuple or len(v) > MAX_RANK or not all(is_held_int(n) and n >= lo
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
        if one and is_held_int(v):
            return None if -ndim <= v < ndim else f"is out of range for {ndim} dimension(s)"
        if many and type(v) is tuple and all(is_held_int(a) for a in v):
            if not all(-ndim <= a < ndim for a in v):
                return f"is out of range for {ndim} dimension(s)"
            return None if len({int(a) % ndim for a in v}) == len(v) else "repeats an axis"
        kinds = [k for k, ok in (("None", none), ("an int", one), ("a tuple of ints", many))
                 if ok]
        return f"must be {' or '.join(kinds)}"
    return check


def COUNTS(v: Any, shapes: Sequence[tuple]) -> str | None:  # noqa: N802
    """An int >= 0 or a tuple of them (repeat's counts)."""
    return None if is_held_int(v) and v >= 0 else ints(lo=0)(v, shapes)


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


def _index_item(i: Any) -> bool:
    if i is None or i is Ellipsis or is_held_int(i):
        return True
    if isinstance(i, slice):
        parts = (i.start, i.stop, i.step)
        return all(p is None or is_held_int(p) for p in parts) and i.step != 0
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
            type(p) is tuple and len(p) == 2 and all(is_held_int(n) and n >= 0 for n in p)
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


def _reshape_shape(v: Any, shapes: Sequence[tuple]) -> str | None:
    why = ints(lo=-1)(v, shapes)
    return why or (None if v.count(-1) <= 1 else "may hold one -1 at most")


RESHAPE_SHAPE = _reshape_shape
