"""Wrong values of issue 16 item 6, each against an independent answer.

1. float16 counts: the gradient (and order 2) of mean, var, std and nn.mse over more than
   65,504 entries, against the float64 closed forms (2 (x - m) / n, ...) computed from the same
   float16 inputs and rounded to float16. Those gradients are float16 subnormals (spacing
   2 ** -24): allowed two spacings (mse's chain carries the cotangent 1 / n, itself a float16
   subnormal, known to 1 part in 240), or float16's relative 2e-3 where a float16 sum of 1e5
   terms enters (forward values, Taylor mode; 2% of the largest entry for std's order 2).
2. pow at 0 in Taylor mode: d^k/dx^k x ** n at 0 is n! for k == n, else 0 (exact); x ** 2.5
   by its closed form falling(2.5, k) x ** (2.5 - k), at 0: 0, 0, +inf, -inf, +inf, -inf.
3. Taylor mode past k! overflow: d^k/dx^k exp(x) at 0 is 1 and sin(x) at 0.5 is
   sin(0.5 + k pi / 2); allowed order * eps of the dtype, relative (the recurrence rounds once
   per order).
4. custom_vjp on a Python number: the same value and gradient as on a 0-d array.
5. vmap of an unbatched integer output: numpy's dtype, stacked.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import simplegrad as sg
from simplegrad import nn

F16_SPACING = 2.0 ** -24        # between float16 subnormals: every gradient of item 1 is one


@pytest.fixture
def x16(request, rng) -> np.ndarray:
    return rng.uniform(-1, 1, request.param).astype(np.float16)


def _closed_gradient(name: str, x: np.ndarray) -> np.ndarray:
    """The float64 gradient of the reduction over all of x."""
    n, c = x.size, x - x.mean()
    return {"mean": np.full(n, 1.0 / n), "var": 2 * c / n, "std": c / (n * x.std()),
            "mse": 2 * x / n}[name]


REDUCTIONS = {"mean": lambda x: x.mean(), "var": lambda x: x.var(), "std": lambda x: x.std(),
              "mse": lambda x: nn.mse(x, np.zeros(x.shape, dtype=x.dtype))}
SIZES = [100_000, 70_000]

# ---------------------------------------------------------------- 1. float16 counts


@pytest.mark.parametrize("x16", SIZES, indirect=True)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_float16_gradient_of_a_reduction_over_more_than_65504_entries(name, x16):
    got = sg.grad(REDUCTIONS[name])(x16)
    want = _closed_gradient(name, x16.astype(np.float64))
    assert got.dtype == np.float16
    assert np.abs(want).max() > 100 * F16_SPACING      # the old answer, 0, would fail
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float16),
                               rtol=0, atol=2 * F16_SPACING)


@pytest.mark.parametrize("fn", ["mean", "var", "std"])
def test_float16_gradient_of_a_reduction_along_an_axis_of_70000(fn, rng):
    x16 = rng.uniform(-1, 1, (2, 70_000)).astype(np.float16)
    got = sg.grad(lambda x: getattr(x, fn)(axis=1, keepdims=True).sum())(x16)
    want = np.stack([_closed_gradient(fn, row) for row in x16.astype(np.float64)])
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float16),
                               rtol=0, atol=2 * F16_SPACING)


@pytest.mark.parametrize("x16", SIZES, indirect=True)
def test_float16_forward_values_of_mean_var_std_are_float64s_rounded(x16):
    x = x16.astype(np.float64)
    for name, want in [("mean", x.mean()), ("var", x.var()), ("std", x.std())]:
        got = sg.value_and_grad(REDUCTIONS[name])(x16)[0]
        np.testing.assert_allclose(float(got), want, rtol=1e-3, atol=F16_SPACING, err_msg=name)


@pytest.mark.parametrize("x16", SIZES, indirect=True)
def test_float16_hessian_vector_products_of_mean_var_mse(x16, rng):
    v16 = rng.uniform(-1, 1, x16.size).astype(np.float16)
    v, n = v16.astype(np.float64), x16.size
    wants = {"mean": np.zeros(n), "var": 2 * (v - v.mean()) / n, "mse": 2 * v / n}
    for name, want in wants.items():
        got = sg.hvp(REDUCTIONS[name], x16, v16)
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=0,
                                   atol=2 * F16_SPACING, err_msg=name)


@pytest.mark.parametrize("x16", SIZES, indirect=True)
def test_float16_hessian_vector_product_of_std(x16, rng):
    # H v = (P v - u (u . P v) / n) / (n s), u = (x - m) / s, P v = v - mean(v)
    v16 = rng.uniform(-1, 1, x16.size).astype(np.float16)
    x, v, n = x16.astype(np.float64), v16.astype(np.float64), x16.size
    s = x.std()
    u, pv = (x - x.mean()) / s, v - v.mean()
    want = (pv - u * (u @ pv) / n) / (n * s)
    got = sg.hvp(REDUCTIONS["std"], x16, v16).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-2 * np.abs(want).max())


@pytest.mark.parametrize("x16", SIZES, indirect=True)
def test_float16_variance_in_forward_and_taylor_mode(x16, rng):
    # t -> var(x + t v) = var(x) + 2 t cov(x, v) + t^2 var(v)
    v16 = rng.uniform(-1, 1, x16.size).astype(np.float16)
    x, v = x16.astype(np.float64), v16.astype(np.float64)
    want = [x.var(), 2 * np.mean((x - x.mean()) * (v - v.mean())), 2 * v.var()]
    _, tangent = sg.jvp(REDUCTIONS["var"], [x16], [v16])
    np.testing.assert_allclose(float(tangent), want[1], rtol=2e-3)
    got = sg.taylor(REDUCTIONS["var"], x16, v16, 2)
    np.testing.assert_allclose([float(g) for g in got], want, rtol=2e-3)
    mean = sg.taylor(REDUCTIONS["mean"], x16, v16, 2)
    np.testing.assert_allclose([float(g) for g in mean], [x.mean(), v.mean(), 0.0],
                               rtol=2e-3, atol=F16_SPACING)

# ---------------------------------------------------------------- 2. pow at 0, Taylor mode


def _whole_at_zero(n: int, k: int) -> float:
    """d^k/dx^k x ** n at 0."""
    return float(math.factorial(n)) if k == n else 0.0


@pytest.mark.parametrize("p", [0, 1, 2, 3, 1.0, 2.0, 3.0], ids=repr)
def test_whole_powers_at_zero_in_taylor_mode_to_order_6(p):
    want = [_whole_at_zero(int(p), k) for k in range(7)]
    assert [float(d) for d in sg.taylor(lambda z: z ** p, 0.0, 1.0, 6)] == want
    for k in range(1, 7):
        assert float(sg.derivative(lambda z: z ** p, k)(0.0)) == want[k], k
    # recorded (Variables in): the same numbers, and their gradient is the next order
    op = sg.Ops()
    x = op.var(np.zeros(3))
    got = sg.taylor(lambda z: z ** np.full(3, p), x, np.ones(3), 5)
    for k in range(6):
        np.testing.assert_array_equal(got[k].value, np.full(3, want[k]))
    np.testing.assert_array_equal(op.grad(got[4].sum(), x).value, np.full(3, want[5]))


def test_issue_examples_of_pow_at_zero():
    assert [float(d) for d in sg.taylor(lambda z: z ** 1, 0.0, 1.0, 2)] == [0.0, 1.0, 0.0]
    assert float(sg.derivative(lambda z: z ** 1.0, 2)(0.0)) == 0.0


def _falling(a: float, k: int) -> float:
    return math.prod(a - i for i in range(k))


def test_x_pow_2_5_at_zero_and_at_positive_x():
    # d^k/dx^k x^2.5 = falling(2.5, k) x^(2.5 - k): at 0, 0 while k < 2.5, then +-inf
    # (x^(negative) -> +inf as x -> 0+) with the sign of falling(2.5, k): +, -, +, -
    x = np.array([0.0, 0.3, 1.7])
    got = sg.taylor(lambda z: z ** 2.5, x, np.ones(3), 6)
    with np.errstate(divide="ignore"):
        want = [_falling(2.5, k) * x ** (2.5 - k) for k in range(7)]
    assert [float(got[k][0]) for k in range(7)] == [0, 0, 0, np.inf, -np.inf, np.inf, -np.inf]
    for k in range(7):
        np.testing.assert_allclose(got[k][1:], want[k][1:], rtol=1e-13, atol=0, err_msg=k)
        np.testing.assert_array_equal(got[k][:1], want[k][:1])
    # recorded (Variables in), the same
    op = sg.Ops()
    recorded = sg.taylor(lambda z: z ** 2.5, op.var(x), np.ones(3), 6)
    for k in range(7):
        np.testing.assert_array_equal(recorded[k].value, got[k])
    # nested reverse mode gives the same at 0 (0 ** -0.5 = inf in its rule from order 3)
    op = sg.Ops()
    xv = op.var(x)
    d = xv ** 2.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for k in range(1, 5):
            d = op.grad(d.sum(), xv)
            np.testing.assert_array_equal(d.value[:1], want[k][:1])


def test_mixed_exponents_at_zero_along_a_curve():
    # t -> (t + t^2) ** a at t = 0, for a = 2, 2.5, 1, 0, 3 (binomial expansion by hand)
    a = np.array([2.0, 2.5, 1.0, 0.0, 3.0])
    got = sg.taylor(lambda z: (z + z * z) ** a, np.zeros(5), np.ones(5), 4)
    want = [[0, 0, 0, 1, 0], [0, 0, 1, 0, 0], [2, 0, 2, 0, 0], [12, np.inf, 0, 0, 6],
            [24, -np.inf, 0, 0, 72]]
    for k in range(5):
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_negative_power_at_zero_is_infinite_as_in_reverse_mode():
    # d^k/dx^k 1/x = (-1)^k k! x^-(k+1): at 0+ (numpy's 0 ** -s = inf) -inf, inf, -inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # 0 ** -1 in the forward
        got = sg.taylor(lambda z: z ** -1, 0.0, 1.0, 3)
    assert [float(d) for d in got] == [np.inf, -np.inf, np.inf, -np.inf]

# ---------------------------------------------------------------- 3. Taylor mode past k!


CASES = {"exp at 0": (lambda x: x.exp(), 0.0, lambda k: 1.0),
         "sin at 0.5": (lambda x: x.sin(), 0.5, lambda k: math.sin(0.5 + k * math.pi / 2))}


@pytest.mark.parametrize("dtype, orders", [(np.float32, [35, 38, 40]),
                                           (np.float16, [9, 10, 12])], ids=["f32", "f16"])
@pytest.mark.parametrize("case", list(CASES))
def test_high_order_derivatives_where_k_factorial_overflows(case, dtype, orders):
    f, x0, closed = CASES[case]
    x = np.full(2, x0, dtype=dtype)
    eps = float(np.finfo(dtype).eps)
    for k in orders:
        for how, d in [("taylor", sg.taylor(f, x, np.ones(2, dtype), k)[k]),
                       ("taylor_derivative", sg.taylor_derivative(f, k)(x)),
                       ("derivative", sg.derivative(f, k)(x))]:
            assert d.dtype == dtype, how
            np.testing.assert_allclose(d, closed(k), rtol=k * eps, err_msg=f"{how}, {k}")


@pytest.mark.parametrize("dtype, order", [(np.float32, 36), (np.float16, 10)])
def test_high_order_taylor_mode_recorded_and_differentiated(dtype, order):
    op = sg.Ops()
    x = op.var(np.zeros(2, dtype=dtype))
    got = sg.taylor(lambda z: z.exp(), x, np.ones(2, dtype), order)
    eps = float(np.finfo(dtype).eps)
    for k in (1, order // 2, order):
        assert got[k].dtype == dtype
        np.testing.assert_allclose(got[k].value, 1.0, rtol=order * eps, err_msg=k)
    np.testing.assert_allclose(op.grad(got[order].sum(), x).value, 1.0, rtol=order * eps)


def test_float16_derivative_overflows_only_where_the_derivative_does():
    # d^k/dx^k exp(c x) at 0 = c^k: 2^12 = 4096 fits float16, 4^9 = 262144 does not
    x = np.zeros(1, dtype=np.float16)
    np.testing.assert_allclose(sg.taylor_derivative(lambda z: (2 * z).exp(), 12)(x), 4096.0,
                               rtol=12 * float(np.finfo(np.float16).eps))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # the overflow, as it should
        assert np.isposinf(sg.taylor_derivative(lambda z: (4 * z).exp(), 9)(x)).all()


def test_float64_past_order_170():
    # 171! is beyond float64 (float(171!) used to raise OverflowError)
    for k in (171, 200):
        np.testing.assert_allclose(sg.taylor_derivative(lambda z: z.exp(), k)(np.zeros(1)), 1.0,
                                   rtol=k * float(np.finfo(np.float64).eps))

# ---------------------------------------------------------------- 4. custom_vjp on numbers


@sg.custom_vjp
def softplus(x):
    """log(1 + exp(x)) without overflow."""
    return x.relu() + ((-x.abs()).exp() + 1).log()


@softplus.defvjp
def _softplus_bwd(g, out, x):
    return g * x.sigmoid()


@pytest.mark.parametrize("number", [0.5, 800.0, 3, -2], ids=repr)
def test_custom_vjp_on_a_python_number_is_as_on_a_0d_array(number):
    want = math.log1p(math.exp(-abs(number))) + max(number, 0)
    got = softplus(number)
    assert np.shape(got) == () and float(got) == pytest.approx(want, rel=1e-15)
    np.testing.assert_array_equal(got, softplus(np.array(float(number))))
    sig = 1 / (1 + math.exp(-number))
    assert float(sg.grad(softplus)(float(number))) == pytest.approx(sig, rel=1e-15)

# ---------------------------------------------------------------- 5. vmap of integer outputs


@pytest.mark.parametrize("value", [np.int64(3), 3, np.arange(3, dtype=np.int32),
                                   np.array([True, False])], ids=["int64", "int", "int32", "bool"])
def test_vmap_keeps_the_dtype_of_an_unbatched_output(value):
    got = sg.vmap(lambda x: value)(np.ones((2, 3)))
    want = np.stack([np.asarray(value)] * 2)        # the loop over examples
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    moved = sg.vmap(lambda x: value, out_axes=-1)(np.ones((2, 3)))
    assert moved.dtype == want.dtype
    np.testing.assert_array_equal(moved, np.moveaxis(want, 0, -1))


def test_batchnorm_in_float16_over_more_rows_than_float16_counts():
    """BatchNorm1d's batch variance of 70,000 float16 rows: the float64 normalisation rounded
    to float16 (within 4e-3, float16's resolution near 1), and running_var finite."""
    from simplegrad import nn
    x = np.random.default_rng(3).normal(size=(70000, 2)).astype(np.float16)
    bn = nn.BatchNorm1d(2)
    y = bn(sg.Ops().var(x))
    xd = x.astype(np.float64)
    want = (xd - xd.mean(0)) / np.sqrt(xd.var(0) + bn.eps)
    np.testing.assert_allclose(y.value.astype(np.float64), want, atol=4e-3 * np.abs(want).max())
    assert np.all(np.isfinite(bn.running_var))
