"""Hessians and Jacobians print as matrices of named entries: ``sg.trace`` of ``sg.hessian`` /
``sg.jacobian`` of named scalars, and the command line's ``--hessian``, print ``H[x, y] =
v19`` per entry, the reshapes, slices, transposes and concatenations that assemble the blocks
looked through (a moved array of printed values prints as ``[[v22, v19]]``). Oracle: the
Hessian and Jacobian worked by hand, read off the values of the lines each entry names."""

from __future__ import annotations

import re

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.cli import main
from simplegrad.engine.render import format_value
from simplegrad.engine.variable import value_of

PLUMBING = re.compile(r"\.reshape\(|concatenate\(|\.transpose\(|\[\d+:\d+\]|stack\(")
ENTRY = re.compile(r"^([HJ]\[[^\]]*\]) = (\S+)$")


def _named(op, text: str) -> dict[str, float]:
    """label -> the value of what the label's line names (a printed line or a number)."""
    lines = {v.name: v for v in op.tape.entries if v is not None}
    lines.update({e.var.name: e.var for e in op.tape.events if hasattr(e, "var")})
    out = {}
    for line in text.splitlines():
        m = ENTRY.match(line)
        if m:
            label, name = m.groups()
            out[label] = float(np.squeeze(value_of(lines[name]))) if name in lines \
                else float(name)
    return out


def _defined(text: str) -> set[str]:
    return {line.split(" = ")[0] for line in text.splitlines() if " = " in line}


def test_the_hessian_of_named_scalars_prints_its_entries_by_name():
    x, y = 0.5, 1.5
    op = sg.trace(sg.hessian(lambda x, y: x**2 * y + y**3 + (x * y).sin(), (0, 1)), x, y)
    text = op.format_trace(raw=False)
    assert not PLUMBING.search(text), text
    s = np.sin(x * y)
    want = {"H[x, x]": 2 * y - y * y * s, "H[x, y]": 2 * x + np.cos(x * y) - x * y * s,
            "H[y, x]": 2 * x + np.cos(x * y) - x * y * s, "H[y, y]": 6 * y - x * x * s}
    got = _named(op, text)
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-12), k
    names = {m.group(2) for m in map(ENTRY.match, text.splitlines()) if m}
    assert names <= _defined(text) | {"0.0000"}      # each names a printed line
    assert text.splitlines()[-4:] == [f"{k} = {line.split(' = ')[1]}" for k, line in zip(
        want, text.splitlines()[-4:])]              # the results come last, in order


def test_the_jacobian_of_a_small_vector_function_prints_its_entries():
    x, y = 0.5, 1.5
    op = sg.trace(sg.jacobian(lambda x, y: np.stack([x * y, np.sin(x), y**2]), (0, 1)), x, y)
    text = op.format_trace(raw=False)
    assert not PLUMBING.search(text), text
    want = {"J[0, x]": y, "J[1, x]": np.cos(x), "J[2, x]": 0.0,
            "J[0, y]": x, "J[1, y]": 0.0, "J[2, y]": 2 * y}
    assert _named(op, text) == pytest.approx(want, rel=1e-12)
    assert "J[2, x] = 0.0000" in text.splitlines()      # a structural zero, as a number


def test_the_command_lines_hessian_has_no_plumbing(capsys):
    assert main(["trace", "x**2*y + y**3", "--var", "x=0.5", "--var", "y=1.5",
                 "--wrt", "x,y", "--hessian"]) == 0
    out = capsys.readouterr().out.splitlines()
    derivation = out[:-4]
    assert not PLUMBING.search("\n".join(derivation)), derivation
    x, y = 0.5, 1.5
    want = {"H[x, x]": 2 * y, "H[x, y]": 2 * x, "H[y, x]": 2 * x, "H[y, y]": 6 * y}
    assert out[-4:] == [f"{k} = {format_value(v)}" for k, v in want.items()]
    named = [line for line in derivation if ENTRY.match(line)]
    assert [line.split(" = ")[0] for line in named] == list(want)
    assert len(derivation) <= 33        # (47 lines with the plumbing)


def test_moved_values_print_as_arrays_and_their_picture_matches():
    op = sg.trace(sg.hessian(lambda x, y: x**2 * y + y**3, (0, 1)), 0.5, 1.5)
    text = op.format_trace(raw=False)
    arrays = [line for line in text.splitlines() if re.match(r"^v\d+ = \[\[?v\d+", line)]
    assert arrays, text               # the gradient, and each tangent: [[v20, v18]]
    dot = op.to_dot()
    for line in arrays:
        assert line.replace('"', '\\"') in dot
    # each entry's line is framed with the names of the results it is, and moved arrays take
    # no argument-position labels
    named = {m.group(2): m.group(1) for m in map(ENTRY.match, text.splitlines()) if m}
    for line in text.splitlines():
        name = line.split(" = ")[0]
        if name in named:
            assert f"{line}\\n= " in dot and named[name] in dot
    assert "label=\"0\"" not in dot and "label=\"1\"" not in dot


def test_a_block_that_is_not_moved_values_prints_under_its_whole_name(capsys):
    assert main(["trace", "sum(a ** 3) * b", "--var", "a=1,2", "--var", "b=0.5",
                 "--hessian"]) == 0
    out = capsys.readouterr().out.splitlines()
    labelled = [line.split(" = ")[0] for line in out[:-4] if line.startswith("H[")]
    assert labelled == ["H[a, a]", "H[a, b]", "H[b, a]", "H[b, b]"]


def test_the_raw_tape_prints_no_labels():
    op = sg.trace(sg.hessian(lambda x, y: x * x * y, (0, 1)), 0.5, 1.5)
    assert "H[" not in op.format_trace() and "H[x, y]" in op.format_trace(raw=False)


# ---------------------------------------------------------------- programs and the ones


def _evaluate(text: str, env: dict) -> dict:
    """Every ``name = expression`` line of a printed derivation run as Python, in order, with
    ``env`` holding the inputs (a moved array of values is a nested list: made an array)."""
    env = dict(env)
    for line in text.splitlines():
        name, sep, expr = line.partition(" = ")
        if not sep or name.startswith(("inputs:", "outputs:")):
            continue
        value = eval(expr, {}, env)     # the lines are arithmetic of names and numbers
        env[name] = np.array(value, dtype=float) if isinstance(value, list) else value
    return env


def _hessian_at(x: float, y: float) -> dict:
    """The Hessian of x^2 y + y^3, worked by hand: [[2y, 2x], [2x, 6y]]."""
    return {"H[x, x]": 2 * y, "H[x, y]": 2 * x, "H[y, x]": 2 * x, "H[y, y]": 6 * y}


def _hessian_program():
    op = sg.Ops()
    x, y = op.var(0.5, name="x"), op.var(1.5, name="y")
    H = sg.hessian(lambda x, y: x**2 * y + y**3, (0, 1))(x, y)
    return op.program([x, y], [H[0][0], H[0][1], H[1][0], H[1][1]])


def test_a_hessians_program_prints_its_entries_by_name_and_its_raw_text_is_kept():
    prog = _hessian_program()
    text = prog.format()
    assert not PLUMBING.search(text) and "[1.0000]" not in text, text
    lines = text.splitlines()
    assert lines[-5:-1] == [f"{k} = {line.split(' = ')[1]}" for k, line in zip(
        _hessian_at(0, 0), lines[-5:-1])]           # the entries, in order, then outputs
    assert lines[-1] == "outputs: H[x, x], H[x, y], H[y, x], H[y, y]"
    assert len(lines) <= 9, text                    # (27 lines before: the plumbing)
    rng = np.random.default_rng(3)
    for x, y in rng.uniform(-2, 2, (5, 2)):         # the printed lines are the Hessian
        env = _evaluate(text, {"x": x, "y": y})
        for k, want in _hessian_at(x, y).items():
            assert float(env[k]) == pytest.approx(want, rel=1e-14), k
        assert [float(v) for v in prog(x, y)] == pytest.approx(list(_hessian_at(x, y).values()),
                                                               rel=1e-14)
    raw = prog.format(raw=True)                     # raw: every entry as recorded, no labels
    assert PLUMBING.search(raw) and "H[" not in raw
    assert [line.split(" = ")[0] for line in raw.splitlines()[4:-1]] == \
        [e.label for e in prog.entries]


def test_a_jitted_hessians_program_prints_its_entries_by_name():
    f = sg.jit(sg.hessian(lambda x, y: x**2 * y + y**3, (0, 1)))
    assert np.allclose(np.array(f(0.5, 1.5), dtype=float), [[3.0, 1.0], [1.0, 9.0]])
    prog = f.programs(0.5, 1.5)[0].program
    text = prog.format()
    assert not PLUMBING.search(text), text
    env = _evaluate(text, {"x0": 0.25, "x1": -1.5})
    got = {k: float(env[k]) for k in ("H[x0, x0]", "H[x0, x1]", "H[x1, x0]", "H[x1, x1]")}
    assert list(got.values()) == pytest.approx(list(_hessian_at(0.25, -1.5).values()),
                                               rel=1e-14)


def test_a_hessians_program_has_its_closed_form():
    sp = pytest.importorskip("sympy")
    prog = _hessian_program()
    x, y = sp.symbols("x y", real=True)
    assert [sp.simplify(a - b) for a, b in zip(
        prog.to_sympy(), [2 * y, 2 * x, 2 * x, 6 * y])] == [0, 0, 0, 0]
    assert sg.check_closed_form(prog, ["2*y", "2*x", "2*x", "6*y"])
    assert not sg.check_closed_form(prog, ["2*y", "2*x", "2*x", "3*y"])


def test_a_multiplication_by_ones_that_only_adds_unit_axes_is_folded():
    op = sg.trace(sg.hessian(lambda x, y: x**2 * y + y**3, (0, 1)), 0.5, 1.5)
    text = op.format_trace(raw=False)
    assert "[1.0000] *" not in text and "[2.0000] *" not in text, text
    env = _evaluate(text, {})
    for k, want in _hessian_at(0.5, 1.5).items():
        assert float(env[k]) == pytest.approx(want, rel=1e-14), k
    # the two tangent blocks end with the two rows of the Hessian, each named once
    ends = [line for line in text.splitlines() if line.startswith("tv")]
    assert len(ends) == 2 and len(set(ends)) == 2
    rows = [env[line.split(" = ")[1]].ravel() for line in ends]
    assert np.allclose(rows, [[3.0, 1.0], [1.0, 9.0]])


def test_ones_that_spread_a_value_to_a_new_shape_stay():
    x = np.array([0.5, 1.0, 2.0])
    op = sg.trace(sg.hessian(lambda x, y: (x**2).sum() * y + y**3, (0, 1)), x, 1.5)
    text = op.format_trace(raw=False)
    # ones of shape (1, 3) times a (3,) gradient: a new shape, so the line says it
    assert re.search(r"= \[\[1\.0000, 1\.0000, 1\.0000\]\] \* v\d+$", text, re.M), text
    assert "[1.0000] *" not in text


def _vector_hessian_program():
    op = sg.Ops()
    x, y = op.var(np.array([0.5, 1.0, 2.0]), name="x"), op.var(1.5, name="y")
    H = sg.hessian(lambda x, y: (x**2).sum() * y + y**3, (0, 1))(x, y)
    return op.program([x, y], [H[0][0], H[0][1], H[1][0], H[1][1]])


def test_a_vectors_blocks_print_under_their_names_each_one_printed_line():
    # H[x, x] of x with 3 entries is one line naming a printed 3x3 value (its entries are
    # computed together by the batched jvp, not each a printed value: see docs/derivations.md)
    prog = _vector_hessian_program()
    text = prog.format()
    assert not re.search(r"\.reshape\(|concatenate\(|\[\d+:\d+\]", text), text
    lines = text.splitlines()
    assert [t.split(" = ")[0] for t in lines[-5:-1]] == \
        ["H[x, x]", "H[x, y]", "H[y, x]", "H[y, y]"]
    assert all(t.split(" = ")[1] in _defined(text) for t in lines[-5:-1])
    runnable = re.sub(r"(\w+)\.expand\(\[([\d, ]*)\]\)", r"np.broadcast_to(\1, (\2,))", text)
    rng = np.random.default_rng(7)
    for _ in range(3):                  # f = sum(x^2) y + y^3: by hand
        x, y = rng.uniform(-2, 2, 3), float(rng.uniform(-2, 2))
        env = _evaluate(runnable, {"x": x, "y": y, "np": np})
        assert np.allclose(env["H[x, x]"], 2 * y * np.eye(3), rtol=1e-14, atol=0)
        assert np.allclose(np.ravel(env["H[x, y]"]), 2 * x, rtol=1e-14, atol=0)
        assert np.allclose(np.ravel(env["H[y, x]"]), 2 * x, rtol=1e-14, atol=0)
        assert float(env["H[y, y]"]) == pytest.approx(6 * y, rel=1e-14)
    # the same blocks in the pruned trace, each naming a line it prints
    op = sg.trace(sg.hessian(lambda x, y: (x**2).sum() * y + y**3, (0, 1)),
                  np.array([0.5, 1.0, 2.0]), 1.5)
    trace = op.format_trace(raw=False).splitlines()
    named = dict(t.split(" = ") for t in trace[-4:])
    assert list(named) == ["H[x, x]", "H[x, y]", "H[y, x]", "H[y, y]"]
    assert set(named.values()) <= _defined("\n".join(trace[:-4]))
    assert not any(re.search(r"\[\d+:\d+\]", t) for t in trace)


def test_a_vector_hessians_program_has_its_closed_form():
    sp = pytest.importorskip("sympy")
    prog = _vector_hessian_program()
    x0, x1, x2, y = sp.symbols("x_0 x_1 x_2 y", real=True)
    f = (x0**2 + x1**2 + x2**2) * y + y**3
    H = sp.hessian(f, (x0, x1, x2, y))
    got = prog.to_sympy()
    assert sp.simplify(got[0] - H[:3, :3]) == sp.zeros(3, 3)
    assert [sp.simplify(a - b) for a, b in zip(list(got[1]), list(H[:3, 3]))] == [0, 0, 0]
    assert sp.simplify(got[3] - H[3, 3]) == 0


def test_a_jacobians_program_prints_its_entries_by_name():
    op = sg.Ops()
    x, y = op.var(0.5, name="x"), op.var(1.5, name="y")
    J = sg.jacobian(lambda x, y: np.stack([x * y, np.sin(x), y**2]), (0, 1))(x, y)
    prog = op.program([x, y], list(J))
    text = prog.format()
    assert not PLUMBING.search(text), text
    assert text.splitlines()[-1] == "outputs: J[:, x], J[:, y]"
    assert "J[2, x] = 0.0000" in text.splitlines()      # a structural zero, as the trace has it
    for a, b in [(0.5, 1.5), (-1.25, 0.75)]:            # d(xy, sin x, y^2)/d(x, y) by hand
        env = _evaluate(re.sub(r"(\w+)\.cos\(\)", r"np.cos(\1)", text),
                        {"x": a, "y": b, "np": np})
        want = {"J[0, x]": b, "J[1, x]": np.cos(a), "J[2, x]": 0.0,
                "J[0, y]": a, "J[1, y]": 0.0, "J[2, y]": 2 * b}
        assert {k: float(env[k]) for k in want} == pytest.approx(want, rel=1e-14)
