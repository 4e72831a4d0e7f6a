"""An Ops' picture is its pruned derivation: ``op.to_dot()`` and ``Ops._repr_svg_`` draw one
box per line ``op.format_trace(raw=False)`` prints (``raw=True``: every recorded entry), and
``values=`` / ``grads=`` note each node's value and each input's gradient under its line, as
micrograd's ``draw_dot`` shows data and grad. Oracles: the printed text, and the seed
program's values and first gradients worked by hand (dL0/da = b, dL0/db = a + 2b)."""

from __future__ import annotations

import html
import re
import shutil

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.cli import seed_program
from simplegrad.engine.render import format_value, roles

BOX = re.compile(r'^  "([^"]+)" \[label="((?:[^"\\]|\\.)*)"', re.M)


def _tanh3():
    op = sg.Ops()
    x = op.var(np.array([0.5, -0.2]), name="x")
    g = op.sum(x.tanh(), name="L")
    for k in range(3):
        g = op.sum(op.grad(g, x), name=f"S{k}")
    return op


def _hessian():
    return sg.trace(sg.hessian(lambda x, y: x**2 * y + y**3, (0, 1)), 0.5, 1.5)


OPS = {"seed": lambda: seed_program(echo=False)[0], "tanh3": _tanh3, "hessian": _hessian}


def _printed(op) -> list[str]:
    """The lines of the pruned derivation that stand for entries and inputs."""
    return [t for role, t in roles(op.tape, raw=False, outputs=op.outputs)
            if role in ("leaf", "forward", "grad", "accumulate")]


def _boxes(dot: str) -> list[str]:
    labels = [label.replace('\\"', '"').split("\\n")[0] for _, label in BOX.findall(dot)]
    return [re.sub(r"  \[[\d, ]*\] \w+$", "", t) for t in labels if " = " in t]


@pytest.mark.parametrize("name", OPS)
def test_the_picture_has_one_box_per_printed_line(name):
    op = OPS[name]()
    assert sorted(_boxes(op.to_dot())) == sorted(_printed(op))
    raw = _boxes(op.to_dot(raw=True))         # the tape: every recorded entry, as recorded
    assert sorted(raw) != sorted(_printed(op))


def test_values_and_gradients_annotate_the_nodes():
    op, a, b = seed_program(echo=False)
    av, bv = a.value, b.value
    dot = op.to_dot(values=True, grads=True)
    labels = {key: label.replace('\\"', '"').split("\\n") for key, label in BOX.findall(dot)}
    assert labels["L0"][1] == f"value () {format_value(np.sum((av + bv) * bv))}"
    assert labels["v0"][1] == f"value (4,) {format_value(av + bv)}"
    assert labels["a"][1] == f"grad (4,) {format_value(bv)}"            # dL0/da = b
    assert labels["b"][1] == f"grad (4,) {format_value(av + 2 * bv)}"   # dL0/db = a + 2b
    assert "value" not in op.to_dot() and "grad (" not in op.to_dot()    # off by default


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_repr_svg_draws_the_pruned_derivation(tmp_path):
    op = _tanh3()
    texts = [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", op._repr_svg_())]
    assert sorted(t for t in texts if re.match(r"^\w+ = (?!\[)", t)) == \
        sorted(t for t in _printed(op) if not t.startswith("x = "))
    raw = op._repr_svg_(raw=True)
    assert raw.count("<g id=\"node") > op._repr_svg_().count("<g id=\"node")
    png = op.render(tmp_path / "d.png", values=True)
    assert png.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(sg.errors.ArgumentError, match="must end in .svg or .png"):
        op.render(tmp_path / "d.pdf")


# ---------------------------------------------------------------- a Program's picture


def _hessian_program():
    op = sg.Ops()
    x, y = op.var(0.5, name="x"), op.var(1.5, name="y")
    H = sg.hessian(lambda x, y: x**2 * y + y**3, (0, 1))(x, y)
    return op.program([x, y], [H[0][0], H[0][1], H[1][0], H[1][1]])


def _jitted_hessian():
    f = sg.jit(sg.hessian(lambda x, y: x**2 * y + y**3, (0, 1)))
    f(0.5, 1.5)
    return f.programs(0.5, 1.5)[0].program


def _vector_hessian():
    op = sg.Ops()
    x, y = op.var(np.array([0.5, 1.0, 2.0]), name="x"), op.var(1.5, name="y")
    H = sg.hessian(lambda x, y: (x**2).sum() * y + y**3, (0, 1))(x, y)
    return op.program([x, y], [H[0][0], H[0][1], H[1][0], H[1][1]])


def _seed_program():
    op, a, b = seed_program(echo=False)
    return op.program([a, b], [a.grad, b.grad])


PROGRAMS = {"hessian": _hessian_program, "jitted-hessian": _jitted_hessian,
            "vector-hessian": _vector_hessian, "seed": _seed_program}
NAMED = re.compile(r"^([HJ]\[[^\]]*\]) = (\S+)$")


def _program_lines(prog) -> tuple[list[str], dict[str, list[str]]]:
    """The entry lines ``prog.format()`` prints, and line name -> the result names it is."""
    lines, named = [], {}
    for t in prog.format().splitlines():
        m = NAMED.match(t)
        if m:
            named.setdefault(m[2], []).append(m[1])
        elif " = " in t and not t.startswith(("inputs:", "outputs:", "guard:")):
            lines.append(t)
    return lines, named


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_programs_picture_has_one_box_per_printed_line(name):
    prog = PROGRAMS[name]()
    lines, named = _program_lines(prog)
    dot = prog.to_dot()
    labels = {key: label.replace('\\"', '"').split("\\n") for key, label in BOX.findall(dot)}
    boxes = [parts[0] for parts in labels.values() if " = " in parts[0]]
    assert sorted(boxes) == sorted(lines)
    # each result a transform named is framed inside the box of the line it names
    for line_name, results in named.items():
        assert labels[line_name][1:] == ["= " + " = ".join(results)], (line_name, labels)
    assert {key for key in labels} == {t.split(" = ")[0] for t in lines} | \
        {i.name for i in prog.inputs}       # nothing the text folds is drawn
    raw = prog.to_dot(raw=True)             # raw: every recorded entry, the plumbing too
    raw_lines = [t for t in prog.format(raw=True).splitlines()
                 if " = " in t and not t.startswith(("inputs:", "outputs:", "guard:"))]
    assert sorted(b.split("\\n")[0] for _, b in BOX.findall(raw) if " = " in b) == \
        sorted(t.replace('"', '\\"') for t in raw_lines)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
@pytest.mark.parametrize("name", ["hessian", "vector-hessian"])
def test_a_programs_svg_shows_its_printed_lines(name, tmp_path):
    prog = PROGRAMS[name]()
    lines, named = _program_lines(prog)
    svg = prog.render(tmp_path / "p.svg").read_text()
    assert svg == prog._repr_svg_() or "<svg" in prog._repr_svg_()
    texts = [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]
    assert sorted(t for t in texts if re.match(r"^\w+ = ", t)) == sorted(lines)
    for results in named.values():
        assert "= " + " = ".join(results) in texts
