"""Guards: the Python decisions made on recorded values while recording.

``bool(v)`` (``if v > 0:``, ``while v > 0:``), ``v.item()``, ``float(v)`` and ``int(v)`` of a
recorded Variable hand Python a value, and what Python does with it (which branch, how many
turns of a loop, a number baked into later entries) is not on the tape. Each such decision is
noted on the tape as a ``TapeGuard``: the entry read, how (``"bool"`` or ``"item"``), the value
seen, and the user's source line (the first frame outside simplegrad). A Program extracted
from the tape keeps the guards on entries it computes from its inputs (``program.nodes.Guard``)
and checks them when it replays; ``sg.jit`` records again where one fails.

Decisions on plain arrays (``v.value > 0``) are not guards: those values are constants of the
program.
"""

from __future__ import annotations

import io
import linecache
import os
import sys
import tokenize
from typing import Any, NamedTuple

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_KEYWORDS = ("if ", "elif ", "while ", "assert ")


class TapeGuard(NamedTuple):
    """One decision on a recorded value: the entry read, how (``"bool"`` or ``"item"``), the
    value seen, where the tape's end was then, and the user's file and line."""

    entry: Any
    kind: str
    seen: Any
    at: int
    file: str
    line: int


def place() -> tuple[str, int]:
    """The file and line of the innermost frame outside simplegrad (the user's decision)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE):
        f = f.f_back
    if f is None:
        return ("<unknown>", 0)
    return (f.f_code.co_filename, f.f_lineno)


def decision_text(file: str, line: int) -> str:
    """The source of the decision at ``file:line``: the condition of an ``if``, ``elif``,
    ``while`` or ``assert``, else the whole line (empty when the source cannot be read)."""
    text = _code(linecache.getline(file, line)).strip()
    for k in _KEYWORDS:
        if text.startswith(k):
            text = text[len(k):].rstrip()
            if text.endswith(":") and k != "assert ":
                text = text[:-1].rstrip()
            break
    return text


def _code(line: str) -> str:
    """A source line without its comment (as it is when it does not tokenize alone)."""
    if "#" not in line:
        return line
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line).readline):
            if tok.type == tokenize.COMMENT:
                return line[:tok.start[1]]
    except (tokenize.TokenError, SyntaxError):
        pass
    return line


def note(v: Any, kind: str, seen: Any) -> None:
    """Note on ``v``'s tape that Python decided on it (``kind``) and saw ``seen``; nothing for
    a Variable with no history there (unrecorded, released, of no tape)."""
    tape = getattr(v.rec, "tape", None)
    e = v.node
    if tape is None or e is None or (e.prim is None and e.attrs is not None):
        return      # (a leaf made as a leaf has attrs None; an unrecorded or released one not)
    file, line = place()
    tape.guards.append(TapeGuard(e, kind, seen, tape.end, file, line))
