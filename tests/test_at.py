"""JAX's functional updates on Variables, ``x.at[index].set/add/multiply/min/max/get``.

Values against numpy's in-place forms on a copy (``x[idx] = y``, ``np.add.at``,
``np.multiply.at``, ``np.minimum.at``, ``np.maximum.at``); derivatives against closed forms
and against central differences (sg.check_grads: float64, eps 1e-6, atol = rtol = 1e-5) at
orders 1 and 2 in reverse and forward mode; vmap against a loop of single examples.
"""

import numpy as np
import pytest

import simplegrad as sg

VERBS = ("set", "add", "multiply", "min", "max")
UFUNC = {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}


def numpy_update(verb, x, index, y):
    """numpy's in-place form of the update, on a copy."""
    out = np.array(x, dtype=float)
    if verb == "set":
        out[index] = y
    else:
        UFUNC[verb].at(out, index, np.broadcast_to(y, out[index].shape))
    return out


INDICES = [
    (1, ()), (-1, ()), (slice(1, 3), (2,)), (np.array([0, 2, 2, 0]), (4,)),
    (np.array([True, False, True, False]), (2,)), ((Ellipsis,), (4,)),
    (np.array([[3, 1], [1, 1]]), (2, 2)), (np.array([-1, 3]), (2,)),
]


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("index,yshape", INDICES, ids=lambda v: repr(v).replace(" ", ""))
def test_values_and_derivatives_match_numpy_and_differences(verb, index, yshape):
    rng = np.random.default_rng(1)
    x0 = rng.normal(size=4)
    y0 = rng.normal(size=yshape)
    op = sg.Ops()
    x, y = op.var(x0), op.var(y0)
    out = getattr(x.at[index], verb)(y)
    np.testing.assert_array_equal(out.value, numpy_update(verb, x0, index, y0))
    np.testing.assert_array_equal(x.value, x0)          # out of place
    sg.check_grads(lambda a, b: (getattr(a.at[index], verb)(b) ** 2 * np.arange(1.0, 5.0)).sum(),
                   [x0, y0], order=2, eps=1e-6, atol=1e-5, rtol=1e-5)


def test_two_dimensional_indices_tuples_none_and_broadcast_values():
    x0 = np.arange(12.0).reshape(3, 4)
    for index, y0 in [((slice(None), np.array([3, 0])), np.array([[1.0], [2.0], [3.0]])),
                      ((np.array([0, 2]), np.array([1, 1])), 7.0),
                      ((None, 1, slice(None, None, 2)), np.array([5.0, 6.0])),
                      ((x0 > 6,), -1.0), ((np.array([2, 0, 2]), slice(1, 3)), np.ones(2))]:
        for verb in VERBS:
            op = sg.Ops()
            x = op.var(x0)
            out = getattr(x.at[index], verb)(y0)
            np.testing.assert_array_equal(out.value, numpy_update(verb, x0, index, y0))


def test_closed_forms_with_repeated_positions():
    op = sg.Ops()
    x = op.var([1.0, 2.0, 3.0])
    y = op.var([2.0, 3.0, 5.0])
    i = np.array([0, 0, 2])
    # set: the last write wins, so only y[1] and y[2] reach the output
    s = x.at[i].set(y)
    np.testing.assert_array_equal(s.value, [3.0, 2.0, 5.0])
    dx, dy = op.grad(s.sum(), [x, y])
    np.testing.assert_array_equal(dx.value, [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(dy.value, [0.0, 1.0, 1.0])
    # add accumulates: d/dy of sum(out * w) is w at each y's position
    w = np.array([10.0, 20.0, 30.0])
    dx, dy = op.grad((x.at[i].add(y) * w).sum(), [x, y])
    np.testing.assert_array_equal(dx.value, w)
    np.testing.assert_array_equal(dy.value, [10.0, 10.0, 30.0])
    # multiply takes every factor: out0 = x0 y0 y1, out2 = x2 y2
    m = x.at[i].multiply(y)
    np.testing.assert_array_equal(m.value, [6.0, 2.0, 15.0])
    dx, dy = op.grad(m.sum(), [x, y])
    np.testing.assert_array_equal(dx.value, [6.0, 1.0, 5.0])
    np.testing.assert_array_equal(dy.value, [3.0, 2.0, 3.0])
    # second order: d2 out0 / dy0 dy1 = x0 = 1
    (g0,) = [op.grad(m.sum(), y)[0]]
    np.testing.assert_array_equal(op.grad(g0, y).value, [0.0, 1.0, 0.0])


def test_min_and_max_split_a_tie_as_maximum_does():
    op = sg.Ops()
    x = op.var([1.0, 2.0, 3.0])
    y = op.var([2.0, 0.0])
    out = x.at[np.array([1, 2])].max(y)            # tie at position 1, x wins at 2
    np.testing.assert_array_equal(out.value, [1.0, 2.0, 3.0])
    dx, dy = op.grad(out.sum(), [x, y])
    np.testing.assert_array_equal(dx.value, [1.0, 0.5, 1.0])
    np.testing.assert_array_equal(dy.value, [0.5, 0.0])
    out = x.at[np.array([0, 1])].min(y)            # y wins at 1, x at 0 (1 < 2)
    dx, dy = op.grad(out.sum(), [x, y])
    np.testing.assert_array_equal(dx.value, [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(dy.value, [0.0, 1.0])


def test_get_is_indexing_and_keywords_numpy_allows():
    op = sg.Ops()
    x = op.var([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(x.at[::2].get().value, [1.0, 3.0])
    np.testing.assert_array_equal(
        x.at[1].set(5.0, mode="promise_in_bounds", unique_indices=True).value, [1, 5, 3])
    for call in (lambda: x.at[5].get(mode="fill", fill_value=0.0),
                 lambda: x.at[0].add(1.0, mode="drop"), lambda: x.at[0].get(fill_value=0.0),
                 lambda: x.at[0].set(1.0, mode="clip")):
        with pytest.raises(sg.ArgumentError, match="not supported"):
            call()


def test_out_of_bounds_and_bad_values_raise_before_recording():
    op = sg.Ops()
    x = op.var([1.0, 2.0, 3.0], name="x")
    n = len(op.tape)
    for verb in VERBS:
        with pytest.raises(IndexError, match=r"out of bounds.*x with shape \(3,\)"):
            getattr(x.at[np.array([0, 3])], verb)(1.0)
        with pytest.raises(IndexError, match="x with shape"):
            getattr(x.at[-4], verb)(1.0)
        with pytest.raises(sg.ArgumentError, match=r"shape \(2,\) cannot be broadcast .* \(3,\)"):
            getattr(x.at[:], verb)(np.ones(2))
    with pytest.raises(IndexError):
        x.at[np.array([True, False])].set(0.0)
    assert len(op.tape) == n


def test_trace_prints_code_a_user_can_write():
    op = sg.Ops()
    x = op.var([1.0, 2.0, 3.0, 4.0], name="x")
    y = op.var(10.0, name="y")
    x.at[1].set(y)
    x.at[np.array([0, 0])].add(y)
    x.at[1:3].max(y)
    text = op.format_trace()
    assert "v0 = x.at[1].set(y)" in text
    assert "v1 = x.at[[0, 0]].add(y)" in text
    assert "v2 = x[1:3]\nv3 = maximum(v2, y)\nv4 = x.at[1:3].set(v3)" in text
    # the printed lines run as written, on Variables
    op2 = sg.Ops()
    x2, y2 = op2.var([1.0, 2.0, 3.0, 4.0]), op2.var(10.0)
    np.testing.assert_array_equal(eval("x.at[1].set(y)", {"x": x2, "y": y2}).value,
                                  [1.0, 10.0, 3.0, 4.0])


def test_a_parameter_is_left_unchanged_and_numpy_arrays_have_no_at():
    p = sg.Parameter([1.0, 2.0])
    op = sg.Ops()
    out = p.at[0].set(op.var(5.0))
    np.testing.assert_array_equal(out.value, [5.0, 2.0])
    np.testing.assert_array_equal(p.value, [1.0, 2.0])
    assert not hasattr(np.zeros(2), "at")


@pytest.mark.parametrize("verb", VERBS)
def test_vmap_with_a_batched_index_equals_a_loop(verb):
    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(3, 4)), rng.normal(size=3)
    Y[1] = X[1, 2]                      # a tie for min and max
    idx = np.array([0, 2, 3])

    def f(x, i, y):
        return (getattr(x.at[i], verb)(y) ** 2).sum()

    batched = sg.vmap(sg.grad(f, argnums=(0, 2)))(X, idx, Y)
    for k in range(3):
        gx, gy = sg.grad(f, argnums=(0, 2))(X[k], int(idx[k]), Y[k])
        np.testing.assert_allclose(batched[0][k], gx, rtol=1e-14)
        np.testing.assert_allclose(batched[1][k], gy, rtol=1e-14)
    values = sg.vmap(lambda x, i, y: getattr(x.at[i], verb)(y))(X, idx, Y)
    for k in range(3):
        np.testing.assert_array_equal(values[k], numpy_update(verb, X[k], idx[k], Y[k]))


@pytest.mark.parametrize("verb", VERBS)
def test_vmap_with_batched_index_arrays_repeating_positions(verb):
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(2, 4)), rng.normal(size=(2, 3))
    idx = np.array([[1, 1, 3], [0, 2, 0]])

    def f(z, i):                        # z packs x (4) and y (3): one Hessian of both
        x, y = z[:4], z[4:]
        return (getattr(x.at[i], verb)(y) ** 2 * np.arange(1.0, 5.0)).sum()

    values = sg.vmap(lambda x, i, y: getattr(x.at[i], verb)(y))(X, idx, Y)
    Z = np.concatenate([X, Y], axis=1)
    hessians = sg.vmap(sg.hessian(f))(Z, idx)
    for k in range(2):
        np.testing.assert_array_equal(values[k], numpy_update(verb, X[k], idx[k], Y[k]))
        np.testing.assert_allclose(hessians[k], sg.hessian(f)(Z[k], idx[k]),
                                   rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("verb", VERBS)
def test_vmap_with_a_constant_index_equals_a_loop(verb):
    rng = np.random.default_rng(4)
    X, Y = rng.normal(size=(3, 2, 4)), rng.normal(size=(3, 2))
    index = (slice(None), np.array([3, 3]))

    def f(x, y):
        return (getattr(x.at[index], verb)(y) ** 3).sum()

    batched = sg.vmap(sg.grad(f, argnums=(0, 1)))(X, Y)
    unbatched_x = sg.vmap(sg.grad(f, argnums=(0, 1)), in_axes=(None, 0))(X[0], Y)
    for k in range(3):
        gx, gy = sg.grad(f, argnums=(0, 1))(X[k], Y[k])
        np.testing.assert_allclose(batched[0][k], gx, rtol=1e-14)
        np.testing.assert_allclose(batched[1][k], gy, rtol=1e-14)
        gx, gy = sg.grad(f, argnums=(0, 1))(X[0], Y[k])
        np.testing.assert_allclose(unbatched_x[0][k], gx, rtol=1e-14)
        np.testing.assert_allclose(unbatched_x[1][k], gy, rtol=1e-14)


def test_taylor_coefficients_are_the_closed_form():
    # f(t) = sum(x(t).at[[0, 0, 2]].multiply(y(t))) with x = a t, y = (t, t^2, 1):
    # f = a0 t * t * t^2 + a1 t + a2 t = t^4 + 2 t + 3 t for a = (1, 2, 3)
    a = np.array([1.0, 2.0, 3.0])

    def f(t):
        y = np.array([1.0, 0.0, 0.0]) * t + np.array([0.0, 1.0, 0.0]) * t * t + \
            np.array([0.0, 0.0, 1.0])
        return (a * t).at[np.array([0, 0, 2])].multiply(y).sum()

    t0 = 0.5
    coeffs = sg.taylor(f, t0, 1.0, 4)
    exact = [t0 ** 4 + 5 * t0, 4 * t0 ** 3 + 5, 12 * t0 ** 2, 24 * t0, 24.0]   # derivatives
    np.testing.assert_allclose([float(c) for c in coeffs], exact, rtol=1e-13)


def test_program_replay_and_jit_read_the_new_inputs():
    def f(x, y):
        return (x.at[np.array([0, 0, 1])].multiply(y).at[2].max(y[0]) ** 2).sum()

    def numpy_f(x, y):
        out = numpy_update("multiply", x, np.array([0, 0, 1]), y)
        out[2] = max(out[2], y[0])
        return (out ** 2).sum()

    op = sg.Ops()
    x, y = op.var([1.0, 2.0, 3.0]), op.var([2.0, 3.0, 4.0])
    L = f(x, y)
    prog = op.program([x, y], [L, *op.grad(L, [x, y])])
    jf = sg.jit(sg.value_and_grad(f, argnums=(0, 1)))
    for x1, y1 in [(np.array([1.0, -2.0, 0.5]), np.array([5.0, 0.5, 1.0])),
                   (np.array([0.0, 1.0, 9.0]), np.array([-1.0, 2.0, 2.0]))]:
        value, gx, gy = prog(x1, y1)
        direct = sg.value_and_grad(f, argnums=(0, 1))(x1, y1)
        np.testing.assert_allclose(value, numpy_f(x1, y1), rtol=1e-14)
        np.testing.assert_allclose(gx, direct[1][0], rtol=1e-14)
        np.testing.assert_allclose(gy, direct[1][1], rtol=1e-14)
        jv, (jx, jy) = jf(x1, y1)
        np.testing.assert_allclose([jv, *jx, *jy], [value, *gx, *gy], rtol=1e-14)
