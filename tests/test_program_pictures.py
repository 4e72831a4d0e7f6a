"""A program's picture is its printed derivation: ``prog.render()`` / ``prog.to_dot()`` draw
one box per line ``prog.format()`` prints, no box for a constant the text folds inline, and
no argument-position label on an edge into a commutative entry; ``raw=True`` draws every
recorded entry. Oracle: the text of ``prog.format()`` (and ``format(raw=True)``)."""

from __future__ import annotations

import html
import re
import shutil

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.cli import seed_program

BOX = re.compile(r'^  "([^"]+)" \[label="((?:[^"\\]|\\.)*)"', re.M)
EDGE = re.compile(r'^  "([^"]+)" -> "([^"]+)"( \[label="([\d,]+)"\])?;', re.M)


def _seed():
    op, a, b = seed_program(echo=False)
    return op.program([a, b], [a.grad, b.grad])


def _tanh3():
    op = sg.Ops()
    x = op.var(np.array([0.5, -0.2]), name="x")
    g = op.sum(x.tanh(), name="L")
    for k in range(3):
        d = op.grad(g, x)
        g = op.sum(d, name=f"S{k}")
    return op.program(x, d)


def _quotient():
    op = sg.Ops()
    x = op.var(np.array([0.7, 1.3]), name="x")
    y = op.var(np.array([2.0, 0.5]), name="y")
    L = op.sum((x - y) / (1 + x * x), name="L")
    dx, dy = op.grad(L, [x, y], name=["dx", "dy"])
    return op.program([x, y], [dx, dy])


PROGRAMS = {"seed": _seed, "tanh3": _tanh3, "quotient": _quotient}


def _lines(prog, raw=False) -> list[str]:
    """The ``name = expression`` lines of the program's text."""
    return [t for t in prog.format(raw=raw).splitlines()
            if " = " in t and not t.startswith(("inputs:", "outputs:", "guard:"))]


def _boxes(dot: str) -> list[str]:
    return [label.replace('\\"', '"') for _, label in BOX.findall(dot) if " = " in label]


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_picture_has_one_box_per_printed_line(name):
    prog = PROGRAMS[name]()
    dot = prog.to_dot()
    assert sorted(_boxes(dot)) == sorted(_lines(prog))
    # every drawn node is a printed line or an input; nothing the text folds
    names = {label.split(" = ")[0] for label in _lines(prog)} | {i.name for i in prog.inputs}
    assert {key for key, _ in BOX.findall(dot)} == names
    raw = prog.to_dot(raw=True)
    assert sorted(_boxes(raw)) == sorted(_lines(prog, raw=True))


def test_the_seed_picture_folds_the_ones_and_labels_only_ordered_arguments():
    prog = _seed()
    dot = prog.to_dot()
    assert "ones" not in dot and "expand" not in dot
    assert not [m for m in EDGE.findall(dot) if m[2]], "a label on a commutative entry"
    assert "expand" in prog.to_dot(raw=True) and re.search(r'\[label="1"\]',
                                                           prog.to_dot(raw=True))
    quotient = _quotient().to_dot()
    labelled = {dst for _, dst, extra, _ in EDGE.findall(quotient) if extra}
    divisions = {key for key, label in BOX.findall(quotient) if " / " in label or " - " in label}
    assert labelled and labelled <= divisions      # order matters only in - and /


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
@pytest.mark.parametrize("name", PROGRAMS)
def test_the_rendered_svg_shows_the_printed_lines(name, tmp_path):
    prog = PROGRAMS[name]()
    svg = prog.render(tmp_path / "p.svg").read_text()
    texts = [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]
    assert sorted(t for t in texts if re.match(r"^\w+ = ", t)) == sorted(_lines(prog))
    raw = prog.render(tmp_path / "r.svg", raw=True).read_text()
    texts = [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", raw)]
    assert sorted(t for t in texts if re.match(r"^\w+ = ", t)) == sorted(_lines(prog, raw=True))
