"""Closed forms (the [sympy] extra): ``prog.to_sympy()``, ``prog.to_latex()`` and
``sg.check_closed_form``; skipped without SymPy.

Oracle: SymPy's own ``diff`` of each elementwise primitive's forward, written below with SymPy's
functions (not with the converter's table), equal to ``to_sympy`` of the recorded gradient.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import simplegrad as sg

sp = pytest.importorskip("sympy")

X, Y = sp.symbols("x y", real=True)

# the forward of each elementwise primitive, as SymPy writes it
FORWARD = {
    "abs": sp.Abs(X), "add": X + Y, "arccos": sp.acos(X), "arcsin": sp.asin(X),
    "arcsinh": sp.asinh(X), "arctan": sp.atan(X), "arctan2": sp.atan2(X, Y),
    "arctanh": sp.atanh(X), "cos": sp.cos(X), "cosh": sp.cosh(X), "div": X / Y,
    "exp": sp.exp(X), "exp2": 2 ** X, "expm1": sp.exp(X) - 1, "hypot": sp.sqrt(X**2 + Y**2),
    "log": sp.log(X), "log10": sp.log(X, 10), "log1p": sp.log(1 + X), "log2": sp.log(X, 2),
    "logaddexp": sp.log(sp.exp(X) + sp.exp(Y)), "maximum": sp.Max(X, Y),
    "minimum": sp.Min(X, Y), "fmax": sp.Max(X, Y), "fmin": sp.Min(X, Y), "mul": X * Y,
    "neg": -X, "pow": X ** Y, "reciprocal": 1 / X, "relu": sp.Max(X, 0),
    "sigmoid": 1 / (1 + sp.exp(-X)), "sin": sp.sin(X), "sinh": sp.sinh(X),
    "sqrt": sp.sqrt(X), "square": X ** 2, "sub": X - Y, "tan": sp.tan(X), "tanh": sp.tanh(X),
    "arccosh": sp.acosh(X), "sign": sp.sign(X), "conj": sp.conjugate(X),
    "erf": sp.erf(X), "erfc": sp.erfc(X), "erfinv": sp.erfinv(X),
    "gammaln": sp.loggamma(X), "polygamma": sp.polygamma(0, X),
}
# SymPy leaves the derivatives of floor and ceil unevaluated; their programs are 0, as is the
# program of stop_gradient's (its value is x, and no derivative passes it)
STEPS = {"floor": sp.floor, "ceil": sp.ceiling, "trunc": lambda x: sp.sign(x) * sp.floor(sp.Abs(x)),
         "stop_gradient": lambda x: x}
AT = {"arccosh": 1.5}


def test_every_elementwise_primitive_is_covered():
    elementwise = {n for n, p in sg.REGISTRY.items() if p.elementwise}
    assert elementwise - set(FORWARD) - set(STEPS) <= {"clip", "where", "round", "mod",
                                                       "logaddexp2"}


@pytest.mark.parametrize("name", sorted(STEPS))
def test_steps_have_zero_gradients(name):
    op = sg.Ops()
    x = op.var(0.7, name="x")
    g = op.grad(op.sum(op.apply(sg.REGISTRY[name], [x], None), name="L"), x)
    assert op.program(x, g).to_sympy() == [0]


@pytest.mark.parametrize("name", sorted(FORWARD))
def test_to_sympy_of_each_gradient_is_sympys_diff(name):
    prim = sg.REGISTRY[name]
    arity = len(prim.vjp)
    op = sg.Ops()
    x = op.var(AT.get(name, 0.7), name="x")
    y = op.var(0.3, name="y")
    xs = [x, y][:arity]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = op.apply(prim, xs, None)
        grads = op.grad(op.sum(out, name="L"), xs)
    prog = op.program(xs, list(grads))
    want = [sp.diff(FORWARD[name], s) for s in (X, Y)[:arity]]
    got = prog.to_sympy()
    assert len(got) == arity
    found = sg.check_closed_form(prog, want)
    assert found, f"{name}: {found}"
    # and the closed form gives the program's value at the recorded point
    at = {X: AT.get(name, 0.7), Y: 0.3}
    for g, v in zip(got, grads):
        assert complex(g.subs(at).evalf()) == pytest.approx(complex(v.value), rel=1e-9, abs=1e-12)


def test_a_vector_program_is_entrywise_and_latex_names_outputs():
    op = sg.Ops()
    x = op.var([0.2, 0.5, 0.9], name="x")
    g = op.grad(op.sum(x.tanh() * x, name="L"), x, name="dx")
    prog = op.program(x, g)
    (e,) = prog.to_sympy()
    assert sp.simplify(e - sp.diff(sp.tanh(X) * X, X)) == 0
    assert prog.to_latex().startswith("dx = ")
    found = sg.check_closed_form(prog, "tanh(x) + x*(1 - tanh(x)**2)")
    assert found and found.how == "symbolically"
    wrong = sg.check_closed_form(prog, "tanh(x) + x")
    assert not wrong and "random point" in wrong.how and "program" in wrong.details


def test_matrix_products_become_matrix_symbols():
    op = sg.Ops()
    A = op.var(np.arange(6.0).reshape(2, 3), name="A")
    B = op.var(np.ones((3, 2)), name="B")
    prog = op.program([A, B], [(A @ B).T, A @ B + (A @ B)])
    t, s = prog.to_sympy()
    MA, MB = sp.MatrixSymbol("A", 2, 3), sp.MatrixSymbol("B", 3, 2)
    assert t == (MA * MB).T and sp.simplify(s - 2 * MA * MB) == sp.ZeroMatrix(2, 2)


def test_entries_without_a_closed_form_refuse_with_the_entry_named():
    op = sg.Ops()
    x = op.var([1.0, 2.0], name="x")
    prog = op.program(x, np.cumsum(x.sin(), axis=0))
    with pytest.raises(sg.ArgumentError, match=r"to_sympy: v1 = v0.cumsum\(axis=0\) \(cumsum\)"):
        prog.to_sympy()
    with pytest.raises(sg.ArgumentError, match="1 output"):
        sg.check_closed_form(op.program(x, x.sin()), ["sin(x)", "cos(x)"])


@pytest.mark.parametrize("expr", ["tanh(x)", "sin(x) * exp(x)", "x ** 5 - 2 * x ** 3 + x"])
def test_derivative_n_on_the_command_line_is_sympys(expr, capsys):
    from simplegrad.cli import main
    from simplegrad.engine.render import format_value
    formula = sp.sympify(expr, locals={"x": X})
    for n in range(1, 7):
        assert main(["trace", expr, "--var", "x=0.7", "--derivative", str(n)]) == 0
        last = capsys.readouterr().out.splitlines()[-1]
        want = float(sp.diff(formula, X, n).subs(X, 0.7))
        assert last == f"{'dx' if n == 1 else f'd{n}x'} = {format_value(want)}", (n, last)


def test_a_program_shows_its_closed_form_in_a_notebook():
    # Jupyter's _repr_latex_: the closed form between dollars, None where there is none
    op = sg.Ops()
    x = op.var(np.array(0.5), name="x")
    prog = op.program([x], [(x * x).sin()])
    assert prog._repr_latex_() == "$" + prog.to_latex() + "$"
    assert "\\sin" in prog._repr_latex_()
    m = op.var(np.ones((2, 2)), name="m")
    assert "m_{0 1}" in op.program([m], [(m @ m).sum()])._repr_latex_()    # entry by entry
    assert op.program([m], [np.cumsum(m, axis=0)])._repr_latex_() is None


# ---------------------------------------------------------------- entry by entry
# Programs of small arrays that move entries about (the plumbing of Hessians and Jacobians:
# concatenate, reshape, indexing, scatters), sum them or multiply small matrices, checked
# against SymPy's own hessian and jacobian of the function written with SymPy's functions.

X0, X1 = sp.symbols("x_0 x_1", real=True)


def test_a_sum_over_entries_is_worked_entry_by_entry():
    op = sg.Ops()
    x = op.var([1.0, 2.0], name="x")
    (s,) = op.program(x, op.sum(x.sin(), name="S")).to_sympy()
    assert sp.simplify(s - (sp.sin(X0) + sp.sin(X1))) == 0


def test_the_hessian_of_a_few_scalars_is_sympys():
    op = sg.Ops()
    x, y = op.var(0.5, name="x"), op.var(1.5, name="y")
    H = sg.hessian(lambda x, y: x**2 * y + y**3 + (x * y).sin(), (0, 1))(x, y)
    prog = op.program([x, y], [H[0][0], H[0][1], H[1][0], H[1][1]])
    want = sp.hessian(X**2 * Y + Y**3 + sp.sin(X * Y), (X, Y))
    got = prog.to_sympy()
    assert all(sp.simplify(g - w) == 0 for g, w in zip(got, want))
    assert sg.check_closed_form(prog, list(want)).how == "symbolically"


def test_the_hessian_of_a_vector_is_sympys_matrix():
    op = sg.Ops()
    x = op.var(np.array([0.5, 1.5]), name="x")
    prog = op.program([x], [sg.hessian(lambda x: x[0] ** 2 * x[1] + x[1] ** 3)(x)])
    (H,) = prog.to_sympy()
    want = sp.hessian(X0**2 * X1 + X1**3, (X0, X1))
    assert isinstance(H, sp.Matrix) and sp.simplify(H - want) == sp.zeros(2, 2)
    assert sg.check_closed_form(prog, want)
    assert sg.check_closed_form(prog, [["2*x_1", "2*x_0"], ["2*x_0", "6*x_1"]])
    wrong = sg.check_closed_form(prog, [["2*x_1", "2*x_0"], ["2*x_0", "5*x_1"]])
    assert not wrong and "output 0 entry 3" in wrong.details
    with pytest.raises(sg.ArgumentError, match=r"shape \(2, 2\), its formula \(\)"):
        sg.check_closed_form(prog, "x_0")


def test_the_jacobian_of_a_small_vector_function_is_sympys():
    op = sg.Ops()
    x = op.var(np.array([0.5, 1.5]), name="x")
    prog = op.program([x], [sg.jacobian(
        lambda x: np.stack([x[0] * x[1], np.sin(x[0]), x[1] ** 2]))(x)])
    want = sp.Matrix([X0 * X1, sp.sin(X0), X1**2]).jacobian([X0, X1])
    (J,) = prog.to_sympy()
    assert J.shape == (3, 2) and sp.simplify(J - want) == sp.zeros(3, 2)
    assert "\\cos" in prog.to_latex()


def test_a_jacobian_through_a_small_matmul_is_sympys():
    op = sg.Ops()
    A = op.var(np.array([[1.0, 2.0], [3.0, 4.0]]), name="A")
    x = op.var(np.array([0.5, 1.5]), name="x")
    prog = op.program([A, x], [sg.jacobian(lambda x: np.tanh(A @ x))(x)])
    a = sp.Matrix(2, 2, lambda i, j: sp.Symbol(f"A_{i}_{j}", real=True))
    want = (a * sp.Matrix([X0, X1])).applyfunc(sp.tanh).jacobian([X0, X1])
    (J,) = prog.to_sympy()
    assert sp.simplify(J - want) == sp.zeros(2, 2)
    assert sg.check_closed_form(prog, want)
