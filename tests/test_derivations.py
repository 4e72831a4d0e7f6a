"""Derivations a person can read: traces pruned to what was asked, named gradients as alias
lines, the command line's --derivative and --hessian, colours and legends.

Oracles: hand-counted backward entries (the seed with --wrt a, a two-layer MLP), every pruned
line recomputed from its printed operands by the primitive's numpy forward (so merging, folding
and rewriting never change a value), closed-form derivatives written out by hand, and the raw
trace, which stays the seed's.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from rich.console import Console

import simplegrad as sg
from simplegrad.cli import main, seed_program
from simplegrad.engine.derivation import Derivation, Line
from simplegrad.engine.render import ORDER_STYLES, STYLES, format_value
from simplegrad.engine.variable import Entry
from tests.test_trace import SEED_OUTPUT, comparable

SEED_VARS = ["--var", "a=0.4605,0.4061,0.9422,0.3946", "--var", "b=0.0850,0.3296,0.9888,0.6494"]
BACKWARD = re.compile(r"^(v\d+) = ")


def _run(args: list[str], capsys: pytest.CaptureFixture) -> list[str]:
    assert main(args) == 0
    return capsys.readouterr().out.splitlines()


def _block(lines: list[str], header: str) -> list[str]:
    """The entry lines of the block headed ``header`` (not its gradient map lines)."""
    start = lines.index(f"{header} --------------")
    stop = lines.index("------------------", start)
    return [s for s in lines[start + 1:stop] if BACKWARD.match(s)]


def _recompute(view: Derivation) -> None:
    """Every kept line, run by its primitive's forward on its printed operands' values, gives
    the value the tape recorded for it."""
    def value(x):
        if type(x) is Line:
            return x.entry.value
        return x.value if type(x) is Entry else x

    for line in view.lines.values():
        if line.prim is None:
            continue
        args = [value(x) for x in line.args]
        got = line.prim.forward(*args, **(line.attrs or {}))
        np.testing.assert_allclose(got, line.entry.value, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- pruned traces

def test_the_seed_with_wrt_a_needs_no_backward_entry(capsys):
    # d/da sum((a + b) * b) = b: the raw trace records 4 backward entries (and 5 map lines);
    # the derivation needs none, and maps only a
    lines = _run(["trace", "sum((a + b) * b)", *SEED_VARS, "--wrt", "a"], capsys)
    assert lines == SEED_OUTPUT.splitlines()[:5] + [
        "dL0 --------------", "dL0_da = b", "------------------", "da = b",
        "da = [0.0850, 0.3296, 0.9888, 0.6494]"]
    raw = _run(["trace", "sum((a + b) * b)", *SEED_VARS, "--wrt", "a", "--raw"], capsys)
    assert len(_block(raw, "dL0")) == 4 and "dL0_db = v6" in raw


def test_the_seed_order_2_pruned_by_hand(capsys):
    # order 2 of the seed: da = b, db = a + 2b; L1 = sum(b^2 + (a + 2b)^2) (hand-derived):
    # dL1/da = 2(a + 2b), dL1/db = 2b + 4(a + 2b); 4 backward entries instead of 15
    lines = _run(["trace", "sum((a + b) * b)", *SEED_VARS, "--order", "2"], capsys)
    assert _block(lines, "dL0") == ["v6 = v0 + b"]
    assert _block(lines, "dL1") == ["v14 = v6 * 2.0", "v17 = b * 2.0", "v18 = v17 + v14",
                                    "v25 = v18 + v14"]
    a = np.array([0.4605, 0.4061, 0.9422, 0.3946])
    b = np.array([0.0850, 0.3296, 0.9888, 0.6494])
    assert lines[-2:] == [f"da = {format_value(2 * (a + 2 * b))}",
                          f"db = {format_value(2 * b + 4 * (a + 2 * b))}"]
    op, _, _ = seed_program(echo=False)
    _recompute(Derivation(op.tape))


def _mlp(n: int = 4):
    rng = np.random.default_rng(0)
    op = sg.Ops()
    X = op.var(rng.normal(size=(n, 3)), name="X")
    W1, b1 = op.var(rng.normal(size=(3, 5)), name="W1"), op.var(np.zeros(5), name="b1")
    W2 = op.var(rng.normal(size=(5, 1)), name="W2")
    h = (X @ W1 + b1).tanh()
    L = op.sum((h @ W2) ** 2, name="L")
    return op, L, (X, W1, b1, W2), h


@pytest.mark.parametrize("n", [4, 50])
def test_an_mlp_gradient_keeps_the_entries_its_wrt_need(n):
    # by hand: 2 y (y = h W2), W2.T, (2y) W2.T, h.T, h.T (2y), h*h, 1 - h*h, the product,
    # its sum over rows, X.T, X.T (...): 11 entries; the raw sweep adds the seed's expand,
    # ones * 2y, and W1.T with the data's gradient (W1.T, (...) W1.T): 15
    op, L, (X, W1, b1, W2), _ = _mlp(n)
    gs = op.grad(L, [W1, b1, W2], name=["dW1", "db1", "dW2"])
    lines = op.format_trace(raw=False).splitlines()
    assert len(_block(lines, "dL")) == 11
    assert len(_block(op.format_trace().splitlines(), "dL")) == 15
    assert not any("W1.T" in s or "dL_dX" in s for s in lines)      # nothing for the data
    assert lines[-3:] == [f"dW1 = {gs[0].inputs[0].name}", f"db1 = {gs[1].inputs[0].name}",
                          f"dW2 = {gs[2].inputs[0].name}"]
    _recompute(Derivation(op.tape))
    # the gradients are right: against central differences of the loss in W2
    eps, W2v = 1e-6, W2.value

    def loss(w2):
        h = np.tanh(X.value @ W1.value + b1.value)
        return np.sum((h @ w2) ** 2)

    fd = np.zeros_like(W2v)
    for i in range(W2v.shape[0]):
        e = np.zeros_like(W2v)
        e[i] = eps
        fd[i] = (loss(W2v + e) - loss(W2v - e)) / (2 * eps)
    np.testing.assert_allclose(gs[2].value, fd, rtol=1e-6, atol=1e-8)


def test_a_named_gradient_is_an_alias_never_a_rename():
    # dW's lines must not read db: the sweep's shared cotangent keeps its v-number
    op = sg.Ops()
    W = op.var([[1.0, 2.0], [3.0, 4.0]], name="W")
    x, b = op.var([0.5, 0.1], name="x"), op.var([0.1, 0.2], name="b")
    L = op.sum((W @ x + b).tanh(), name="L0")
    dW, db = op.grad(L, [W, b], name=["dW", "db"])
    shared = db.inputs[0]                       # the cotangent of W @ x + b
    assert dW.name == "dW" and db.name == "db" and re.fullmatch(r"v\d+", shared.name)
    raw = op.format_trace().splitlines()
    assert raw[-2:] == [f"dW = {dW.inputs[0].name}", f"db = {shared.name}"]
    assert not any(" db" in s or "(db" in s for s in raw[:-2])
    assert W.grad is dW and b.grad is db
    np.testing.assert_array_equal(db.value, shared.value)
    # and the next order differentiates the alias like the value it names
    d2 = op.grad(op.sum(dW, name="S"), W)
    assert d2.shape == (2, 2)


def test_duplicates_merge_and_dead_entries_go():
    # the product rule of x * x records two equal entries; only one prints
    op = sg.Ops()
    x = op.var([1.0, 2.0], name="x")
    op.grad(op.sum(x * x, name="L"), x)
    raw, pruned = op.format_trace().splitlines(), op.format_trace(raw=False).splitlines()
    assert _block(raw, "dL") == ["v2 = v1.expand([2])", "v3 = v2 * x", "v4 = v2 * x",
                                 "v5 = v3 + v4"]
    assert _block(pruned, "dL") == ["v5 = x * 2.0"]     # (1 * x) + (1 * x), merged and folded
    _recompute(Derivation(op.tape))


def test_constant_chains_fold(capsys):
    # the seed's --order 4 of sum(a * a): each order is a * 2**k; one line per order
    lines = _run(["trace", "sum(a * a)", "--var", "a=1.5", "--order", "4"], capsys)
    assert [_block(lines, h) for h in ("dL0", "dL1", "dL2", "dL3")] == [
        ["v4 = a * 2.0"], ["v15 = a * 8.0"], ["v39 = a * 128.0"], ["v90 = a * 32768.0"]]
    simple = _run(["trace", "sum(a * a)", "--var", "a=1.5", "--order", "4", "--simplify"],
                  capsys)
    assert simple == ["inputs: a", "v90 = a * 32768.0", "da = v90", "outputs: da",
                      f"da = {format_value(32768 * 1.5)}"]


def test_sg_trace_prunes_to_what_the_function_returns():
    def f(x, y):
        (x * y).exp()                           # computed and dropped: dead
        return sg.grad(lambda u: (u.sin() * y).sum())(x)

    t = sg.trace(f, np.array([0.5, 1.0]), np.array([2.0, 3.0]))
    assert len(t.outputs) == 1
    text = t.format_trace(raw=False)
    assert "exp" in t.format_trace() and "exp" not in text
    assert text.splitlines()[-2].startswith("dv") and "cos" in text
    _recompute(Derivation(t.tape, t.outputs))


@pytest.mark.parametrize("steps", [1, 2, 3])
def test_pruned_lines_keep_their_values_on_transform_tapes(steps):
    def f(x):
        return sg.hvp(lambda y: (y.sin() * y.tanh()).sum(), x, x)

    g = f
    for _ in range(steps - 1):
        g = (lambda h: lambda x: sg.grad(lambda z: h(z).sum())(x))(g)
    t = sg.trace(g, np.array([0.3, -0.7, 1.1]))
    view = Derivation(t.tape, t.outputs)
    _recompute(view)
    assert len(view.lines) < len(t.tape)


def test_print_trace_prunes_and_raw_is_the_seed():
    op, _, _ = seed_program(echo=False)
    console = Console(file=io.StringIO(), record=True, width=200)
    op.print_trace(console)
    text = console.export_text()
    assert "v13 = " not in text and "v25 = v18 + v14" in text
    assert text.splitlines()[-1].split()[0] == "colours:"
    assert comparable(op.format_trace().splitlines()) == comparable(SEED_OUTPUT.splitlines()[:-2])


# ---------------------------------------------------------------- colours and legends

def test_each_order_has_its_own_colour_and_none_is_the_inputs():
    assert len(set(ORDER_STYLES)) == len(ORDER_STYLES)
    assert STYLES["leaf"] not in ORDER_STYLES
    from simplegrad.engine.render import LEAF_FILL, ORDER_FILLS
    assert len(set(ORDER_FILLS)) == len(ORDER_FILLS) and LEAF_FILL not in ORDER_FILLS


def test_dot_labels_outputs_by_name_and_has_a_legend(capsys):
    op = sg.Ops()
    a = op.var([1.0, 2.0], name="a")
    g = op.grad(op.sum(a * a * a, name="L"), a, name="da")
    h = op.grad(op.sum(g, name="S"), a, name="d2a")
    dot = sg.simplify(op.program(a, [g, h])).to_dot()
    assert 'xlabel="output da"' in dot and 'xlabel="output d2a"' in dot
    assert "legend:" in dot and ">order 2</td>" in dot and ">input</td>" in dot


# ---------------------------------------------------------------- --derivative, --hessian

def _derivatives(kind: str, x: float, n: int) -> float:
    """The n-th derivative at x, written out by hand (Leibniz / the tanh polynomials)."""
    if kind == "poly":          # p = x^5 - 2x^3 + x
        coeffs = np.polynomial.polynomial.Polynomial([0, 1, 0, -2, 0, 1])
        return float(coeffs.deriv(n)(x))
    if kind == "sinexp":        # (sin x e^x)^(n) = 2^(n/2) e^x sin(x + n pi/4)
        return 2 ** (n / 2) * np.exp(x) * np.sin(x + n * np.pi / 4)
    t = np.tanh(x)              # d/dx P(t) = P'(t) (1 - t^2), from P_0 = t
    p = np.polynomial.polynomial.Polynomial([0, 1])
    for _ in range(n):
        p = p.deriv() * np.polynomial.polynomial.Polynomial([1, 0, -1])
    return float(p(t))


@pytest.mark.parametrize("kind,expr", [("tanh", "tanh(x)"), ("sinexp", "sin(x) * exp(x)"),
                                       ("poly", "x ** 5 - 2 * x ** 3 + x")])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_derivative_n_is_the_nth_derivative(kind, expr, n, capsys):
    lines = _run(["trace", expr, "--var", "x=0.7", "--derivative", str(n)], capsys)
    label = "dx" if n == 1 else f"d{n}x"
    assert lines[-1] == f"{label} = {format_value(_derivatives(kind, 0.7, n))}"
    assert any(re.fullmatch(rf"{label} = v\d+", s) for s in lines)     # the alias line


def test_derivative_of_a_vector_is_elementwise_and_several_wrt_follow_the_rule(capsys):
    lines = _run(["trace", "sin(a)", "--var", "a=0.1,0.5,0.9", "--derivative", "3"], capsys)
    assert lines[-1] == f"d3a = {format_value(-np.cos([0.1, 0.5, 0.9]))}"
    # two variables: L1 = sum(dL0/da) + sum(dL0/db) for L0 = a^2 b^2 (scalars), so
    # d/da L1 = 4ab^2... written out: dL0/da = 2ab^2, dL0/db = 2a^2b, L1 = 2ab^2 + 2a^2b
    lines = _run(["trace", "a * a * b * b", "--var", "a=1.5", "--var", "b=0.5",
                  "--derivative", "2"], capsys)
    a, b = 1.5, 0.5
    assert lines[-2:] == [f"d2a = {format_value(2 * b * b + 4 * a * b)}",
                          f"d2b = {format_value(4 * a * b + 2 * a * a)}"]


def test_hessian_prints_its_program_and_matrix(capsys):
    lines = _run(["trace", "sum(a ** 3) * b", "--var", "a=1,2", "--var", "b=0.5",
                  "--wrt", "a", "--hessian"], capsys)
    assert lines[-1] == f"H = {format_value(np.diag([6 * 1.0 * 0.5, 6 * 2.0 * 0.5]))}"
    assert any(s.startswith("H = v") for s in lines)
    lines = _run(["trace", "sum(a ** 3) * b", "--var", "a=1,2", "--var", "b=0.5",
                  "--hessian"], capsys)
    assert lines[-4:] == [f"H[a, a] = {format_value(np.diag([3.0, 6.0]))}",
                          f"H[a, b] = {format_value(np.array([3.0, 12.0]))}",
                          f"H[b, a] = {format_value(np.array([3.0, 12.0]))}", "H[b, b] = 0.0000"]


def test_derivative_order_and_hessian_exclude_each_other(capsys):
    assert main(["trace", "a", "--var", "a=1", "--order", "2", "--derivative", "2"]) == 2
    assert main(["trace", "a", "--var", "a=1", "--derivative", "0"]) == 2
    assert "--derivative must be at least 1" in capsys.readouterr().err


def test_a_large_constant_whose_entries_differ_is_not_printed_as_full():
    """Only a folded constant whose entries are all equal prints as full(shape, value)."""
    W = np.arange(20.0).reshape(4, 5)
    text = sg.trace(lambda x: (x @ W).sum() + (x * np.ones((2, 4))).sum(),
                    np.ones((2, 4))).format_trace(raw=False)
    assert "full([4, 5]" not in text and "<float64 4x5>" in text
