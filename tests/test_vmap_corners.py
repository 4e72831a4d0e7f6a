"""Corners of transforms under vmap: batches of size 1 (a level whose axis has length 1 is
still a level, not a broadcast), and pullbacks made inside a vmap and vmapped again there
(torch.func's NTK-vector products).

Oracles: closed-form Hessians looped over the examples in numpy, and the NTK as an explicit
contraction of Jacobians written out by hand in numpy (float64, rtol 1e-10).
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg

RTOL = 1e-10
PICK = np.array([0, -1])


def close(got, want, rtol: float = RTOL) -> None:
    got = np.asarray(got)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-12)


# ---------------------------------------------------------------- batches of size 1

def cubes(x):
    """sum(x^3) + (x_0 x_-1)^2."""
    return (x ** 3).sum() + (x[0] * x[-1]) ** 2


def cubes_h(x: np.ndarray) -> np.ndarray:
    h = np.diag(6 * x)
    a, b = x[0], x[-1]
    if len(x) == 1:
        return h + 12 * a ** 2
    h[0, 0] += 2 * b ** 2
    h[-1, -1] += 2 * a ** 2
    h[0, -1] += 4 * a * b
    h[-1, 0] += 4 * a * b
    return h


def gathered(x):
    """sum(x[[0, -1]]^3), through a gather by an index array."""
    return (x[PICK] ** 3).sum()


def gathered_h(x: np.ndarray) -> np.ndarray:
    d = np.zeros_like(x)
    for i in PICK:
        d[i] += 6 * x[i]
    return np.diag(d)


FUNCTIONS = {"cubes": (cubes, cubes_h), "gathered": (gathered, gathered_h)}
SIZES = [(1, 3), (1, 1), (2, 1), (1, 2), (3, 2)]       # (rows of V, n)


def _data(rows: int, n: int):
    rng = np.random.default_rng(10 * rows + n)
    return rng.normal(size=n), rng.normal(size=(rows, n)), rng.normal(size=(rows, n))


PRODUCTS = {
    "hvp": lambda f, x, v: sg.hvp(f, x, v),
    "jvp_of_grad": lambda f, x, v: sg.jvp(sg.grad(f), (x,), (v,))[1],
    "vjp_of_grad": lambda f, x, v: sg.vjp(sg.grad(f), x)[1](v)[0],
}


@pytest.mark.parametrize("product", PRODUCTS)
@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("rows,n", SIZES)
def test_hessian_products_over_a_batch_of_tangents(product: str, name: str, rows: int,
                                                   n: int) -> None:
    """vmap over v of H(x) v at one x: each row of V its own product, one row or many."""
    f, h = FUNCTIONS[name]
    x, V, _ = _data(rows, n)
    prod = PRODUCTS[product]
    got = sg.vmap(lambda v: prod(f, x, v))(V)
    close(got, np.stack([h(x) @ v for v in V]))


@pytest.mark.parametrize("product", PRODUCTS)
@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("rows,n", SIZES)
def test_hessian_products_over_a_batch_of_points(product: str, name: str, rows: int,
                                                 n: int) -> None:
    """vmap over (x, v) of H(x) v: each example its own point and tangent."""
    f, h = FUNCTIONS[name]
    _, V, X = _data(rows, n)
    prod = PRODUCTS[product]
    got = sg.vmap(lambda x, v: prod(f, x, v))(X, V)
    close(got, np.stack([h(x) @ v for x, v in zip(X, V)]))


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("rows,n", SIZES)
def test_hessians_and_jacobians_over_a_batch(name: str, rows: int, n: int) -> None:
    """vmap(hessian), vmap(jacobian(grad, fwd)) and vmap(grad) at batch sizes 1 and more."""
    f, h = FUNCTIONS[name]
    _, _, X = _data(rows, n)
    want = np.stack([h(x) for x in X])
    close(sg.vmap(sg.hessian(f))(X), want)
    close(sg.vmap(sg.jacobian(sg.grad(f), mode="fwd"))(X), want)
    close(sg.vmap(sg.jacobian(sg.grad(f), mode="rev"))(X), want)


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("rows,n", SIZES)
def test_nested_vmaps_with_axes_of_size_1(name: str, rows: int, n: int) -> None:
    """Two vmaps around hvp, either of them (or both) over an axis of length 1."""
    f, h = FUNCTIONS[name]
    x, V, X = _data(rows, n)
    want = np.stack([h(x) @ v for v in V])
    inner = sg.vmap(lambda v: sg.hvp(f, x, v))
    close(sg.vmap(inner)(V[:, None, :]), want[:, None])
    close(sg.vmap(inner)(V[None]), want[None])
    both = sg.vmap(sg.vmap(lambda x, v: sg.hvp(f, x, v)))
    close(both(X[:, None], V[:, None]), np.stack([h(x) @ v for x, v in zip(X, V)])[:, None])
    # the inner vmap over the points, the outer over the tangents, one closed over
    got = sg.vmap(lambda v: sg.vmap(lambda x: sg.hvp(f, x, v))(X))(V)
    close(got, np.stack([np.stack([h(x) @ v for x in X]) for v in V]))


def test_a_closed_over_argument_at_a_level_of_size_1() -> None:
    """grad of a closure over one example of a batch of 1: the example's own gradient."""
    a = np.array([[0.5, -2.0, 1.5]])
    x0 = np.array([1.0, 2.0, 3.0])
    got = sg.vmap(lambda a: sg.grad(lambda x: (a * x ** 2).sum())(x0))(a)
    close(got, 2 * a * x0)


# ---------------------------------------------------------------- pullbacks vmapped again

# torch.func's NTK tutorial, method 2 (NTK-vector products), on a two-layer tanh network: the
# pullback of the network at x1, made inside two vmaps, is vmapped over the output basis
# inside them, and each cotangent pushed forward through the network at x2. Oracle: method 1,
# the explicit contraction J(x1) J(x2)^T of Jacobians written out by hand in numpy.

D, H, OUT = 3, 4, 2
_R = np.random.default_rng(7)
PARAMS = {"w1": _R.normal(size=(H, D)), "b1": _R.normal(size=H),
          "w2": _R.normal(size=(OUT, H)), "b2": _R.normal(size=OUT)}
X1, X2 = _R.normal(size=(3, D)), _R.normal(size=(2, D))


def net(p, x):
    return p["w2"] @ np.tanh(p["w1"] @ x + p["b1"]) + p["b2"]


def jacobian_by_hand(p: dict, x: np.ndarray) -> np.ndarray:
    """d net / d(w1, b1, w2, b2), the parameters flattened in that order: shape (OUT, P)."""
    h = np.tanh(p["w1"] @ x + p["b1"])
    d_b1 = p["w2"] * (1 - h ** 2)                   # (OUT, H)
    d_w1 = (d_b1[:, :, None] * x).reshape(OUT, -1)
    d_w2 = (np.eye(OUT)[:, :, None] * h).reshape(OUT, -1)
    return np.concatenate([d_w1, d_b1, d_w2, np.eye(OUT)], axis=1)


def ntk_by_hand(p: dict, x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    """Method 1: J(a) J(b)^T for every pair (a, b), shape (N, M, OUT, OUT)."""
    return np.array([[jacobian_by_hand(p, a) @ jacobian_by_hand(p, b).T for b in x2]
                     for a in x1])


def ntk_vector_products(func, params, x1, x2, compute: str = "full"):
    """Method 2 as the tutorial writes it, in simplegrad's names."""
    def get_ntk(x1, x2):
        output, vjp_fn = sg.vjp(lambda p: func(p, x1), params)

        def get_ntk_slice(vec):
            vjps = vjp_fn(vec)          # vec J(x1)
            _, jvps = sg.jvp(lambda p: func(p, x2), (params,), vjps)     # J(x2) vjps
            return jvps
        basis = np.eye(output.size).reshape(output.size, -1)
        return sg.vmap(get_ntk_slice)(basis)
    result = sg.vmap(sg.vmap(get_ntk, (None, 0)), (0, None))(x1, x2)
    if compute == "trace":
        return np.einsum("NMKK->NM", result)
    if compute == "diagonal":
        return np.einsum("NMKK->NMK", result)
    return result


def test_the_jacobian_by_hand_is_the_jacobian() -> None:
    """The oracle itself, against central differences of the network."""
    x, eps = X1[0], 1e-6
    flat = np.concatenate([PARAMS[k].ravel() for k in ("w1", "b1", "w2", "b2")])
    sizes = np.cumsum([0] + [PARAMS[k].size for k in ("w1", "b1", "w2", "b2")])

    def at(v):
        return net({k: v[sizes[i]:sizes[i + 1]].reshape(PARAMS[k].shape)
                    for i, k in enumerate(("w1", "b1", "w2", "b2"))}, x)
    fd = np.stack([(at(flat + eps * e) - at(flat - eps * e)) / (2 * eps)
                   for e in np.eye(flat.size)], axis=1)
    np.testing.assert_allclose(jacobian_by_hand(PARAMS, x), fd, rtol=1e-6, atol=1e-8)


def test_ntk_vector_products_equal_the_jacobian_contraction() -> None:
    """The tutorial's assertion (method 2 == method 1), here against numpy, to 1e-10."""
    want = ntk_by_hand(PARAMS, X1, X2)
    close(ntk_vector_products(net, PARAMS, X1, X2), want)
    close(ntk_vector_products(net, PARAMS, X1, X2, "trace"), np.einsum("NMKK->NM", want))
    close(ntk_vector_products(net, PARAMS, X2, X1, "diagonal"),
          np.einsum("NMKK->NMK", ntk_by_hand(PARAMS, X2, X1)))


def test_ntk_vector_products_at_batches_of_one() -> None:
    close(ntk_vector_products(net, PARAMS, X1[:1], X2[:1]), ntk_by_hand(PARAMS, X1[:1], X2[:1]))
    close(ntk_vector_products(net, PARAMS, X1[:1], X2), ntk_by_hand(PARAMS, X1[:1], X2))


def _slices(x1, x2, p=PARAMS):
    """The pullback vmapped over the basis, then the pushforward vmapped over its results."""
    output, vjp_fn = sg.vjp(lambda q: net(q, x1), p)
    vjps = sg.vmap(vjp_fn)(np.eye(output.size))
    return sg.vmap(lambda t: sg.jvp(lambda q: net(q, x2), (p,), t)[1])(vjps)


def test_the_pullback_itself_vmapped_inside_vmaps() -> None:
    got = sg.vmap(sg.vmap(_slices, (None, 0)), (0, None))(X1, X2)
    close(got, ntk_by_hand(PARAMS, X1, X2))


@pytest.mark.parametrize("outer", ["none", "x1", "x2"])
def test_the_pullback_vmapped_under_fewer_vmaps(outer: str) -> None:
    """The same with no vmap around (the pullback on a tape of its own), or one."""
    want = ntk_by_hand(PARAMS, X1, X2)
    if outer == "none":
        close(_slices(X1[1], X2[0]), want[1, 0])
    elif outer == "x1":
        close(sg.vmap(_slices, (0, None))(X1, X2[0]), want[:, 0])
    else:
        close(sg.vmap(_slices, (None, 0))(X1[2], X2), want[2])


@pytest.mark.parametrize("create_graph", [True, False])
def test_a_seed_and_a_tangent_batched_by_a_vmap_the_tape_is_not(create_graph: bool) -> None:
    """op.grad with seed= and op.jvp of values recorded outside the vmap: rows u^T J and
    columns J t of the Jacobian of tanh(W x), J = diag(1 - tanh^2) W."""
    rng = np.random.default_rng(3)
    W, x0 = rng.normal(size=(4, 3)), rng.normal(size=3)
    U, T = rng.normal(size=(5, 4)), rng.normal(size=(5, 3))
    J = (1 - np.tanh(W @ x0) ** 2)[:, None] * W
    op = sg.Ops()
    x = op.var(x0)
    y = op.tanh(op.matmul(W, x))
    rows = sg.vmap(lambda u: op.grad(y, x, seed=u, create_graph=create_graph))(op.var(U))
    close(rows.value, U @ J)
    cols = sg.vmap(lambda t: op.jvp(y, x, t, create_graph=create_graph))(op.var(T))
    close(cols.value, T @ J.T)


# ---------------------------------------------------------------- differentiated again

def test_grad_of_a_pushforward_along_a_pullback() -> None:
    """grad of <1, J2(w) t(w)> with t(w) = J1(w)^T 1, a vjp's result pushed by a jvp (the NTK's
    pattern without vmap): the jvp's rules read the pullback's entries, recorded before the
    grad's Ops began to simplify. f_k(w) = tanh(w x_k), s_k = 1 - f_k^2, and the value is
    sum_i s2_i s1_i (x1 . x2), whose gradient in row w_i is
    -2 (x1 . x2) s1_i s2_i (tanh(w_i . x2) x2 + tanh(w_i . x1) x1)."""
    rng = np.random.default_rng(5)
    W, x1, x2 = rng.normal(size=(2, 3)), rng.normal(size=3), rng.normal(size=3)

    def value(w):
        t = sg.vjp(lambda q: np.tanh(q @ x1), w)[1](np.ones(2))[0]
        return sg.jvp(lambda q: np.tanh(q @ x2), (w,), (t,))[1].sum()
    f1, f2 = np.tanh(W @ x1), np.tanh(W @ x2)
    s1, s2 = 1 - f1 ** 2, 1 - f2 ** 2
    want = -2 * (x1 @ x2) * (s1 * s2)[:, None] * (f2[:, None] * x2 + f1[:, None] * x1)
    close(sg.grad(value)(W), want)


def test_grad_of_the_ntk_in_the_parameters() -> None:
    """d sum(NTK) / d params through method 2 (vjp, jvp and three vmaps under grad), against
    central differences of the NTK by hand."""
    got = sg.grad(lambda p: ntk_vector_products(net, p, X1, X2).sum())(PARAMS)
    eps = 1e-6
    for k, v in PARAMS.items():
        fd = np.zeros_like(v)
        for idx in np.ndindex(v.shape):
            e = np.zeros_like(v)
            e[idx] = eps
            up, down = ({**PARAMS, k: v + s * e} for s in (1, -1))
            fd[idx] = (ntk_by_hand(up, X1, X2).sum() - ntk_by_hand(down, X1, X2).sum()) / (2 * eps)
        np.testing.assert_allclose(got[k], fd, rtol=1e-6, atol=1e-7)


# a pullback of f(x) = tanh(A x) x_0 made per example x, applied to a batch of cotangents:
# J(x) = diag((1 - tanh^2(A x)) x_0) A + tanh(A x) e_0^T
_A = np.random.default_rng(2).normal(size=(3, 4))
_X = np.random.default_rng(4).normal(size=(2, 4))
_U = np.random.default_rng(6).normal(size=(5, 3))


def _f(x):
    return np.tanh(_A @ x) * x[0]


def _jac(x: np.ndarray) -> np.ndarray:
    t = np.tanh(_A @ x)
    j = ((1 - t ** 2) * x[0])[:, None] * _A
    j[:, 0] += t
    return j


def test_a_per_example_pullback_over_a_batch_of_cotangents() -> None:
    got = sg.vmap(lambda x: sg.vmap(sg.vjp(_f, x)[1])(_U)[0])(_X)
    close(got, np.stack([_U @ _jac(x) for x in _X]))


def test_a_per_example_pullback_under_two_vmaps_of_cotangents() -> None:
    U2 = np.stack([_U, 2 * _U[::-1]])
    got = sg.vmap(lambda x: sg.vmap(sg.vmap(sg.vjp(_f, x)[1]))(U2)[0])(_X)
    close(got, np.stack([U2 @ _jac(x) for x in _X]))


def test_the_jvp_of_a_per_example_pullback_is_the_pullback() -> None:
    """The pullback is linear: its jvp along u at any point is the pullback of u."""
    u0 = np.array([0.3, -1.0, 2.0])

    def per_x(x):
        pb = sg.vjp(_f, x)[1]
        return sg.vmap(lambda u: sg.jvp(lambda w: pb(w)[0], (u0,), (u,))[1])(_U)
    close(sg.vmap(per_x)(_X), np.stack([_U @ _jac(x) for x in _X]))


def test_grad_through_a_vmapped_pullback() -> None:
    """d/dx sum((U J(x))^2), against central differences of the Jacobian by hand."""
    got = sg.vmap(sg.grad(lambda x: (sg.vmap(sg.vjp(_f, x)[1])(_U)[0] ** 2).sum()))(_X)

    def value(x):
        return ((_U @ _jac(x)) ** 2).sum()
    eps = 1e-6
    want = np.array([[(value(x + eps * e) - value(x - eps * e)) / (2 * eps) for e in np.eye(4)]
                     for x in _X])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
