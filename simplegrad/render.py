"""Text and rich rendering of traces: entries are data, text is made here on demand.

(The module is not called trace.py because ``sg.trace`` is the function that records one.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from .events import BlockBegin, Event, Leaf
from .primitives.shape import render_index
from .variable import Variable

if TYPE_CHECKING:
    from .tape import Tape

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


def format_event(event: Event) -> list[tuple[str, str]]:
    """The lines (role, text) of an event: a leaf, a derivative block's start or end."""
    if type(event) is Leaf:
        v = event.var
        if event.kind == "leaf":
            return [("leaf", f"{v.name} = {format_value(v.raw)}")]
        if event.kind == "zeros":
            return [("leaf", f"{v.name} = zeros({list(v.shape)})")]
        if event.kind == "detach":
            return [("leaf", f"{v.name} = {event.source.name}.detach()")]
        return []       # seeds are not printed
    if type(event) is BlockBegin:
        if event.kind == "grad":
            return [("header", f"d{event.target.name} {HEADER_DASHES}")]
        names = ", ".join(x.name for x in event.inputs)
        return [("header", f"jvp {event.target.name} wrt {names} {HEADER_DASHES}")]
    if event.kind == "grad":
        return [("map", f"d{event.target.name}_d{v.name} = {g.name}") for v, g in event.pairs] + \
               [("footer", FOOTER)]
    return [("map", f"t{y.name} = {t.name}") for y, t in event.pairs] + [("footer", FOOTER)]


def roles(tape: Tape) -> Iterator[tuple[str, str]]:
    """Every line of the trace with its role, in recording order."""
    events = tape.events
    accumulations = tape.accumulations
    m = 0
    depth = 0
    for v in tape.entries:
        pos = v.position
        while m < len(events) and events[m].position <= pos:
            event = events[m]
            if type(event) is not Leaf:
                depth += 1 if type(event) is BlockBegin else -1
            yield from format_event(event)
            m += 1
        role = "accumulate" if pos in accumulations else ("grad" if depth else "forward")
        yield role, format_entry(v)
    for event in events[m:]:
        yield from format_event(event)


def lines(tape: Tape) -> Iterator[str]:
    """Every line of the trace, in recording order."""
    return (text for _, text in roles(tape))


def echo(item: Variable | Event) -> None:
    """Print the lines of one newly recorded entry or event (a tape listener)."""
    if isinstance(item, Variable):
        print(format_entry(item))
    else:
        for _, text in format_event(item):
            print(text)


def print_rich(tape: Tape, console: Any = None) -> None:
    """Print the trace to a rich console, coloured by role."""
    from rich.console import Console
    from rich.text import Text

    console = console or Console()
    text = Text()
    for role, line in roles(tape):
        text.append(line + "\n", style=STYLES[role])
    console.print(text, end="")
