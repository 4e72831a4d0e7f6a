"""numpy's decompositions called on Variables give numpy's own values, signs included.

``np.linalg.qr``, ``np.linalg.svd``, ``np.linalg.eigh`` and ``np.linalg.eigvalsh`` on a
Variable return what numpy returns on its value (the column signs of Q, U and V, the row signs
of R and Vh), for every option they accept, and stay differentiable at every order; ``op.qr``,
``op.svd`` and ``op.eigh`` keep their sign-fixed convention. eigh and eigvalsh get
non-symmetric matrices: numpy reads one triangle (``UPLO``) and ignores the other, and so do
their Variable forms, derivatives included. Oracles: numpy itself on the plain arrays, and
float64 central differences of the same numpy code run on plain arrays.

Tolerances: values rtol = atol = 1e-12 (float64) and 2e-6 (float32); first derivatives
against differences with step 1e-6, rtol = atol = 1e-6 (float64); second directional
derivatives against four-point differences with step 1e-4, rtol = atol = 1e-5 (float64);
float32 gradients against the float64 differences, rtol = atol = 2e-3 (order 1) and 2e-2
(order 2). Gradients with respect to the triangle numpy's eigh ignores: exactly 0, at orders 1
and 2; with respect to the one it reads: op.eigh's at the mirrored matrix, its strict triangle
doubled, rtol 1e-10.
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.primitives.linalg.samplers import spread_singular, symmetric_spread

# ---------------------------------------------------------------- the calls

# (id, the call, the axis of one vector per output (None: no sign), which shapes it takes)
SQUARE, ANY, WIDE_OR_SQUARE = "square", "any", "wide or square"
CALLS = [
    ("qr", lambda a: np.linalg.qr(a), (-2, -1), ANY),
    ("qr-reduced", lambda a: np.linalg.qr(a, mode="reduced"), (-2, -1), ANY),
    ("qr-complete", lambda a: np.linalg.qr(a, mode="complete"), (-2, -1), WIDE_OR_SQUARE),
    ("qr-r", lambda a: np.linalg.qr(a, mode="r"), (-1,), ANY),
    ("svd", lambda a: np.linalg.svd(a), (-2, None, -1), SQUARE),
    ("svd-thin", lambda a: np.linalg.svd(a, full_matrices=False), (-2, None, -1), ANY),
    ("svd-values", lambda a: np.linalg.svd(a, compute_uv=False), (None,), ANY),
    ("svd-thin-values", lambda a: np.linalg.svd(a, False, False), (None,), ANY),
    ("svdvals", lambda a: np.linalg.svdvals(a), (None,), ANY),
    ("eigh", lambda a: np.linalg.eigh(a), (None, -2), "triangle"),
    ("eigh-U", lambda a: np.linalg.eigh(a, UPLO="U"), (None, -2), "triangle"),
    ("eigvalsh", lambda a: np.linalg.eigvalsh(a), (None,), "triangle"),
    ("eigvalsh-U", lambda a: np.linalg.eigvalsh(a, UPLO="U"), (None,), "triangle"),
]
SHAPES = [(3, 3), (5, 3), (3, 5), (2, 4, 3), (2, 3, 5), (2, 3, 3), (4, 4)]
DTYPES = [np.float64, np.float32]


def _takes(kind: str, shape: tuple) -> bool:
    m, n = shape[-2:]
    return {ANY: True, SQUARE: m == n, "triangle": m == n, WIDE_OR_SQUARE: m <= n}[kind]


CASES = [pytest.param(call, axes, kind, shape, id=f"{name}-{'x'.join(map(str, shape))}")
         for name, call, axes, kind in CALLS for shape in SHAPES if _takes(kind, shape)]


def _outputs(result) -> tuple:
    return tuple(result) if isinstance(result, tuple) else (result,)


def _mirrored(a: np.ndarray, uplo: str) -> np.ndarray:
    """The symmetric matrix numpy's eigh reads in a: its lower (or upper) triangle, mirrored."""
    t = np.tril(a) if uplo == "L" else np.triu(a)
    return t + np.swapaxes(t, -1, -2) - np.diagonal(a, axis1=-2, axis2=-1)[..., None, :] * \
        np.eye(a.shape[-1])


def _matrix(kind: str, shape: tuple, dtype) -> np.ndarray:
    """Well separated singular values, or (``"triangle"``) a non-symmetric matrix whose
    triangles, mirrored, have well separated eigenvalues (gaps above 0.15)."""
    rng = np.random.default_rng(sum(shape) * 7 + len(shape))
    if kind != "triangle":
        return spread_singular(rng, shape).astype(dtype)
    a = symmetric_spread(rng, shape)
    assert np.abs(a - np.swapaxes(a, -1, -2)).max() > 1.0
    for uplo in "LU":
        assert np.diff(np.linalg.eigvalsh(_mirrored(a, uplo)), axis=-1).min() > 0.15
    return a.astype(dtype)


def _weights(outs, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=np.shape(o)) for o in outs]


def _invariant(call, weights):
    """sum_k <W_k, out_k * out_k>: unchanged by any flip of the vectors' signs."""
    def f(a):
        return sum(np.sum(w * o * o) for w, o in zip(weights, _outputs(call(a))))
    return f


def _dependent(call, weights):
    """sum_k <W_k, out_k>: changes with numpy's signs."""
    def f(a):
        return sum(np.sum(w * o) for w, o in zip(weights, _outputs(call(a))))
    return f


FUNCTIONS = [pytest.param(_invariant, id="sign-invariant"),
             pytest.param(_dependent, id="sign-dependent")]

# ---------------------------------------------------------------- finite differences


def _fd_grad(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def _fd_second(f, x: np.ndarray, v: np.ndarray, w: np.ndarray, h: float = 1e-4) -> float:
    """v^T H w by four-point central differences."""
    return (f(x + h * v + h * w) - f(x + h * v - h * w) - f(x - h * v + h * w)
            + f(x - h * v - h * w)) / (4 * h * h)


def _sg_second(f, x: np.ndarray, v: np.ndarray, w: np.ndarray) -> float:
    """v^T H w by sg.grad nested: the gradient of <grad f, v>, paired with w."""
    return float(np.sum(sg.grad(lambda a: np.sum(sg.grad(f)(a) * v))(x) * w))


def _aligned(call, axes, reference):
    """``call`` in float64 with its vectors' signs pinned to ``reference``'s (the signs numpy
    gives at the float32 point), the oracle for float32 gradients."""
    def aligned(a):
        outs = []
        for o, axis, r in zip(_outputs(call(a)), axes, reference):
            if axis is not None:
                o = o * np.sign(np.sum(o * r, axis=axis, keepdims=True))
            outs.append(o)
        return tuple(outs)
    return aligned

# ---------------------------------------------------------------- values


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("call, axes, kind, shape", CASES)
def test_values_are_numpys_on_the_arrays_signs_included(call, axes, kind, shape, dtype):
    x = _matrix(kind, shape, dtype)
    tol = 1e-12 if dtype == np.float64 else 2e-6
    want = _outputs(call(x))
    op = sg.Ops()
    got = _outputs(call(op.var(x, name="A")))
    assert len(got) == len(want) == len(axes)
    for g, w, axis in zip(got, want, axes):
        assert isinstance(g, sg.Variable)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g.value, w, rtol=tol, atol=tol)
        if axis is not None:        # each vector points the way numpy's does
            assert np.all(np.sum(g.value * w, axis=axis) > 0)


def test_numpys_signs_are_not_the_fixed_ones_and_differ_by_a_sign_pattern():
    x = _matrix("any", (4, 4), np.float64)
    op = sg.Ops()
    A = op.var(x, name="A")
    Q, R = np.linalg.qr(A)
    Qf, Rf = op.qr(A)
    assert np.any(np.diagonal(R.value) < 0)         # numpy's Householder signs
    assert np.all(np.diagonal(Rf.value) >= 0)       # the documented convention
    d = np.sign(np.diagonal(R.value))
    np.testing.assert_array_equal(Q.value, Qf.value * d)
    np.testing.assert_array_equal(R.value, Rf.value * d[:, None])
    U, S, Vh = np.linalg.svd(A)
    Uf, Sf, Vhf = op.svd(A)
    d = np.sign(np.sum(U.value * Uf.value, axis=0))
    assert np.any(d < 0)
    np.testing.assert_array_equal(U.value, Uf.value * d)
    np.testing.assert_array_equal(Vh.value, Vhf.value * d[:, None])
    np.testing.assert_array_equal(S.value, Sf.value)

# ---------------------------------------------------------------- derivatives, float64


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("call, axes, kind, shape", CASES)
def test_first_and_second_derivatives_match_differences_of_numpy(call, axes, kind, shape,
                                                                 function):
    x = _matrix(kind, shape, np.float64)
    f = function(call, _weights(_outputs(call(x)), 1))
    np.testing.assert_allclose(sg.grad(f)(x), _fd_grad(f, x), rtol=1e-6, atol=1e-6)
    rng = np.random.default_rng(2)
    v, w = rng.normal(size=shape), rng.normal(size=shape)
    np.testing.assert_allclose(_sg_second(f, x, v, w), _fd_second(f, x, v, w), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("call, axes, kind, shape", [
    c for c in CASES if c.values[3] in ((3, 3), (3, 5), (2, 4, 3))])
def test_check_grads_orders_1_and_2_reverse_and_forward(call, axes, kind, shape, function):
    x = _matrix(kind, shape, np.float64)
    f = function(call, _weights(_outputs(call(x)), 3))
    sg.check_grads(f, [x])      # rev and fwd modes against its differences (f on Variables)

# ---------------------------------------------------------------- derivatives, float32


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("call, axes, kind, shape", [
    c for c in CASES if c.values[3] in ((3, 3), (5, 3), (2, 3, 5))])
def test_float32_derivatives_match_float64_differences(call, axes, kind, shape, function):
    x32 = _matrix(kind, shape, np.float32)
    x = x32.astype(np.float64)
    weights = _weights(_outputs(call(x32)), 4)
    f = function(call, weights)
    oracle = function(_aligned(call, axes, _outputs(call(x32))), weights)
    g = sg.grad(f)(x32)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, _fd_grad(oracle, x), rtol=2e-3, atol=2e-3)
    rng = np.random.default_rng(5)
    v, w = rng.normal(size=shape), rng.normal(size=shape)
    np.testing.assert_allclose(_sg_second(f, x32, v.astype(np.float32), w.astype(np.float32)),
                               _fd_second(oracle, x, v, w), rtol=2e-2, atol=2e-2)

# ---------------------------------------------------------------- the rest unchanged


def test_the_ops_methods_keep_their_fixed_signs_and_print():
    rng = np.random.default_rng(6)
    op = sg.Ops()
    A = op.var(spread_singular(rng, (2, 4, 3)), name="A")
    S = op.var(_matrix("triangle", (3, 3), np.float64), name="S")
    Q, R = op.qr(A)
    assert np.all(np.diagonal(R.value, axis1=-2, axis2=-1) >= 0)
    U, _, Vh = op.svd(A, full_matrices=False)
    _, V = op.eigh(S)
    for u in (U.value, V.value):
        biggest = np.take_along_axis(u, np.abs(u).argmax(axis=-2)[..., None, :], -2)
        assert np.all(biggest > 0)
    n = len(op.tape)
    np.linalg.qr(A)
    np.linalg.eigh(S, UPLO="U")
    lines = op.format_trace().splitlines()
    assert "v0 = qr(A).Q" in lines and "v2 = svd(A).U" in lines and "v6 = eigh(S).eigenvectors" \
        in lines
    assert lines[-8:] == ["v7 = np.linalg.qr(A).Q", "v8 = np.linalg.qr(A).R",
                          "v9 = triu(S)", "v10 = triu(S, k=1)", "v11 = v10.T", "v12 = v9 + v11",
                          "v13 = np.linalg.eigh(v12, UPLO='U').eigenvalues",
                          "v14 = np.linalg.eigh(v12, UPLO='U').eigenvectors"]
    assert len(op.tape) == n + 8


@pytest.mark.parametrize("call, error, text", [
    (lambda a: np.linalg.svd(a), sg.ArgumentError, "full_matrices=True adds singular vectors"),
    (lambda a: np.linalg.svd(a, hermitian=True), sg.ArgumentError,
     "hermitian=True is not supported"),
    (lambda a: np.linalg.qr(a, mode="complete"), sg.ArgumentError,
     "mode='complete' is not supported"),
    (lambda a: np.linalg.qr(a, mode="raw"), sg.ArgumentError, "mode='raw' is not supported"),
    (lambda a: np.linalg.eigh(a, UPLO="X"), sg.ArgumentError, "UPLO must be"),
    (lambda a: np.linalg.eigh(a), sg.ShapeError, "square"),
], ids=["svd-full-tall", "hermitian", "qr-complete-tall", "qr-raw", "eigh-uplo", "eigh-tall"])
def test_options_refused_before_are_still_refused(call, error, text):
    op = sg.Ops()
    A = op.var(np.ones((3, 2) if "UPLO" not in text else (2, 2)), name="A")
    with pytest.raises(error, match=text):
        call(A)
    assert len(op.tape) == 0


def test_vmap_gives_each_examples_numpy_signs():
    x = _matrix("any", (4, 3, 3), np.float64)
    got = sg.vmap(lambda a: np.linalg.svd(a, full_matrices=False).U)(x)
    np.testing.assert_allclose(got, np.stack([np.linalg.svd(e).U for e in x]), atol=1e-12)
    f = _dependent(lambda a: np.linalg.qr(a), _weights(np.linalg.qr(x[0]), 7))
    per_example = sg.vmap(sg.grad(f))(x)
    np.testing.assert_allclose(per_example, np.stack([_fd_grad(f, e) for e in x]), rtol=1e-6,
                               atol=1e-6)


def test_a_recorded_gradient_follows_numpys_signs_at_new_inputs():
    x = _matrix("any", (3, 3), np.float64)
    y = x * np.array([-1.0, 1.0, 1.0])      # numpy's first Householder sign flips
    d = [np.sign(np.diagonal(np.linalg.qr(a).R)) for a in (x, y)]
    assert np.any(d[0] != d[1])
    f = _dependent(lambda a: np.linalg.qr(a), _weights(np.linalg.qr(x), 8))
    op = sg.Ops()
    A = op.var(x, name="A")
    (g,) = op.grad(f(A), [A])
    prog = op.program([A], [g])
    np.testing.assert_allclose(prog(y)[0], _fd_grad(f, y), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- eigh reads one triangle

EIGH_CALLS = [c for c in CALLS if c[3] == "triangle"]
UPLOS = [pytest.param("L", id="L"), pytest.param("U", id="U")]


def _ignored(uplo: str, shape: tuple) -> np.ndarray:
    """True on the strict triangle numpy's eigh ignores (the upper one for UPLO="L")."""
    n = shape[-1]
    mask = np.triu(np.ones((n, n), dtype=bool), 1)
    return np.broadcast_to(mask if uplo == "L" else mask.T, shape)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("uplo", UPLOS)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)], ids=["4x4", "2x3x3"])
def test_eigh_of_a_nonsymmetric_variable_is_numpys_bit_for_bit(shape, uplo, dtype):
    x = _matrix("triangle", shape, dtype)
    want = np.linalg.eigh(x, UPLO=uplo)
    assert not np.allclose(want.eigenvalues, np.linalg.eigvalsh((x + np.swapaxes(x, -1, -2)) / 2))
    op = sg.Ops()
    w, v = np.linalg.eigh(op.var(x, name="A"), UPLO=uplo)
    np.testing.assert_array_equal(w.value, want.eigenvalues)
    np.testing.assert_array_equal(v.value, want.eigenvectors)
    assert w.dtype == v.dtype == dtype


@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("call, uplo", [pytest.param(c[1], "U" if c[0].endswith("-U") else "L",
                                                     id=c[0]) for c in EIGH_CALLS])
def test_the_ignored_triangle_gets_exactly_zero_at_orders_1_and_2(call, uplo, function):
    x = _matrix("triangle", (2, 3, 3), np.float64)
    f = function(call, _weights(_outputs(call(x)), 10))
    ignored = _ignored(uplo, x.shape)
    g = sg.grad(f)(x)
    assert np.all(g[ignored] == 0.0) and np.all(g[~ignored] != 0.0)
    v = np.random.default_rng(11).normal(size=x.shape)      # H v: ignored rows of H are 0
    hv = sg.grad(lambda a: np.sum(sg.grad(f)(a) * v))(x)
    assert np.all(hv[ignored] == 0.0) and np.all(hv[~ignored] != 0.0)
    e = np.where(ignored, 1.0, 0.0)                          # H along the ignored entries
    assert np.all(sg.grad(lambda a: np.sum(sg.grad(f)(a) * e))(x) == 0.0)


@pytest.mark.parametrize("uplo", UPLOS)
def test_the_gradient_is_the_symmetric_ones_with_its_off_diagonal_doubled(uplo):
    """At a non-symmetric a, numpy's eigh decomposes M = mirror(a's triangle). With G the
    (symmetric) gradient of op.eigh's form at M, chain rule through M = tril(a) +
    tril(a, -1)^T gives diag(G) on the diagonal, G_ij + G_ji = 2 G_ij on the read strict
    triangle and 0 on the other."""
    x = _matrix("triangle", (3, 3), np.float64)
    weights = _weights(np.linalg.eigh(x), 12)

    def energy(pair):                        # sign-invariant: op.eigh's signs may differ
        return sum(np.sum(w * o * o) for w, o in zip(weights, pair))

    g = sg.grad(lambda a: energy(np.linalg.eigh(a, UPLO=uplo)))(x)
    m = _mirrored(x, uplo)
    G = sg.grad(lambda a: energy(a.ops.eigh(a)))(m)
    np.testing.assert_allclose(G, G.T, rtol=1e-12, atol=1e-12)
    read = np.tril(G, -1) if uplo == "L" else np.triu(G, 1)
    np.testing.assert_allclose(g, np.diag(np.diag(G)) + 2 * read, rtol=1e-10, atol=1e-12)


def test_op_eigh_keeps_decomposing_the_symmetric_part():
    x = _matrix("triangle", (3, 3), np.float64)
    op = sg.Ops()
    w, v = op.eigh(op.var(x))
    want = np.linalg.eigh((x + x.T) / 2)
    np.testing.assert_allclose(w.value, want.eigenvalues, rtol=1e-12)
    np.testing.assert_allclose(np.abs(v.value), np.abs(want.eigenvectors), atol=1e-12)
    np.testing.assert_allclose(op.eigvalsh(op.var(x)).value, want.eigenvalues, rtol=1e-12)
    g = sg.grad(lambda a: np.sum(a.ops.eigvalsh(a) ** 2))(x)
    np.testing.assert_allclose(g, x + x.T, rtol=1e-12)      # d |sym(a)|_F^2 / da


@pytest.mark.parametrize("uplo", UPLOS)
def test_vmap_of_eigh_reads_each_examples_triangle(uplo):
    x = _matrix("triangle", (2, 3, 3), np.float64)
    w, v = sg.vmap(lambda a: tuple(np.linalg.eigh(a, UPLO=uplo)))(x)
    want = np.linalg.eigh(x, UPLO=uplo)
    np.testing.assert_allclose(w, want.eigenvalues, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(v, want.eigenvectors, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sg.vmap(lambda a: np.linalg.eigvalsh(a, UPLO=uplo))(x),
                               want.eigenvalues, rtol=1e-12, atol=1e-12)
    f = _dependent(lambda a: np.linalg.eigh(a, UPLO=uplo), _weights(np.linalg.eigh(x[0]), 13))
    per_example = sg.vmap(sg.grad(f))(x)
    np.testing.assert_allclose(per_example, np.stack([_fd_grad(f, e) for e in x]), rtol=1e-6,
                               atol=1e-6)
    assert np.all(per_example[_ignored(uplo, x.shape)] == 0.0)
