"""``sg.diff`` says whether two derivations are equal before it shows how they differ: a
right hand-written derivative is "equal" however it is written, a wrong one "NOT equal".

Oracle: SymPy itself, on formulas written here: whether a hand-written derivative equals the
true one is decided by ``sympy.diff`` and ``sympy.simplify``, never by simplegrad; the
verdict must agree, by SymPy inside ``sg.diff`` and by its random-point fallback alike.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.program import compare

sp = pytest.importorskip("sympy")
X = sp.Symbol("x", real=True)

# (f, f as SymPy, a hand-written f', that f' as SymPy): right and wrong ones alike
CASES = {
    "tanh''": (lambda x: x.tanh(), sp.tanh(X), 2,
               lambda x: -2 * x.tanh() * (1 - x.tanh() ** 2),
               -2 * sp.tanh(X) * (1 - sp.tanh(X) ** 2)),
    "tanh'' wrong": (lambda x: x.tanh(), sp.tanh(X), 2,
                     lambda x: -2 * x.tanh() * (1 - x.tanh()),
                     -2 * sp.tanh(X) * (1 - sp.tanh(X))),
    "(x sin x)'": (lambda x: x * x.sin(), X * sp.sin(X), 1,
                   lambda x: x.sin() + x * x.cos(), sp.sin(X) + X * sp.cos(X)),
    "(x sin x)' wrong": (lambda x: x * x.sin(), X * sp.sin(X), 1,
                         lambda x: x.sin() - x * x.cos(), sp.sin(X) - X * sp.cos(X)),
    "log(1 + x^2)'": (lambda x: (1 + x * x).log(), sp.log(1 + X ** 2), 1,
                      lambda x: 2 * x / (1 + x ** 2), 2 * X / (1 + X ** 2)),
    "(e^x / x)''": (lambda x: x.exp() / x, sp.exp(X) / X, 2,
                    lambda x: x.exp() * (x * x - 2 * x + 2) / x ** 3,
                    sp.exp(X) * (X ** 2 - 2 * X + 2) / X ** 3),
    "(e^x / x)'' wrong": (lambda x: x.exp() / x, sp.exp(X) / X, 2,
                          lambda x: x.exp() * (x * x - 2 * x + 1) / x ** 3,
                          sp.exp(X) * (X ** 2 - 2 * X + 1) / X ** 3),
}


def _sides(name):
    f, formula, order, hand, hand_formula = CASES[name]
    g = f
    for _ in range(order):
        g = sg.grad(g)
    truth = sp.simplify(sp.diff(formula, X, order) - hand_formula) == 0
    return sg.trace(g, 0.7), sg.trace(hand, 0.7), truth


@pytest.mark.parametrize("name", CASES)
def test_the_verdict_is_sympys(name):
    ours, hand, truth = _sides(name)
    d = sg.diff(ours, hand, names=("sg.grad", "by hand"))
    assert d.equal is truth, str(d)
    assert str(d).splitlines()[1].startswith("equal: " if truth else "NOT equal: ")


@pytest.mark.parametrize("name", CASES)
def test_the_random_points_agree_without_sympy(name, monkeypatch):
    monkeypatch.setattr(compare, "_sympy_equal", lambda pa, pb: None)
    ours, hand, truth = _sides(name)
    d = sg.diff(ours, hand)
    assert d.equal is truth and ("random point" in d.how or "by structure" in d.how), d.how
    if not truth:       # the point and both values are named
        assert re.search(r"output 0 is \S+ \(a\) and \S+ \(b\) at x = ", d.how), d.how


def test_programs_sympy_cannot_read_are_compared_at_random_points():
    A = np.array([[2.0, 1.0], [1.0, 3.0]])
    ours = sg.trace(sg.grad(lambda x: 0.5 * x @ (A @ x)), np.array([0.3, 0.4]))
    hand = sg.trace(lambda x: A @ x, np.array([0.3, 0.4]))
    hand_wrong = sg.trace(lambda x: A.T @ x * 2.0, np.array([0.3, 0.4]))
    assert sg.diff(ours, hand).equal is True
    assert sg.diff(ours, hand_wrong).equal is False


def test_the_header_names_both_sides_and_no_name_collides():
    ours, hand, _ = _sides("tanh''")
    text = str(sg.diff(ours, hand, names=("sg.grad", "by hand")))
    assert text.splitlines()[0] == "sg.diff: sg.grad (left) against by hand (right)"
    assert text.splitlines()[2].startswith("structure: ")
    rows = [r for r in text.splitlines()[4:]]
    left = {m[1] for r in rows if (m := re.match(r"^. (\w+) = ", r))}
    right = {m[1] for r in rows if (m := re.search(r"\| (\S+) = ", r))}
    assert left and right and not left & right, (left, right)
    assert any(name.endswith("'") for name in right)     # v2 on both sides: primed on b's


def test_equal_structure_needs_no_evaluation():
    op = sg.Ops()
    x = op.var(np.array([0.5, 1.0]), name="x")
    prog = op.program(x, op.grad((x * x).sum(), x))
    d = sg.diff(prog, prog)
    assert not d and d.equal is True and "by structure" in d.how


class _Table(HTMLParser):
    def __init__(self, text):
        super().__init__()
        self.rows, self.text = 0, []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.rows += tag == "tr"

    def handle_data(self, data):
        self.text.append(data)


def test_the_html_view_holds_the_verdict_and_every_row():
    ours, hand, _ = _sides("tanh'' wrong")
    d = sg.diff(ours, hand, names=("ours", "<hand>"))
    page = _Table(d._repr_html_())
    assert page.rows == len(d.rows) + 1              # and the header row
    text = "".join(page.text)
    assert d.verdict() in text and "<hand>" in text and "NOT equal" in text
