"""Taylor mode (sg.taylor): closed forms to order 20, every registered rule (the ``taylor``
field of each record) against nested jvps, nesting (Variables in, Variables out), sg.derivative
by Taylor mode (and its nested-jvp fallback), and errors.

Oracles: tanh's derivatives are polynomials in t = tanh(x) (P0 = t, P_{n+1} = P_n' (1 - t^2)),
evaluated exactly with fractions; x sin(x) exp(x) by Leibniz's rule with (sin e^x)^(m) =
2^(m/2) e^x sin(x + m pi/4); log(1 + x^2) = 2 Re log(1 + i x), whose n-th derivative is
2 Re[(-1)^(n-1) (n-1)! i^n / (1 + i x)^n]. Registry rules are checked against the forward
sweep (nested ``op.jvp``), itself checked against finite differences in test_primitives.py.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from test_primitives import applying, sample

import simplegrad as sg

X = np.array([0.3, -0.7, 1.1])
ORDER = 20
ORDER_VS_JVP = 4


def tanh_derivatives(x: np.ndarray, order: int) -> list[np.ndarray]:
    """d^n tanh / dx^n for n = 0..order from the polynomials in tanh, evaluated exactly."""
    poly = [0, 1]                                   # coefficients of P_0(t) = t, lowest first
    out = []
    for _ in range(order + 1):
        out.append(np.array([float(sum(Fraction(c) * Fraction(float(t)) ** i
                                       for i, c in enumerate(poly))) for t in np.tanh(x)]))
        d = [i * c for i, c in enumerate(poly)][1:] or [0]      # P' then times (1 - t^2)
        poly = [0] * (len(d) + 2)
        for i, c in enumerate(d):
            poly[i] += c
            poly[i + 2] -= c
    return out


def xsinexp_derivatives(x: np.ndarray, order: int) -> list[np.ndarray]:
    """Leibniz: (x g)^(n) = x g^(n) + n g^(n-1) with g = sin(x) e^x."""
    def g(m):
        return 2 ** (m / 2) * np.exp(x) * np.sin(x + m * np.pi / 4)
    return [x * g(n) + (n * g(n - 1) if n else 0) for n in range(order + 1)]


def log1p_square_derivatives(x: np.ndarray, order: int) -> list[np.ndarray]:
    """log(1 + x^2) = 2 Re log(1 + i x)."""
    out = [np.log1p(x * x)]
    for n in range(1, order + 1):
        out.append(2 * np.real((-1) ** (n - 1) * math.factorial(n - 1) * 1j ** n
                               / (1 + 1j * x) ** n))
    return out


CLOSED = {
    "tanh": (lambda x: x.tanh(), tanh_derivatives),
    "x sin(x) exp(x)": (lambda x: x * x.sin() * x.exp(), xsinexp_derivatives),
    "log(1 + x*x)": (lambda x: (1 + x * x).log(), log1p_square_derivatives),
}


@pytest.mark.parametrize("name", list(CLOSED))
def test_closed_forms_to_order_20(name):
    f, closed = CLOSED[name]
    got = sg.taylor(f, X, np.ones_like(X), ORDER)
    want = closed(X, ORDER)
    assert len(got) == ORDER + 1
    for n, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=0, err_msg=f"{name}, order {n}")


def _falling(a: float, n: int) -> float:
    """a (a - 1) ... (a - n + 1)."""
    return math.prod(a - i for i in range(n))


XP = np.array([0.3, 0.7, 1.1])       # positive points, for the powers and logs
MORE = {        # f, and its n-th derivative at XP in closed form
    "arctan": (lambda x: x.arctan(), lambda n: np.arctan(XP) if n == 0 else np.imag(
        (-1) ** (n - 1) * math.factorial(n - 1) * 1j ** n / (1 + 1j * XP) ** n)),
    "sinh": (lambda x: x.sinh(), lambda n: np.sinh(XP) if n % 2 == 0 else np.cosh(XP)),
    "exp2": (lambda x: x.exp2(), lambda n: np.log(2) ** n * 2 ** XP),
    "log1p": (lambda x: x.log1p(), lambda n: np.log1p(XP) if n == 0 else
              (-1) ** (n - 1) * math.factorial(n - 1) / (1 + XP) ** n),
    "reciprocal": (lambda x: x.reciprocal(),
                   lambda n: (-1) ** n * math.factorial(n) / XP ** (n + 1)),
    "sqrt": (lambda x: x.sqrt(), lambda n: _falling(0.5, n) * XP ** (0.5 - n)),
    "x ** 2.5": (lambda x: x ** 2.5, lambda n: _falling(2.5, n) * XP ** (2.5 - n)),
    "1 / (1 + x)": (lambda x: 1 / (1 + x), lambda n: (-1) ** n * math.factorial(n)
                    / (1 + XP) ** (n + 1)),
}


@pytest.mark.parametrize("name", list(MORE))
def test_more_closed_forms_to_order_12(name):
    f, closed = MORE[name]
    got = sg.taylor(f, XP, np.ones_like(XP), 12)
    for n, g in enumerate(got):
        np.testing.assert_allclose(g, closed(n), rtol=1e-10, atol=0, err_msg=f"{name}, {n}")


def test_direction_scales_the_derivatives():
    """Along v, the k-th derivative of an elementwise f is f^(k)(x) v^k."""
    v = np.array([0.5, -2.0, 1.5])
    got = sg.taylor(lambda x: x.tanh(), X, v, 6)
    for k, (g, w) in enumerate(zip(got, tanh_derivatives(X, 6))):
        np.testing.assert_allclose(g, w * v ** k, rtol=1e-12)


def test_cubic_of_a_matrix_product():
    """t -> sum((A (x + t v))^3) is a cubic: D1..D3 by hand, D4 and beyond exactly zero."""
    rng = np.random.default_rng(1)
    A, x, v = rng.normal(size=(4, 3)), rng.normal(size=3), rng.normal(size=3)
    a, b = A @ x, A @ v
    got = sg.taylor(lambda x: ((A @ x) ** 3).sum(), x, v, 5)
    want = [np.sum(a ** 3), 3 * np.sum(a * a * b), 6 * np.sum(a * b * b), 6 * np.sum(b ** 3),
            0.0, 0.0]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_integer_powers_are_exact_at_zero():
    """x ** 3 at 0 and 0.5: 3x^2, 6x, 6, then zeros (the general recurrence divides by x)."""
    x = np.array([0.0, 0.5])
    got = sg.taylor(lambda x: x ** 3, x, np.ones(2), 5)
    want = [x ** 3, 3 * x ** 2, 6 * x, np.full(2, 6.0), np.zeros(2), np.zeros(2)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-14, atol=0)


def _nested_jvps(f, x, n):
    """The n-th derivative along ones by n nested forward sweeps (sg.derivative's fallback)."""
    op = sg.Ops()
    xv = op.var(x)
    y = f(xv)
    for _ in range(n):
        y = op.jvp(y, xv, np.ones_like(x))
    return y.value


def test_taylor_derivative_matches_nested_jvps():
    f = CLOSED["x sin(x) exp(x)"][0]
    for n in range(5):
        np.testing.assert_allclose(sg.taylor_derivative(f, n)(X), _nested_jvps(f, X, n),
                                   rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- sg.derivative by Taylor mode


@pytest.mark.parametrize("name", list(CLOSED))
def test_derivative_gives_the_closed_forms_and_the_nested_jvps_values(name):
    """sg.derivative (Taylor mode from order 2) against the closed forms to order 8, and
    against the nested jvps it used before, to order 5."""
    f, closed = CLOSED[name]
    want = closed(X, 8)
    for n in range(9):
        np.testing.assert_allclose(sg.derivative(f, n)(X), want[n], rtol=1e-10, atol=0,
                                   err_msg=f"{name}, order {n}")
    for n in range(6):
        np.testing.assert_allclose(sg.derivative(f, n)(X), _nested_jvps(f, X, n),
                                   rtol=1e-11, atol=1e-11, err_msg=f"{name}, order {n}")


def _counting_jvps(monkeypatch) -> list:
    """Count the calls of Ops.jvp (sg.derivative's fallback) during this test."""
    calls = []
    jvp = sg.Ops.jvp

    def counted(self, *args, **kwargs):
        calls.append(1)
        return jvp(self, *args, **kwargs)
    monkeypatch.setattr(sg.Ops, "jvp", counted)
    return calls


def test_derivative_takes_taylor_mode_when_every_entry_has_a_rule(monkeypatch):
    calls = _counting_jvps(monkeypatch)
    got = sg.derivative(lambda x: x.tanh(), 6)(X)
    assert calls == []
    np.testing.assert_allclose(got, tanh_derivatives(X, 6)[6], rtol=1e-10)


def test_derivative_falls_back_to_nested_jvps_without_a_rule(monkeypatch):
    """pinv's Taylor rule is nested jvps (no recurrence), so sg.derivative nests them directly:
    d^n/dx^n pinv(A + x B) for a regular A + x B is the inverse's, (-1)^n n! M^-1 (B M^-1)^n
    with M = A + x B, here by n nested jvps."""
    assert sg.REGISTRY["pinv"].taylor.recorded
    calls = _counting_jvps(monkeypatch)
    A = np.array([[2.0, 0.5, 0.0], [0.3, 1.5, 0.2], [0.1, 0.0, 1.0]])
    B = np.array([[0.2, -0.1, 0.0], [0.4, 0.1, 0.3], [0.0, 0.2, -0.5]])
    x = 0.3
    m_inv = np.linalg.inv(A + x * B)
    for n in range(4):
        calls.clear()
        got = sg.derivative(lambda t: (t * B + A).ops.pinv(t * B + A), n)(x)
        want = (-1) ** n * math.factorial(n) * m_inv @ np.linalg.matrix_power(B @ m_inv, n)
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10, err_msg=f"order {n}")
        assert len(calls) == n


def test_derivative_edge_results_are_as_by_nested_jvps():
    """A constant, the identity and a cubic past its degree give float zeros; a bool result
    gives bool zeros (no tangent flows), as nested jvps do."""
    for f, n in [(lambda x: np.array([1.0, 2.0, 3.0]), 2), (lambda x: x, 3),
                 (lambda x: x * x * x, 4)]:
        with (pytest.warns(sg.DisconnectedWarning) if n == 2 else contextlib.nullcontext()):
            got = sg.derivative(f, n)(X)          # the constant is disconnected: it warns
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, np.zeros(3))
    with pytest.warns(sg.DisconnectedWarning):
        got = sg.derivative(lambda x: x > 0, 2)(X)
    assert got.dtype == bool and not got.any()


def test_derivative_by_taylor_mode_nests_inside_grad():
    """grad of x -> the summed 3rd derivative of tanh (Taylor mode, recorded) is the 4th."""
    g = sg.grad(lambda x: sg.derivative(lambda y: y.tanh(), 3)(x).sum())(X)
    np.testing.assert_allclose(g, tanh_derivatives(X, 4)[4], rtol=1e-10)


def test_arrays_in_arrays_out_and_order_zero():
    out = sg.taylor(lambda x: x.exp(), X, np.ones_like(X), 0)
    assert len(out) == 1 and type(out[0]) is np.ndarray
    np.testing.assert_allclose(out[0], np.exp(X))


def test_callers_arrays_are_borrowed_not_changed_and_results_do_not_alias_them():
    x, A = np.array([0.3, 0.5]), np.eye(2) * 2
    out = sg.taylor(lambda y: (A @ y).tanh(), x, np.ones(2), 2)
    assert x.flags.writeable and A.flags.writeable
    same = sg.taylor(lambda y: y, x, np.ones(2), 1)
    same[0][0] = -1.0
    assert x[0] == 0.3
    np.testing.assert_allclose(out[0], np.tanh(2 * np.array([0.3, 0.5])))


# ---------------------------------------------------------------- nesting


def test_variables_in_variables_out_and_differentiable():
    """d/dx of the 2nd Taylor derivative of tanh along 1 is the 3rd derivative; d/dv too."""
    op = sg.Ops()
    x, v = op.var(X, name="x"), op.var(np.ones_like(X), name="v")
    out = sg.taylor(lambda x: x.tanh(), x, v, 3)
    assert all(isinstance(d, sg.Variable) and d.ops is op for d in out)
    want = tanh_derivatives(X, 3)
    gx, gv = op.grad(out[2].sum(), [x, v])
    np.testing.assert_allclose(gx.value, want[3], rtol=1e-12)
    np.testing.assert_allclose(gv.value, 2 * want[2], rtol=1e-12)   # D2 = f'' v^2


def test_inside_grad():
    """grad of x -> D1 of sin along 1 (= cos x) is -sin x."""
    g = sg.grad(lambda x: sg.taylor(lambda y: y.sin(), x, np.ones_like(X), 1)[1].sum())(X)
    np.testing.assert_allclose(g, -np.sin(X), rtol=1e-12)


# ---------------------------------------------------------------- every registered rule

# the differentiable primitives without a Taylor rule (``taylor=None`` in their records), and
# why; every other differentiable primitive must have one, found on its record by the registry
# walk below, so a new primitive with a rule is tested here without editing this file
NO_TAYLOR: dict[str, str] = {}     # (eigh, svd, qr, pinv, lstsq: by nested jvps)


def _registry_params(with_rule: bool) -> list:
    params = []
    for prim in sg.REGISTRY.values():
        if not prim.differentiable or (prim.taylor is not None) != with_rule:
            continue
        for i, case in enumerate(prim.cases):
            params.append(pytest.param(prim, case, id=f"{prim.name}-{i}"))
    return params or [pytest.param(None, None, marks=pytest.mark.skip("none"), id="none")]


def test_only_the_listed_primitives_lack_a_rule():
    """A differentiable primitive has a Taylor rule on its record unless NO_TAYLOR names it."""
    without = {p.name for p in sg.REGISTRY.values() if p.differentiable and p.taylor is None}
    assert without == set(NO_TAYLOR)


def test_rules_live_on_the_records():
    """No name-keyed table: each rule is the record's ``taylor`` field, a callable."""
    import simplegrad.engine.taylor as tm
    assert not hasattr(tm, "RULES")
    for prim in sg.REGISTRY.values():
        assert prim.taylor is None or callable(prim.taylor), prim.name
    assert sg.REGISTRY["exp"].taylor is not sg.REGISTRY["log"].taylor


def _packed(prim, case, rng):
    """f of one vector x holding every input, x0 and a random direction v."""
    xs = sample(prim, case, rng)
    sizes = [a.size for a in xs]
    x0 = np.concatenate([a.ravel() for a in xs]) if xs else np.zeros(0)
    apply = applying(prim, case)

    def f(x):
        parts, at = [], 0
        for a, n in zip(xs, sizes):
            parts.append(x[at:at + n].reshape(a.shape))
            at += n
        return apply(*parts)
    return f, x0, rng.normal(size=x0.shape)


@pytest.mark.parametrize("prim, case", _registry_params(with_rule=False))
def test_primitive_without_a_rule_fails_clearly(prim, case, rng):
    f, x0, v = _packed(prim, case, rng)
    with pytest.raises(sg.NotDifferentiableError, match=f"primitive '{prim.name}'.*no Taylor"):
        sg.taylor(f, x0, v, 2)


@pytest.mark.parametrize("prim, case", _registry_params(with_rule=True))
def test_rule_matches_nested_jvps(prim, case, rng):
    """All inputs packed in one vector x, moved along a random v: orders 1..4 against nested
    forward sweeps."""
    f, x0, v = _packed(prim, case, rng)
    got = sg.taylor(f, x0, v, ORDER_VS_JVP)
    op = sg.Ops()
    xv = op.var(x0)
    y = f(xv)
    for k in range(ORDER_VS_JVP + 1):
        np.testing.assert_allclose(got[k], y.value, rtol=1e-9, atol=1e-9,
                                   err_msg=f"{prim.name}, order {k}")
        y = op.jvp(y, xv, v)


def _recorded(f, x0, v, order):
    """sg.taylor's coefficients computed on Variables (every coefficient recorded)."""
    with sg.Ops() as op:
        got = sg.taylor(f, op.var(x0), op.var(v, requires_grad=False), order)
        return [np.asarray(c.value) for c in got]


@pytest.mark.parametrize("prim, case", [
    p for p in _registry_params(with_rule=True)
    if not getattr(p.values[0].taylor, "recorded", False)])     # (by nested jvps: recorded)
def test_values_equal_the_recorded_rule_bit_for_bit(prim, case, rng):
    """On arrays the rules take the value-only path (numpy's operators, term by term); its
    coefficients are those of the same rule recorded on Variables, exactly."""
    f, x0, v = _packed(prim, case, rng)
    for k, (a, b) in enumerate(zip(sg.taylor(f, x0, v, 5), _recorded(f, x0, v, 5))):
        np.testing.assert_array_equal(a, b, err_msg=f"{prim.name}, order {k}")


@pytest.mark.parametrize("line", [False, True], ids=["x*x+0.5", "x"])
@pytest.mark.parametrize("name", ["tanh", "tan", "exp", "sin", "log", "sqrt", "sigmoid",
                                  "arctan"])
def test_at_a_point_values_equal_the_recorded_rule_bit_for_bit(name, line):
    """At a point the value-only path computes with numpy scalars (tanh and tan with Python
    floats): the same values, along a line (x: one moving coefficient) or a curve."""
    def f(x):
        return getattr(x if line else x * x + 0.5, name)()
    x0, v = np.asarray(0.3), np.asarray(1.0)
    for k, (a, b) in enumerate(zip(sg.taylor(f, x0, v, 12), _recorded(f, x0, v, 12))):
        assert a.shape == () and a.dtype == np.float64
        np.testing.assert_array_equal(a, b, err_msg=f"{name}, order {k}")


@pytest.mark.parametrize("name", ["tanh", "tan"])
def test_at_a_point_along_a_line_past_the_table_of_inverses_bit_for_bit(name):
    """Along a line tanh's and tan's loop reads 1 / k from a table up to order 64 and forms it
    past that: at order 70 both give the recorded rule's values exactly."""
    def f(x):
        return getattr(x, name)()
    x0, v = np.asarray(0.3), np.asarray(0.25)
    for k, (a, b) in enumerate(zip(sg.taylor(f, x0, v, 70), _recorded(f, x0, v, 70))):
        np.testing.assert_array_equal(a, b, err_msg=f"{name}, order {k}")


_AFTER_TANH = {
    "tanh(x) * 3": lambda x: x.tanh() * 3.0,
    "tanh(tanh(x))": lambda x: x.tanh().tanh(),
    "exp(tanh(x))": lambda x: x.tanh().exp(),
    "tanh(x) * tan(x)": lambda x: x.tanh() * x.tan(),
    "tanh(x) * ones(3)": lambda x: x.tanh() * np.ones(3),
    "tanh(x) as float32": lambda x: x.tanh().astype(np.float32) * np.float32(2.0),
}


@pytest.mark.parametrize("name", list(_AFTER_TANH))
def test_at_a_point_the_coefficients_held_as_floats_flow_on_bit_for_bit(name):
    """tanh's coefficients at a point come back as Python floats (float64 values), which the
    walk hands the next rule as numpy float64 scalars: every entry after it, on a point, an
    array or in float32, gives the recorded rule's values and dtype exactly."""
    f = _AFTER_TANH[name]
    x0, v = np.asarray(0.3), np.asarray(1.0)
    for k, (a, b) in enumerate(zip(sg.taylor(f, x0, v, 12), _recorded(f, x0, v, 12))):
        assert type(a) is np.ndarray and a.dtype == b.dtype and a.shape == b.shape, (k, a, b)
        np.testing.assert_array_equal(a, b, err_msg=f"{name}, order {k}")


def test_at_a_point_a_derivative_that_overflows_warns_as_numpy_does():
    """Finite coefficients whose derivatives (c_k k!) overflow: at a point, as on a
    one-element array, inf with numpy's overflow warning (the coefficient held as a Python
    float is multiplied as a numpy scalar)."""
    def f(x):
        return x.tanh()
    got, caught = {}, {}
    for where, x0, v in (("point", np.asarray(0.3), np.asarray(3.0)),
                         ("array", np.array([0.3]), np.array([3.0]))):
        with warnings.catch_warnings(record=True) as caught[where]:
            warnings.simplefilter("always")
            got[where] = sg.taylor(f, x0, v, 170)
    for where in caught:
        assert caught[where] and {type(w.message) for w in caught[where]} == {RuntimeWarning}
        assert all("overflow" in str(w.message) for w in caught[where])
    assert np.isfinite(got["point"][150]) and np.isinf(got["point"][170])
    for k, (a, b) in enumerate(zip(got["point"], got["array"])):
        np.testing.assert_array_equal(a, b[0], err_msg=f"order {k}")


@pytest.mark.parametrize("n", [10, 16, 20])
def test_taylor_derivative_of_tanh_at_a_point_to_order_20(n):
    """The issue-32 workload, d^n tanh at 0.3 from a number: float64, within 1e-13 of the exact
    polynomial in tanh (the value-only path runs the recurrence on Python floats there)."""
    want = tanh_derivatives(np.array([0.3]), n)[n][0]
    for f in (np.tanh, lambda x: x.tanh()):
        got = sg.taylor_derivative(f, n)(0.3)
        assert type(got) is np.ndarray and got.shape == () and got.dtype == np.float64
        assert abs(got - want) <= 1e-13 * abs(want), (n, got, want)


def test_at_a_point_an_overflow_warns_as_numpy_does():
    """Coefficients that overflow at a point: the value-only path's numpy warning and values
    (inf, nan), as on a one-element array."""
    def f(x):
        return x.tanh()
    v = 1e200
    with warnings.catch_warnings(record=True) as at_point:
        warnings.simplefilter("always")
        got = sg.taylor(f, np.asarray(0.3), np.asarray(v), 6)
    with warnings.catch_warnings(record=True) as on_array:
        warnings.simplefilter("always")
        want = sg.taylor(f, np.array([0.3]), np.array([v]), 6)
    for caught in (at_point, on_array):
        assert {type(w.message) for w in caught} == {RuntimeWarning}
        assert any("overflow" in str(w.message) for w in caught)
    for k, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(a, b[0], err_msg=f"order {k}")
    assert not np.isfinite(got[-1])


# ---------------------------------------------------------------- errors


def test_missing_rule_names_the_primitive(monkeypatch):
    @sg.custom_vjp
    def square(x):
        return x * x

    @square.defvjp
    def _(g, out, x):
        return (g * 2 * x,)

    # a custom function's series goes through its rule (nested jvps): x^2, 2x, 2
    got = sg.taylor(lambda x: square(x), X, np.ones_like(X), 2)
    np.testing.assert_allclose(got[1], 2 * X, rtol=1e-12)
    np.testing.assert_allclose(got[2], 2.0, rtol=1e-12)
    monkeypatch.setattr(sg.REGISTRY["sin"], "taylor", None)
    with pytest.raises(sg.NotDifferentiableError, match="primitive 'sin'.*no Taylor rule"):
        sg.taylor(lambda x: x.sin(), X, np.ones_like(X), 2)


@pytest.mark.parametrize("order", [-1, 1.5, True, "2"])
def test_bad_order(order):
    with pytest.raises(sg.ArgumentError, match="taylor: order"):
        sg.taylor(lambda x: x, X, X, order)


def test_shape_mismatch():
    with pytest.raises(sg.ShapeError, match="taylor: v has shape"):
        sg.taylor(lambda x: x, X, np.ones(2), 1)
