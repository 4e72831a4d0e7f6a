"""The rich trace: accumulations carry a marker of their own (underlined, in their order's
colour, never another order's colour), and the blocks table counts the lines printed beside
the entries recorded, both labelled.

Oracles: the plain printed derivation (`op.format_trace(raw=False)`), whose lines are counted
here block by block, and the recorded blocks' sizes.
"""

from __future__ import annotations

import io
import re

import numpy as np
from rich.console import Console

import simplegrad as sg
from simplegrad.cli import seed_program
from simplegrad.engine import render
from simplegrad.engine.explain import blocks


def _rich(op, raw=False) -> Console:
    console = Console(file=io.StringIO(), record=True, width=200, color_system="truecolor",
                      markup=False)
    render.print_rich(op.tape, console=console, raw=raw)
    return console


def _printed_per_block(text: str) -> list[tuple[str, int]]:
    """(block header, entry lines) of each block of a plain derivation; alias lines that map
    a gradient (`dL0_da = b`) are not entries."""
    found, current = [], None
    for line in text.splitlines():
        header = re.fullmatch(r"(\w+) -+", line)
        if header:
            current = [header[1], 0]
        elif re.fullmatch(r"-+", line) and current:
            found.append(tuple(current))
            current = None
        elif current and not line.startswith(current[0] + "_"):
            current[1] += 1
    return found


def _table_rows(console: Console) -> list[list[str]]:
    text = console.export_text()
    return [[c.strip() for c in re.split("[│┃]", row)[1:-1]] for row in text.splitlines()
            if row.startswith(("│", "┃"))]


def test_the_accumulation_marker_is_no_order_colour():
    marker = render.STYLES["accumulate"].split()
    assert not set(marker) & set(render.ORDER_STYLES) and "underline" in marker
    assert ("accumulation (underlined, in its order's colour)", "underline") in render.legend(2)
    assert all("accumulation" not in label for label, _ in render.legend(0))


def test_an_accumulation_prints_underlined_in_its_orders_colour():
    op = seed_program(echo=False)[0]
    page = _rich(op).export_html(inline_styles=True)
    line = re.search(r'<span style="([^"]*)">v6 = v0 \+ b', page)     # dL0/db's accumulation
    assert line and "underline" in line[1] and "#008000" in line[1]   # green: order 1
    second = re.search(r'<span style="([^"]*)">v14 = v6 \* 2.0', page)  # v12 + v13, folded
    assert second and "underline" in second[1] and "#000080" in second[1]   # blue: order 2
    forward = re.search(r'<span style="([^"]*)">v0 = a \+ b', page)
    assert forward is None or "underline" not in forward[1]


def _sequential_tanh() -> sg.Ops:
    """tanh(x), then its derivative three times, each op.grad of the one before (3 blocks)."""
    op = sg.Ops()
    x = op.var(np.array(0.5), name="x")
    y = x.tanh()
    for _ in range(3):
        y = op.grad(y, x)
    return op


def test_the_table_counts_printed_lines_beside_recorded_entries():
    for op in (seed_program(echo=False)[0], _sequential_tanh()):
        rows = _table_rows(_rich(op))
        assert rows[0] == ["order", "block", "printed lines", "recorded entries"]
        expected = _printed_per_block(op.format_trace(raw=False))
        body = [r for r in rows[1:] if r[1] != "forward"]
        assert [(r[1], int(r[2])) for r in body] == expected
        assert [int(r[3]) for r in body] == [b.size for b in sorted(blocks(op.tape),
                                                                     key=lambda b: b.start)]
        assert any(int(r[2]) < int(r[3]) for r in body)      # pruning shows fewer


def test_raw_tables_print_every_recorded_entry():
    rows = _table_rows(_rich(seed_program(echo=False)[0], raw=True))
    assert rows[1:] == [["0", "forward", "3", "3"], ["1", "dL0", "4", "4"],
                        ["2", "dL1", "15", "15"]]
