"""Programs holding loops: saved and loaded with their sub-programs nested (and a malformed
body refused like any other attribute), compiled to a Python loop (numpy and numba backends),
simplified inside their bodies, and a while loop's recorded gradient with ``checkpoints=k``
keeping k carries when it runs.

Oracles: closed forms (d sqrt(a) / da = 1 / (2 sqrt(a))), the program's own replay (a loaded or
compiled program must answer as the recorded one, to the last bit where it runs the same
arithmetic), and the gradients of ``checkpoints="all"``.
"""

from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import simplegrad as sg

XS = np.linspace(-1.0, 1.0, 12).reshape(6, 2)


def rnn_program() -> sg.Program:
    """A scan of a tanh cell over XS and its gradient in the weights and the initial state."""
    op = sg.Ops()
    w = op.var(np.array([0.3, -0.2]), name="w")
    h0 = op.var(np.array([0.1, 0.4]), name="h")

    def cell(h, x):
        h = op.tanh(h * w + x)
        return h, op.sum(h * h)
    h, ys = sg.scan(cell, h0, XS)
    loss = op.sum(h) + op.sum(ys)
    dw, dh = op.grad(loss, [w, h0])
    return op.program([w, h0], [loss, dw, dh])


def newton_program() -> sg.Program:
    """sqrt(a) by Newton's iteration until converged, and its derivative in a."""
    op = sg.Ops()
    a = op.var(2.0, name="a")
    x = sg.while_loop(lambda c: op.abs(c * c - a) > 1e-13 * a, lambda c: 0.5 * (c + a / c),
                      a * 1.0)
    da, = op.grad(x, [a])
    return op.program([a], [x, da])


def cond_program() -> sg.Program:
    op = sg.Ops()
    x = op.var(np.array([0.5, -1.5]), name="x")
    y = sg.cond(op.sum(x) > 0, lambda v: op.sin(v) * 2.0, lambda v: v * v, x)
    dx, = op.grad(op.sum(y), [x])
    return op.program([x], [y, dx])


PROGRAMS = {"scan": rnn_program, "while_loop": newton_program, "cond": cond_program}
INPUTS = {"scan": [(np.array([0.5, 0.1]), np.array([0.2, -0.3]))],
          "while_loop": [(np.array(9.0),), (np.array(1e6),), (np.array(0.01),)],
          "cond": [(np.array([0.3, 0.9]),), (np.array([-0.3, -0.9]),)]}


def same(a: list, b: list) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b))

# ---------------------------------------------------------------- save and load


@pytest.mark.parametrize("kind", PROGRAMS)
def test_a_program_with_a_loop_saves_loads_and_replays(tmp_path: Path, kind: str) -> None:
    prog = PROGRAMS[kind]()
    json_path, _ = prog.save(tmp_path / "p")
    doc = json.loads(json_path.read_text())
    nested = [n for n in doc["nodes"] if n["primitive"] == kind]
    assert nested and all("body" in str(n["attrs"]) for n in nested)
    loaded = sg.load_program(json_path)
    assert loaded.format() == prog.format()
    for args in INPUTS[kind]:
        assert same(loaded(*args), prog(*args))
    again, _ = loaded.save(tmp_path / "again")
    assert again.read_text() == json_path.read_text()


def test_a_loaded_newton_solve_takes_the_trips_each_input_needs(tmp_path: Path) -> None:
    json_path, _ = newton_program().save(tmp_path / "newton")
    loaded = sg.load_program(json_path)
    for a in (9.0, 1e6, 0.01):
        x, da = loaded(np.array(a))
        assert np.isclose(x, np.sqrt(a), rtol=1e-14)
        assert np.isclose(da, 0.5 / np.sqrt(a), rtol=1e-12)


def _scan_attrs(doc: dict) -> dict:
    return next(n for n in doc["nodes"] if n["primitive"] == "scan")["attrs"]


def _body_of(doc: dict) -> dict:
    return _scan_attrs(doc)["body"]["body"]


@pytest.mark.parametrize(("change", "message"), [
    (lambda doc: _body_of(doc).update(extra=1), r"sub-program: expected the keys"),
    (lambda doc: _body_of(doc).update(name=7), r"name must be a string"),
    (lambda doc: _body_of(doc).update(ins=[[[3], "float64"]]), r"example must hold one array "
                                                               r"per input"),
    (lambda doc: _body_of(doc)["ins"][0].__setitem__(0, [5]), r"example 0 must be an array of "
                                                              r"shape \(5,\)"),
    (lambda doc: _body_of(doc)["outs"][0].__setitem__(1, "float32"),
     r"its program takes .* not the declared"),
    (lambda doc: _body_of(doc)["ins"][0].__setitem__(1, "float128"), r"dtype 'float128' is "
                                                                      r"not one of"),
    (lambda doc: _body_of(doc)["program"]["nodes"][0].update(primitive="nope"),
     r"unknown primitive 'nope'"),
    (lambda doc: _body_of(doc)["program"].update(version=99), r"version 99"),
    (lambda doc: _body_of(doc)["program"]["nodes"][0].update(shape=[7]), r"declares shape"),
    (lambda doc: next(n for n in doc["nodes"] if n["primitive"] == "scan")["attrs"].update(
        body={"tuple": [_scan_attrs(doc)["body"]]}), r"attribute 'body': must be a sub-program"),
    (lambda doc: next(n for n in doc["nodes"] if n["primitive"] == "scan")["attrs"].update(
        nk=0), r"scan cannot run on inputs"),
    (lambda doc: next(n for n in doc["nodes"] if n["primitive"] == "scan")["attrs"].update(
        width=1), r"passes the width"),
])
def test_malformed_bodies_are_refused_naming_the_entry(tmp_path: Path, change,
                                                        message: str) -> None:
    json_path, _ = rnn_program().save(tmp_path / "p")
    doc = json.loads(json_path.read_text())
    change(doc)
    json_path.write_text(json.dumps(doc))
    with pytest.raises(sg.FormatError, match=message) as info:
        sg.load_program(json_path)
    assert "p.json: node " in str(info.value)     # (the outer entry, for an inner problem)


def test_sub_programs_nest_no_deeper_than_the_limit(tmp_path: Path) -> None:
    json_path, _ = rnn_program().save(tmp_path / "p")
    doc = json.loads(json_path.read_text())
    body = _body_of(doc)
    for _ in range(40):
        body = {"name": "b", "ins": [], "outs": [], "example": [],
                "program": {"format": "simplegrad-program", "version": 1, "constants": [],
                            "inputs": [{"name": "x", "shape": [1], "dtype": "float64"}],
                            "outputs": [], "single": False,
                            "nodes": [{"name": "v0", "primitive": "scan",
                                       "args": [["input", 0]],
                                       "attrs": {"body": {"body": body}}, "shape": [1],
                                       "dtype": "float64", "order": 0}]}}
    next(n for n in doc["nodes"] if n["primitive"] == "scan")["attrs"]["body"] = {"body": body}
    json_path.write_text(json.dumps(doc))
    with pytest.raises(sg.FormatError, match="deeper than"):
        sg.load_program(json_path)

# ---------------------------------------------------------------- compile


@pytest.mark.parametrize("kind", PROGRAMS)
def test_compile_writes_a_loop_as_a_python_loop(kind: str) -> None:
    prog = PROGRAMS[kind]()
    fn = sg.compile(prog)
    statement = {"scan": "    for ", "while_loop": "    while ", "cond": "[min(max(int("}[kind]
    assert fn._numpy.__globals__["__builtins__"] == {"slice": slice}
    assert statement in fn.source and f"F['{kind}']" not in fn.source
    if kind == "cond":      # each branch's compiled source, in the header
        assert "# body_" in fn.source
    else:                   # the body written out in the loop: no call per trip
        assert "# body_" not in fn.source and "_out = " not in fn.source
    for args in INPUTS[kind]:
        got, want = fn(*args), prog(*args)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)     # (the same numpy calls: bit-equal)


def test_the_numba_backend_compiles_the_bodies_and_keeps_the_loop_in_python() -> None:
    pytest.importorskip("numba")
    prog = rnn_program()
    fn = sg.compile(prog, backend="numba")
    assert "    for " in fn.source      # (the loop: Python, calling the bodies' kernels)
    args = INPUTS["scan"][0]
    for a, b in zip(fn(*args), prog(*args)):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)

# ---------------------------------------------------------------- simplify


def test_simplify_works_inside_a_body() -> None:
    op = sg.Ops()
    x = op.var(np.array([0.5, 0.2]), name="x")
    y, _ = sg.scan(lambda c, t: (op.neg(op.neg((c * 1.0 + 0.0) * 2.0)), None), x,
                   np.arange(3.0))
    prog = op.program([x], [y])
    assert prog.stats().work == 1 + 3 * 5
    simple = sg.simplify(prog)
    assert "v4 = v0 * 2.0" in simple.format() and "+ 0.0" not in simple.format()
    assert simple.stats().work == 1 + 3 * 1
    assert same(simple(np.array([1.0, 2.0])), [np.array([8.0, 16.0])])

# ---------------------------------------------------------------- recorded checkpoints


def relaxation(op: sg.Ops, w: sg.Variable, n: int, size: int, checkpoints) -> sg.Variable:
    """n steps of x <- x + (w sin x - x) / 1000 on a carry of ``size`` entries: sum x^2."""
    a = np.linspace(0.5, 1.5, size)
    x, _ = sg.while_loop(lambda c: c[1] < n,
                         lambda c: (c[0] + 1e-3 * (op.sin(c[0]) * w - c[0]), c[1] + 1),
                         (a, 0), checkpoints=checkpoints)
    return (x * x).sum()


def recorded_gradient(n: int, size: int, checkpoints) -> tuple:
    op = sg.Ops()
    w = op.var(0.3, name="w")
    g, = op.grad(relaxation(op, w, n, size, checkpoints), [w], create_graph=True)
    return op, w, g


@pytest.mark.parametrize("k", [1, 2, 5, 40])
def test_a_recorded_gradient_with_k_checkpoints_equals_all_checkpoints(k: int) -> None:
    op, w, g = recorded_gradient(60, 3, k)
    prog = op.program([w], [g])
    assert [e.prim.name for e in prog.entries].count("while_vjp") == 1
    _, w_all, g_all = recorded_gradient(60, 3, "all")
    assert g.value == g_all.value
    h, = op.grad(g, [w])
    h_all, = g_all.ops.grad(g_all, [w_all])
    assert np.isclose(h.value, h_all.value, rtol=1e-13)
    prog_all = g_all.ops.program([w_all], [g_all])
    assert same(prog(np.array(0.7)), prog_all(np.array(0.7)))


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_a_recorded_gradient_with_k_checkpoints_keeps_k_carries() -> None:
    size, k, n = 4000, 30, 1500
    recorded_gradient(3, size, k)        # (the bodies' derivatives traced once)
    op = sg.Ops()
    w = op.var(0.3, name="w")
    loss = relaxation(op, w, n, size, k)
    got = []
    assert _peak(lambda: got.append(op.grad(loss, [w], create_graph=True)[0])) <= \
        1.5 * (k + 2) * size * 8        # all carries: 1500 of them
    prog = op.program([w], got)
    assert _peak(lambda: prog(np.array(0.4))) <= 1.5 * (k + 2) * size * 8


@pytest.mark.slow
def test_a_recorded_10000_step_gradient_with_k_checkpoints_keeps_k_carries() -> None:
    size, k, n = 4000, 14, 10_000
    recorded_gradient(3, size, k)
    op = sg.Ops()
    w = op.var(0.3, name="w")
    loss = relaxation(op, w, n, size, k)
    got = []
    assert _peak(lambda: got.append(op.grad(loss, [w], create_graph=True)[0])) <= \
        1.5 * (k + 2) * size * 8
    assert np.isfinite(got[0].value)
    assert recorded_gradient(n, 3, k)[2].value == recorded_gradient(n, 3, "all")[2].value


@pytest.mark.parametrize("width", [3, 1])
def test_a_compiled_scan_computes_each_steps_row_in_place(width: int) -> None:
    """A ufunc's value a trip keeps (a ys row, the history its gradient reads) is computed into
    its row, the carry reading it there: the values are the loop's, bit for bit; a 0-d step
    value (width 1 reshaped to a number) and a row the trip does not compute are copied."""
    rng = np.random.default_rng(3)
    W = rng.normal(size=(3, 3)) / 2
    xs = rng.normal(size=(9, 3))
    c = np.linspace(0.1, 0.3, 3)

    def f(w):
        def cell(h, x):
            h = np.tanh(W @ h * w + x) if width == 3 else (h * w + x[0]).reshape(()).tanh()
            return h, (h * 2.0, c * 1.0)        # a new array each trip, one made once
        h, (ys, same) = sg.scan(cell, np.zeros(3) if width == 3 else np.asarray(0.0), xs)
        return (h * h).sum() + ys.sum() + same.sum()

    grad = sg.jit(sg.grad(f))
    for w in (0.7, -1.3):
        got = grad(np.asarray(w))
        assert got.tobytes() == np.asarray(sg.grad(f)(np.asarray(w))).tobytes()
        eps = 1e-6      # central differences, step 1e-6: error O(eps^2) plus round-off
        fd = (f(np.asarray(w + eps)) - f(np.asarray(w - eps))) / (2 * eps)
        assert float(got) == pytest.approx(float(fd), rel=1e-7, abs=1e-9)
    source = grad.programs(np.asarray(0.7))[0].source
    in_place = re.search(r"= np\.\w+\(.*, out=\w+_(ys|kept)\w*\[\w+\]\)", source)
    assert (in_place is not None) == (width == 3), source
