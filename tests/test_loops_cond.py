"""sg.cond and sg.switch: one entry holding the branches, against closed forms and numpy, at
orders 1-3, under vmap and jit, and on plain arrays."""

import numpy as np
import pytest

import simplegrad as sg


def piecewise(x):
    """x^3 for x > 0, sin(x) * x otherwise."""
    return sg.cond(x > 0, lambda x: x ** 3, lambda x: np.sin(x) * x, x)


# d^k/dx^k of x^3 and of x sin x
CUBE = [lambda x: x ** 3, lambda x: 3 * x ** 2, lambda x: 6 * x, lambda x: 6.0]
XSIN = [lambda x: x * np.sin(x), lambda x: np.sin(x) + x * np.cos(x),
        lambda x: 2 * np.cos(x) - x * np.sin(x), lambda x: -3 * np.sin(x) - x * np.cos(x)]


@pytest.mark.parametrize("x", [1.3, -0.7])
@pytest.mark.parametrize("order", [0, 1, 2, 3])
def test_cond_orders_against_closed_forms(x, order):
    f = piecewise
    for _ in range(order):
        f = sg.grad(f)
    exact = (CUBE if x > 0 else XSIN)[order](x)
    assert np.allclose(f(x), exact, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("x", [1.3, -0.7])
def test_cond_forward_mode_matches_reverse(x):
    assert np.allclose(sg.derivative(piecewise, order=3)(x),
                       sg.grad(sg.grad(sg.grad(piecewise)))(x), rtol=1e-13)
    assert np.allclose(sg.derivative(piecewise, order=1)(x), sg.grad(piecewise)(x), rtol=1e-13)


def test_cond_records_one_entry_holding_the_branches():
    op = sg.Ops()
    x = op.var(2.0, name="x")
    piecewise(x)
    lines = op.format_trace().splitlines()
    assert sum("cond(" in line for line in lines) == 1
    top = [line for line in lines if not line.startswith(" ")]
    assert not any("sin" in line for line in top)     # each branch is printed under the entry
    assert sum("sin" in line for line in lines) == 1
    assert "    branch 0 " in "\n".join(lines) and "    branch 1 " in "\n".join(lines)


def test_cond_on_arrays_returns_arrays():
    out = sg.cond(True, lambda a, b: (a * b, a - b), lambda a, b: (a + b, b), 2.0, 3.0)
    assert all(type(v) is np.ndarray for v in out)
    assert np.allclose(out, (6.0, -1.0))
    assert sg.cond(np.array(False), lambda a: a * 2, lambda a: a + 1, 3.0) == 4.0


def test_cond_batched_predicate_takes_each_examples_branch():
    xs = np.array([1.3, -0.7, 0.2, -2.0])
    expect = np.where(xs > 0, xs ** 3, xs * np.sin(xs))
    assert np.allclose(sg.vmap(piecewise)(xs), expect, rtol=1e-14)
    dexpect = np.where(xs > 0, 3 * xs ** 2, np.sin(xs) + xs * np.cos(xs))
    assert np.allclose(sg.vmap(sg.grad(piecewise))(xs), dexpect, rtol=1e-14)
    assert np.allclose(sg.grad(lambda v: sg.vmap(piecewise)(v).sum())(xs), dexpect, rtol=1e-14)


def test_cond_under_jit_replays_the_branch_of_each_input():
    f = sg.jit(sg.grad(piecewise))
    for x in (1.3, -0.7, 0.4, -1.1):
        exact = CUBE[1](x) if x > 0 else XSIN[1](x)
        assert np.allclose(f(x), exact, rtol=1e-13)


def test_recorded_program_replays_the_other_branch():
    op = sg.Ops()
    x = op.var(1.3, name="x")
    y = piecewise(x)
    g = op.grad(y, x)
    h = op.grad(g, x)
    prog = op.program([x], [y, g, h])
    for v in (1.3, -0.7, 2.5, -0.1):
        table = CUBE if v > 0 else XSIN
        assert np.allclose(prog(np.array(v)), [table[k](v) for k in range(3)], rtol=1e-13)


def test_cond_closure_over_a_differentiated_variable():
    w = np.array([0.5, -1.5, 2.0])

    def f(w, x):
        return sg.cond(x.sum() > 0, lambda x: (w * x).sum() ** 2, lambda x: (w * x).sum(), x)
    x = np.array([1.0, 2.0, 0.5])
    s = (w * x).sum()
    assert np.allclose(sg.grad(f)(w, x), 2 * s * x, rtol=1e-14)
    assert np.allclose(sg.hessian(f)(w, x), 2 * np.outer(x, x), rtol=1e-14)
    assert np.allclose(sg.grad(f)(w, -x), -x, rtol=1e-14)


def test_switch_against_numpy_and_clamps_its_index():
    w = np.array([1.0, 2.0])
    branches = [lambda a: a * w, lambda a: a + w, lambda a: np.sin(a) * w]
    for k, expect, dexpect in [(0, 0.3 * w, w.sum()), (1, 0.3 + w, 2.0),
                               (2, np.sin(0.3) * w, np.cos(0.3) * w.sum()),
                               (7, np.sin(0.3) * w, np.cos(0.3) * w.sum()),
                               (-3, 0.3 * w, w.sum())]:
        assert np.allclose(sg.switch(k, branches, 0.3), expect, rtol=1e-15)
        got = sg.grad(lambda x, k=k: sg.switch(k, branches, x).sum())(0.3)
        assert np.allclose(got, dexpect, rtol=1e-14)


def test_switch_batched_index():
    ks = np.array([0, 1, 2, 1])
    xs = np.array([0.3, -0.2, 1.1, 2.0])
    branches = [lambda a: a * a, lambda a: -a, lambda a: np.exp(a)]
    got = sg.vmap(lambda k, x: sg.switch(k, branches, x))(ks, xs)
    assert np.allclose(got, [0.09, 0.2, np.exp(1.1), -2.0], rtol=1e-15)
    dgot = sg.vmap(sg.grad(lambda x, k: sg.switch(k, branches, x)))(xs, ks)
    assert np.allclose(dgot, [0.6, -1.0, np.exp(1.1), -1.0], rtol=1e-15)


def test_branches_must_agree():
    with pytest.raises(sg.ShapeError, match="branch 1"):
        sg.cond(True, lambda x: x, lambda x: np.ones(3) * x, 1.0)
    with pytest.raises(sg.ArgumentError):
        sg.switch(0, [], 1.0)


def test_vmapped_cond_records_no_loop_over_the_examples():
    op = sg.Ops()
    xs = op.var(np.array([1.3, -0.7, 0.2, -2.0]))
    ys = sg.vmap(piecewise)(xs)
    text = op.format_trace()
    assert " = cond(" not in text and "stack" not in text     # both branches, then where
    g = op.grad(ys.sum(), xs)
    x = xs.value
    assert np.allclose(g.value, np.where(x > 0, 3 * x ** 2, np.sin(x) + x * np.cos(x)),
                       rtol=1e-14)
    # a shared predicate: one cond of the vmapped branches
    op = sg.Ops()
    xs = op.var(np.array([1.3, -0.7]))
    ys = sg.vmap(lambda x: sg.cond(True, lambda x: x * x, lambda x: -x, x))(xs)
    assert sum(" = cond(" in line for line in op.format_trace().splitlines()) == 1
    assert np.allclose(op.grad(ys.sum(), xs).value, 2 * xs.value)


def test_vmapped_scan_records_one_loop():
    op = sg.Ops()
    x0 = op.var(np.array([1.1, 0.9, 1.2]))
    ys = sg.vmap(lambda x: sg.fori_loop(0, 3, lambda i, c: c * c, x))(x0)
    assert sum(" = scan(" in line for line in op.format_trace().splitlines()) == 1
    assert np.allclose(op.grad(ys.sum(), x0).value, 8 * x0.value ** 7, rtol=1e-14)
