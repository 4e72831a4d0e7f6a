"""Programs of float64 numbers run on Python floats: what ``sg.compile`` calls for a program
whose every input, constant and entry is one float64 number or one decision (a bool: ``x > 0``,
read by ``where`` or by a guard), such as a Taylor series at a point, a nested derivative of a
function of one number, a Hessian at a point (its unit stack has shape (1,): one number too;
the outputs are 0-d), or scalar code under ``sg.jit``.

numpy takes about a microsecond for an operation on a 0-d array; CPython takes tens of
nanoseconds for the same IEEE double operation on floats. So such a program gets a second
function, each entry one line of its record's form on floats (``Primitive.python``: operators
for the arithmetic, ``float(np.tanh(x))`` for a ufunc, which runs numpy's own loop on the
number), giving numpy's values bit for bit. Where numpy would warn (or raise, under
``np.errstate``), the operators either raise (``ZeroDivisionError``) or go on silently with a
number that is not finite (an overflow is inf, inf - inf is nan, and a value that is not
finite stays so through the arithmetic); the function then runs the numpy program instead,
which gives the same values with numpy's warnings. So before an entry runs it checks its
record's condition (``Primitive.python_check``: a ufunc's inputs on which it raises no
floating-point error; a value that is not finite could vanish in, finite: tanh(inf) is 1,
x / inf is 0), and before it returns, that the outputs are finite. One thing it does not see:
numpy's setting for underflow (ignored unless set otherwise with ``np.seterr``), since a
subnormal or zero result of an operator is no error of Python's. The program's guards are
checked as in its numpy source, on the numbers (``ReplayError`` where a decision goes the
other way).
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..primitives.core import REGISTRY
from .core import Program
from .nodes import INPUT, NODE, Names, guard_lines, literal

EXACT_INT = 2 ** 53     # a Python int constant below this is a float64 exactly, as numpy takes it
# a program of at most FLOATS_AT_ONCE entries runs on floats from its first call (its floats'
# function takes a fraction of a millisecond to make); a larger one from its FLOATS_AFTER-th,
# as making it costs about half of compiling, which a few calls would not make up
FLOATS_AT_ONCE = 64
FLOATS_AFTER = 16


class ToNumpyError(ArithmeticError):
    """A value the Python floats cannot follow numpy through: run the numpy program."""


def may_run_on_floats(prog: Program) -> bool:
    """Whether a program's inputs are float64 numbers (the quick test; ``floats_function``
    reads its entries)."""
    return all(tuple(s.shape) == () and np.dtype(s.dtype) == np.float64 for s in prog.inputs)


def floats_function(prog: Program, name: str, fallback: Callable) -> tuple[str, Callable] | None:
    """The source and function running ``prog`` on Python floats (``fallback``, the numpy
    function, where they cannot answer as numpy would), or None when the program is not one of
    float64 numbers alone or an entry's record has no form on floats."""
    if not may_run_on_floats(prog):
        return None
    names = Names({"np", "finite", "fallback", "ToNumpyError", "float", "abs", "bool"} |
                  {f"G{k}" for k in range(len(prog.guards))} |
                  {f"W{k}" for k in range(len(prog.guards))})
    params = [names.take(i.name) for i in prog.inputs]
    namespace: dict[str, Any] = {"np": np, "finite": math.isfinite, "fallback": fallback,
                                 "ToNumpyError": ToNumpyError, "float": float, "abs": abs,
                                 "bool": bool,
                                 "__builtins__": {"ArithmeticError": builtins.ArithmeticError}}
    checks: dict[tuple, list] = {}      # (kind, index) -> the guards on that value
    for k, g in enumerate(prog.guards):
        checks.setdefault((g.ref.kind, g.ref.index), []).append((k, g))
    lines, text_of = [], {}

    def guarded(kind: str, i: int, text: str, number: bool) -> None:
        found = checks.get((kind, i), ())
        if found and number:        # (a number not finite decides where numpy would warn)
            lines.append(f"if not finite({text}): raise ToNumpyError")
        lines.extend(line.strip() for line, _ in
                     guard_lines(found, text, namespace, False, True))
    for i, (p, slot) in enumerate(zip(params, prog.slots)):
        text_of[slot] = names.take(f"{p}_f")
        lines.append(f"{text_of[slot]} = float({p})")
        guarded(INPUT, i, text_of[slot], True)
    outputs = {prog.at(r) for r in prog.outputs}
    if any(tuple(x.shape) != () for x in outputs):
        return None     # (an output is handed back as a 0-d array: numbers only)
    for c, leaf in zip(prog.constants, prog.fixed):
        text = _constant(c.value, leaf in outputs)
        if text is None:
            return None
        if text == "bind":
            text = names.take(c.name or "c")
            namespace[text] = float(np.asarray(c.value).reshape(()))
        text_of[leaf] = text
    reached = _reaching(prog, outputs)
    forwards: dict[Any, str] = {}       # a record whose form calls its own forward: its name
    for i, node in enumerate(prog.entries):
        prim = node.prim
        if REGISTRY.get(prim.name) is not prim or prim.python is None or \
                not _single(node.shape) or np.dtype(node.dtype) not in (_FLOAT, _BOOL):
            return None
        args = [text_of[x] for x in node.inputs]
        if prim.python == "{0}":        # (the value itself: no line)
            text_of[node] = args[0]
        else:
            if prim.python_check is not None:
                lines.append(f"if not ({prim.python_check.format(*args)}): raise ToNumpyError")
            text_of[node] = names.take(node.name)
            if "{f}" in prim.python and prim not in forwards:
                forwards[prim] = names.take(f"{prim.name}_forward")
                namespace[forwards[prim]] = prim.forward
            form = prim.python.format(*args, f=forwards.get(prim))
            if np.dtype(node.dtype) == _BOOL:       # (numpy's sum of bools is their or;
                form = f"bool({form})"              # Python's is an int)
            lines.append(f"{text_of[node]} = {form}")
        guarded(NODE, i, text_of[node], np.dtype(node.dtype) == _FLOAT)
        if node not in reached:         # (read by nothing: its value checked with the outputs)
            outputs.add(node)
    outs = [text_of[prog.at(r)] for r in prog.outputs]
    checked = sorted({text_of[x] for x in outputs if text_of[x].isidentifier() and
                      np.dtype(x.dtype) != _BOOL})     # (a decision is always finite)
    ret = outs[0] if prog.single else "[" + ", ".join(outs) + "]"
    test = " and ".join(f"finite({t})" for t in checked) or "True"
    source = "\n".join([
        f"def {name}({', '.join(params)}):",
        "    try:",
        *(f"        {line}" for line in lines),
        f"        if {test}:",
        f"            return {ret}",
        "    except ArithmeticError:",
        "        pass",
        f"    return fallback({', '.join(params)})"]) + "\n"
    code = builtins.compile(source, f"<simplegrad compiled {name} on floats>", "exec")
    exec(code, namespace)  # noqa: S102 -- source generated above from registry records
    return source, namespace[name]


_FLOAT, _BOOL = np.dtype(np.float64), np.dtype(np.bool_)


def _single(shape: tuple) -> bool:
    """Whether a value of this shape is one number: () or ones alone, (1,) and (1, 1) (the
    unit stacks of a Jacobian at a point), whose arithmetic is the number's."""
    return all(n == 1 for n in shape)


def _constant(value: Any, output: bool) -> str | None:
    """A constant's text in the floats' source: a literal, "bind" (a name bound to the float),
    or None when the program cannot run on floats (not a float64 number; an int output). An
    int operand is written as its float, which is the float64 numpy takes it as."""
    if type(value) is int:
        return None if output or abs(value) >= EXACT_INT else repr(float(value))
    if type(value) is float or isinstance(value, (np.ndarray, np.generic)) and \
            _single(np.shape(value)) and np.result_type(value) == np.float64:
        return literal(float(np.asarray(value).reshape(()))) or "bind"
    return None


def _reaching(prog: Program, outputs: set) -> set:
    """The entries whose values reach an output."""
    reached = set(outputs)
    for node in reversed(prog.entries):
        if node in reached:
            reached.update(node.inputs)
    return reached
