"""Text and rich rendering of traces: entries are data, text is made here on demand.

(The module is not called trace.py because ``sg.trace`` is the function that records one.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from .primitives.shape import render_index
from .variable import Variable

if TYPE_CHECKING:
    from .tape import Ops

HEADER_DASHES = "-" * 14
FOOTER = "-" * 18
SMALL = 8           # constants with at most this many entries print their values

STYLES = {
    "leaf": "cyan",
    "forward": "default",
    "header": "bold magenta",
    "grad": "green",
    "accumulate": "bold yellow",
    "map": "magenta",
    "footer": "bold magenta",
}


def format_value(x: Any) -> str:
    """A value as the seed prints it: four fixed decimals, comma separated, one line."""
    text = np.array2string(np.asarray(x), precision=4, separator=", ", floatmode="fixed",
                           suppress_small=True, max_line_width=10**6, threshold=64, edgeitems=3)
    return text.replace("\n", "")


def format_operand(x: Any) -> str:
    """How an input prints inside an entry: a name, a number, or a small constant."""
    if isinstance(x, Variable):
        return x.name if x.label is not None else format_value(x.raw)
    if isinstance(x, (int, float)):
        return repr(x)
    arr = np.asarray(x)
    if arr.size <= SMALL:
        return format_value(arr)
    return f"<{arr.dtype} {'x'.join(map(str, arr.shape))}>"


def format_attr(key: str, value: Any) -> str:
    """An attribute value as it would be written in Python."""
    if isinstance(value, np.ndarray):
        return format_operand(value)
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, tuple) and key in ("shape", "axes"):
        return str(list(value))
    if isinstance(value, tuple) and key == "index":
        return render_index(value)
    return repr(value)


def format_entry(v: Variable) -> str:
    """One recorded entry as ``name = expression``."""
    args = [format_operand(x) for x in v.inputs]
    attrs = v.attrs or {}
    fmt = v.prim.fmt
    if callable(fmt):
        expr = fmt(args, attrs, lambda a, key="": format_attr(key, a))
    else:
        expr = fmt.format(*args, **{k: format_attr(k, a) for k, a in attrs.items()})
    return f"{v.name} = {expr}"


def format_mark(ops: Ops, kind: str, payload: Any) -> list[tuple[str, str]]:
    """The lines (role, text) of a non-entry event: a leaf, a grad block's start or end."""
    if kind == "leaf":
        return [("leaf", f"{payload.name} = {format_value(payload.raw)}")]
    if kind == "zeros":
        return [("leaf", f"{payload.name} = zeros({list(payload.shape)})")]
    if kind == "detach":
        v, src = payload
        return [("leaf", f"{v.name} = {src.name}.detach()")]
    if kind == "grad_begin":
        return [("header", f"d{payload.name} {HEADER_DASHES}")]
    if kind == "grad_end":
        L, items = payload
        return [("map", f"d{L.name}_d{v.name} = {g.name}") for v, g in items] + \
               [("footer", FOOTER)]
    if kind == "jvp_begin":
        y, xs = payload
        return [("header", f"jvp {y.name} wrt {', '.join(x.name for x in xs)} {HEADER_DASHES}")]
    if kind == "jvp_end":
        y, t = payload
        return [("map", f"t{y.name} = {t.name}"), ("footer", FOOTER)]
    return []       # seeds are not printed


def roles(ops: Ops) -> Iterator[tuple[str, str]]:
    """Every line of the trace with its role, in recording order."""
    marks = ops._marks
    accumulations = ops._accumulations
    m = 0
    depth = 0
    for pos, v in enumerate(ops._tape):
        while m < len(marks) and marks[m][0] <= pos:
            kind = marks[m][1]
            depth += kind in ("grad_begin", "jvp_begin")
            depth -= kind in ("grad_end", "jvp_end")
            yield from format_mark(ops, kind, marks[m][2])
            m += 1
        role = "accumulate" if pos in accumulations else ("grad" if depth else "forward")
        yield role, format_entry(v)
    for _, kind, payload in marks[m:]:
        yield from format_mark(ops, kind, payload)


def lines(ops: Ops) -> Iterator[str]:
    """Every line of the trace, in recording order."""
    return (text for _, text in roles(ops))


def echo(ops: Ops, item: Any) -> None:
    """Print the lines of one newly recorded entry or event."""
    if isinstance(item, Variable):
        print(format_entry(item))
    else:
        for _, text in format_mark(ops, item[1], item[2]):
            print(text)


def print_rich(ops: Ops, console: Any = None) -> None:
    """Print the trace to a rich console, coloured by role."""
    from rich.console import Console
    from rich.text import Text

    console = console or Console()
    text = Text()
    for role, line in roles(ops):
        text.append(line + "\n", style=STYLES[role])
    console.print(text, end="")
