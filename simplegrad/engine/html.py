"""Derivations in notebooks: the HTML (and SVG) that Jupyter shows for an Ops, a Program and
what ``sg.trace`` returns.

One collapsible ``<details>`` block per derivative order (the forward, order 1, order 2, ...),
each line in its order's colour with its value's shape and a short preview of the value; every
backward line is a link (``href="#..."``) to the forward entry it pulls back through, whose line
carries that ``id``. Ids start with a prefix drawn fresh for each display, so two displays in
one notebook never collide. The lines are the pruned derivation (derivation.py), as
``op.print_trace`` prints it, each with its explanation (what it differentiates) shown inline
behind a checkbox.

Colours are CSS variables set together with the text colour, so a display reads in light and
dark themes: the light palette by default and under a light JupyterLab theme, the dark one
under ``prefers-color-scheme: dark``, a dark JupyterLab theme (``data-jp-theme-light``) or
VS Code's dark themes. The light fills are the pictures' and the rich trace's.
"""

from __future__ import annotations

import html
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import GraphError
from .derivation import Derivation, Line
from .explain import orders, origins
from .render import LEAF_FILL, ORDER_FILLS, _items, comments, preview
from .tape import BlockBegin, BlockEnd, Leaf
from .variable import Entry, value_of

if TYPE_CHECKING:
    from .tape import Tape

MAX_LINES = 2000    # lines shown in one display (Jupyter displays every object it is given)
MAX_PICTURE = 400   # entries drawn by _repr_svg_ (Graphviz on a larger tape takes long)

# the dark palette: the same hues as ORDER_FILLS (forward, order 1, 2, ...) and LEAF_FILL, dark
DARK_FILLS = ("#1e1e1e", "#1f3b24", "#1e2b47", "#3d3619", "#47201f", "#33244a", "#47301a",
              "#383838")
DARK_LEAF = "#0f3a40"


def _palette(fills: Sequence[str], leaf: str, text: str, muted: str, edge: str) -> str:
    """The CSS variables of one palette."""
    cells = "".join(f"--sg-o{k}: {f}; " for k, f in enumerate(fills))
    return f"{cells}--sg-leaf: {leaf}; --sg-text: {text}; --sg-muted: {muted}; --sg-edge: {edge};"


LIGHT = _palette(ORDER_FILLS, LEAF_FILL, "#1b1b1b", "#666666", "#bbbbbb")
DARK = _palette(DARK_FILLS, DARK_LEAF, "#e8e8e8", "#a6a6a6", "#555555")
ORDER_CLASSES = "\n".join(f".sg-derivation .sg-o{k} {{background: var(--sg-o{k})}}"
                          for k in range(len(ORDER_FILLS)))

STYLE = f"""<style>
.sg-derivation {{{LIGHT}}}
@media (prefers-color-scheme: dark) {{.sg-derivation {{{DARK}}}}}
body[data-jp-theme-light="false"] .sg-derivation, body.vscode-dark .sg-derivation,
body.vscode-high-contrast .sg-derivation {{{DARK}}}
body[data-jp-theme-light="true"] .sg-derivation, body.vscode-light .sg-derivation {{{LIGHT}}}
.sg-derivation {{font-family: monospace; font-size: 12px; color: var(--sg-text)}}
.sg-derivation details {{margin: 2px 0; border-left: 4px solid var(--sg-edge);
  padding-left: 6px; color: var(--sg-text)}}
.sg-derivation summary {{cursor: pointer; font-weight: bold}}
.sg-derivation .sg-line {{white-space: pre; padding: 0 4px}}
.sg-derivation .sg-body {{color: var(--sg-muted)}}
.sg-derivation .sg-meta, .sg-derivation .sg-note {{color: var(--sg-muted); padding-left: 1.5em}}
.sg-derivation .sg-note {{display: none}}
.sg-derivation .sg-notes:checked ~ details .sg-note {{display: inline}}
.sg-derivation a {{color: inherit; text-decoration: underline dotted}}
.sg-derivation .sg-legend span {{padding: 0 6px; margin-right: 4px;
  border: 1px solid var(--sg-edge)}}
.sg-derivation .sg-leaf {{background: var(--sg-leaf)}}
{ORDER_CLASSES}
</style>"""


def prefix() -> str:
    """A fresh id prefix for one display."""
    return f"sg-{uuid.uuid4().hex[:8]}"


def anchor(p: str, name: str) -> str:
    """The id of a named line within the display with prefix ``p``."""
    return f"{p}-{name}"


def _preview_of(v: Entry) -> str:
    """An entry's preview: its value, replayed if the tape freed it; ``<freed>`` when no
    replay can reach it (never a wrong value)."""
    try:
        return preview(value_of(v))
    except GraphError:
        return f"{tuple(v.shape)} <freed>"


def order_class(k: int) -> str:
    """The CSS class of derivative order k's fill (the last for every order beyond)."""
    return f"sg-o{min(k, len(ORDER_FILLS) - 1)}"


def legend(top: int) -> str:
    """A row of swatches: the inputs' colour and each order's, up to ``top``."""
    cells = [("input", "sg-leaf"), ("forward", order_class(0))]
    cells += [(f"order {k}", order_class(k)) for k in range(1, top + 1)]
    spans = "".join(f'<span class="{css}">{name}</span>' for name, css in cells)
    return f'<div class="sg-legend">colours: {spans}</div>'


def notes_toggle(p: str) -> str:
    """The checkbox that shows (checked, the default) or hides the lines' explanations."""
    return (f'<input type="checkbox" class="sg-notes" id="{p}-notes" checked>'
            f'<label for="{p}-notes"> explanations</label>')


def page(p: str, groups: dict[int, list[str]], title: str, notes: bool = False) -> str:
    """The display: a legend, then one ``<details>`` block per order with its lines (and the
    explanations' toggle when ``notes``)."""
    parts = [STYLE, f'<div class="sg-derivation" id="{p}">',
             f"<div>{html.escape(title)}</div>", legend(max(groups, default=0))]
    if notes:
        parts.append(notes_toggle(p))
    for k in sorted(groups):
        name = "forward" if k == 0 else f"order {k}"
        parts.append(f'<details open class="{order_class(k)}">'
                     f"<summary>{name} ({len(groups[k])} lines)</summary>")
        parts += groups[k]
        parts.append("</details>")
    parts.append("</div>")
    return "\n".join(parts)


def line_html(text: str, ident: str | None = None, href: str | None = None,
              meta: str = "", note: str = "", fill: str | None = None) -> str:
    """One line: its text (a link when ``href``), an id when ``ident``, the shape and value,
    its explanation ``note`` (inline, behind the page's toggle, and as the link's title), on
    the inputs' colour when ``fill`` is given. A loop's line shows its shape, value and
    explanation on its first line, its body's lines below (``body_html``)."""
    text, _, rest = text.partition("\n")
    body = html.escape(text)
    if href is not None:
        body = f'<a href="#{href}" title="{html.escape(note)}">{body}</a>'
    ident_attr = f' id="{ident}"' if ident else ""
    if fill:
        ident_attr += ' class="sg-line sg-leaf"'
    else:
        ident_attr += ' class="sg-line"'
    meta_html = f'<span class="sg-meta">{html.escape(meta)}</span>' if meta else ""
    note_html = f'<span class="sg-note"># {html.escape(note)}</span>' if note else ""
    return f"<div{ident_attr}>{body}{meta_html}{note_html}{body_html(rest)}</div>"


def body_html(rest: str) -> str:
    """The lines printed below a loop's line (its body), indented as the trace prints them;
    their names are the body's own, so nothing in them links to the lines around."""
    return f'<div class="sg-body">{html.escape(rest)}</div>' if rest else ""


def derivation_html(tape: Tape, outputs: Sequence[Entry] | None = None) -> str:
    """The pruned derivation of a tape as HTML (see the module docstring)."""
    p = prefix()
    view = Derivation(tape, outputs)
    ords = orders(tape)
    pulls = origins(tape)
    notes = comments(tape, view)
    groups: dict[int, list[str]] = {}
    open_blocks: list[int] = []         # the orders of the blocks open at each line
    for role, text, item in _items(tape, False, None, view):
        if type(item) is BlockBegin:
            open_blocks.append(ords.get(item.target, 0) + 1)
        if open_blocks:
            k = open_blocks[-1]
        else:
            k = ords.get(item.var if type(item) is Leaf else item, 0)
        if type(item) is BlockEnd and role == "footer" and open_blocks:
            open_blocks.pop()
        ident = href = None
        meta = ""
        if type(item) is Entry:
            ident = anchor(p, item.name)
            meta = _preview_of(item)
            origin = pulls.get(item.position)      # the entry it pulls back through,
            through = origin[0] if origin else tape.accumulations.get(item.position)
            target = view.value(through)            # or whose cotangent it adds up
            if type(target) in (Line, Entry):
                href = anchor(p, target.name)
        elif type(item) is Leaf:
            ident = anchor(p, item.var.name)
            meta = preview(item.var.raw)
        note = notes.get(item.position, "") if type(item) is Entry else ""
        fill = LEAF_FILL if type(item) is Leaf and item.kind == "leaf" else None
        groups.setdefault(k, []).append(line_html(text, ident, href, meta, note, fill))
    shown = sum(len(v) for v in groups.values())
    title = f"derivation: {shown} lines (pruned to what was asked)"
    if shown > MAX_LINES:       # the first lines of each order, and what was left out
        keep = max(1, MAX_LINES // len(groups))
        for k, lines in groups.items():
            if len(lines) > keep:
                left = len(lines) - keep
                groups[k] = lines[:keep] + [line_html(
                    f"... {left} more lines: op.format_trace(raw=False) prints them all")]
        title += f", the first {keep} of each order shown"
    return page(p, groups, title, notes=bool(notes))


class Display:
    """What Jupyter shows for an Ops: the pruned derivation as HTML, and a picture of the tape
    as SVG when Graphviz's ``dot`` is installed."""

    def _repr_html_(self) -> str:
        """The pruned derivation as HTML: one collapsible block per derivative order."""
        return derivation_html(self.tape, self.outputs)

    def _repr_svg_(self, raw: bool = False) -> str | None:
        """The pruned derivation drawn by Graphviz, a box per line ``format_trace(raw=False)``
        prints (``raw``: every entry of the tape); None without Graphviz, or for a tape of
        more than ``MAX_PICTURE`` entries (Jupyter then shows the HTML)."""
        from .pictures import has_dot, run_dot
        if not has_dot() or not 0 < len(self.tape) <= MAX_PICTURE:
            return None
        return run_dot(self.to_dot(raw), "svg", "the tape").decode()

    def to_dot(self, raw: bool = False, values: bool = False, grads: bool = False) -> str:
        """Graphviz DOT text of the pruned derivation (``raw``: of the tape); ``values``
        notes each node's value, ``grads`` each input's gradient."""
        from .pictures import derivation_dot, dot_text
        if raw:
            return dot_text(self.to_networkx(self.outputs))
        return derivation_dot(self.tape, self.outputs, values, grads)

    def render(self, path: Any, raw: bool = False, values: bool = False,
               grads: bool = False) -> Any:
        """Draw the pruned derivation (``raw``: the tape) to an .svg or .png file with
        Graphviz's ``dot``, annotated as ``to_dot``; returns the path."""
        from pathlib import Path

        from ..errors import ArgumentError
        from .pictures import run_dot
        path = Path(path)
        fmt = path.suffix.lower().lstrip(".")
        if fmt not in ("svg", "png"):
            raise ArgumentError(f"render: {path.name} must end in .svg or .png")
        path.write_bytes(run_dot(self.to_dot(raw, values, grads), fmt, path.name))
        return path
