"""``sg.compile(prog, backend="numba")``: elementwise chains and their sums fused into loops.

The program is cut into groups, in tape order: an elementwise entry (a primitive whose record
says ``elementwise``, or whose forward is a numpy ufunc, taking no attributes) of float64 or
bool values, whose array arguments all have its shape or hold one value, joins the open group
of its shape; a full ``sum`` of a member joins as an accumulator. A group closes when anything
outside it reads one of its values. Each group of at least ``MIN_ENTRIES`` entries and
``MIN_SIZE`` values becomes one kernel: one pass over memory computing every member per
element and writing only the values read outside it, compiled by numba (``nopython``,
``error_model="numpy"``: a division by zero gives inf or nan as in numpy; fastmath only with
flags that keep nan and inf: contraction, reassociation, reciprocals and signed zeros). Sums
run in blocks of ``BLOCK`` values, so their rounding stays close to numpy's pairwise sum.

The rest of the program, and every entry numba cannot compile, runs as ``sg.compile``'s numpy
code: the fused program is a Program whose kernels are nodes, compiled by compile.py.
``.fallback`` names the entries that numba could not compile.
"""

from __future__ import annotations

import importlib
import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import MissingToolError
from ..primitives.core import REGISTRY, Primitive
from .core import Program
from .nodes import CONST, INPUT, NODE, Node, Ref

MIN_ENTRIES = 2     # a kernel for fewer entries only adds numba's call overhead
MIN_SIZE = 64       # nor for fewer values per entry
BLOCK = 1024        # values per partial sum
FASTMATH = frozenset({"contract", "reassoc", "arcp", "nsz"})     # nan and inf kept
_KINDS = ("f", "b")
_OPERATOR = {"add", "sub", "mul", "div", "neg"}


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

    for j, node in enumerate(prog.nodes):
        shape = tuple(node.shape)
        joined = None
        if j not in excluded and _fusable(prog, node):
            joined = opened.get(shape)
            if joined is None:
                joined = opened[shape] = _Group(shape)
                groups.append(joined)
        elif _full_sum(prog, node):
            src = owner.get(node.args[0].index)
            if src is not None and src.open:
                src.sums.append(j)
                owner[j] = src
                continue
        for r in node.args:     # a value of another open group is read: that group runs first
            g = owner.get(r.index) if r.kind == NODE else None
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


def _fusable(prog: Program, node: Node) -> bool:
    prim = node.prim
    if node.attrs or np.dtype(node.dtype).kind not in _KINDS or \
            REGISTRY.get(prim.name) is not prim:
        return False
    if not (prim.elementwise or isinstance(prim.forward, np.ufunc)):
        return False
    if np.dtype(node.dtype).kind == "f" and np.dtype(node.dtype) != np.float64:
        return False
    for r in node.args:
        shape, dtype = _arg_meta(prog, r)
        if dtype is None:
            continue                    # a Python number: a literal
        if np.dtype(dtype).kind not in _KINDS or (np.dtype(dtype).kind == "f" and
                                                  np.dtype(dtype) != np.float64):
            return False
        if tuple(shape) != tuple(node.shape) and int(np.prod(shape)) != 1:
            return False
    return True


def _full_sum(prog: Program, node: Node) -> bool:
    attrs = node.attrs or {}
    return (node.prim is REGISTRY.get("sum") and len(node.args) == 1 and
            node.args[0].kind == NODE and attrs.get("axis") is None and
            tuple(node.shape) == () and np.dtype(node.dtype) == np.float64)


def _arg_meta(prog: Program, r: Ref) -> tuple[tuple, np.dtype | None]:
    if r.kind == INPUT:
        spec = prog.inputs[r.index]
        return tuple(spec.shape), spec.dtype
    if r.kind == NODE:
        n = prog.nodes[r.index]
        return tuple(n.shape), n.dtype
    value = prog.constants[r.index].value
    if type(value) in (int, float, bool):
        return (), None
    arr = np.asarray(value)
    return arr.shape, arr.dtype


# ---------------------------------------------------------------- kernels


def _scalar_expr(prim: Primitive, args: list[str], helpers: dict) -> str:
    """The entry on one element of each argument, as numba source."""
    if prim.name in _OPERATOR:
        return "(" + prim.numpy.format(*args) + ")"
    if prim.name == "where":
        return f"({args[1]} if {args[0]} else {args[2]})"
    if isinstance(prim.forward, np.ufunc):
        return f"np.{prim.forward.__name__}({', '.join(args)})"
    key = f"_f_{prim.name}"
    helpers[key] = prim.forward
    return f"{key}({', '.join(args)})"


def _number(x: float | int | bool) -> str:
    if type(x) is float and not math.isfinite(x):
        return "np.nan" if x != x else ("np.inf" if x > 0 else "(-np.inf)")
    return repr(x) if x >= 0 else f"({x!r})"


class Kernel:
    """One fused group: its numba function, its source, and how the program calls it."""

    def __init__(self, prog: Program, group: _Group, readers: dict[int, set], outputs: set):
        self.group = group
        members = set(group.members) | set(group.sums)
        self.inputs: list[Ref] = []         # arguments of the kernel, in order
        self.outputs: list[int] = []        # node indices it hands back (members, then sums)
        self.helpers: dict[str, Callable] = {}
        names: dict[tuple, str] = {}
        body: list[str] = []
        size = int(np.prod(group.shape))
        for j in group.members:
            node = prog.nodes[j]
            args = []
            for r in node.args:
                if r.kind == NODE and r.index in members:
                    args.append(f"t{r.index}")
                    continue
                if r.kind == CONST and type(prog.constants[r.index].value) in (int, float, bool):
                    args.append(_number(prog.constants[r.index].value))
                    continue
                key = (r.kind, r.index)
                if key not in names:
                    names[key] = f"a{len(self.inputs)}"
                    self.inputs.append(r)
                one = int(np.prod(_arg_meta(prog, r)[0])) == 1 and size != 1
                args.append(f"{names[key]}[{'0' if one else 'i'}]")
            body.append(f"t{j} = {_scalar_expr(node.prim, args, self.helpers)}")
            if j in outputs or readers.get(j, set()) - members:
                self.outputs.append(j)
                body.append(f"o{j}[i] = t{j}")
        for j in group.sums:
            body.append(f"s{j} += t{prog.nodes[j].args[0].index}")
        self.outputs += list(group.sums)
        params = ", ".join(names[(r.kind, r.index)] for r in self.inputs)
        lines = [f"def kernel({params}):", f"    n = {size}"]
        for j in self.outputs[:len(self.outputs) - len(group.sums)]:
            kind = "np.bool_" if np.dtype(prog.nodes[j].dtype).kind == "b" else "np.float64"
            lines.append(f"    o{j} = np.empty(n, {kind})")
        lines += [f"    acc{j} = 0.0" for j in group.sums]
        lines.append(f"    for b in range(0, n, {BLOCK}):")
        lines += [f"        s{j} = 0.0" for j in group.sums]
        lines.append(f"        for i in range(b, min(b + {BLOCK}, n)):")
        lines += [f"            {line}" for line in body]
        lines += [f"        acc{j} += s{j}" for j in group.sums]
        rets = [f"o{j}" if j not in group.sums else f"acc{j}" for j in self.outputs]
        lines.append(f"    return ({', '.join(rets)},)")
        self.source = "\n".join(lines) + "\n"

    def build(self, numba: Any, prog: Program) -> Callable:
        """The compiled kernel (compiled now, for the arguments' types)."""
        space: dict[str, Any] = {"np": np}
        for key, fn in self.helpers.items():
            space[key] = numba.njit(error_model="numpy", fastmath=set(FASTMATH))(fn)
        exec(compile(self.source, "<simplegrad numba kernel>", "exec"), space)  # noqa: S102
        types = []
        for r in self.inputs:
            dtype = _arg_meta(prog, r)[1]
            # read-only: accepts writable arrays too (recorded values are read-only)
            types.append(numba.types.Array(numba.from_dtype(np.dtype(dtype)), 1, "C",
                                           readonly=True))
        outs = []
        for j in self.outputs:
            dtype = np.dtype(prog.nodes[j].dtype)
            outs.append(numba.from_dtype(dtype) if j in self.group.sums else
                        numba.from_dtype(dtype)[::1])
        sig = numba.types.Tuple(outs)(*types)
        return numba.njit(sig, error_model="numpy", fastmath=set(FASTMATH))(space["kernel"])


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
    for j, node in enumerate(prog.nodes):
        for r in node.args:
            if r.kind == NODE:
                readers.setdefault(r.index, set()).add(j)
    outputs = {r.index for r in prog.outputs if r.kind == NODE}
    excluded: set[int] = set()
    while True:     # entries numba cannot compile are found, left out, and the plan made again
        order, groups = plan(prog, excluded)
        built: dict[int, tuple[Kernel, Callable]] = {}
        for k, g in enumerate(groups):
            if len(g.members) + len(g.sums) < MIN_ENTRIES or int(np.prod(g.shape)) < MIN_SIZE:
                continue
            kernel = Kernel(prog, g, readers, outputs)
            fn = _built(kernel, numba, prog)
            if fn is None:
                alone = [j for j in g.members if _built(Kernel(prog, _single(prog, j), readers,
                                                               {j}), numba, prog) is None]
                excluded.update(alone or g.members)
                break
            built[k] = (kernel, fn)
        else:
            break
    return _assemble(prog, order, groups, built), [k for k, _ in built.values()], \
        [prog.nodes[j].name for j in sorted(excluded)]


def _built(kernel: Kernel, numba: Any, prog: Program) -> Callable | None:
    try:
        return kernel.build(numba, prog)
    except Exception:   # noqa: BLE001 (numba's typing and lowering errors share no base class)
        return None


def _single(prog: Program, j: int) -> _Group:
    g = _Group(tuple(prog.nodes[j].shape))
    g.members.append(j)
    return g


def _assemble(prog: Program, order: list, groups: list[_Group], built: dict) -> Program:
    nodes: list[Node] = []
    where: dict[int, Ref] = {}      # old node index -> ref in the fused program
    count = itertools.count(1)

    def remap(r: Ref) -> Ref:
        return where[r.index] if r.kind == NODE else r

    def plain(j: int) -> None:
        n = prog.nodes[j]
        nodes.append(n._replace(args=tuple(remap(r) for r in n.args)))
        where[j] = Ref(NODE, len(nodes) - 1)

    for kind, k in order:
        if kind == "node" or k not in built:
            for j in [k] if kind == "node" else sorted(groups[k].members + groups[k].sums):
                plain(j)
            continue
        g = groups[k]
        kernel, fn = built[k]
        shapes = [None if j in g.sums else tuple(prog.nodes[j].shape) for j in kernel.outputs]
        name = f"fused{next(count)}"
        entries = len(g.members) + len(g.sums)
        prim = Primitive(name, _caller(fn, shapes), [None], None,
                         lambda a, attrs, fa, n=entries: f"fused({', '.join(a)})  ({n} entries)",
                         [], differentiable=False)
        nodes.append(Node(prim, tuple(remap(r) for r in kernel.inputs), None, name, (),
                          np.dtype(object)))
        at = len(nodes) - 1
        for i, j in enumerate(kernel.outputs):
            n = prog.nodes[j]
            nodes.append(Node(PART, (Ref(NODE, at),), {"index": i}, n.name, n.shape, n.dtype))
            where[j] = Ref(NODE, len(nodes) - 1)
    return Program(prog.inputs, prog.constants, nodes, [remap(r) for r in prog.outputs],
                   prog.single, check=False)
