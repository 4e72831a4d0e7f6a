"""sg.scan against jax.lax.scan on an RNN cell (float64): the value, the gradient and a
Hessian-vector product, to 1e-12. JAX's answers were computed once (jax.config
jax_enable_x64, the same inputs, the same loss) and are written here: JAX is not needed to
run this test."""

import numpy as np

import simplegrad as sg

rng = np.random.default_rng(7)
W = rng.normal(size=(4, 4)) / 2
U = rng.normal(size=(4, 3)) / 2
XS = rng.normal(size=(6, 3))
H0 = rng.normal(size=4) / 2
V = rng.normal(size=(4, 4))


def loss(W):
    """h <- tanh(W h + U x) over 6 steps, ys = |h|^2 per step, weighted sums of both."""
    def cell(h, x):
        h = np.tanh(W @ h + U @ x)
        return h, (h * h).sum()
    h, ys = sg.scan(cell, H0, XS)
    return (h * np.arange(1.0, 5.0)).sum() + (ys * np.linspace(0.5, 1.0, 6)).sum()


# jax.lax.scan's (jax 0.10.2, x64): loss(W), jax.grad(loss)(W), jax.jvp(jax.grad(loss), (W,), (V,))
JAX_VALUE = 1.727250553832408
JAX_GRAD = np.array([
    [0.891954817202494, 0.286366787991566, 0.03385659090814153, 0.1599312297719734],
    [-0.048036825012668635, -0.1553255664897111, -0.3629785624005925, 0.39279990119724917],
    [1.3794134705635224, 0.24702832621522056, 0.21143901322138758, -0.5983439070811438],
    [0.8038924636387692, 1.3540196884085314, -1.1447391466425303, 2.193667413212534],
])
JAX_HVP = np.array([
    [-3.8270630845456513, 0.016880261606703258, -3.8485573444774306, 0.5801299706775174],
    [1.944351301061168, 1.8436289517205626, -0.05056848076747293, 1.224143064855327],
    [1.0516995528379205, -1.0515139815453067, -1.7483324571841714, -4.20368180972909],
    [2.236388910124442, 1.0331297734256215, -0.0363064166921392, -1.389565589128927],
])


def test_value_gradient_and_hvp_match_jax():
    assert abs(loss(W) - JAX_VALUE) <= 1e-12
    np.testing.assert_allclose(sg.grad(loss)(W), JAX_GRAD, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sg.hvp(loss, W, V), JAX_HVP, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sg.jvp(sg.grad(loss), (W,), (V,))[1], JAX_HVP, rtol=0,
                               atol=1e-12)


def test_recorded_gradient_and_hvp_match_jax():
    op = sg.Ops()
    w = op.var(W, name="W")
    g = op.grad(loss(w), w)
    np.testing.assert_allclose(g.value, JAX_GRAD, rtol=0, atol=1e-12)
    hv = op.grad((g * V).sum(), w)
    np.testing.assert_allclose(hv.value, JAX_HVP, rtol=0, atol=1e-12)
