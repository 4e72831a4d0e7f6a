"""sg.while_loop: reverse mode through the trip count recorded in the forward, a Newton
iteration for sqrt(a) differentiated to order 3 at inputs needing different trip counts and
replayed from one recorded program; max_steps; under vmap each example keeps its own count."""

import numpy as np
import pytest

import simplegrad as sg


def newton_sqrt(a, tol=1e-14):
    """sqrt(a) by Newton's iteration from a + 1, until |x^2 - a| <= tol * a; and the trips."""
    def body(c):
        x, n = c
        return 0.5 * (x + a / x), n + 1

    def going(c):
        x, _ = c
        return abs(x * x - a) > tol * a
    return sg.while_loop(going, body, (a + 1.0, 0))


def sqrt_derivatives(a):
    return [np.sqrt(a), 0.5 * a ** -0.5, -0.25 * a ** -1.5, 0.375 * a ** -2.5]


INPUTS = [2.0, 30.0, 1e4]


def test_inputs_need_different_trip_counts():
    trips = [int(newton_sqrt(a)[1]) for a in INPUTS]
    assert len(set(trips)) == 3


@pytest.mark.parametrize("a", INPUTS)
def test_newton_sqrt_derivatives_against_closed_forms(a):
    f = lambda a: newton_sqrt(a)[0]
    exact = sqrt_derivatives(a)
    d = f
    for order in range(4):
        assert np.allclose(d(a), exact[order], rtol=1e-9), order
        d = sg.grad(d)
    for order in (1, 2, 3):
        assert np.allclose(sg.derivative(f, order=order)(a), exact[order], rtol=1e-9)


def test_one_recorded_program_replays_at_every_trip_count():
    op = sg.Ops()
    a = op.var(2.0, name="a")
    y = newton_sqrt(a)[0]
    g1 = op.grad(y, a)
    g2 = op.grad(g1, a)
    g3 = op.grad(g2, a)
    prog = op.program([a], [y, g1, g2, g3])
    for v in INPUTS + [0.37]:
        assert np.allclose(prog(np.array(v)), sqrt_derivatives(v), rtol=1e-9)


def test_max_steps_bounds_the_trips():
    x, n = sg.while_loop(lambda c: c[0] < 1e9, lambda c: (c[0] * 2.0, c[1] + 1), (1.0, 0),
                         max_steps=5)
    assert x == 32.0 and n == 5
    g = sg.grad(lambda x0: sg.while_loop(lambda c: c < 1e9, lambda c: c * c, x0,
                                         max_steps=3))(1.5)
    assert np.allclose(g, 8 * 1.5 ** 7)


def test_while_loop_on_arrays_returns_arrays():
    out = sg.while_loop(lambda c: c.sum() < 10, lambda c: c + np.arange(3.0), np.ones(3))
    assert type(out) is np.ndarray and np.array_equal(out, [1.0, 4.0, 7.0])


def test_while_loop_records_one_entry():
    op = sg.Ops()
    a = op.var(1e4, name="a")
    newton_sqrt(a)
    assert sum(" = while_loop(" in line for line in op.format_trace().splitlines()) == 1


def test_vmapped_while_loop_keeps_each_examples_trip_count():
    a = np.array(INPUTS)
    x, n = sg.vmap(newton_sqrt)(a)
    assert np.allclose(x, np.sqrt(a), rtol=1e-14)
    assert list(n) == [int(newton_sqrt(v)[1]) for v in INPUTS]
    d = sg.vmap(sg.grad(lambda a: newton_sqrt(a)[0]))(a)
    assert np.allclose(d, 0.5 / np.sqrt(a), rtol=1e-9)


def test_while_loop_under_jit():
    f = sg.jit(sg.grad(sg.grad(lambda a: newton_sqrt(a)[0])))
    for v in INPUTS:
        assert np.allclose(f(v), sqrt_derivatives(v)[2], rtol=1e-9)


def test_while_loop_checks_its_arguments():
    with pytest.raises(sg.ArgumentError, match="checkpoints"):
        sg.while_loop(lambda c: c < 1, lambda c: c + 1, 0.0, checkpoints=0)
    with pytest.raises(sg.ShapeError, match="bool scalar"):
        sg.while_loop(lambda c: c, lambda c: c + 1, np.zeros(2))
    with pytest.raises(sg.ShapeError, match="shapes"):
        sg.while_loop(lambda c: c < 1, lambda c: np.ones(2) * c, 0.0)


def relaxation(n, size, checkpoints):
    """n steps of x <- x + (w sin x - x) / 1000 on a carry of ``size`` entries."""
    a = np.linspace(0.5, 1.5, size)

    def f(w):
        x, _ = sg.while_loop(lambda c: c[1] < n,
                             lambda c: (c[0] + 1e-3 * (np.sin(c[0]) * w - c[0]), c[1] + 1),
                             (a, 0), checkpoints=checkpoints)
        return (x * x).sum()
    return f


@pytest.mark.parametrize("k", [1, 2, 5, 40])
def test_binomial_checkpoints_give_the_gradients_of_all_checkpoints(k):
    expect = sg.grad(relaxation(60, 3, "all"))(0.3)
    assert sg.grad(relaxation(60, 3, k))(0.3) == expect


def test_binomial_checkpoints_bound_the_reverse_sweeps_memory():
    import tracemalloc
    size, k = 4000, 30
    f = relaxation(1500, size, k)
    sg.grad(relaxation(3, size, k))(0.3)      # (the bodies' derivatives traced once)
    tracemalloc.start()
    try:
        g = sg.grad(f)(0.3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 1.5 * (k + 2) * size * 8     # all carries: 1500 of them
    assert np.isfinite(g)
