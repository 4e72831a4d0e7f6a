"""Value-only sweeps without needless arrays, and without writing what is not theirs.

- Every fused rule of the registry (``Primitive.vjp_fused``) against the derivative rule it
  stands for, run on plain values, on every registry case with an input of the output's shape
  (stacked along a new leading axis to ``FUSED_SIZE`` entries, the fewest a fused rule takes):
  within 1 ulp (``np.testing.assert_array_max_ulp``), into a new array of its own, its
  arguments untouched; or, for a rule that only hands an input on (mul under the cotangent of
  a total), that input read-only, exactly the rule's value.
- Every registered rule given the cotangent of a total as a broadcast view (strides 0, the
  number 1) answers what it answers for the same ones materialised, bit for bit, and writes
  into neither.
- Gradients whose cotangents alias a user's array or a value kept on the tape (``x * w``,
  ``tanh(x) * x``, a value used twice, an intermediate asked for): the user's arrays and every
  kept value are unchanged after the sweep (and a second sweep answers the same), and each
  gradient matches its closed form written in numpy.
- The peak of ``sum(tanh(x) * x)``'s value and gradient: x, tanh(x) and one buffer, as numpy
  written by hand holds (tracemalloc counts numpy's buffers exactly).
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from test_primitives import case_id, sample
from test_training_memory import collector_paused

import simplegrad as sg
from simplegrad.primitives import VALUES
from simplegrad.primitives.core import FUSED_SIZE, broadcast_vjp

# ---------------------------------------------------------------- fused rules

def _fused_params() -> list:
    params = []
    for prim in sg.REGISTRY.values():
        if prim.vjp_fused is None:
            continue
        for case in prim.cases:
            for i, f in enumerate(prim.vjp_fused):
                if f is not None:
                    params.append(pytest.param(prim, case, i,
                                               id=f"{prim.name}-{case_id(case)}-input{i}"))
    return params


def test_some_primitive_has_a_fused_rule() -> None:
    assert _fused_params()


@pytest.mark.parametrize(("prim", "case", "i"), _fused_params())
def test_fused_rule_is_the_rule_within_one_ulp(prim: sg.Primitive, case: sg.Case, i: int,
                                               rng: np.random.Generator) -> None:
    small = np.broadcast_shapes(*case.shapes)
    stack = -(-FUSED_SIZE // max(int(np.prod(small)), 1))     # (elementwise: any leading axis)
    rank = max(len(s) for s in case.shapes)     # (lower ranks keep numpy's alignment)
    big = sg.Case(tuple((stack, *(1,) * (rank - len(s)), *s) for s in case.shapes), case.attrs,
                  case.domain)
    xs = sample(prim, big, rng)
    out = np.asarray(prim.forward(*xs, **case.attrs))
    assert out.size >= FUSED_SIZE
    if xs[i].shape != out.shape:
        pytest.skip("the input is broadcast: the sweep uses the rule")
    g = np.asarray(rng.standard_normal(out.shape), dtype=out.dtype)
    kept = [a.copy() for a in (g, out, *xs)]
    fused = prim.vjp_fused[i](g, out, *xs, **case.attrs)
    rule = prim.vjp_same[1][i]      # the derivative rule, with nothing to unbroadcast
    if fused is None:   # a rule that hands an input on, under the cotangent of a total only
        g = np.broadcast_to(np.ones((), out.dtype), out.shape)
        fused = prim.vjp_fused[i](g, out, *xs, **case.attrs)
        if all(a.shape != out.shape for k, a in enumerate(xs) if k != i):
            assert fused is None    # (no other input is the cotangent: nothing to hand on)
            return
        expected = np.asarray(rule(VALUES, g, out, *xs, **case.attrs))
        assert type(fused) is np.ndarray and not fused.flags.writeable
        assert any(np.shares_memory(fused, a) for a in xs)
        assert fused.dtype == expected.dtype
        np.testing.assert_array_equal(fused, expected)      # (exactly: a value handed on)
        for a, before in zip((out, *xs), kept[1:]):
            np.testing.assert_array_equal(a, before)
        return
    expected = np.asarray(rule(VALUES, g, out, *xs, **case.attrs))
    assert type(fused) is np.ndarray and fused.shape == expected.shape
    assert fused.dtype == expected.dtype
    np.testing.assert_array_max_ulp(fused, expected, maxulp=1)
    # a new buffer of its own: the sweep may add into it in place
    assert fused.base is None and fused.flags.writeable
    for a in (g, out, *xs):
        assert not np.shares_memory(fused, a)
    for a, before in zip((g, out, *xs), kept):
        np.testing.assert_array_equal(a, before)


def test_fused_rule_declines_what_it_does_not_cover(rng: np.random.Generator) -> None:
    """A fused rule answers None (the sweep calls the rule) for a cotangent of another dtype or
    shape, a value that is not a plain array, or fewer than FUSED_SIZE entries; it answers
    for the cotangent of a total (ones broadcast), which every fused rule covers."""
    n = FUSED_SIZE
    for prim in sg.REGISTRY.values():
        for f in prim.vjp_fused or ():
            if f is None:
                continue
            out = rng.uniform(-0.5, 0.5, (n,))
            k = len(prim.vjp)       # (an input of the output's shape for each)

            def unit(m, dtype=np.float64):
                return np.broadcast_to(np.ones((), dtype), (m,))
            assert f(unit(n, np.float32), out, *[out] * k) is None
            assert f(np.broadcast_to(1.0, (2, n)), out, *[out] * k) is None
            assert f(unit(n), list(out), *[list(out)] * k) is None
            assert f(unit(n - 1), out[1:], *[out[1:]] * k) is None
            assert f(unit(n), out, *[out] * k) is not None


# ---------------------------------------------------------------- the cotangent of a total

def _ones_params() -> list:
    params = []
    for prim in sg.REGISTRY.values():
        if not prim.common or prim.variadic or not prim.differentiable:
            continue
        for case in prim.cases:
            if case.conditions:
                continue
            params.append(pytest.param(prim, case, id=f"{prim.name}-{case_id(case)}"))
    return params


@pytest.mark.parametrize(("prim", "case"), _ones_params())
def test_broadcast_ones_cotangent_is_the_materialised_ones(prim: sg.Primitive, case: sg.Case,
                                                          rng: np.random.Generator) -> None:
    """What the cotangent of ``sum`` is (the scalar 1 broadcast, strides 0) gives every rule's
    answer for ``np.ones``, bit for bit, also where a rule passes it on without arithmetic
    (mul's ``g * y`` is ``y``): nothing is computed differently, only copies are saved."""
    xs = sample(prim, case, rng)
    with np.errstate(all="ignore"):
        out = prim.forward(*xs, **case.attrs)
    if isinstance(out, np.generic):     # (a reduction to a scalar: its 0-d array)
        out = np.asarray(out)
    if not isinstance(out, np.ndarray) or out.dtype.kind not in "fc":
        pytest.skip("not one float array out")
    ones = np.ones(out.shape, out.dtype)
    view = np.broadcast_to(np.ones((), out.dtype), out.shape)
    kept = [x.copy() for x in xs]
    for rule in prim.vjp:
        if rule is None:
            continue
        with np.errstate(all="ignore"):
            expected = rule(VALUES, ones, out, *xs, **case.attrs)
            got = rule(VALUES, view, out, *xs, **case.attrs)
        if expected is None:
            assert got is None
            continue
        expected, got = np.asarray(expected), np.asarray(got)
        assert got.shape == expected.shape and got.dtype == expected.dtype
        assert np.array_equal(got, expected, equal_nan=True)
        assert np.array_equal(np.signbit(got.real), np.signbit(expected.real))
        if got.flags.writeable:     # an array of its own, or one handed on read-only
            for x in xs:
                assert not np.shares_memory(got, x)
    np.testing.assert_array_equal(ones, 1)
    for x, before in zip(xs, kept):
        np.testing.assert_array_equal(x, before)


def test_times_a_total_is_the_operand_read_only() -> None:
    """mul's fused rule given the broadcast 1 hands the other operand on as a read-only view
    (from FUSED_SIZE entries on): no copy, and equal to ``1.0 * y`` also at -0.0, infinities
    and nan; below that size, or under another cotangent, it declines and the rule computes
    the product, a new array of the same value."""
    mul = sg.REGISTRY["mul"]
    small = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, 5e-324, -1.5])
    ones_small = np.broadcast_to(np.ones(()), small.shape)
    assert mul.vjp_fused[0](ones_small, small, small, small) is None
    got = mul.vjp[0](VALUES, ones_small, small, small, small)
    assert got.flags.writeable and not np.shares_memory(got, small)
    assert np.array_equal(np.signbit(got), np.signbit(small))
    y = np.resize(small, FUSED_SIZE)
    x = np.linspace(-1.0, 1.0, y.size)
    ones = np.broadcast_to(np.ones(()), y.shape)
    with np.errstate(invalid="ignore"):
        out = x * y
    for i, fused in enumerate(mul.vjp_fused):
        other = (y, x)[i]
        got = fused(ones, out, x, y)
        assert np.shares_memory(got, other) and not got.flags.writeable
        expected = np.multiply(ones, other)
        assert np.array_equal(got, expected, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(expected))
    # a number other than 1, another dtype or shape: the product, as before
    twos = np.broadcast_to(np.full((), 2.0), y.shape)
    assert mul.vjp_fused[0](twos, out, x, y) is None
    got = mul.vjp[0](VALUES, twos, out, x, y)
    assert got.flags.writeable and not np.shares_memory(got, y)
    np.testing.assert_array_equal(got, 2.0 * y)
    wide = broadcast_vjp(lambda o, g, out, x, y: o.mul(g, y), 0, 2)
    assert wide(VALUES, np.ones((2, 7)), None, np.ones((2, 7)), small).shape == (2, 7)


# ---------------------------------------------------------------- nothing else is written

def _cases() -> dict[str, tuple[Callable, Callable]]:
    """Functions of (x, w) whose value-only sweeps hand on aliases of x, w and kept values, each
    with its gradient in x and w written in numpy."""
    def sech2(x):
        return 1 - np.tanh(x) ** 2

    return {
        "tanh(x) * x": (lambda x, w: (x.tanh() * x).sum(),
                        lambda x, w: (np.tanh(x) + x * sech2(x), 0 * w)),
        "x * w": (lambda x, w: (x * w).sum(), lambda x, w: (w, x)),
        "x * x": (lambda x, w: (x * x).sum(), lambda x, w: (2 * x, 0 * w)),
        "x * w + tanh(x) * w": (lambda x, w: (x * w + x.tanh() * w).sum(),
                                lambda x, w: (w + w * sech2(x), x + np.tanh(x))),
        "tanh(x) + x": (lambda x, w: (x.tanh() + x).sum(),
                        lambda x, w: (sech2(x) + 1, 0 * w)),
        # (a + x)'s cotangent, one array, goes to a and to x: a's total must not be it
        "tanh(x) * w + (tanh(x) + x) * 2": (
            lambda x, w: (lambda a: (a * w + (a + x) * 2.0).sum())(x.tanh()),
            lambda x, w: (w * sech2(x) + 2 * sech2(x) + 2, np.tanh(x))),
        # the same, the other way round: (a + x)'s cotangent is added to a's
        "(tanh(x) + x) * 2 + tanh(x) * w": (
            lambda x, w: (lambda a: ((a + x) * 2.0 + a * w).sum())(x.tanh()),
            lambda x, w: (w * sech2(x) + 2 * sech2(x) + 2, np.tanh(x))),
        "(x + x) * w": (lambda x, w: ((x + x) * w).sum(), lambda x, w: (2 * w, 2 * x)),
        "tanh(tanh(x)) * x * w": (
            lambda x, w: (x.tanh().tanh() * x * w).sum(),
            lambda x, w: (np.tanh(np.tanh(x)) * w
                          + x * w * sech2(np.tanh(x)) * sech2(x),
                          np.tanh(np.tanh(x)) * x)),
        "tanh(x) * tanh(x) * w": (
            lambda x, w: (x.tanh() * x.tanh() * w).sum(),
            lambda x, w: (2 * np.tanh(x) * sech2(x) * w, np.tanh(x) ** 2)),
    }


CASES = _cases()


SHAPE = (64, -(-FUSED_SIZE // 64))     # large enough for the fused rules


@pytest.fixture
def xw(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.normal(size=SHAPE), rng.normal(size=SHAPE)


@pytest.mark.parametrize("name", list(CASES))
def test_transforms_write_no_argument(name: str, xw: tuple) -> None:
    f, closed = CASES[name]
    x, w = xw
    x0, w0 = x.copy(), w.copy()
    expected = closed(x0, w0)
    for run in (lambda: sg.value_and_grad(f, argnums=(0, 1))(x, w)[1],
                lambda: sg.grad(f, argnums=(0, 1))(x, w),
                lambda: sg.grad(lambda x: f(x, w))(x)):
        gs = run()
        gs = gs if isinstance(gs, tuple) else (gs,)
        for g, e in zip(gs, expected):
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
            # arrays the caller owns: none is (a view of) an argument, none another gradient
            assert g.flags.writeable and not np.shares_memory(g, x)
            assert not np.shares_memory(g, w)
        if len(gs) == 2:
            assert not np.shares_memory(gs[0], gs[1])
        np.testing.assert_array_equal(x, x0)
        np.testing.assert_array_equal(w, w0)


def _kept(op: sg.Ops) -> list[tuple[Any, np.ndarray]]:
    """Every value the tape keeps (its entries' and their leaves'), with a copy of it."""
    found = {}
    for e in op.tape.entries:
        for v in (e, *e.inputs):
            if isinstance(getattr(v, "raw", None), np.ndarray):
                found[id(v.raw)] = v.raw
    return [(value, value.copy()) for value in found.values()]


@pytest.mark.parametrize("name", list(CASES))
def test_sweeps_write_no_kept_value(name: str, xw: tuple) -> None:
    """op.grad without a graph, twice, and backward: the tape's values are what the forward
    left, and the second sweep answers what the first did."""
    f, closed = CASES[name]
    expected = closed(*xw)
    op = sg.Ops()
    x, w = op.var(xw[0], name="x"), op.var(xw[1], name="w")
    L = f(x, w)
    kept = _kept(op)
    assert kept
    first = [g.value.copy() for g in op.grad(L, [x, w], create_graph=False)]
    second = [g.value for g in op.grad(L, [x, w], create_graph=False)]
    for a, b, e in zip(first, second, expected):
        np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(a, b)
    x.grad = w.grad = None      # (op.grad set them: backward would add to them)
    L.backward()
    for v, e in zip((x, w), expected):
        a = np.zeros_like(e) if v.grad is None else v.grad.value
        np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-12)
    for value, before in kept:
        np.testing.assert_array_equal(value, before)


def test_an_intermediate_asked_for_keeps_its_gradient(rng: np.random.Generator) -> None:
    """A cotangent handed back for an intermediate (a fused rule's buffer) is not added into
    while the sweep goes on below it."""
    x0 = rng.normal(size=SHAPE)
    op = sg.Ops()
    x = op.var(x0, name="x")
    u = x.tanh()
    L = (u.tanh() * x).sum()
    gx, gu = op.grad(L, [x, u], create_graph=False)
    t, tt = np.tanh(x0), np.tanh(np.tanh(x0))
    np.testing.assert_allclose(gu.value, x0 * (1 - tt ** 2), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gx.value, tt + x0 * (1 - tt ** 2) * (1 - t ** 2),
                               rtol=1e-12, atol=1e-12)


def test_fused_and_unfused_sweeps_agree_bitwise(rng: np.random.Generator) -> None:
    """A value-only sweep (fused tanh, the total's 1 passed on, sums in place) gives the
    recorded sweep's gradient exactly: the same operations on the same values."""
    x0 = rng.normal(size=FUSED_SIZE)
    for f in (CASES["tanh(x) * x"][0], CASES["tanh(tanh(x)) * x * w"][0]):
        values = sg.grad(f)(x0, x0[::-1].copy())
        op = sg.Ops(simplify=False)
        x = op.var(x0)
        recorded = op.grad(f(x, op.var(x0[::-1].copy())), x).value
        assert x0.size >= FUSED_SIZE
        np.testing.assert_array_equal(values, recorded)


# ---------------------------------------------------------------- the peak

def test_tanh_times_x_peaks_at_numpys_three_arrays(rng: np.random.Generator) -> None:
    """value_and_grad of sum(tanh(x) * x): beside x, tanh(x) and one more array (the forward's
    product, then the gradient's buffer), the peak numpy by hand reaches (t, the gradient)."""
    x = rng.normal(size=10**5)
    vg = sg.value_and_grad(lambda x: (x.tanh() * x).sum())
    vg(x)
    with collector_paused():
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            value, g = vg(x)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
    t = np.tanh(x)
    np.testing.assert_array_equal(g, t + x * (1 - t * t))
    assert peak <= 2 * x.nbytes + 64 * 1024, peak / x.nbytes
