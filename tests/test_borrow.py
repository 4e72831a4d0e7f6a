"""Ops(borrow=True): the caller's float arrays are recorded as read-only views, not copies;
the default Ops copies writable arrays so later writes cannot change what it recorded."""

from __future__ import annotations

import numpy as np

import simplegrad as sg


def test_a_borrowing_ops_records_views_and_leaves_the_callers_arrays_writable():
    A = np.arange(6.0).reshape(2, 3)
    x = np.array([1.0, 2.0, 3.0])
    op = sg.Ops(borrow=True)
    xv = op.var(x)
    y = op.matmul(A, xv)
    assert np.shares_memory(xv.raw, x) and np.shares_memory(y.inputs[0], A)
    assert x.flags.writeable and A.flags.writeable          # the caller's arrays untouched
    assert not xv.raw.flags.writeable and not y.inputs[0].flags.writeable
    np.testing.assert_array_equal(op.grad(y.sum(), xv).value, A.sum(axis=0))


def test_the_default_ops_copies_so_later_writes_change_nothing():
    A = np.arange(6.0).reshape(2, 3)
    x = np.array([1.0, 2.0, 3.0])
    op = sg.Ops()
    xv = op.var(x)
    y = op.matmul(A, xv)
    assert not np.shares_memory(xv.raw, x) and not np.shares_memory(y.inputs[0], A)
    A[:] = 0.0
    x[:] = 0.0
    np.testing.assert_array_equal(op.grad(y.sum(), xv).value, [3.0, 5.0, 7.0])


def test_borrowing_converts_what_it_must():
    op = sg.Ops(borrow=True)
    ints = np.array([1, 2, 3])
    v = op.var(ints)                     # int data becomes float64: a copy by necessity
    assert v.dtype == np.float64 and not np.shares_memory(v.raw, ints)
    f32 = op.var(np.ones(3, dtype=np.float32))
    y = f32 * np.array([1.0, 2.0, 3.0])  # a float64 constant meets float32: cast, a copy
    assert y.dtype == np.float32


def test_transforms_borrow_and_return_arrays_of_their_own():
    A = np.arange(9.0).reshape(3, 3)
    x = np.array([1.0, -2.0, 0.5])
    g = sg.grad(lambda v: ((A @ v) ** 2).sum())(x)
    np.testing.assert_allclose(g, 2 * A.T @ (A @ x), rtol=1e-14)
    assert A.flags.writeable and x.flags.writeable
    assert not np.shares_memory(g, x) and g.flags.writeable
    ident = sg.grad(lambda v: (v * v).sum() / 2)(x)      # d/dv = v: still a fresh array
    assert not np.shares_memory(ident, x)
    hv = sg.hvp(lambda v: ((A @ v) ** 2).sum(), x, np.ones(3))
    np.testing.assert_allclose(hv, 2 * A.T @ A @ np.ones(3), rtol=1e-14)


def test_vjp_keeps_its_own_copies_since_its_tape_outlives_the_call():
    A = np.arange(4.0).reshape(2, 2)
    x = np.array([1.0, 2.0])
    y, vjp_fn = sg.vjp(lambda v: A @ v, x)
    A[:] = 0.0                          # written between the call and the pullback
    (gx,) = vjp_fn(np.ones(2))
    np.testing.assert_array_equal(gx, [2.0, 4.0])      # (A^T 1) of the A recorded


def test_results_the_transform_computed_are_handed_over_without_a_copy():
    # grad of sum(x * c) + sum(x * x) is c + 2x: a fresh array, handed over (owned, writable);
    # the same Variable returned twice comes back as two separate arrays
    c = np.array([1.0, 2.0])
    x = np.array([3.0, 4.0])
    value, g = sg.value_and_grad(lambda v: (v * c).sum() + (v * v).sum())(x)
    assert g.base is None and g.flags.writeable
    np.testing.assert_array_equal(g, c + 2 * x)
    ga, gb = sg.grad(lambda a, b: (a + b).sum() * 2.0, argnums=(0, 1))(x, x)
    assert not np.shares_memory(ga, gb)
    ga[0] = 99.0
    assert gb[0] == 2.0


def test_vmap_hands_each_output_a_buffer_of_its_own_without_copying_a_fresh_one():
    # y is computed by vmap's Ops: handed over as it is, and its transpose (all of a fresh
    # buffer) too; the same buffer asked for again comes back as a copy
    x = np.arange(12.0).reshape(3, 2, 2)

    def f(v):
        y = v * 2.0
        return y, y, y.T
    a, b, c = sg.vmap(f)(x)
    assert a.base is None and a.flags.writeable
    assert not np.shares_memory(a, b) and not np.shares_memory(a, c)
    np.testing.assert_array_equal(a, 2 * x)
    np.testing.assert_array_equal(b, 2 * x)
    np.testing.assert_array_equal(c, np.swapaxes(2 * x, 1, 2))
    (t,) = sg.vmap(lambda v: ((v * 2.0).T,))(x)     # a view of all of a fresh buffer
    assert t.flags.writeable and not t.flags.c_contiguous and t.base.base is None
    np.testing.assert_array_equal(t, np.swapaxes(2 * x, 1, 2))
    per = sg.vmap(sg.grad(lambda W, v: (v @ W.T).sum()), in_axes=(None, 0))(np.ones((4, 2)), x)
    np.testing.assert_array_equal(per, np.repeat(x.sum(axis=1)[:, None, :], 4, axis=1))
    assert x[0, 0, 0] == 0.0                        # the caller's array is left alone


def test_a_parameter_step_copies_writable_data_and_records_read_only_data_as_it_is():
    W = sg.Parameter(np.array([[1.0], [-1.0]]))
    X = np.array([[2.0, 3.0], [4.0, 5.0]])
    h = X @ W                                   # on the implicit Ops of free parameters
    assert h.inputs[0] is not X and np.array_equal(h.inputs[0], X)
    L = h.sum()
    X[:] = 0.0                                  # a later write changes nothing recorded
    L.backward()
    np.testing.assert_array_equal(W.grad.value, [[6.0], [8.0]])   # column sums of X
    frozen = np.array([[2.0, 3.0], [4.0, 5.0]])
    frozen.flags.writeable = False
    assert (frozen @ W).inputs[0] is frozen     # nothing can write through it: no copy
