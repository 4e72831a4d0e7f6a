"""Simplification rules, one set for ``sg.simplify``, the printed derivation and simplifying
while recording.

Each rule looks at one entry: its primitive, its inputs and its attributes, and, through a
``describe`` function, at what is known about each input (an ``Operand``: shape, dtype, the
value when it is a constant, and the entry that computed it). The inputs are whatever the
caller uses to refer to values: a ``Program``'s entries (constants as leaf entries), the
derivation's Lines, entries and Variables (and Python numbers or arrays for constants) on a
tape. ``describe_variable`` describes tape inputs.

- ``cse_key(prim, inputs, attrs)``: two entries with equal keys compute the same value. Inputs
  of commutative primitives (``Primitive.commutative``: add, mul, maximum, minimum, equal,
  not_equal, logical_and, logical_or) count in either order.
- ``reduces_to(prim, inputs, attrs, describe)``: the input (of the entry or of the entry that
  computed one of them) the entry equals exactly, or None. ``x * 1``, ``1 * x``, ``x + 0``,
  ``x - 0``, ``x / 1`` (a record's ``unit``), ``--x``, ``~~m``, ``m & m``, ``m | m``,
  ``where(c, x, x)``, a where that repeats an inner where on the same condition
  (``where(c, 0, where(c, 0, g))``), an expand or reshape to the same shape, a transpose
  undone by its inverse (or by nothing), a cast to the same dtype. A rule applies only when
  the result has the input's shape and dtype (a broadcasting constant of ones does not
  reduce).
- ``rewrite(prim, inputs, attrs, describe)``: an equal entry in a simpler form: ``x + x`` is
  ``x * 2.0``, ``x * -1`` is ``-x``, ``x + -y`` and ``-y + x`` are ``x - y``, ``x - -y`` is
  ``x + y``.
- ``simplified(prim, inputs, attrs, describe)``: the one simplifier step all three callers
  take (``sg.simplify`` over a Program, the derivation at print time, an Ops that simplifies
  while recording): ``FOLD`` when every input is a constant, ``Same(x)`` when the entry is x,
  else the entry to record and its CSE key. Over an associative primitive it first folds a
  scale (``(x * 2.0) * 0.5`` is ``x * 1.0``, which the identities see next), except while
  recording, which keeps the values of plain recording to the bit. ``sg.simplify(prog,
  expand=True)`` also gathers ring arithmetic (add, sub, mul, neg) into polynomials of the
  other entries (polynomials.py: powers collapsed, monomials in one order, coefficients
  gathered), written out where they are read.

IEEE arithmetic stays: ``x * 0`` and ``x - x`` are not zero (x may be inf or nan). The one
rule that can change a bit is ``x + 0`` -> ``x``: -0.0 + 0 is +0.0.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple

import numpy as np

from .core import REGISTRY, Primitive
from .polynomials import Expansion, Polynomial


def __getattr__(name: str) -> Any:
    if name == "COMMUTATIVE":   # the registered commutative primitives, once all are
        return frozenset(p for p in REGISTRY.values() if p.commutative)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Operand(NamedTuple):
    """What the rules know about one input of an entry."""

    shape: tuple
    dtype: np.dtype | None          # None for a Python number (it takes the other's dtype)
    constant: bool                  # True when ``value`` is the input's value at every point
    value: Any = None
    prim: Primitive | None = None   # the primitive that computed it, if any
    inputs: tuple = ()              # ... its inputs
    attrs: dict | None = None       # ... and its attributes
    named: bool = False             # printed under a given name: no scale is folded into it


# ---------------------------------------------------------------- keys

LARGE = 4096   # constant arrays with more entries match only themselves (by identity)


def constant_key(x: Any) -> Hashable:
    """A hashable key equal for two constants exactly when they are interchangeable (a large
    array only for itself: its key is its identity, valid while the entry holding it lives)."""
    t = type(x)
    if t is float or t is int:
        return (t.__name__, repr(x))            # repr tells -0.0 from 0.0; nan matches nan
    if isinstance(x, (np.ndarray, np.generic)):
        arr = np.asarray(x)
        if arr.size > LARGE:        # hashing megabytes per entry would cost more than it saves
            return ("same array", id(x))
        return ("array", arr.dtype.str, arr.shape, arr.tobytes())
    if isinstance(x, (bool, int, float)):
        return (type(x).__name__, repr(x))
    return _freeze(x)


def operand_key(x: Any) -> Hashable:
    """How an input counts in a key: constants by value, anything else by identity/equality."""
    t = type(x)
    if t is float or t is int or t is np.ndarray or \
            isinstance(x, (np.ndarray, np.generic, bool, int, float)):
        return constant_key(x)
    return x


def attrs_key(attrs: dict | None) -> Hashable:
    """Attributes as a hashable key (arrays, slices, dtypes and nested tuples included)."""
    if not attrs:
        return ()
    if len(attrs) == 1:
        for k, v in attrs.items():
            return ((k, _freeze(v)),)
    return tuple(sorted((k, _freeze(v)) for k, v in attrs.items()))


def _plain(x: Any) -> bool:
    """True for attribute values that are their own key: None, an int, a str, or a tuple of
    ints (none equals the tagged key of another kind: ``1`` is not ``("bool", True)``)."""
    t = type(x)
    return x is None or t is int or t is str or t is tuple and all(type(i) is int for i in x)


def cse_key(prim: Primitive, inputs: Sequence[Any], attrs: dict | None) -> tuple:
    """The key under which an entry is one common subexpression: primitive, inputs, attrs."""
    n = len(inputs)
    if n == 2:
        ops: Any = (operand_key(inputs[0]), operand_key(inputs[1]))
        if prim.commutative:
            ops = frozenset(ops)    # (x, y) and (y, x) alike; {x} only comes from (x, x)
    else:
        ops = (operand_key(inputs[0]),) if n == 1 else tuple(operand_key(x) for x in inputs)
    return (prim, ops, attrs_key(attrs) if attrs else ())


def _freeze(x: Any) -> Hashable:
    if _plain(x):       # axes, shapes, flags: the common attributes, cheaply
        return x
    t = type(x)
    if t is bool:
        return ("bool", repr(x))
    if t is slice:
        return ("slice", _freeze(x.start), _freeze(x.stop), _freeze(x.step))
    if t is tuple:
        return ("tuple", *(_freeze(i) for i in x))
    if isinstance(x, (np.ndarray, np.generic, bool, int, float)):
        return constant_key(x)
    if x is None or x is Ellipsis or isinstance(x, str):
        return x
    if isinstance(x, np.dtype):
        return ("dtype", x.str)
    if isinstance(x, slice):
        return ("slice", _freeze(x.start), _freeze(x.stop), _freeze(x.step))
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, *(_freeze(i) for i in x))
    if isinstance(x, dict):
        return ("dict", attrs_key(x))
    try:
        hash(x)
    except TypeError:
        return ("id", id(x))    # unhashable and unknown: equal only to itself
    return ("object", x)


# ---------------------------------------------------------------- describing tape inputs

def describe_variable(x: Any) -> Operand:
    """An Operand for a tape input: a Variable (computed or leaf), a Python number or an array."""
    t = type(x)
    if t is float or t is int or t is bool or t is complex:
        return Operand((), None, True, x)
    if t is np.ndarray or isinstance(x, (np.ndarray, np.generic)):
        return Operand(np.shape(x), np.asarray(x).dtype, True, x)
    if isinstance(x, (bool, int, float, complex)):
        return Operand((), None, True, x)
    # an entry (its value may be freed: its shape and dtype stay) or a Variable
    return Operand(x.shape, x.dtype, False, None, x.prim, x.inputs, x.attrs)


# ---------------------------------------------------------------- the step


class Same(NamedTuple):
    """``simplified``'s answer for an entry equal to ``input`` (one of its inputs, or an input
    of the entry that computed one)."""

    input: Any


FOLD = "fold"   # ``simplified``'s answer for an entry of constants only: compute it once, now


def simplified(prim: Primitive, inputs: Sequence[Any], attrs: dict | None,
               describe: Callable[[Any], Operand] = describe_variable,
               argument: Callable[[Any], Any] | None = None, fold: bool = True,
               recording: bool = False, expansion: Expansion | None = None) -> Any:
    """One entry through the rules: ``FOLD`` (every input a constant; only with ``fold``),
    ``Same(x)`` (the entry equals x), or ``(prim, inputs, attrs, key)``, the equal entry to
    record and its CSE key. ``describe`` says what each input is; ``argument`` turns each
    input of a rewritten entry into the caller's kind (a Program's constant Ref for a value the
    rules made).

    ``recording``: tape inputs (entries, Variables, numbers, arrays) as an Ops records them,
    some of them entries, with the values plain recording gives, to the bit: the record's quick
    test first, no scale folded (reassociating rounds differently), and the rewrite before the
    identities, once (``-y + 0`` is ``0 - y``, +0.0 at y = 0 as recorded plainly, where the
    identity first gives -0.0); None when no rule changes the entry, and the key is left to
    the Ops (None), which keys only what it may share.

    ``expansion`` (``sg.simplify(prog, expand=True)``, which may add entries): an entry of a
    ring record (``Primitive.ring``) is first tried as a ``Polynomial`` of its inputs, the
    answer when one is formed (polynomials.py); inputs may be Polynomials, written out here
    for any other rule."""
    if expansion is not None:
        if prim.ring is not None:
            p = expansion.combine(prim, inputs)
            if p is not None:
                return p
        inputs = tuple(expansion.entry(x) if type(x) is Polynomial else x for x in inputs)
    if recording:
        quick = prim.simplifies
        if quick is None or not quick(prim, inputs, attrs):
            return None
        simpler = rewrite(prim, inputs, attrs, describe)
        if simpler is not None:
            prim, inputs, attrs = simpler
        same = reduces_to(prim, inputs, attrs, describe)
        if same is not None:
            return Same(same)
        return None if simpler is None else (prim, inputs, attrs, None)
    if fold and all(describe(x).constant for x in inputs):
        return FOLD
    for _ in range(3):      # a rewrite may open a fold, a fold an identity
        if prim.associative is not None:
            inputs = _fold_scale(prim, inputs, describe, argument)
        same = reduces_to(prim, inputs, attrs, describe)
        if same is not None:
            return Same(same)
        simpler = rewrite(prim, inputs, attrs, describe)
        if simpler is None:
            break
        prim, inputs, attrs = simpler
        if argument is not None:
            inputs = tuple(argument(x) for x in inputs)
    return prim, inputs, attrs, cse_key(prim, inputs, attrs)


def _fold_scale(prim: Primitive, inputs: Sequence[Any], describe: Callable,
                argument: Callable | None) -> Sequence[Any]:
    """``(x * c1) * c2`` as ``x * (c1 * c2)`` when c1 and c2 are Python numbers and x is not a
    constant (for any ``associative`` primitive; not into a named entry)."""
    if len(inputs) != 2:
        return inputs
    for i in (0, 1):
        c2 = _number(describe(inputs[1 - i]))
        if c2 is None:
            continue
        inner = describe(inputs[i])
        if inner.prim is not prim or inner.named:
            continue
        for j in (0, 1):
            c1 = _number(describe(inner.inputs[1 - j]))
            if c1 is not None and not describe(inner.inputs[j]).constant:
                c = prim.associative(c1, c2)
                return (inner.inputs[j], c if argument is None else argument(c))
    return inputs


def _number(d: Operand) -> Any:
    """The value of a constant that is a Python float or int, else None."""
    return d.value if d.constant and type(d.value) in (int, float) else None


# ---------------------------------------------------------------- identities
#
# A record states its identities (core.py): ``unit`` (``x * 1``), ``reduces(prim, inputs,
# attrs, describe)`` (the input it equals, or None), ``rewrites(prim, inputs, attrs,
# describe)`` (an equal ``(prim, inputs, attrs)``, or None) and ``simplifies(prim, inputs,
# attrs)``, the quick test on tape inputs (False: no rule can apply). The rules below are the
# ones several records share.


def may_simplify(prim: Primitive, inputs: Sequence[Any], attrs: dict | None) -> bool:
    """False when no rule of ``reduces_to`` or ``rewrite`` can apply to an entry of tape inputs
    (Variables, numbers, arrays): a quick test that spares describing them."""
    quick = prim.simplifies
    return quick is not None and quick(prim, inputs, attrs)


def reduces_to(prim: Primitive, inputs: Sequence[Any], attrs: dict | None,
               describe: Callable[[Any], Operand] = describe_variable) -> Any | None:
    """The input the entry equals exactly (``x * 1`` -> x, ``--x`` -> x, ...), or None."""
    unit = prim.unit
    if unit is not None:
        return _unit_side(inputs, describe, unit.value, unit.kept)
    rule = prim.reduces
    return None if rule is None else rule(prim, inputs, attrs or {}, describe)


def rewrite(prim: Primitive, inputs: Sequence[Any], attrs: dict | None,
            describe: Callable[[Any], Operand] = describe_variable) -> tuple | None:
    """An equal entry ``(prim, inputs, attrs)`` in a simpler form: ``x + x`` -> ``x * 2.0``,
    ``x * -1`` -> ``-x``, ``x + -y`` -> ``x - y``, ``x - -y`` -> ``x + y``."""
    rule = prim.rewrites
    return None if rule is None else rule(prim, inputs, attrs, describe)


def involution(prim: Primitive, inputs: Sequence[Any], attrs: dict, describe: Callable) -> Any:
    """x for ``f(f(x))`` (``--x``, ``~~m``)."""
    x = describe(inputs[0])
    return x.inputs[0] if x.prim is prim else None


def idempotent(prim: Primitive, inputs: Sequence[Any], attrs: dict, describe: Callable) -> Any:
    """x for ``f(x, x)`` of a computed bool x (``m & m``, ``m | m``)."""
    return _same_pair(inputs, describe)


def repeated_choice(prim: Primitive, inputs: Sequence[Any], attrs: dict,
                    describe: Callable) -> Any:
    """x for ``where(c, x, x)``; w for ``where(c, a, w)`` when w = where(c, a, ...) already
    (and the mirror image)."""
    return _where_reduces(prim, inputs, describe)


def same_shape(prim: Primitive, inputs: Sequence[Any], attrs: dict, describe: Callable) -> Any:
    """x for an expand or reshape of a computed x to its own shape."""
    x = describe(inputs[0])
    same = not x.constant and _target_shape(x.shape, attrs["shape"]) == tuple(x.shape)
    return inputs[0] if same else None


def reshapes_if_needed(prim: Primitive, inputs: Sequence[Any], attrs: dict) -> bool:
    """The quick test of ``same_shape``: a shape with -1, or the Variable's own."""
    x = inputs[0]
    if not hasattr(x, "prim"):
        return True
    shape = attrs["shape"]
    return -1 in shape or tuple(shape) == x.shape


def undone_transpose(prim: Primitive, inputs: Sequence[Any], attrs: dict,
                     describe: Callable) -> Any:
    """x when transposing it changes nothing, x's input when x is the inverse transpose."""
    return _undone_transpose(prim, inputs[0], attrs.get("axes"), describe)


def transposes_if_needed(prim: Primitive, inputs: Sequence[Any], attrs: dict) -> bool:
    """The quick test of ``undone_transpose``."""
    x, axes = inputs[0], attrs.get("axes") if attrs else None
    if not hasattr(x, "prim"):
        return True
    return x.prim is prim or len(x.shape) < 2 or axes is not None and \
        _permutation(axes, len(x.shape)) == tuple(range(len(x.shape)))


def unit_side(inputs: Sequence[Any], describe: Callable, unit: int, kept: tuple) -> Any:
    """inputs[i] for the first i in ``kept`` whose partner is the constant ``unit`` and does
    not change its shape or dtype."""
    return _unit_side(inputs, describe, unit, kept)


def number_beside(inputs: Sequence[Any]) -> tuple[Any, Any, bool] | None:
    """For two tape inputs of which one is a constant: (the constant, the other, whether the
    second input is a constant), the first input when both are; None for two Variables."""
    a, b = inputs
    ca, cb = not hasattr(a, "prim"), not hasattr(b, "prim")
    if not (ca or cb):
        return None
    return (a, b, cb) if ca else (b, a, True)


def is_number(c: Any) -> bool:
    """A Python float or int (arrays make the quick tests answer True: the rules look)."""
    return type(c) is float or type(c) is int


def _same_pair(inputs: Sequence[Any], describe: Callable) -> Any:
    """x for ``x & x`` and ``x | x`` (a computed bool x)."""
    if operand_key(inputs[0]) != operand_key(inputs[1]):
        return None
    x = describe(inputs[0])
    return None if x.constant or x.dtype != np.dtype(bool) else inputs[0]


def _where_reduces(prim: Primitive, inputs: Sequence[Any], describe: Callable) -> Any:
    """x for ``where(c, x, x)``; w for ``where(c, a, w)`` when w = where(c, a, ...) already
    (and the mirror image), provided the result keeps that input's shape."""
    cond, x, y = inputs
    c = describe(cond)
    if operand_key(x) == operand_key(y):
        return _keeps_shape(x, describe, c)
    for inner, taken in ((y, 1), (x, 2)):
        w = describe(inner)
        if w.prim is prim and operand_key(w.inputs[0]) == operand_key(cond) and \
                operand_key(w.inputs[taken]) == operand_key(inputs[taken]):
            return _keeps_shape(inner, describe, c, describe(inputs[taken]))
    return None


def _keeps_shape(x: Any, describe: Callable, *others: Operand) -> Any:
    d = describe(x)
    if d.constant:
        return None
    shapes = [tuple(d.shape)] + [tuple(o.shape) for o in others]
    return x if np.broadcast_shapes(*shapes) == tuple(d.shape) else None


def _unit_side(inputs: Sequence[Any], describe: Callable, unit: int, kept: tuple) -> Any:
    """inputs[i] for the first i in ``kept`` whose partner is the constant ``unit`` and does
    not change its shape or dtype."""
    for i in kept:
        c = describe(inputs[1 - i])
        if not c.constant or not _all_equal(c.value, unit):
            continue
        x = describe(inputs[i])
        if x.constant:
            continue
        if c.dtype is None:
            same_dtype = np.result_type(x.dtype, c.value) == x.dtype
        else:
            same_dtype = np.result_type(x.dtype, c.dtype) == x.dtype
        if same_dtype and np.broadcast_shapes(tuple(x.shape), tuple(c.shape)) == tuple(x.shape):
            return inputs[i]
    return None


def _all_equal(value: Any, unit: int) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return value == unit
    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf" or arr.size and arr.flat[0] != unit:    # (quick: most differ)
        return False
    return bool((arr == unit).all())


def _target_shape(shape: tuple, target: tuple) -> tuple:
    """``target`` with a -1 resolved against ``shape``'s number of entries."""
    target = tuple(int(n) for n in target)
    if -1 not in target:
        return target
    known = int(np.prod([n for n in target if n != -1]))
    size = int(np.prod(shape))
    return tuple(size // known if known and n == -1 else n for n in target)


def _permutation(axes: Any, ndim: int) -> tuple:
    return tuple(range(ndim))[::-1] if axes is None else tuple(int(a) % ndim for a in axes)


def _undone_transpose(prim: Primitive, x: Any, axes: Any, describe: Callable) -> Any:
    """x when transposing it changes nothing, x's input when x is the inverse transpose."""
    d = describe(x)
    ndim = len(d.shape)
    outer = _permutation(axes, ndim)
    if outer == tuple(range(ndim)):
        return None if d.constant else x
    if d.prim is not prim:
        return None
    inner = _permutation(d.attrs.get("axes") if d.attrs else None, ndim)
    # transpose(transpose(y, inner), outer) has axis k of y's axis inner[outer[k]]
    if all(inner[outer[k]] == k for k in range(ndim)):
        return d.inputs[0]
    return None
