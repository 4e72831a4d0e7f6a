"""The numba backend's loops compiled whole: a scan of plain arithmetic as one kernel.

``sg.compile(prog, backend="numba")`` (and ``sg.jit(f, backend="numba")``) writes a loop
entry whose trip is made of entries a kernel can write (primitives/loops.py
``kernel_form``: elementwise entries of float64 values, inputs broadcast; expands; reshapes;
sums over axes; a matrix the same on every trip times a vector) as ONE call of a numba
function running every trip: the forward loop of a scan and the reverse loop of its
gradient each become a loop nest over flat float64 buffers, with no numpy call, array or
Python frame per step (the numpy backend's trip costs a handful of numpy calls, about 5 us a
step for a 32-unit RNN cell).
What the trip reads of the values before it (the loop's fixed names, its arrays of all
steps) and the arrays it writes (the carries before each step, the ys, the values its
gradient keeps, the sums it adds into) are the same names as the numpy loop's; what runs once
before the loop (entries of fixed names alone, those computed on all steps at once) stays
numpy, as in that loop.

Each entry is one loop over its elements writing a buffer of its own (an elementwise entry:
its ``numba`` form or ufunc on one element of each input, as the fused kernels write it,
numba_kernels.py; exp and tanh there are within 1 and 3 ulp of numpy's), a reshape names the
same buffer, and ``A @ x`` is ``sum_k A[:, k] x[k]`` over the contiguous rows of A's
transpose (made once per call; ``x @ A`` over A's rows), each element added in k order: not
necessarily the order of BLAS's gemv, so values may differ from the numpy backend's by a few
ulp a step (tests/test_numba_loops.py holds them to 1e-12 relative; a 1,000-step RNN's
gradient came out equal to the last bit here).
A sum the trip adds into adds in place each step, in the loop's order, as the numpy loop's.
No fast-math flag: each operation is one IEEE operation, as written. The kernel is a C
function of pointers, its machine code cached on disk with the fused kernels' (numba_kernels.py
"the kernel cache"): compiled once per loop shape, loaded in milliseconds afterwards.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..primitives.loops import Loop, kernel_form
from .numba_kernels import _compiled, _data_field, _key, _scalar_expr

F64 = np.dtype(np.float64)
_LITERAL = re.compile(r"\(?-?[0-9][0-9.eE+-]*\)?")     # a number the compiler wrote out
_BUILT: dict[str, tuple[int, Any, bool]] = {}     # key -> address, its code, loaded


class _Place:
    """Where a name's values are in the kernel: a pointer parameter, its shape, and whether
    it is a row of an array of all steps (read at the step's offset)."""

    def __init__(self, param: str, shape: tuple, row: bool = False):
        self.param, self.shape, self.row = param, tuple(shape), row
        self.size = int(np.prod(self.shape))

    def at(self, index: str) -> str:
        return f"{self.param}[o_{self.param} + {index}]" if self.row else \
            f"{self.param}[{index}]"


class _Writer:
    """A Loop as kernel source: its parameters (kind, name in the program's code, size,
    shape) and its statements; ``ok`` False where an entry cannot be written."""

    def __init__(self) -> None:
        self.params: list[tuple[str, str, int, tuple]] = []    # (kind, source name, size, shape)
        self.places: dict[str, _Place] = {}
        self.rows: dict[str, str] = {}      # a trip's name -> its array of all steps
        self.fixed: dict[tuple, _Place] = {}
        self.helpers: dict[str, Callable] = {}
        self.body: list[str] = []
        self.scratch = 0

    def param(self, kind: str, name: str, shape: tuple) -> str:
        p = f"p{len(self.params)}"
        self.params.append((kind, name, int(np.prod(shape)), tuple(shape)))
        return p

    def buffer(self, shape: tuple) -> _Place:
        return _Place(self.param("scratch", "", shape), shape)

    def place(self, name: str, shape: tuple | None, transposed: bool = False) -> _Place | str:
        """The place of a value read by name (a number: its literal)."""
        got = self.places.get(name)
        if got is not None and not transposed:
            return got
        if _LITERAL.fullmatch(name):
            return name
        if shape is None:
            shape = ()
        if name in self.rows:
            got = self.places[name] = _Place(self.param("row", self.rows[name], shape), shape,
                                             row=True)
            return got
        key = (name, transposed)
        if key not in self.fixed:
            self.fixed[key] = _Place(self.param("fixed_t" if transposed else "fixed", name,
                                                shape), shape[::-1] if transposed else shape)
        return self.fixed[key]


def _read(p: _Place | str, index: str) -> str:
    return p if isinstance(p, str) else p.at("0" if p.size == 1 else index)


def _broadcast_index(shape: tuple, out: tuple, ix: list[str]) -> str:
    """The flat index into a value of ``shape`` broadcast to ``out`` at indices ``ix``."""
    shape = (1,) * (len(out) - len(shape)) + tuple(shape)
    terms, stride = [], 1
    for d in range(len(out) - 1, -1, -1):
        if shape[d] != 1:
            terms.append(f"{ix[d]} * {stride}" if stride != 1 else ix[d])
        stride *= shape[d]
    return " + ".join(reversed(terms)) or "0"


def _entry(w: _Writer, node: Any, target: str, ins: list[str], shapes: list,
           dtypes: list) -> bool:
    """One entry of a trip written into the kernel (False: it cannot be); ``shapes`` and
    ``dtypes``: its inputs' (a shape None: a Python number)."""
    if node.prim.statement is not None or np.dtype(node.dtype) != F64:
        return False
    if any(not _LITERAL.fullmatch(a) and np.dtype(d) != F64 for d, a in zip(dtypes, ins)):
        return False
    form = kernel_form(node, shapes)
    if form is None:
        return False
    out = tuple(node.shape)
    if form[0] == "alias":
        src = w.place(ins[0], shapes[0])
        if isinstance(src, str):
            return False
        w.places[target] = _Place(src.param, out, src.row)
        return True
    dest = w.places[target] = w.buffer(out)
    if form[0] == "matvec":
        _, m, v, transposed = form
        if ins[m] in w.places or ins[m] in w.rows or _LITERAL.fullmatch(ins[m]):
            return False        # (a matrix made in the trip: left to numpy)
        a, x = w.place(ins[m], shapes[m], transposed), w.place(ins[v], shapes[v])
        if isinstance(x, str) or isinstance(a, str):
            return False
        rows, cols = a.shape        # (A @ x: the rows of A's transpose, one per element of x)
        w.body += [f"for i in range({cols}):", f"    {dest.at('i')} = 0.0",
                   f"for k in range({rows}):", f"    c = {x.at('k')}",
                   f"    for i in range({cols}):",
                   f"        {dest.at('i')} += {a.at(f'k * {cols} + i')} * c"]
        return True
    places = [w.place(a, s) for a, s in zip(ins, shapes)]
    if form[0] == "sum":
        x, axes = places[0], form[1]
        if isinstance(x, str):
            return False
        if len(axes) == len(x.shape):       # every element, in order
            w.body += ["acc = 0.0", f"for i in range({x.size}):", f"    acc += {_read(x, 'i')}",
                       f"{dest.at('0')} = acc"]
            return True
        ix = [f"i{d}" for d in range(len(x.shape))]
        kept = tuple(d for d in range(len(x.shape)) if d not in axes)
        kept_shape = tuple(x.shape[d] for d in kept)
        into = _broadcast_index(kept_shape, kept_shape, [ix[d] for d in kept])
        w.body += [f"for i in range({dest.size}):", f"    {dest.at('i')} = 0.0"]
        w.body += [f"{'    ' * d}for {ix[d]} in range({x.shape[d]}):"
                   for d in range(len(x.shape))]
        w.body.append(f"{'    ' * len(x.shape)}{dest.at(into)} += "
                      f"{x.at(_broadcast_index(x.shape, x.shape, ix))}")
        return True
    if all(isinstance(p, str) or p.size == 1 or p.shape == out for p in places):
        reads = [_read(p, "i") for p in places]
        at, loops = "i", [f"for i in range({dest.size}):"]
    else:
        ix = [f"i{d}" for d in range(len(out))]
        reads = [p if isinstance(p, str) else p.at(_broadcast_index(p.shape, out, ix))
                 for p in places]
        at = _broadcast_index(out, out, ix)
        loops = [f"{'    ' * d}for {ix[d]} in range({out[d]}):" for d in range(len(out))]
    expr = reads[0] if form[0] == "copy" else _scalar_expr(node.prim, reads, w.helpers)
    w.body += [*loops, f"{'    ' * len(loops)}{dest.at(at)} = {expr}"]
    return True


def _write(loop: Loop) -> _Writer | None:
    """The kernel of a loop, or None (an entry, a dtype or a value it cannot write)."""
    w = _Writer()
    carries = []
    for name, _, _, (shape, dtype) in loop.carries:
        if np.dtype(dtype) != F64:
            return None
        w.places[name] = _Place(w.param("carry", name, shape), shape)
        carries.append(w.places[name])
    for item in loop.trace:
        if item[0] == "row":
            w.rows[item[1]] = item[2]
        elif not _entry(w, *item[1:]):
            return None
    for array, value, (shape, dtype) in loop.rows:
        src = w.place(value, tuple(shape))
        if np.dtype(dtype) != F64 or isinstance(src, str) or src.size != int(np.prod(shape)):
            return None
        row = _Place(w.param("row_out", array, shape), shape, row=True)
        w.body += [f"for i in range({row.size}):", f"    {row.at('i')} = {_read(src, 'i')}"]
    for acc, value, (shape, dtype) in loop.sums:
        src = w.place(value, tuple(shape))
        if np.dtype(dtype) != F64 or isinstance(src, str) or src.size != int(np.prod(shape)):
            return None
        into = _Place(w.param("sum", acc, shape), shape)
        w.body += [f"for i in range({into.size}):", f"    {into.at('i')} += {_read(src, 'i')}"]
    nexts = []
    for (_, _, value, (shape, _)), place in zip(loop.carries, carries):
        src = w.place(value, tuple(shape))
        if isinstance(src, str) or src.size != place.size:
            return None
        nexts.append(src)
    # the next carries, at once: through buffers when one reads a carry (or is one)
    staged = any(s.param in {c.param for c in carries} for s in nexts)
    if staged:
        stage = [w.buffer(c.shape) for c in carries]
        for s, b in zip(nexts, stage):
            w.body += [f"for i in range({b.size}):", f"    {b.at('i')} = {_read(s, 'i')}"]
        nexts = stage
    for s, c in zip(nexts, carries):
        if s is not c:
            w.body += [f"for i in range({c.size}):", f"    {c.at('i')} = {_read(s, 'i')}"]
    return w


def _source(w: _Writer, reverse: bool) -> str:
    params = [f"p{k}" for k in range(len(w.params))]
    lines = [f"def kernel(steps, {', '.join(params)}, sums):", "    n = steps[0]",
             "    for s in range(n):", "        t = n - 1 - s" if reverse else "        t = s"]
    lines += [f"        o_{p} = t * {size}" for p, (kind, _, size, _) in zip(params, w.params)
              if kind in ("row", "row_out")]
    lines += [f"        {line}" for line in w.body]
    lines.append("    return")
    return "# a loop kernel: no fast-math flags\n" + "\n".join(lines) + "\n"


def loop_kernel(loop: Loop) -> tuple[Callable, list[str], str] | None:
    """The loop as one kernel: a function of its step count and the arrays named (the
    loop's fixed names and arrays of all steps, its carries' first values, the arrays it
    writes) returning its final carries, those names, and the kernel's source; None where
    the loop has an entry a kernel cannot write."""
    w = _write(loop)
    if w is None:
        return None
    source = _source(w, loop.reverse)
    try:
        run = _runner(source, w)
    except Exception:   # noqa: BLE001 (numba's typing and lowering errors share no base class)
        return None
    return run, [src for kind, src, _, _ in w.params if kind != "scratch"], source


@functools.cache
def _own_source() -> str:
    """This module's source: a change to how loop kernels are called changes every key."""
    return Path(__file__).read_text()


def _runner(source: str, w: _Writer) -> Callable:
    """The kernel compiled (or loaded from the cache) as a Python function of the step count
    and the arrays the loop reads and writes, returning the final carries."""
    numba = importlib.import_module("numba")
    kinds = [np.dtype(np.int64), *[F64] * len(w.params)]
    key = _key(source + _own_source(), [*kinds, "loop"], w.helpers)
    got = _BUILT.get(key)
    if got is None:
        got = _BUILT[key] = _compiled(numba, key, source, kinds, w.helpers, fastmath=False)
    address, keep, loaded = got
    call = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (len(w.params) + 2))(address)
    specs = [(kind, size, shape) for kind, _, size, shape in w.params]
    given = [(kind, size, shape) for kind, size, shape in specs if kind != "scratch"]
    scratch = [size for kind, size, _ in specs if kind == "scratch"]
    total = sum(scratch)
    read, at = _data_field()
    pointer = (lambda a: read(id(a) + at).value) if read is not None else \
        (lambda a: a.ctypes.data)
    nowhere = np.zeros(1)

    def run(steps: Any, *arrays: Any) -> list[np.ndarray]:
        n = int(steps)
        box = np.array([n], np.int64)
        carries, made = [], []
        for (kind, size, shape), a in zip(given, arrays):
            if kind == "carry":
                x = np.array(a, F64).reshape(-1)
                carries.append((x, shape))
            elif kind == "fixed_t":
                x = np.ascontiguousarray(np.asarray(a, F64).T).reshape(-1)
            elif kind in ("row_out", "sum"):
                x = a.reshape(-1)
                if not (type(a) is np.ndarray and a.dtype == F64 and a.flags.c_contiguous and
                        a.flags.writeable):
                    raise ValueError("loop kernel: an array it writes is not a contiguous "
                                     "float64 array")
            else:
                x = np.ascontiguousarray(a, F64).reshape(-1)
            want = n * size if kind in ("row", "row_out") else size
            if x.size != want:
                raise ValueError(f"loop kernel: an input has {x.size} values, not {want}")
            made.append(x)
        space = np.empty(total)
        base, offsets, off = pointer(space), [], 0
        for size in scratch:
            offsets.append(base + 8 * off)
            off += size
        ptrs, it, k = [], iter(made), iter(offsets)
        for kind, _, _ in specs:
            ptrs.append(next(k) if kind == "scratch" else pointer(next(it)))
        call(pointer(box), *ptrs, pointer(nowhere))
        return [x.reshape(shape) for x, shape in carries]
    run.keep, run.loaded, run.source = keep, loaded, source     # (loaded: from the disk cache)
    return run
