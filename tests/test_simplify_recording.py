"""Transforms and ``sg.trace`` record with the rules of ``sg.simplify``; a user's Ops does not.

Oracles: the same transform run on Variables of a user's plain ``sg.Ops()`` (it records on
that Ops, exactly as told), which must give the same values to 1e-15 (the rules are exact);
closed forms for the nested tanh derivatives; hand-counted entries for the printed traces.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from test_training_memory import collector_paused

import simplegrad as sg
from simplegrad.transforms.arguments import context
from tests.test_primitives import apply_with, case_id, real_view, sample

EXACT = {"rtol": 1e-15, "atol": 0.0}


def close(got: np.ndarray, want: np.ndarray) -> None:
    """Equal to 1e-15 of the largest entry: shared entries can change the order in which a
    sweep adds up cotangents, which moves an entry that cancels by an ulp of the others."""
    np.testing.assert_allclose(got, want, rtol=0.0, atol=1e-15 * np.max(np.abs(want)))
X = np.array([0.3, -1.2, 0.7])
W = np.array([[0.5, -0.2, 0.1], [0.3, 0.8, -0.6]])

FUNCTIONS = {
    "tanh-chain": lambda x: (x * x + 1.0).log().tanh().sum(),
    "sin-times-x": lambda x: (x.sin() * x * 1.0 + 0.0).sum(),
    "repeated-products": lambda x: ((x * x) * (x * x) - x * -1.0).sum(),
    "matrix": lambda x: ((W @ x).tanh() * (W @ x)).sum(),
}

TRANSFORMS = {
    "grad": lambda f, x: sg.grad(f)(x),
    "value_and_grad": lambda f, x: sg.value_and_grad(f)(x)[1],
    "vjp": lambda f, x: sg.vjp(lambda y: (f(y) * y).sum() * y, x)[1](X + 0.5)[0],
    "jvp": lambda f, x: sg.jvp(sg.grad(f), (x,), (X - 0.25,))[1],
    "hessian": lambda f, x: sg.hessian(f)(x),
    "jacobian-rev": lambda f, x: sg.jacobian(sg.grad(f), mode="rev")(x),
    "jacobian-fwd": lambda f, x: sg.jacobian(sg.grad(f), mode="fwd")(x),
    "hvp": lambda f, x: sg.hvp(f, x, X[::-1]),
    "grad-of-grad": lambda f, x: sg.grad(lambda y: sg.grad(f)(y).sum())(x),
    "vmap-grad": lambda f, x: sg.vmap(sg.grad(f))(np.stack([x, 2.0 * x])),
    # two recorded passes or more: the rules apply on the transforms' own tape
    "third-order": lambda f, x: sg.grad(lambda y: sg.grad(
        lambda z: sg.grad(f)(z).sum())(y).sum())(x),
    "jacobian-of-grad-of-grad": lambda f, x: sg.jacobian(
        sg.grad(lambda y: sg.grad(f)(y).sum()), mode="rev")(x),
    "jvp-of-grad-of-grad": lambda f, x: sg.jvp(
        sg.grad(lambda y: sg.grad(f)(y).sum()), (x,), (X - 0.25,))[1],
}


def _value(r):
    r = r[0] if isinstance(r, tuple) else r
    return np.asarray(getattr(r, "value", r))


@pytest.mark.parametrize("tname", list(TRANSFORMS))
@pytest.mark.parametrize("fname", list(FUNCTIONS))
def test_simplified_transforms_give_the_plain_tapes_values(fname, tname):
    f, T = FUNCTIONS[fname], TRANSFORMS[tname]
    simplified = np.asarray(T(f, X))
    op = sg.Ops()               # a user's Ops: the transform records on it, plainly
    plain = _value(T(f, op.var(X)))
    assert not op.simplify
    assert simplified.shape == plain.shape
    close(simplified, plain)


def test_a_transforms_own_ops_simplifies_from_its_derivatives_and_a_users_does_not():
    ops, nested = context("grad", (X,))
    assert nested is False and ops._plain_passes == 1 and not ops.simplify
    op = sg.Ops()
    ops, nested = context("grad", (op.var(X),))
    assert not ops.simplify and nested is True
    assert sg.trace(lambda x: x * 1.0, X).simplify


def test_a_transforms_own_ops_applies_the_rules_in_its_recorded_passes_from_the_second():
    rec = sg.Ops(simplify=True, from_derivatives=True)     # what a transform makes
    x = rec.var(np.array([0.5, 1.5]), name="x")
    g1 = rec.grad((x * x).sin().sum(), x)        # the first recorded pass: plain
    assert not rec.simplify
    first = rec.format_trace()
    assert "v7 = v6 * x\nv8 = v6 * x\nv9 = v7 + v8\n" in first     # the product rule, twice
    g2 = rec.grad(g1.sum(), x)                   # the second: the rules, then plain again
    second = rec.format_trace()[len(first):]
    assert "v12 = v6 * 2.0" in second and second.count(" * x") == 1
    assert not type(rec)._rules and x * 1.0 is not x       # outside a pass: as written
    assert rec.simplify             # its sweeps are pruned from the second recorded pass on
    c = 2.0 * np.array([0.5, 1.5])
    close(g1.value, np.cos(c * 0.5 * c / 2.0) * c)       # d/dx sin(x^2) = 2x cos(x^2)
    close(g2.value, 2.0 * np.cos(0.25 * c * c) - c * c * np.sin(0.25 * c * c))
    op = sg.Ops(simplify=True)      # a user's simplifying Ops: the rules from its first entry
    y = op.var(X)
    assert y * 1.0 is y and type(op.recorder)._rules


def test_an_unrolled_loop_of_gradient_steps_records_each_fresh_pass_plainly():
    rec = sg.Ops(simplify=True, from_derivatives=True)     # what a transform makes
    x = rec.var(np.array([0.5, 1.5]), name="x")
    fast, passes = x, []
    for _ in range(3):          # MAML's inner loop: each step's gradient in a fresh copy
        q = fast * 1.0          # (the identity entry a nested sg.grad records for its input)
        before = len(rec.tape)
        g = rec.grad((q * q).sin().sum(), q)
        assert not rec.simplify and not type(rec)._rules
        passes.append([e.prim.name for e in rec.tape[before:] if e.prim is not None])
        fast = q - 0.1 * g
    # the product rule of q * q as written every time (the rules make it g * q * 2.0)
    assert passes[0] == passes[1] == passes[2] and passes[0].count("add") == 1
    meta = rec.grad((fast * fast).sum(), x)     # over the recorded passes: the rules
    assert rec.simplify
    w, c = np.array([0.5, 1.5]), 0.1            # closed form: x -> x - 0.1 * 2x cos(x^2)
    d = np.ones(2)
    for _ in range(3):
        d *= 1.0 - c * (2.0 * np.cos(w * w) - 4.0 * w * w * np.sin(w * w))
        w = w - c * 2.0 * w * np.cos(w * w)
    np.testing.assert_allclose(meta.value, 2.0 * w * d, rtol=1e-13)


def tanh_derivative(n: int, x: float) -> float:
    """d^n tanh / dx^n at x, from the polynomial recurrence in t = tanh x: P' = (1 - t^2) P'."""
    p = np.polynomial.Polynomial([0.0, 1.0])         # P_0(t) = t
    for _ in range(n):
        p = p.deriv() * np.polynomial.Polynomial([1.0, 0.0, -1.0])
    return float(p(np.tanh(x)))


def test_nested_grads_record_at_most_twice_the_entries_per_order():
    g, lengths = (lambda x: x.tanh()), []
    for n in range(1, 9):
        g = sg.grad(g)
        lengths.append(len(sg.trace(g, 0.3).tape))
        np.testing.assert_allclose(g(np.array(0.3)), tanh_derivative(n, 0.3), rtol=1e-12)
    growth = [b / a for a, b in zip(lengths, lengths[1:])]
    assert max(growth) <= 2.0, (lengths, growth)
    assert lengths[-1] < 400        # 3,150 entries when recorded plainly


def test_a_large_constant_is_never_shared_with_a_freed_one():
    # a large constant's key is its identity: an array freed after one entry copied it may
    # leave its id to the next one, which must not find the first entry
    op = sg.Ops(simplify=True)
    x = op.var(np.ones(5000))
    got = [float((x * np.full(5000, float(k))).value[0]) for k in range(12)]
    assert got == [float(k) for k in range(12)]

    def f(x):
        return sum((x * np.full(5000, float(k))).sum() for k in range(6))
    np.testing.assert_allclose(sg.grad(f)(np.ones(5000)), np.full(5000, 15.0), **EXACT)
    np.testing.assert_allclose(sg.trace(f, np.ones(5000)).outputs[0].value, 75000.0, **EXACT)


@pytest.mark.parametrize("n", [3, 5000])
def test_a_constant_the_caller_writes_to_is_not_shared(n):
    c = np.full(n, 2.0)
    op = sg.Ops(simplify=True)
    x = op.var(np.ones(n))
    a = x * c
    c[:] = 3.0                  # the caller's array changed: a new entry, a new value
    b = x * c
    assert a is not b and a.value[0] == 2.0 and b.value[0] == 3.0
    assert (x * c is b) == (n == 3)     # small constants by value; large ones never


def test_constants_of_any_form_under_a_simplifying_transform():
    def f(x):
        return (x * [1.0, 2.0, 3.0] + np.float32(0.5) * x + (1, 1, 1)).sum()
    np.testing.assert_allclose(sg.grad(f)(X), [1.5, 2.5, 3.5], **EXACT)
    op = sg.Ops(simplify=True)
    x = op.var(X)
    assert x * [1.0, 2.0, 3.0] is x * [1.0, 2.0, 3.0]         # equal small constants share
    assert x * [1.0, 1.0, 1.0] is x


def test_a_simplifying_ops_that_keeps_no_trace_holds_nothing_alive():
    with collector_paused():
        op = sg.Ops(simplify=True, keep_trace=False)
        x = op.var(X)
        y = (x * x).sin()
        gone = weakref.ref(y)
        z = (x * x).sin()       # no table: recorded again, not shared
        assert z is not y
        del y
        assert gone() is None
        del z, x, op
    gc.collect()


def test_the_identity_entry_of_a_transform_is_kept():
    # d/dx [x * d/dy (x * y)] = d/dx [x * x] = 2x: the inner y is its own entry, not x
    np.testing.assert_allclose(sg.grad(lambda x: x * sg.grad(lambda y: x * y)(x))(3.0), 6.0,
                               **EXACT)
    text = sg.trace(sg.grad(lambda x: (x * 1.0).sum()), X).format_trace()
    assert text.splitlines()[1] == "v0 = x.reshape([3])"


def test_a_custom_vjp_rule_under_a_simplifying_transform_gets_a_variable_cotangent():
    seen = []
    cube = sg.custom_vjp(lambda x: x * x * x)

    @cube.defvjp
    def _(g, out, x):
        seen.append(isinstance(g, sg.Variable))
        return g * 3.0 * x * x
    np.testing.assert_allclose(sg.hessian(lambda x: cube(x).sum())(X), np.diag(6.0 * X),
                               rtol=1e-14)
    np.testing.assert_allclose(sg.grad(lambda x: sg.grad(lambda y: cube(y).sum())(x).sum())(X),
                               6.0 * X, rtol=1e-14)
    assert seen and all(seen)


def test_the_trace_of_a_gradient_is_recorded_simplified():
    t = sg.trace(sg.grad(lambda x: (x * x).sin().sum()), np.array([1.0, 2.0]))
    raw = t.format_trace()
    # the product rule's two equal terms are one entry, added to itself as "* 2.0"; the
    # seed of ones multiplies out; cos(x * x) is recorded once
    assert "v5 = v4 * v0\nv6 = v5 * 2.0\n" in raw
    assert raw.count(".cos()") == 1 and "expand" not in raw
    assert t.format_trace(raw=False).splitlines()[-2:] == ["dv3_dx = v6", "-" * 18]
    plain = sg.Ops()
    x = plain.var(np.array([1.0, 2.0]), name="x")
    sg.grad(lambda x: (x * x).sin().sum())(x)
    assert "v8 + v9" in plain.format_trace()      # the user's Ops: as told, two products


def test_linearize_and_linear_transpose_record_as_the_rules_write():
    # so that the transpose of linearize's program is the vjp's pullback entry for entry
    _, jvp_fn = sg.linearize(lambda x: (x * x).sum(), X)
    f_t = sg.linear_transpose(jvp_fn, X)
    lines = f_t.program.format(raw=True).splitlines()
    assert [line.split(" = ")[1] for line in lines[1:-1]] == [
        "u.expand([3])", "v5 * [ 0.3000, -1.2000,  0.7000]", "v5 * [ 0.3000, -1.2000,  0.7000]",
        "v6 + v7"]      # x * x pulls back twice (the vjp's own tape shares it: "* 2.0")
    np.testing.assert_allclose(f_t(1.0)[0], 2.0 * X, **EXACT)


def registry_cases() -> list:
    return [pytest.param(prim, case, id=f"{prim.name}-{case_id(case)}")
            for prim in sg.REGISTRY.values() if prim.differentiable for case in prim.cases]


@pytest.mark.filterwarnings("ignore::simplegrad.DisconnectedWarning")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize(("prim", "case"), registry_cases())
def test_second_derivatives_of_every_primitive_are_those_of_the_plain_tape(prim, case, rng):
    """<u, d/dx <w, df/dx>> of every registered primitive in each input, recorded by sg.trace
    (the rules on every entry) and on a user's plain Ops."""
    xs = sample(prim, case, rng)
    for i in range(len(xs)):
        if i in case.conditions:
            continue
        f, (x0,) = real_view(apply_with(prim, case, xs, [i]), [xs[i]])
        y0 = f(sg.Ops().var(x0))
        if not isinstance(y0, sg.Variable):
            continue
        w, u = rng.normal(size=y0.shape), rng.normal(size=np.shape(x0))

        def h(x, f=f, w=w, u=u):
            return sg.grad(lambda y: (sg.grad(lambda z: (f(z) * w).sum())(y) * u).sum())(x)
        try:
            want = h(sg.Ops().var(x0)).value
        except sg.NotDifferentiableError:
            with pytest.raises(sg.NotDifferentiableError):
                sg.trace(h, x0)
            continue
        got = sg.trace(h, x0).outputs[0].value
        if np.all(np.isfinite(want)):
            close(got, want)
        else:
            np.testing.assert_array_equal(got, want)
