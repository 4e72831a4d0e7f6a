"""The functional transforms: grad, value_and_grad, vjp, jvp, jacobian, hessian, hvp, derivative.

Oracles: closed forms, and float64 central differences with eps = 1e-6 compared
at atol = rtol = 1e-6 (FD_TOL). Closed forms and identities between transforms
(rev == fwd, jacobian of grad == hessian) are compared at atol = rtol = 1e-10
(EXACT_TOL): they differ only by rounding.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import simplegrad as sg

EPS = 1e-6
FD_TOL = {"atol": 1e-6, "rtol": 1e-6}
EXACT_TOL = {"atol": 1e-10, "rtol": 1e-10}

# ---------------------------------------------------------------- oracles and functions


def fd_jacobian(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """Central-difference Jacobian of a numpy function, shaped out.shape + x.shape."""
    x = np.asarray(x, dtype=np.float64)
    out_shape = np.shape(fn(x))
    cols = []
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = EPS
        e = e.reshape(x.shape)
        cols.append((np.asarray(fn(x + e)) - np.asarray(fn(x - e))) / (2 * EPS))
    return np.stack(cols, axis=-1).reshape(out_shape + x.shape) if cols else np.zeros(
        out_shape + x.shape)


def scalar_sg(x):
    """A smooth scalar function of any shape: sum(sin(x) * x) + sum(tanh(x))^2."""
    return (x.sin() * x).sum() + x.tanh().sum() ** 2


def scalar_np(x):
    return np.sum(np.sin(x) * x) + np.sum(np.tanh(x)) ** 2


def scalar_grad_np(x):
    return np.cos(x) * x + np.sin(x) + 2 * np.sum(np.tanh(x)) * (1 - np.tanh(x) ** 2)


A34 = np.arange(12.0).reshape(3, 4) / 10 - 0.5        # a fixed non-square matrix


def wide_sg(x):
    """R^4 -> R^3: A tanh(x) * exp(x[0]) (output entries depend on every input)."""
    return (A34 @ x.tanh()) * x[0].exp()


def wide_np(x):
    return (A34 @ np.tanh(x)) * np.exp(x[0])


def tall_sg(x):
    """R^2 -> R^5: polynomial and trigonometric features of two inputs."""
    return x.ops.stack([x[0] * x[1], x[0].sin(), x[1] ** 3, (x[0] - x[1]).exp(), x[0] ** 2])


def tall_np(x):
    return np.stack([x[0] * x[1], np.sin(x[0]), x[1] ** 3, np.exp(x[0] - x[1]), x[0] ** 2])


@pytest.fixture
def x3() -> np.ndarray:
    return np.array([0.3, -1.2, 0.7])

# ---------------------------------------------------------------- grad and value_and_grad


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)], ids=["0d", "vector", "matrix"])
def test_grad_matches_closed_form_and_fd(shape, rng):
    x = rng.uniform(-1.5, 1.5, shape)
    g = sg.grad(scalar_sg)(x)
    assert type(g) is np.ndarray and g.shape == shape
    np.testing.assert_allclose(g, scalar_grad_np(x), **EXACT_TOL)
    np.testing.assert_allclose(g, fd_jacobian(scalar_np, x), **FD_TOL)


def test_grad_argnums_int_tuple_and_negative():
    def f(x, y):        # arguments not differentiated are passed to f unchanged (arrays)
        return (x * y ** 2).sum()
    x, y = np.array([0.5, -2.0]), np.array([1.1, 0.4])
    np.testing.assert_allclose(sg.grad(f)(x, y), y ** 2, **EXACT_TOL)
    np.testing.assert_allclose(sg.grad(f, argnums=1)(x, y), 2 * x * y, **EXACT_TOL)
    np.testing.assert_allclose(sg.grad(f, argnums=-1)(x, y), 2 * x * y, **EXACT_TOL)
    gx, gy = sg.grad(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, y ** 2, **EXACT_TOL)
    np.testing.assert_allclose(gy, 2 * x * y, **EXACT_TOL)
    (only,) = sg.grad(f, argnums=(1,))(x, y)
    np.testing.assert_allclose(only, 2 * x * y, **EXACT_TOL)


def test_value_and_grad(x3):
    value, g = sg.value_and_grad(scalar_sg)(x3)
    assert type(value) is np.ndarray and value.shape == ()
    np.testing.assert_allclose(value, scalar_np(x3), **EXACT_TOL)
    np.testing.assert_allclose(g, scalar_grad_np(x3), **EXACT_TOL)
    value, (g0, g1) = sg.value_and_grad(lambda a, b: (a * b).sum(), argnums=(0, 1))(x3, 2 * x3)
    np.testing.assert_allclose(value, 2 * np.sum(x3 ** 2), **EXACT_TOL)
    np.testing.assert_allclose(g0, 2 * x3, **EXACT_TOL)
    np.testing.assert_allclose(g1, x3, **EXACT_TOL)


def test_grad_of_constant_function_is_zero(x3):
    with pytest.warns(sg.DisconnectedWarning, match="does not depend on the inputs"):
        np.testing.assert_array_equal(sg.grad(lambda x: 3.0)(x3), np.zeros(3))
    with pytest.warns(sg.DisconnectedWarning, match="does not depend on the inputs"):
        np.testing.assert_array_equal(sg.grad(lambda x, y: (y * y).sum())(x3, x3), np.zeros(3))


def test_grad_of_ints_is_float():
    g = sg.grad(lambda x: (x * x).sum())(np.array([1, 2, 3]))
    assert g.dtype == np.float64
    np.testing.assert_array_equal(g, [2.0, 4.0, 6.0])

# ---------------------------------------------------------------- vjp and jvp


def test_vjp_one_primal(rng):
    x = rng.uniform(-1, 1, 4)
    out, vjp_fn = sg.vjp(wide_sg, x)
    np.testing.assert_allclose(out, wide_np(x), **EXACT_TOL)
    J = fd_jacobian(wide_np, x)
    for _ in range(2):          # vjp_fn may be called again with another cotangent
        u = rng.normal(size=3)
        cts = vjp_fn(u)
        assert isinstance(cts, tuple) and len(cts) == 1
        np.testing.assert_allclose(cts[0], u @ J, **FD_TOL)


def test_vjp_two_primals_closed_form(rng):
    x, W = rng.normal(size=3), rng.normal(size=(2, 3))
    out, vjp_fn = sg.vjp(lambda x, W: W @ x.sin(), x, W)
    np.testing.assert_allclose(out, W @ np.sin(x), **EXACT_TOL)
    u = rng.normal(size=2)
    cx, cW = vjp_fn(u)
    np.testing.assert_allclose(cx, np.cos(x) * (W.T @ u), **EXACT_TOL)
    np.testing.assert_allclose(cW, np.outer(u, np.sin(x)), **EXACT_TOL)


def test_jvp_one_primal(rng):
    x, v = rng.uniform(-1, 1, 4), rng.normal(size=4)
    out, t = sg.jvp(wide_sg, (x,), (v,))
    np.testing.assert_allclose(out, wide_np(x), **EXACT_TOL)
    np.testing.assert_allclose(t, fd_jacobian(wide_np, x) @ v, **FD_TOL)


def test_jvp_two_primals_closed_form(rng):
    x, W = rng.normal(size=3), rng.normal(size=(2, 3))
    vx, vW = rng.normal(size=3), rng.normal(size=(2, 3))
    out, t = sg.jvp(lambda x, W: W @ x.sin(), (x, W), (vx, vW))
    np.testing.assert_allclose(out, W @ np.sin(x), **EXACT_TOL)
    np.testing.assert_allclose(t, W @ (np.cos(x) * vx) + vW @ np.sin(x), **EXACT_TOL)


def test_jvp_and_vjp_are_transposes(rng):
    x, u, v = rng.uniform(-1, 1, 4), rng.normal(size=3), rng.normal(size=4)
    _, jv = sg.jvp(wide_sg, (x,), (v,))
    _, vjp_fn = sg.vjp(wide_sg, x)
    np.testing.assert_allclose(u @ jv, vjp_fn(u)[0] @ v, **EXACT_TOL)

# ---------------------------------------------------------------- jacobian


@pytest.mark.parametrize("mode", ["rev", "fwd", "auto"])
@pytest.mark.parametrize("f_sg, f_np, n", [
    pytest.param(wide_sg, wide_np, 4, id="wide-4to3"),
    pytest.param(tall_sg, tall_np, 2, id="tall-2to5"),
])
def test_jacobian_matches_fd(f_sg, f_np, n, mode, rng):
    x = rng.uniform(-1, 1, n)
    J = sg.jacobian(f_sg, mode=mode)(x)
    assert J.shape == np.shape(f_np(x)) + (n,)
    np.testing.assert_allclose(J, fd_jacobian(f_np, x), **FD_TOL)


@pytest.mark.parametrize("f_sg, n", [pytest.param(wide_sg, 4, id="wide-4to3"),
                                     pytest.param(tall_sg, 2, id="tall-2to5")])
def test_jacobian_rev_equals_fwd_on_non_square_map(f_sg, n, rng):
    x = rng.uniform(-1, 1, n)
    np.testing.assert_allclose(sg.jacobian(f_sg, mode="rev")(x),
                               sg.jacobian(f_sg, mode="fwd")(x), **EXACT_TOL)


def test_jacobian_closed_form_of_tall_map():
    x = np.array([0.4, -0.9])
    a, b = x
    expected = np.array([[b, a], [np.cos(a), 0], [0, 3 * b ** 2],
                         [np.exp(a - b), -np.exp(a - b)], [2 * a, 0]])
    for mode in ("rev", "fwd"):
        np.testing.assert_allclose(sg.jacobian(tall_sg, mode=mode)(x), expected, **EXACT_TOL)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_jacobian_shape_is_out_shape_plus_in_shape(mode, rng):
    M = rng.normal(size=(4, 2))

    def f(X):           # (2, 3) -> (4, 3): M @ tanh(X)
        return M @ X.tanh()
    X = rng.normal(size=(2, 3))
    J = sg.jacobian(f, mode=mode)(X)
    assert J.shape == (4, 3, 2, 3)
    expected = np.einsum("ij,kl->ikjl", M, np.eye(3)) * (1 - np.tanh(X) ** 2)[None, None]
    np.testing.assert_allclose(J, expected, **EXACT_TOL)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_jacobian_argnums_tuple(mode, rng):
    x, y = rng.normal(size=3), rng.normal(size=2)

    def f(x, y):        # R^3 x R^2 -> R^2: y * sum(x^2)
        return y * (x * x).sum()
    Jx, Jy = sg.jacobian(f, argnums=(0, 1), mode=mode)(x, y)
    np.testing.assert_allclose(Jx, 2 * np.outer(y, x), **EXACT_TOL)
    np.testing.assert_allclose(Jy, np.eye(2) * np.sum(x ** 2), **EXACT_TOL)


def _passes(ops: sg.Ops) -> tuple[int, int]:
    """(reverse sweeps, forward sweeps) recorded on ops, counted from its trace's headers."""
    lines = ops.format_trace().splitlines()
    fwd = sum(line.startswith("jvp ") for line in lines)
    rev = sum(line.startswith("d") and line.endswith("-" * 14) for line in lines)
    return rev, fwd


def _scalar_sg(x):
    """R^n -> R: one output entry, so one reverse sweep."""
    return (x.sin() * x).sum()


@pytest.mark.parametrize("f_sg, n, expected", [
    # the expected time decides: one batched forward sweep of every input direction against
    # one batched reverse sweep of every output row (at small sizes both cost the same Python
    # per entry, and the sweep of fewer seeds is taken)
    pytest.param(tall_sg, 2, (0, 1), id="tall-picks-fwd"),
    pytest.param(wide_sg, 4, (1, 0), id="three-outputs-of-four-picks-rev"),
    pytest.param(_scalar_sg, 200, (1, 0), id="one-output-picks-rev"),
])
def test_jacobian_auto_picks_the_mode_expected_faster(f_sg, n, expected):
    x = np.linspace(-0.5, 0.5, n)
    ops = sg.trace(sg.jacobian(f_sg), x)
    assert _passes(ops) == expected

@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_jacobian_of_maps_that_ignore_their_input(mode, x3):
    with pytest.warns(sg.DisconnectedWarning, match="does not depend on the inputs"):
        np.testing.assert_array_equal(sg.jacobian(lambda x: np.ones(2), mode=mode)(x3),
                                      np.zeros((2, 3)))
    with pytest.warns(sg.DisconnectedWarning, match="does not depend on the inputs"):
        np.testing.assert_array_equal(sg.jacobian(lambda x, y: y, mode=mode)(x3, x3),
                                      np.zeros((3, 3)))
    np.testing.assert_array_equal(sg.hessian(lambda x: (2.0 * x).sum())(x3), np.zeros((3, 3)))


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_float32_stays_float32(mode):
    x = np.array([0.1, 0.2], dtype=np.float32)
    assert sg.jacobian(lambda x: x.sin(), mode=mode)(x).dtype == np.float32
    assert sg.hessian(lambda x: x.sin().sum())(x).dtype == np.float32
    assert sg.grad(lambda x: x.sin().sum())(x).dtype == np.float32


# ---------------------------------------------------------------- hessian, hvp, derivative


def test_hessian_of_quadratic_form_is_A_plus_AT(rng):
    A = rng.normal(size=(4, 4))
    x = rng.normal(size=4)
    H = sg.hessian(lambda x: x @ (A @ x))(x)
    np.testing.assert_allclose(H, A + A.T, **EXACT_TOL)


def test_hessian_closed_form_and_fd(x3):
    def f(x):
        return (x.sin() * x).sum()
    H = sg.hessian(f)(x3)
    np.testing.assert_allclose(H, np.diag(2 * np.cos(x3) - x3 * np.sin(x3)), **EXACT_TOL)
    np.testing.assert_allclose(sg.hessian(scalar_sg)(x3), fd_jacobian(scalar_grad_np, x3),
                               **FD_TOL)


def test_hessian_of_matrix_argument_has_doubled_shape(rng):
    X = rng.normal(size=(2, 3))
    H = sg.hessian(lambda X: (X ** 3).sum())(X)
    assert H.shape == (2, 3, 2, 3)
    np.testing.assert_allclose(H.reshape(6, 6), np.diag(6 * X.ravel()), **EXACT_TOL)


def test_hessian_argnums(x3):
    H = sg.hessian(lambda a, b: (a * b * b).sum(), argnums=1)(x3, 2 * x3)
    np.testing.assert_allclose(H, np.diag(2 * x3), **EXACT_TOL)


def test_hvp_equals_hessian_times_v(x3, rng):
    v = rng.normal(size=3)
    Hv = sg.hvp(scalar_sg, x3, v)
    np.testing.assert_allclose(Hv, sg.hessian(scalar_sg)(x3) @ v, **EXACT_TOL)
    np.testing.assert_allclose(Hv, fd_jacobian(scalar_grad_np, x3) @ v, **FD_TOL)


def test_derivative_of_sin_cycles():
    x = np.linspace(-3, 3, 7)
    expected = [np.sin(x), np.cos(x), -np.sin(x), -np.cos(x), np.sin(x)]
    for order, want in enumerate(expected):
        got = sg.derivative(lambda t: t.sin(), order=order)(x)
        np.testing.assert_allclose(got, want, **EXACT_TOL, err_msg=f"order {order}")


def test_derivative_of_polynomial_scalar():
    def p(t):
        return t ** 3 - 2 * t
    t = 1.7
    for order, want in enumerate([t ** 3 - 2 * t, 3 * t ** 2 - 2, 6 * t, 6.0, 0.0]):
        np.testing.assert_allclose(sg.derivative(p, order=order)(t), want, **EXACT_TOL)


def test_derivative_matches_fd_of_previous_order():
    def f(t):
        return (t * t).exp() * t.cos()

    def f1_np(t):
        return np.exp(t * t) * (2 * t * np.cos(t) - np.sin(t))
    t = np.array(0.6)
    np.testing.assert_allclose(sg.derivative(f)(t), f1_np(t), **EXACT_TOL)
    np.testing.assert_allclose(sg.derivative(f, order=2)(t), fd_jacobian(f1_np, t), **FD_TOL)

# ---------------------------------------------------------------- nesting


def test_grad_of_grad_closed_form_second_derivative():
    def f(x):
        return (x ** 3 * x.sin()).sum()
    x = np.array([0.2, 1.3, -2.1])
    second = 6 * x * np.sin(x) + 6 * x ** 2 * np.cos(x) - x ** 3 * np.sin(x)
    got = sg.grad(lambda x: sg.grad(f)(x).sum())(x)
    np.testing.assert_allclose(got, second, **EXACT_TOL)
    t = 0.8     # the scalar form: grad(grad(f)) of a function of one number
    got = sg.grad(sg.grad(lambda t: t ** 3 * t.sin()))(t)
    np.testing.assert_allclose(got, 6 * t * np.sin(t) + 6 * t ** 2 * np.cos(t)
                               - t ** 3 * np.sin(t), **EXACT_TOL)


def test_third_order_by_triple_nesting():
    t = 0.45
    got = sg.grad(sg.grad(sg.grad(lambda t: t.sin() * t)))(t)
    np.testing.assert_allclose(got, -3 * np.sin(t) - t * np.cos(t), **EXACT_TOL)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_jacobian_of_grad_equals_hessian(mode, x3):
    np.testing.assert_allclose(sg.jacobian(sg.grad(scalar_sg), mode=mode)(x3),
                               sg.hessian(scalar_sg)(x3), **EXACT_TOL)


def test_hessian_of_function_calling_grad(x3):
    def f(x):       # grad of sum(sin) is cos, so f = sum(cos(x)^2)
        return (sg.grad(lambda y: y.sin().sum())(x) ** 2).sum()
    np.testing.assert_allclose(sg.grad(f)(x3), -np.sin(2 * x3), **EXACT_TOL)
    np.testing.assert_allclose(sg.hessian(f)(x3), np.diag(-2 * np.cos(2 * x3)), **EXACT_TOL)


def test_hvp_of_function_calling_grad(x3, rng):
    def f(x):
        return (sg.grad(scalar_sg)(x) ** 2).sum()
    v = rng.normal(size=3)
    np.testing.assert_allclose(sg.hvp(f, x3, v), sg.hessian(f)(x3) @ v, **EXACT_TOL)


def test_closure_over_outer_argument_is_a_constant_inside():
    # d/dx [x * d/dy (x * y)] = d/dx [x * x] = 2x; confusing y with x would give 4x
    got = sg.grad(lambda x: x * sg.grad(lambda y: x * y)(x))(3.0)
    np.testing.assert_allclose(got, 6.0, **EXACT_TOL)


def test_grad_of_jvp_and_of_vjp(x3, rng):
    v = rng.normal(size=3)
    # grad_x <grad f(x), v> = H v, by reverse over forward and reverse over reverse
    rof = sg.grad(lambda x: sg.jvp(scalar_sg, (x,), (v,))[1])(x3)
    ror = sg.grad(lambda x: (sg.vjp(scalar_sg, x)[1](1.0)[0] * v).sum())(x3)
    Hv = sg.hvp(scalar_sg, x3, v)
    np.testing.assert_allclose(rof, Hv, **EXACT_TOL)
    np.testing.assert_allclose(ror, Hv, **EXACT_TOL)

# ---------------------------------------------------------------- Variables in, Variables out


def test_variables_in_variables_out_and_differentiable_again(x3):
    op = sg.Ops()
    x = op.var(x3, name="x")
    g = sg.grad(scalar_sg)(x)
    assert isinstance(g, sg.Variable) and g.ops is op
    np.testing.assert_allclose(g.value, scalar_grad_np(x3), **EXACT_TOL)
    h = op.grad(g.sum(), x)                    # the caller differentiates the result again
    H = fd_jacobian(scalar_grad_np, x3)
    np.testing.assert_allclose(h.value, H.sum(axis=0), **FD_TOL)


@pytest.mark.parametrize("transform", [
    pytest.param(lambda x: sg.value_and_grad(scalar_sg)(x)[1], id="value_and_grad"),
    pytest.param(lambda x: sg.vjp(scalar_sg, x)[1](1.0)[0], id="vjp"),
    pytest.param(lambda x: sg.jvp(wide_sg, (x * x,), (x.sin(),))[1], id="jvp"),
    pytest.param(lambda x: sg.jacobian(wide_sg, mode="rev")(x * x.sin()), id="jacobian-rev"),
    pytest.param(lambda x: sg.jacobian(wide_sg, mode="fwd")(x * x.sin()), id="jacobian-fwd"),
    pytest.param(lambda x: sg.hessian(scalar_sg)(x), id="hessian"),
    pytest.param(lambda x: sg.hvp(scalar_sg, x, x.sin()), id="hvp"),
    pytest.param(lambda x: sg.derivative(lambda t: t.tanh() * t, order=2)(x), id="derivative"),
])
def test_each_transform_returns_variables_of_the_caller_ops(transform, rng):
    """Each transform of Variables gives Variables of the caller's Ops whose gradient is right."""
    x0 = rng.uniform(-1, 1, 4)
    u = None

    def total(x):
        nonlocal u
        out = transform(x)
        if u is None:
            u = rng.normal(size=out.shape)
        return (out * u).sum()
    op = sg.Ops()
    x = op.var(x0)
    out = transform(x)
    assert isinstance(out, sg.Variable) and out.ops is op
    total(x)                                   # fixes u
    g = op.grad(total(x), x)
    assert g.ops is op

    def total_np(a):
        return float(total(sg.Ops().var(a)).value)
    np.testing.assert_allclose(g.value, fd_jacobian(total_np, x0), **FD_TOL)


def test_jvp_with_variable_tangent_is_differentiable_in_the_tangent(x3, rng):
    op = sg.Ops()
    x, v = op.var(x3), op.var(rng.normal(size=3))
    _, t = sg.jvp(scalar_sg, (x,), (v,))
    assert t.ops is op
    # t = grad f(x) . v, so dt/dv = grad f(x)
    np.testing.assert_allclose(op.grad(t, v).value, scalar_grad_np(x3), **EXACT_TOL)


def test_vjp_with_variable_cotangent(rng):
    op = sg.Ops()
    x, u = op.var(rng.normal(size=4)), op.var(rng.normal(size=3))
    _, vjp_fn = sg.vjp(wide_sg, x)
    (ct,) = vjp_fn(u)
    # ct = J^T u, so d(ct . w)/du = J w
    w = rng.normal(size=4)
    np.testing.assert_allclose(op.grad((ct * w).sum(), u).value,
                               fd_jacobian(wide_np, x.value) @ w, **FD_TOL)


def test_arrays_in_arrays_out(x3):
    x4 = np.ones(4)
    results = [sg.grad(scalar_sg)(x3), sg.hessian(scalar_sg)(x3), sg.hvp(scalar_sg, x3, x3),
               sg.jacobian(wide_sg)(x4), sg.jvp(wide_sg, (x4,), (x4,))[1],
               sg.vjp(wide_sg, x4)[1](x3)[0], sg.derivative(lambda t: t.sin())(x3)]
    for r in results:
        assert type(r) is np.ndarray and r.flags.writeable


def test_trace_of_grad_prints_its_trace(x3):
    ops = sg.trace(sg.grad(scalar_sg), x3)
    assert isinstance(ops, sg.Ops)
    text = ops.format_trace()
    lines = text.splitlines()
    assert lines[0].startswith("x = [") and "-1.2000" in lines[0]   # named after f's parameter
    assert lines[1] == "v0 = x.reshape([3])"                 # the identity entry
    assert any(line.startswith("d") and line.endswith("-" * 14) for line in lines)
    assert lines[-1] == "-" * 18
    assert "v1 = v0.sin()" in lines


def test_trace_names_leaves_after_parameters():
    ops = sg.trace(lambda a, b: a * b, 2.0, 3.0)
    assert ops.format_trace().splitlines() == ["a = 2.0000", "b = 3.0000", "v0 = a * b"]

# ---------------------------------------------------------------- cost


def chain(x, n: int):
    """n elementwise ops, then a sum."""
    for i in range(n):
        x = x.sin() if i % 2 else x * 1.1
    return x.sum()


@pytest.mark.parametrize("size", [2, 64], ids=["2-inputs", "64-inputs"])
def test_jvp_records_a_constant_times_the_forward_entries(size):
    n = 40
    x, v = np.linspace(-1, 1, size), np.ones(size)
    forward = len(sg.trace(lambda x: chain(x, n), x).tape)
    ops = sg.trace(lambda x, v: sg.jvp(lambda y: chain(y, n), (x,), (v,))[1], x, v)
    recorded = len(ops.tape) - forward - 1       # minus the forward and the identity entry
    assert forward == n + 1
    assert recorded <= 3 * forward                 # sin's rule records cos and a product
    assert recorded == len(sg.trace(lambda x, v: sg.jvp(lambda y: chain(y, n), (x,), (v,))[1],
                                    x[:1], v[:1]).tape) - forward - 1   # independent of size


def test_hvp_records_one_jvp_and_one_reverse_sweep_and_hessian_one_per_input():
    x = np.linspace(-1, 1, 16)
    grad_len = len(sg.trace(sg.grad(scalar_sg), x).tape)
    hvp_extra = len(sg.trace(lambda x: sg.hvp(scalar_sg, x, x), x).tape) - grad_len
    hess_extra = len(sg.trace(sg.hessian(scalar_sg), x).tape) - grad_len
    # hvp: one jvp of f, then one reverse sweep of that directional derivative (no Hessian)
    assert 0 < hvp_extra <= 3 * grad_len
    # the Hessian: all basis tangents through the recorded gradient in one batched jvp sweep
    assert 0 < hess_extra <= 3 * grad_len


# ---------------------------------------------------------------- errors


def test_grad_of_non_scalar_says_to_use_jacobian_or_vjp(x3):
    with pytest.raises(sg.ShapeError, match=r"shape \(3,\).*jacobian.*vjp"):
        sg.grad(lambda x: x.sin())(x3)
    with pytest.raises(sg.ShapeError, match="not a scalar"):
        sg.hvp(lambda x: x * x, x3, x3)


@pytest.mark.parametrize("argnums", [2, -3, (0, 5)], ids=["2", "-3", "(0,5)"])
def test_argnums_out_of_range(argnums, x3):
    with pytest.raises(sg.ArgumentError, match="out of range"):
        sg.grad(lambda a, b: (a * b).sum(), argnums=argnums)(x3, x3)
    with pytest.raises(sg.ArgumentError, match="out of range"):
        sg.jacobian(lambda a, b: a * b, argnums=argnums)(x3, x3)


@pytest.mark.parametrize("argnums", ["0", 1.0, (), (0, 0), True], ids=repr)
def test_argnums_of_wrong_kind(argnums):
    with pytest.raises(sg.ArgumentError, match="argnums"):
        sg.grad(lambda a, b: (a * b).sum(), argnums=argnums)


def test_argnums_naming_one_argument_twice(x3):
    with pytest.raises(sg.ArgumentError, match="twice"):
        sg.grad(lambda a, b: (a * b).sum(), argnums=(1, -1))(x3, x3)


def test_mixed_ops_among_arguments(x3):
    a, b = sg.Ops().var(x3, name="a"), sg.Ops().var(x3, name="b")
    for call in (lambda: sg.grad(lambda a, b: (a * b).sum())(a, b),
                 lambda: sg.jvp(lambda a: a, (a,), (b,)),
                 lambda: sg.vjp(lambda a, b: a * b, a, b),
                 lambda: sg.hvp(lambda a: (a * a).sum(), a, b)):
        with pytest.raises(sg.GraphError, match=r"different Ops \(a and b\)"):
            call()


def test_vjp_cotangent_errors(x3):
    _, vjp_fn = sg.vjp(lambda x: x.sin(), x3)
    with pytest.raises(sg.ShapeError, match="cotangent"):
        vjp_fn(np.ones(2))



def test_vjp_fn_records_on_the_ops_of_its_cotangent(x3):
    """A pullback made at top level, given a Variable of another Ops, is replayed there: a
    linear function of u (f's values at the primals as constants), differentiable in u."""
    _, vjp_fn = sg.vjp(lambda x: x.sin() * x, x3)
    op = sg.Ops()
    u = op.var([1.0, 2.0, -1.0], name="u")
    (c,) = vjp_fn(u)
    slope = np.sin(x3) + x3 * np.cos(x3)
    assert c.ops is op
    np.testing.assert_allclose(c.value, u.value * slope, rtol=1e-14)
    np.testing.assert_allclose(op.grad((c * c).sum(), u).value, 2 * u.value * slope ** 2,
                               rtol=1e-14)


def test_jvp_argument_errors(x3):
    with pytest.raises(sg.ArgumentError, match="tuples"):
        sg.jvp(lambda x: x, x3, x3)
    with pytest.raises(sg.ArgumentError, match="1 primals but 2 tangents"):
        sg.jvp(lambda x: x, (x3,), (x3, x3))
    with pytest.raises(sg.ShapeError, match="tangent 0"):
        sg.jvp(lambda x: x, (x3,), (np.ones(2),))


def test_other_argument_errors(x3):
    with pytest.raises(sg.ArgumentError, match="mode"):
        sg.jacobian(lambda x: x, mode="forward")
    with pytest.raises(sg.ArgumentError, match="order"):
        sg.derivative(lambda x: x, order=-1)
    with pytest.raises(sg.ArgumentError, match="function"):
        sg.grad(3.0)
    with pytest.raises(sg.ArgumentError, match="return one Variable"):
        sg.grad(lambda x: (x, x))(x3)
    other = sg.Ops().var(1.0)
    with pytest.raises(sg.GraphError, match="another Ops"):
        sg.grad(lambda x: other)(x3)


def test_transform_of_variables_inside_no_grad(x3):
    """Under no_grad a transform still computes its derivative (as torch.func's do) and
    records nothing on the caller's Ops: its results hold values only."""
    op = sg.Ops()
    x = op.var(x3, name="x")
    before = len(op.tape)
    with op.no_grad():
        g = sg.grad(scalar_sg)(x)
        (y, t), h = sg.jvp(scalar_sg, (x,), (np.ones(3),)), sg.hessian(scalar_sg)(x)
        _, pull = sg.vjp(scalar_sg, x)
        (c,) = pull(np.float64(2.0))
    assert len(op.tape) == before
    assert isinstance(g, sg.Variable) and g.ops is op and g.prim is None
    np.testing.assert_allclose(g.value, scalar_grad_np(x3), rtol=1e-12)
    np.testing.assert_allclose(c.value, 2 * scalar_grad_np(x3), rtol=1e-12)
    np.testing.assert_allclose(t.value, scalar_grad_np(x3).sum(), rtol=1e-12)
    np.testing.assert_allclose(y.value, scalar_np(x3), rtol=1e-12)
    assert h.shape == (3, 3) and not h.requires_grad


def test_vjp_releases_its_own_tape_when_vjp_fn_is_dropped():
    out, vjp_fn = sg.vjp(lambda x: (x * x).sin(), np.array([0.5, 1.0]))
    ops = next(c.cell_contents for c in vjp_fn.__closure__
               if isinstance(c.cell_contents, sg.Ops))
    (g,) = vjp_fn(np.ones(2))
    np.testing.assert_allclose(g, 2 * np.array([0.5, 1.0]) * np.cos([0.25, 1.0]))
    assert len(ops.tape) > 0
    del vjp_fn
    assert len(ops.tape) == 0 and repr(ops).startswith("<Ops: 0 entries")
