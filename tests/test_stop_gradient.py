"""``x.detach()`` and ``sg.stop_gradient`` (JAX's name) are a recorded identity entry through
which no derivative passes: each example's value under vmap, each call's value under jit, in a
replayed, compiled or loaded program, at every order and in Taylor mode. A batched Variable's
value cannot be read inside vmap's function (it would be the whole batch).

Expected values are closed forms: with c = stop_gradient(x) held fixed, d/dx (c x) = c = x,
d2/dx2 (c x^3) = 6 c x = 6 x^2, and the series of c x^2 along x + t is c (x + t)^2.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

import simplegrad as sg

X = np.array([[1.0, 2.0], [3.0, 4.0]])


def held(x):
    """(c x).sum() with c = x held fixed: its value is x . x, its gradient c = x."""
    return (sg.stop_gradient(x) * x).sum()


# ---------------------------------------------------------------- the entry


def test_detach_is_a_recorded_entry_that_prints_as_before():
    op = sg.Ops()
    x = op.var([1.0, -2.0])
    d = x.detach()
    s = sg.stop_gradient(x)
    assert d.prim is sg.REGISTRY["stop_gradient"] and s.prim is d.prim
    assert d.inputs == (x.node,) and not d.requires_grad
    np.testing.assert_array_equal(d.value, [1.0, -2.0])
    assert op.format_trace().splitlines() == [
        "v0 = [ 1.0000, -2.0000]", "v1 = v0.detach()", "v2 = v0.detach()"]


def test_no_gradient_passes_at_any_order():
    x0 = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(sg.grad(held)(x0), x0)                       # c
    H = sg.hessian(lambda x: (sg.stop_gradient(x) * x ** 3).sum())(x0)
    np.testing.assert_allclose(H, np.diag(6 * x0 ** 2))                     # 6 c x
    with pytest.warns(sg.DisconnectedWarning):     # nothing reaches x: zeros, as in JAX
        np.testing.assert_array_equal(sg.grad(lambda x: sg.stop_gradient(x).sum())(x0), 0.0)


def test_forward_mode_and_taylor_mode_hold_it_fixed():
    x0, v = np.array([1.0, 2.0]), np.array([1.0, -1.0])
    out, t = sg.jvp(lambda x: sg.stop_gradient(x) * x, (x0,), (v,))
    np.testing.assert_allclose(out, x0 ** 2)
    np.testing.assert_allclose(t, x0 * v)                                   # c v
    # c (x + t)^2 at c = x = 2: derivatives 8, 8 (2 c x), 4 (2 c), 0
    got = sg.taylor(lambda x: sg.stop_gradient(x) * x ** 2, 2.0, 1.0, 3)
    np.testing.assert_allclose(got, [8.0, 8.0, 4.0, 0.0])


def test_no_grad_records_nothing():
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    n = len(op.tape)
    with op.no_grad():
        d = x.detach()
        s = sg.stop_gradient(x)
    assert len(op.tape) == n and not d.requires_grad and not s.requires_grad
    np.testing.assert_array_equal(s.value, [1.0, 2.0])


def test_arrays_numbers_and_pytrees_as_jax_takes_them():
    a = np.array([1.0, 2.0])
    out = sg.stop_gradient({"a": a, "n": 3.0, "t": (a, None)})
    assert out["a"] is a and out["n"] == 3.0 and out["t"][0] is a and out["t"][1] is None

    def f(p):
        q = sg.stop_gradient(p)
        return (q["w"] * p["w"]).sum() + (q["b"] * p["b"] ** 2).sum()
    g = sg.grad(f)({"w": np.array([1.0, -2.0]), "b": np.array([3.0])})
    np.testing.assert_allclose(g["w"], [1.0, -2.0])                         # c
    np.testing.assert_allclose(g["b"], [18.0])                              # 2 c b


# ---------------------------------------------------------------- vmap: per example


def test_vmap_holds_each_example_fixed():
    np.testing.assert_allclose(sg.vmap(held)(X), [5.0, 25.0])              # x . x per row
    np.testing.assert_allclose(sg.vmap(lambda x: (x.detach() * x).sum())(X), [5.0, 25.0])
    d = sg.vmap(lambda x: x.detach())(np.arange(6.0).reshape(2, 3))
    assert d.shape == (2, 3)
    np.testing.assert_array_equal(d, np.arange(6.0).reshape(2, 3))
    np.testing.assert_allclose(sg.vmap(sg.grad(held))(X), X)               # c, per example


def test_vmap_of_hessian_is_six_x_squared_per_example():
    Xs = np.array([[1.0, 2.0, 3.0], [2.0, 3.0, 4.0]])
    H = sg.vmap(sg.hessian(lambda x: (x.detach() * x ** 3).sum()))(Xs)
    for k in range(2):
        np.testing.assert_allclose(H[k], np.diag(6 * Xs[k] ** 2))


def test_per_example_td0_gradient():
    """JAX's per-example TD(0) update, ``jit(vmap(grad(td_loss)))`` with a linear value
    v(s) = theta . s: the target is held fixed, so d/dtheta is -2 (r + theta.s_t -
    theta.s_tm1) s_tm1 for each example."""
    def td_loss(theta, s_tm1, r_t, s_t):
        v_tm1 = (theta * s_tm1).sum()
        target = r_t + (theta * s_t).sum()
        return (sg.stop_gradient(target) - v_tm1) ** 2

    theta = np.array([0.1, -0.2, 0.3])
    rng = np.random.default_rng(0)
    s_tm1, s_t, r_t = rng.normal(size=(4, 3)), rng.normal(size=(4, 3)), rng.normal(size=4)
    step = sg.jit(sg.vmap(sg.grad(td_loss), in_axes=(None, 0, 0, 0)))
    err = r_t + s_t @ theta - s_tm1 @ theta
    np.testing.assert_allclose(step(theta, s_tm1, r_t, s_t), -2 * err[:, None] * s_tm1,
                               rtol=1e-12)
    theta2 = theta + 1.0        # a second call: the held target follows the new theta
    err2 = r_t + s_t @ theta2 - s_tm1 @ theta2
    np.testing.assert_allclose(step(theta2, s_tm1, r_t, s_t), -2 * err2[:, None] * s_tm1,
                               rtol=1e-12)


# ---------------------------------------------------------------- jit and programs: each call


def test_jit_follows_each_call():
    f = sg.jit(lambda x: (x.detach() * x).sum())
    assert f(np.array([1.0, 2.0])) == 5.0
    assert f(np.array([3.0, 4.0])) == 25.0
    g = sg.jit(sg.grad(lambda x: (sg.stop_gradient(x) * x ** 2).sum()))     # 2 c x = 2 x^2
    np.testing.assert_allclose(g(np.array([1.0, 2.0])), [2.0, 8.0])
    np.testing.assert_allclose(g(np.array([3.0, 4.0])), [18.0, 32.0])


def _program():
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    L = (x.detach() * x ** 2).sum()
    return op.program(x, [L, op.grad(L, x)])


def test_a_replayed_compiled_and_loaded_program_follows_its_input():
    prog = _program()
    x1 = np.array([3.0, -1.0])
    want = [np.sum(x1 ** 3), 2 * x1 ** 2]                    # c x^2 summed, 2 c x
    for run in (prog, sg.compile(prog)):
        got = run(x1)
        np.testing.assert_allclose(got[0], want[0])
        np.testing.assert_allclose(got[1], want[1])
    path = os.path.join(tempfile.mkdtemp(), "held")
    prog.save(path)
    got = sg.load_program(path)(x1)
    np.testing.assert_allclose(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1])


# ---------------------------------------------------------------- values under vmap


@pytest.mark.parametrize("read", [
    lambda x: x * x.value.sum(),
    lambda x: x * np.asarray(x).sum(),
    lambda x: x * float(x[0]),
    lambda x: x * int(x[0]),
    lambda x: x * x[0].item(),
    lambda x: x * x.numpy().sum(),
], ids=["value", "asarray", "float", "int", "item", "numpy"])
def test_reading_a_batched_value_raises_naming_vmap(read):
    with pytest.raises(sg.ArgumentError, match=r"^vmap: .*stop_gradient"):
        sg.vmap(read)(X)


def test_a_value_from_outside_the_vmap_still_reads():
    op = sg.Ops()
    w = op.var([2.0, 3.0])
    out = sg.vmap(lambda x: x * w.value.sum())(op.var(X))
    np.testing.assert_allclose(out.value, X * 5.0)
