"""Transforms under vmap by levels: a transform called inside a vmap's function is the ordinary
transform, its primals lifted to every running vmap's level, its sweeps run on the stacks.

Oracles: closed forms and loops of the transform at top level over the examples (float64,
rtol 1e-10 unless stated).
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg

RTOL = 1e-10
A = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])             # outer batch of 2
B = np.array([[1.0, 2.0, -1.0], [0.3, -0.7, 1.1], [2.0, 0.1, 0.4]])  # inner batch of 3
X0 = np.array([0.2, -0.4, 0.9])


def close(got, want, rtol: float = RTOL) -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=1e-12)


def two_levels(fn):
    """fn(a, b) at every pair (A[i], B[j]) through two nested vmaps: shape (2, 3, ...)."""
    return sg.vmap(lambda a: sg.vmap(lambda b: fn(a, b))(B))(A)


def loop(fn):
    return np.array([[np.asarray(fn(a, b)) for b in B] for a in A])


def test_hessian_of_closure_over_both_levels() -> None:
    """H of sum(a b x^3) + (a . x)^2 is diag(6 a b x) + 2 a a^T, each pair its own."""
    def f(a, b):
        return sg.hessian(lambda x: (a * b * x ** 3).sum() + (a * x).sum() ** 2)(X0)
    got = two_levels(f)
    want = np.array([[np.diag(6 * a * b * X0) + 2 * np.outer(a, a) for b in B] for a in A])
    assert got.shape == (2, 3, 3, 3)
    close(got, want)


@pytest.mark.parametrize("mode", ["rev", "fwd", "auto"])
def test_jacobian_of_closure_over_both_levels(mode: str) -> None:
    """J of sin(a x) sum(b) is diag(a cos(a x)) sum(b)."""
    def f(a, b):
        return sg.jacobian(lambda x: (a * x).sin() * b.sum(), mode=mode)(X0)
    want = np.array([[np.diag(a * np.cos(a * X0)) * b.sum() for b in B] for a in A])
    close(two_levels(f), want)


def _g(a, b):
    return lambda x: ((a * x).tanh() * b).sum() + (x * x * b).sum() * a[0]


V = np.array([1.0, -2.0, 0.5])
CASES = {
    "grad": lambda a, b: sg.grad(_g(a, b))(X0),
    "value_and_grad": lambda a, b: sg.value_and_grad(_g(a, b))(X0)[1],
    "vjp": lambda a, b: sg.vjp(lambda x: (a * x).sin() * b, X0)[1](V)[0],
    "jvp": lambda a, b: sg.jvp(lambda x: (a * x).sin() * b, (X0,), (V,))[1],
    "hvp": lambda a, b: sg.hvp(_g(a, b), X0, V),
    "derivative": lambda a, b: sg.derivative(lambda x: (a * x).sin() * b, 3)(X0),
    "taylor": lambda a, b: sg.taylor(lambda x: (a * x).exp() * b, X0, V, 3)[3],
}


@pytest.mark.parametrize("name", list(CASES))
def test_transforms_at_two_levels_equal_loops(name: str) -> None:
    """Each transform with the example reaching it through a closure, at two levels, equals
    the same transform at top level in a loop over the pairs."""
    close(two_levels(CASES[name]), loop(CASES[name]))


def test_grad_inside_vmap_inside_grad_with_closures() -> None:
    """d/dp of sum_i d/dz sum(p sin(z x_i)) at z0 is sum_i x_i cos(z0 x_i)."""
    z0, p0 = 0.7, np.array([1.0, -2.0, 0.5])

    def outer(p):
        inner = sg.vmap(lambda x: sg.grad(lambda z: (p * (z * x).sin()).sum())(z0))(B)
        return inner.sum()
    close(sg.grad(outer)(p0), (B * np.cos(z0 * B)).sum(axis=0))
    # the value of the inner gradients too: sum_k p_k x_ik cos(z0 x_ik)
    close(sg.vmap(lambda x: sg.grad(lambda z: (p0 * (z * x).sin()).sum())(z0))(B),
          (p0 * B * np.cos(z0 * B)).sum(axis=1))


def test_second_order_through_a_per_example_gradient() -> None:
    """grad of a per-example gradient's sum, differentiated by an outer grad in p: with
    f = sum(p x^3 a), d/dx = 3 p x^2 a; the outer grad of its sum over examples in p is
    sum_i 3 x^2 a_i."""
    def outer(p):
        per = sg.vmap(lambda a: sg.grad(lambda x: (p * x ** 3 * a).sum())(X0))(A)
        return per.sum()
    close(sg.grad(outer)(np.ones(3)), (3 * X0 ** 2 * A).sum(axis=0))


def test_argument_batched_at_the_inner_level_closure_at_the_outer() -> None:
    """grad in b (batched by the inner vmap) of a function closing over a (the outer one)."""
    def f(a, b):
        return sg.grad(lambda y: ((a * y).sin() * y).sum())(b)
    close(two_levels(f), loop(f))


def test_shared_argument_gets_one_gradient_per_example() -> None:
    """vmap(grad) in a shared W: each example its own gradient (x x^T W-free closed form)."""
    W = np.array([[1.0, -1.0, 0.5], [0.0, 2.0, 1.0]])
    per = sg.vmap(sg.grad(lambda W, x: ((W @ x) ** 2).sum()), in_axes=(None, 0))(W, B)
    close(per, np.array([2 * np.outer(W @ x, x) for x in B]))


def test_jvp_at_shared_primals_keeps_its_output_unbatched() -> None:
    """Tangents batched, primals not: the output is the same for every example."""
    y, t = sg.vmap(lambda v: sg.jvp(lambda x: x.sin(), (X0,), (v,)), out_axes=(None, 0))(B)
    close(y, np.sin(X0))
    close(t, np.cos(X0) * B)
    # the same with a closure over a batched value: both batched
    y, t = sg.vmap(lambda b: sg.jvp(lambda x: (x * b).sin(), (X0,), (b,)))(B)
    close(y, np.sin(X0 * B))
    close(t, np.cos(X0 * B) * B * B)


def test_jacobian_and_hessian_of_pytrees_under_vmap() -> None:
    """Pytree outputs and arguments under vmap, as at top level."""
    j0, j1 = sg.vmap(sg.jacobian(lambda x: (x, x.sin())))(B)
    close(j0, np.broadcast_to(np.eye(3), (3, 3, 3)))
    close(j1, np.array([np.diag(np.cos(b)) for b in B]))
    h = sg.vmap(sg.hessian(lambda p: (p["a"] ** 3).sum()))({"a": B})
    close(h["a"]["a"], np.array([np.diag(6 * b) for b in B]))


def test_op_grad_of_a_batched_output_in_a_shared_variable_raises() -> None:
    """op.grad cannot give per-example gradients in a Variable no vmap batches: it says to
    call the transform inside the vmap."""
    op = sg.Ops()
    w = op.var([1.0, 2.0, 3.0])

    def f(x):
        return op.grad((w * x).sum(), w)
    with pytest.raises(sg.ArgumentError, match="inside that vmap"):
        sg.vmap(f)(op.var(B, requires_grad=False))


def test_transform_under_no_grad_inside_vmap_is_per_example() -> None:
    """Under op.no_grad a transform inside vmap (one level or two) still gives each example its
    own derivative, recording nothing."""
    op = sg.Ops()
    with op.no_grad():
        g = sg.vmap(sg.grad(lambda x: (x ** 3).sum()))(op.var(B))
        h = sg.vmap(lambda a: sg.vmap(sg.grad(lambda x, y: (x * y * x).sum()), in_axes=(None, 0))(
            a, B))(op.var(A))
    close(g.value, 3 * B ** 2)
    close(h.value, 2 * A[:, None, :] * B[None, :, :])


def test_grad_of_a_vmapped_hessian_with_a_closure_over_the_outer_variable() -> None:
    """H of sum(z z p) sum(x) is diag(2 p sum(x)); the sum over examples and entries of H has
    gradient 2 sum_i sum(x_i) in each p_k."""
    def outer(p):
        hs = sg.vmap(lambda x: sg.hessian(lambda z: (z * z * p).sum() * x.sum())(X0))(B)
        return hs.sum()
    close(sg.grad(outer)(np.ones(3)), np.full(3, 2 * B.sum()))


def test_nested_vmaps_with_shared_arguments_at_each_level() -> None:
    """vmap(vmap(hessian), in_axes=(None, 0)), in_axes=(0, None)): H of sum(sin(x y)) in x is
    diag(-y^2 sin(x y)) for each pair."""
    h = sg.vmap(sg.vmap(sg.hessian(lambda x, y: (x * y).sin().sum()), in_axes=(None, 0)),
                in_axes=(0, None))(A, B)
    close(h, np.array([[np.diag(-b * b * np.sin(a * b)) for b in B] for a in A]))


def test_pullback_and_tangent_function_returned_under_no_grad_inside_vmap() -> None:
    """Under op.no_grad inside vmap, vjp's pullback and jvp's results are per example: the
    pullback of sum(z^2) at x_i is 2 x_i; the tangent of sum(z^2) along ones is 2 sum(x_i)."""
    op = sg.Ops()

    def per_example(x):
        with op.no_grad():
            y, pullback = sg.vjp(lambda z: (z * z).sum(), x)
            _, tangent = sg.jvp(lambda z: (z * z).sum(), (x,), (np.ones(A.shape[1]),))
            return y, pullback(1.0)[0], tangent

    y, g, t = sg.vmap(per_example)(op.var(A))
    close(y.value, (A * A).sum(axis=1))
    close(g.value, 2 * A)
    close(t.value, 2 * A.sum(axis=1))
    assert g.prim is None and t.prim is None        # computed under no_grad: no history
