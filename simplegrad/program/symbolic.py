"""Closed forms of programs with SymPy (the ``[sympy]`` extra): ``prog.to_sympy()``,
``prog.to_latex()`` and ``sg.check_closed_form(prog, expr)``.

A program whose entries are elementwise (and scalar) becomes one SymPy expression per output in
one symbol per input, named after it: an array input stands for any one of its entries, so the
expression is what the program computes entrywise. Shape-only entries that keep each entry's
value (an ``expand`` or ``reshape`` of it, a sum of one entry) pass it on. Matrix inputs used
by matrix products become ``MatrixSymbol``s, and ``@``, ``.T``, ``+``, ``-`` and scaling by a
number stay matrix expressions. Recorded constants become numbers.

A program of small arrays that moves entries about (concatenate, reshape, indexing, a
transpose, an update at an index), sums them or multiplies small matrices (a Hessian of a few
scalars, a Jacobian of a small vector function) is worked entry by entry: each input of more
than one entry is one symbol per entry (``x_0``, ``x_1``; ``A_0_1`` for a matrix), each value
an array of expressions, the records' ``array`` forms run numpy's own forward on them and the
elementwise forms go entry by entry; an output of more than one entry is a SymPy ``Matrix``
(an ``Array`` beyond two axes). Anything else (a decomposition, a sort) raises ArgumentError
naming the entry.
"""


from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, MissingToolError
from .nodes import CONST, INPUT, ref_of

if TYPE_CHECKING:
    from .core import Program

ENTRIES = 64        # inputs and entries of at most this many entries are worked entry by entry

def _sympy() -> Any:
    try:
        import sympy
    except ImportError:
        raise MissingToolError("to_sympy: SymPy is not installed; pip install "
                               "'simplegrad[sympy]' (or pip install sympy)") from None
    return sympy


def _number(sp: Any, value: Any, where: str) -> Any:
    arr = np.asarray(value)
    flat = arr.reshape(-1)
    if arr.dtype.kind not in "fiub" or flat.size == 0 or not np.all(flat == flat[0]):
        raise ArgumentError(f"to_sympy: {where} reads the constant {arr.dtype} array of shape "
                            f"{arr.shape} whose entries differ: only numbers (or arrays of one "
                            "repeated number) have a closed form here")
    x = flat[0].item()
    if isinstance(x, float) and abs(x) > 1e300:        # a clip's "no bound"
        return sp.oo if x > 0 else -sp.oo
    return sp.Integer(x) if isinstance(x, (int, bool)) or float(x).is_integer() else \
        sp.Float(x)


def to_sympy(prog: Program) -> list:
    """The program's outputs as SymPy expressions (one per output) in one symbol per input."""
    sp = _sympy()
    try:
        return _entrywise(sp, prog)
    except ArgumentError:
        small = all(int(np.prod(n.shape)) <= ENTRIES for n in prog.entries) and \
            all(int(np.prod(spec.shape)) <= ENTRIES for spec in prog.inputs)
        if not small or not any(n.prim.sympy is not None and n.prim.sympy.array
                                for n in prog.entries):
            raise
    return _by_entries(sp, prog)


def _entrywise(sp: Any, prog: Program) -> list:
    """One expression per output, an array input standing for any one of its entries."""
    matrix_inputs = {x.position for n in prog.entries if n.prim.sympy is not None and
                     n.prim.sympy.matrices for x in n.inputs
                     if x.prim is None and x.attrs == INPUT and len(x.shape) == 2}
    symbols = [sp.MatrixSymbol(spec.name, *spec.shape) if i in matrix_inputs
               else sp.Symbol(spec.name, real=True) for i, spec in enumerate(prog.inputs)]
    values: list[Any] = []

    def arg(r: Any, where: str) -> Any:
        if r.kind == INPUT:
            return symbols[r.index]
        if r.kind == CONST:
            return _number(sp, prog.constants[r.index].value, where)
        return values[r.index]

    for node in prog.entries:
        where = prog.format_entry(node)
        args = [arg(ref_of(x), where) for x in node.inputs]
        one = all(int(np.prod(x.shape)) == 1 for x in node.inputs)
        values.append(_entry(sp, node, args, where, one))
    return [arg(r, "an output") for r in prog.outputs]


def _entry(sp: Any, node: Any, args: list, where: str, one: bool) -> Any:
    """The SymPy value of one entry, from its record's ``sympy`` form; ``one``: its arguments
    have one entry each."""
    form, name, attrs = node.prim.sympy, node.prim.name, node.attrs or {}
    if any(isinstance(a, sp.MatrixExpr) for a in args):
        out = None if form is None or form.matrix is None else form.matrix(sp, *args, **attrs)
        if out is None:
            raise ArgumentError(f"to_sympy: {where} ({name}) on a matrix has no matrix closed "
                                "form here (matrix products, transposes, sums and scaling do)")
        return out
    if form is None or form.entry is None or form.single and not one:
        raise ArgumentError(f"to_sympy: {where} ({name}) is not elementwise: only elementwise "
                            "and scalar programs, and matrix products, have a closed form here")
    return form.entry(sp, *args, **attrs)


def _by_entries(sp: Any, prog: Program) -> list:
    """The outputs worked entry by entry: arrays of expressions, one symbol per input entry."""
    def symbols(name: str, shape: tuple) -> np.ndarray:
        out = np.empty(shape, dtype=object)
        for k in np.ndindex(*shape):
            out[k] = sp.Symbol("_".join([name, *map(str, k)]), real=True)
        return out

    def number(x: Any) -> Any:
        x = x.item() if hasattr(x, "item") else x
        return sp.Integer(x) if isinstance(x, (int, bool)) or float(x).is_integer() else \
            sp.Float(x)

    inputs = [symbols(spec.name, tuple(spec.shape)) for spec in prog.inputs]
    values: list[Any] = []

    def arg(r: Any, where: str) -> Any:
        if r.kind == INPUT:
            return inputs[r.index]
        if r.kind == CONST:
            value = np.asarray(prog.constants[r.index].value)
            if value.dtype.kind not in "fiub":
                raise ArgumentError(f"to_sympy: {where} reads a constant of dtype {value.dtype}")
            if value.dtype.kind in "iu" and value.ndim:     # an index: kept as integers
                return value
            return np.vectorize(number, otypes=[object])(value) if value.ndim else \
                np.array(number(value), dtype=object)
        return values[r.index]

    for node in prog.entries:
        where = prog.format_entry(node)
        args = [arg(ref_of(x), where) for x in node.inputs]
        form, attrs = node.prim.sympy, node.attrs or {}
        if form is not None and form.array:
            out = node.prim.forward(*args, **attrs)
        elif form is not None and form.entry is not None and not form.single:
            entry = functools.partial(form.entry, sp, **attrs)
            out = np.frompyfunc(entry, len(args), 1)(*args)
        else:
            raise ArgumentError(f"to_sympy: {where} ({node.prim.name}) has no closed form "
                                "entry by entry here (elementwise entries, data movement, "
                                "sums and matrix products do)")
        values.append(np.asarray(out, dtype=object).reshape(node.shape))
    return [_as_sympy(sp, arg(r, "an output")) for r in prog.outputs]


def _as_sympy(sp: Any, value: np.ndarray) -> Any:
    """An array of expressions as SymPy holds it: one expression, a Matrix, or an Array."""
    value = np.asarray(value, dtype=object)
    if value.ndim == 0 or value.size == 1 and value.ndim == 0:
        return sp.sympify(value.item())
    if value.ndim <= 2:
        return sp.Matrix(value.reshape(value.shape[0], -1).tolist())
    return sp.Array(value.tolist())


def to_latex(prog: Program) -> str:
    """The program's outputs as LaTeX, one ``name = ...`` line per output."""
    sp = _sympy()
    names = [prog._operand(r) for r in prog.outputs]
    return "\n".join(f"{n} = {sp.latex(e)}" for n, e in zip(names, to_sympy(prog)))


@dataclass(frozen=True)
class ClosedFormCheck:
    """What ``check_closed_form`` found: truthy when the formula equals the program."""

    equal: bool
    how: str                # "symbolically", or "at N random points"
    details: str = ""

    def __bool__(self) -> bool:
        return self.equal

    def __str__(self) -> str:
        verdict = "equal" if self.equal else "NOT equal"
        return f"{verdict} ({self.how}){': ' + self.details if self.details else ''}"


def check_closed_form(prog: Program, expr: Any, points: int = 20, seed: int = 0,
                      rtol: float = 1e-9) -> ClosedFormCheck:
    """Whether ``expr`` (SymPy or a string; a list for several outputs) equals the program's
    outputs: symbolically where SymPy decides, otherwise at random points."""
    sp = _sympy()
    got = to_sympy(prog)
    one_array = len(got) == 1 and _shape(got[0]) and \
        np.shape(np.asarray(expr, dtype=object)) in (_shape(got[0]), _shape(got[0])[:1])
    want = list(expr) if isinstance(expr, (list, tuple)) and not one_array else [expr]
    if len(want) != len(got):
        raise ArgumentError(f"check_closed_form: the program has {len(got)} output(s), got "
                            f"{len(want)} formula(s)")
    symbols = {i.name: sp.Symbol(i.name, real=True) for i in prog.inputs}
    symbols.update({s.name: s for e in got for x in _flat(e) for s in x.free_symbols})
    want = [_formula(sp, w, g, symbols) for w, g in zip(want, got)]
    for i, (g, w) in enumerate(zip(got, want)):
        if _shape(g) != _shape(w):
            raise ArgumentError(f"check_closed_form: output {i} has shape {_shape(g)}, its "
                                f"formula {_shape(w)}")
    # one (program, formula) pair of expressions per output entry, and where it came from
    pairs = [(f"output {i}" + (f" entry {k}" if _shape(g) else ""), a, b)
             for i, (g, w) in enumerate(zip(got, want))
             for k, (a, b) in enumerate(zip(_flat(g), _flat(w)))]
    try:
        if all(sp.simplify(a - b) == 0 for _, a, b in pairs):
            return ClosedFormCheck(True, "symbolically")
    except (TypeError, ValueError, AttributeError, NotImplementedError, RecursionError):
        pass      # SymPy cannot decide: the random points will
    rng = np.random.default_rng(seed)
    free = sorted({s for _, a, b in pairs for s in a.free_symbols | b.free_symbols},
                  key=lambda s: s.name)
    for k in range(points):
        at = {s: float(rng.uniform(0.1, 0.9)) for s in free}
        for what, g, w in pairs:
            a, b = complex(sp.N(g.subs(at))), complex(sp.N(w.subs(at)))
            if not abs(a - b) <= rtol * max(1.0, abs(a), abs(b)):
                point = ", ".join(f"{s} = {v:.4f}" for s, v in at.items())
                return ClosedFormCheck(False, f"at random point {k + 1}",
                                       f"{what}: program {a.real:.10g}, formula "
                                       f"{b.real:.10g} at {point}")
    return ClosedFormCheck(True, f"at {points} random points in (0.1, 0.9)")


def _flat(e: Any) -> list:
    """The entries of an expression, a Matrix or an Array, in C order."""
    return list(e) if _shape(e) else [e]


def _shape(e: Any) -> tuple:
    shape = getattr(e, "shape", ())
    return tuple(shape) if not callable(shape) else ()


def _formula(sp: Any, w: Any, like: Any, symbols: dict) -> Any:
    """A formula as SymPy: a string parsed in the inputs' symbols, a nested list or array
    as the Matrix or Array its output is, each symbol named as an input made that input."""
    if isinstance(w, str):
        w = sp.sympify(w, locals=symbols)
    elif isinstance(w, (list, tuple, np.ndarray)) and _shape(like):
        rows = np.asarray(w, dtype=object)
        w = sp.Array(rows.tolist()) if isinstance(like, sp.NDimArray) else \
            sp.Matrix(rows.reshape(like.shape).tolist())
    else:
        w = sp.sympify(w)
    # a formula's symbols stand for the inputs of the same name (SymPy's x is not real=True)
    swap = {s: symbols[s.name] for x in _flat(w) for s in x.free_symbols if s.name in symbols}
    return w.subs(swap) if swap else w
