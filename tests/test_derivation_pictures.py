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
