"""Calls JAX runs that failed loudly here, with JAX's own answers written in."""

import numpy as np

import simplegrad as sg


def test_custom_jvp_keyword_argument():
    # JAX's custom_derivatives_test.py::test_kwargs: the keyword is bound as a primal
    @sg.custom_jvp
    def my_fun(x, y, c=1.0):
        return c * (x + y)

    @my_fun.defjvp
    def my_jvp(primals, tangents):
        x, y, c = primals
        _, _, t_c = tangents
        return my_fun(x, y, c), t_c

    def f(x, y):
        return (my_fun(x, y, c=2.0) ** 2).sum()

    x, y = np.array(10.0), np.array(5.0)
    np.testing.assert_allclose(f(x, y), 900.0)     # (2 * 15)^2
    out, t = sg.jvp(f, (x, y), (np.array(1.0), np.array(1.0)))
    np.testing.assert_allclose([out, t], [900.0, 0.0])      # the rule's tangent is t_c = 0


def test_custom_jvp_keyword_argument_reaches_the_rule_as_a_primal():
    @sg.custom_jvp
    def f(x, y):
        return x * y.sin()

    @f.defjvp
    def f_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        return f(x, y), tx * y.sin() + x * y.cos() * ty

    g = sg.grad(lambda x, y: f(x, y=y), argnums=(0, 1))(np.array(3.0), np.array(2.0))
    np.testing.assert_allclose(g, [np.sin(2.0), 3.0 * np.cos(2.0)])


def test_linearize_has_aux():
    # jax.linearize(f, x, has_aux=True) -> (primal_out, f_jvp, aux)
    def f(x):
        return (x.sin() * x).sum(), {"twice": x * 2.0}

    x = np.array([0.5, 1.5])
    out, f_jvp, aux = sg.linearize(f, x, has_aux=True)
    np.testing.assert_allclose(out, (np.sin(x) * x).sum())
    np.testing.assert_allclose(aux["twice"], 2 * x)
    v = np.array([1.0, -2.0])
    np.testing.assert_allclose(f_jvp(v), ((np.sin(x) + x * np.cos(x)) * v).sum())
    # without has_aux, the pair as before
    out2, f_jvp2 = sg.linearize(lambda x: (x.sin() * x).sum(), x)
    np.testing.assert_allclose([out2, f_jvp2(v)], [out, f_jvp(v)])
