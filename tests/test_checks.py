"""The gradient checker itself: it passes right rules and catches wrong ones where they break.

The wrong rules live on throwaway primitives that are never registered, so the
registry-driven test in test_primitives.py does not see them. Tolerances are
the checker's defaults (eps=1e-6, atol=rtol=1e-5) unless a test says otherwise.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.primitives.core import shape_of, value_of

# ---------------------------------------------------------------- throwaway primitives


def _unary(name, forward, vjp, jvp) -> sg.Primitive:
    return sg.Primitive(name, forward, [vjp], jvp, f"{{0}}.{name}()", [sg.Case(((3,),))])


def _with(prim: sg.Primitive):
    return lambda *xs: xs[0].ops.apply(prim, xs)


# the derivative of x**2 is 2x, not x: wrong at order 1 in reverse mode, right in forward mode
HALF_SQUARE = _unary("half_square", np.square,
                     lambda o, g, out, x: o.mul(g, x),
                     lambda o, ts, out, x: o.mul(ts[0], o.mul(x, 2.0)))

# right vjp, wrong jvp (3t instead of 2xt)
BAD_JVP = _unary("bad_jvp", np.square,
                 lambda o, g, out, x: o.mul(g, o.mul(x, 2.0)),
                 lambda o, ts, out, x: o.mul(ts[0], 3.0))

# cos(x) taken from raw numpy: the right number, but a constant to the tape, so the
# gradient no longer depends on x and its own derivative (order 2) is lost
FROZEN_SIN = _unary("frozen_sin", np.sin,
                    lambda o, g, out, x: o.mul(g, np.cos(value_of(x))),
                    lambda o, ts, out, x: o.mul(ts[0], o.cos(x)))

# x**2 whose vjp freezes 2x: right at orders 1 and 2 when used inside CUBE, wrong at order 3
FROZEN_SQUARE = _unary("frozen_square", np.square,
                       lambda o, g, out, x: o.mul(g, 2.0 * value_of(x)),
                       lambda o, ts, out, x: o.mul(ts[0], 2.0 * value_of(x)))
CUBE = _unary("cube", lambda x: x ** 3,
              lambda o, g, out, x: o.mul(g, o.mul(o.apply(FROZEN_SQUARE, (x,)), 3.0)),
              lambda o, ts, out, x: o.mul(ts[0], o.mul(o.apply(FROZEN_SQUARE, (x,)),
                                                       3.0)))


# sin whose vjp takes the cotangent's VALUE (a constant to the tape): every value is right, so
# order 1 passes, but the recorded gradient no longer depends on the cotangent u, so its
# derivative with respect to u (order 2) is lost
FROZEN_COTANGENT = _unary("frozen_cotangent", np.sin,
                          lambda o, g, out, x: o.mul(value_of(g), o.cos(x)),
                          lambda o, ts, out, x: o.mul(ts[0], o.cos(x)))

# the same with a jvp that takes the tangent's value
FROZEN_TANGENT = _unary("frozen_tangent", np.sin,
                        lambda o, g, out, x: o.mul(g, o.cos(x)),
                        lambda o, ts, out, x: o.mul(value_of(ts[0]), o.cos(x)))


def _outer_vjp_y(o, g, out, x, y):
    n = shape_of(x)[0]
    right = o.sum(o.mul(g, o.reshape(x, (n, 1))), axis=0)
    return o.mul(right, 2.0)       # wrong: twice the right cotangent


def _outer_jvp(o, ts, out, x, y):
    n, m = shape_of(x)[0], shape_of(y)[0]
    parts = []
    if ts[0] is not None:
        parts.append(o.mul(o.reshape(ts[0], (n, 1)), o.reshape(y, (1, m))))
    if ts[1] is not None:
        parts.append(o.mul(o.reshape(x, (n, 1)), o.reshape(ts[1], (1, m))))
    return parts[0] if len(parts) == 1 else o.add(parts[0], parts[1])


# outer product x y^T with a right rule for x (argument 0) and a wrong one for y (argument 1)
BAD_OUTER = sg.Primitive(
    "bad_outer", np.multiply.outer,
    [lambda o, g, out, x, y: o.sum(o.mul(g, o.reshape(y, (1, shape_of(y)[0]))), axis=1),
     _outer_vjp_y],
    _outer_jvp, "outer({0}, {1})", [sg.Case(((2,), (3,)))])

THROWAWAY = [HALF_SQUARE, BAD_JVP, FROZEN_SIN, FROZEN_SQUARE, CUBE, BAD_OUTER, FROZEN_COTANGENT,
             FROZEN_TANGENT]


def test_throwaway_primitives_stay_out_of_the_registry() -> None:
    assert all(p.name not in sg.REGISTRY and p not in sg.REGISTRY.values() for p in THROWAWAY)


# ---------------------------------------------------------------- right functions pass


def test_passes_a_composite_with_two_outputs(rng: np.random.Generator) -> None:
    def f(x, w):
        h = (x @ w).tanh()
        return h.sum(axis=0), (x * x).sin() / (w.sum() * w.sum() + 1.0)

    sg.check_grads(f, [rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (3, 4))], rng=rng)


def test_passes_at_order_three(rng: np.random.Generator) -> None:
    sg.check_grads(lambda x: x.sin() * x.exp(), [rng.uniform(-1, 1, (3,))], order=3, rng=rng)


def test_passes_a_rule_wrong_only_beyond_the_order_checked(rng: np.random.Generator) -> None:
    x = [rng.uniform(0.5, 1.5, (3,))]
    sg.check_grads(_with(FROZEN_SIN), x, order=1, rng=rng)
    sg.check_grads(_with(FROZEN_SIN), x, order=2, modes=("fwd",), rng=rng)
    sg.check_grads(_with(CUBE), x, order=2, rng=rng)


def test_consistency_passes_on_right_rules(rng: np.random.Generator) -> None:
    sg.check_jvp_vjp_consistency(lambda x, y: ((x @ y).exp(), x.sum() * y),
                                 [rng.standard_normal((2, 3)), rng.standard_normal((3, 2))], rng)


# ---------------------------------------------------------------- wrong rules fail


def test_catches_a_wrong_first_order_rule(rng: np.random.Generator) -> None:
    with pytest.raises(sg.GradientCheckError, match=r"^order 1, mode rev: argument 0") as info:
        sg.check_grads(_with(HALF_SQUARE), [rng.uniform(0.5, 1.5, (3,))], rng=rng)
    assert isinstance(info.value, AssertionError)
    assert "order 2" not in str(info.value)


def test_catches_a_wrong_jvp(rng: np.random.Generator) -> None:
    x = [rng.uniform(0.5, 1.5, (3,))]
    sg.check_grads(_with(BAD_JVP), x, modes=("rev",), rng=rng)
    with pytest.raises(sg.GradientCheckError, match=r"^order 1, mode fwd: argument 0 .*output 0"):
        sg.check_grads(_with(BAD_JVP), x, rng=rng)
    with pytest.raises(sg.GradientCheckError, match=r"jvp and vjp disagree"):
        sg.check_jvp_vjp_consistency(_with(BAD_JVP), x, rng)


def test_catches_a_wrong_second_order_rule(rng: np.random.Generator) -> None:
    with pytest.raises(sg.GradientCheckError) as info:
        sg.check_grads(_with(FROZEN_SIN), [rng.uniform(0.5, 1.5, (3,))], rng=rng)
    message = str(info.value)
    assert message.startswith("order 2, mode rev applied to the rev derivative: argument 0")
    # the recorded gradient does not depend on x, so its derivative is exactly zero
    assert "analytic: [0., 0., 0.]" in message


def test_catches_a_vjp_that_freezes_the_cotangent_value(rng: np.random.Generator) -> None:
    x = [rng.uniform(0.5, 1.5, (3,))]
    sg.check_grads(_with(FROZEN_COTANGENT), x, order=1, rng=rng)
    with pytest.raises(sg.GradientCheckError) as info:
        sg.check_grads(_with(FROZEN_COTANGENT), x, order=2, rng=rng)
    message = str(info.value)
    assert message.startswith("order 2, mode rev applied to the rev derivative: argument 1 "
                              "(the cotangent of output 0) with shape (3,)"), message
    # d/du of the recorded cos(x) * value(u) is exactly zero; the right one is cos(x) * w
    assert "analytic: [0., 0., 0.]" in message
    # the derivative with respect to x (argument 0) was right: only u was wrong
    with pytest.raises(sg.GradientCheckError, match=r"^order 2, mode fwd applied to the rev "
                                                    r"derivative: argument 1 \(the cotangent"):
        sg.check_grads(_with(FROZEN_COTANGENT), x, order=2, modes=("fwd", "rev"), rng=rng)


def test_catches_a_jvp_that_freezes_the_tangent_value(rng: np.random.Generator) -> None:
    x = [rng.uniform(0.5, 1.5, (3,))]
    sg.check_grads(_with(FROZEN_TANGENT), x, order=1, rng=rng)
    sg.check_grads(_with(FROZEN_TANGENT), x, order=2, modes=("rev",), rng=rng)
    with pytest.raises(sg.GradientCheckError, match=r"^order 2, mode rev applied to the fwd "
                                                    r"derivative: argument 1 \(the tangent of "
                                                    r"argument 0\) with shape \(3,\)"):
        sg.check_grads(_with(FROZEN_TANGENT), x, order=2, rng=rng)


def test_catches_a_wrong_third_order_rule(rng: np.random.Generator) -> None:
    with pytest.raises(sg.GradientCheckError, match=r"^order 3, mode rev applied to the rev "
                                                    r"derivative of the rev derivative"):
        sg.check_grads(_with(CUBE), [rng.uniform(0.5, 1.5, (3,))], order=3, modes=("rev",),
                       rng=rng)


def test_message_names_position_shapes_values_and_tolerances(rng: np.random.Generator) -> None:
    args = [rng.uniform(0.5, 1.5, (2,)), rng.uniform(0.5, 1.5, (3,))]
    with pytest.raises(sg.GradientCheckError) as info:
        sg.check_grads(_with(BAD_OUTER), args, order=1, atol=1e-7, rtol=1e-6, rng=rng)
    message = str(info.value)
    assert message.startswith("order 1, mode rev: argument 1 with shape (3,)")
    assert "arguments with shapes [(2,), (3,)], outputs with shapes [(2, 3)]" in message
    assert "atol=1e-07, rtol=1e-06 (eps=1e-06)" in message
    analytic = re.search(r"analytic: \[(.*)\]", message).group(1)
    numeric = re.search(r"numeric: +\[(.*)\]", message).group(1)
    a = np.array([float(t) for t in analytic.split(",")])
    n = np.array([float(t) for t in numeric.split(",")])
    np.testing.assert_allclose(a, 2 * n, rtol=1e-4)   # the wrong rule doubles the cotangent
    assert "3 of 3 entries off" in message


def test_jvp_failure_names_the_argument_whose_rule_is_wrong(rng: np.random.Generator) -> None:
    args = [rng.uniform(0.5, 1.5, (2,)), rng.uniform(0.5, 1.5, (3,))]
    # the jvp is right, so forward mode passes and only the vjp for y is caught
    sg.check_grads(_with(BAD_OUTER), args, modes=("fwd",), rng=rng)
    with pytest.raises(sg.GradientCheckError, match="jvp and vjp disagree"):
        sg.check_jvp_vjp_consistency(_with(BAD_OUTER), args, rng)


# ---------------------------------------------------------------- misuse


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"modes": ("bwd",)}, "modes"), ({"modes": ()}, "modes"), ({"order": 0}, "order")],
    ids=["unknown-mode", "no-modes", "order-0"])
def test_rejects_bad_settings(kwargs: dict, fragment: str) -> None:
    with pytest.raises(sg.ArgumentError, match=fragment):
        sg.check_grads(lambda x: x.sin(), [np.ones(2)], **kwargs)


def test_rejects_a_function_returning_a_non_variable() -> None:
    with pytest.raises(sg.ArgumentError, match="must return Variables"):
        sg.check_grads(lambda x: x.value * 2, [np.ones(2)])


def test_check_grads_of_a_function_with_a_transform_inside_reading_a_closure():
    """f(p) = sum of grad_x sum(sin(p x)) at x = ones: the inner grad reads p through a closure
    and records on the checker's Ops, so every order is checked (closed form p cos p)."""
    def f(p):
        return sg.grad(lambda x: (p * x).sin().sum())(np.ones(3)).sum()
    sg.check_grads(f, [np.array([0.3, -0.8, 1.1])], order=2)
