"""The eager Hessian's sweep: the jvp rules it runs record few entries and stay exact (a
square's tangent, tanh's), and the value-only sweep's shortcuts (a reshape of a stack) give
what the recorded sweep gives."""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg


def _fd_jvp(f, x: np.ndarray, v: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central difference of f along v, float64."""
    return (f(x + eps * v) - f(x - eps * v)) / (2 * eps)


def test_jvp_of_a_square_records_the_product_rule_as_written():
    # recorded, both products and their sum: the transpose of the jvp is the vjp's pullback
    op = sg.Ops()
    x = op.var(np.array([0.5, -1.5, 2.0]))
    y = x * x
    before = len(op.tape)
    t = op.jvp(y, x, np.array([1.0, 2.0, -3.0]))
    assert [e.prim.name for e in op.tape[before:]] == ["mul", "mul", "add"]
    np.testing.assert_array_equal(t.value, 2 * np.array([0.5, -1.5, 2.0]) * [1.0, 2.0, -3.0])


def test_square_on_values_is_one_product_of_the_stack(monkeypatch):
    # the value-only sweep runs mul's jvp on a stack of tangents: one product of the stack
    # (x + x on the plain value first), bit for bit the sum of the two products the rules
    # write wherever t x is a normal number
    from simplegrad.engine import batched
    from simplegrad.primitives.elementwise import MUL
    calls = []
    apply = batched.StackValues.apply

    def counting(self, prim, inputs, attrs=None, name=None):
        calls.append(prim.name)
        return apply(self, prim, inputs, attrs, name)
    monkeypatch.setattr(batched.StackValues, "apply", counting)
    rng = np.random.default_rng(3)
    x, ts = rng.normal(size=5) * 1e3, rng.normal(size=(4, 5))
    t = MUL.jvp(batched.STACKS, [batched.Stack(ts)] * 2, x * x, x, x)
    assert calls == ["add", "mul"]
    np.testing.assert_array_equal(t.inner, ts * x + ts * x)
    # where the product is subnormal, rounded once: within one unit of the last place
    tiny = np.array([3e-310, -1e-312, 5e-320])
    t = MUL.jvp(batched.STACKS, [batched.Stack(np.full((2, 3), 0.7))] * 2, tiny * tiny,
                tiny, tiny)
    np.testing.assert_array_equal(t.inner, 0.7 * (2 * tiny) * np.ones((2, 1)))
    np.testing.assert_allclose(t.inner, np.broadcast_to(0.7 * tiny + 0.7 * tiny, (2, 3)), rtol=0,
                               atol=5e-324)


def test_hessian_on_values_equals_the_recorded_sweep_bit_for_bit():
    rng = np.random.default_rng(4)
    x = rng.normal(size=5) * 10

    def f(x):
        u = x.sin()
        return (u * u).tanh().sum()
    got = sg.hessian(f)(x)
    op = sg.Ops()
    np.testing.assert_array_equal(got, sg.hessian(f)(op.var(x)).value)


def test_jvp_of_a_product_of_two_inputs_is_still_the_sum():
    op = sg.Ops()
    a, b = op.var(np.array([0.5, 2.0])), op.var(np.array([3.0, -1.0]))
    ta, tb = np.array([1.0, -2.0]), np.array([0.25, 4.0])
    t = op.jvp(a * b, [a, b], [ta, tb])
    np.testing.assert_array_equal(t.value, ta * b.value + a.value * tb)


@pytest.mark.parametrize("x0", [np.array([0.3, -2.0, 7.5]), np.array([[0.0, 1e-3], [4.0, -0.7]])])
def test_square_and_tanh_tangents_match_finite_differences(x0):
    v = np.linspace(-1.0, 1.0, x0.size).reshape(x0.shape)
    for f, fn in ((lambda x: x * x, lambda x: x * x),
                  (lambda x: x.tanh(), np.tanh),
                  (lambda x: (x * x).tanh() * x, lambda x: np.tanh(x * x) * x)):
        _, t = sg.jvp(f, (x0,), (v,))
        np.testing.assert_allclose(t, _fd_jvp(fn, x0, v), rtol=1e-7, atol=1e-9)


def test_hessian_of_a_square_through_tanh_matches_the_closed_form():
    rng = np.random.default_rng(1)
    W = rng.normal(size=(6, 5))
    x = rng.normal(size=5)

    def f(x):
        u = (W @ x).tanh()
        return (u * u).sum()
    t = np.tanh(W @ x)
    s = 1 - t * t
    # d/du (u^2) = 2u, du/dz = s, d2u/dz2 = -2 t s: H = W^T diag(2 s^2 - 4 t^2 s) W
    closed = W.T @ ((2 * s * s - 4 * t * t * s)[:, None] * W)
    np.testing.assert_allclose(sg.hessian(f)(x), closed, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sg.jacobian(sg.grad(f), mode="rev")(x), closed,
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 1, 3)])
def test_value_sweep_reshapes_equal_the_recorded_sweep(shape):
    rng = np.random.default_rng(2)
    x = rng.normal(size=shape)
    n = x.size

    def f(x):
        return (x.reshape((n,)).tanh().reshape((1, n)) * np.arange(1.0, n + 1)).sum()
    got = sg.hessian(f)(x)
    t = np.tanh(x.reshape(n))
    closed = np.diag(np.arange(1.0, n + 1) * -2 * t * (1 - t * t)).reshape(shape + shape)
    np.testing.assert_allclose(got, closed, rtol=1e-12, atol=1e-14)
    op = sg.Ops()
    xv = op.var(x)
    recorded = sg.hessian(f)(xv)            # nested: the recorded batched sweep
    np.testing.assert_allclose(recorded.value, got, rtol=0, atol=0)


@pytest.mark.parametrize(("a_shape", "b_shape", "stacked"), [
    ((4, 3), (3, 1), (False, True)), ((4, 3), (3, 2), (False, True)), ((3,), (3, 2), (False, True)),
    ((2, 4, 3), (3,), (True, False)), ((4, 3), (3, 5), (True, True)),
    ((2, 4, 3), (3, 5), (True, False)), ((3,), (3, 5), (True, False)),
    ((3,), (3,), (True, False)), ((4, 3), (3,), (False, True))])
def test_matmul_on_stacks_is_each_example_s_product(a_shape, b_shape, stacked):
    from simplegrad.engine import batched
    rng = np.random.default_rng(5)
    k = 6
    a, b = (rng.normal(size=((k,) + s) if st else s)
            for s, st in zip((a_shape, b_shape), stacked))
    got = batched.STACKS.matmul(*(batched.Stack(v) if st else v
                                  for v, st in zip((a, b), stacked)))
    loop = [np.matmul(a[j] if stacked[0] else a, b[j] if stacked[1] else b) for j in range(k)]
    assert type(got) is batched.Stack
    np.testing.assert_allclose(got.inner, np.stack(loop), rtol=1e-13, atol=1e-13)


def test_a_stack_times_broadcast_ones_is_the_stack_itself():
    from simplegrad.engine import batched
    inner = np.array([[1.0, np.nan, -0.0], [np.inf, -2.5, 3.0]])
    s = batched.Stack(inner)
    ones = np.broadcast_to(np.float64(1.0), (3,))       # an expanded seed: one value, strides 0
    assert batched.STACKS.mul(s, ones) is s and batched.STACKS.mul(ones, s) is s
    np.testing.assert_array_equal(inner * ones, inner)  # what it stands for, nan and -0 kept
    for other in (np.ones(3),                            # an array of ones: computed
                  np.broadcast_to(np.float64(2.0), (3,)),
                  np.broadcast_to(np.float32(1.0), (3,)),
                  np.broadcast_to(np.float64(1.0), (2, 3))):   # beyond one example's shape
        got = batched.STACKS.mul(s, other)
        assert got is not s
        np.testing.assert_array_equal(got.inner, np.stack([row * other for row in inner]))


def test_forward_jacobian_of_vectors_times_a_matrix_equals_reverse_rows():
    # the tangents of tanh(x) (not the identity basis) times W: one product of the stack
    rng = np.random.default_rng(6)
    W, x = rng.normal(size=(7, 5)), rng.normal(size=7)

    def f(x):
        return x.tanh() @ W
    closed = (1 - np.tanh(x) ** 2)[:, None] * W          # d(tanh(x) @ W)_j / dx_i, as (i, j)
    np.testing.assert_allclose(sg.jacobian(f, mode="fwd")(x), closed.T, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(sg.jacobian(f, mode="rev")(x), closed.T, rtol=1e-13, atol=1e-14)
