"""A matrix times a stack of columns, ``(n, k) @ (..., k, 1)``: the shape the batched jvp of a
matrix-vector gradient records (a Hessian's forward-over-reverse sweep). The forward computes
it as one matrix product; values are checked against a loop of ``np.dot`` per column, eagerly,
compiled, and as the Hessian of sum(tanh(W x)) against its closed form."""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg


@pytest.mark.parametrize("stack", [(7,), (3, 4), (1,)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_matrix_times_stack_of_columns_equals_a_loop(stack, dtype, rng):
    a = (rng.normal(size=(5, 6)) * 4).astype(dtype)
    v = (rng.normal(size=stack + (6, 1)) * 4).astype(dtype)
    op = sg.Ops()
    av, vv = op.var(a, requires_grad=False), op.var(v)
    a, v = av.value, vv.value      # as the Ops holds them (integers become floats)
    want = np.empty(stack + (5, 1), dtype=np.result_type(a, v))
    for idx in np.ndindex(*stack):
        want[idx] = np.dot(a, v[idx])
    out = av @ vv
    assert out.shape == want.shape and out.dtype == want.dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out.value, want, rtol=tol, atol=tol)
    fn = sg.compile(op.program([av, vv], out))
    np.testing.assert_allclose(fn(a, v), want, rtol=tol, atol=tol)


def test_matrix_times_stack_of_columns_mismatch_names_matmul(rng):
    op = sg.Ops()
    a, v = op.var(rng.normal(size=(5, 6))), op.var(rng.normal(size=(3, 4, 1)))
    n = len(op.tape)
    with pytest.raises(sg.ShapeError, match="matmul"):
        a @ v
    assert len(op.tape) == n


@pytest.mark.parametrize("n", [1, 9, 100])
def test_hessian_of_sum_tanh_eager_and_compiled_equal_closed_form(n, rng):
    W, x = rng.normal(size=(n, n)) / np.sqrt(n), rng.normal(size=n)
    t = np.tanh(W @ x)
    want = W.T @ ((-2 * t * (1 - t * t))[:, None] * W)

    def f(x):
        return (W @ x).tanh().sum()
    np.testing.assert_allclose(sg.hessian(f)(x), want, rtol=1e-12, atol=1e-14)
    op = sg.Ops()
    xv = op.var(x)
    fn = sg.compile(op.program([xv], sg.hessian(f)(xv)))
    x2 = rng.normal(size=n)
    t2 = np.tanh(W @ x2)
    np.testing.assert_allclose(fn(x2), W.T @ ((-2 * t2 * (1 - t2 * t2))[:, None] * W),
                               rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(("xs", "ys"), [
    ((3, 1), (3, 4)),           # a contraction of 1 against 3: numpy refuses, never an outer
    ((2, 3, 1), (2, 2, 4)),
    ((4, 3), (7, 2, 1)),        # a matrix against columns of another length
    ((5, 1), (1, 4)), ((2, 3, 1), (2, 1, 4)),       # true outer products
    ((0, 2, 2), (0, 2, 1)), ((4, 3), (0, 3, 1)),    # empty stacks
])
def test_matmul_fast_paths_agree_with_numpy_on_edge_shapes(xs, ys):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=xs), rng.normal(size=ys)
    stacked = [(x, y)]
    if len(ys) == 3 and len(xs) == 2:       # the weight broadcast along the stack, as vmap has it
        stacked.append((np.broadcast_to(x, (ys[0],) + xs), y))
    for a, b in stacked:
        op = sg.Ops()
        try:
            want = np.matmul(a, b)
        except ValueError:
            with pytest.raises(sg.ShapeError, match="matmul"):
                op.matmul(op.var(a), op.var(b))
            continue
        got = op.matmul(op.var(a), op.var(b)).value
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
