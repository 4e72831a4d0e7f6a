"""vmap over what a function does not get batched: an unbatched numpy array indexed by a
batched index, and custom rules closing over a vmapped value.

Expected values are numpy loops over the examples, closed forms, or the expected values of
JAX's own tests (batching_test.py's testNumpyIndexing1 and testDynamicSlice, api_test.py's
CustomVJPTest.test_closed_over_vmap_tracer and test_closed_over_tracer3) written in.
"""

import io
import re

import numpy as np
import pytest
from rich.console import Console

import simplegrad as sg

A = np.arange(12.0).reshape(3, 4) / 7.0 - 0.5
COLS = np.array([0, 2, 3])

# ---------------------------------------------------------------- a batched index


def test_an_unbatched_numpy_array_indexed_by_a_batched_index():
    got = sg.vmap(lambda a, i: a[:, i], in_axes=(None, 0))(A, COLS)
    np.testing.assert_array_equal(got, np.stack([A[:, i] for i in COLS]))
    got = sg.vmap(lambda a, i: np.take(a, i, axis=1), in_axes=(None, 0))(A, COLS)
    np.testing.assert_array_equal(got, np.stack([A[:, i] for i in COLS]))


def test_jax_numpy_indexing1():
    """batching_test.py's testNumpyIndexing1: an integer array, rows of indices."""
    a = np.arange(2 * 3 * 4).reshape((2, 3, 4))
    ind = np.array([[0, 1], [2, 0]])
    expected = np.stack([a[:, ind[i, :]] for i in range(ind.shape[0])])
    got = sg.vmap(lambda a, ind: a[:, ind], (None, 0))(a, ind)
    assert got.shape == (2, 2, 2, 4)
    np.testing.assert_array_equal(got, expected)


def test_jax_dynamic_slice_by_indexing():
    """batching_test.py's testDynamicSlice: x[i] with x, i batched or not."""
    x = np.arange(30).reshape((10, 3))
    got = sg.vmap(lambda x, i: x[i], in_axes=(0, None))(x, 1)
    np.testing.assert_array_equal(got, x[:, 1])
    idx = np.array([0, 1, 2, 1, 0] * 2)
    got = sg.vmap(lambda x, i: x[i], in_axes=(0, 0))(x, idx)
    np.testing.assert_array_equal(got, x[np.arange(10), idx])
    x = np.arange(3)
    got = sg.vmap(lambda x, i: x[i], in_axes=(None, 0))(x, idx)
    np.testing.assert_array_equal(got, x[idx])


def test_lax_dynamic_slice_of_an_unbatched_array():
    """lax.dynamic_slice(a, (i,), (2,)) per example, as a[i:i + 2]."""
    a = np.arange(5.0) ** 2
    starts = np.array([0, 1, 3])
    got = sg.vmap(lambda a, i: a[i:i + 2], in_axes=(None, 0))(a, starts)
    np.testing.assert_array_equal(got, np.stack([a[s:s + 2] for s in starts]))
    rows = sg.vmap(lambda a, i: a[i:i + 2, 1:], in_axes=(None, 0))(A, np.array([0, 1]))
    np.testing.assert_array_equal(rows, np.stack([A[s:s + 2, 1:] for s in (0, 1)]))


def _column_sin_grads(a: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """d/da of sum_k sum(sin(a[:, cols[k]])) by a loop."""
    g = np.zeros_like(a)
    for c in cols:
        g[:, c] += np.cos(a[:, c])
    return g


def test_gradients_through_an_unbatched_array_indexed_by_a_batched_index():
    whole = sg.grad(lambda a: sg.vmap(lambda a, i: a[:, i], in_axes=(None, 0))(a, COLS).sin().sum())
    np.testing.assert_allclose(whole(A), _column_sin_grads(A, COLS), atol=1e-12)
    per = sg.vmap(sg.grad(lambda a, i: a[:, i].sin().sum()), in_axes=(None, 0))(A, COLS)
    np.testing.assert_allclose(per, np.stack([_column_sin_grads(A, [i]) for i in COLS]),
                               atol=1e-12)
    stacked = np.stack([A, 2 * A, 3 * A])
    per = sg.vmap(sg.grad(lambda a, i: a[:, i].sin().sum()), in_axes=(0, 0))(stacked, COLS)
    np.testing.assert_allclose(per, np.stack([_column_sin_grads(a, [i])
                                              for a, i in zip(stacked, COLS)]), atol=1e-12)


def test_second_order_through_an_unbatched_array_indexed_by_a_batched_index():
    """The hessian in a of sum(a[:, i] ** 3): 6 a on the diagonal at column i."""
    h = sg.vmap(sg.hessian(lambda a, i: (a[:, i] ** 3).sum()), in_axes=(None, 0))(A, COLS)
    want = np.zeros((3,) + A.shape + A.shape)
    for k, i in enumerate(COLS):
        for r in range(A.shape[0]):
            want[k, r, i, r, i] = 6 * A[r, i]
    np.testing.assert_allclose(h, want, atol=1e-12)


def test_jit_of_a_vmap_indexing_an_unbatched_array():
    f = sg.jit(sg.vmap(lambda a, i: a[:, i] * 2.0, in_axes=(None, 0)))
    np.testing.assert_array_equal(f(A, COLS), np.stack([2 * A[:, i] for i in COLS]))
    np.testing.assert_array_equal(f(A + 1, COLS), np.stack([2 * (A[:, i] + 1) for i in COLS]))
    g = sg.jit(sg.grad(lambda a: sg.vmap(lambda a, i: a[:, i], in_axes=(None, 0))(a, COLS)
                       .sin().sum()))
    np.testing.assert_allclose(g(A), _column_sin_grads(A, COLS), atol=1e-12)
    np.testing.assert_allclose(g(2 * A), _column_sin_grads(2 * A, COLS), atol=1e-12)


def test_unbatched_index_arrays_still_index_as_numpy_does():
    x = np.arange(24.0).reshape(2, 3, 4)
    idx = np.array([0, 2])
    mask = np.array([True, False, True])
    np.testing.assert_array_equal(sg.vmap(lambda x, i: x[i, 0], in_axes=(0, None))(x, idx),
                                  x[:, idx, 0])
    np.testing.assert_array_equal(sg.vmap(lambda x, i: x[i, i], in_axes=(0, None))(x, idx),
                                  x[:, idx, idx])
    np.testing.assert_array_equal(sg.vmap(lambda x, i: x[i], in_axes=(0, None))(x, idx),
                                  x[:, idx])
    np.testing.assert_array_equal(sg.vmap(lambda x, m: x[m], in_axes=(0, None))(x, mask),
                                  x[:, mask])


@pytest.mark.parametrize("index", [
    lambda x, a, b, c: x[a, 0], lambda x, a, b, c: x[a, :, c], lambda x, a, b, c: x[:, b, c],
    lambda x, a, b, c: x[a, b], lambda x, a, b, c: x[1, b, :],
    lambda x, a, b, c: x[None, a, 1:3, c], lambda x, a, b, c: x[a, None, b[0]],
    lambda x, a, b, c: x[..., a, c[2:]], lambda x, a, b, c: x[a, [0, 1, 3]],
    lambda x, a, b, c: x[2, 1, c]], ids=lambda f: "")
def test_recorded_integer_arrays_mixed_as_numpy_mixes_them(index):
    """Recorded integer arrays with integers, constant arrays and each other: numpy's values
    and places of the axes, and its gradient (sum of squares: 2 x added at each position)."""
    x = np.random.default_rng(0).standard_normal((3, 4, 5))
    a, b, c = np.array([0, 2, -1]), np.array([[1], [3]]), np.array([4, 0, 2])
    want = index(x, a, b, c)
    op = sg.Ops()
    xv = op.var(x)
    got = index(xv, *(op.leaf(v, None, False) for v in (a, b, c)))
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.value, want)
    grad = np.zeros(x.size)
    np.add.at(grad, index(np.arange(x.size).reshape(x.shape), a, b, c).ravel(),
              2 * want.ravel())
    np.testing.assert_allclose(op.grad((got * got).sum(), xv).value, grad.reshape(x.shape))


def test_batched_integer_arrays_mixed_with_integers():
    x = np.random.default_rng(1).standard_normal((3, 4, 5))
    rows = np.array([[0, 2], [1, 1], [3, 0]])
    got = sg.vmap(lambda x, r: x[r, 0], in_axes=(0, 0))(x, rows)
    np.testing.assert_array_equal(got, np.stack([x[k][r, 0] for k, r in enumerate(rows)]))
    got = sg.vmap(lambda x, r: x[r, r], in_axes=(None, 0))(x[0], rows)
    np.testing.assert_array_equal(got, np.stack([x[0][r, r] for r in rows]))


# ---------------------------------------------------------------- custom rules, closures


def _jax_outer(x):
    """CustomVJPTest.test_closed_over_vmap_tracer's function."""
    @sg.custom_vjp
    def f(y):
        return x * y

    def f_fwd(y):
        return f(y), np.cos(y)

    def f_rev(cos_y, g):
        return (cos_y * g,)

    f.defvjp(f_fwd, f_rev)
    return f


def _jax_outer3(x):
    """CustomVJPTest.test_closed_over_tracer3's function: its residuals hold x."""
    @sg.custom_vjp
    def f(y):
        return x * y

    def f_fwd(y):
        return f(y), (x, np.cos(y))

    def f_rev(res, g):
        x, cos_y = res
        return (cos_y * g * x,)

    f.defvjp(f_fwd, f_rev)
    return sg.grad(f)


def test_jax_custom_vjp_closed_over_vmap_tracer():
    got = sg.vmap(lambda x: _jax_outer(x)(3.0))(np.arange(3.0))
    np.testing.assert_allclose(got, np.arange(3.0) * 3)


def test_jax_custom_vjp_closed_over_tracer3():
    got = sg.vmap(lambda x: _jax_outer3(x)(3.0))(np.arange(3.0))
    np.testing.assert_allclose(got, np.cos(3.0) * np.arange(3.0))


def _scaled(x):
    """x * y whose rule claims 2 x: the rule, not the forward, gives the gradient."""
    @sg.custom_vjp
    def f(y):
        return x * y

    f.defvjp(lambda g, out, y: g * x * 2.0)
    return f


X = np.arange(1.0, 4.0)


def test_custom_vjp_closing_over_a_vmapped_value_every_order():
    np.testing.assert_allclose(sg.vmap(lambda x: _scaled(x)(3.0))(X), 3 * X)
    np.testing.assert_allclose(sg.vmap(lambda x: sg.grad(_scaled(x))(3.0))(X), 2 * X)
    np.testing.assert_allclose(sg.vmap(lambda x, y: sg.grad(_scaled(x))(y))(X, X + 1), 2 * X)
    hess = sg.vmap(lambda x: sg.grad(sg.grad(lambda y: _scaled(x)(y) * y))(3.0))(X)
    np.testing.assert_allclose(hess, 4 * X)     # d2/dy2 of (x y) y, with d(xy)/dy read as 2x
    jac = sg.vmap(lambda x: sg.jacobian(lambda y: _scaled(x)(y), mode="rev")(np.ones(2)))(X)
    np.testing.assert_allclose(jac, np.stack([2 * x * np.eye(2) for x in X]))
    tangent = sg.vmap(lambda x: sg.jvp(_scaled(x), (3.0,), (1.0,))[1])(X)
    np.testing.assert_allclose(tangent, 2 * X)
    g = sg.grad(lambda y: sg.vmap(lambda x: _scaled(x)(y))(X).sum())(3.0)
    np.testing.assert_allclose(g, 2 * X.sum())


def test_custom_vjp_closing_over_values_of_two_vmaps():
    got = sg.vmap(lambda x: sg.vmap(lambda z: _scaled(x * z)(3.0))(X))(X)
    np.testing.assert_allclose(got, 3 * np.outer(X, X))
    got = sg.vmap(lambda x: sg.vmap(lambda z: sg.grad(_scaled(x * z))(3.0))(X))(X)
    np.testing.assert_allclose(got, 2 * np.outer(X, X))


def _sine(x):
    """x sin(y) whose tangent rule claims 3 x cos(y) t."""
    @sg.custom_jvp
    def f(y):
        return x * np.sin(y)

    @f.defjvp
    def f_jvp(primals, tangents):
        return f(primals[0]), x * np.cos(primals[0]) * tangents[0] * 3.0
    return f


def test_custom_jvp_closing_over_a_vmapped_value():
    y = 0.5
    np.testing.assert_allclose(sg.vmap(lambda x: _sine(x)(y))(X), X * np.sin(y))
    np.testing.assert_allclose(sg.vmap(lambda x: sg.jvp(_sine(x), (y,), (1.0,))[1])(X),
                               3 * X * np.cos(y))
    np.testing.assert_allclose(sg.vmap(lambda x: sg.grad(_sine(x))(y))(X), 3 * X * np.cos(y))
    np.testing.assert_allclose(sg.vmap(lambda x: sg.grad(sg.grad(_sine(x)))(y))(X),
                               -3 * X * np.sin(y))


def test_jax_custom_jvp_closed_over_vmap_tracer():
    """The custom_jvp form of CustomVJPTest.test_closed_over_vmap_tracer: x * y under vmap of
    x, at y = 3."""
    def outer(x):
        @sg.custom_jvp
        def f(y):
            return x * y

        @f.defjvp
        def f_jvp(primals, tangents):
            return f(primals[0]), x * tangents[0]
        return f

    np.testing.assert_allclose(sg.vmap(lambda x: outer(x)(3.0))(np.arange(3.0)),
                               np.arange(3.0) * 3)
    np.testing.assert_allclose(sg.vmap(lambda x: sg.grad(outer(x))(3.0))(np.arange(3.0)),
                               np.arange(3.0))


def test_a_closed_over_vmapped_value_that_requires_grad_is_refused():
    with pytest.raises(sg.GraphError, match="through a closure"):
        sg.grad(lambda xs: sg.vmap(lambda x: _scaled(x)(3.0))(xs).sum())(X)


def test_forward_mode_and_hessians_around_a_vmap_of_a_closing_custom_vjp():
    """d/dy of sum_k f_k(y), each f_k's rule claiming 2 x_k: forward mode transposes the rule."""
    each = lambda y: sg.vmap(lambda x: _scaled(x)(y))(X)      # noqa: E731
    np.testing.assert_allclose(sg.jvp(each, (3.0,), (1.0,))[1], 2 * X)
    np.testing.assert_allclose(sg.jacobian(each, mode="fwd")(3.0), 2 * X)
    np.testing.assert_allclose(sg.hessian(lambda y: (each(y) * y).sum())(3.0), 4 * X.sum())


def test_a_closing_custom_vjp_whose_forward_computes_on_the_closure_first():
    """(2 x).sin() is computed on the vmap's Ops before it meets y; a transform inside the
    forward closes over x too."""
    def via(x):
        @sg.custom_vjp
        def f(y):
            return (x * 2.0).sin() * y
        f.defvjp(lambda g, out, y: g * (x * 2.0).sin())
        return f

    def inner(x):
        @sg.custom_vjp
        def f(y):
            return sg.grad(lambda z: (x * z ** 2).sum())(y)      # 2 x y
        f.defvjp(lambda g, out, y: g * x * 2.0)
        return f

    np.testing.assert_allclose(sg.vmap(lambda x: via(x)(3.0))(X), 3 * np.sin(2 * X))
    np.testing.assert_allclose(sg.vmap(lambda x: sg.grad(via(x))(3.0))(X), np.sin(2 * X))
    np.testing.assert_allclose(sg.vmap(lambda x: inner(x)(3.0))(X), 6 * X)
    np.testing.assert_allclose(sg.vmap(lambda x: sg.grad(inner(x))(3.0))(X), 2 * X)


def test_the_per_example_entries_print_their_example():
    op = sg.Ops()
    y = op.var(3.0, name="y")
    out = sg.vmap(lambda x: _scaled(x)(y))(op.var(X, requires_grad=False))
    np.testing.assert_allclose(out.value, 3 * X)
    np.testing.assert_allclose(op.grad(out.sum(), y).value, 2 * X.sum())
    calls = [line for line in _trace_lines(op) if "= f(" in line]
    shown = r"v\d+ = f\(y, closure=\[v\d+\], example=\[v\d+\]\)"     # x's example, its number
    assert len(calls) == 3 and all(re.fullmatch(shown, c.strip()) for c in calls), calls


def _trace_lines(op: sg.Ops) -> list:
    console = Console(file=io.StringIO(), width=200)
    op.print_trace(console)
    return console.file.getvalue().splitlines()


# ---------------------------------------------------------------- recorded closures, replayed


def _masked(mask):
    """y * mask, the mask (x > 0) read through the closure."""
    @sg.custom_vjp
    def f(y):
        return y * mask
    f.defvjp(lambda g, out, y: g * mask)
    return f


def _relu_sum(x: np.ndarray) -> np.ndarray:
    return (x * (x > 0)).sum(axis=-1)


def test_a_recorded_value_read_through_a_closure_is_read_again_by_replays():
    """The mask is an input of the entry (closure=[v0]): sg.jit and op.program replays read it
    at their inputs, not as recorded."""
    x1, x2 = np.array([1.0, -1.0]), np.array([-1.0, 2.0])
    f = sg.jit(lambda x: _masked(x > 0)(x).sum())
    assert [float(f(x1)), float(f(x2))] == [1.0, 2.0]
    op = sg.Ops()
    x = op.var(x1, name="x")
    y = _masked(x > 0)(x).sum()
    assert float(op.program(x, y)(x2)) == 2.0
    assert any(re.fullmatch(r"v\d+ = f\(x, closure=\[v\d+\]\)", line.strip())
               for line in _trace_lines(op))
    X2 = np.array([[1.0, -1.0], [-2.0, 3.0]])
    g = sg.jit(sg.vmap(lambda x: _masked(x > 0)(x).sum()))
    np.testing.assert_array_equal(g(X2), _relu_sum(X2))
    np.testing.assert_array_equal(g(-X2), _relu_sum(-X2))
    per = sg.jit(sg.vmap(sg.grad(lambda x: _masked(x > 0)(x).sum())))
    np.testing.assert_array_equal(per(-X2), (-X2 > 0).astype(float))


def test_a_value_only_backward_reads_the_closure_as_the_forward_does():
    op = sg.Ops()
    x = op.var([1.0, -1.0, 3.0])
    y = _masked(x > 0)(x).sum()
    np.testing.assert_array_equal(op.grad(y, x, create_graph=False).value, [1.0, 0.0, 1.0])
