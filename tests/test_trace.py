"""The printed trace: the seed program's exact output, print rules, and rich rendering.

The seed's expected output below is transcribed from seeds/002 (the program's
printed lines). Inside each grad block the ``dL_dv = vN`` lines are compared
as a set, since their order is the order of a dict in the seed's program;
every other line is compared in order.
"""

from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pytest
from rich.console import Console

import simplegrad as sg

SEED_OUTPUT = """\
a = [0.4605, 0.4061, 0.9422, 0.3946]
b = [0.0850, 0.3296, 0.9888, 0.6494]
v0 = a + b
v1 = v0 * b
L0 = v1.sum()
dL0 --------------
v3 = v2.expand([4])
v4 = v3 * b
v5 = v3 * v0
v6 = v5 + v4
dL0_dv1 = v3
dL0_dv0 = v4
dL0_dL0 = v2
dL0_da = v4
dL0_db = v6
------------------
v7 = v4 * v4
v8 = v6 * v6
v9 = v7 + v8
L1 = v9.sum()
dL1 --------------
v11 = v10.expand([4])
v12 = v11 * v6
v13 = v11 * v6
v14 = v12 + v13
v15 = v11 * v4
v16 = v11 * v4
v17 = v15 + v16
v18 = v17 + v14
v19 = v14 * v0
v20 = v14 * v3
v21 = v18 * b
v22 = v18 * v3
v23 = v19 + v21
v24 = v23.sum()
v25 = v22 + v20
dL1_dv0 = v20
dL1_dv4 = v18
dL1_dv2 = v24
dL1_dv5 = v14
dL1_dv9 = v11
dL1_dL1 = v10
dL1_db = v25
dL1_dv6 = v14
dL1_dv3 = v23
dL1_dv7 = v11
dL1_da = v20
dL1_dv8 = v11
------------------
da = [1.2610, 2.1306, 5.8396, 3.3868]
db = [ 2.6920,  4.9204, 13.6568,  8.0724]
"""

GRAD_MAP = re.compile(r"d\w+_d\w+ = v\d+")


def comparable(lines: list[str]) -> list[object]:
    """Lines in order, except that each run of grad-map lines becomes one set."""
    out: list[object] = []
    for line in lines:
        if GRAD_MAP.fullmatch(line):
            if not out or not isinstance(out[-1], frozenset):
                out.append(frozenset())
            assert line not in out[-1], f"{line!r} printed twice"
            out[-1] = out[-1] | {line}
        else:
            out.append(line)
    return out


def fmt(x: np.ndarray) -> str:
    """A value as the seed prints it (the format DESIGN.md states)."""
    return np.array2string(x, precision=4, separator=", ", floatmode="fixed")


def seed_program(op: sg.Ops) -> tuple[sg.Variable, sg.Variable]:
    """The seed's program, written with the library's API; prints da and db as it does."""
    a = op.named_var(np.array([0.4605, 0.4061, 0.9422, 0.3946]), "a")
    b = op.var([0.0850, 0.3296, 0.9888, 0.6494], name="b")
    l0 = op.sum(op.mul(op.add(a, b), b), name="L0")
    op.grad(l0, [a, b])
    da, db = a.grad, b.grad
    l1 = op.sum(op.add(op.mul(da, da), op.mul(db, db)), name="L1")
    op.grad(l1, [a, b])
    print(f"d{a.name} = {fmt(a.grad.value)}")
    print(f"d{b.name} = {fmt(b.grad.value)}")
    return a, b


def test_seed_program_echo(capsys: pytest.CaptureFixture) -> None:
    """sg.Ops(echo=True) prints exactly the seed's lines as they are recorded."""
    seed_program(sg.Ops(echo=True))
    out = capsys.readouterr().out
    assert comparable(out.splitlines()) == comparable(SEED_OUTPUT.splitlines())
    assert out.endswith("\n")


def test_format_trace_is_the_echoed_text(capsys: pytest.CaptureFixture) -> None:
    """op.format_trace() returns what echo printed (the program's own prints aside)."""
    echoing = sg.Ops(echo=True)
    seed_program(echoing)
    echoed = capsys.readouterr().out.splitlines()[:-2]
    quiet = sg.Ops()
    seed_program(quiet)
    assert quiet.format_trace().splitlines() == echoed
    assert echoing.format_trace() == quiet.format_trace()
    assert comparable(quiet.format_trace().splitlines()) == \
        comparable(SEED_OUTPUT.splitlines()[:-2])


def test_seed_program_with_operators(capsys: pytest.CaptureFixture) -> None:
    """The same program written with operators prints the same trace."""
    op = sg.Ops(echo=True)
    a = op.named_var(np.array([0.4605, 0.4061, 0.9422, 0.3946]), "a")
    b = op.named_var(np.array([0.0850, 0.3296, 0.9888, 0.6494]), "b")
    l0 = op.sum((a + b) * b, name="L0")
    da, db = op.grad(l0, [a, b])
    l1 = op.sum(da * da + db * db, name="L1")
    op.grad(l1, [a, b])
    out = capsys.readouterr().out.splitlines()
    assert comparable(out) == comparable(SEED_OUTPUT.splitlines()[:-2])


def test_unechoed_work_prints_nothing(capsys: pytest.CaptureFixture) -> None:
    """Echo prints nothing for values-only work: no_grad and create_graph=False."""
    op = sg.Ops(echo=True)
    x = op.var([1.0, 2.0])
    L = (x * x).sum()
    capsys.readouterr()
    with op.no_grad():
        (x * 3.0).exp()
    op.grad(L, x, create_graph=False)
    assert capsys.readouterr().out == ""


def test_print_rules() -> None:
    """Each primitive prints as the Python expression a reader would write."""
    op = sg.Ops()
    X = op.named_var(np.arange(12.0).reshape(3, 4) / 10, "X")
    W = op.named_var(np.eye(4), "W")
    v0 = X @ W
    v1 = v0.tanh()
    v2 = v1.T
    v3 = op.transpose(v2)
    v4 = v3.reshape(4, 3)
    v5 = v4.reshape([3, 4])
    v5[0, 1:3]
    v5[np.array([2, 0]), ::2]
    v8 = v5.sum(axis=1, keepdims=True)
    v8.sum()
    v5.mean(axis=0)
    v5[..., None]
    op.matmul(np.eye(3), v5, name="P")
    _ = -v5
    _ = v5 ** 2
    op.add(v5, v5, name="y")
    v5.transpose(1, 0)
    op.exp(v5).log()
    with op.no_grad():
        u = v8 * 0.0
    v8 + u
    assert op.format_trace().splitlines()[2:] == [
        "v0 = X @ W",
        "v1 = v0.tanh()",
        "v2 = v1.T",
        "v3 = v2.T",
        "v4 = v3.reshape([4, 3])",
        "v5 = v4.reshape([3, 4])",
        "v6 = v5[0, 1:3]",
        "v7 = v5[[2, 0], ::2]",
        "v8 = v5.sum(axis=1, keepdims=True)",
        "v9 = v8.sum()",
        "v10 = v5.mean(axis=0)",
        "v11 = v5[..., None]",
        "P = <float64 3x3> @ v5",
        "v12 = -v5",
        "v13 = v5 ** 2",
        "y = v5 + v5",
        "v14 = v5.transpose([1, 0])",
        "v15 = v5.exp()",
        "v16 = v15.log()",
        "v17 = v8 + [[0.0000], [0.0000], [0.0000]]",   # an unrecorded value prints as one
    ]


def test_leaf_lines() -> None:
    """Leaves print their values; detached leaves and zero gradients say what they are."""
    op = sg.Ops()
    x = op.var([1.0, -2.0])
    op.named_var(np.array([[1, 2], [3, 4]]), "A")
    x.detach()
    op.grad((x * 1.0).sum(), [x, op.var(np.ones((2, 2), np.float32))])
    assert comparable(op.format_trace().splitlines()) == comparable([
        "v0 = [ 1.0000, -2.0000]",
        "A = [[1.0000, 2.0000], [3.0000, 4.0000]]",
        "v1 = v0.detach()",
        "v2 = v0 * 1.0",
        "v3 = v2.sum()",
        "v4 = [[1.0000, 1.0000], [1.0000, 1.0000]]",
        "dv3 --------------",
        "v6 = v5.expand([2])",       # v5 is the seed
        "v7 = v6 * 1.0",
        "dv3_dv3 = v5",
        "dv3_dv2 = v6",
        "dv3_dv0 = v7",
        "------------------",
        "v8 = zeros([2, 2])",        # v4 does not reach v3
    ])


def test_print_trace_with_rich_console() -> None:
    """op.print_trace renders the same text through a rich Console, styled by role."""
    op = sg.Ops()
    with contextlib.redirect_stdout(io.StringIO()):
        seed_program(op)
    console = Console(file=io.StringIO(), record=True, width=200, color_system="truecolor")
    op.print_trace(console, raw=True)
    text = console.export_text(clear=False)
    assert text.startswith(op.format_trace() + "\n")
    table = text[len(op.format_trace()) + 1:].splitlines()
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in table if "│" in line]
    # raw: every recorded entry is printed, so the two counts agree
    assert rows == [["0", "forward", "3", "3"], ["1", "dL0", "4", "4"], ["2", "dL1", "15", "15"]]
    assert " ".join(table[-1].split()) == ("colours: input forward order 1 order 2 "
                                           "accumulation (underlined, in its order's colour)")
    styled = console.export_text(styles=True)
    assert "\x1b[" in styled            # roles are coloured


def test_print_trace_default_console(capsys: pytest.CaptureFixture) -> None:
    """Without a console, print_trace writes to standard output."""
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    op.sum(x * x, name="L")
    op.print_trace()
    printed = capsys.readouterr().out.splitlines()
    assert printed[:len(op.format_trace().splitlines())] == op.format_trace().splitlines()


def test_trace_takes_pytree_arguments_and_names_leaves_by_path():
    # a dict of parameters and a namedtuple inside a list: one leaf per array, named by its
    # path; the gradient equals the closed form d/dW sum(tanh(x W)^2) = x^T (2 t (1 - t^2))
    from collections import namedtuple
    Pair = namedtuple("Pair", "w b")
    rng = np.random.default_rng(0)
    params = {"W": rng.normal(size=(2, 3)), "layers": [Pair(rng.normal(size=3), 2.0)]}
    x = rng.normal(size=(4, 2))

    def loss(params, x):
        layer = params["layers"][0]
        return ((x @ params["W"]).tanh() ** 2).sum() + (layer.w * layer.b).sum()

    t = sg.trace(sg.grad(loss), params, x)
    leaves = [line.split(" = ")[0] for line in t.format_trace().splitlines()[:4]]
    assert leaves == ["params_W", "params_layers_0_w", "params_layers_0_b", "x"]
    th = np.tanh(x @ params["W"])
    g = t.outputs
    np.testing.assert_allclose(g[0].value, x.T @ (2 * th * (1 - th ** 2)), rtol=1e-12)
    np.testing.assert_allclose(g[1].value, np.full(3, 2.0), rtol=1e-12)      # d/dw w b = b
    np.testing.assert_allclose(g[2].value, params["layers"][0].w.sum(), rtol=1e-12)
    assert "dv" in t.format_trace(raw=False) and "params_W" in t.format_trace(raw=False)


def test_a_negative_base_of_a_power_prints_in_parentheses() -> None:
    """``(-3) ** x`` prints with its parentheses (Python reads ``-3 ** x`` as ``-(3 ** x)``),
    in the trace and in the compiled source's comments, and each printed expression, run as
    Python on the inputs' values, gives the recorded value; a negative exponent stays bare."""
    op = sg.Ops()
    x = op.var(np.array([2.0, 3.0]), name="x")
    ys = [(-3) ** x, (-2.5) ** x, x ** -2, 2.0 ** x]
    lines = op.format_trace().splitlines()[1:]
    assert lines == ["v0 = (-3) ** x", "v1 = (-2.5) ** x", "v2 = x ** -2", "v3 = 2.0 ** x"]
    for line, y in zip(lines, ys):
        # (-3) ** 2 = 9 and (-3) ** 3 = -27, where -(3 ** x) would give -9 and -27
        np.testing.assert_array_equal(eval(line.split(" = ", 1)[1], {"x": x.value}), y.value)
    source = sg.compile(op.program([x], ys)).source
    assert "# v0 = (-3) ** x" in source and "# v2 = x ** -2" in source
