"""sg.odeint on the loops: y' = -z y against its closed form to order 4, a Hessian through a
100-step RK4 solve against the same steps unrolled, dopri5's adaptive steps, max_steps."""

import numpy as np
import pytest

import simplegrad as sg


def decay(y, t, z):
    return -z * y


@pytest.mark.parametrize("method", ["rk4", "dopri5"])
def test_values_at_every_time(method):
    t = np.linspace(0.0, 2.0, 41)
    ys = sg.odeint(decay, 1.0, t, 0.7, method=method)
    assert ys.shape == (41,)
    assert np.allclose(ys, np.exp(-0.7 * t), rtol=1e-7, atol=0)


def test_rk4_derivatives_in_z_to_order_4_against_the_closed_form():
    T, z = 1.5, 0.7
    t = np.linspace(0.0, T, 151)
    f = lambda z: sg.odeint(decay, 1.0, t, z, method="rk4")[-1]
    for order in range(1, 5):
        f = sg.grad(f)
        assert np.allclose(f(z), (-T) ** order * np.exp(-z * T), rtol=1e-8), order
    assert np.allclose(sg.derivative(lambda z: sg.odeint(decay, 1.0, t, z, method="rk4")[-1],
                                     order=4)(z), T ** 4 * np.exp(-z * T), rtol=1e-8)


def test_dopri5_derivatives_in_z_against_the_closed_form():
    T, z = 2.0, 0.7
    f = lambda z: sg.odeint(decay, 1.0, np.array([0.0, 1.0, T]), z)[-1]
    assert np.allclose(sg.grad(f)(z), -T * np.exp(-z * T), rtol=1e-6)
    assert np.allclose(sg.grad(sg.grad(f))(z), T * T * np.exp(-z * T), rtol=1e-5)


def rk4_unrolled(f, y, t, *args):
    out = [y]
    for t0, t1 in zip(t[:-1], t[1:]):
        h = t1 - t0
        k1 = f(y, t0, *args)
        k2 = f(y + k1 * (h / 2), t0 + h / 2, *args)
        k3 = f(y + k2 * (h / 2), t0 + h / 2, *args)
        k4 = f(y + k3 * h, t1, *args)
        y = y + (k1 + k2 * 2.0 + k3 * 2.0 + k4) * (h / 6)
        out.append(y)
    return out


def test_hessian_through_a_100_step_rk4_solve_matches_the_unrolled_steps():
    def rhs(y, t, p):
        return np.stack([p[0] * y[1], -p[1] * np.sin(y[0]) - p[2] * y[1]])
    t = np.linspace(0.0, 3.0, 101)
    y0 = np.array([1.0, 0.0])
    p = np.array([1.0, 2.0, 0.3])
    loss = lambda p: (sg.odeint(rhs, y0, t, p, method="rk4")[-1] ** 2).sum()
    unrolled = lambda p: (rk4_unrolled(rhs, y0, t, p)[-1] ** 2).sum()
    assert np.allclose(loss(p), unrolled(p), rtol=1e-14)
    assert np.allclose(sg.grad(loss)(p), sg.grad(unrolled)(p), rtol=1e-12)
    assert np.allclose(sg.hessian(loss)(p), sg.hessian(unrolled)(p), rtol=1e-11, atol=1e-12)


def test_max_steps_raises_naming_the_time_reached():
    with pytest.raises(sg.SimplegradError, match="max_steps=3 steps reached t ="):
        sg.odeint(decay, 1.0, np.array([0.0, 10.0]), 50.0, max_steps=3)
    with pytest.raises(sg.ArgumentError, match="method"):
        sg.odeint(decay, 1.0, np.array([0.0, 1.0]), 1.0, method="euler")
