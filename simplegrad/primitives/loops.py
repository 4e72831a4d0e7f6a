"""Loops and branches as primitives: ``cond`` (``sg.cond``, ``sg.switch``), ``scan``
(``sg.scan``, ``sg.fori_loop``) and ``while_loop`` (``sg.while_loop``).

Each is ONE entry whose attributes hold the body (and a ``while_loop``'s condition, a
``cond``'s branches) as a sub-program recorded once: an object of the ``Body`` protocol below
(transforms/loops.py builds them from the user's functions). The entry's inputs are the
leaves of the operands, in the order ``consts | carry | xs`` (a scan; ``[trip count]`` last
when its length is a recorded value), ``index | operands`` (a cond) or ``consts | carry`` (a
while loop); its output is ONE array holding every output leaf ("the packed output"): row 0
holds the final carry (a branch's outputs), each leaf raveled at its column offset
(``layout``), rows 1.. the per-step outputs ``ys`` of a scan, one row per step. Recorded
``loop_part`` entries take the leaves (or blocks of columns) out of it.

The rules are loops of the body's rules, recorded through these same primitives, so the
derivative of a loop is a loop and the next order is taken the same way:

- a scan's vjp records a scan that keeps the carry before each step (the history), then a
  reverse scan of the body's vjp over it, the consts' cotangents summed in its carry;
- a while loop's vjp is the vjp of the scan of its body over its recorded trip count (an
  output of the entry): a replay with another input runs as many reverse steps as the
  forward took (``checkpoints="all"``: the history holds every carry);
- a jvp rule is the loop of the body's jvp (the carry carries its tangent), a Taylor rule
  the loop of the body's Taylor rule (the carry carries its coefficients), a cond's rules
  the cond of the branches' rules.

Under vmap a scan runs the body vmapped (``Body.batched``): one loop for the whole batch,
every carry batched and batched xs with the steps first; a cond with a batched predicate runs
every branch on the batch and selects each example's (as JAX does; a shared one: a cond of
the vmapped branches). a vmapped ``while_loop`` is one loop of the body vmapped, running until
every example's condition fails, each example keeping its own trip count (one carried
integer each; an example done carries its values unchanged).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..errors import DTypeError, ShapeError
from .core import JOINT, JOINTLY, REGISTRY, Case, Linear, Primitive, register, shape_of, value_of
from .lazy import dask_array, is_lazy, refuse
from .schema import (
    BOOL,
    DTYPE,
    MAX_RANK,
    SHAPE,
    ShapeRuleError,
    attrs,
    integer,
    ints,
    is_held_int,
    need,
)

if TYPE_CHECKING:
    from . import PrimitiveMethods

Aval = tuple[tuple, np.dtype]       # (shape, dtype) of one leaf


class Body(Protocol):
    """A sub-program with flat inputs and outputs (transforms/loops.py makes them).

    ``ins`` and ``outs`` are the leaves' (shape, dtype); ``example`` values for ``ins`` (what
    it was traced at). Derived bodies are traced once and kept: ``vjp(wrt)`` takes ``ins``
    then one cotangent per float output and returns the cotangents of the inputs at ``wrt``;
    ``jvp(moving)`` takes ``ins`` then one tangent per input at ``moving`` and returns
    ``outs`` then one tangent per float output; ``split(wrt, nc, nk)`` that vjp split where it
    reads its cotangents (its ``forward`` the body keeping the values its ``pullback`` reads,
    its ``fixed`` those of the consts alone; None: no split); ``derive(key, ins, example,
    build)`` is the body traced from ``build(o, *leaves)`` (a list of outputs, computed with
    primitives); ``lines(explain)`` its text, as a program prints (explained: each line that
    differentiates a line of the body it was derived from says which, ``notes()``);
    ``simplified()`` the body simplified; ``batched(flags, size)`` the body on ``size``
    examples at once (inputs at ``flags`` batched along a leading axis, every output);
    ``work()`` the entries one run of it computes (its loops' counted by their trips);
    ``dependence(*values)`` its Jacobian pattern at these inputs (a boolean csr_array, its
    outputs' entries by its float inputs', each concatenated) and ``reads_integers()``
    whether that pattern may change with its integer inputs' values."""

    program: Any
    ins: tuple[Aval, ...]
    outs: tuple[Aval, ...]
    example: tuple
    name: str

    def __call__(self, *values: Any) -> list: ...

    def record(self, o: PrimitiveMethods, *inputs: Any) -> list: ...

    def vjp(self, wrt: tuple[int, ...]) -> Body: ...

    def jvp(self, moving: tuple[int, ...]) -> Body: ...

    def split(self, wrt: tuple[int, ...], nc: int, nk: int) -> Any: ...

    def derive(self, key: tuple, ins: Sequence[Aval], example: Sequence[Any],
               build: Any) -> Body: ...

    def lines(self, explain: bool = False) -> list[str]: ...

    def notes(self) -> dict[str, str]: ...

    def simplified(self) -> Body: ...

    def batched(self, flags: tuple[bool, ...], size: int) -> Body: ...

    def work(self) -> int: ...

    def dependence(self, *values: Any) -> Any: ...

    def reads_integers(self) -> bool: ...


# ---------------------------------------------------------------- the packed output


def is_float(aval: Aval) -> bool:
    """Whether a leaf of this (shape, dtype) carries derivatives."""
    return np.dtype(aval[1]).kind in "fc"


def ones(shape: tuple, dtype: Any) -> np.ndarray:
    """An example value of ones for tracing a derived body: a read-only view of one number
    (a body keeps its examples; this one holds no array of the leaf's size)."""
    return np.broadcast_to(np.ones((), dtype), shape)


def size_of(aval: Aval) -> int:
    """The number of entries of a leaf."""
    return math.prod(aval[0])


def layout_of(*groups: Sequence[Aval]) -> tuple[tuple[int, ...], int]:
    """Column offsets of each group's leaves packed side by side (every group from column 0:
    the carry in row 0, the ys in the rows after), and the width."""
    offsets, width = [], 1
    for group in groups:
        col = 0
        for aval in group:
            offsets.append(col)
            col += size_of(aval)
        width = max(width, col)
    return tuple(offsets), width


def packed_dtype(avals: Sequence[Aval]) -> np.dtype:
    """The dtype of a packed output: float64, or complex128 when a leaf is complex."""
    return np.result_type(np.float64, *(np.dtype(a[1]) for a in avals))


def pack(rows: int, width: int, dtype: np.dtype, carry: Sequence[Any], offsets: Sequence[int],
         ys: Sequence[Any] = (), ys_offsets: Sequence[int] = ()) -> np.ndarray:
    """The packed output (numpy): ``carry`` in row 0, ``ys`` (stacked, one row per step) after
    (a lazy array among them: a lazy packed output, nothing computed)."""
    if any(is_lazy(x) for x in (*carry, *ys)):
        top = _columns([np.reshape(c, (1, -1)) for c in carry], offsets, 1, width, dtype)
        if rows == 1:
            return top
        rest = _columns([np.reshape(y, (rows - 1, -1)) for y in ys], ys_offsets, rows - 1,
                        width, dtype)
        return np.concatenate([top, rest], axis=0)
    out = np.zeros((rows, width), dtype)
    for c, k in zip(carry, offsets):
        flat = np.ravel(c)
        out[0, k:k + flat.size] = flat
    for y, k in zip(ys if rows > 1 else (), ys_offsets):     # (no steps: no ys to place)
        flat = np.reshape(y, (rows - 1, -1))
        out[1:, k:k + flat.shape[1]] = flat
    return out


def _columns(flats: Sequence[Any], offsets: Sequence[int], rows: int, width: int,
             dtype: np.dtype) -> Any:
    """Rows of a packed output made by concatenation (each leaf's columns at its offset,
    zeros between): how a lazy one is built."""
    pieces, col = [], 0
    for flat, k in sorted(zip(flats, offsets), key=lambda p: p[1]):
        if k > col:
            pieces.append(np.zeros((rows, k - col), dtype))
        pieces.append(flat.astype(dtype))
        col = k + flat.shape[1]
    if col < width:
        pieces.append(np.zeros((rows, width - col), dtype))
    return np.concatenate(pieces, axis=1)


def unpack(o: PrimitiveMethods, out: Any, avals: Sequence[Aval], offsets: Sequence[int],
           stacked: bool = False, cast: bool = True) -> list:
    """The leaves of a packed output, by recorded ``part`` entries: the carry's from row 0,
    or (``stacked``) the ys' from the rows after, with a leading step axis."""
    leaves = []
    for (shape, dtype), k in zip(avals, offsets):
        part = o.apply(PART, (out,), {"offset": int(k), "shape": tuple(shape),
                                      "stacked": bool(stacked)}, None)
        if cast and np.dtype(dtype) != part.dtype:
            part = o.apply(ASTYPE, (part,), {"dtype": np.dtype(dtype)}, None) \
                if np.dtype(dtype).kind in "biu" else o.cast(part, np.dtype(dtype))
        leaves.append(part)
    return leaves


# A leaf of a packed output and its adjoint (the cotangent placed in zeros of the packed
# output's shape, read from it when the entry runs): a pair of linear primitives, each the
# other's vjp, whose shapes follow a replay's number of steps.

def _index(offset: int, n: int, stacked: bool, lead: int, rows: bool = False) -> tuple:
    first = slice(None) if rows else slice(1, None) if stacked else 0
    return (slice(None),) * lead + (first, slice(offset, offset + n))


def _rows(shape: tuple, stacked: bool, lead: int, rows: bool) -> tuple:
    """The row axis a part of a packed output of ``shape`` keeps: every row (``rows``: a
    block of columns), the ys' rows (``stacked``), or none."""
    return (shape[lead],) if rows else (shape[lead] - 1,) if stacked else ()


def _part(x: Any, offset: int, shape: tuple, stacked: bool, rows: bool = False,
          lead: int = 0) -> Any:
    n = math.prod(shape)
    if len(np.shape(x)) != lead + 2:
        raise ShapeError(f"loop_part: x has shape {np.shape(x)}, not a packed output's")
    part = x[_index(offset, n, stacked, lead, rows)]
    return np.reshape(part, (*x.shape[:lead], *_rows(np.shape(x), stacked, lead, rows),
                             *shape))


def _placed(g: Any, like: Any, offset: int, shape: tuple, stacked: bool, rows: bool = False,
            lead: int = 0) -> Any:
    # (like's value: a recorded sweep hands the rule a Variable whose value is kept, so
    # loop_part saves its input; a lazy like keeps its own shape)
    full = tuple(np.shape(like if dask_array(like) is not None else np.asarray(like)))
    n = math.prod(shape)
    if len(full) != lead + 2:
        raise ShapeError(f"loop_placed: like has shape {full}, not a packed output's")
    block = np.reshape(g, (*full[:lead], *_rows(full, stacked, lead, rows), n))
    if not rows and not stacked:
        block = np.reshape(block, (*full[:lead], 1, n))
    top = 1 if stacked and not rows else 0
    width = ((offset, full[-1] - offset - n),)
    pads = ((0, 0),) * lead + ((top, full[lead] - top - np.shape(block)[lead]),) + width
    dtype = np.result_type(_dtype(g), _dtype(like))
    if type(block) is np.ndarray and dask_array(like) is None:     # (np.pad's cost, 10 us, not)
        out = np.zeros(full, dtype)
        out[(slice(None),) * lead + (slice(top, top + block.shape[lead]),
                                     slice(offset, offset + n))] = block
        return out
    out = np.pad(block, pads)       # (np.pad dispatches: a lazy g stays lazy)
    if dask_array(like) is not None and dask_array(out) is None:
        out = out + np.zeros_like(like)         # (and one like a lazy like)
    return out if _dtype(out) == dtype else out.astype(dtype)


def columns(o: PrimitiveMethods, x: Any, start: int, stop: int) -> Any:
    """Columns start..stop of a packed output, every row: a part whose rows follow the
    trips of a replay (a getitem's adjoint would fix them at the recorded ones)."""
    return o.apply(PART, (x,), {"offset": int(start), "shape": (int(stop - start),),
                                "stacked": False, "rows": True}, None)


def _fmt_part(args: list[str], attrs: dict, render: Any) -> str:
    k, n, lead = attrs["offset"], math.prod(attrs["shape"]), attrs.get("lead", 0)
    axes = ":, " * lead
    if attrs.get("rows"):
        block = f"{args[0]}[{axes}:, {k}:{k + n}]"
        shape = attrs["shape"]
        if len(shape) == 1:
            return block
        return f"{block}.reshape({[-1, *shape]})" if not lead else \
            f"{block}.reshape({args[0]}.shape[:{lead}] + {(-1, *shape)})"
    if attrs["stacked"]:
        return f"{args[0]}[{axes}1:, {k}:{k + n}].reshape({[-1, *attrs['shape']]})"
    return f"{args[0]}[{axes}0, {k}:{k + n}].reshape({list(attrs['shape'])})"


def _deeper(attrs: dict) -> dict:
    return dict(attrs, lead=attrs.get("lead", 0) + 1)


def _both_batched(o: PrimitiveMethods, xs: Sequence[Any], batched: Sequence[bool]) -> list:
    size = next(shape_of(x)[0] for x, b in zip(xs, batched) if b)
    return [x if b else o.expand(o.reshape(x, (1, *shape_of(x))), (size, *shape_of(x)))
            for x, b in zip(xs, batched)]


# ---------------------------------------------------------------- attributes and shape rules
#
# A body attribute is checked as a sub-program (the Body protocol's fields); the shape rules
# check the bodies against the entry's inputs (their number, shapes and dtypes) and give the
# packed output's shape: a scan's rows follow its trip count (recorded in ``length``).


def is_body(v: Any) -> bool:
    """Whether ``v`` is a sub-program an entry can hold (the ``Body`` protocol's fields)."""
    return all(hasattr(v, k) for k in ("program", "ins", "outs", "example", "name")) and \
        callable(v) and all(type(a) is tuple and len(a) == 2 and type(a[0]) is tuple and
                            isinstance(a[1], np.dtype) for a in (*v.ins, *v.outs))


def BODY(v: Any, shapes: Sequence[tuple]) -> str | None:  # noqa: N802 (a check's name)
    """A sub-program (a loop's body or condition)."""
    return None if is_body(v) else "must be a sub-program (a loop's body)"


def BRANCHES(v: Any, shapes: Sequence[tuple]) -> str | None:  # noqa: N802
    """A non-empty tuple of sub-programs (a cond's branches)."""
    return None if type(v) is tuple and v and all(is_body(b) for b in v) else \
        "must be a non-empty tuple of sub-programs (the branches)"


def CHECKPOINTS(v: Any, shapes: Sequence[tuple]) -> str | None:  # noqa: N802
    """"all", or a number of carries to keep (1 or more)."""
    return None if v == "all" and type(v) is str or is_held_int(v) and v >= 1 else \
        'must be "all" or an int >= 1'


def _steps_or_none(v: Any, shapes: Sequence[tuple]) -> str | None:
    return None if v is None else integer(0, 2**62)(v, shapes)


def _refuse(why: str) -> ShapeRuleError:
    return ShapeRuleError(why)


def _takes(what: str, avals: Sequence[Aval], shapes: Sequence[tuple],
           dtypes: Sequence[Any]) -> None:
    """Inputs of these shapes and dtypes are the ones ``avals`` declares."""
    if len(avals) != len(shapes):
        raise _refuse(f"{what} takes {len(avals)} input(s), the entry gives {len(shapes)}")
    for k, ((shape, dtype), s, d) in enumerate(zip(avals, shapes, dtypes)):
        if tuple(s) != tuple(shape) or not np.can_cast(np.dtype(d), dtype, "safe"):
            raise _refuse(f"{what}'s input {k} is {tuple(shape)} {np.dtype(dtype)}, the entry "
                          f"gives {tuple(s)} {np.dtype(d) if not isinstance(d, type) else d}")


def _dtype(v: Any) -> np.dtype:
    """A value's dtype (an array of another library's without converting it)."""
    d = getattr(v, "dtype", None)
    return np.dtype(d) if d is not None else np.result_type(v)


def given(what: str, avals: Sequence[Aval], values: Sequence[Any]) -> list:
    """A forward's check: the values have the shapes ``avals`` declares and dtypes numpy
    casts to theirs safely (what the shape rule checks on the declarations); cast to them."""
    if len(values) != len(avals):
        raise ShapeError(f"{what} takes {len(avals)} input(s), got {len(values)}")
    out = []
    for k, ((shape, dtype), v) in enumerate(zip(avals, values)):
        if np.shape(v) != tuple(shape) or not np.can_cast(_dtype(v), dtype, "safe"):
            error = ShapeError if np.shape(v) != tuple(shape) else DTypeError
            raise error(f"{what}'s input {k} must be {tuple(shape)} {dtype}, got "
                        f"{np.shape(v)} {_dtype(v)}")
        out.append(_as(v, dtype))
    return out


def _as(v: Any, dtype: Any) -> Any:
    """v in ``dtype`` (a lazy array stays lazy)."""
    if getattr(v, "dtype", None) == dtype:
        return v
    return v.astype(dtype) if is_lazy(v) else np.asarray(v, dtype)


def _fits(layout: tuple, width: int, groups: Sequence[Sequence[Aval]]) -> None:
    """The layout places every leaf inside the width."""
    avals = [a for g in groups for a in g]
    if len(layout) != len(avals):
        raise _refuse(f"the layout places {len(layout)} leaves, the bodies have {len(avals)}")
    for k, a in zip(layout, avals):
        if k + size_of(a) > width:
            raise _refuse(f"a leaf at column {k} of {size_of(a)} entries passes the width "
                          f"{width}")


def scan_shape(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """A scan's packed output: (1 + steps when it has ys, width)."""
    body, nc, nk, counted = attrs["body"], attrs["nc"], attrs["nk"], attrs["counted"]
    nx = len(shapes) - nc - nk - counted
    if nx < 0:
        raise _refuse(f"{len(shapes)} input(s) for {nc} const(s) and {nk} carries")
    n = attrs["length"]
    seqs = shapes[nc + nk:nc + nk + nx]
    if any(not x for x in seqs) or len({x[0] for x in seqs}) > 1:
        raise _refuse(f"xs of shapes {list(seqs)}: each needs the same leading axis")
    if seqs and not counted:
        n = seqs[0][0]          # (as many steps as the xs have)
    if n is None:
        raise _refuse("a scan records its number of steps in length")
    if counted and (shapes[-1] != () or np.dtype(dtypes[-1]).kind not in "iu"):
        raise _refuse("a counted scan's last input is its trip count, an integer scalar")
    steps = [tuple(s[1:]) for s in seqs]
    _takes("the body", body.ins, [*shapes[:nc + nk], *steps],
           [*dtypes[:nc + nk], *dtypes[nc + nk:nc + nk + nx]])
    if len(body.outs) < nk or [a for a in body.outs[:nk]] != list(body.ins[nc:nc + nk]):
        raise _refuse("the body's carry out is not its carry in")
    _fits(attrs["layout"], attrs["width"], [body.outs])
    ny = len(body.outs) - nk
    return (1 + (n if ny else 0), attrs["width"]), packed_dtype(body.outs)


def while_shape(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """A while loop's packed output: (1, width), the trip count last."""
    body, test = attrs["body"], attrs["test"]
    _takes("the body", body.ins, shapes, dtypes)
    _takes("the condition", test.ins, shapes, dtypes)
    nc = attrs["nc"]
    if list(body.outs) != list(body.ins[nc:]):
        raise _refuse("the body's carry out is not its carry in")
    if len(test.outs) != 1 or test.outs[0][0] != () or test.outs[0][1].kind not in "biu":
        raise _refuse("the condition must give one bool scalar")
    count = ((), np.dtype(np.int64))
    _fits(attrs["layout"], attrs["width"], [[*body.outs, count]])
    return (1, attrs["width"]), packed_dtype((*body.outs, count))


def cond_shape(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """A cond's packed output: (1, width)."""
    branches = attrs["branches"]
    if shapes[0] != () or np.dtype(dtypes[0]).kind not in "biu":
        raise _refuse("a cond's first input is its index, an integer or bool scalar")
    for k, b in enumerate(branches):
        _takes(f"branch {k}", b.ins, shapes[1:], dtypes[1:])
        if list(b.outs) != list(branches[0].outs):
            raise _refuse(f"branch {k}'s outputs differ from branch 0's")
    _fits(attrs["layout"], attrs["width"], [branches[0].outs])
    return (1, attrs["width"]), packed_dtype(branches[0].outs)


def part_shape(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """A leaf of a packed output: its shape (a step axis first when stacked)."""
    x, lead, every = shapes[0], attrs.get("lead", 0), attrs.get("rows", False)
    n = math.prod(attrs["shape"])
    if len(x) != lead + 2 or attrs["offset"] + n > x[-1] or attrs["stacked"] and x[lead] < 1 \
            or every and (attrs["stacked"] or not attrs["shape"]):
        raise _refuse(f"no leaf of {n} entries at column {attrs['offset']} of a packed output "
                      f"of shape {x}")
    return (*x[:lead], *_rows(x, attrs["stacked"], lead, every), *attrs["shape"]), dtypes[0]


def placed_shape(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """A leaf's cotangent placed in a packed output's shape."""
    part, _ = part_shape(shapes[1:], dtypes[1:], attrs)
    if tuple(shapes[0]) != part:
        raise _refuse(f"a leaf of shape {part} placed from one of shape {shapes[0]}")
    return tuple(shapes[1]), np.result_type(*dtypes)


def astype_shape(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """The input's shape, the dtype given."""
    return tuple(shapes[0]), attrs["dtype"]


LOOP_ATTRS = {"layout": need(ints(lo=0)), "width": need(integer(1, 2**62)),
              "linear_in": ints(lo=0)}
PART_CHECKS = {"offset": need(integer(0, 2**62)), "shape": need(SHAPE), "stacked": need(BOOL),
               "lead": integer(0, MAX_RANK), "rows": BOOL}


PART = register(Primitive(
    "loop_part", _part,
    [lambda o, g, out, x, **a: o.apply(PLACED, (g, x), a, None)],
    lambda o, ts, out, x, **a: o.apply(PART, (ts[0],), a, None), _fmt_part, [],
    batch=lambda o, xs, batched, **a: o.apply(PART, tuple(xs), _deeper(a), None),
    linear=JOINTLY, schema=attrs(shape_rule=part_shape, **PART_CHECKS), saves=(0,)))

PLACED = register(Primitive(
    "loop_placed", _placed,
    [lambda o, g, out, y, like, **a: o.apply(PART, (g,), a, None), None],
    lambda o, ts, out, y, like, **a: None if ts[0] is None else
    o.apply(PLACED, (ts[0], like), a, None),
    lambda args, attrs, render: f"placed({args[0]}, like={args[1]})", [],
    batch=lambda o, xs, batched, **a: o.apply(PLACED, tuple(_both_batched(o, xs, batched)),
                                              _deeper(a), None),
    linear=Linear(JOINT, (0,)), schema=attrs(shape_rule=placed_shape, **PART_CHECKS),
    saves=()))


# an integer or bool leaf taken out of a packed output: no gradient or tangent flows


def _astype(x: Any, dtype: np.dtype) -> Any:
    """x as ``dtype``; a float to an integer rounded to the nearest (a packed trip count)."""
    if _dtype(x).kind in "fc" and np.dtype(dtype).kind in "iu":
        x = np.rint(np.real(x))         # (numpy functions: a lazy x stays lazy)
    return x.astype(dtype) if hasattr(x, "astype") else np.asarray(x).astype(dtype)


ASTYPE = register(Primitive(
    "loop_astype", _astype, [None],
    lambda o, ts, out, x, dtype: None, "{0}.astype({dtype})",
    [Case(((3,),), {"dtype": np.dtype(np.int64)}), Case(((2, 2),), {"dtype": np.dtype(bool)})],
    differentiable=False,
    batch=lambda o, xs, batched, **a: o.apply(ASTYPE, tuple(xs), a, None),
    schema=attrs(shape_rule=astype_shape, dtype=need(DTYPE)), saves=()))


def fmt_loop(kind: str) -> Any:
    """Print rule: ``kind(bodies, inputs...)`` with the trip count
    (``v7 = scan(body, v3, xs)  # x 100``: a scan's length; a counted scan's and a while
    loop's, the count of the run it was recorded with, where it is known), the body (and a
    cond's branches, a while loop's condition) printed once below, indented
    (``render(body, "body")``: its lines, as the trace around prints them)."""
    def fmt(args: list[str], attrs: dict, render: Any) -> str:
        extra = ""
        if attrs.get("reverse"):
            extra += ", reverse=True"
        if attrs.get("max_steps") is not None:
            extra += f", max_steps={attrs['max_steps']}"
        parts = [("cond", attrs["test"])] if "test" in attrs else []
        if "body" in attrs:
            parts.append(("body", attrs["body"]))
        parts += [(f"branch {k}", b) for k, b in enumerate(attrs.get("branches", ()))]
        names = [f"{body!r}" for _, body in parts]
        if "branches" in attrs:         # cond(index, [branches], operands...)
            head = f"{kind}({', '.join([args[0], '[' + ', '.join(names) + ']', *args[1:]])}"
        else:
            head = f"{kind}({', '.join([*names, *args])}"
        head += f"{extra})"
        trips = attrs.get("length") if kind == "scan" else attrs.get("trips")
        if trips is not None:
            head += f"  # x {trips}"
        lines = [head]
        for title, body in parts:
            lines.append(f"    {title} {body!r}:")
            lines += [f"        {line}" for line in render(body, "body").split("\n")]
        return "\n".join(lines)
    return fmt


# ---------------------------------------------------------------- all cotangents at once
#
# A variadic vjp rule is asked for one input's cotangent at a time, the calls for one entry
# following each other with the same ``g``: the first computes every input's (one reverse
# loop) and the others read them here, until the sweep is done with the entry (``release``).

_LAST = threading.local()


def _all_cotangents(compute: Any, o: PrimitiveMethods, g: Any, out: Any, i: int,
                    xs: tuple, attrs: dict) -> Any:
    held = getattr(_LAST, "held", None)
    if held is None or held[0] is not out or held[1] is not g or held[2] is not o:
        cts = compute(o, g, out, xs, attrs)
        _LAST.held = held = (out, g, o, cts)
    return held[3][i]


def release() -> None:
    """Let go of the cotangents held for the entry just pulled back (and of its Ops)."""
    _LAST.held = None


# ---------------------------------------------------------------- the carries' history
#
# A loop recorded where a gradient may follow (transforms/loops.py: an input requires grad)
# keeps the carry before each step as its forward runs, beside its packed output and for as
# long as that array lives; a reverse sweep on values reads it instead of running the body
# again (a recorded sweep records the history scan: its derivatives need it as a program).

_KEEP = threading.local()
_HISTORY: dict[int, tuple] = {}


@contextmanager
def keeping_history(wants: Sequence[bool] = ()) -> Iterator[None]:
    """Scope in which the next loop forward run keeps its carries' history (``wants``: which
    of its inputs require grad, the only ones a sweep asks a cotangent for)."""
    _KEEP.on = tuple(bool(w) for w in wants)
    try:
        yield
    finally:
        _KEEP.on = None


def _keeps() -> tuple | None:
    """The inputs' wants when this forward keeps its history, else None (once: loops inside
    its body keep none)."""
    on = getattr(_KEEP, "on", None)
    _KEEP.on = None
    return on


def _kept(out: np.ndarray, carries: list, wants: tuple = (), split: Any = None,
          residuals: list | None = None) -> None:
    key = id(out)
    _HISTORY[key] = (weakref.ref(out, lambda _: _HISTORY.pop(key, None)), carries, wants,
                     split, residuals)


def _kept_run(out: Any, n: int) -> tuple | None:
    """(the carries before each step, the inputs' wants, the body's split vjp and the values
    its pullback reads at each step, or None twice) kept by the forward that made ``out``,
    or None."""
    got = _HISTORY.get(id(out))
    if got is None or got[0]() is not out or len(got[1]) != n:
        return None
    return got[1:]


def _forget_run(out: Any) -> None:
    """Let go of what the forward that made ``out`` (an entry's value, or the entry) kept."""
    raw = getattr(out, "raw", out)
    got = _HISTORY.get(id(raw))
    if got is not None and got[0]() is raw:
        del _HISTORY[id(raw)]


def _wrt(body: Any, nc: int, nk: int, nx: int, asks: Any) -> tuple[list, list, list]:
    """The float consts, carries and xs a scan's vjp pulls back to (``asks(j)``: whether
    input j may take a cotangent)."""
    return ([j for j in range(nc) if is_float(body.ins[j]) and asks(j)],
            [j for j in range(nk) if is_float(body.outs[j])],
            [j for j in range(nx) if is_float(body.ins[nc + nk + j]) and asks(nc + nk + j)])


def history_of(out: Any, avals: Sequence[Aval], n: int) -> list | None:
    """The carries before each step kept by the forward that made ``out``, stacked per
    leaf, or None."""
    got = _kept_run(out, n)
    if got is None:
        return None
    return [np.stack([np.asarray(c[j], dtype) for c in got[0]]) if n else
            np.zeros((0, *shape), dtype) for j, (shape, dtype) in enumerate(avals)]


# ---------------------------------------------------------------- linearity
#
# A loop made by a jvp rule is linear, jointly, in the tangents it takes (its body is the
# body's jvp): the rule records their positions in ``linear_in``; other loops are not linear.

IN_TANGENTS = Linear(JOINT, lambda attrs: attrs["linear_in"],
                     lambda attrs: attrs.get("linear_in") is not None)


def _plain(attrs: dict) -> dict:
    """A loop's attributes for a loop derived from it (its linearity, and the trips its
    recorded run took, are the new one's)."""
    return {k: v for k, v in attrs.items() if k != "linear_in" and k != "trips"}


def _tangents_at(*runs: tuple[int, int]) -> tuple[int, ...]:
    """The positions of the tangent inputs: (start, count) runs."""
    return tuple(k for start, count in runs for k in range(start, start + count))


# ---------------------------------------------------------------- cond


def cond_forward(index: Any, *operands: Any, branches: tuple, layout: tuple, width: int,
                 each: bool = False, linear_in: tuple | None = None) -> Any:
    """The packed outputs of the branch ``index`` picks (clamped to the branches)."""
    if dask_array(index, *operands) is not None:
        refuse("cond", index, *operands, reason="its branches run on values")
    if np.shape(index) != () or _dtype(index).kind not in "biu":
        raise ShapeError(f"cond: the index must be an integer or bool scalar, got "
                         f"{np.shape(index)} {_dtype(index)}")
    operands = given("cond: the branches", branches[0].ins, operands)
    k = min(max(int(np.asarray(index)), 0), len(branches) - 1)
    res = branches[k](*operands)
    return pack(1, width, packed_dtype(branches[0].outs), res, layout)


def _cond_cotangents(o: PrimitiveMethods, g: Any, out: Any, xs: tuple, attrs: dict) -> list:
    branches = attrs["branches"]
    first = branches[0]
    index, operands = xs[0], xs[1:]
    wrt = tuple(j for j, a in enumerate(first.ins) if is_float(a))
    if not wrt:
        return [None] * len(xs)
    floats = [j for j, a in enumerate(first.outs) if is_float(a)]
    gs = unpack(o, g, [first.outs[j] for j in floats], [attrs["layout"][j] for j in floats])
    backs = tuple(b.vjp(wrt) for b in branches)
    avals = [first.ins[j] for j in wrt]
    offsets, width = layout_of(avals)
    ct = o.apply(COND, (index, *operands, *gs),
                 {"branches": backs, "layout": offsets, "width": width, **_each(attrs)}, None)
    cts: list = [None] * len(xs)
    for j, c in zip(wrt, unpack(o, ct, avals, offsets)):
        cts[1 + j] = c
    return cts


def _each(attrs: dict) -> dict:
    """A derived cond's ``each`` (vmapped once per example) as the cond's."""
    return {"each": True} if attrs.get("each") else {}


def cond_vjp(o: PrimitiveMethods, g: Any, out: Any, i: int, *xs: Any, **attrs: Any) -> Any:
    """The cotangent of operand i: the cond of the branches' vjps."""
    if i == 0:
        return None
    return _all_cotangents(_cond_cotangents, o, g, out, i, xs, attrs)


def cond_jvp(o: PrimitiveMethods, ts: Sequence[Any], out: Any, *xs: Any, **attrs: Any) -> Any:
    """The output's tangent: the cond of the branches' jvps."""
    branches = attrs["branches"]
    first = branches[0]
    moving = tuple(j for j, t in enumerate(ts[1:]) if t is not None and is_float(first.ins[j]))
    if not moving:
        return None
    n = len(first.outs)
    floats = [j for j, a in enumerate(first.outs) if is_float(a)]
    example = [*first.example, *(ones(first.ins[j][0], first.ins[j][1]) for j in moving)]
    ins = [*first.ins, *(first.ins[j] for j in moving)]
    fwds = tuple(b.derive(("cond_jvp", moving), ins, example,
                          lambda o2, *a, b=b: b.jvp(moving).record(o2, *a)[n:])
                 for b in branches)
    tangents = [ts[1 + j] for j in moving]
    return o.apply(COND, (xs[0], *xs[1:], *tangents),
                   {"branches": fwds, "layout": tuple(attrs["layout"][j] for j in floats),
                    "width": attrs["width"], **_each(attrs),
                    "linear_in": _tangents_at((len(xs), len(tangents)))}, None)


COND = register(Primitive(
    "cond", cond_forward, [cond_vjp], cond_jvp, fmt_loop("cond"), [], variadic=True,
    batch=None, schema=attrs(shape_rule=cond_shape, branches=need(BRANCHES), each=BOOL,
                             **LOOP_ATTRS), linear=IN_TANGENTS,
    saves=("inputs",)))


# ---------------------------------------------------------------- scan


def trips(xs: Sequence[Any], nc: int, nk: int, counted: bool, length: int | None) -> int:
    """A scan's number of steps: its recorded trip count, its xs' length, or ``length``."""
    if counted:
        return int(np.asarray(value_of(xs[-1])))
    seqs = xs[nc + nk:]
    return shape_of(seqs[0])[0] if seqs else int(length)


def scan_forward(*xs: Any, body: Any, nc: int, nk: int, length: int | None, reverse: bool,
                 counted: bool, layout: tuple, width: int, linear_in: tuple | None = None) -> Any:
    """The packed final carry and stacked ys of the body run over the steps."""
    seqs = xs[nc + nk:len(xs) - counted]
    if any(not np.shape(x) for x in seqs) or len({np.shape(x)[0] for x in seqs}) > 1:
        raise ShapeError(f"scan: xs of shapes {[np.shape(x) for x in seqs]}: each needs the "
                         "same leading axis")
    steps = [np.zeros(np.shape(x)[1:], _dtype(x)) for x in seqs]
    given("scan: the body", body.ins, [*xs[:nc + nk], *steps])
    fixed = given("scan: the body", body.ins[:nc + nk], xs[:nc + nk])
    consts, carry = fixed[:nc], fixed[nc:]
    seqs = [_as(x, d) for x, (_, d) in zip(seqs, body.ins[nc + nk:])]
    n = trips(xs, nc, nk, counted, length)
    ny = len(body.outs) - nk
    lazy = any(is_lazy(x) for x in xs)      # (dask: the steps' ys stacked, nothing computed)
    ys: list = [[None] * n if lazy else np.zeros((n, *shape), dtype)
                for shape, dtype in body.outs[nk:]]
    keep = _keeps()
    before = [None] * n if keep is not None and nk and not lazy else None
    run, split, kept = body, None, None
    if before is not None and n:    # (the values the vjp reads, kept as the forward runs)
        nx = len(seqs)
        wants = keep if len(keep) >= nc + nk + nx else ()
        fc, fk, fx = _wrt(body, nc, nk, nx, (lambda j: wants[j]) if wants else lambda j: True)
        if (fc or fk or fx) and (fk or len(body.outs) > nk) and hasattr(body, "split"):
            split = body.split((*fc, *(nc + j for j in fk), *(nc + nk + j for j in fx)), nc, nk)
        if split is not None:
            run, kept = split.forward, [None] * n
    if not lazy and hasattr(run, "runner"):    # (numpy arrays of the inputs' avals, each step)
        run = run.runner(n)
        consts, carry = _arrays(consts), _arrays(carry)
    for t in (range(n - 1, -1, -1) if reverse else range(n)):
        if before is not None:
            before[t] = carry
        res = run(*consts, *carry, *(s[t] for s in seqs))
        carry = res[:nk]
        for y, r in zip(ys, res[nk:]):
            y[t] = r
        if kept is not None:
            kept[t] = res[nk + ny:]
    if lazy and n:
        ys = [np.stack(y) for y in ys]
    out = pack(1 + (n if ny else 0), width, packed_dtype(body.outs), carry, layout[:nk],
               ys, layout[nk:])
    if before is not None:
        _kept(out, before, keep, split, kept)
    return out


def _arrays(values: Sequence[Any]) -> list:
    """Values as numpy arrays (a numpy scalar as a 0-d array)."""
    return [v if type(v) is np.ndarray else np.asarray(v) for v in values]


def _values_only(o: PrimitiveMethods) -> bool:
    """Whether a rule computes on values (a ValueOps: nothing is recorded)."""
    return getattr(o, "plain_values", False)


def wanted(x: Any) -> bool:
    """Whether an input may take a cotangent (a recorded one that requires no grad may not)."""
    return getattr(x, "requires_grad", True)


def _scan_cotangents(o: PrimitiveMethods, g: Any, out: Any, xs: tuple, attrs: dict) -> list:
    body, nc, nk = attrs["body"], attrs["nc"], attrs["nk"]
    counted, reverse = attrs["counted"], attrs["reverse"]
    layout = attrs["layout"]
    seqs = xs[nc + nk:len(xs) - counted]
    nx = len(seqs)
    n = trips(xs, nc, nk, counted, attrs["length"])
    carry_avals, y_avals = body.outs[:nk], body.outs[nk:]
    # on values, the forward kept which inputs require grad (a sweep asks no other's)
    run = _kept_run(out, n) if nk and _values_only(o) else None
    wants = run[1] if run is not None and len(run[1]) >= nc + nk + nx else None
    fc, fk, fx = _wrt(body, nc, nk, nx, (lambda j: wanted(xs[j])) if wants is None else
                      lambda j: wants[j])
    fy = [j for j in range(len(y_avals)) if is_float(y_avals[j])]
    cts: list = [None] * len(xs)
    if not (fc or fk or fx) or not (fk or fy):
        return cts
    if run is not None and n and not is_lazy(g):
        return _reverse_on_values(body, nc, nk, reverse, xs, seqs, g, run, fc, fk, fx, fy,
                                  layout, cts)
    count = (xs[-1],) if counted else ()
    static = {"length": n, "counted": counted}     # (counted: the trips recorded, as run)
    # the carry before each step, stacked (one more scan of the body)
    hist = history_of(out, carry_avals, n) if nk and _values_only(o) else None
    if not _values_only(o):     # (recorded: the history scan, so the kept carries go now)
        _forget_run(out)
    if nk and hist is None:
        hist_body = body.derive(("history",), body.ins, body.example,
                                lambda o2, *a: [*body.record(o2, *a)[:nk], *a[nc:nc + nk]])
        offsets, width = layout_of(carry_avals, carry_avals)
        h = o.apply(SCAN, xs, dict(_plain(attrs), body=hist_body, layout=offsets, width=width),
                    None)
        hist = unpack(o, h, carry_avals, offsets[nk:], stacked=True)
        _HISTORY_OF[hist_body] = weakref.ref(body)
    gk = unpack(o, g, [carry_avals[j] for j in fk], [layout[j] for j in fk])
    # (no steps recorded: still the ys' part of g, whose steps follow a replay's count)
    gy = unpack(o, g, [y_avals[j] for j in fy], [layout[nk + j] for j in fy], stacked=True) \
        if fy and (n or counted) else []
    # the reverse scan of the body's vjp: carry (ct of the carry, the consts' cts summed)
    wrt = (*fc, *(nc + j for j in fk), *(nc + nk + j for j in fx))
    back = body.vjp(wrt)
    ins = body.ins
    avals = [*ins[:nc], *(carry_avals[j] for j in fk), *(ins[j] for j in fc),
             *ins[nc:nc + nk], *ins[nc + nk:], *(y_avals[j] for j in fy)]

    def step(o2: Any, *a: Any) -> list:
        consts = a[:nc]
        ck = a[nc:nc + len(fk)]
        acc = a[nc + len(fk):nc + len(fk) + len(fc)]
        rest = a[nc + len(fk) + len(fc):]
        carry, x, y = rest[:nk], rest[nk:nk + nx], rest[nk + nx:]
        got = back.record(o2, *consts, *carry, *x, *ck, *y)
        return [*got[len(fc):len(fc) + len(fk)],
                *(o2.add(s, c) for s, c in zip(acc, got[:len(fc)])),
                *got[len(fc) + len(fk):]]

    example = [*body.example[:nc], *(ones(carry_avals[j][0], carry_avals[j][1]) for j in fk),
               *(np.broadcast_to(np.zeros((), ins[j][1]), ins[j][0]) for j in fc),
               *body.example[nc:],
               *(ones(y_avals[j][0], y_avals[j][1]) for j in fy)]
    rev_body = body.derive(("reverse", wrt), avals, example, step)
    _REVERSE_OF[rev_body] = (weakref.ref(body), wrt, nk, len(fc), len(fk), len(fx), len(fy))
    _SPLIT_AT[body] = wrt
    k_avals = [*(carry_avals[j] for j in fk), *(ins[j] for j in fc)]
    x_avals = [ins[nc + nk + j] for j in fx]
    offsets, width = layout_of(k_avals, x_avals)
    zeros = [np.zeros(ins[j][0], ins[j][1]) for j in fc]
    gy_full = gy if fy else []
    hist_in = hist if hist is not None else []
    if fy and not n and not counted:
        gy_full = [np.zeros((0, *y_avals[j][0]), y_avals[j][1]) for j in fy]
    rev = o.apply(SCAN, (*xs[:nc], *gk, *zeros, *hist_in, *seqs, *gy_full, *count),
                  dict(static, body=rev_body, nc=nc, nk=len(k_avals), reverse=not reverse,
                       layout=offsets, width=width), None)
    # the cotangents taken out of it: the float consts' asked for, the carries' whose input
    # takes one (an initial carry that requires no grad gets no part entry)
    to = [*(nc + j for j in fk), *fc]
    keep = [k for k, i in enumerate(to) if k >= len(fk) or wanted(xs[i])]
    got = unpack(o, rev, [k_avals[k] for k in keep], [offsets[k] for k in keep])
    for k, c in zip(keep, got):
        cts[to[k]] = c
    if fx:
        for j, c in zip(fx, unpack(o, rev, x_avals, offsets[len(k_avals):], stacked=True)):
            cts[nc + nk + j] = c
    return cts


def _reverse_on_values(body: Any, nc: int, nk: int, reverse: bool, xs: tuple, seqs: tuple,
                       g: Any, run: tuple, fc: list, fk: list, fx: list, fy: list,
                       layout: tuple, cts: list) -> list:
    """A scan's cotangents on values, from what its forward kept (``run``, ``_kept_run``):
    the body's vjp run backwards, step by step, as the reverse scan of a recorded gradient
    runs it (the same operations in the same order), without packing its carry into one
    array each step; where the forward kept the values the vjp's pullback reads, the
    pullback alone (the vjp's entries of the consts alone run once)."""
    ins, outs = body.ins, body.outs
    before, _, split, kept = run
    consts = [_as(v, d) for v, (_, d) in zip(xs[:nc], ins[:nc])]
    wrt = (*fc, *(nc + j for j in fk), *(nc + nk + j for j in fx))
    if split is not None and kept is not None and \
            split is body.split(wrt, nc, nk):      # (the one the forward ran)
        fixed = split.fixed(*consts) if split.fixed is not None else []
        back, at = split.pullback, kept
    else:
        back, fixed, at = body.vjp(wrt), [], None
    n = len(before)
    seqs = [_as(x, d) for x, (_, d) in zip(seqs, ins[nc + nk:])]
    if hasattr(back, "runner"):     # (numpy arrays of the inputs' avals, each step)
        back, consts, seqs = back.runner(n), _arrays(consts), _arrays(seqs)
        before = [_arrays(c) for c in before[:1]] + before[1:]
    g = np.asarray(g)

    def leaf(k: int, aval: Aval, stacked: bool) -> Any:
        v = _part(g, k, aval[0], stacked)
        return v if v.dtype == aval[1] else v.astype(aval[1])
    ct = [leaf(layout[j], outs[j], False) for j in fk]
    gy = [leaf(layout[nk + j], outs[nk + j], True) for j in fy]
    acc = [np.zeros(ins[j][0], ins[j][1]) for j in fc]
    n = len(before)
    xct = [np.zeros((n, *ins[nc + nk + j][0]), ins[nc + nk + j][1]) for j in fx]
    na, nk2 = len(fc), len(fc) + len(fk)
    for t in (range(n) if reverse else range(n - 1, -1, -1)):
        got = back(*consts, *before[t], *(s[t] for s in seqs), *fixed,
                   *(at[t] if at is not None else ()), *ct, *(y[t] for y in gy))
        acc = [a + c for a, c in zip(acc, got[:na])]
        ct = got[na:nk2]
        for y, c in zip(xct, got[nk2:]):
            y[t] = c
    for j, c in zip(fk, ct):
        cts[nc + j] = c if c.dtype == ins[nc + j][1] else c.astype(ins[nc + j][1])
    for j, a in zip(fc, acc):
        cts[j] = a
    for j, y in zip(fx, xct):
        cts[nc + nk + j] = y
    return cts


def scan_vjp(o: PrimitiveMethods, g: Any, out: Any, i: int, *xs: Any, **attrs: Any) -> Any:
    """The cotangent of input i: a reverse scan of the body's vjp over the carries' history."""
    return _all_cotangents(_scan_cotangents, o, g, out, i, xs, attrs)


def scan_jvp(o: PrimitiveMethods, ts: Sequence[Any], out: Any, *xs: Any, **attrs: Any) -> Any:
    """The output's tangent: a scan of the body's jvp, the carry carrying its tangent."""
    body, nc, nk, counted = attrs["body"], attrs["nc"], attrs["nk"], attrs["counted"]
    ins, outs = body.ins, body.outs
    nx = len(xs) - nc - nk - counted
    mc = [j for j in range(nc) if ts[j] is not None and is_float(ins[j])]
    mx = [j for j in range(nx) if ts[nc + nk + j] is not None and is_float(ins[nc + nk + j])]
    fk = [j for j in range(nk) if is_float(ins[nc + j])]
    if not (mc or mx or any(ts[nc + j] is not None for j in fk)):
        return None
    moving = (*mc, *(nc + j for j in fk), *(nc + nk + j for j in mx))
    fwd = body.jvp(moving)
    fy = [j for j in range(len(outs) - nk) if is_float(outs[nk + j])]
    nmc, nfk = len(mc), len(fk)
    avals = [*ins[:nc], *(ins[j] for j in mc), *ins[nc:nc + nk], *(ins[nc + j] for j in fk),
             *ins[nc + nk:], *(ins[nc + nk + j] for j in mx)]

    def step(o2: Any, *a: Any) -> list:
        consts, tc = a[:nc], a[nc:nc + nmc]
        carry, tk = a[nc + nmc:nc + nmc + nk], a[nc + nmc + nk:nc + nmc + nk + nfk]
        x, tx = a[nc + nmc + nk + nfk:nc + nmc + nk + nfk + nx], a[nc + nmc + nk + nfk + nx:]
        got = fwd.record(o2, *consts, *carry, *x, *tc, *tk, *tx)
        primal, tangent = got[:len(outs)], got[len(outs):]
        return [*primal[:nk], *tangent[:nfk], *primal[nk:], *tangent[nfk:]]

    example = [*body.example[:nc], *(ones(ins[j][0], ins[j][1]) for j in mc),
               *body.example[nc:nc + nk], *(ones(ins[nc + j][0], ins[nc + j][1]) for j in fk),
               *body.example[nc + nk:], *(ones(ins[nc + nk + j][0], ins[nc + nk + j][1])
                                          for j in mx)]
    jvp_body = body.derive(("step_jvp", moving), avals, example, step)
    layout, width = attrs["layout"], attrs["width"]
    # tangents where the primal's leaves are (the packed tangent is the first ``width``
    # columns), the primal after them
    offsets = (*(width + k for k in layout[:nk]), *(layout[j] for j in fk),
               *(width + k for k in layout[nk:]), *(layout[nk + j] for j in fy))
    tk = [ts[nc + j] if ts[nc + j] is not None else np.zeros(ins[nc + j][0], ins[nc + j][1])
          for j in fk]
    res = o.apply(SCAN, (*xs[:nc], *(ts[j] for j in mc), *xs[nc:nc + nk], *tk,
                         *xs[nc + nk:nc + nk + nx], *(ts[nc + nk + j] for j in mx),
                         *xs[len(xs) - counted:]),
                  dict(_plain(attrs), body=jvp_body, nc=nc + nmc, nk=nk + nfk, layout=offsets,
                       width=2 * width, linear_in=_tangents_at(
                           (nc, nmc), (nc + nmc + nk, nfk), (nc + nmc + nk + nfk + nx, len(mx)))),
                  None)
    return columns(o, res, 0, width)


def stacked_packs(o: PrimitiveMethods, rows: list, width: int, size: int,
                  dtype: np.dtype) -> Any:
    """The packed outputs of ``size`` examples, (examples, rows, width), from blocks of rows
    (row 0, then the ys' rows), each a list of (column offset, leaves (examples, rows, n))."""
    blocks = []
    for pieces in rows:
        height = shape_of(pieces[0][1])[1] if pieces else 1
        parts, col = [], 0
        for k, piece in sorted(pieces, key=lambda p: p[0]):
            if k > col:
                parts.append(np.zeros((size, height, k - col), dtype))
            parts.append(piece)
            col = k + shape_of(piece)[2]
        if col < width:
            parts.append(np.zeros((size, height, width - col), dtype))
        blocks.append(parts[0] if len(parts) == 1 else o.concatenate(parts, axis=2))
    return blocks[0] if len(blocks) == 1 else o.concatenate(blocks, axis=1)


def cond_batch(o: PrimitiveMethods, xs: Sequence[Any], batched: Sequence[bool],
               **attrs: Any) -> Any:
    """The branches vmapped: a cond of them for a shared index; for a batched one, every
    branch on the batch, each example's output selected by its index (as JAX does)."""
    branches = attrs["branches"]
    if attrs.get("each"):       # (a derived body holding a counted scan: its trips vary)
        return per_example(COND, o, xs, batched, attrs)
    size = next(shape_of(x)[0] for x, b in zip(xs, batched) if b)
    flags = tuple(bool(b) for b in batched[1:])
    many = [b.batched(flags, size) for b in branches]
    outs = many[0].outs
    if not batched[0]:
        offsets, width = layout_of(outs)
        res = o.apply(COND, tuple(xs), {"branches": tuple(many), "layout": offsets,
                                        "width": width}, None)
        leaves = unpack(o, res, outs, offsets, cast=False)
    else:
        index = xs[0]
        leaves = [o.cast(y, np.float64) if np.dtype(y.dtype).kind in "biu" else y
                  for y in many[0].record(o, *xs[1:])]
        for k, b in enumerate(many[1:], 1):
            taken = o.greater_equal(index, k)       # clamped: the last branch k <= index
            for j, y in enumerate(b.record(o, *xs[1:])):
                y = o.cast(y, np.float64) if np.dtype(y.dtype).kind in "biu" else y
                m = o.reshape(taken, (size,) + (1,) * (len(shape_of(y)) - 1))
                leaves[j] = o.where(m, y, leaves[j])
    pieces = [(k, o.reshape(y, (size, 1, -1))) for k, y in zip(attrs["layout"], leaves)]
    return stacked_packs(o, [pieces], attrs["width"], size, packed_dtype(branches[0].outs))


def per_example(prim: Primitive, o: PrimitiveMethods, xs: Sequence[Any],
                batched: Sequence[bool], attrs: dict) -> Any:
    """The entry once per example, stacked (each example its own loop)."""
    size = next(shape_of(x)[0] for x, b in zip(xs, batched) if b)
    return o.stack([o.apply(prim, [o.getitem(x, (k,)) if b else x for x, b in zip(xs, batched)],
                            attrs, None) for k in range(size)], axis=0)


def scan_batch(o: PrimitiveMethods, xs: Sequence[Any], batched: Sequence[bool],
               **attrs: Any) -> Any:
    """A scan of the body vmapped: every carry batched, batched xs with the steps first; the
    packed outputs of the examples stacked (a batched trip count: one loop per example).

    A counted scan's steps are those of its trip count when it runs, which a replay (of a
    program, or of a derived body holding the scan) may change: its ys leave the loop packed
    as each example's rows already are, one leaf per step, so no entry after it holds the
    number of steps it was recorded with."""
    body, nc, nk, counted = attrs["body"], attrs["nc"], attrs["nk"], attrs["counted"]
    if counted and batched[-1]:
        return per_example(SCAN, o, xs, batched, attrs)
    size = next(shape_of(x)[0] for x, b in zip(xs, batched) if b)
    nx = len(xs) - nc - nk - counted
    carry = []
    for x, b, (shape, _) in zip(xs[nc:nc + nk], batched[nc:nc + nk], body.ins[nc:nc + nk]):
        carry.append(x if b else o.expand(o.reshape(x, (1, *shape)), (size, *shape)))
    seqs = []
    for x, b in zip(xs[nc + nk:nc + nk + nx], batched[nc + nk:nc + nk + nx]):
        seqs.append(o.transpose(x, (1, 0, *range(2, len(shape_of(x))))) if b else x)
    flags = (*batched[:nc], *([True] * nk), *batched[nc + nk:nc + nk + nx])
    many = body.batched(tuple(bool(f) for f in flags), size)
    ny = len(body.outs) - nk
    dtype = packed_dtype(body.outs)
    follows = counted and ny    # (its ys packed per step, after the carries' columns)
    if follows:
        many = _packing_ys(many, body, nk, attrs["layout"][nk:], attrs["width"], size, dtype)
        offsets, after = layout_of(many.outs[:nk])
        offsets, width = (*offsets, after), after + size * attrs["width"]
    else:
        offsets, width = layout_of(many.outs[:nk], many.outs[nk:])
    res = o.apply(SCAN, (*xs[:nc], *carry, *seqs, *xs[nc + nk + nx:]),
                  dict(_plain(attrs), body=many, layout=offsets, width=width), None)
    # the packed outputs of the examples: (examples, rows, width), leaves where they were
    rows = [[(k, o.reshape(c, (size, 1, -1))) for k, c in
             zip(attrs["layout"][:nk], unpack(o, res, many.outs[:nk], offsets[:nk],
                                             cast=False))]]
    if follows:     # the packs' columns, every row (row 0 zeros), then the carries in row 0
        packs = o.apply(PART, (res,), {"offset": int(offsets[nk]), "shape": (size,
                        attrs["width"]), "stacked": False, "rows": True}, None)
        packs = o.transpose(packs, (1, 0, 2))
        if not nk:
            return packs
        first = o.reshape(stacked_packs(o, rows, attrs["width"], size, dtype),
                          (size, attrs["width"]))
        return o.add(packs, o.apply(PLACED, (first, packs), {
            "offset": 0, "shape": (attrs["width"],), "stacked": False, "lead": 1}, None))
    if ny:
        ys = unpack(o, res, many.outs[nk:], offsets[nk:], stacked=True, cast=False)
        steps = shape_of(ys[0])[0]
        rows.append([(k, o.reshape(o.transpose(y, (1, 0, *range(2, len(shape_of(y))))),
                                   (size, steps, -1)))
                     for k, y in zip(attrs["layout"][nk:], ys)])
    return stacked_packs(o, rows, attrs["width"], size, dtype)


def _packing_ys(many: Body, body: Body, nk: int, offsets: Sequence[int], width: int,
                size: int, dtype: np.dtype) -> Body:
    """The batched body ``many`` of ``body`` with its ys packed into one output of
    (examples, width): each example's ys at the columns the scan's packed rows hold them."""
    def build(o2: Any, *a: Any) -> list:
        got = many.record(o2, *a)
        pieces = [(k, o2.reshape(y, (size, 1, size_of(aval))))
                  for k, y, aval in zip(offsets, got[nk:], body.outs[nk:])]
        return [*got[:nk], o2.reshape(stacked_packs(o2, [pieces], width, size, dtype),
                                      (size, width))]
    return many.derive(("packing_ys", tuple(offsets), width), many.ins, many.example, build)


COND.batch = cond_batch
COND.release = release

SCAN = register(Primitive(
    "scan", scan_forward, [scan_vjp], scan_jvp, fmt_loop("scan"), [], variadic=True,
    batch=scan_batch, linear=IN_TANGENTS, schema=attrs(shape_rule=scan_shape, body=need(BODY),
                                   nc=need(integer(0, 2**62)), nk=need(integer(0, 2**62)),
                                   length=need(_steps_or_none), reverse=need(BOOL),
                                   counted=need(BOOL), **LOOP_ATTRS),
    saves=("inputs",)))
SCAN.release = release


# ---------------------------------------------------------------- while_loop


def while_forward(*xs: Any, body: Any, test: Any, nc: int, layout: tuple, width: int,
                  max_steps: int | None = None, checkpoints: Any = "all",
                  linear_in: tuple | None = None, trips: int | None = None) -> Any:
    """The packed final carry and trip count of the body run while ``test`` holds (``trips``,
    the count of the run it was recorded with, is not read: this run decides its own)."""
    if dask_array(*xs) is not None:
        refuse("while_loop", *xs, reason="its condition decides the number of trips")
    xs = tuple(given("while_loop: the body", body.ins, xs))
    consts, carry = xs[:nc], list(xs[nc:])
    n = 0
    keep = _keeps()
    before = [] if keep is not None and checkpoints == "all" and carry else None
    while (max_steps is None or n < max_steps) and _holds(test(*consts, *carry)[0]):
        if before is not None:
            before.append(carry)
        carry = body(*consts, *carry)
        n += 1
    avals = (*body.outs, ((), np.dtype(np.int64)))
    out = pack(1, width, packed_dtype(avals), [*carry, n], layout)
    if before is not None:
        _kept(out, before, keep)
    return out


def _holds(value: Any) -> bool:
    """A while loop's condition as a bool; a lazy one raises MaterializeError (it decides
    the number of trips, so the loop cannot stay lazy)."""
    refuse("while_loop", value, reason="its condition decides the number of trips")
    return bool(np.asarray(value))


def _while_cotangents(o: PrimitiveMethods, g: Any, out: Any, xs: tuple, attrs: dict) -> list:
    body, nc = attrs["body"], attrs["nc"]
    keep = attrs.get("checkpoints", "all")
    if keep != "all" and _values_only(o):
        return revolve(body, xs, nc, np.asarray(g), np.asarray(out), attrs["layout"], int(keep))
    if keep != "all":       # recorded: one entry running revolve (its own rules: all kept)
        return _recorded_revolve(o, g, out, xs, attrs)
    return _while_scan_cotangents(o, g, out, xs, attrs)


def _while_scan_cotangents(o: PrimitiveMethods, g: Any, out: Any, xs: tuple,
                           attrs: dict) -> list:
    """A while loop's cotangents as the reverse scan over its recorded trips (every carry of
    the forward kept, in a history scan)."""
    body, nc = attrs["body"], attrs["nc"]
    nk = len(xs) - nc
    count = unpack(o, out, [((), np.dtype(np.int64))], attrs["layout"][nk:])[0]
    n = int(round(float(np.asarray(value_of(out))[0, attrs["layout"][nk]].real)))
    scan_attrs = {"body": body, "nc": nc, "nk": nk, "length": n, "reverse": False,
                  "counted": True, "layout": attrs["layout"][:nk], "width": attrs["width"]}
    return _scan_cotangents(o, g, out, (*xs, count), scan_attrs)[:len(xs)]


def while_vjp(o: PrimitiveMethods, g: Any, out: Any, i: int, *xs: Any, **attrs: Any) -> Any:
    """The cotangent of input i: the vjp of the scan of the body over the trip count."""
    return _all_cotangents(_while_cotangents, o, g, out, i, xs, attrs)


def while_jvp(o: PrimitiveMethods, ts: Sequence[Any], out: Any, *xs: Any, **attrs: Any) -> Any:
    """The output's tangent: a while loop of the body's jvp on the same condition."""
    body, test, nc = attrs["body"], attrs["test"], attrs["nc"]
    ins = body.ins
    nk = len(xs) - nc
    mc = [j for j in range(nc) if ts[j] is not None and is_float(ins[j])]
    fk = [j for j in range(nk) if is_float(ins[nc + j])]
    if not (mc or any(ts[nc + j] is not None for j in fk)):
        return None
    moving = (*mc, *(nc + j for j in fk))
    fwd = body.jvp(moving)
    nmc = len(mc)
    avals = [*ins[:nc], *(ins[j] for j in mc), *ins[nc:], *(ins[nc + j] for j in fk)]
    example = [*body.example[:nc], *(ones(ins[j][0], ins[j][1]) for j in mc),
               *body.example[nc:], *(ones(ins[nc + j][0], ins[nc + j][1]) for j in fk)]

    def step(o2: Any, *a: Any) -> list:
        consts, tc = a[:nc], a[nc:nc + nmc]
        carry, tk = a[nc + nmc:nc + nmc + nk], a[nc + nmc + nk:]
        got = fwd.record(o2, *consts, *carry, *tc, *tk)
        return [*got[:nk], *got[nk:]]

    def holds(o2: Any, *a: Any) -> list:
        return test.record(o2, *a[:nc], *a[nc + nmc:nc + nmc + nk])

    jvp_body = body.derive(("step_jvp", moving), avals, example, step)
    jvp_test = test.derive(("test_jvp", moving), avals, example, holds)
    layout, width = attrs["layout"], attrs["width"]
    offsets = (*(width + k for k in layout[:nk]), *(layout[j] for j in fk), width + layout[nk])
    tk = [ts[nc + j] if ts[nc + j] is not None else np.zeros(ins[nc + j][0], ins[nc + j][1])
          for j in fk]
    res = noting_trips(o.apply(
        WHILE, (*xs[:nc], *(ts[j] for j in mc), *xs[nc:], *tk),
        dict(_plain(attrs), body=jvp_body, test=jvp_test, nc=nc + nmc, layout=offsets,
             width=2 * width, linear_in=_tangents_at((nc, nmc), (nc + nmc + nk, len(fk)))),
        None))
    return columns(o, res, 0, width)


def revolve(body: Any, xs: tuple, nc: int, g: np.ndarray, out: np.ndarray, layout: tuple,
            snapshots: int) -> list:
    """A while loop's cotangents on values, keeping at most ``snapshots`` carries besides the
    one being pulled back (binomial checkpointing, Griewank's revolve: the steps between two
    kept carries are recomputed from the earlier one, in O(n log n) steps for k ~ log n)."""
    nk = len(xs) - nc
    consts = [value_of(x) for x in xs[:nc]]
    init = [value_of(x) for x in xs[nc:]]
    n = int(round(float(out[0, layout[nk]].real)))
    fc = [j for j in range(nc) if is_float(body.ins[j])]
    fk = [j for j in range(nk) if is_float(body.outs[j])]
    back = body.vjp((*fc, *(nc + j for j in fk)))
    shapes = [body.outs[j] for j in fk]
    ct = [np.reshape(g[0, layout[j]:layout[j] + size_of(a)], a[0]).astype(a[1])
          for j, a in zip(fk, shapes)]
    acc = [np.zeros(body.ins[j][0], body.ins[j][1]) for j in fc]

    def advance(c: list, steps: int) -> list:
        for _ in range(steps):
            c = body(*consts, *c)
        return c

    # the cotangent at the end of the segment being pulled back: one box, replaced in place,
    # so no frame of the recursion keeps an older one alive
    box = [ct]
    del ct

    def pull(c: list) -> None:
        got = back(*consts, *c, *box[0])
        box[0] = None
        for a, extra in zip(acc, got[:len(fc)]):
            a += extra
        box[0] = list(got[len(fc):])

    # (the carry at the segment's first step, its number of steps, free snapshots): the
    # right part of each split pulled back first (from a snapshot at its start), then the
    # left part from c, in this frame's loop
    def reverse(c: list, length: int, free: int) -> None:
        while length > 1 and free > 0:
            t = 1
            while math.comb(free + t, free) < length:
                t += 1
            right = min(math.comb(free - 1 + t, free - 1), length - 1)
            length -= right
            mid = advance(c, length)
            reverse(mid, right, free - 1)
            del mid
        for j in range(length - 1, -1, -1):    # no snapshot left: each step from c
            pull(advance(c, j))

    reverse(init, n, max(snapshots - 1, 0))
    del init
    ct = box[0]
    cts: list = [None] * len(xs)
    for j, c in zip(fk, ct):
        cts[nc + j] = c
    for j, a in zip(fc, acc):
        cts[j] = a
    return cts


# ---------------------------------------------------------------- while_vjp (recorded revolve)
#
# A recorded gradient of a while loop with ``checkpoints=k`` is ONE entry, ``while_vjp``,
# whose inputs are the loop's (consts | carry), the cotangent of its packed output and that
# output (for the trip count): its forward runs ``revolve`` (k carries kept), so the gradient
# program keeps O(k) carries when it runs or replays. Its own rules are those of the
# "adjoint" body, the same cotangents traced once as the reverse scan over every carry.


def _adjoint_avals(body: Any, nc: int) -> tuple[list, list[int], list[int]]:
    """The float consts' and carries' avals (a while_vjp's outputs) and their positions."""
    nk = len(body.ins) - nc
    fc = [j for j in range(nc) if is_float(body.ins[j])]
    fk = [j for j in range(nk) if is_float(body.outs[j])]
    return [*(body.ins[j] for j in fc), *(body.outs[j] for j in fk)], fc, fk


def adjoint_forward(*xs: Any, body: Any, nc: int, layout: tuple, width: int,
                    checkpoints: int) -> Any:
    """The packed cotangents of a while loop's float consts and carries, by revolve."""
    if dask_array(*xs) is not None:
        refuse("while_vjp", *xs, reason="its body runs on values")
    xs = (*given("while_vjp: the body", body.ins, xs[:-2]), *xs[-2:])
    for x in xs[-2:]:
        if np.shape(x) != (1, width):
            raise ShapeError(f"while_vjp: a cotangent and output of shape (1, {width}), got "
                             f"{np.shape(x)}")
    cts = revolve(body, xs[:-2], nc, np.asarray(xs[-2]), np.asarray(xs[-1]), layout,
                  int(checkpoints))
    avals, fc, fk = _adjoint_avals(body, nc)
    offsets, w = layout_of(avals)
    leaves = [*(cts[j] for j in fc), *(cts[nc + j] for j in fk)]
    return pack(1, w, packed_dtype(avals), leaves, offsets)


def adjoint_body(attrs: dict) -> Any:
    """(consts, carry, g, out) -> the float consts' and carries' cotangents: the reverse
    scan over every carry, traced once (the rules of a while_vjp entry)."""
    body, nc, layout, width = attrs["body"], attrs["nc"], attrs["layout"], attrs["width"]
    n = len(body.ins)
    packed = ((1, width), np.dtype(np.float64))
    out_example = np.zeros((1, width))
    out_example[0, layout[n - nc]] = 1.0            # (traced at one trip)
    avals, fc, fk = _adjoint_avals(body, nc)

    def build(o2: Any, *a: Any) -> list:
        xs, g, out = a[:n], a[n], a[n + 1]
        cts = _while_scan_cotangents(o2, g, out, xs, {**attrs, "checkpoints": "all"})
        got = [*(cts[j] for j in fc), *(cts[nc + j] for j in fk)]
        return [np.zeros(v[0], v[1]) if c is None else c for c, v in zip(got, avals)]
    return body.derive(("adjoint", nc, tuple(layout), width), [*body.ins, packed, packed],
                       [*body.example, np.zeros((1, width)), out_example], build)


def _recorded_revolve(o: PrimitiveMethods, g: Any, out: Any, xs: tuple, attrs: dict) -> list:
    body, nc = attrs["body"], attrs["nc"]
    entry = {"body": body, "nc": nc, "layout": attrs["layout"], "width": attrs["width"],
             "checkpoints": int(attrs["checkpoints"])}
    res = o.apply(WHILE_VJP, (*xs, g, out), entry, None)
    avals, fc, fk = _adjoint_avals(body, nc)
    offsets, _ = layout_of(avals)
    got = unpack(o, res, avals, offsets)
    cts: list = [None] * len(xs)
    for j, c in zip([*fc, *(nc + j for j in fk)], got):
        cts[j] = c
    return cts


def _adjoint_cotangents(o: PrimitiveMethods, gg: Any, res: Any, xs: tuple,
                        attrs: dict) -> list:
    adj = adjoint_body(attrs)
    wrt = tuple(j for j in range(len(xs) - 1) if is_float(adj.ins[j]) and wanted(xs[j]))
    cts: list = [None] * len(xs)
    if not wrt:
        return cts
    offsets, _ = layout_of(adj.outs)
    ggs = unpack(o, gg, adj.outs, offsets)
    back = adj.vjp(wrt)
    for j, c in zip(wrt, _call(o, back, (*xs, *ggs))):
        cts[j] = c
    return cts


def _call(o: PrimitiveMethods, body: Any, inputs: Sequence[Any]) -> list:
    """A derived body's outputs, recorded as a cond of that one branch (a call whose rules,
    batched ones included, are the cond's)."""
    attrs = cond_attrs([body], each=True)
    res = o.apply(COND, (np.array(0), *inputs), attrs, None)
    return unpack(o, res, body.outs, attrs["layout"])


def adjoint_vjp(o: PrimitiveMethods, gg: Any, res: Any, i: int, *xs: Any, **attrs: Any) -> Any:
    """The cotangent of input i: the vjp of the adjoint body (the output read for its trip
    count only gets none)."""
    return _all_cotangents(_adjoint_cotangents, o, gg, res, i, xs, attrs)


def adjoint_jvp(o: PrimitiveMethods, ts: Sequence[Any], res: Any, *xs: Any,
                **attrs: Any) -> Any:
    """The output's tangent: the jvp of the adjoint body, its tangents packed."""
    adj = adjoint_body(attrs)
    moving = tuple(j for j in range(len(xs) - 1) if ts[j] is not None and is_float(adj.ins[j]))
    if not moving:
        return None
    fwd, n = adj.jvp(moving), len(adj.outs)
    tangents = adj.derive(("adjoint_jvp", moving), fwd.ins, fwd.example,
                          lambda o2, *a: fwd.record(o2, *a)[n:])
    # (its packed output: the tangents where the while_vjp's output has its leaves)
    return o.apply(COND, (np.array(0), *xs, *(ts[j] for j in moving)),
                   dict(cond_attrs([tangents], each=True),
                        linear_in=_tangents_at((1 + len(xs), len(moving)))), None)


def adjoint_shape(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """A while_vjp's packed cotangents: (1, the float consts' and carries' entries)."""
    body, width = attrs["body"], attrs["width"]
    _takes("the body", body.ins, shapes[:-2], dtypes[:-2])
    for s in shapes[-2:]:
        if tuple(s) != (1, width):
            raise _refuse(f"a while_vjp's cotangent and output have shape (1, {width}), "
                          f"got {tuple(s)}")
    avals, _, _ = _adjoint_avals(body, attrs["nc"])
    _fits(attrs["layout"], width, [[*body.outs, ((), np.dtype(np.int64))]])
    return (1, layout_of(avals)[1]), packed_dtype(avals)


WHILE_VJP = register(Primitive(
    "while_vjp", adjoint_forward, [adjoint_vjp], adjoint_jvp, fmt_loop("while_vjp"), [],
    variadic=True, linear=Linear(JOINT, lambda attrs: (len(attrs["body"].ins),)),  # in g
    schema=attrs(shape_rule=adjoint_shape, body=need(BODY),
                                nc=need(integer(0, 2**62)), checkpoints=need(integer(1, 2**62)),
                                **LOOP_ATTRS),
    saves=("inputs",)))
WHILE_VJP.release = release
WHILE_VJP.batch = lambda o, xs, batched, **attrs: per_example(WHILE_VJP, o, xs, batched, attrs)


WHILE = register(Primitive(
    "while_loop", while_forward, [while_vjp], while_jvp, fmt_loop("while_loop"), [],
    variadic=True, linear=IN_TANGENTS,
    schema=attrs(shape_rule=while_shape, body=need(BODY), test=need(BODY),
                                nc=need(integer(0, 2**62)), max_steps=_steps_or_none,
                                checkpoints=CHECKPOINTS, trips=_steps_or_none, **LOOP_ATTRS),
    saves=("inputs", "out")))
WHILE.release = release


RUN_ATTRS = ("trips",)      # attributes of the run an entry was recorded with (a body keeps none)


def trip_count(out: Any, attrs: dict) -> int:
    """The trips a while loop's run took: the count in its packed output ``out``."""
    column = attrs["layout"][len(attrs["body"].outs)]
    return int(round(float(np.real(np.asarray(out)[0, column]))))


def noting_trips(res: Any) -> Any:
    """A while loop's packed output ``res``; when it is a recorded entry's, that entry notes
    the trips its run took in ``trips`` (its printed line and ``Program.stats`` read them;
    a replay runs as many as it needs)."""
    node = getattr(res, "node", None)
    attrs = getattr(node, "attrs", None)
    if getattr(node, "prim", None) is not WHILE or attrs.get("trips") is not None or \
            getattr(res, "raw", None) is None:
        return res
    node.attrs = {**attrs, "trips": trip_count(res.raw, attrs)}     # (a new dict: the
    return res                                                       # caller's is kept)


def while_batch(o: PrimitiveMethods, xs: Sequence[Any], batched: Sequence[bool],
                **attrs: Any) -> Any:
    """The body vmapped in one loop for the batch: it runs while any example's condition
    holds, an example whose condition fails keeping its carry, and counts each example's
    trips in a carry of its own (the packed outputs of the examples stacked)."""
    body, test, nc = attrs["body"], attrs["test"], attrs["nc"]
    nk = len(xs) - nc
    size = next(shape_of(x)[0] for x, b in zip(xs, batched) if b)
    carry = []
    for x, b, (shape, _) in zip(xs[nc:], batched[nc:], body.ins[nc:]):
        carry.append(x if b else o.expand(o.reshape(x, (1, *shape)), (size, *shape)))
    flags = (*(bool(b) for b in batched[:nc]), *([True] * nk))
    many, holds = body.batched(flags, size), test.batched(flags, size)
    count = ((size,), np.dtype(np.float64))      # (a float: an entry's constants are)
    ins = [*many.ins, count]
    example = [*many.example, np.zeros(size)]

    def step(o2: Any, *a: Any) -> list:
        live = holds.record(o2, *a[:-1])[0]
        new = many.record(o2, *a[:-1])
        kept = []
        for y, old in zip(new, a[nc:nc + nk]):
            m = o2.reshape(live, (size,) + (1,) * (len(shape_of(old)) - 1))
            kept.append(o2.where(m, y, old))
        return [*kept, o2.add(a[-1], o2.apply(ASTYPE, (live,), {"dtype": count[1]}, None))]

    def any_holds(o2: Any, *a: Any) -> list:
        return [o2.any(holds.record(o2, *a[:-1])[0])]

    key = ("while_batched", flags, size)
    loop_body = body.derive(key, ins, example, step)
    loop_test = test.derive(key, ins, example, any_holds)
    outs = [*many.outs[:nk], count]
    offsets, width = layout_of([*outs, ((), np.dtype(np.int64))])
    res = noting_trips(o.apply(WHILE, (*xs[:nc], *carry, np.zeros(size)),
                               dict(_plain(attrs), body=loop_body, test=loop_test,
                                    layout=offsets, width=width), None))
    leaves = unpack(o, res, outs, offsets[:nk + 1], cast=False)
    pieces = [(k, o.reshape(y, (size, 1, -1))) for k, y in zip(attrs["layout"], leaves)]
    return stacked_packs(o, [pieces], attrs["width"],
                         size, packed_dtype((*body.outs, ((), np.dtype(np.int64)))))


WHILE.batch = while_batch


# ---------------------------------------------------------------- Taylor rules
#
# A loop's Taylor rule is the loop of the body's (Body.taylor: the body's outputs and their
# coefficients 1..K from its inputs' and theirs). The packed output's coefficient k is the
# block of columns (k - 1) * width .. k * width of the loop's result, the primal after them.


def _moves(ss: Sequence[Any], j: int, aval: Aval) -> bool:
    return is_float(aval) and any(c is not None for c in ss[j][1:])


def _coefficients(ss: Sequence[Any], j: int, x: Any) -> list:
    """Coefficients 1..K of input j's series, zeros where it has none."""
    return [c if c is not None else np.zeros(shape_of(x), np.result_type(getattr(x, "dtype",
                                                                           np.float64)))
            for c in ss[j][1:]]


def _blocks(o: PrimitiveMethods, out: Any, res: Any, order: int, width: int) -> list:
    return [out, *(columns(o, res, (k - 1) * width, k * width)
                   for k in range(1, order + 1))]


def scan_taylor(o: PrimitiveMethods, ss: Sequence[Any], out: Any, *xs: Any,
                **attrs: Any) -> list:
    """The output's series: a scan of the body's Taylor rule, the carry carrying its
    coefficients."""
    body, nc, nk, counted = attrs["body"], attrs["nc"], attrs["nk"], attrs["counted"]
    ins, outs = body.ins, body.outs
    K = len(ss[0]) - 1
    nx = len(xs) - nc - nk - counted
    mc = [j for j in range(nc) if _moves(ss, j, ins[j])]
    mx = [j for j in range(nx) if _moves(ss, nc + nk + j, ins[nc + nk + j])]
    fk = [j for j in range(nk) if is_float(ins[nc + j])]
    if not (mc or mx or any(_moves(ss, nc + j, ins[nc + j]) for j in fk)):
        return [out] + [None] * K
    moving = (*mc, *(nc + j for j in fk), *(nc + nk + j for j in mx))
    series = body.taylor(moving, K)
    ny = len(outs) - nk
    fy = [j for j in range(ny) if is_float(outs[nk + j])]
    nmc, nfk = len(mc) * K, len(fk) * K

    def step(o2: Any, *a: Any) -> list:
        consts, tc = a[:nc], a[nc:nc + nmc]
        carry, tk = a[nc + nmc:nc + nmc + nk], a[nc + nmc + nk:nc + nmc + nk + nfk]
        x, tx = a[nc + nmc + nk + nfk:nc + nmc + nk + nfk + nx], a[nc + nmc + nk + nfk + nx:]
        got = series.record(o2, *consts, *carry, *x, *tc, *tk, *tx)
        primal, coefs = got[:len(outs)], got[len(outs):]
        return [*primal[:nk], *coefs[:nfk], *primal[nk:], *coefs[nfk:]]

    def times(js: Sequence[int]) -> list:
        return [ins[j] for j in js for _ in range(K)]
    avals = [*ins[:nc], *times(mc), *ins[nc:nc + nk], *times([nc + j for j in fk]),
             *ins[nc + nk:], *times([nc + nk + j for j in mx])]
    example = [*body.example[:nc], *(ones(a[0], a[1]) for a in times(mc)),
               *body.example[nc:nc + nk], *(ones(a[0], a[1]) for a in
                                            times([nc + j for j in fk])),
               *body.example[nc + nk:], *(ones(a[0], a[1]) for a in
                                          times([nc + nk + j for j in mx]))]
    loop = body.derive(("step_taylor", moving, K), avals, example, step)
    layout, width = attrs["layout"], attrs["width"]
    offsets = (*(K * width + k for k in layout[:nk]),
               *((k - 1) * width + layout[j] for j in fk for k in range(1, K + 1)),
               *(K * width + k for k in layout[nk:]),
               *((k - 1) * width + layout[nk + j] for j in fy for k in range(1, K + 1)))
    coefs = [c for j in mc for c in _coefficients(ss, j, xs[j])]
    coefs_k = [c for j in fk for c in _coefficients(ss, nc + j, xs[nc + j])]
    coefs_x = [c for j in mx for c in _coefficients(ss, nc + nk + j, xs[nc + nk + j])]
    res = o.apply(SCAN, (*xs[:nc], *coefs, *xs[nc:nc + nk], *coefs_k,
                         *xs[nc + nk:nc + nk + nx], *coefs_x, *xs[len(xs) - counted:]),
                  dict(_plain(attrs), body=loop, nc=nc + nmc, nk=nk + nfk, layout=offsets,
                       width=(K + 1) * width), None)
    return _blocks(o, out, res, K, width)


def while_taylor(o: PrimitiveMethods, ss: Sequence[Any], out: Any, *xs: Any,
                 **attrs: Any) -> list:
    """The output's series: a while loop of the body's Taylor rule on the same condition."""
    body, test, nc = attrs["body"], attrs["test"], attrs["nc"]
    ins = body.ins
    K = len(ss[0]) - 1
    nk = len(xs) - nc
    mc = [j for j in range(nc) if _moves(ss, j, ins[j])]
    fk = [j for j in range(nk) if is_float(ins[nc + j])]
    if not (mc or any(_moves(ss, nc + j, ins[nc + j]) for j in fk)):
        return [out] + [None] * K
    moving = (*mc, *(nc + j for j in fk))
    series = body.taylor(moving, K)
    nmc = len(mc) * K

    def step(o2: Any, *a: Any) -> list:
        consts, tc = a[:nc], a[nc:nc + nmc]
        carry, tk = a[nc + nmc:nc + nmc + nk], a[nc + nmc + nk:]
        return series.record(o2, *consts, *carry, *tc, *tk)

    def holds(o2: Any, *a: Any) -> list:
        return test.record(o2, *a[:nc], *a[nc + nmc:nc + nmc + nk])

    times = [ins[j] for j in mc for _ in range(K)]
    times_k = [ins[nc + j] for j in fk for _ in range(K)]
    avals = [*ins[:nc], *times, *ins[nc:], *times_k]
    example = [*body.example[:nc], *(ones(a[0], a[1]) for a in times),
               *body.example[nc:], *(ones(a[0], a[1]) for a in times_k)]
    key = ("step_taylor", moving, K)
    loop = body.derive(key, avals, example, step)
    loop_test = test.derive(key, avals, example, holds)
    layout, width = attrs["layout"], attrs["width"]
    offsets = (*(K * width + k for k in layout[:nk]),
               *((k - 1) * width + layout[j] for j in fk for k in range(1, K + 1)),
               K * width + layout[nk])
    coefs = [c for j in mc for c in _coefficients(ss, j, xs[j])]
    coefs_k = [c for j in fk for c in _coefficients(ss, nc + j, xs[nc + j])]
    res = noting_trips(o.apply(WHILE, (*xs[:nc], *coefs, *xs[nc:], *coefs_k),
                               dict(_plain(attrs), body=loop, test=loop_test, nc=nc + nmc,
                                    layout=offsets, width=(K + 1) * width), None))
    return _blocks(o, out, res, K, width)


def cond_taylor(o: PrimitiveMethods, ss: Sequence[Any], out: Any, *xs: Any,
                **attrs: Any) -> list:
    """The output's series: the cond of the branches' Taylor rules."""
    branches = attrs["branches"]
    first = branches[0]
    K = len(ss[0]) - 1
    moving = tuple(j for j in range(len(xs) - 1) if _moves(ss, 1 + j, first.ins[j]))
    if not moving:
        return [out] + [None] * K
    n = len(first.outs)
    floats = [j for j, a in enumerate(first.outs) if is_float(a)]
    times = [first.ins[j] for j in moving for _ in range(K)]
    ins = [*first.ins, *times]
    example = [*first.example, *(ones(a[0], a[1]) for a in times)]
    series = tuple(b.derive(("cond_taylor", moving, K), ins, example,
                            lambda o2, *a, b=b: b.taylor(moving, K).record(o2, *a)[n:])
                   for b in branches)
    width = attrs["width"]
    offsets = tuple((k - 1) * width + attrs["layout"][j] for j in floats
                    for k in range(1, K + 1))
    coefs = [c for j in moving for c in _coefficients(ss, 1 + j, xs[1 + j])]
    res = o.apply(COND, (*xs, *coefs), {"branches": series, "layout": offsets,
                                        "width": K * width, **_each(attrs)}, None)
    return _blocks(o, out, res, K, width)


def _linear_taylor(prim: Primitive) -> Any:
    """A linear primitive's Taylor rule: its jvp, per coefficient."""
    def rule(o: PrimitiveMethods, ss: Sequence[Any], out: Any, *xs: Any, **attrs: Any) -> list:
        z = [out] + [None] * (len(ss[0]) - 1)
        for k in range(1, len(z)):
            ts = [s[k] for s in ss]
            if any(t is not None for t in ts):
                z[k] = prim.jvp(o, ts, out, *xs, **attrs)
        return z
    return rule


def adjoint_taylor(o: PrimitiveMethods, ss: Sequence[Any], res: Any, *xs: Any,
                   **attrs: Any) -> list:
    """A while_vjp's series: the adjoint body's Taylor rule, called as a cond of it."""
    adj = adjoint_body(attrs)
    K = len(ss[0]) - 1
    moving = tuple(j for j in range(len(xs) - 1) if _moves(ss, j, adj.ins[j]))
    if not moving:
        return [res] + [None] * K
    n = len(adj.outs)
    series = adj.taylor(moving, K)
    coefs_body = adj.derive(("adjoint_taylor", moving, K), series.ins, series.example,
                            lambda o2, *a: series.record(o2, *a)[n:])
    layout, width = layout_of(adj.outs)
    offsets = tuple((k - 1) * width + layout[j] for j in range(n) for k in range(1, K + 1))
    coefs = [c for j in moving for c in _coefficients(ss, j, xs[j])]
    got = o.apply(COND, (np.array(0), *xs, *coefs),
                  {"branches": (coefs_body,), "layout": offsets, "width": K * width,
                   "each": True}, None)
    return _blocks(o, res, got, K, width)


SCAN.taylor, WHILE.taylor, COND.taylor = scan_taylor, while_taylor, cond_taylor
WHILE_VJP.taylor = adjoint_taylor
PART.taylor, PLACED.taylor = _linear_taylor(PART), _linear_taylor(PLACED)


# ---------------------------------------------------------------- work (Program.stats)


def scan_work(attrs: dict) -> tuple[int, int]:
    """A scan's entries run and trips: its body's times its length (a counted scan's: the
    count of the run it was recorded with)."""
    trips = attrs["length"]
    return attrs["body"].work() * trips, trips


def while_work(attrs: dict) -> tuple[int, int | None]:
    """A while loop's entries run and trips: by the trips of the run it was recorded with
    (its body's each trip, its condition's once more), one trip where they are not known."""
    trips = attrs.get("trips")
    n = 1 if trips is None else trips
    return attrs["test"].work() * (n + 1) + attrs["body"].work() * n, trips


def cond_work(attrs: dict) -> tuple[int, int]:
    """A cond's entries: the largest branch's (one of them runs, once)."""
    return max(b.work() for b in attrs["branches"]), 1


SCAN.work, WHILE.work, COND.work = scan_work, while_work, cond_work


# ---------------------------------------------------------------- trips (sg.step)


def scan_trips(xs: Sequence[Any], out: Any, attrs: dict) -> Iterator[tuple]:
    """A scan's runs of its body on values, in the order it runs them: (trip, body, inputs),
    each run's outputs sent back."""
    body, nc, nk, counted = attrs["body"], attrs["nc"], attrs["nk"], attrs["counted"]
    consts, carry = list(xs[:nc]), list(xs[nc:nc + nk])
    seqs = xs[nc + nk:len(xs) - counted]
    n = trips(xs, nc, nk, counted, attrs["length"])
    for t in (range(n - 1, -1, -1) if attrs["reverse"] else range(n)):
        res = yield t, body, [*consts, *carry, *(s[t] for s in seqs)]
        carry = list(res[:nk])


def while_trips(xs: Sequence[Any], out: Any, attrs: dict) -> Iterator[tuple]:
    """A while loop's runs of its body on values, as many as the recorded trip count."""
    body, nc = attrs["body"], attrs["nc"]
    consts, carry = list(xs[:nc]), list(xs[nc:])
    n = int(round(float(np.real(np.asarray(out)[0, attrs["layout"][len(carry)]]))))
    for t in range(n):
        carry = list((yield t, body, [*consts, *carry]))


def cond_trips(xs: Sequence[Any], out: Any, attrs: dict) -> Iterator[tuple]:
    """A cond's one run: the branch its index picks."""
    branches = attrs["branches"]
    k = min(max(int(np.asarray(xs[0])), 0), len(branches) - 1)
    yield 0, branches[k], list(xs[1:])


SCAN.trips, WHILE.trips, COND.trips = scan_trips, while_trips, cond_trips


# ---------------------------------------------------------------- entries and Ops methods


def scan_attrs(body: Body, nc: int, nk: int, length: int, reverse: bool = False) -> dict:
    """A scan entry's attributes: ``body`` over ``length`` steps, ``nc`` consts, ``nk`` carries."""
    offsets, width = layout_of(body.outs[:nk], body.outs[nk:])
    return {"body": body, "nc": int(nc), "nk": int(nk), "length": int(length),
            "reverse": bool(reverse), "counted": False, "layout": offsets, "width": width}


def while_attrs(body: Body, test: Body, nc: int, max_steps: int | None = None,
                checkpoints: Any = "all") -> dict:
    """A while loop entry's attributes: ``body`` while ``test`` holds, ``nc`` consts."""
    offsets, width = layout_of([*body.outs, ((), np.dtype(np.int64))])
    return {"body": body, "test": test, "nc": int(nc), "checkpoints": checkpoints,
            "max_steps": None if max_steps is None else int(max_steps),
            "layout": offsets, "width": width}


def cond_attrs(branches: Sequence[Body], each: bool = False) -> dict:
    """A cond entry's attributes: the branches, their outputs packed side by side (``each``:
    vmapped, it runs once per example)."""
    offsets, width = layout_of(branches[0].outs)
    return {"branches": tuple(branches), "layout": offsets, "width": width,
            **({"each": True} if each else {})}


class LoopOps:
    """The loop and branch entries as methods of an Ops (``sg.scan`` and the others make the
    bodies from functions and take the leaves out of the packed output)."""

    def scan(self, body: Body, consts: Sequence[Any], carry: Sequence[Any], xs: Sequence[Any],
             length: int | None = None, reverse: bool = False, name: str | None = None) -> Any:
        """The packed final carry and stacked ys of ``body`` over the leading axis of ``xs``
        (or ``length`` steps), as one entry."""
        n = shape_of(xs[0])[0] if length is None else length
        return self.apply(SCAN, (*consts, *carry, *xs),
                          scan_attrs(body, len(consts), len(carry), n, reverse), name)

    def while_loop(self, body: Body, test: Body, consts: Sequence[Any], carry: Sequence[Any],
                   max_steps: int | None = None, checkpoints: Any = "all",
                   name: str | None = None) -> Any:
        """The packed final carry and trip count of ``body`` run while ``test`` holds."""
        return noting_trips(self.apply(
            WHILE, (*consts, *carry), while_attrs(body, test, len(consts), max_steps,
                                                  checkpoints), name))

    def while_vjp(self, body: Body, consts: Sequence[Any], carry: Sequence[Any], g: Any,
                  out: Any, checkpoints: int, name: str | None = None) -> Any:
        """The packed cotangents of a while loop's float consts and carries from ``g``, its
        packed output's (``out``: that output), keeping ``checkpoints`` carries (revolve)."""
        a = while_attrs(body, body, len(consts), None, checkpoints)
        return self.apply(WHILE_VJP, (*consts, *carry, g, out),
                          {"body": body, "nc": len(consts), "layout": a["layout"],
                           "width": a["width"], "checkpoints": int(checkpoints)}, name)

    def cond(self, index: Any, branches: Sequence[Body], operands: Sequence[Any],
             name: str | None = None) -> Any:
        """The packed outputs of ``branches[index]`` on ``operands`` (index clamped)."""
        return self.apply(COND, (index, *operands), cond_attrs(branches), name)

    def loop_part(self, x: Any, offset: int, shape: tuple, stacked: bool = False,
                  rows: bool = False, name: str | None = None) -> Any:
        """The leaf of ``shape`` at column ``offset`` of a packed output (``stacked``: the
        ys' rows; ``rows``: that block of columns, every row)."""
        return self.apply(PART, (x,), {"offset": int(offset), "shape": tuple(shape),
                                      "stacked": bool(stacked), "rows": bool(rows)}, name)

    def loop_placed(self, g: Any, like: Any, offset: int, shape: tuple, stacked: bool = False,
                    rows: bool = False, name: str | None = None) -> Any:
        """``g`` placed where ``loop_part`` reads it, zeros elsewhere (its adjoint)."""
        return self.apply(PLACED, (g, like), {"offset": int(offset), "shape": tuple(shape),
                                             "stacked": bool(stacked), "rows": bool(rows)},
                          name)

    def loop_astype(self, x: Any, dtype: Any, name: str | None = None) -> Any:
        """``x`` as an integer or bool ``dtype`` (a trip count, a flag): no derivative."""
        return self.apply(ASTYPE, (x,), {"dtype": np.dtype(dtype)}, name)


# ---------------------------------------------------------------- compiled source
#
# ``sg.compile`` writes a loop entry as a Python loop calling its body's compiled function
# (program/compile.py asks the record's ``statement``), a cond as a call of the branch its
# index picks; the packed output is made by ``pack`` as the forward makes it.


class Emitter(Protocol):
    """What a statement rule asks of the compiler: ``body(b)`` the name of sub-program b's
    compiled function (its outputs as a list); ``inline(b, args, fixed, stacks)`` b's
    statements on the names ``args`` (the first ``fixed`` the same on every trip; ``stacks``:
    those that are one step of an array of all steps, a ``Stacks``): those reading only them
    (and those computed on all steps at once), those run each trip, and its outputs as source
    (None: b is not written out; with ``stacks.trace`` a list, it is written out on any
    backend and notes there what a trip runs); ``fresh(stem)`` a name not taken; ``value(v)``
    v as source (a literal, or a bound name); ``kernel(loop)`` a ``Loop`` as the call of one
    compiled kernel running every trip, or None (``whole_loops``: whether the backend
    compiles loops so)."""

    def body(self, b: Body) -> str: ...

    def inline(self, b: Body, args: list[str], fixed: int, stacks: Stacks | None = None
               ) -> tuple[list[str], list[str], list[str]] | None: ...

    def fresh(self, stem: str) -> str: ...

    def value(self, v: Any) -> str: ...

    def kernel(self, loop: Loop) -> list[str] | None: ...     # the loop as one call, or None

    whole_loops: bool       # whether ``kernel`` may compile a loop as a whole (the backend's)


# A loop's work that reads no carry (``U @ x`` of a step's x, ``1 - t * t`` of a kept t) runs
# before the loop on the arrays of all steps, one numpy call where the loop made one a step,
# where the call on all steps does exactly each step's arithmetic: the operations of a ring
# (+, -, *, unary -: each element one IEEE operation, as many at once as there are), and a
# matrix of the fixed names times one vector a step (``np.matmul`` of the matrix and the
# stack of vectors as columns makes, per step, the BLAS matrix-vector call ``A @ x`` makes,
# with the same arguments: numpy's matmul loop takes each stacked pair as the single one).


CHUNK = 32768       # elements of a chunk of the terms a reverse loop sums (256 KiB of float64)


class Stacks:
    """The inputs of a body inlined in a loop that are one step of an array of all steps
    (``names``: input position -> that array's name), the loop's step and count names,
    ``form``, the rule for an entry on all steps at once (``stacked_form``), ``per_step`` the
    rule for one in a trip (``step_form``), ``into``, the outputs a trip may compute into a
    buffer of their shape and dtype (its name), and the carries (``carries``, ``inits``)."""

    def __init__(self, names: dict[int, str], step: str, steps: str,
                 into: dict[int, str] | None = None, carries: dict[int, int] | None = None,
                 inits: dict[int, str] | None = None):
        self.names, self.step, self.steps = names, step, steps
        self.form, self.per_step = stacked_form, step_form
        self.into = into or {}      # output position -> the buffer a trip writes it into
        # output position -> (its row of an array of all steps, the row's shape and dtype):
        # a trip may compute it there (``written``: those it does, no copy after)
        self.rows: dict[int, tuple[str, tuple, Any]] = {}
        self.written: set[int] = set()
        # the carries: input position -> the output that is its next value; their first values
        self.carries, self.inits = carries or {}, inits or {}
        self.same: set[int] = set()     # inputs past the first ``fixed`` the same every trip
        # outputs a trip may leave to after the loop (computed there on chunks of the steps
        # ``lo:hi``, ``span`` long): those it did (position -> array), and the chunk's code
        self.defer: set[int] = set()
        self.deferred: dict[int, str] = {}
        self.after: list[str] = []
        self.lo = self.hi = self.span = ""
        # a list: the inliner notes there what a trip runs, as data (``Loop.trace``), for a
        # backend compiling the loop as a whole
        self.trace: list | None = None


class Loop:
    """A loop as data, for a backend that compiles it whole (``Emitter.kernel``): its step
    count's name and direction, what one trip runs (``trace``: ("entry", entry, name, input
    names, input shapes, input dtypes) and ("row", name, array of all steps: the step's row
    of it) items, in order), its carries (name, first
    value, name of the next value, aval), the rows it writes each step (array, value, aval),
    the sums it adds into in place (accumulator, term, aval), and the names its final carries
    are bound to (``targets``)."""

    def __init__(self, steps: str, reverse: bool, trace: list, targets: list[str]):
        self.steps, self.reverse, self.trace, self.targets = steps, reverse, trace, targets
        self.carries: list[tuple[str, str, str, Aval]] = []
        self.rows: list[tuple[str, str, Aval]] = []
        self.sums: list[tuple[str, str, Aval]] = []


def kernel_form(node: Any, shapes: list) -> tuple | None:
    """How a loop kernel writes an entry of a trip (``shapes``: its inputs' shapes): ("map",)
    for an elementwise entry (its ``numba`` form or ufunc on each element, inputs broadcast),
    ("copy",) for its input broadcast to its shape (an expand), ("alias",) for a value with
    the same elements in the same order (a reshape), ("sum", axes) for a sum over those axes
    of its input (its ``numba`` accumulation), ("matvec", matrix position, vector position,
    transposed) for a matrix times a vector (``A @ x``: transposed; ``x @ A``), or None (not
    written: the loop stays in numpy)."""
    prim = node.prim
    if REGISTRY.get(prim.name) is not prim:       # (never the form of a look-alike)
        return None
    forms = prim.loop_forms
    if forms is not None and forms.kernel is not None:     # (its record's own: LoopForms)
        return forms.kernel(node, shapes)
    if prim.numba == "+=" and len(shapes) == 1 and shapes[0] is not None:
        axis, rank = (node.attrs or {}).get("axis"), len(shapes[0])
        axes = range(rank) if axis is None else (axis,) if isinstance(axis, int) else axis
        return ("sum", tuple(sorted({int(a) % rank for a in axes})) if rank else ())
    if node.attrs or not (prim.elementwise or isinstance(prim.forward, np.ufunc)):
        return None
    return ("map",)


def stacked_form(node: Any, args: list[str], stacked: list[bool], shapes: list,
                 steps: str, expression: Callable[[list[str]], str]) -> str | None:
    """Source for an entry on all steps at once, from ``args`` (arrays of all steps where
    ``stacked``, else the fixed names; ``shapes``: each input's shape in one step), doing
    each step's arithmetic exactly as the loop would; or None (left in the loop)."""
    prim, shape = node.prim, tuple(node.shape)
    if any(s is None for s, st in zip(shapes, stacked) if st):
        return None     # (a fixed operand of no static shape is a Python number)
    if prim.ring is not None and prim.elementwise and prim.numpy is not None:
        rank = len(shape)
        return expression([f"{a}.reshape(({steps},) + {(1,) * (rank - len(s)) + tuple(s)!r})"
                           if st and len(s) < rank else a
                           for a, st, s in zip(args, stacked, shapes)])
    forms = prim.loop_forms
    if forms is not None and forms.stacked is not None:    # (its record's own: LoopForms)
        return forms.stacked(node, args, stacked, shapes, steps)
    return None


def step_form(node: Any, args: list[str], kinds: list,
              shapes: list) -> tuple[Callable, list[str], str] | None:
    """For an entry in a trip, a function called once before the loop (and its arguments)
    making the callable a trip calls on its argument, or None (``kinds``: per input "fixed",
    "new" (an array numpy makes each trip), ("carry", first value) (one from the second trip
    on), or None): its record's own (``LoopForms.step``)."""
    forms = node.prim.loop_forms
    if forms is None or forms.step is None:
        return None
    return forms.step(node, args, kinds, shapes)


def _trip(code: Emitter, body: Body, args: list[str], fixed: int, stem: str,
          stacks: Stacks | None = None) -> tuple[list[str], list[str], list, bool]:
    """One run of ``body`` on the names ``args`` inside a loop (the first ``fixed`` the same on
    every trip): its statements written out (no call, no list of outputs), those that read
    only the fixed names (and those on all steps at once, ``stacks``) first, to run once
    before the loop; or a call of its compiled function. Its outputs, and whether it takes
    each step's value of the stacked inputs itself (when written out)."""
    written = code.inline(body, args, fixed, stacks)
    if written is not None:
        return (*written, stacks is not None)
    r = code.fresh(f"{stem}_out")
    return [], [f"{r} = {code.body(body)}({', '.join(args)})"], \
        [f"{r}[{j}]" for j in range(len(body.outs))], False


def _assign(names: Sequence[str], values: Sequence[str]) -> list[str]:
    """``names`` rebound to ``values`` at once (a carry's new values may read its old)."""
    if not names:
        return []
    return [f"{', '.join(names)} = {', '.join(values)}"]


# A scan's gradient holds a history scan: the body run again over the forward's inputs,
# keeping the carry before each step. Compiled, the forward's loop keeps them itself when its
# body has such a history (``_HISTORY_OF``), and a history scan of the same body over the
# same names in the same function reads what that loop kept instead of running again
# (``_RUNS``: per function being written, the loops whose carries were kept).

_HISTORY_OF: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # history -> body
_RUNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()     # emitter -> kept runs
# The reverse scan of a gradient runs the body's vjp, which computes the body's forward again
# from the carry it reads in the history. Compiled, the forward's loop runs the body keeping
# the values the vjp's pullback reads (``Body.split`` at the cotangents its reverse scan
# takes, ``_SPLIT_AT``), and a reverse scan of that body (``_REVERSE_OF``) whose history is
# the carries that loop kept (the same bytes, checked when it runs) runs the pullback on them.
_REVERSE_OF: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # reverse -> body, ...
_SPLIT_AT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()     # body -> its vjp's wrt


def _has_history(body: Any) -> bool:
    return any(ref() is body for ref in list(_HISTORY_OF.values()))


def scan_statement(target: str, args: list[str], attrs: dict, code: Emitter) -> list[str]:
    """A scan as a ``for`` loop over its steps (as many as its xs have, or its count): the
    body written out in it, its carries local names, its ys written into arrays made first
    (a history scan whose forward loop was written before in this function: that loop's
    carries, packed)."""
    body, nc, nk, counted = attrs["body"], attrs["nc"], attrs["nk"], attrs["counted"]
    layout = attrs["layout"]
    runs = None if counted else _RUNS.setdefault(code, {})
    key = (tuple(args), attrs["reverse"], attrs["length"])
    of = _HISTORY_OF.get(body) if runs is not None else None
    kept = runs.get((id(of()), *key)) if of is not None and of() is not None else None
    if kept is not None:
        steps, before, after, _ = kept
        return [f"{target} = {code.value(pack)}(1 + {steps}, {attrs['width']}, "
                f"{code.value(packed_dtype(body.outs))}, [{', '.join(after)}], "
                f"{code.value(layout[:nk])}, [{', '.join(before)}], "
                f"{code.value(layout[nk:])})"]
    nx = len(args) - nc - nk - counted
    consts, carry, seqs = args[:nc], args[nc:nc + nk], args[nc + nk:nc + nk + nx]
    n, t = code.fresh(f"{target}_steps"), code.fresh(f"{target}_step")
    cs = [code.fresh(f"{target}_carry") for _ in range(nk)]
    xt = [code.fresh(f"{target}_x") for _ in range(nx)]
    steps = f"{code.value(int)}({args[-1]})" if counted else f"{seqs[0]}.shape[0]" if seqs \
        else str(int(attrs["length"]))
    ys = [code.fresh(f"{target}_ys") for _ in body.outs[nk:]]
    hs = [code.fresh(f"{target}_before") for _ in range(nk)] \
        if runs is not None and nk and _has_history(body) else []
    wrt = _SPLIT_AT.get(body) if hs else None
    split = body.split(wrt, nc, nk) if wrt is not None and hasattr(body, "split") else None
    run_body = body if split is None else split.forward
    rs = [code.fresh(f"{target}_kept") for _ in range(split.residuals)] if split else []
    lines = [f"{n} = {steps}", *_assign(cs, carry)]
    lines += [f"{y} = np.zeros(({n},) + {code.value(tuple(shape))}, {code.value(dtype)})"
              for y, (shape, dtype) in zip([*ys, *hs, *rs], [*body.outs[nk:], *body.outs[:nk],
                                                             *run_body.outs[len(body.outs):]])]
    each = code.value(range)
    order = f"{each}({n} - 1, -1, -1)" if attrs["reverse"] else f"{each}({n})"
    stacks = Stacks({nc + nk + i: s for i, s in enumerate(seqs)}, t, n,
                    carries={nc + i: i for i in range(nk)},
                    inits={nc + i: c for i, c in enumerate(carry)})
    whole = _whole_scan(code, run_body, [*consts, *cs, *xt], nc, stacks, attrs["reverse"], cs,
                        hs, ys, rs, [*body.outs, *run_body.outs[len(body.outs):]])
    if whole is not None:       # (the loop compiled as a whole: one call)
        shifted, written = whole
        lines += written
    else:
        row_avals = [*body.outs[nk:], *run_body.outs[len(body.outs):]]
        stacks.rows = {nk + k: (f"{y}[{t}]", shape, dtype)
                       for k, (y, (shape, dtype)) in enumerate(zip([*ys, *rs], row_avals))}
        once, run, outs, sliced = _trip(code, run_body, [*consts, *cs, *xt], nc, target, stacks)
        lines += once
        shifted = _shifted(hs, rs, outs, nk, len(ys))
        trip = [*(f"{x} = {s}[{t}]" for x, s in zip(xt, seqs) if not sliced),
                *(f"{h}[{t}] = {c}" for j, (h, c) in enumerate(zip(hs, cs)) if j not in shifted),
                *run, *(f"{y}[{t}] = {o}" for k, (y, o) in enumerate(zip([*ys, *rs], outs[nk:]))
                        if nk + k not in stacks.written),
                *_assign(cs, outs[:nk])]
        lines += [f"for {t} in {order}:", *(f"    {line}" for line in trip or ["pass"])]
    for j, r in shifted.items():
        h = hs[j]
        lines += [f"if {n}:", f"    {h}[:-1], {h}[-1] = {r}[1:], {carry[j]}" if attrs["reverse"]
                  else f"    {h}[1:], {h}[0] = {r}[:-1], {carry[j]}"]
    if hs:
        runs[(id(body), *key)] = (n, hs, cs, None if split is None else (wrt, split, rs))
    fast = _pulled_back(args, attrs, code, runs, n, t, cs, ys) if runs is not None else None
    if fast is not None:    # (the kept run's pullback, else the loop written above)
        test, branch = fast
        lines = [test, *(f"    {line}" for line in branch), "else:",
                 *(f"    {line}" for line in lines)]
    rows = f"1 + {n}" if ys else "1"
    lines.append(f"{target} = {code.value(pack)}({rows}, {attrs['width']}, "
                 f"{code.value(packed_dtype(body.outs))}, [{', '.join(cs)}], "
                 f"{code.value(layout[:nk])}, [{', '.join(ys)}], {code.value(layout[nk:])})")
    return lines


def _shifted(hs: list[str], rs: list[str], outs: list[str], nk: int, ny: int) -> dict:
    """The carries whose next value the loop keeps (a residual: the tanh of an RNN cell):
    their values before each step are there, one step along, and their first; copied after
    the loop (carry position -> the residual's array)."""
    return {j: r for j in range(len(hs)) for r, o in zip(rs, outs[nk + ny:]) if o == outs[j]}


def _nests(body: Body) -> bool:
    """Whether a body holds a loop or a branch (its statement is not written into a kernel,
    nor run while a trip is noted)."""
    return any(e.prim.statement is not None for e in body.program.entries)


def _whole_scan(code: Emitter, body: Body, ins: list[str], fixed: int, stacks: Stacks,
                reverse: bool, cs: list[str], hs: list[str], ys: list[str], rs: list[str],
                avals: Sequence[Aval]) -> tuple[dict, list[str]] | None:
    """A scan's loop compiled as a whole by the backend (``Emitter.kernel``): the carries
    whose history is copied after it (``_shifted``) and its lines (what runs once before it,
    then the call); None where the backend does not, or cannot write the body (``ins``: the
    body's inputs, consts then carries ``cs`` then each step's xs; ``hs``: arrays for the
    carries before each step, ``ys``, ``rs``: for the ys and the residuals; ``avals``: of
    the carries, ys and residuals)."""
    if not code.whole_loops or _nests(body):
        return None
    stacks.trace = []
    try:
        nk = len(cs)
        written = code.inline(body, ins, fixed, stacks)
        if written is None:
            return None
        once, _, outs = written
        shifted = _shifted(hs, rs, outs, nk, len(ys))
        loop = Loop(stacks.steps, reverse, stacks.trace, cs)
        loop.carries = [(c, c, o, a) for c, o, a in zip(cs, outs[:nk], avals[:nk])]
        loop.rows = [(h, c, a) for j, (h, c, a) in enumerate(zip(hs, cs, avals))
                     if j not in shifted]
        loop.rows += [(y, o, a) for y, o, a in zip([*ys, *rs], outs[nk:], avals[nk:])]
        call = code.kernel(loop)
        return None if call is None else (shifted, [*once, *call])
    finally:
        stacks.trace = None


def _whole_pullback(code: Emitter, pullback: Body, ins: list[str], fixed: int, stacks: Stacks,
                    attrs: dict, cs: list[str], ys: list[str], nfk: int, nfc: int
                    ) -> list[str] | None:
    """A reverse scan running a kept run's pullback, compiled as a whole by the backend: its
    lines (the sums copied, to be added into in place; what runs once; the call), or None."""
    stacks.trace, into, stacks.into = [], stacks.into, {}   # (each term its own value)
    try:
        written = code.inline(pullback, ins, fixed, stacks)
        if written is None:
            return None
        once, _, outs = written
        avals = attrs["body"].outs
        loop = Loop(stacks.steps, attrs["reverse"], stacks.trace, cs[:nfk])
        loop.carries = [(c, c, o, a) for c, o, a in zip(cs[:nfk], outs[nfc:nfc + nfk], avals)]
        loop.sums = [(c, o, a) for c, o, a in zip(cs[nfk:], outs[:nfc], avals[nfk:])]
        loop.rows = [(y, o, a) for y, o, a in zip(ys, outs[nfc + nfk:], avals[nfk + nfc:])]
        call = code.kernel(loop)
        if call is None:
            return None
        return [*(f"{c} = np.array({c}, {code.value(np.dtype(a[1]))})"
                  for c, _, a in loop.sums), *once, *call]
    finally:
        stacks.trace, stacks.into = None, into


def _pulled_back(args: list[str], attrs: dict, code: Emitter, runs: dict, n: str, t: str,
                 cs: list[str], ys: list[str]) -> tuple[str, list[str]] | None:
    """A reverse scan of a body whose forward loop kept the values its vjp's pullback reads:
    the test that its history is the carries that loop kept, and the loop running the
    pullback on them (its steps, carries and ys the names ``n``, ``cs`` and ``ys``)."""
    got = _REVERSE_OF.get(attrs["body"])
    fwd = got[0]() if got is not None else None
    if fwd is None or attrs["counted"]:
        return None
    _, wrt, nk, nfc, nfk, nfx, nfy = got
    nc = attrs["nc"]
    nx = len(fwd.ins) - nc - nk
    consts, ck, acc = args[:nc], args[nc:nc + nfk], args[nc + nfk:nc + nfk + nfc]
    rest = args[nc + nfk + nfc:]
    hist, seqs, gy = rest[:nk], rest[nk:nk + nx], rest[nk + nx:]
    if len(gy) != nfy or len(cs) != nfk + nfc or len(ys) != nfx:
        return None
    kept = next((v for k, v in runs.items() if k[0] == id(fwd) and
                 list(k[1][:nc]) == consts and list(k[1][nc + nk:]) == seqs and
                 k[2] == (not attrs["reverse"]) and v[3] is not None and v[3][0] == wrt), None)
    if kept is None:
        return None
    steps, before, _, (_, split, rs) = kept
    check = " and ".join(f"{h}.tobytes() == {b}.tobytes()" for h, b in zip(hist, before))
    lines = [f"{n} = {steps}", *_assign(cs, [*ck, *acc])]
    lines += [f"{y} = np.zeros(({n},) + {code.value(tuple(shape))}, {code.value(dtype)})"
              for y, (shape, dtype) in zip(ys, attrs["body"].outs[nfk + nfc:])]
    fixed: list = []
    if split.fixed is not None:
        once, run, fixed, _ = _trip(code, split.fixed, consts, nc, "fixed")
        lines += [*once, *run]
    each = code.value(range)
    order = f"{each}({n} - 1, -1, -1)" if attrs["reverse"] else f"{each}({n})"
    sources = [*before, *seqs, *rs, *gy]
    xt = [code.fresh("kept_x") for _ in sources]
    ins = [*consts, *xt[:nk + nx], *fixed, *xt[nk + nx:nk + nx + len(rs)], *cs[:nfk],
           *xt[nk + nx + len(rs):]]
    # a sum of the body's and the carry's aval adds in place, its term (the same operations)
    # computed in a buffer; or, for terms of two or more real numbers, on the values of a
    # chunk of steps at once (``1 - t*t`` times the kept carry: an outer product a step) once
    # the trip has made them, the chunk's terms added in the loop's order: np.add.reduce
    # along the stack's first axis, not its fastest in memory, adds each term in turn (numpy
    # sums pairwise only along the fastest), from -0.0 (which leaves each value as it is)
    avals = attrs["body"].outs[nfk:nfk + nfc]
    inplace = [a == o and is_float(a) for a, o in zip(avals, split.pullback.outs[:nfc])]
    bufs = {i: code.fresh("term") for i in range(nfc) if inplace[i]}
    at = {x: i for i, x in enumerate(ins)}
    stacks = Stacks({at[x]: s for x, s in zip(xt, sources)}, t, n, bufs,
                    {at[c]: nfc + i for i, c in enumerate(cs[:nfk])},
                    {at[c]: k for c, k in zip(cs[:nfk], ck)})
    stacks.same = {at[f] for f in fixed}
    if code.whole_loops and all(inplace) and not _nests(split.pullback):   # (one call)
        whole = _whole_pullback(code, split.pullback, ins, nc, stacks, attrs, cs, ys, nfk, nfc)
        if whole is not None:
            return f"if {check}:", [*lines, *whole]
    stacks.defer = {i for i in bufs if np.dtype(avals[i][1]).kind == "f" and size_of(avals[i]) > 1}
    stacks.lo, stacks.hi = code.fresh("lo"), code.fresh("hi")
    stacks.span = f"({stacks.hi} - {stacks.lo})"
    written = code.inline(split.pullback, ins, nc, stacks)
    if written is not None:     # (written out: it takes each step's values it reads)
        once, run, outs = written
        read = set()
    else:
        once, run, outs, _ = _trip(code, split.pullback, ins, nc, "pullback")
        read = set(ins)
    later = stacks.deferred if written is not None else {}
    lines += [f"{bufs[i]} = np.empty({code.value(a[0])}, {code.value(a[1])}); "
              f"{c} = np.array({c}, {code.value(a[1])})"
              for i, (a, c) in enumerate(zip(avals, cs[nfk:])) if i in bufs and i not in later]
    lines += once
    sums = [code.fresh("kept_sum") for _ in range(nfc)]
    trip = [*(f"{x} = {s}[{t}]" for x, s in zip(xt, sources) if x in read), *run,
            *(f"np.add({c}, {o}, out={c})" if inplace[i] else f"{a} = {c} + {o}"
              for i, (a, c, o) in enumerate(zip(sums, cs[nfk:], outs[:nfc])) if i not in later),
            *(f"{y}[{t}] = {o}" for y, o in zip(ys, outs[nfc + nfk:])),
            *_assign([*cs[:nfk], *(c for c, i in zip(cs[nfk:], inplace) if not i)],
                     [*outs[nfc:nfc + nfk], *(a for a, i in zip(sums, inplace) if not i)])]
    if later:       # (chunks of ``rows`` steps, each once its last step has run)
        size = sum(size_of(a) for i, a in enumerate(avals) if i in later)
        rows = max(1, CHUNK // max(size, 1))
        lo, hi, low = stacks.lo, stacks.hi, code.value(min)
        if attrs["reverse"]:
            test, bounds = f"{t} % {rows} == 0", f"{lo}, {hi} = {t}, {low}({t} + {rows}, {n})"
        else:
            test = f"{t} % {rows} == {rows - 1} or {t} == {n} - 1"
            bounds = f"{lo}, {hi} = {t} - {t} % {rows}, {t} + 1"
        turn = "[::-1]" if attrs["reverse"] else ""
        adds = [f"{c} = np.add.reduce(np.concatenate([{c}[None], {o}{turn}]), axis=0, "
                f"initial=-0.0)" for i, (c, o) in enumerate(zip(cs[nfk:], outs[:nfc]))
                if i in later]
        trip += [f"if {test}:", *(f"    {line}" for line in [bounds, *stacks.after, *adds])]
    lines += [f"for {t} in {order}:", *(f"    {line}" for line in trip or ["pass"])]
    return f"if {check}:", lines


def while_statement(target: str, args: list[str], attrs: dict, code: Emitter) -> list[str]:
    """A while loop as a ``while`` on its condition (at most max_steps trips): the condition
    and the body written out in it, its carries local names."""
    body, test, nc = attrs["body"], attrs["test"], attrs["nc"]
    n = code.fresh(f"{target}_trips")
    cs = [code.fresh(f"{target}_carry") for _ in args[nc:]]
    ins = [*args[:nc], *cs]
    first, check, holds, _ = _trip(code, test, ins, nc, f"{target}_test")
    once, run, outs, _ = _trip(code, body, ins, nc, target)
    bound = "True" if attrs.get("max_steps") is None else f"{n} < {int(attrs['max_steps'])}"
    avals = (*body.outs, ((), np.dtype(np.int64)))
    trip = [*check, f"if not {holds[0]}:", "    break", *run, *_assign(cs, outs), f"{n} += 1"]
    return [f"{n} = 0", *_assign(cs, args[nc:]), *first, *once, f"while {bound}:",
            *(f"    {line}" for line in trip),
            f"{target} = {code.value(pack)}(1, {attrs['width']}, "
            f"{code.value(packed_dtype(avals))}, [{', '.join([*cs, n])}], "
            f"{code.value(attrs['layout'])})"]


def cond_statement(target: str, args: list[str], attrs: dict, code: Emitter) -> list[str]:
    """A cond as a call of the branch its index picks (clamped to the branches)."""
    branches = attrs["branches"]
    low, high, whole = code.value(min), code.value(max), code.value(int)
    pick = f"[{', '.join(code.body(b) for b in branches)}]" \
           f"[{low}({high}({whole}({args[0]}), 0), {len(branches) - 1})]"
    return [f"{target} = {code.value(pack)}(1, {attrs['width']}, "
            f"{code.value(packed_dtype(branches[0].outs))}, {pick}({', '.join(args[1:])}), "
            f"{code.value(attrs['layout'])})"]


SCAN.statement, WHILE.statement = scan_statement, while_statement
COND.statement = cond_statement
