"""Text and rich rendering of traces: entries are data, text is made here on demand.

``format_line`` prints one entry, of a tape (``format_entry``) or of a Program
(``Program.format_node``). (The module is not called trace.py because ``sg.trace`` is the
function that records one.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..primitives.indexing import render_index
from .derivation import Derivation, Line
from .explain import block_target_entry, blocks, orders, origins
from .tape import Asked, BlockBegin, BlockEnd, Event, Labels, Leaf
from .variable import Entry, Variable

if TYPE_CHECKING:
    from ..primitives.core import Primitive
    from .tape import Tape

HEADER_DASHES = "-" * 14
# the heading of a gradient block with complex values: which derivative it computes
# (transforms/conventions.py; PyTorch's convention conjugates JAX's after the block)
COMPLEX_HEADINGS = {"real": "2 dL/dz = dL/dx - i dL/dy (JAX convention)",
                    "holomorphic": "df/dz (holomorphic)"}
FOOTER = "-" * 18
SMALL = 8           # constants with at most this many entries print their values
PREVIEW = 48        # characters of a value's preview

STYLES = {
    "leaf": "cyan",
    "forward": "default",
    "header": "bold magenta",
    "grad": "green",
    "accumulate": "underline",     # added to its order's colour: a marker, not a colour
    "map": "magenta",
    "footer": "bold magenta",
}


def format_value(x: Any) -> str:
    """A value as the seed prints it: four fixed decimals, comma separated, one line."""
    text = np.array2string(np.asarray(x), precision=4, separator=", ", floatmode="fixed",
                           suppress_small=True, max_line_width=10**6, threshold=64, edgeitems=3)
    return text.replace("\n", "")


def preview(value: Any) -> str:
    """A value's shape and the start of its printed value."""
    text = format_value(value)
    if len(text) > PREVIEW:
        text = text[:PREVIEW - 3] + "..."
    return f"{tuple(np.shape(value))} {text}"


def format_operand(x: Any) -> str:
    """How an input prints inside an entry: a name, a number, or a small constant."""
    if isinstance(x, (Variable, Entry)):
        return x.name if x.label is not None else format_value(x.raw)
    if isinstance(x, (int, float)):
        return repr(x)
    arr = np.asarray(x)
    if arr.size <= SMALL:
        return format_value(arr)
    return f"<{arr.dtype} {'x'.join(map(str, arr.shape))}>"


def format_attr(key: str, value: Any, explain: bool = False) -> str:
    """An attribute value as it would be written in Python (a loop's ``body``: its lines,
    explained with ``explain``)."""
    if key == "body":
        return "\n".join(value.lines(explain))
    if isinstance(value, np.ndarray):
        return format_operand(value)
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, tuple) and key in ("shape", "axes"):
        return str(list(value))
    if isinstance(value, tuple) and key == "index":
        return render_index(value)
    return repr(value)


def format_line(name: str, prim: Primitive, args: list[str], attrs: dict | None,
                explain: bool = False) -> str:
    """One entry as ``name = expression``, given its printed arguments (a loop's body lines
    explained with ``explain``)."""
    attrs = attrs or {}
    fmt = prim.fmt
    if callable(fmt):
        expr = fmt(args, attrs, lambda a, key="": format_attr(key, a, explain))
    else:
        if "**" in fmt:
            args = _powers_bound(fmt, args)
        expr = fmt.format(*args, **{k: format_attr(k, a) for k, a in attrs.items()})
    return f"{name} = {expr}"


def _powers_bound(fmt: str, args: list[str]) -> list[str]:
    """``args`` with a negative one written left of ``**`` in parentheses: ``(-3) ** x``,
    since Python reads ``-3 ** x`` as ``-(3 ** x)``."""
    return [f"({a})" if a.startswith("-") and f"{{{i}}} **" in fmt else a
            for i, a in enumerate(args)]


def is_alias(prim: Primitive, named: bool, in_shape: tuple, out_shape: tuple) -> bool:
    """Whether an entry is an alias: a given name for a value, recorded as a reshape to the
    same shape (``op.grad(..., name=)`` makes them; the record's ``alias``); it prints as
    ``dW = v12``."""
    return named and prim.alias and tuple(in_shape) == tuple(out_shape)


def format_entry(v: Entry | Variable, explain: bool = False) -> str:
    """One recorded entry as ``name = expression`` (an alias as ``name = other``)."""
    args = [format_operand(x) for x in v.inputs]
    if type(v.label) is str and is_alias(v.prim, True, np.shape(v.inputs[0]), v.shape):
        return f"{v.name} = {args[0]}"
    return format_line(v.name, v.prim, args, v.attrs, explain)


def head(text: str) -> str:
    """The first line of an entry's text without its comment: a loop's line as an
    explanation names it (``v7 = scan(body, v3, xs)``, its body and trip count left out)."""
    return text.split("\n", 1)[0].split("  # ", 1)[0]


def noted(text: str, note: str | None) -> str:
    """An entry's text with its explanation at the end of its first line (a loop's body
    lines follow it)."""
    if not note:
        return text
    first, sep, rest = text.partition("\n")
    return f"{first}    # {note}{sep}{rest}"


def format_event(event: Event) -> list[tuple[str, str]]:
    """The lines (role, text) of an event: a leaf, a derivative block's start or end."""
    if type(event) is Leaf:
        v = event.var
        if event.kind == "leaf":
            return [("leaf", f"{v.name} = {format_value(v.raw)}")]
        if event.kind == "zeros":
            return [("leaf", f"{v.name} = zeros({list(v.shape)})")]
        return []       # seeds are not printed
    if type(event) is Asked or type(event) is Labels:
        return []       # what a grad call asked for, names of entries: pruned traces read them
    if type(event) is BlockBegin:
        if event.kind == "grad":
            return [("header", f"d{event.target.name} {HEADER_DASHES}")]
        names = ", ".join(x.name for x in event.inputs)
        return [("header", f"jvp {event.target.name} wrt {names} {HEADER_DASHES}")]
    if event.kind == "grad":
        return [("map", f"d{event.target.name}_d{v.name} = {g.name}") for v, g in event.pairs] + \
               [("footer", FOOTER)]
    return [("map", f"t{y.name} = {t.name}") for y, t in event.pairs] + [("footer", FOOTER)]


def comments(tape: Tape, view: Derivation | None = None) -> dict[int, str]:
    """position -> the explanation appended to that entry's line by explained traces; with
    ``view``, written in the pruned derivation's own lines and names (an entry named by its
    first line: a loop without its body)."""
    if view is None:
        def entry_text(e: Entry) -> str:
            return head(format_entry(e))

        def name(x: Any) -> str:
            return x.name
    else:
        def entry_text(e: Entry) -> str:
            return head(_view_entry(e, view))

        def name(x: Any) -> str:
            return _view_name(x, view)
    out = {}
    for p, (entry, i) in origins(tape).items():
        if i < 0:
            out[p] = f"jvp of ({entry_text(entry)})"
        else:
            out[p] = f"d({entry_text(entry)})/d{name(entry.inputs[i])}"
    for p, x in tape.accumulations.items():
        entry = tape.at(p) if tape.base <= p < tape.end else None
        if entry is None:
            continue
        target = block_target_entry(tape, p)
        target_name = target.name if view is None else _view_name(target, view)
        what = entry.prim.accumulation or "accumulation of"
        out[p] = f"{what} d{target_name}/d{name(x)}"
    return out


def _printed(x: Any, view: Derivation) -> bool:
    """Whether an operand of the pruned view has a line (or a leaf line) of its own."""
    if type(x) is Line:
        return view.lines.get(x.entry.position) is x
    return type(x) is Entry and x in view.leaves


def _view_text(x: Any, view: Derivation, depth: int = 0) -> str:
    """An operand as the pruned view shows it: a printed name, a constant, or the expression
    of a line the view does not print (in parentheses)."""
    if type(x) is Line and not _printed(x, view):
        if x.prim is None:
            return literal(x.args[0])
        if depth > 2:
            return "..."
        args = [_view_text(a, view, depth + 1) for a in x.args]
        return "(" + head(format_line("", x.prim, args, x.attrs))[3:] + ")"
    if type(x) is Entry and x not in view.leaves:
        return format_value(x.raw) if x.raw is not None else "..."
    return _operand(x)


def _view_name(x: Any, view: Derivation) -> str:
    """A tape entry named as the pruned view prints it (``d`` is put before the result)."""
    text = _view_text(view.value(x), view)
    return text if text.isidentifier() else f"({text})"


def _view_entry(entry: Entry, view: Derivation) -> str:
    """A forward entry as the pruned view shows it: its printed line when the view prints
    one for its value, else its expression in the view's operands."""
    line = view.value(entry)
    if type(line) is Line and _printed(line, view) and \
            (line.entry is entry or (line.prim is entry.prim and line.attrs == entry.attrs)):
        return derivation_line(line)
    args = [_view_text(view.value(x), view) for x in entry.inputs]
    return head(format_line("", entry.prim, args, entry.attrs))[3:]


def roles(tape: Tape, explain: bool = False, block: int | None = None, raw: bool = True,
          outputs: Sequence[Variable] | None = None) -> Iterator[tuple[str, str]]:
    """Every line of the trace with its role, in recording order.

    ``explain`` appends to each gradient entry what it differentiates; ``block`` keeps only
    one derivative block (an index into the blocks in the order they began: -1 the newest).
    ``raw=False`` prints the derivation pruned to what was asked (``derivation.py``), and to
    ``outputs`` when they are given.
    """
    view = None if raw else Derivation(tape, outputs)
    return ((role, text) for role, text, _ in _items(tape, explain, block, view))


def _operand(x: Any) -> str:
    if type(x) is Line:
        return x.name
    if isinstance(x, np.ndarray) and x.size > SMALL and x.dtype.kind in "fiub" and \
            bool(np.all(x == x.flat[0])):      # folded, all entries equal
        return f"full({list(x.shape)}, {format_value(x.flat[0])})"
    return format_operand(x)


def literal(value: Any) -> str:
    """A line's value without a primitive: a constant as the seed prints it, or moved data
    as the nested list of its operands (``[[v22, v19]]``)."""
    arr = np.asarray(value)
    if arr.dtype != object:
        return format_value(arr)

    def text(x: Any) -> str:
        return _operand(x) if type(x) in (Line, Entry) else format_value(x)

    def nest(a: Any) -> str:
        if type(a) is np.ndarray:
            return text(a.item()) if a.ndim == 0 else \
                "[" + ", ".join(nest(a[i]) for i in range(len(a))) + "]"
        return text(a)
    return nest(arr)


def derivation_line(line: Line, explain: bool = False) -> str:
    """One line of a pruned derivation as ``name = expression``."""
    if line.prim is None:
        return f"{line.name} = {literal(line.args[0])}"
    args = [_operand(x) for x in line.args]
    if is_alias(line.prim, type(line.entry.label) is str, np.shape(line.entry.inputs[0]),
                line.shape):
        return f"{line.name} = {args[0]}"
    return format_line(line.name, line.prim, args, line.attrs, explain)


def _view_event(event: Event, view: Derivation) -> list[tuple[str, str]]:
    def name(x: Any) -> str:
        return _operand(view.value(x))

    if type(event) is Leaf:
        return format_event(event) if view.shows(event) else []
    if type(event) is BlockBegin:
        if event.kind == "grad":
            return [("header", f"d{name(event.target)} {HEADER_DASHES}")]
        wrt = ", ".join(name(x) for x in event.inputs)
        return [("header", f"jvp {name(event.target)} wrt {wrt} {HEADER_DASHES}")]
    if type(event) is BlockEnd:
        pairs = view.derivatives(event)
        if event.kind == "grad":
            maps = [f"d{name(event.target)}_d{name(x)} = {_operand(g)}" for x, g in pairs]
        else:
            maps = [f"t{name(y)} = {_operand(t)}" for y, t in pairs]
        return [("map", text) for text in maps] + [("footer", FOOTER)]
    return format_event(event)


def _items(tape: Tape, explain: bool, block: int | None, view: Derivation | None = None
           ) -> Iterator[tuple[str, str, Any]]:
    """(role, text, the entry or event it comes from) for every line, in recording order."""
    events = tape.events
    accumulations = tape.accumulations
    notes = comments(tape, view) if explain else {}
    lines_of = format_event if view is None else lambda e: _view_event(e, view)
    first, last, lo, hi = 0, len(events), None, None
    if block is not None:
        begins = [i for i, e in enumerate(events) if type(e) is BlockBegin]
        if not begins:
            return
        first = begins[block]
        depth = 0
        for last in range(first, len(events)):
            e = events[last]
            depth += 1 if type(e) is BlockBegin else -1 if type(e) is BlockEnd else 0
            if depth == 0:
                break
        lo, hi = events[first].position, events[last].position
        last += 1
    m = first
    depth = 0
    headed = _complex_blocks(events)
    for v in tape.entries:
        if v is None:       # freed (a tape that keeps no trace)
            continue
        pos = v.position
        if lo is not None and not lo <= pos < hi:
            continue
        while m < last and events[m].position <= pos:
            event = events[m]
            depth += 1 if type(event) is BlockBegin else -1 if type(event) is BlockEnd else 0
            for role, text in lines_of(event):
                yield role, _headed(text, headed.get(m)) if role == "header" else text, event
            m += 1
        if view is not None and not view.shows(v):
            continue
        role = "accumulate" if pos in accumulations else ("grad" if depth else "forward")
        line = format_entry(v, explain) if view is None else \
            derivation_line(view.lines[pos], explain)
        yield role, noted(line, notes.get(pos)), v
    for k in range(m, last):
        event = events[k]
        for role, text in lines_of(event):
            yield role, _headed(text, headed.get(k)) if role == "header" else text, event
    if view is not None and block is None:      # the named results, last
        for named in view.labelled.values():
            for name, x in named:
                text = _operand(x) if type(x) in (Line, Entry) else format_value(x)
                yield "map", f"{name} = {text}", None


def _complex_blocks(events: Sequence[Any]) -> dict[int, str]:
    """Index of each grad block's BlockBegin whose sweep met complex values -> its heading."""
    out: dict[int, str] = {}
    begins: list[int] = []
    for k, event in enumerate(events):
        if type(event) is BlockBegin:
            begins.append(k)
        elif type(event) is BlockEnd and begins:
            k0 = begins.pop()
            if event.kind != "grad":
                continue
            if event.target.dtype.kind == "c":
                out[k0] = COMPLEX_HEADINGS["holomorphic"]
            elif any(getattr(v, "dtype", None) is not None and v.dtype.kind == "c"
                     for v in event.derivatives):
                out[k0] = COMPLEX_HEADINGS["real"]
    return out


def _headed(text: str, heading: str | None) -> str:
    """A block's header line with its complex heading after the target's name."""
    if heading is None:
        return text
    name, _, rest = text.partition(" ")
    return f"{name} {heading} {rest}"


def lines(tape: Tape, explain: bool = False, block: int | None = None, raw: bool = True,
          outputs: Sequence[Variable] | None = None) -> Iterator[str]:
    """Every line of the trace, in recording order (see ``roles``)."""
    return (text for _, text in roles(tape, explain, block, raw, outputs))


def echo(item: Entry | Event) -> None:
    """Print the lines of one newly recorded entry or event (a tape listener)."""
    if isinstance(item, Entry):
        print(format_entry(item))
    else:
        for _, text in format_event(item):
            print(text)


# one colour per derivative order (0: forward), none of them the inputs' (STYLES["leaf"]);
# ORDER_FILLS are the same colours as pale fills, for pictures and HTML
ORDER_STYLES = ("default", "green", "blue", "yellow", "red", "purple", "dark_orange", "grey50")
ORDER_FILLS = ("#ffffff", "#d5f2d5", "#d6e2fb", "#fbf3c4", "#fbd6d6", "#e6d6fb", "#fde0c2",
               "#e0e0e0")
LEAF_FILL = "#d2f3f7"


def order_style(k: int) -> str:
    """The rich style of derivative order k (the last colour for every order beyond)."""
    return ORDER_STYLES[min(k, len(ORDER_STYLES) - 1)]


def order_fill(k: int) -> str:
    """The pale fill of derivative order k, as ``order_style`` picks the rich colour."""
    return ORDER_FILLS[min(k, len(ORDER_FILLS) - 1)]


def legend(top: int) -> list[tuple[str, str]]:
    """(label, rich style) for the inputs, each derivative order up to ``top`` and the
    accumulation marker (when there is a gradient order)."""
    names = ["forward"] + [f"order {k}" for k in range(1, top + 1)]
    cells = [("input", STYLES["leaf"])] + [(n, order_style(k)) for k, n in enumerate(names)]
    if top:
        cells.append(("accumulation (underlined, in its order's colour)", STYLES["accumulate"]))
    return cells


def printed_counts(tape: Tape, positions: Sequence[int]) -> tuple[int, dict[int, int]]:
    """(printed forward entries, block start -> printed entries of that block itself) for the
    entries printed at ``positions``: each counts in the innermost block around it."""
    spans = sorted(((b.start, b.stop) for b in blocks(tape)), key=lambda s: s[1] - s[0])
    ords = orders(tape)
    forward, inside = 0, {}
    for p in positions:
        start = next((s for s, stop in spans if s <= p < stop), None)
        if start is not None:
            inside[start] = inside.get(start, 0) + 1
        elif ords.get(tape.entries[p], 0) == 0:
            forward += 1
    return forward, inside


def print_rich(tape: Tape, console: Any = None, explain: bool = False,
               block: int | None = None, raw: bool = True,
               outputs: Sequence[Variable] | None = None) -> None:
    """Print the trace to a rich console, gradient entries coloured by derivative order
    (accumulations underlined in theirs), then a table of the derivative blocks grouped by
    order with the lines printed and the entries recorded of each, and a legend of the colours
    (``raw=False``: the derivation pruned to what was asked)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console(markup=False)
    ords = orders(tape)
    view = None if raw else Derivation(tape, outputs)
    text = Text()
    printed, headers = [], {}
    for role, line, item in _items(tape, explain, block, view):
        style = STYLES[role]
        if role == "grad":
            style = order_style(ords.get(item, 1))
        elif role == "accumulate":
            style = f"{order_style(ords.get(item, 1))} {style}"
        if type(item) is Entry:
            printed.append(item.position)
        elif type(item) is BlockBegin and role == "header":
            headers[item.position] = line.split(" ", 1)[0]       # the block as printed
        text.append(line + "\n", style=style)
    console.print(text, end="")
    shown = blocks(tape)
    if block is not None:
        begins = sorted(b.start for b in shown)
        shown = [b for b in shown if b.start == begins[block]] if begins else []
    table = Table(title="derivative blocks by order")
    for column in ("order", "block", "printed lines", "recorded entries"):
        table.add_column(column, justify="left" if column == "block" else "right")
    forward_printed, printed_in = printed_counts(tape, printed)
    forward = sum(1 for v in tape.entries if ords.get(v, 0) == 0)
    if block is None:
        table.add_row("0", "forward", str(forward_printed), str(forward), style=ORDER_STYLES[0])
    for k in sorted({b.order for b in shown}):
        group = [b for b in shown if b.order == k]
        style = order_style(k)
        for b in group:
            table.add_row(str(k), headers.get(b.start, b.title), str(printed_in.get(b.start, 0)),
                          str(b.size),
                          style=style)
        if len(group) > 1:
            table.add_row(str(k), "all", str(sum(printed_in.get(b.start, 0) for b in group)),
                          str(sum(b.size for b in group)), style="bold " + style)
    console.print(table)
    key = Text("colours: ")
    for label, style in legend(max((b.order for b in shown), default=0)):
        key.append(label, style=style)
        key.append("  ")
    console.print(key)
