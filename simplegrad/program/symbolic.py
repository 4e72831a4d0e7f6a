"""Closed forms of programs with SymPy (the ``[sympy]`` extra): ``prog.to_sympy()``,
``prog.to_latex()`` and ``sg.check_closed_form(prog, expr)``.

A program whose entries are elementwise (and scalar) becomes one SymPy expression per output in
one symbol per input, named after it: an array input stands for any one of its entries, so the
expression is what the program computes entrywise. Shape-only entries that keep each entry's
value (an ``expand`` or ``reshape`` of it, a sum of one entry) pass it on. Matrix inputs used
by matrix products become ``MatrixSymbol``s, and ``@``, ``.T``, ``+``, ``-`` and scaling by a
number stay matrix expressions. Anything else (a reduction over entries, indexing, a
decomposition) raises ArgumentError naming the entry. Recorded constants become numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, MissingToolError
from .nodes import CONST, INPUT, ref_of

if TYPE_CHECKING:
    from .core import Program

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
    want = list(expr) if isinstance(expr, (list, tuple)) else [expr]
    if len(want) != len(got):
        raise ArgumentError(f"check_closed_form: the program has {len(got)} output(s), got "
                            f"{len(want)} formula(s)")
    symbols = {i.name: sp.Symbol(i.name, real=True) for i in prog.inputs}
    symbols.update({s.name: s for e in got for s in e.free_symbols})
    want = [sp.sympify(w, locals=symbols) if isinstance(w, str) else sp.sympify(w)
            for w in want]
    # a formula's symbols stand for the inputs of the same name (SymPy's x is not real=True)
    want = [w.subs({s: symbols[s.name] for s in w.free_symbols if s.name in symbols})
            for w in want]
    try:
        if all(sp.simplify(g - w) == 0 for g, w in zip(got, want)):
            return ClosedFormCheck(True, "symbolically")
    except (TypeError, ValueError, AttributeError, NotImplementedError, RecursionError):
        pass      # SymPy cannot decide: the random points will
    rng = np.random.default_rng(seed)
    free = sorted({s for e in got + want for s in e.free_symbols}, key=lambda s: s.name)
    for k in range(points):
        at = {s: float(rng.uniform(0.1, 0.9)) for s in free}
        for i, (g, w) in enumerate(zip(got, want)):
            a, b = complex(sp.N(g.subs(at))), complex(sp.N(w.subs(at)))
            if not abs(a - b) <= rtol * max(1.0, abs(a), abs(b)):
                point = ", ".join(f"{s} = {v:.4f}" for s, v in at.items())
                return ClosedFormCheck(False, f"at random point {k + 1}",
                                       f"output {i}: program {a.real:.10g}, formula "
                                       f"{b.real:.10g} at {point}")
    return ClosedFormCheck(True, f"at {points} random points in (0.1, 0.9)")
