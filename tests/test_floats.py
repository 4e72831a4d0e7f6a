"""Compiled programs of float64 numbers run on Python floats (program/floats.py): numpy's
values bit for bit, numpy's warnings and errors, and numpy's code wherever floats cannot follow.

Each record's form on floats (``Primitive.python``) is checked against its numpy forward on
0-d arrays over values that reach every edge of IEEE arithmetic (signed zeros, subnormals,
overflow, inf, nan), with the warnings each gives and under ``np.errstate(all="raise")``; the
test picks up every record that states a form.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simplegrad as sg
from simplegrad.primitives import REGISTRY

EDGES = (0.3, -2.5, 0.0, -0.0, 1e-310, -4e-320, 1e308, -1e308, 1e200, 710.0, math.inf,
         -math.inf, math.nan, 3.0)
FORMS = [p for p in REGISTRY.values() if p.python is not None]


def _recorded(prim, arity):
    """A program applying ``prim`` to ``arity`` float64 numbers (to a float64 number or a
    bool), with the attributes of a 0-d case of its record (or none, or a 0-d shape): compiled."""
    tried = [c.attrs for c in prim.cases if all(tuple(s) == () for s in c.shapes)]
    for attrs in [*tried, {}, {"shape": ()}]:
        op = sg.Ops()
        xs = [op.var(np.asarray(0.5 + k)) for k in range(arity)]
        try:
            with np.errstate(all="ignore"):     # (arccosh of 0.5: recorded all the same)
                out = op.apply(prim, xs, dict(attrs))
        except Exception:       # noqa: BLE001 (an attribute set this record does not take)
            continue
        if out.shape == () and out.dtype in (np.float64, np.bool_):   # (a number, a decision)
            return sg.compile(op.program(xs, out)), attrs
    raise AssertionError(f"{prim.name}: no 0-d case to check its form on floats")


def _run(fn, args):
    """(the value's bytes or the error's type, the warnings' categories and messages)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            value = fn(*args)
            got = (np.asarray(value).dtype, np.asarray(value).shape,
                   np.asarray(value).tobytes())
        except FloatingPointError as e:
            got = ("raised", str(e))
    return got, [(w.category, str(w.message)) for w in seen]


@pytest.mark.parametrize("prim", FORMS, ids=lambda p: p.name)
def test_each_form_on_floats_is_numpys_forward(prim):
    arity = len(prim.vjp)
    compiled, attrs = _recorded(prim, arity)
    assert compiled.floats_source is not None, compiled.source
    for values in itertools.product(EDGES, repeat=arity):
        arrays = [np.asarray(v) for v in values]
        want = _run(lambda *a: prim.forward(*a, **attrs), arrays)
        assert _run(compiled, arrays) == want, (prim.name, values)
        with np.errstate(all="raise", under="ignore"):
            want = _run(lambda *a: prim.forward(*a, **attrs), arrays)
            assert _run(compiled, arrays) == want, (prim.name, values, "raise")


def _compiled(f, *xs):
    op = sg.Ops()
    vs = [op.var(np.asarray(x)) for x in xs]
    with np.errstate(all="ignore"):     # (recorded where it may overflow: the program is one)
        out = f(*vs)
    return sg.compile(op.program(vs, out))


def test_taylor_at_a_point_runs_on_floats_and_gives_the_eager_bits():
    # d^n tanh = P_n(tanh): P_0 = t, P_{n+1} = (1 - t^2) P_n'  (a hand-derived recurrence)
    x0 = 0.3
    for n in (10, 16, 20):
        d = sg.taylor_derivative(lambda x: x.tanh(), n)
        jitted = sg.jit(d)
        jitted(np.asarray(x0))
        assert jitted.programs(np.asarray(x0))[0].floats_source is not None    # (made now)
        got = jitted(np.asarray(x0))
        assert got.dtype == np.float64 and got.shape == ()
        assert got.tobytes() == np.asarray(d(x0)).tobytes()
        poly = np.polynomial.Polynomial([0, 1])
        for _ in range(n):
            poly = np.polynomial.Polynomial([1, 0, -1]) * poly.deriv()
        assert got == pytest.approx(poly(math.tanh(x0)), rel=1e-11)


def test_nested_gradients_of_a_number_run_on_floats():
    g = lambda x: (x * x.sin()).tanh()       # noqa: E731
    for _ in range(4):
        g = sg.grad(g)
    jitted = sg.jit(g)
    for x0 in (0.3, -1.7):
        jitted(np.asarray(x0))
        compiled = jitted.programs(np.asarray(x0))[0]
        assert compiled.floats_source is not None
        got = jitted(np.asarray(x0))
        # numpy's bits for the program compiled (expanded: the eager values to round-off)
        want = compiled._numpy(np.asarray(x0))
        assert got.tobytes() == np.asarray(want[0] if type(want) is list else want).tobytes()
        np.testing.assert_allclose(got, g(np.asarray(x0)), rtol=1e-13)
    h = 1e-3        # central differences of the third derivative, step h: error O(h^2)
    g3 = sg.grad(sg.grad(sg.grad(lambda x: (x * x.sin()).tanh())))
    fd = (g3(np.asarray(0.3 + h)) - g3(np.asarray(0.3 - h))) / (2 * h)
    assert float(jitted(np.asarray(0.3))) == pytest.approx(float(fd), rel=1e-5)



def test_powers_run_on_floats_within_their_condition_and_on_numpy_beyond_it():
    """x ** y on floats where np.power raises no floating-point error (the base's magnitude in
    [2 ** -15, 2 ** 15], the exponent in [-64, 64], positive or whole; a zero base, a positive
    exponent), numpy's bits; at and past each bound of the condition, and where numpy warns
    (overflow, a negative base to a fraction, zero to a negative power), numpy's bits and
    warnings from the numpy program. A power of a constant exponent is on floats too."""
    compiled = _compiled(lambda x, y: x ** y, 2.0, 3.0)
    assert compiled.floats_source is not None and "np.power" in compiled.floats_source
    bases = (0.3, 2.0 ** 15, 2.0 ** 15 * (1 + 2 ** -52), 2.0 ** -15, 2.0 ** -16, -2.5, 0.0,
             -0.0, 1e200, -1e-310, math.inf, math.nan)
    exponents = (3.0, -64.0, 64.0, 64.5, -64.5, 0.5, -1.0, 0.0, -0.0, 2.0 ** 53, math.inf)
    for a, b in itertools.product(bases, exponents):
        args = [np.asarray(a), np.asarray(b)]
        assert _run(compiled, args) == _run(lambda *v: np.power(*v), args), (a, b)
        with np.errstate(all="raise", under="ignore"):
            assert _run(compiled, args) == _run(lambda *v: np.power(*v), args), (a, b)
    # (within the condition the floats answer: the numpy program is not called)
    calls, numpy_fn = [], compiled._numpy
    compiled._fn.__globals__["fallback"] = lambda *v: calls.append(v) or numpy_fn(*v)
    for a, b in [(0.3, 3.0), (-2.5, 3.0), (2.0 ** 15, 64.0), (0.0, 0.5), (1.5, -64.0)]:
        assert compiled(np.asarray(a), np.asarray(b)).tobytes() == \
            np.power(np.asarray(a), np.asarray(b)).tobytes()
    assert calls == []
    with pytest.warns(RuntimeWarning, match="invalid value encountered in power"):
        compiled(np.asarray(-2.5), np.asarray(0.5))     # nan: numpy's program says so
    assert len(calls) == 1
    square = _compiled(lambda x: (x ** 2).tanh() ** 0.5, 0.7)
    assert square.floats_source is not None
    assert square(np.asarray(0.7)).tobytes() == \
        np.power(np.tanh(np.power(np.asarray(0.7), 2)), 0.5).tobytes()

@pytest.mark.parametrize("f, x, message", [
    (lambda x: (x * x).tanh(), 1e200, "overflow encountered in multiply"),      # tanh(inf)
    (lambda x: 1.0 / x, 0.0, "divide by zero encountered in divide"),
    (lambda x: x / (x * x), 1e200, "overflow encountered in multiply"),         # x / inf
    (lambda x: (x * x) - (x * x), 1e200, "invalid value encountered in"),   # inf - inf
    (lambda x: (x * 1e308 * 0.0).sin(), 10.0, "overflow encountered in multiply"),
    (lambda x: np.where(x > 0, x * 1e308 * 10, x), -1.0, "overflow encountered in"),
    (lambda x: np.where(x * 1e308 * 10 > 0, 1.0, x), 1.0, "overflow encountered in"),
])
def test_where_numpy_warns_the_numpy_program_runs(f, x, message):
    compiled = _compiled(f, 1.0)
    assert compiled.floats_source is not None
    want = _run(compiled._numpy, [np.asarray(x)])
    got = _run(compiled, [np.asarray(x)])
    assert got == want and any(message in m for _, m in got[1])
    with np.errstate(all="raise"), pytest.raises(FloatingPointError):
        compiled(np.asarray(x))


def test_outputs_inputs_and_constants_come_back_as_numpy_gives_them():
    op = sg.Ops()
    x, y = op.var(np.asarray(2.0)), op.var(np.asarray(-0.0))
    c = op.var(np.asarray(-0.0), requires_grad=False)
    compiled = sg.compile(op.program([x, y], [x * y, y, (x * 2 + 1).sum(), c * x]))
    assert compiled.floats_source is not None
    for got, want in zip(compiled(np.asarray(2.0), np.asarray(-0.0)),
                         compiled._numpy(np.asarray(2.0), np.asarray(-0.0))):
        assert type(got) is np.ndarray and got.dtype == np.float64 and got.shape == ()
        assert got.tobytes() == np.asarray(want).tobytes()


def test_a_hessian_and_a_jacobian_at_a_point_run_on_floats():
    """sg.hessian and sg.jacobian of a function of one number record its unit stack, a value
    of shape (1,) (one number): the program runs on floats, numpy's bits, its output 0-d; a
    program whose output has shape (1,) stays in numpy (its output is handed back as it is).
    (sg.jit records with the rules of sg.simplify, so its values are its numpy program's, and
    the eager transform's to rounding.)"""
    f = lambda x: x.sin() * x.exp() + (x * x).sigmoid()     # noqa: E731
    for transform in (sg.hessian, sg.jacobian, lambda g: sg.jacobian(sg.grad(g))):
        jitted = sg.jit(transform(f))
        for x0 in (0.7, -1.3):
            got = jitted(np.asarray(x0))
            compiled = jitted.programs(np.asarray(x0))[0]
            assert compiled.floats_source is not None, compiled.source
            want = np.asarray(compiled._numpy(np.asarray(x0))[0])
            assert got.shape == want.shape == () and got.tobytes() == want.tobytes()
            assert float(got) == pytest.approx(float(transform(f)(np.asarray(x0))), rel=1e-13)
    # d^2/dx^2 (sin x e^x) = 2 cos x e^x; at 0.7 with the sigmoid term's by central differences
    h = 1e-4        # second central difference of f, step h: error O(h^2) plus round-off
    f0 = lambda x: math.sin(x) * math.exp(x) + 1 / (1 + math.exp(-x * x))     # noqa: E731
    fd = (f0(0.7 + h) - 2 * f0(0.7) + f0(0.7 - h)) / h ** 2
    assert float(sg.jit(sg.hessian(f))(np.asarray(0.7))) == pytest.approx(float(fd), rel=1e-6)
    op = sg.Ops()
    x = op.var(np.asarray(0.5))
    vector = sg.compile(op.program([x], (x * 2.0).reshape((1,))))
    assert vector.floats_source is None and vector(np.asarray(0.5)).shape == (1,)

def test_programs_not_of_float64_numbers_stay_in_numpy():
    assert _compiled(lambda x: x * 2.0, np.ones(3)).floats_source is None      # a vector
    assert _compiled(lambda x: x.ops.polygamma(1, x), 0.5).floats_source is None   # no form
    assert _compiled(lambda x: x * 2.0, np.float32(0.5)).floats_source is None
    op = sg.Ops()
    x = op.var(np.asarray(0.5))
    prog = op.program([x], x * 2.0)
    assert sg.compile(prog, backend="numpy").floats_source is not None


def test_a_scalar_loop_body_compiled_inside_a_scan_keeps_its_values():
    def f(x):
        carry, ys = sg.scan(lambda c, t: (c * 0.9 + t.tanh(), c * t), x, np.linspace(0, 1, 7))
        return carry + ys.sum()
    jitted = sg.jit(sg.grad(f))
    want = sg.grad(f)(np.asarray(0.4))
    assert jitted(np.asarray(0.4)).tobytes() == np.asarray(want).tobytes()


def test_a_small_program_runs_on_floats_at_once_a_large_one_from_its_sixteenth_call():
    from simplegrad.program.floats import FLOATS_AFTER, FLOATS_AT_ONCE
    small = _compiled(lambda x: (x * 3.0).tanh(), 1.0)
    assert small._floats is not None and small._fn is small._floats[1]

    def chain(x):
        for _ in range(FLOATS_AT_ONCE):
            x = x * 0.5 + 0.25
        return x
    large = _compiled(chain, 1.0)
    want = large._numpy(np.asarray(0.5))
    for _ in range(FLOATS_AFTER - 1):     # (the floats' function costs half a compile)
        assert large(np.asarray(0.5)) == want
    assert large._floats is None
    assert large(np.asarray(0.5)) == want
    assert large._floats is not None and large._fn is large._floats[1]
    jitted = sg.jit(chain)
    for _ in range(FLOATS_AFTER + 1):
        assert jitted(np.asarray(0.5)) == want
    assert jitted.programs(np.asarray(0.5))[0]._fn is not jitted.programs(
        np.asarray(0.5))[0]._numpy


def test_decisions_and_guards_run_on_floats_as_recorded():
    def f(x):
        y = np.where(x > 1.0, x * x, -x) + (x * 2).tanh()
        return y * 3 if x > 0 else y - 1       # a guard: the branch taken is recorded
    jitted = sg.jit(sg.grad(f))
    want = {x0: sg.grad(f)(np.asarray(x0)) for x0 in (0.5, 2.0, -0.5)}
    jitted(np.asarray(0.5))
    compiled = jitted.programs(np.asarray(0.5))[0]
    assert compiled.floats_source is not None and "G0(" in compiled.floats_source
    for x0 in (0.5, 2.0, -0.5, 0.5):        # -0.5 takes the other branch: recorded again
        got = jitted(np.asarray(x0))
        assert got.tobytes() == np.asarray(want[x0]).tobytes()
    # d/dx of 3 (x^2 + tanh 2x) at 2 and of 3 (-x + tanh 2x) at 0.5, by hand
    assert float(jitted(np.asarray(2.0))) == pytest.approx(3 * (4 + 2 / math.cosh(4) ** 2))
    assert float(jitted(np.asarray(0.5))) == pytest.approx(3 * (-1 + 2 / math.cosh(1) ** 2))
    with pytest.raises(sg.ReplayError, match="was True"):
        compiled(np.asarray(-0.5))
    op = sg.Ops()
    x = op.var(np.asarray(0.5))
    k = (x * 4).item()                      # a value guard: replays only where it is 2.0
    prog = sg.compile(op.program([x], [x * k, x > 0.25]))
    assert prog.floats_source is not None and "!= 2.0" in prog.floats_source
    got = prog(np.asarray(0.5))
    assert got[0] == 1.0 and got[1].dtype == np.bool_ and bool(got[1])
    with pytest.raises(sg.ReplayError):
        prog(np.asarray(0.75))


_UNARY = {"neg": lambda x: -x, "tanh": lambda x: x.tanh(), "sin": lambda x: x.sin(),
          "exp": lambda x: x.exp(), "log": lambda x: abs(x).log(), "sqrt": lambda x: x.sqrt(),
          "square": lambda x: x * x, "recip": lambda x: 1.0 / x, "sigmoid": lambda x: x.sigmoid(),
          "arcsinh": lambda x: x.arcsinh(), "floor": lambda x: np.floor(x),
          "cube": lambda x: x ** 3}
_BINARY = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
           "div": lambda x, y: x / y, "max": lambda x, y: np.maximum(x, y),
           "where": lambda x, y: np.where(x > y, x * 2.0, y - 1.0),
           "pow": lambda x, y: x ** y, "hypot": lambda x, y: np.hypot(x, y),
           "arctan2": lambda x, y: np.arctan2(x, y),
           "logaddexp": lambda x, y: np.logaddexp(x, y),
           "and": lambda x, y: np.where((x > 0) & (y < x), x, y),
           "step": lambda x, y: (x > y).astype(np.float64) * x.relu()}


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.one_of(
    st.tuples(st.sampled_from(sorted(_UNARY)), st.integers(0, 99)),
    st.tuples(st.sampled_from(sorted(_BINARY)), st.integers(0, 99), st.integers(0, 99))),
    min_size=1, max_size=12),
    a=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(EDGES)),
    b=st.one_of(st.floats(-3, 3), st.sampled_from(EDGES)))
def test_random_programs_of_numbers_give_numpys_values_and_warnings(steps, a, b):
    """Compositions of the forms, on any float64 inputs (nan, inf, overflow, zero divisors):
    the floats' function and the numpy function agree in bits, warnings and errors."""
    op = sg.Ops()
    with np.errstate(all="ignore"):
        pool = [op.var(np.asarray(0.7)), op.var(np.asarray(-0.4))]
        for step in steps:
            name, args = step[0], [pool[i % len(pool)] for i in step[1:]]
            pool.append((_UNARY.get(name) or _BINARY[name])(*args))
        compiled = sg.compile(op.program(pool[:2], [pool[-1], pool[len(pool) // 2]]))
    assert compiled.floats_source is not None
    inputs = [np.asarray(a), np.asarray(b)]
    assert _run(compiled, inputs) == _run(compiled._numpy, inputs)
    with np.errstate(all="raise", under="ignore"):
        assert _run(compiled, inputs) == _run(compiled._numpy, inputs)
