"""A loop in every view: the body printed once, indented under the loop's line with its trip
count, in the text trace (raw and pruned), ``print_trace``, the notebook HTML (of an Ops and
of a Program) and the DOT/SVG pictures, the four showing the same lines; the gradient of a
loop printing as loops; ``explain=True`` tying the lines of a derived body to the lines of
the body they differentiate; ``sg.step`` stepping into a body, trip by trip, against values
written out by hand."""

from __future__ import annotations

import html
import io
import re

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.engine.pictures import has_dot


def square(i, c):
    return c * c


def recorded(trips: int = 3, at: float = 1.1):
    """x -> x^(2^trips) by a fori_loop of squarings, and its gradient, on one Ops."""
    op = sg.Ops()
    x = op.var(at, name="x")
    y = sg.fori_loop(0, trips, square, x)
    dy = op.grad(y, x, name="dy")
    return op, x, y, dy


def loop_blocks(text: str) -> list[list[str]]:
    """Each loop's printed lines: its line and the indented lines under it."""
    lines, found = text.splitlines(), []
    for k, line in enumerate(lines):
        if re.match(r"^\w+ = (scan|while_loop|cond)\(", line):
            block = [line]
            for rest in lines[k + 1:]:
                if not rest.startswith("    "):
                    break
                block.append(rest)
            found.append(block)
    return found


# ---------------------------------------------------------------- the text trace


def test_the_body_prints_once_under_its_loop_with_the_trip_count():
    op, *_ = recorded()
    blocks = loop_blocks(op.format_trace())
    assert blocks[0] == ["v1 = scan(square, x, v0)  # x 3",
                         "    body square:",
                         "        inputs: v0, v1",
                         "        v2 = v0 * v0",
                         "        outputs: v2"]
    # the gradient is loops too: the carries' history, then the body's vjp run backwards
    heads = [b[0] for b in blocks]
    assert heads == ["v1 = scan(square, x, v0)  # x 3",
                     "v5 = scan(square.history, x, v0)  # x 3",
                     "v8 = scan(square.reverse, v7, v6, v0, reverse=True)  # x 3"]
    assert blocks[2][1:] == ["    body square.reverse:", "        inputs: v0, v1, v2",
                             "        v3 = v0 * v1", "        v4 = v3 * 2.0",
                             "        outputs: v4"]


def test_the_printed_program_does_not_grow_with_the_trips():
    short, *_ = recorded(3)
    op, x, y, dy = recorded(100, at=1.0)
    assert dy.value == 2.0 ** 100
    assert len(op.format_trace().splitlines()) == len(short.format_trace().splitlines())
    assert all(b[0].endswith("# x 100") for b in loop_blocks(op.format_trace()))


def test_a_second_order_gradient_of_a_loop_prints_as_loops():
    op = sg.Ops()
    x = op.var(1.1, name="x")
    y = sg.fori_loop(0, 3, square, x)           # x^8
    d1 = op.grad(y, x)
    d2 = op.grad(d1, x, name="d2")
    np.testing.assert_allclose(d2.value, 56 * 1.1 ** 6, rtol=1e-13)
    text = op.format_trace(raw=False)
    heads = [b[0] for b in loop_blocks(text)]
    assert len(heads) >= 4 and all(" # x 3" in h or "  # x 3" in h for h in heads)
    # every loop line is followed by its body, indented, and nothing unrolls: no line of
    # the trace is a step of the loop outside a body
    assert all(b[1].startswith("    body ") for b in loop_blocks(text))
    assert not [line for line in text.splitlines() if line.startswith("v") and " * v" in line
                and "scan" not in line]


def test_the_pruned_derivation_keeps_the_loops_and_drops_the_unasked():
    op, x, y, dy = recorded()
    raw, pruned = op.format_trace(), op.format_trace(raw=False)
    assert "dv2_dv1 = v4" in raw and "dv2_dv1" not in pruned      # only the wrt asked for
    # the same loops and bodies (the pruned view names a moved seed by the entry it moves)
    def unnamed(blocks):
        return [[re.sub(r"\(.*\)", "(...)", b[0]), *b[1:]] for b in blocks]
    assert unnamed(loop_blocks(pruned)[1:]) == unnamed(loop_blocks(raw)[1:])
    assert "v8 = scan(square.reverse, v4, v6, v0, reverse=True)  # x 3" in pruned
    assert "v4 = placed(1.0000, like=v1)" in pruned                # the seed folded


def test_while_loop_and_cond_print_their_functions_first():
    op = sg.Ops()
    a = op.var(2.0, name="a")

    def improve(x):
        return 0.5 * (x + a / x)

    def unsettled(x):
        return abs(x * x - a) > 1e-14

    r = sg.while_loop(unsettled, improve, a + 1.0)
    c = sg.cond(a > 1.0, lambda v: v * 2.0, lambda v: v - 1.0, r)
    blocks = loop_blocks(op.format_trace())
    assert blocks[0][0].startswith("v") and " = while_loop(unsettled, improve, " in blocks[0][0]
    assert [b for b in blocks[0] if b.startswith("    ") and not b.startswith("     ")] == \
        ["    cond unsettled:", "    body improve:"]
    assert re.search(r" = cond\(v\d+, \[branch0, branch1\], v\d+\)$", blocks[1][0])
    np.testing.assert_allclose(c.value, 2 * np.sqrt(2.0), rtol=1e-14)


# ---------------------------------------------------------------- the four views agree


def _html_lines(page: str, name: str) -> tuple[str, list[str]]:
    """The text of the line with id ending in -name, and the body lines shown under it."""
    m = re.search(r'<div[^>]*id="sg-[0-9a-f]+-' + name + r'"[^>]*>(.*?)</div>', page, re.S)
    assert m, name
    head = html.unescape(re.sub(r"<span.*", "", re.sub(r"<a[^>]*>|</a>", "", m[1]), flags=re.S))
    body = re.search(r'id="sg-[0-9a-f]+-' + name + r'".*?<div class="sg-body">(.*?)</div>',
                     page, re.S)
    return head, html.unescape(body[1]).splitlines() if body else []


def test_text_rich_html_and_dot_show_the_same_loop_lines():
    from rich.console import Console
    op, x, y, dy = recorded()
    pruned = loop_blocks(op.format_trace(raw=False))
    # print_trace: the same lines, coloured
    out = io.StringIO()
    op.print_trace(Console(file=out, width=200, color_system=None, markup=False))
    assert loop_blocks(out.getvalue()) == pruned
    # the notebook HTML: the loop's line with its shape and value, its body below unlinked
    page = op._repr_html_()
    for block in pruned:
        name = block[0].split(" = ")[0]
        head, body = _html_lines(page, name)
        assert head == block[0]
        assert body == block[1:]
    assert "<a" not in re.search(r'<div class="sg-body">(.*?)</div>', page, re.S)[1]
    # a Program's HTML: the lines format() prints, the body's names linking nowhere
    prog = op.program([x], [y, dy])
    page = prog._repr_html_()
    printed = loop_blocks(prog.format())
    for block in printed:
        head, body = _html_lines(page, block[0].split(" = ")[0])
        assert head == block[0] and body == block[1:]
    assert not re.search(r'sg-body">[^<]*<a', page)
    # DOT: one box per loop holding its line and body, left-justified as format() prints
    dot = prog.to_dot()
    for block in loop_blocks(prog.format()):
        label = "\\l".join(block) + "\\l"
        assert f'[label="{label}"' in dot


@pytest.mark.skipif(not has_dot(), reason="Graphviz's dot is not installed")
def test_the_svg_draws_the_loop_lines_left_justified(tmp_path):
    op, x, y, dy = recorded()
    prog = op.program([x], [y, dy])
    path = tmp_path / "loop.svg"
    prog.render(str(path))
    svg = path.read_text()
    texts = [html.unescape(t).replace("\xa0", " ")
             for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]
    for block in loop_blocks(prog.format()):
        k = texts.index(block[0])
        assert texts[k:k + len(block)] == block
    starts = re.findall(r'<text text-anchor="(\w+)"[^>]*>v8 = scan', svg)
    assert starts == ["start"]


# ---------------------------------------------------------------- explain


def test_explain_ties_the_body_lines_to_the_loop():
    op, *_ = recorded()
    text = op.format_trace(explain=True)
    blocks = loop_blocks(text)
    # the note stays on the loop's line, naming the loop by its line (no body inside it)
    assert blocks[2][0] == ("v8 = scan(square.reverse, v7, v6, v0, reverse=True)  # x 3    "
                            "# d(v1 = scan(square, x, v0))/dx")
    # the reverse body's lines: which line of body square each differentiates
    assert blocks[2][3] == "        v3 = v0 * v1    # d(v2 = v0 * v0)/dv0 in square"
    assert blocks[2][4] == ("        v4 = v3 * 2.0    # accumulation of the cotangents of v0 "
                            "in square")
    # a forward body has nothing to explain; every other note is one line
    assert blocks[0] == loop_blocks(op.format_trace())[0]
    assert "v6 = v5[1:, 0:1].reshape([-1])    # d(v1 = scan(square, x, v0))/dx" in text
    # the pruned derivation and print_trace explain the same way; they name the seed v4 (v7
    # takes the one entry of the (1, 1) cotangent v4, and the pruned view looks through it)
    pruned = loop_blocks(op.format_trace(raw=False, explain=True))[2]
    assert pruned == [blocks[2][0].replace("reverse, v7,", "reverse, v4,"), *blocks[2][1:]]
    assert pruned[0] == ("v8 = scan(square.reverse, v4, v6, v0, reverse=True)  # x 3    "
                         "# d(v1 = scan(square, x, v0))/dx")
    from rich.console import Console
    out = io.StringIO()
    op.print_trace(Console(file=out, width=200, color_system=None, markup=False), explain=True)
    assert loop_blocks(out.getvalue())[2] == pruned
    # HTML: the note on the loop's line (not over its body)
    page = op._repr_html_()
    assert html.escape("# d(v1 = scan(square, x, v0))/dx") in page
    assert "outputs: v2)/dx" not in html.unescape(page)


def test_explain_of_a_scan_body_with_two_inputs():
    # carry h, x_t: h' = tanh(w h + x_t); its reverse body differentiates tanh and the product
    op = sg.Ops()
    w = op.var(0.7, name="w")
    xs = op.var(np.array([0.1, -0.2, 0.3]), name="xs")

    def cell(h, x):
        h = np.tanh(w * h + x)
        return h, h

    h, ys = sg.scan(cell, op.var(0.0, name="h0"), xs)
    op.grad(h + ys.sum(), [w, xs])
    text = op.format_trace(explain=True)
    body = next(b for b in loop_blocks(text) if "cell.reverse" in b[0])
    notes = [line.split("    # ", 1)[1] for line in body if "    # " in line[8:]][1:]
    assert notes and all(n.endswith(" in cell") for n in notes)
    assert any(n.startswith("d(") and ".tanh()" in n for n in notes)


# ---------------------------------------------------------------- sg.step


def test_step_steps_into_each_trip_of_the_loops():
    op = sg.Ops()
    x = op.var(1.1, name="x")
    y = sg.fori_loop(0, 3, square, x)
    steps = list(sg.step(y, x))
    inside = [s for s in steps if s.loop]
    # the history scan runs the body forwards (carries x, x^2, x^4 squared) ...
    history = [s for s in inside if s.loop == "v5"]
    assert [s.trip for s in history] == [0, 1, 2]
    np.testing.assert_allclose([s.entry.raw for s in history], [1.1 ** 2, 1.1 ** 4, 1.1 ** 8],
                               rtol=1e-14)
    # ... the reverse scan backwards: ct' = 2 c ct, from ct = 1 at the last step
    back = [s for s in inside if s.loop == "v8"]
    assert [s.trip for s in back] == [2, 2, 1, 1, 0, 0]
    c = [1.1, 1.1 ** 2, 1.1 ** 4]
    ct, want = 1.0, []
    for t in (2, 1, 0):
        want += [ct * c[t], 2 * ct * c[t]]
        ct = 2 * ct * c[t]
    np.testing.assert_allclose([s.entry.raw for s in back], want, rtol=1e-14)
    np.testing.assert_allclose(ct, 8 * 1.1 ** 7, rtol=1e-14)
    assert str(back[0]) == "    v3 = v0 * v1    # v8 trip 2: d(v2 = v0 * v0)/dv0 in square"
    # each loop's steps follow its own step; without into=, the sweep's entries alone
    k = next(i for i, s in enumerate(steps) if s.entry.name == "v8")
    assert steps[k + 1] is back[0]
    assert [s.entry.name for s in sg.step(y, x, into=False)] == \
        [s.entry.name for s in steps if not s.loop]


def test_step_into_a_while_loop_takes_its_recorded_trips():
    op = sg.Ops()
    a = op.var(2.0, name="a")

    def improve(c):
        x, n = c
        return 0.5 * (x + a / x), n + 1

    def unsettled(c):
        return abs(c[0] * c[0] - a) > 1e-14
    root, trips = sg.while_loop(unsettled, improve, (a + 1.0, 0))
    steps = list(sg.step(root, a))
    n = int(trips.value)
    assert n == 6           # Newton's steps from 3 to sqrt(2)
    loops = {s.loop for s in steps if s.loop}
    assert loops
    for name in loops:
        assert sorted({s.trip for s in steps if s.loop == name}) == list(range(n))
    last = [s for s in steps if not s.loop][-1]
    np.testing.assert_allclose(last.cotangents["a"].raw, 1 / (2 * np.sqrt(2.0)), rtol=1e-12)


def test_explain_of_a_jvp_body_and_of_a_loop_inside_a_body():
    op = sg.Ops()
    x = op.var(1.1, name="x")
    y = sg.fori_loop(0, 3, square, x)
    t = op.jvp(y, x, 1.0)
    np.testing.assert_allclose(t.value, 8 * 1.1 ** 7, rtol=1e-14)
    body = next(b for b in loop_blocks(op.format_trace(explain=True)) if "step_jvp" in b[0])
    assert body[0].endswith("# jvp of (v1 = scan(square, x, v0))")
    assert "        v4 = v1 * v0    # jvp of (v2 = v0 * v0) in square" in body

    def inner(i, c):
        return c * 1.5 + np.sin(c)

    def outer(i, c):
        return sg.fori_loop(0, 2, inner, c) * c

    op = sg.Ops()
    x = op.var(0.3, name="x")
    d = op.grad(sg.fori_loop(0, 2, outer, x), x)
    f = lambda v: sg.fori_loop(0, 2, outer, v)      # noqa: E731
    np.testing.assert_allclose(d.value, (f(0.3 + 1e-6) - f(0.3 - 1e-6)) / 2e-6, rtol=1e-8)
    text = op.format_trace(explain=True).splitlines()
    # the inner loop's reverse body, printed inside the outer's, its lines explained in turn
    k = text.index("            body inner.reverse:")
    assert text[k - 1].startswith("        v12 = scan(inner.reverse, ")
    assert text[k - 1].endswith("# d(v3 = scan(inner, v0, v2))/dv0 in outer")
    assert text[k + 2] == "                v3 = v1.cos()    # d(v3 = v0.sin())/dv0 in inner"
    assert text[k + 4] == "                v5 = v0 * 1.5    # d(v2 = v0 * 1.5)/dv0 in inner"
