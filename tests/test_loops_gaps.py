"""Loops, the remaining gaps: a while loop's line carries the trip count of the run it was
recorded with in every view; ``Program.stats`` counts a loop's work by its trips.

Oracles: trip counts of the same iteration run in plain Python on floats; entries counted by
hand from the printed bodies.
"""

from __future__ import annotations

import html
import io
import re

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.engine.pictures import has_dot


def loop_heads(text: str) -> list[str]:
    """The lines of the loops (not those of their bodies)."""
    return [line for line in text.splitlines()
            if re.match(r"^\w+ = (scan|while_loop|cond)\(", line)]


def shown(page: str) -> str:
    """A notebook page's text, its tags taken out."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def newton(a):
    """sqrt(a) by Newton's iteration from a + 1 (the trips in the carry)."""
    def improve(c):
        x, n = c
        return 0.5 * (x + a / x), n + 1

    def unsettled(c):
        return abs(c[0] * c[0] - a) > 1e-14
    return sg.while_loop(unsettled, improve, (a + 1.0, 0))


def python_trips(a: float) -> int:
    """The trips of the same iteration in plain Python."""
    x, n = a + 1.0, 0
    while abs(x * x - a) > 1e-14:
        x, n = 0.5 * (x + a / x), n + 1
    return n


def recorded_newton(at: float = 2.0):
    op = sg.Ops()
    a = op.var(at, name="a")
    root, trips = newton(a)
    d = op.grad(root, a)
    return op, a, root, d


# ---------------------------------------------------------------- 1. the trip count printed


def test_a_while_loops_line_carries_its_trip_count_in_every_view():
    from rich.console import Console
    assert python_trips(2.0) == 6
    op, a, root, d = recorded_newton(2.0)
    raw, pruned = loop_heads(op.format_trace()), loop_heads(op.format_trace(raw=False))
    assert raw[0] == "v2 = while_loop(unsettled, improve, a, v0, v1)  # x 6"
    # its gradient: the history and the reverse scans over the recorded trips
    assert raw[1:] == ["v10 = scan(improve.history, a, v0, v1, v9)  # x 6",
                       "v15 = scan(improve.reverse, a, v14, 0.0, v11, v13, v9, reverse=True)"
                       "  # x 6"]
    assert pruned == raw
    out = io.StringIO()
    op.print_trace(Console(file=out, width=200, color_system=None, markup=False))
    assert loop_heads(out.getvalue()) == pruned
    assert all(line in shown(op._repr_html_()) for line in pruned)
    prog = op.program([a], [root, d])
    assert loop_heads(prog.format(raw=True)) == loop_heads(prog.format()) == raw
    assert all(line in shown(prog._repr_html_()) for line in raw)
    dot = prog.to_dot()
    assert all(f'"{line}\\l' in dot for line in raw)


@pytest.mark.skipif(not has_dot(), reason="Graphviz's dot is not installed")
def test_the_svg_draws_a_while_loops_trip_count(tmp_path):
    op, a, root, d = recorded_newton(2.0)
    svg = op.program([a], [root, d]).render(str(tmp_path / "while.svg")).read_text()
    texts = [html.unescape(t).replace("\xa0", " ")
             for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]
    assert "v2 = while_loop(unsettled, improve, a, v0, v1)  # x 6" in texts


def test_a_program_prints_the_recorded_runs_trips_and_replays_its_own():
    op, a, root, d = recorded_newton(2.0)
    prog = op.program([a], [root, d])
    assert python_trips(30.0) == 7
    np.testing.assert_allclose(prog(np.array(30.0)), [np.sqrt(30.0), 0.5 / np.sqrt(30.0)],
                               rtol=1e-13)
    assert loop_heads(prog.format(raw=True))[0].endswith("# x 6")     # the recorded run's


def test_a_loaded_program_keeps_the_trip_count(tmp_path):
    op, a, root, d = recorded_newton(30.0)
    prog = op.program([a], [root, d])
    json_path, _ = prog.save(tmp_path / "newton")
    loaded = sg.load_program(json_path)
    assert loop_heads(loaded.format(raw=True)) == loop_heads(prog.format(raw=True))
    assert loop_heads(loaded.format(raw=True))[0].endswith("# x 7")
    assert loaded.stats().work == prog.stats().work


def test_a_while_loop_inside_a_body_prints_no_count():
    # its trips change from one run of the body to the next: the body keeps none of them
    op = sg.Ops()
    x = op.var(np.array([0.5, 1.5, 3.0]), name="x")

    def step(h, t):
        y = sg.while_loop(lambda c: c < 4.0 + t, lambda c: c * 1.5, h + t)
        return y * 0.25, y
    h, ys = sg.scan(step, op.var(0.2, name="h"), x)
    text = op.format_trace()
    inner = [line.strip() for line in text.splitlines() if " = while_loop(" in line]
    assert len(inner) == 1 and "# x" not in inner[0]
    assert loop_heads(text)[0].endswith("# x 3")


def test_the_jvp_and_the_vmapped_loop_print_their_own_counts():
    op = sg.Ops()
    a = op.var(30.0, name="a")
    root, _ = newton(a)
    op.jvp(root, a, 1.0)
    heads = [h for h in loop_heads(op.format_trace()) if " = while_loop(" in h]
    assert [h.rsplit("# x ", 1)[1] for h in heads] == ["7", "7"]    # the loop, its jvp's
    op = sg.Ops()
    batch = np.array([2.0, 30.0, 1e4])
    av = op.var(batch, name="a")
    sg.vmap(newton)(av)
    head = next(h for h in loop_heads(op.format_trace()) if " = while_loop(" in h)
    assert head.endswith(f"# x {max(python_trips(v) for v in batch)}")   # until all settle


# ---------------------------------------------------------------- 2. stats by the trips


def test_stats_count_a_while_loop_by_the_recorded_runs_trips():
    op, a, root, d = recorded_newton(2.0)
    n = python_trips(2.0)
    # by hand, from the printed bodies: improve 4 entries (v0 / v1, +, * 0.5, + 1) a trip,
    # unsettled 4 (*, -, abs, >) a test, one test more than trips; history 4, reverse 7
    text = op.format_trace()
    assert "        outputs: v5, v6\n" in text and "        outputs: v10, v11\n" in text
    forward = op.program([a], [root]).stats()
    assert forward.loops == {"v2": n}
    assert forward.work == (forward.entries - 1) + 4 * n + 4 * (n + 1)
    both = op.program([a], [root, d]).stats()
    assert both.loops == {"v2": n, "v10": n, "v15": n}
    assert both.work == (both.entries - 3) + 4 * n + 4 * (n + 1) + 4 * n + 7 * n
    assert f"{both.work} entries run (loops by their trips)" in str(both)


def test_stats_count_a_scan_by_its_length_and_a_loop_in_a_body_once():
    op = sg.Ops()
    x = op.var(0.5, name="x")
    y = sg.fori_loop(0, 10, lambda i, c: c * 0.5 + 0.25, x)        # 2 entries a trip
    s = op.program([x], [y]).stats()
    assert list(s.loops.values()) == [10] and s.work == 2 * 10 + 1

    def step(h, t):     # a while loop of 1 + 1 entries a trip, its count unknown here
        return sg.while_loop(lambda c: c < 4.0 + t, lambda c: c * 1.5, h + t), None
    h, _ = sg.scan(step, x, np.array([0.5, 1.5, 3.0]))
    s = op.program([x], [h]).stats()
    # the body: h + t and 4.0 + t, the while loop (one trip: its test twice, its body
    # once), the part taking its carry; then the part of the scan's
    assert list(s.loops.values()) == [3] and s.work == 3 * (2 + (2 * 1 + 1) + 1) + 1
