"""The loops the numba backend compiles (numba_backend.py decides what they fuse).

A ``Kernel`` is one fused group as numba source: a loop over blocks of ``BLOCK`` values in which
each member entry is one scalar statement, the values read outside the group are written to
arrays and full sums are accumulated per block. Operators, comparisons and ``where`` are
written as Python expressions, ``exp`` and ``tanh`` as arithmetic (``_exp_lines``), numpy ufuncs
as themselves, and other forwards as calls of numba-compiled helpers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..primitives.core import Primitive
from .core import Program
from .nodes import CONST, INPUT, NODE, Ref

BLOCK = 1024        # values per partial sum
FASTMATH = frozenset({"contract", "reassoc", "arcp", "nsz"})     # nan and inf kept
_OPERATOR = {"add", "sub", "mul", "div", "neg"}
_SCALAR = {"where": "({1} if {0} else {2})"}


def arg_meta(prog: Program, r: Ref) -> tuple[tuple, np.dtype | None]:
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

# ---------------------------------------------------------------- exp and tanh, written out

# exp and tanh are written into the loop as arithmetic and one table read, so that the loop
# vectorises (a libm call keeps it scalar, at 50 ns a value, and numba's own inlining
# compiles for seconds per call site): exp by Cody-Waite reduction x = k ln 2 + r,
# r in [0, ln 2), a degree-17 Taylor polynomial and 2^k from a table (in two factors below
# 2^-1022, for subnormal results); tanh(x) = e / (e + 2) with e = expm1(2|x|) (a polynomial
# below 0.35, where exp(2|x|) - 1 would cancel), its sign restored. Within a few ulp of numpy's
# own; nan and inf as numpy gives them.
_POW2_OFFSET = 1100
_FACTORIALS = [float(math.factorial(k)) for k in range(18)]


def _pow2() -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.array([2.0 ** j if j < 1024 else np.inf for j in range(-_POW2_OFFSET, 1041)])


def _exp_lines(x: str, out: str, p: str) -> list[str]:
    # min and max compile to selects (a conditional expression is a branch, and numba takes
    # seconds over a few hundred of them); np.fmax drops a nan, so the table index is always
    # in range, while the polynomial carries the nan through
    lines = [f"{p}c = min(max({x}, -760.0), 720.0)",
             f"{p}k = np.floor({p}c * 1.4426950408889634)",
             f"{p}r = ({p}c - {p}k * 0.6931471803691238) - {p}k * 1.9082149292705877e-10",
             f"{p}q17 = {1.0 / _FACTORIALS[17]!r}"]
    lines += [f"{p}q{k} = {p}q{k + 1} * {p}r + {1.0 / _FACTORIALS[k]!r}"
              for k in range(16, -1, -1)]
    return lines + [f"{p}j = np.int64(np.fmin(np.fmax({p}k, -1100.0), 1040.0))",
                    f"{p}l = max({p}j, -1022)",
                    f"{out} = {p}q0 * POW2[{p}l + {_POW2_OFFSET}] * POW2[{p}j - {p}l + "
                    f"{_POW2_OFFSET}]"]


def _tanh_lines(x: str, out: str, p: str) -> list[str]:
    lines = [f"{p}t = min(2.0 * abs({x}), 44.0)", f"{p}m15 = {1.0 / _FACTORIALS[15]!r}"]
    lines += [f"{p}m{k} = {p}m{k + 1} * {p}t + {1.0 / _FACTORIALS[k]!r}"
              for k in range(14, 0, -1)]
    lines += _exp_lines(f"{p}t", f"{p}x", f"{p}x_")
    return lines + [f"{p}w = np.float64({p}t < 0.35)",
                    f"{p}e = {p}m1 * {p}t * {p}w + ({p}x - 1.0) * (1.0 - {p}w)",
                    f"{out} = math.copysign({p}e / ({p}e + 2.0), {x})"]


_WRITTEN = {"exp": _exp_lines, "tanh": _tanh_lines}


# ---------------------------------------------------------------- kernels


# ufuncs LLVM turns into vector instructions; any other (sin, log, ...) is a call in the loop,
# which keeps it scalar: numpy's own SIMD loops run those entries
_INLINE = {"add", "subtract", "multiply", "divide", "negative", "greater", "greater_equal",
           "less", "less_equal", "equal", "not_equal", "maximum", "minimum", "fmax", "fmin",
           "absolute", "sqrt", "square", "reciprocal", "sign", "floor", "ceil", "logical_and",
           "logical_or", "logical_not", "logical_xor"}


def is_call(prim: Primitive) -> bool:
    """Whether the entry is a numpy function that numba would call per value (sin, log, ...):
    numpy's SIMD loops run those faster. A forward of simplegrad's own (sigmoid, clip, ...)
    is tried as a numba function; one numba cannot compile falls back."""
    if prim.name in _OPERATOR or prim.name in _SCALAR or prim.name in _WRITTEN:
        return False
    return isinstance(prim.forward, np.ufunc) and prim.forward.__name__ not in _INLINE


def _scalar_expr(prim: Primitive, args: list[str], helpers: dict) -> str:
    """The entry on one element of each argument, as numba source."""
    if prim.name in _OPERATOR:
        return "(" + prim.numpy.format(*args) + ")"
    if prim.name in _SCALAR:
        return _SCALAR[prim.name].format(*args)
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

    def __init__(self, prog: Program, group: Any, readers: dict[int, set], outputs: set):
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
                one = int(np.prod(arg_meta(prog, r)[0])) == 1 and size != 1
                args.append(f"{names[key]}[{'0' if one else 'i'}]")
            if node.prim.name in _WRITTEN:
                body += _WRITTEN[node.prim.name](args[0], f"t{j}", f"e{j}_")
            else:
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
        space: dict[str, Any] = {"np": np, "math": math, "POW2": _pow2()}
        for key, fn in self.helpers.items():
            space[key] = numba.njit(error_model="numpy", fastmath=set(FASTMATH))(fn)
        exec(compile(self.source, "<simplegrad numba kernel>", "exec"), space)  # noqa: S102
        types = []
        for r in self.inputs:
            dtype = arg_meta(prog, r)[1]
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
