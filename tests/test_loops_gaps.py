"""Loops, the remaining gaps: a while loop's line carries the trip count of the run it was
recorded with in every view; ``Program.stats`` counts a loop's work by its trips; vmap of
derivatives whose bodies hold counted scans (the gradient of a while loop inside a scan);
the explained views depend only on the program.

Oracles: trip counts of the same iteration run in plain Python on floats; entries counted by
hand from the printed bodies; a Python loop over the batch and the loop unrolled in
simplegrad (a Python ``while`` on values); closed forms for Newton's sqrt; the text a fresh
interpreter prints.
"""

from __future__ import annotations

import html
import io
import re
import subprocess
import sys
from pathlib import Path

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


# ---------------------------------------------------------------- 3. vmap of derived bodies


def inner_until(c, bound):
    """c grown by 1.4 c + 0.05 sin c until it reaches 2 + bound: its trips depend on both."""
    return sg.while_loop(lambda s: s < 2.0 + bound,
                         lambda s: s * 1.4 + 0.05 * np.sin(s), c)


def nested(v):
    """A scan whose body holds a data-dependent while loop (so its gradient's body holds the
    loop's reverse: counted scans)."""
    def outer(h, x):
        y = inner_until(h * x + 0.5, x)
        return np.tanh(y) * 0.5 + x, y
    h, ys = sg.scan(outer, v[0], v)
    return h + ys.sum()


def nested_unrolled(v):
    """The same computation with Python loops: the while decided on values."""
    def value(u):
        return float(u.value if isinstance(u, sg.Variable) else u)
    h, total = v[0], 0.0
    for k in range(3):
        x = v[k]
        c = h * x + 0.5
        while value(c) < 2.0 + value(x):
            c = c * 1.4 + 0.05 * np.sin(c)
        h, total = np.tanh(c) * 0.5 + x, total + c
    return h + total


BATCH = np.array([[0.43, 1.07, 0.91], [0.82, 0.35, 1.16], [1.13, 0.64, 0.52]])


def _jvp_of(f):
    return lambda v: sg.jvp(f, (v,), (np.ones(np.shape(v)),))[1]


DERIVED = {"grad": sg.grad, "hessian": sg.hessian, "jvp": _jvp_of,
           "jvp of grad": lambda f: _jvp_of(sg.grad(f))}


def test_the_inner_trip_counts_differ():
    def trips(c, bound):
        n = 0
        while c < 2.0 + bound:
            c, n = c * 1.4 + 0.05 * np.sin(c), n + 1
        return n
    counts = set()
    for v in BATCH:
        h = v[0]
        for x in v:
            c = h * x + 0.5
            counts.add(trips(c, x))
            while c < 2.0 + x:
                c = c * 1.4 + 0.05 * np.sin(c)
            h = np.tanh(c) * 0.5 + x
    assert len(counts) >= 3


@pytest.mark.parametrize("name", list(DERIVED))
def test_vmap_of_a_derivative_through_counted_scans(name):
    T = DERIVED[name]
    got = sg.vmap(T(nested))(BATCH)
    each = np.stack([T(nested)(v) for v in BATCH])
    unrolled = np.stack([T(nested_unrolled)(v) for v in BATCH])
    np.testing.assert_allclose(got, each, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got, unrolled, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["hessian", "jvp of grad"])
def test_a_recorded_vmapped_derivative_replays_at_other_trip_counts(name):
    T = DERIVED[name]
    op = sg.Ops()
    xv = op.var(BATCH, name="X")
    prog = op.program([xv], sg.vmap(T(nested))(xv))
    for X in (BATCH, BATCH * 1.7, BATCH[::-1] * 0.6):
        want = np.stack([T(nested_unrolled)(v) for v in X])
        np.testing.assert_allclose(prog(X), want, rtol=0, atol=1e-12)
    jitted = sg.jit(sg.vmap(T(nested)))
    np.testing.assert_allclose(jitted(BATCH * 1.7),
                               np.stack([T(nested_unrolled)(v) for v in BATCH * 1.7]),
                               rtol=0, atol=1e-12)


def test_a_gradient_recorded_at_no_trips_replays_at_many():
    # at a = 1 Newton's iteration from 1 takes no trip; the program replays at others
    def root(a):
        return sg.while_loop(lambda c: abs(c * c - a) > 1e-14 * a,
                             lambda c: 0.5 * (c + a / c), a * 0.0 + 1.0)
    op = sg.Ops()
    a = op.var(1.0, name="a")
    y = root(a)
    d1 = op.grad(y, a)
    d2 = op.grad(d1, a)
    d3 = op.grad(d2, a)
    prog = op.program([a], [y, d1, d2, d3])
    for v in (2.0, 30.0):
        np.testing.assert_allclose(prog(np.array(v)), [np.sqrt(v), 0.5 * v ** -0.5,
                                                       -0.25 * v ** -1.5, 0.375 * v ** -2.5],
                                   rtol=1e-9)


# ---------------------------------------------------------------- 4. nothing but the program


EXPLAINED = '''
import io, numpy as np, simplegrad as sg
from rich.console import Console
def square(i, c):
    return c * c
op = sg.Ops()
x = op.var(1.1, name="x")
y = sg.fori_loop(0, 3, square, x)
op.grad(y, x, name="dy")
out = io.StringIO()
op.print_trace(Console(file=out, width=200, color_system=None, markup=False), explain=True)
print(op.format_trace(explain=True) + "@@" + op.format_trace(raw=False, explain=True) + "@@"
      + out.getvalue())
'''


def test_explained_views_are_the_same_in_a_fresh_interpreter_and_after_other_work():
    root = Path(__file__).resolve().parents[1]
    fresh = subprocess.run([sys.executable, "-c", EXPLAINED], capture_output=True, text=True,
                           cwd=root, check=True, env={"PYTHONPATH": str(root)}).stdout
    # other loops' derivations first, explained, vmapped and stepped through, in this process
    for name in DERIVED:
        DERIVED[name](nested)(BATCH[0])
    op, *_ = recorded_newton(30.0)
    op.format_trace(explain=True)
    op.format_trace(raw=False, explain=True)
    b = op.var(2.0, name="b")
    assert len(list(sg.step(newton(b)[0], b))) > python_trips(2.0)
    buffer = io.StringIO()
    with __import__("contextlib").redirect_stdout(buffer):
        exec(EXPLAINED, {})
    assert buffer.getvalue() == fresh
    assert "v8 = scan(square.reverse, v7, v6, v0, reverse=True)  # x 3    " \
           "# d(v1 = scan(square, x, v0))/dx" in fresh
