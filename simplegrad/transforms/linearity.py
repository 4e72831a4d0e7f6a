"""Which recorded entries are linear in the inputs that move, checked structurally.

A function is transposable when every entry on the way from its inputs to its outputs is
linear in the operands computed from those inputs (the *moving* operands); the other operands
are constants, whatever they hold. Each primitive's record says in which inputs that holds
(``Primitive.linear``, a ``Linear``):

- jointly linear (``add``, ``sum``, ``reshape``, ``getitem``, ``concatenate``, ...): linear in
  all its inputs together. A constant among them makes the entry affine (``t + 1``), so it must
  be zero (``where(c, t, 0)`` is linear; ``where(c, t, 1)`` is not).
- linear in each (``mul``, ``matmul``, ``einsum``, ``cross``): linear in any one input with
  the others constant; two moving inputs make it bilinear (``t * t``).
- linear in some only (``div`` in its numerator, ``solve`` and ``lstsq`` in their right-hand
  side, ``take_along_axis`` in its values): the rest must be constant.

Every other primitive (``sin``, ``relu``, ``abs``, ``max``, comparisons, ``floor``: piecewise
linear is not linear) is linear in none. A record's ``Linear.when`` reads the attributes:
``pad`` is linear only with ``constant_values`` 0 and ``cast`` only to a floating dtype.
tests/test_linear_transpose.py checks every registered record against its cases numerically,
both ways.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..engine.batching import innermost
from ..engine.render import format_entry
from ..engine.tape import ancestors, descendants, value_of
from ..engine.variable import Entry, Variable
from ..errors import NotDifferentiableError
from ..primitives.core import EACH, JOINT


def check_linear(fname: str, sources: Sequence[Variable], outs: Sequence[Variable]) -> None:
    """Raise NotDifferentiableError, naming the first entry at fault, unless every entry from
    ``sources`` (the leaves standing for f_lin's inputs) to ``outs`` is linear in the operands
    computed from ``sources``, and every output not computed from them is zero."""
    sources = [innermost(s) for s in sources]
    tape = sources[0].rec.tape
    start = min(s.position for s in sources)
    moving = descendants(tape, sources, start, tape.end)
    for k, y in enumerate(innermost(y) for y in outs):
        if y.node not in moving and np.any(_value(y)):
            raise NotDifferentiableError(
                f"{fname}: f_lin is not linear: its output {k} ({y.name} with shape "
                f"{y.shape}) does not depend on its inputs and is not zero (an affine or "
                "constant function has no transpose)")
    for v in ancestors([innermost(y) for y in outs], start):
        if v in moving and v.prim is not None:
            reason = _not_linear(v, moving)
            if reason:
                raise NotDifferentiableError(
                    f"{fname}: f_lin is not linear in its inputs: the entry "
                    f"`{format_entry(v)}` ({v.prim.name}) {reason}")


def _not_linear(v: Entry, moving: set) -> str | None:
    """Why entry ``v`` is not linear in its moving operands, or None when it is."""
    inputs = v.inputs
    mine = [i for i, x in enumerate(inputs) if type(x) is Entry and x in moving]
    linear = v.prim.linear
    rule = None if linear is None else linear.at(len(inputs), v.attrs)
    if rule is None:
        return f"is not linear, and {_them(inputs, mine)} on f_lin's inputs"
    kind, positions = rule
    others = [i for i in mine if i not in positions]
    if others:
        where = ", ".join(str(i) for i in sorted(positions)) or "none"
        return (f"is linear only in its input(s) {where}, and {_them(inputs, others)} on "
                "f_lin's inputs")
    if kind == EACH and len(mine) > 1:
        return (f"is linear in each input alone, not in several together, and "
                f"{_them(inputs, mine)} on f_lin's inputs")
    if kind == JOINT:
        for i in sorted(positions - set(mine)):
            if np.any(_value(inputs[i])):
                x = inputs[i]
                shown = x.name if type(x) is Entry else "a constant"
                return (f"also takes {shown}, which does not depend on the inputs and is not "
                        "zero: the entry is affine, not linear")
    return None


def _them(inputs: tuple, positions: list[int]) -> str:
    """'its input 0 (t with shape (3,)) depends', or 'its inputs 0 (...), 1 (...) depend'."""
    if len(positions) == 1:
        i = positions[0]
        return f"its input {i} ({_named(inputs[i])}) depends"
    named = ", ".join(f"{i} ({_named(inputs[i])})" for i in positions)
    return f"its inputs {named} depend"


def _named(x: Variable) -> str:
    return f"{x.name} with shape {x.shape}"


def _value(x: Any) -> Any:
    return value_of(x)
