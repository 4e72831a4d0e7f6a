"""einsum's subscripts: numpy's forms (implicit output, '...', sublists) as explicit letters."""

from __future__ import annotations

import string
from collections.abc import Sequence

from ..errors import ArgumentError

LETTERS = string.ascii_letters


def parse_subscripts(subscripts: str, shapes: Sequence[tuple]) -> tuple[list[str], str]:
    """numpy's einsum subscripts as explicit per-operand letters and output letters, with
    each ellipsis replaced by letters of its own; raises ValueError on malformed input."""
    text = subscripts.replace(" ", "")
    if text.count("->") > 1 or ("-" in text.replace("->", "")) or (">" in text.replace("->", "")):
        raise ValueError(f"malformed subscripts {subscripts!r}")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"{subscripts!r} names {len(terms)} operand(s) but {len(shapes)} "
                         "were given")
    for term in [*terms, rhs]:
        if term.count("...") > 1 or any(c not in LETTERS for c in term.replace("...", "")):
            raise ValueError(f"bad term {term!r} in {subscripts!r}: letters a-z, A-Z and at "
                             "most one '...' each")
    used = set(text)
    fresh = [c for c in LETTERS if c not in used]
    ells = []
    for term, shape in zip(terms, shapes):
        named = len(term.replace("...", ""))
        extra = len(shape) - named
        if extra < 0 or (extra > 0 and "..." not in term):
            raise ValueError(f"term {term!r} of {subscripts!r} does not match an operand of "
                             f"shape {tuple(shape)}")
        ells.append(extra)
    width = max(ells, default=0)
    if width > len(fresh):
        raise ValueError(f"{subscripts!r} needs more letters than einsum has")
    ell = "".join(fresh[:width])
    ins = [t.replace("...", ell[width - n:] if n else "") for t, n in zip(terms, ells)]
    if arrow:
        if width and "..." not in rhs:
            raise ValueError(f"{subscripts!r}: the inputs have '...' dimensions, so the "
                             "output needs '...' too")
        out = rhs.replace("...", ell)
    else:
        counts = {c: sum(t.count(c) for t in ins) for c in set("".join(ins))}
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    if len(set(out)) != len(out) or any(c not in "".join(ins) for c in out):
        raise ValueError(f"{subscripts!r}: each output letter must appear once, and in an input")
    letter_sizes(ins, shapes, subscripts)
    return ins, out


def letter_sizes(ins: Sequence[str], shapes: Sequence[tuple], subscripts: str = "") -> dict:
    """The size of each letter (1 broadcasts against any size, as numpy allows)."""
    sizes: dict[str, int] = {}
    for term, shape in zip(ins, shapes):
        seen: dict[str, int] = {}
        for c, n in zip(term, shape):
            if c in seen and seen[c] != n:
                raise ValueError(f"{subscripts!r}: letter {c!r} repeated in one operand with "
                                 f"sizes {seen[c]} and {n}")
            seen[c] = n
            if sizes.get(c, 1) != 1 and n not in (1, sizes[c]):
                raise ValueError(f"{subscripts!r}: letter {c!r} has sizes {sizes[c]} and {n}")
            sizes[c] = max(sizes.get(c, 1), n)
    return sizes


def from_sublists(args: tuple) -> tuple[str, tuple]:
    """einsum(x, [0, 1], y, [1, 2], [0, 2]) as subscripts and operands."""
    args = list(args)
    out = args.pop() if len(args) % 2 else None
    operands, terms = args[0::2], args[1::2]

    def letters(sub):
        try:
            return "".join("..." if s is Ellipsis else LETTERS[int(s)] for s in sub)
        except (IndexError, TypeError, ValueError):
            raise ArgumentError(f"einsum: bad sublist {sub!r} (integers 0-51 and Ellipsis)") \
                from None
    text = ",".join(letters(t) for t in terms) + ("" if out is None else "->" + letters(out))
    return text, tuple(operands)
