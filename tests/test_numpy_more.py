"""numpy functions on Variables added for JAX and torch.func habits: each against numpy itself
on the values (numpy is the independent answer for the forward) and against float64 central
differences at orders 1 and 2 (sg.check_grads, atol = rtol = 1e-6) for the derivatives.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import simplegrad as sg


def same_as_numpy(fn, *arrays, check=True, **kwargs):
    """fn on Variables equals fn on the arrays; then orders 1 and 2 against differences."""
    op = sg.Ops()
    xs = [op.var(a) for a in arrays]
    got = fn(*xs, **kwargs)
    want = fn(*arrays, **kwargs)
    assert isinstance(got, sg.Variable), type(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got.value, want, rtol=1e-13, atol=1e-13)
    if check:
        sg.check_grads(lambda *vs: fn(*vs, **kwargs), list(arrays), atol=1e-6, rtol=1e-6)
    return got

# ---------------------------------------------------------------- cross


@pytest.mark.parametrize(("sa", "sb", "kw"), [
    ((3,), (3,), {}),
    ((3, 4), (4, 3), {"axisa": 0}),
    ((2, 3, 5), (3,), {"axisa": 1, "axisc": 0}),
    ((3, 2), (3, 2), {"axis": 0}),
    ((3, 3), (3, 3, 3), {"axis": 0}),
    ((5, 3), (3, 5), {"axisb": 0, "axisc": 0}),
    ((2, 3), (4, 1, 3), {"axisc": -2}),
])
def test_cross_takes_numpy_axes(sa, sb, kw, rng):
    same_as_numpy(np.cross, rng.normal(size=sa), rng.normal(size=sb), **kw)


def test_cross_axis_arguments_positional_as_numpy(rng):
    a, b = rng.normal(size=(3, 2)), rng.normal(size=(2, 3))
    op = sg.Ops()
    got = op.cross(op.var(a), op.var(b), 0, -1, 0)     # axisa, axisb, axisc
    np.testing.assert_allclose(got.value, np.cross(a, b, 0, -1, 0), rtol=1e-14)


def test_cross_errors():
    op = sg.Ops()
    x, y = op.var(np.ones((3, 2)), name="x"), op.var(np.ones((2, 3)), name="y")
    with pytest.raises(sg.ShapeError, match="cross: axisa=-1 must hold 3-vectors.*x with shape"):
        op.cross(x, y)
    with pytest.raises(sg.AxisError, match="cross: axisc=2 is out of range"):
        op.cross(x, y, axisa=0, axisc=2)
    with pytest.raises(sg.AxisError, match="axisb=5"):
        np.cross(x, y, axisa=0, axisb=5)
    assert len(op.tape) == 0

# ---------------------------------------------------------------- stacks of one array


@pytest.mark.parametrize("name", ["vstack", "hstack", "column_stack", "row_stack"])
@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 3, 4), (2, 1, 3, 2)])
def test_stacks_of_one_array_join_its_rows(name, shape, rng):
    fn = getattr(np, name, None)
    if fn is None:
        pytest.skip(f"numpy {np.__version__} has no {name}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)     # row_stack, numpy 2
        same_as_numpy(fn, rng.normal(size=shape))


def test_column_stack_of_several(rng):
    same_as_numpy(lambda a, b, c: np.column_stack([a, b, c]), rng.normal(size=3),
                  rng.normal(size=(3, 2)), rng.normal(size=3))
    op = sg.Ops()
    with pytest.raises(sg.ShapeError, match="column_stack"):
        op.column_stack([op.var(np.ones(3)), op.var(np.ones(4))])


def test_stacks_of_one_array_under_vmap(rng):
    a = rng.normal(size=(5, 2, 3))
    np.testing.assert_allclose(sg.vmap(np.column_stack)(a),
                               np.stack([np.column_stack(r) for r in a]))
    np.testing.assert_allclose(sg.vmap(np.hstack)(a), np.stack([np.hstack(r) for r in a]))

# ---------------------------------------------------------------- differences and integrals


@pytest.mark.parametrize(("fn", "shapes"), [
    (lambda a: np.diff(a), [(3, 5)]),
    (lambda a: np.diff(a, 2, axis=0, prepend=1.5), [(4, 3)]),
    (lambda a, b: np.diff(a, axis=0, append=b), [(3, 2), (1, 2)]),
    (lambda a: np.ediff1d(a, to_end=[1.0, 2.0], to_begin=-1.0), [(2, 3)]),
    (lambda a: np.trapezoid(a), [(3, 5)]),
    (lambda a, x: np.trapezoid(a, x=x), [(2, 4), (4,)]),
    (lambda a, x: np.trapezoid(a, x, axis=0), [(4, 2), (4, 2)]),
    (lambda a: np.trapezoid(a, dx=0.3, axis=0), [(4, 2)]),
], ids=["diff", "diff2-prepend", "diff-append", "ediff1d", "trapezoid", "trapezoid-x",
        "trapezoid-x2d", "trapezoid-dx"])
def test_differences_and_integrals(fn, shapes, rng):
    args = [np.sort(rng.normal(size=s), axis=-1) for s in shapes]
    same_as_numpy(fn, *args)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("sizes", [(5, 3), (3, 5), (4, 4), (6, 1), (2, 7)])
@pytest.mark.parametrize("fn", [np.convolve, np.correlate])
def test_convolve_and_correlate(fn, sizes, mode, rng):
    same_as_numpy(fn, rng.normal(size=sizes[0]), rng.normal(size=sizes[1]), mode=mode)


def test_convolve_with_a_constant_kernel_under_vmap(rng):
    k, xs = np.array([0.25, 0.5, 0.25]), rng.normal(size=(4, 6))
    got = sg.vmap(lambda x: np.convolve(x, k, mode="same"))(xs)
    np.testing.assert_allclose(got, [np.convolve(x, k, mode="same") for x in xs], rtol=1e-13)

# ---------------------------------------------------------------- statistics


@pytest.mark.parametrize(("fn", "shape"), [
    (lambda a: np.median(a), (3, 5)),
    (lambda a: np.median(a, axis=1, keepdims=True), (3, 4)),
    (lambda a: np.quantile(a, [0.1, 0.5, 0.77], axis=1), (2, 6)),
    (lambda a: np.quantile(a, 0.3, axis=(0, 2), keepdims=True), (2, 3, 4)),
    (lambda a: np.percentile(a, [[10.0, 90.0]], axis=0), (5, 2)),
    (lambda a: np.quantile(a, 0.35, method="lower"), (7,)),
    (lambda a: np.quantile(a, [0.35, 0.5], method="higher"), (7,)),
    (lambda a: np.quantile(a, [0.25, 0.75, 0.6], method="nearest"), (7,)),
    (lambda a: np.quantile(a, [0.25, 0.6], method="midpoint"), (8,)),
], ids=["median", "median-axis", "quantile-q", "quantile-axes", "percentile", "lower",
        "higher", "nearest", "midpoint"])
def test_order_statistics(fn, shape, rng):
    same_as_numpy(fn, rng.permutation(np.prod(shape)).reshape(shape) * 0.37)    # no ties


def test_median_gradient_is_the_middle_entries():
    x = np.array([3.0, 1.0, 4.0, 1.5, 9.0, 2.6])      # middle two: 2.6 and 3.0
    np.testing.assert_allclose(sg.grad(np.median)(x), [0.5, 0, 0, 0, 0, 0.5])


@pytest.mark.parametrize(("fn", "shapes"), [
    (lambda m: np.cov(m), [(3, 6)]),
    (lambda m: np.cov(m, rowvar=False, bias=True), [(6, 2)]),
    (lambda m, y: np.cov(m, y), [(5,), (5,)]),
    (lambda m: np.cov(m, ddof=2, fweights=[1, 2, 1, 3, 1], aweights=[0.5, 1, 2, 1, 1]),
     [(2, 5)]),
    (lambda m: np.cov(m, aweights=[0.5, 1, 2, 1, 1]), [(2, 5)]),
    (lambda m: np.corrcoef(m), [(3, 6)]),
    (lambda m, y: np.corrcoef(m, y, rowvar=False), [(6, 2), (6,)]),
], ids=["cov", "cov-cols-bias", "cov-xy", "cov-weights", "cov-aweights", "corrcoef",
        "corrcoef-xy"])
def test_covariances(fn, shapes, rng):
    same_as_numpy(fn, *[rng.normal(size=s) for s in shapes])

# ---------------------------------------------------------------- array builders


def test_array_builders(rng):
    a, v, w = rng.normal(size=(2, 3)), rng.normal(size=3), rng.normal(size=4)
    same_as_numpy(np.copy, a)
    same_as_numpy(lambda x, y: np.block([[x, x], [y[None, :], 2.0 * y[None, :]]]), a, v)
    same_as_numpy(lambda x, y: np.block([x, y, 1.0]), v, w)
    same_as_numpy(lambda x, y: np.append(x, y), a, v)
    same_as_numpy(lambda x: np.append(x, x, axis=0), a)
    for fn in (np.atleast_1d, np.atleast_2d, np.atleast_3d):
        for arr in (np.array(1.5), v, a, rng.normal(size=(2, 1, 2))):
            same_as_numpy(fn, arr, check=False)
    op = sg.Ops()
    x = op.var(a)
    assert x.copy() is x and np.copy(x) is x and x.tolist() == a.tolist()
    many = np.atleast_2d(op.var(v), x, 3.0)
    assert [np.shape(m) for m in many] == [(1, 3), (2, 3), (1, 1)]


@pytest.mark.parametrize("kw", [{}, {"indexing": "ij"}, {"sparse": True}])
def test_meshgrid(kw, rng):
    v, w, z = rng.normal(size=3), rng.normal(size=4), rng.normal(size=2)
    op = sg.Ops()
    got = np.meshgrid(op.var(v), w, op.var(z), **kw)
    want = np.meshgrid(v, w, z, **kw)
    assert len(got) == len(want)
    for g, e in zip(got, want):
        np.testing.assert_array_equal(g.value if isinstance(g, sg.Variable) else g, e)
    sg.check_grads(lambda a, b: sum((m * m).sum() for m in np.meshgrid(a, b, **kw)), [v, w])


def test_block_errors_name_the_function():
    op = sg.Ops()
    x = op.var(np.ones((2, 2)), name="x")
    with pytest.raises(sg.ShapeError, match="np.block: list depths are mismatched"):
        np.block([[x], x])

# ---------------------------------------------------------------- elementwise


def test_nan_to_num_passes_the_gradient_where_finite():
    z = np.array([1.5, np.nan, np.inf, -np.inf, -0.5])
    for kw in ({}, {"nan": 5.0, "posinf": 7.0, "neginf": -7.0}):
        op = sg.Ops()
        x = op.var(z)
        y = np.nan_to_num(x, **kw)
        np.testing.assert_array_equal(y.value, np.nan_to_num(z, **kw))
        np.testing.assert_array_equal(op.grad(y.sum(), x).value, [1, 0, 0, 0, 1])


def test_heaviside_and_the_bool_tests():
    z = np.array([-1.0, 0.0, 2.0, np.nan, np.inf])
    op = sg.Ops()
    x, h = op.var(z), op.var([0.3, 0.4, 0.5, 0.6, 0.7])
    y = np.heaviside(x, h)
    np.testing.assert_array_equal(y.value, np.heaviside(z, h.value))
    g1, g2 = op.grad(np.nan_to_num(y).sum(), [x, h])
    np.testing.assert_array_equal(g2.value, [0, 1, 0, 0, 0])      # x2 counts where x1 == 0
    np.testing.assert_array_equal(g1.value, np.zeros(5))
    for fn in (np.isnan, np.isinf, np.isfinite):
        b = fn(x)
        assert isinstance(b, sg.Variable) and b.dtype == bool
        np.testing.assert_array_equal(b.value, fn(z))


def test_sinc_values_and_derivatives_at_and_near_zero():
    t = np.array([0.0, 1e-9, -0.05, 0.0999, 0.1, 0.5, 1.0, 2.5, -3.0])
    same_as_numpy(np.sinc, t[1:])
    np.testing.assert_allclose(sg.Ops().var(t).value * 0 + np.sinc(sg.Ops().var(t)).value,
                               np.sinc(t), rtol=1e-15)
    # sinc^(2k)(0) = (-1)^k pi^(2k) / (2k + 1); odd derivatives vanish
    for n, want in [(1, 0.0), (2, -np.pi ** 2 / 3), (3, 0.0), (4, np.pi ** 4 / 5),
                    (6, -np.pi ** 6 / 7)]:
        got = sg.derivative(lambda x: np.sinc(x), n)(np.array([0.0]))
        np.testing.assert_allclose(got, [want], rtol=1e-10, atol=1e-9, err_msg=f"order {n}")

# ---------------------------------------------------------------- sum, max, min options


def test_sum_max_min_with_numpy_options(rng):
    a = rng.normal(size=(3, 4))
    mask = a > 0
    same_as_numpy(lambda x: np.sum(x, dtype=np.float64), a)
    same_as_numpy(lambda x: np.sum(x, axis=0, where=mask, initial=1.0), a)
    same_as_numpy(lambda x: np.max(x, initial=10.0), a)
    same_as_numpy(lambda x: np.max(x, axis=1, initial=-5.0, where=mask), a)
    same_as_numpy(lambda x: np.amin(x, axis=0, keepdims=True), a)
    op = sg.Ops()
    x = op.var(a)
    assert np.sum(x, dtype=np.float32).dtype == np.float32
    with pytest.raises(sg.ArgumentError, match="np.max: where= needs initial="):
        np.max(x, where=mask)
    with pytest.raises(sg.ArgumentError, match="np.sum: dtype=int64 would drop the gradient"):
        np.sum(x, dtype=np.int64)
