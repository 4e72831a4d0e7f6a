"""sg.simplify(prog, expand=True): ring arithmetic gathered into polynomials (polynomials.py).

Oracles: the derivatives of tanh in closed form (SymPy, and the recurrence P_{k+1} = P_k' (1 -
t^2) by hand), and the plain program at random points, to float64 round-off (a tolerance
scaled by the largest intermediate value, since the expanded form sums the terms in another
order). Where an atom would cancel (x - x, x * 0) the entry stays as recorded, so inf and nan
propagate as they do in the plain program.
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg

EPS = np.finfo(np.float64).eps


def nested_tanh(n: int):
    g = lambda x: x.tanh()      # noqa: E731
    for _ in range(n):
        g = sg.grad(g)
    return g


def tanh_program(n: int, shape: tuple = ()) -> sg.Program:
    """d^n tanh by nesting sg.grad, recorded plainly (no rules while recording)."""
    op = sg.Ops()
    x = op.var(np.full(shape, 0.3), name="x")
    if shape:
        y = x.tanh()
        for _ in range(n):
            y = op.grad(y.sum(), x, create_graph=True)
    else:
        y = nested_tanh(n)(x)
    return op.program(x, y)


def tanh_polynomial(n: int) -> np.polynomial.Polynomial:
    """P_n with d^n tanh / dx^n = P_n(tanh x): P_0 = t, P_{k+1} = P_k' (1 - t^2)."""
    poly = np.polynomial.Polynomial([0.0, 1.0])
    for _ in range(n):
        poly = poly.deriv() * np.polynomial.Polynomial([1.0, 0.0, -1.0])
    return poly


def by_recurrence(n: int, x: np.ndarray) -> np.ndarray:
    """d^n tanh / dx^n in closed form."""
    return tanh_polynomial(n)(np.tanh(x))


def magnitude(n: int, x: np.ndarray) -> np.ndarray:
    """The sum of P_n's terms' magnitudes at tanh x: what round-off is relative to."""
    absolute = np.polynomial.Polynomial(np.abs(tanh_polynomial(n).coef))
    return absolute(np.abs(np.tanh(x))).max() + 1.0


@pytest.mark.parametrize("n", range(1, 11))
def test_tanh_derivatives_expand_to_their_polynomials(n):
    prog = tanh_program(n)
    simple = sg.simplify(prog, expand=True)
    assert len(simple.entries) <= 2 * n + 3, simple.format(raw=True)
    assert len(simple.entries) <= 200
    rng = np.random.default_rng(n)
    for x in [0.3, *rng.uniform(-2, 2, 5)]:
        x = np.array(x)
        scale = magnitude(n, x)
        got = simple(x)
        np.testing.assert_allclose(got, prog(x), rtol=0, atol=1e-13 * scale)
        np.testing.assert_allclose(got, by_recurrence(n, x), rtol=0, atol=1e-14 * scale)


@pytest.mark.slow
def test_tanh_derivatives_against_sympy():
    sympy = pytest.importorskip("sympy")
    s = sympy.symbols("s")
    rng = np.random.default_rng(10)
    points = rng.uniform(-1.5, 1.5, 4)
    for n in (2, 5, 8, 10):
        simple = sg.simplify(tanh_program(n), expand=True)
        d = sympy.diff(sympy.tanh(s), s, n)
        for x in points:
            want = float(d.subs(s, sympy.Float(x, 40)).evalf(30))
            np.testing.assert_allclose(simple(np.array(x)), want, rtol=0,
                                       atol=1e-14 * magnitude(n, x))


def test_summed_vector_derivatives_fold_the_seed_through_expand():
    """The cotangent seeds are constant arrays of ones (a uniform constant: a number here), so
    the nesting over a vector simplifies as at a point."""
    prog = tanh_program(6, (5,))
    simple = sg.simplify(prog, expand=True)
    assert len(simple.entries) <= 2 * 6 + 3, simple.format(raw=True)
    x = np.linspace(-1.2, 1.4, 5)
    np.testing.assert_allclose(simple(x), by_recurrence(6, x), rtol=0,
                               atol=1e-14 * magnitude(6, x))
    assert simple(x).shape == (5,)
    if prog.counts is not None:     # at another size: resized, then expanded again
        x7 = np.linspace(-1.0, 1.0, 7)
        np.testing.assert_allclose(simple(x7), by_recurrence(6, x7), rtol=0,
                                   atol=1e-14 * magnitude(6, x7))
        assert len(simple.with_shapes((7,)).entries) == len(simple.entries)


# ---------------------------------------------------------------- the normal form


def record(f, *values):
    op = sg.Ops()
    xs = [op.var(v, name=f"x{i}") for i, v in enumerate(values)]
    return op.program(xs, f(*xs))


def test_coefficients_gathered_and_products_in_either_order_one_monomial():
    prog = record(lambda x: x * 2.0 + x + x * 3.0, np.array([1.0, -2.0]))
    simple = sg.simplify(prog, expand=True)
    assert [e.prim.name for e in simple.entries] == ["mul"]      # x * 6.0
    np.testing.assert_array_equal(simple(np.array([1.5, 2.0])), [9.0, 12.0])
    prog = record(lambda a, b: a * b + b * a - (b * 3.0) * a, np.ones(3), np.ones(3))
    simple = sg.simplify(prog, expand=True)
    assert len(simple.entries) == 2, simple.format(raw=True)     # (a * b) * -1.0 -> -(a * b)
    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 4.0])
    np.testing.assert_allclose(simple(a, b), -a * b)


def test_powers_share_one_chain():
    prog = record(lambda x: x * x * x * 2.0 + (x * x) * (x * x) + x * (x * (x * x)), np.ones(2))
    simple = sg.simplify(prog, expand=True)
    x = np.array([0.7, -1.3])
    np.testing.assert_allclose(simple(x), 2 * x ** 3 + 2 * x ** 4, rtol=1e-15)
    assert len(simple.entries) <= 6, simple.format(raw=True)


def test_common_factor_taken_out_the_largest_factor_last():
    """2 W t^3 - 2 W t (a matrix W, a vector t) is written as (2 t^2 - 2) t times W: one
    product at W's size, every other entry at t's (by hand: the same polynomial)."""
    W = np.random.default_rng(5).normal(size=(4, 3))
    prog = record(lambda t, W: (t * t * t * 2.0) * W - (W * t) * 2.0, np.ones(3), W)
    simple = sg.simplify(prog, expand=True)
    big = [e for e in simple.entries if e.shape == (4, 3)]
    assert len(big) == 1 and big[0].prim.name == "mul", simple.format(raw=True)
    t = np.array([0.5, -1.25, 2.0])
    np.testing.assert_allclose(simple(t, W), W * (2 * t ** 3 - 2 * t), rtol=4 * EPS)
    # one term: its number multiplies the smaller power, W comes last
    prog = record(lambda t, W: (t * W) * t * -3.0, np.ones(3), W)
    simple = sg.simplify(prog, expand=True)
    assert [e.shape for e in simple.entries] == [(3,), (3,), (4, 3)], simple.format(raw=True)
    np.testing.assert_allclose(simple(t, W), -3 * t * t * W, rtol=2 * EPS)


def test_jit_hessian_of_a_layer_computes_one_matrix_product_by_hand():
    """sg.jit(sg.hessian) of sum(tanh(W x)): the closed form W^T diag(-2 t (1 - t^2)) W
    computed as numpy by hand would, one elementwise entry at the matrix's size."""
    rng = np.random.default_rng(6)
    W, x = rng.normal(size=(5, 5)) / 2, rng.normal(size=5)
    jitted = sg.jit(sg.hessian(lambda x: (W @ x).tanh().sum()))
    t = np.tanh(W @ x)
    np.testing.assert_allclose(jitted(x), W.T @ ((-2 * t * (1 - t * t))[:, None] * W),
                               rtol=1e-13, atol=1e-15)
    entries = jitted.programs(x)[0].program.entries
    big = [e for e in entries if e.shape == (5, 5) and e.prim.name != "matmul" and
           e.prim.name != "transpose"]
    assert len(big) == 1, [e.prim.name for e in entries]


def test_cancelled_atoms_stay_as_recorded():
    for f in (lambda x: x - x, lambda x: x * 0.0, lambda x: (x + 1.0) * 2.0 - x * 2.0):
        prog = record(f, np.array([1.0, 2.0]))
        simple = sg.simplify(prog, expand=True)
        x = np.array([np.inf, 3.0])
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(simple(x), prog(x))


def test_shapes_and_dtypes_kept():
    a32 = np.linspace(0.1, 0.9, 3).astype(np.float32).reshape(3, 1)
    b32 = np.linspace(-1, 1, 4).astype(np.float32).reshape(1, 4)
    prog = record(lambda a, b: (a + b) * (a - b) + b * b, a32, b32)
    simple = sg.simplify(prog, expand=True)
    got = simple(a32, b32)
    assert got.shape == (3, 4) and got.dtype == np.float32
    np.testing.assert_allclose(got, a32 * a32 + 0 * b32, rtol=1e-6, atol=1e-6)
    ints = record(lambda a: a * a + a * 2, np.arange(4))
    np.testing.assert_array_equal(sg.simplify(ints, expand=True)(np.arange(4) + 3),
                                  ints(np.arange(4) + 3))


def test_random_ring_programs_agree_to_round_off():
    """Random expressions of add, sub, mul, neg and numbers over three inputs (shapes that
    broadcast): the expanded program equals the plain one to round-off at random points."""
    rng = np.random.default_rng(7)
    shapes = [(3, 1), (1, 4), (3, 4)]
    for trial in range(40):
        plan = []
        for _ in range(int(rng.integers(4, 14))):
            plan.append((int(rng.integers(0, 5)), int(rng.integers(0, 1 << 30)),
                         int(rng.integers(0, 1 << 30)), float(rng.choice([-2.0, 0.5, 3.0]))))

        def f(*xs, plan=plan):
            vals = list(xs)
            for kind, i, j, c in plan:
                a, b = vals[i % len(vals)], vals[j % len(vals)]
                vals.append([a + b, a - b, a * b, -a, a * c][kind])
            return vals[-1], vals
        points = [[rng.uniform(-1.5, 1.5, s) for s in shapes] for _ in range(4)]
        op = sg.Ops()
        xs = [op.var(v) for v in points[0]]
        y, _ = f(*xs)
        prog = op.program(xs, y)
        simple = sg.simplify(prog, expand=True)
        assert len(simple.entries) <= len(sg.simplify(prog).entries) + 8
        for args in points:
            _, vals = f(*args)
            scale = max(np.max(np.abs(v)) for v in vals) + 1.0
            got, want = simple(*args), prog(*args)
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=0, atol=64 * len(plan) * EPS * scale,
                                       err_msg=f"trial {trial}")


# ---------------------------------------------------------------- sg.jit


def test_jit_compiles_nested_derivatives_expanded():
    g = nested_tanh(10)
    jitted = sg.jit(g)
    x = np.array(0.3)
    np.testing.assert_allclose(jitted(x), by_recurrence(10, x), rtol=1e-12)
    assert len(jitted.programs(x)[0].program.entries) <= 30
    np.testing.assert_allclose(jitted(np.array(-0.8)), by_recurrence(10, np.array(-0.8)),
                               rtol=1e-12)


def test_jit_of_one_gradient_is_compiled_as_recorded():
    """A single gradient (a training step's) is not expanded: bit for bit the eager values."""
    def loss(w, x):
        return np.sum(np.tanh(x @ w) * (1.0 - x @ w) ** 2)
    rng = np.random.default_rng(3)
    w, x = rng.normal(size=4), rng.normal(size=(6, 4))
    jitted = sg.jit(sg.grad(loss))
    np.testing.assert_array_equal(jitted(w, x), sg.grad(loss)(w, x))
    w2 = rng.normal(size=4)
    np.testing.assert_array_equal(jitted(w2, x), sg.grad(loss)(w2, x))


def test_jit_of_two_first_order_gradients_is_compiled_as_recorded():
    """Two gradients of one step (not of each other) record the second with the rules, whose
    values are the plain ones to the bit, and are not expanded."""
    def step(w):
        a = sg.grad(lambda w: np.sum(np.tanh(w) * w))(w)
        b = sg.grad(lambda w: np.sum(w * w * (1.0 - w)))(w)
        return a * 0.5 + b
    w = np.random.default_rng(4).normal(size=5)
    np.testing.assert_array_equal(sg.jit(step)(w), step(w))
