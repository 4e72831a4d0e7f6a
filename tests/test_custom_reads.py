"""docs/custom.md: "A backward that computes with raw numpy works at first order; differentiating
it again raises `sg.NotDifferentiableError` naming the function, never a silently wrong answer."
A rule reading the raw value of an input that requires grad (``np.cos(x.value)``) is such a
backward: its cotangent is right, but not as a function of x."""

import numpy as np
import pytest

import simplegrad as sg


def raw_sin():
    """sin, whose rule computes cos from the raw value of its input."""
    @sg.custom_vjp
    def f(x):
        return x.sin()

    f.defvjp(lambda g, out, x: g * np.cos(x.value))
    return f


def reading(how):
    """sin whose rule reads its input's value as ``how`` does."""
    @sg.custom_vjp
    def f(x):
        return x.sin()

    f.defvjp(lambda g, out, x: g * how(x))
    return f


X = 0.3     # d/dx sin = cos(0.3) = 0.955336..., d2/dx2 = -sin(0.3) = -0.295520...


def test_first_order_is_right():
    f = raw_sin()
    np.testing.assert_allclose(sg.grad(lambda x: f(x).sum())(np.array(X)), np.cos(X))
    op = sg.Ops()
    x = op.var(X)
    np.testing.assert_allclose(op.grad(f(x), x).value, np.cos(X))
    # forward mode transposes the rule in g only: first order is right there too
    out, t = sg.jvp(f, (np.array(X),), (np.array(1.0),))
    np.testing.assert_allclose([out, t], [np.sin(X), np.cos(X)])


@pytest.mark.parametrize("second", [
    lambda f: sg.hessian(lambda x: f(x).sum())(np.array(X)),
    lambda f: sg.grad(sg.grad(lambda x: f(x).sum()))(np.array(X)),
    lambda f: sg.jacobian(sg.grad(lambda x: f(x).sum()), mode="fwd")(np.array(X)),
    lambda f: sg.derivative(sg.derivative(f))(np.array(X)),
], ids=["hessian", "grad-of-grad", "jacfwd-of-grad", "derivative-twice"])
def test_second_order_raises_not_zero(second):
    with pytest.raises(sg.NotDifferentiableError, match=r"f: .*read the value of"):
        second(raw_sin())


def test_op_grad_twice_raises():
    op = sg.Ops()
    x = op.var(X)
    g = op.grad(raw_sin()(x), x)
    np.testing.assert_allclose(g.value, np.cos(X))
    with pytest.raises(sg.NotDifferentiableError, match="np.cos"):
        op.grad(g, x)


@pytest.mark.filterwarnings("ignore:float\\(\\) of a Variable")
@pytest.mark.parametrize("how", [
    lambda x: np.cos(x.value), lambda x: np.cos(x.numpy()), lambda x: np.cos(float(x)),
    lambda x: np.cos(x.item())], ids=["value", "numpy", "float", "item"])
def test_each_read_is_seen(how):
    f = reading(how)
    np.testing.assert_allclose(sg.grad(f)(np.array(X)), np.cos(X))
    with pytest.raises(sg.NotDifferentiableError):
        sg.grad(sg.grad(f))(np.array(X))


def test_reading_the_output_is_seen():
    @sg.custom_vjp
    def f(x):
        return x.exp()

    f.defvjp(lambda g, out, x: g * out.value)
    np.testing.assert_allclose(sg.grad(f)(np.array(X)), np.exp(X))
    with pytest.raises(sg.NotDifferentiableError):
        sg.grad(sg.grad(f))(np.array(X))


def test_rules_on_variables_still_differentiate():
    # the same rule on the Variable: every order is right (-sin, then -cos)
    @sg.custom_vjp
    def f(x):
        return x.sin()

    f.defvjp(lambda g, out, x: g * x.cos())
    np.testing.assert_allclose(sg.hessian(f)(np.array(X)), -np.sin(X))
    np.testing.assert_allclose(sg.grad(sg.grad(sg.grad(f)))(np.array(X)), -np.cos(X))
    # reading a value that takes no gradient (a constant argument) is no dependence lost
    @sg.custom_vjp
    def scale(x, c):
        return x * c

    scale.defvjp(lambda g, out, x, c: (g * float(c), None))
    h = sg.grad(lambda x: (scale(x, np.array(3.0)) * x).sum())
    np.testing.assert_allclose(sg.grad(h)(np.array(X)), 6.0)    # d2/dx2 of 3 x^2
