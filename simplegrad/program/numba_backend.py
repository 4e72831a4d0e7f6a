"""``sg.compile(prog, backend="numba")``: elementwise chains and their sums fused into loops.

The program is cut into groups, in tape order: an elementwise entry (a primitive whose record
says ``elementwise``, or whose forward is a numpy ufunc, taking no attributes) of float64 or
bool values, whose array arguments all have its shape or hold one value, joins the open group
of its shape, unless it is a numpy function numba would call per value (sin, log, ...: numpy's
SIMD loops run those between fused loops); exp and tanh are written into the loop (see
numba_kernels.py); a full ``sum`` of a member joins as an accumulator. A group closes when anything
outside it reads one of its values. Each group of at least ``MIN_ENTRIES`` entries and
``MIN_SIZE`` values becomes one kernel: one pass over memory computing every member per
element and writing only the values read outside it, compiled by numba as a C function of
pointers (``numba.cfunc``, ``error_model="numpy"``: a division by zero gives inf or nan as in
numpy; fastmath only with flags that keep nan and inf: contraction, reassociation, reciprocals
and signed zeros), its machine code kept on disk and loaded without numba's compiler in the
next process (numba_kernels.py, "the kernel cache"). Sums
run in blocks of ``numba_kernels.BLOCK`` values, so their rounding stays close to numpy's
pairwise sum.

The rest of the program, and every entry numba cannot compile, runs as ``sg.compile``'s numpy
code: the fused program is a Program whose kernels are nodes, compiled by compile.py.
``.fallback`` names the entries that numba could not compile.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine.variable import Entry
from ..errors import MissingToolError
from ..primitives.core import REGISTRY, Primitive
from .core import Program
from .nodes import NODE, Node, Ref, refs_of
from .numba_kernels import Kernel, arg_meta, is_call

MIN_ENTRIES = 2     # a kernel for fewer entries only adds numba's call overhead
MIN_SIZE = 64       # nor for fewer values per entry
_KINDS = ("f", "b")


def numba_or_error() -> Any:
    """The numba module, or MissingToolError naming the extra that installs it."""
    try:
        return importlib.import_module("numba")
    except ImportError:
        raise MissingToolError("compile: backend='numba' needs numba; install it with "
                               "pip install 'simplegrad[numba]' (or pass backend='numpy')"
                               ) from None


class _Group:
    """Entries fused into one loop: members (node indices, tape order) and full sums."""

    def __init__(self, shape: tuple):
        self.shape = shape
        self.members: list[int] = []
        self.sums: list[int] = []
        self.open = True


def plan(prog: Program, excluded: set[int]) -> tuple[list, list[_Group]]:
    """The order to run the program in: ("node", j) and ("group", g) items; and the groups
    (entries in ``excluded`` run on numpy)."""
    groups: list[_Group] = []
    owner: dict[int, _Group] = {}
    opened: dict[tuple, _Group] = {}
    order: list[tuple] = []

    def close(g: _Group) -> None:
        if g.open:
            g.open = False
            opened.pop(g.shape, None)
            order.append(("group", groups.index(g)))

    for j, node in enumerate(prog.entries):
        shape = tuple(node.shape)
        joined = None
        if j not in excluded and _fusable(prog, node):
            joined = opened.get(shape)
            if joined is None:
                joined = opened[shape] = _Group(shape)
                groups.append(joined)
        elif _full_sum(prog, node):
            src = owner.get(node.in0.position)
            if src is not None and src.open:
                src.sums.append(j)
                owner[j] = src
                continue
        for x in node.inputs:   # a value of another open group is read: that group runs first
            g = owner.get(x.position) if x.prim is not None else None
            if g is not None and g is not joined and g.open:
                close(g)
        if joined is None:
            order.append(("node", j))
        else:
            joined.members.append(j)
            owner[j] = joined
    for g in groups:
        close(g)
    return order, groups


def _fusable(prog: Program, node: Entry) -> bool:
    prim = node.prim
    if node.attrs or np.dtype(node.dtype).kind not in _KINDS or \
            REGISTRY.get(prim.name) is not prim:
        return False
    if not (prim.elementwise or isinstance(prim.forward, np.ufunc)) or is_call(prim):
        return False        # (a function call keeps a loop scalar: numpy's own loops are SIMD)
    if np.dtype(node.dtype).kind == "f" and np.dtype(node.dtype) != np.float64:
        return False
    for r in refs_of(node):
        shape, dtype = arg_meta(prog, r)
        if dtype is None:
            continue                    # a Python number: a literal
        if np.dtype(dtype).kind not in _KINDS or (np.dtype(dtype).kind == "f" and
                                                  np.dtype(dtype) != np.float64):
            return False
        if tuple(shape) != tuple(node.shape) and int(np.prod(shape)) != 1:
            return False
    return True


def _full_sum(prog: Program, node: Entry) -> bool:
    attrs = node.attrs or {}
    return (node.prim.numba == "+=" and REGISTRY.get(node.prim.name) is node.prim and
            len(node.inputs) == 1 and
            node.in0.prim is not None and attrs.get("axis") is None and
            tuple(node.shape) == () and np.dtype(node.dtype) == np.float64)


def _caller(fn: Callable, shapes: list[tuple]) -> Callable:
    """The kernel as a program node's forward: flat contiguous arguments in, values of their
    own shapes out."""
    def fused(*args: Any) -> tuple:
        flat = [a.reshape(-1) if type(a) is np.ndarray and a.flags.c_contiguous else
                np.ascontiguousarray(a).reshape(-1) for a in args]
        outs = fn(*flat)
        return tuple(o.reshape(s) if s is not None else np.float64(o)
                     for o, s in zip(outs, shapes))
    return fused


def _part(t: tuple, index: int) -> Any:
    return t[index]


PART = Primitive("fused_value", _part, [None], None,
                 lambda a, attrs, fa: f"{a[0]}[{attrs['index']}]", [], differentiable=False)


def fuse(prog: Program) -> tuple[Program, list[Kernel], list[str]]:
    """The program with each group of entries numba compiles as one kernel node; the kernels,
    and the names of the entries that fell back to numpy."""
    numba = numba_or_error()
    readers: dict[int, set] = {}
    for j, node in enumerate(prog.entries):
        for x in node.inputs:
            if x.prim is not None:
                readers.setdefault(x.position, set()).add(j)
    outputs = {r.index for r in (*prog.outputs, *(g.ref for g in prog.guards))
               if r.kind == NODE}       # (a guard reads its value as an output is read)
    excluded: set[int] = set()
    while True:     # entries numba cannot compile are found, left out, and the plan made again
        order, groups = plan(prog, excluded)
        built: dict[int, tuple[Kernel, Callable]] = {}
        for k, g in enumerate(groups):
            if len(g.members) + len(g.sums) < MIN_ENTRIES or int(np.prod(g.shape)) < MIN_SIZE:
                continue
            kernel = Kernel(prog, g, readers, outputs)
            fn = _built(kernel, numba, prog)
            if fn is None:      # one member of each primitive alone: which cannot compile
                first: dict[str, int] = {}
                for j in g.members:
                    first.setdefault(prog.entries[j].prim.name, j)
                bad = {name for name, j in first.items() if _built(
                    Kernel(prog, _single(prog, j), readers, {j}), numba, prog) is None}
                excluded.update([j for j in g.members if prog.entries[j].prim.name in bad]
                                or g.members)
                break
            built[k] = (kernel, fn)
        else:
            break
    return _assemble(prog, order, groups, built), [k for k, _ in built.values()], \
        [prog.entries[j].name for j in sorted(excluded)]


def _built(kernel: Kernel, numba: Any, prog: Program) -> Callable | None:
    try:
        return kernel.build(numba, prog)
    except Exception:   # noqa: BLE001 (numba's typing and lowering errors share no base class)
        return None


def _single(prog: Program, j: int) -> _Group:
    g = _Group(tuple(prog.entries[j].shape))
    g.members.append(j)
    return g


def _assemble(prog: Program, order: list, groups: list[_Group], built: dict) -> Program:
    nodes: list[Node] = []
    where: dict[int, Ref] = {}      # old node index -> ref in the fused program
    count = itertools.count(1)

    def remap(r: Ref) -> Ref:
        return where[r.index] if r.kind == NODE else r

    def plain(j: int) -> None:
        n = prog.entries[j]
        nodes.append(Node(n.prim, tuple(remap(r) for r in refs_of(n)), n.attrs, n.label,
                          n.shape, n.dtype, prog.orders[j]))
        where[j] = Ref(NODE, len(nodes) - 1)

    for kind, k in order:
        if kind == "node" or k not in built:
            for j in [k] if kind == "node" else sorted(groups[k].members + groups[k].sums):
                plain(j)
            continue
        g = groups[k]
        kernel, fn = built[k]
        shapes = [None if j in g.sums else tuple(prog.entries[j].shape) for j in kernel.outputs]
        name = f"fused{next(count)}"
        entries = len(g.members) + len(g.sums)
        prim = Primitive(name, _caller(fn, shapes), [None], None,
                         lambda a, attrs, fa, n=entries: f"fused({', '.join(a)})  ({n} entries)",
                         [], differentiable=False)
        nodes.append(Node(prim, tuple(remap(r) for r in kernel.inputs), None, name, (),
                          np.dtype(object)))
        at = len(nodes) - 1
        for i, j in enumerate(kernel.outputs):
            n = prog.entries[j]
            nodes.append(Node(PART, (Ref(NODE, at),), {"index": i}, n.label, n.shape, n.dtype))
            where[j] = Ref(NODE, len(nodes) - 1)
    return Program(prog.inputs, prog.constants, nodes, [remap(r) for r in prog.outputs],
                   prog.single, check=False,
                   guards=[g._replace(ref=remap(g.ref)) for g in prog.guards])
