"""Numeric and size corners that answered wrong without a word (issue 28): each against numpy's
behaviour, a closed form or values computed once from scipy's documented formula."""

import math
import subprocess
import sys
import time

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.errors import ArgumentError, OutOfBoundsError

NUMPY_MASK = ("boolean index did not match indexed array along axis 0; size of axis is 3 but "
              "size of corresponding boolean axis is 2")


# ---------------------------------------------------------------- bool masks of the wrong length

@pytest.mark.parametrize("mask", [[True, False], np.array([True, False])], ids=["list", "array"])
def test_wrong_length_mask_raises_index_error(mask):
    with pytest.raises(IndexError) as numpy_error:
        np.arange(3.0)[mask]
    op = sg.Ops()
    x = op.var(np.array([1.0, 2.0, 3.0]), name="x")
    with pytest.raises(OutOfBoundsError) as ours:
        x[mask]
    assert str(numpy_error.value) == NUMPY_MASK
    assert NUMPY_MASK in str(ours.value) and "x with shape (3,)" in str(ours.value)
    assert isinstance(ours.value, IndexError)
    with pytest.raises(IndexError, match="boolean index did not match"):
        sg.grad(lambda v: v[mask].sum())(np.array([1.0, 2.0, 3.0]))


def test_masks_of_the_right_shape_still_index_as_numpy():
    a = np.arange(24.0).reshape(2, 3, 4)
    x = sg.Ops().var(a)
    m = np.array([True, False, True, True])
    assert np.array_equal(x[..., m].value, a[..., m])
    assert np.array_equal(x[:, np.ones((3, 4), bool)].value, a[:, np.ones((3, 4), bool)])
    assert np.array_equal(x[None, 1, np.array([True, False, True])].value,
                          a[None, 1, np.array([True, False, True])])
    with pytest.raises(IndexError, match="along axis 2; size of axis is 4 but size of "
                                         "corresponding boolean axis is 2"):
        x[..., np.array([True, False])]
    assert np.array_equal(sg.grad(lambda v: v[[True, False, True]].sum())(np.ones(3)),
                          [1.0, 0.0, 1.0])
    with pytest.raises(IndexError, match="boolean index did not match"):
        sg.vmap(lambda v: v[[True, False]].sum())(np.ones((2, 3)))


# ---------------------------------------------------------------- masked arrays

M = np.ma.masked_array([1.0, 2.0, 3.0], mask=[0, 1, 0])


@pytest.mark.parametrize("call", [
    lambda: sg.Ops().var(M),
    lambda: sg.grad(lambda v: (v * v).sum())(M),
    lambda: sg.Ops().var(np.ones(3)) * M,
    lambda: sg.vmap(lambda v: v.sum())(np.ma.masked_array(np.ones((2, 3)), mask=np.eye(2, 3))),
], ids=["var", "grad", "constant", "vmap"])
def test_masked_arrays_are_refused(call):
    with pytest.raises(ArgumentError, match="masked arrays are not supported") as e:
        call()
    assert isinstance(e.value, TypeError) and "np.ma.filled" in str(e.value)


# ---------------------------------------------------------------- float16 moments

def test_float16_std_and_var_over_70000_entries():
    a = np.random.default_rng(0).standard_normal(70000).astype(np.float16)
    a64 = a.astype(np.float64)
    centered = a64 - a64.mean()
    std_grad = centered / (a64.std() * a.size)          # closed form, in float64
    var_grad = 2 * centered / a.size
    g_std = sg.grad(lambda v: v.std())(a)
    g_var = sg.grad(lambda v: v.var())(a)
    assert g_std.dtype == np.float16 and g_var.dtype == np.float16
    # gradients near 1e-4 are float16 subnormals, spaced 2**-24 = 6e-8: two of those spaces
    assert np.max(np.abs(g_std - std_grad)) < 2 * 2.0 ** -24
    assert np.max(np.abs(g_var - var_grad)) < 2 * 2.0 ** -24
    assert np.abs(std_grad).max() > 6e-5          # the old answer was exactly 0
    op = sg.Ops()
    x = op.var(a)
    assert x.std().dtype == np.float16
    assert abs(float(x.std().value) - a64.std()) < 2.0 ** -10      # a float16 ulp at 1
    assert abs(float(x.var().value) - a64.var()) < 2.0 ** -10


# ---------------------------------------------------------------- softmax over an empty axis

@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,axis", [((3, 0), 1), ((0, 3), 1), ((0,), 0)])
def test_softmax_along_an_empty_axis_is_empty(name, shape, axis):
    op = sg.Ops()
    x = op.var(np.zeros(shape))
    y = getattr(x, name)(axis=axis)
    assert y.shape == shape and y.value.size == 0
    (g,) = op.grad(y.sum(), [x])
    assert g.shape == shape
    assert sg.hessian(lambda v: getattr(v, name)(axis=axis).sum())(np.zeros(shape)).shape == \
        shape + shape


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [np.int64, np.int8, np.float32])
def test_softmax_of_an_empty_array_has_the_dtype_of_a_full_one(name, dtype):
    # numpy's rule for exp: int64 -> float64, int8 -> float16, float32 stays
    from simplegrad.primitives import REGISTRY
    prim = REGISTRY[name]
    assert prim.forward(np.zeros(0, dtype)).dtype == prim.forward(np.zeros(2, dtype)).dtype


def test_logsumexp_along_an_empty_axis_is_minus_inf():
    # JAX, torch and scipy.special.logsumexp: log(sum of no exps) = log 0 = -inf
    op = sg.Ops()
    x = op.var(np.zeros((3, 0)))
    y = x.logsumexp(axis=1)
    assert y.shape == (3,) and np.array_equal(y.value, [-np.inf] * 3)
    assert float(x.logsumexp().value) == -np.inf
    assert op.grad(y.sum(), [x])[0].shape == (3, 0)
    assert sg.vmap(lambda v: v.softmax(axis=0))(np.zeros((2, 0))).shape == (2, 0)


# ---------------------------------------------------------------- polygamma of large order

# (-1)^(n+1) n! sum_k (x + k)^-(n+1) summed with mpmath at 120 digits. scipy's formula
# gamma(n + 1) * zeta(n + 1, x) agrees wherever gamma(n + 1) is finite (n <= 170); from n = 171
# it overflows to inf even where the product is finite (polygamma(171, 1.5)).
POLYGAMMA = [(170, 1.5, -5.612762894906297e+276), (170, 7.0, -2.2336604394173114e+162),
             (171, 7.0, 5.4565133590653616e+163), (171, 1.5, 6.398549700193178e+278),
             (200, 40.0, -7.68917391988395e+52), (150, -1.5, -4.6553474663569885e+202),
             (300, 2.0, -math.inf)]


@pytest.mark.parametrize("n,x,expected", POLYGAMMA)
def test_polygamma_of_large_order(n, x, expected):
    op = sg.Ops()
    got = float(op.polygamma(n, op.var(x)).value)
    if math.isinf(expected):
        assert got == expected
    else:
        assert got == pytest.approx(expected, rel=1e-12)


def test_polygamma_of_large_order_differentiates():
    # d/dx polygamma(170, x) = polygamma(171, x)
    op = sg.Ops()
    x = op.var(7.0)
    (g,) = op.grad(op.polygamma(170, x), [x])
    assert float(g.value) == pytest.approx(5.4565133590653616e+163, rel=1e-12)
    t = time.perf_counter()
    assert float(op.polygamma(10 ** 6, op.var(1.5)).value) == -np.inf
    assert time.perf_counter() - t < 5


# ---------------------------------------------------------------- vmap of a non-array output

@pytest.mark.parametrize("f,shown", [(lambda v: "hello", "str"),
                                     (lambda v: (v, object()), "object"),
                                     (lambda v: np.array(["a"]), "ndarray of dtype <U1")])
def test_vmap_refuses_an_output_that_is_not_an_array(f, shown):
    with pytest.raises(ArgumentError, match=f"vmap: f returned a value of type {shown}"):
        sg.vmap(f)(np.ones((2, 3)))


def test_vmap_still_takes_numbers_and_trees():
    out = sg.vmap(lambda v: {"s": v.sum(), "k": [1, 2.0, True]})(np.ones((2, 3)))
    assert np.array_equal(out["s"], [3.0, 3.0]) and np.array_equal(out["k"][0], [1, 1])


# ---------------------------------------------------------------- orders above the caps

@pytest.mark.parametrize("flag", ["--derivative", "--order"])
def test_cli_refuses_orders_above_its_cap_at_once(flag):
    t = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "simplegrad", "trace", "sin(x)", "--var", "x=0.5",
                          flag, "1000000"], capture_output=True, text=True, timeout=60)
    assert time.perf_counter() - t < 30
    assert run.returncode != 0
    assert f"{flag} must be at most 16, got 1000000" in run.stderr


@pytest.mark.parametrize("call", [
    lambda: sg.derivative(lambda x: x * x, order=10 ** 6)(0.5),
    lambda: sg.taylor(lambda x: x * x, 0.5, 1.0, 10 ** 6),
], ids=["derivative", "taylor"])
def test_transforms_refuse_orders_above_their_cap(call):
    with pytest.raises(ArgumentError, match="order 1000000 is above the limit of 1000"):
        call()


def test_orders_at_the_cap_still_run():
    # d^16/dx^16 sin at 0.5 = sin(0.5); Taylor mode at order 1000 of x*x: 2 at order 2, 0 after
    assert sg.derivative(np.sin, order=16)(0.5) == pytest.approx(math.sin(0.5), rel=1e-12)
    coefs = sg.taylor(lambda x: x * x, 0.5, 1.0, 1000)
    assert len(coefs) == 1001 and float(coefs[2]) == 2.0


# ---------------------------------------------------------------- MemoryError

class _Huge:
    """A leaf whose copy runs out of memory."""

    def __array__(self, dtype=None, copy=None):
        raise MemoryError("Unable to allocate 8.00 TiB")


def test_memory_error_copying_a_leaf_passes_through():
    with pytest.raises(MemoryError, match="8.00 TiB") as e:
        sg.Ops().var(_Huge())
    assert type(e.value) is MemoryError
    with pytest.raises(MemoryError):
        sg.grad(lambda v: v.sum())(_Huge())
