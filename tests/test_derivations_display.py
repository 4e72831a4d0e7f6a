"""Derivations in notebooks and step by step: the HTML of an Ops and a Program (every link
lands on a line), ``sg.step`` (one backward entry at a time, on a copy) and ``sg.diff``.

Oracles: the raw trace (what each step must equal, line for line), the gradients the sweep
maps at the end of its block, hand-written backward programs, and the HTML parsed with the
standard library's parser.
"""

from __future__ import annotations

import shutil
from html.parser import HTMLParser

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.cli import seed_program
from simplegrad.engine.tape import BlockEnd


class _Page(HTMLParser):
    """The ids, links and <details> blocks of a page."""

    def __init__(self, text: str):
        super().__init__()
        self.ids: list[str] = []
        self.hrefs: list[str] = []
        self.details = 0
        self.summaries: list[str] = []
        self._in_summary = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        if tag == "a":
            self.hrefs.append(attrs["href"])
        self.details += tag == "details"
        self._in_summary = tag == "summary"

    def handle_data(self, data):
        if self._in_summary:
            self.summaries.append(data)
            self._in_summary = False


def test_ops_html_has_a_block_per_order_and_every_link_lands():
    op, _, _ = seed_program(echo=False)
    page = _Page(op._repr_html_())
    assert page.details == 3 and [s.split(" (")[0] for s in page.summaries] == [
        "forward", "order 1", "order 2"]
    assert len(page.ids) == len(set(page.ids))
    assert page.hrefs and all(h.startswith("#") and h[1:] in page.ids for h in page.hrefs)
    # every entry of the pruned derivation has its line, with its shape and a value preview
    text = op._repr_html_()
    for line in op.format_trace(raw=False).splitlines():
        name = line.split(" = ")[0]
        if line.startswith(("v", "L")) and " = " in line:
            assert f"-{name}\"" in text, name
    assert "(4,) [ 2.6920,  4.9204, 13.6568,  8.0724]" in text      # db's value, previewed


def test_two_displays_never_share_an_id():
    op, _, _ = seed_program(echo=False)
    a, b = _Page(op._repr_html_()), _Page(op._repr_html_())
    assert not set(a.ids) & set(b.ids)
    prog = op.program([op.tape[0].inputs[0]], [op.tape[-1]])
    c = _Page(prog._repr_html_())
    assert not set(c.ids) & set(a.ids) and all(h[1:] in c.ids for h in c.hrefs)


def test_backward_lines_link_to_the_forward_entry_they_pull_back_through():
    op = sg.Ops()
    x = op.var([0.5, 1.0], name="x")
    op.grad(op.sum(x.sin() * x.exp(), name="L"), x)
    text = op._repr_html_()
    # the line of cos(x) pulls back through v0 = x.sin(): its link points at v0's id
    prefix = _Page(text).ids[0]          # the container: ids of lines extend it
    cos = next(s for s in text.splitlines() if "= x.cos()" in s)
    assert f'href="#{prefix}-v0"' in cos and 'title="d(v0 = x.sin())/dx"' in cos


def test_sg_trace_displays_its_outputs_only():
    t = sg.trace(lambda x: [(x * 3.0).exp(), sg.grad(lambda u: (u.tanh()).sum())(x)],
                 np.array([0.1, 0.2]))
    assert len(t.outputs) == 2
    page = _Page(t._repr_html_())
    assert all(h[1:] in page.ids for h in page.hrefs)


def test_a_long_derivation_shows_its_first_lines_and_draws_no_picture(monkeypatch):
    from simplegrad.engine import html
    op = sg.Ops()
    x = op.var([0.1, 0.2], name="x")
    y = x
    for _ in range(30):
        y = (y * 1.1).sin()
    op.grad(op.sum(y, name="L"), x)
    monkeypatch.setattr(html, "MAX_LINES", 20)
    monkeypatch.setattr(html, "MAX_PICTURE", 20)
    text = op._repr_html_()
    assert "more lines: op.format_trace(raw=False) prints them all" in text
    assert text.count('class="sg-line"') <= 20 + 2
    assert op._repr_svg_() is None


@pytest.mark.skipif(shutil.which("dot") is not None, reason="Graphviz is installed")
def test_svg_is_left_to_html_without_graphviz():
    op, _, _ = seed_program(echo=False)
    assert op._repr_svg_() is None


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_svg_with_graphviz():
    op, _, _ = seed_program(echo=False)
    assert "<svg" in op._repr_svg_() and "legend:" in op._repr_svg_()


# ---------------------------------------------------------------- sg.step

def test_step_walks_the_seed_sweep_on_a_copy():
    # the seed up to L1; step through dL1 on a copy, then let op.grad record it for real
    op = sg.Ops()
    a = op.named_var(np.array([0.4605, 0.4061, 0.9422, 0.3946]), "a")
    b = op.named_var(np.array([0.0850, 0.3296, 0.9888, 0.6494]), "b")
    da, db = op.grad(op.sum((a + b) * b, name="L0"), [a, b])
    L1 = op.sum(da * da + db * db, name="L1")
    before, counter = op.format_trace(), op.tape.counter
    steps = list(sg.step(L1, [a, b]))
    assert op.format_trace() == before and op.tape.counter == counter     # untouched
    assert a.grad is da
    # the copy records what op.grad records, with the same names: the seed's order-2 block
    op.grad(L1, [a, b])
    raw = op.format_trace(block=-1, explain=True).splitlines()
    assert [str(s) for s in steps] == [s for s in raw if s.startswith("v")]
    assert len(steps) == 15 and steps[1].rule == "d(v8 = v6 * v6)/dv6"
    # at the end, the cotangents are the block's gradients
    end = [e for e in op.tape.events if type(e) is BlockEnd][-1]
    last = steps[-1].cotangents
    for x, g in end.pairs:
        if g.prim is not None:
            np.testing.assert_array_equal(last[x.name].value, g.value)
    assert last["a"].name == "v20" and last["b"].name == "v25"
    # while the sweep runs, only what is known so far: after the first entry, dL1/dv9, which
    # v9 = v7 + v8 passes on to both unchanged
    assert set(steps[0].cotangents) == {"L1", "v9", "v7", "v8"}
    assert steps[0].cotangents["v7"] is steps[0].entry


def test_step_abandoned_leaves_the_tape_and_grads_alone():
    op = sg.Ops()
    x = op.var([1.0, 2.0], name="x")
    L = op.sum(x * x * x, name="L")
    it = sg.step(L, x)
    first = next(it)
    assert first.entry.name == f"v{op.tape.counter + 1}"   # after the seed's number
    assert len(op.tape) == 3 and x.grad is None
    with pytest.raises(sg.ArgumentError, match="step: wrt"):
        sg.step(L, [sg.Ops().var(1.0)])


# ---------------------------------------------------------------- sg.diff

def test_diff_of_equal_derivations_is_falsy():
    op, a, b = seed_program(echo=False)
    prog = op.program([a, b], [a.grad, b.grad])
    assert not sg.diff(prog, prog)
    assert not sg.diff(sg.simplify(prog), sg.simplify(prog))


def test_diff_compares_large_constants_by_value():
    # two recordings hold equal 100x100 matrices as two arrays (beyond the CSE key's size,
    # which matches a large array only to itself): equal derivations, and one changed entry
    # of the matrix is a difference
    rng = np.random.default_rng(0)
    W = rng.normal(size=(100, 100))
    W2 = W.copy()
    W2[3, 7] += 1.0
    x = rng.normal(size=100)
    a = sg.trace(sg.grad(lambda v: (v @ W.copy()).tanh().sum()), x)
    b = sg.trace(sg.grad(lambda v: (v @ W.copy()).tanh().sum()), x)
    c = sg.trace(sg.grad(lambda v: (v @ W2).tanh().sum()), x)
    assert not sg.diff(a, b)
    assert sg.diff(a, c)

    def prog(matrix):
        op = sg.Ops()
        v = op.var(x, name="x")
        return op.program(v, op.grad((v @ matrix).tanh().sum(), v))

    assert not sg.diff(prog(W.copy()), prog(W.copy()))
    assert sg.diff(prog(W), prog(W2))


def test_diff_aligns_a_hand_written_backward_with_simplegrads():
    # d/dx sum(sin(x) * x) = cos(x) * x + sin(x), written by hand, against sg.grad's
    f = sg.grad(lambda x: (x.sin() * x).sum())
    ours = sg.trace(f, np.array([0.5, 1.0]))
    hand = sg.trace(lambda x: x.cos() * x + x.sin(), np.array([0.5, 1.0]))
    d = sg.diff(ours, hand)
    rows = str(d).splitlines()
    assert any(r.startswith("  ") and "x.cos()" in r for r in rows)     # aligned, equal
    # sin(x) stands first in ours and third by hand: aligned all the same
    assert any(r.startswith("  ") and r.count("x.sin()") == 2 for r in rows)
    assert any(r.startswith("  ") and "+" in r.split("|")[0] for r in rows)     # the sum
    assert d.outputs_match                  # the same expression of x, by structure
    hand_wrong = sg.trace(lambda x: x.cos() * x - x.sin(), np.array([0.5, 1.0]))
    d = sg.diff(ours, hand_wrong)
    marks = [r[0] for r in str(d).splitlines()]
    assert d and not d.outputs_match and "-" in marks and "+" in marks


def test_diff_before_and_after_simplify_marks_what_went():
    op = sg.Ops()
    x = op.var([1.0, 2.0], name="x")
    g = op.grad(op.sum(x * x, name="L"), x)
    prog = op.program(x, g)
    d = sg.diff(prog, sg.simplify(prog))
    marks = [r[0] for r in str(d).splitlines()]
    assert d and "-" in marks
    with pytest.raises(sg.ArgumentError, match="diff: expected"):
        sg.diff(prog, 3)


def test_a_hessians_program_html_shows_the_lines_format_prints():
    import html as html_module
    import re
    op = sg.Ops()
    x, y = op.var(0.5, name="x"), op.var(1.5, name="y")
    H = sg.hessian(lambda x, y: x**2 * y + y**3, (0, 1))(x, y)
    prog = op.program([x, y], [H[0][0], H[0][1], H[1][0], H[1][1]])
    text = prog._repr_html_()
    page = _Page(text)
    assert page.hrefs and all(h[1:] in page.ids for h in page.hrefs)      # every link lands
    shown = [html_module.unescape(re.sub(r"<span.*?</span>|<[^>]+>", "", t))
             for t in re.findall(r'<div class="sg-line"[^>]*>(.*?)</div>', text)]
    printed = prog.format().splitlines()[1:-1]          # (inputs and outputs: the header)
    assert [t for t in shown if not t.startswith("input ")] == printed
    assert "concatenate" not in text and "reshape" not in text
    assert "outputs H[x, x], H[x, y], H[y, x], H[y, y]" in text
