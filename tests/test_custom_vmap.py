"""Custom rules that take derivatives inside themselves, under vmap.

A custom entry has no batching rule: under ``sg.vmap`` it is recorded once per example, so its
rule sees one example, and a transform the rule calls must run at none of the vmap's levels
(else it lifts its primals to the whole batch and hands every example's Jacobian to each).
The grid: {custom_jvp, custom_vjp, custom_root, fixed_point} x {a rule (or residual) computing
``sg.jacobian`` / ``sg.grad`` / ``sg.hessian`` / ``sg.vmap`` inside} x {vmap of jacobian in
both modes, of jvp, of grad, of hessian; jacobian of vmap}, each against a Python loop over
the batch (the same transform per example, to 1e-12) and against float64 central finite
differences (step 1e-6; 1e-6 relative and absolute, which the step's truncation, ~1e-12, and
the solvers' residuals, at most 1e-14 / 1e-6 = 1e-8, stay well inside). Beside it: a pullback
called under vmap (its batched cotangents keep their level), nested vmaps, a rule reading a
batched closure (that level stays), Taylor mode under vmap; then Kepler's equation by
``custom_root`` under vmap to order 3 against its closed-form implicit derivatives.
"""

import functools

import numpy as np
import pytest

import simplegrad as sg

D = 2           # each example's size
B = 3           # examples (not D: a batch axis confused with a basis axis shows)
EYE = np.eye(D)
XS = np.array([[0.3, -0.7], [1.1, 0.4], [-0.5, 0.9]])
V = np.array([0.6, -1.3])       # the tangent of the jvp cases
STEP = 1e-6
FD_TOL = 1e-6
LOOP_TOL = 1e-12


def phi(u):
    return np.sum(np.sin(u)) * np.sum(u * u) / 2


def h(u):
    """The gradient of phi, by hand."""
    return np.cos(u) * (np.sum(u * u) / 2) + u * np.sum(np.sin(u))


def jacobian_of_h(method, x):
    """dh/dx (phi's Hessian) at x, by the transform ``method``."""
    if method == "jacobian":
        return sg.jacobian(h)(x)
    if method == "grad":        # row by row
        return np.stack([sg.grad(lambda u, i=i: h(u)[i])(x) for i in range(D)])
    if method == "hessian":
        return sg.hessian(phi)(x)
    return sg.vmap(lambda e: sg.jvp(h, (x,), (e,))[1])(EYE).T    # vmap: columns by jvps


def matrix_of(method, g):
    """The matrix of the linear, symmetric map g, by the transform ``method``."""
    z = np.zeros(D)
    if method == "jacobian":
        return sg.jacobian(g)(z)
    if method == "grad":
        return np.stack([sg.grad(lambda u, i=i: g(u)[i])(z) for i in range(D)])
    if method == "hessian":     # the Hessian of the quadratic form u.g(u)/2
        return sg.hessian(lambda u: 0.5 * np.sum(u * g(u)))(z)
    return sg.vmap(g)(EYE).T


def gradient_of_phi(method, z):
    """A map inside a fixed point's f, by the transform ``method`` (phi's gradient; with
    "hessian", phi's Hessian times z)."""
    if method == "jacobian":
        return sg.jacobian(phi)(z)
    if method == "grad":
        return sg.grad(phi)(z)
    if method == "hessian":
        return sg.hessian(phi)(z) @ z
    return sg.vmap(lambda e: sg.jvp(phi, (z,), (e,))[1])(EYE)


def newton(f, z0):
    z = z0
    for _ in range(50):
        r = f(z)
        if np.max(np.abs(r)) < 1e-15:
            break
        z = z - np.linalg.solve(sg.jacobian(f)(z), r)
    return z


@functools.cache
def function(kind, method):
    """R^D -> R^D: h as a custom function whose rule takes a derivative by ``method``, or a
    root or fixed point whose rule reaches such a derivative."""
    if kind == "custom_jvp":
        f = sg.custom_jvp(h)

        @f.defjvp
        def f_jvp(primals, tangents):
            (x,), (t,) = primals, tangents
            return f(x), jacobian_of_h(method, x) @ t
        return f
    if kind == "custom_vjp":
        f = sg.custom_vjp(h)

        @f.defvjp
        def f_bwd(g, out, x):
            return jacobian_of_h(method, x).T @ g
        return f
    if kind == "custom_root":
        def root(x):    # z + 0.1 h(z) = x: the root of the energy's gradient (sg.grad)
            def energy(z):
                return 0.5 * np.sum(z * z) + 0.1 * phi(z) - np.sum(x * z)
            return sg.custom_root(sg.grad(energy), np.zeros(D), newton,
                                  lambda g, y: np.linalg.solve(matrix_of(method, g), y))
        return root

    def fixed(x):
        return sg.fixed_point(lambda z, x: x - 0.1 * gradient_of_phi(method, z), np.zeros(D),
                              x, tol=1e-14)
    return fixed


def loss(F):
    return lambda x: np.sum(np.sin(F(x)))


def central(f, x, step=STEP):
    """df/dx by central differences, shaped f(x).shape + x.shape."""
    cols = []
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = step
        e = e.reshape(x.shape)
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * step))
    return np.moveaxis(np.array(cols), 0, -1).reshape(np.shape(f(x)) + x.shape)


OUTER = {   # the transform under test, on the batch XS
    "vmap_jacfwd": lambda F: sg.vmap(sg.jacobian(F, mode="fwd"))(XS),
    "vmap_jacrev": lambda F: sg.vmap(sg.jacobian(F, mode="rev"))(XS),
    "vmap_jvp": lambda F: sg.vmap(lambda x: sg.jvp(F, (x,), (V,))[1])(XS),
    "vmap_grad": lambda F: sg.vmap(sg.grad(loss(F)))(XS),
    "vmap_hessian": lambda F: sg.vmap(sg.hessian(loss(F)))(XS),
    "jacobian_vmap": lambda F: sg.jacobian(sg.vmap(F))(XS),
}


def block_diagonal(blocks):
    out = np.zeros((B, D, B, D))
    for k in range(B):
        out[k, :, k, :] = blocks[k]
    return out


LOOP = {    # the same derivative one example at a time
    "vmap_jacfwd": lambda F: [sg.jacobian(F, mode="fwd")(x) for x in XS],
    "vmap_jacrev": lambda F: [sg.jacobian(F, mode="rev")(x) for x in XS],
    "vmap_jvp": lambda F: [sg.jvp(F, (x,), (V,))[1] for x in XS],
    "vmap_grad": lambda F: [sg.grad(loss(F))(x) for x in XS],
    "vmap_hessian": lambda F: [sg.hessian(loss(F))(x) for x in XS],
    "jacobian_vmap": lambda F: block_diagonal([sg.jacobian(F)(x) for x in XS]),
}

FD = {      # by central differences: of values, the Hessian of the per-example gradient
    "vmap_jacfwd": lambda F: [central(F, x) for x in XS],
    "vmap_jacrev": lambda F: [central(F, x) for x in XS],
    "vmap_jvp": lambda F: [(F(x + STEP * V) - F(x - STEP * V)) / (2 * STEP) for x in XS],
    "vmap_grad": lambda F: [central(loss(F), x) for x in XS],
    "vmap_hessian": lambda F: [central(sg.grad(loss(F)), x) for x in XS],
    "jacobian_vmap": lambda F: central(sg.vmap(F), XS),
}

KINDS = ["custom_jvp", "custom_vjp", "custom_root", "fixed_point"]
METHODS = ["jacobian", "grad", "hessian", "vmap"]


def _grid() -> list:
    """Every kind x method x outer transform; the implicit functions' Hessians and the
    transforms nested three deep run with the slow tests (the default run keeps every kind
    under every outer transform with a Jacobian inside, and every method for the rules)."""
    out = []
    for kind in KINDS:
        for method in METHODS:
            for outer in OUTER:
                heavy = kind in ("custom_root", "fixed_point") and method != "jacobian"
                out.append(pytest.param(kind, method, outer, id=f"{kind}-{method}-{outer}",
                                        marks=[pytest.mark.slow] if heavy else []))
    return out


@pytest.mark.parametrize(("kind", "method", "outer"), _grid())
def test_rule_with_a_derivative_inside_under_vmap(kind, method, outer):
    F = function(kind, method)
    got = OUTER[outer](F)
    np.testing.assert_allclose(got, np.asarray(LOOP[outer](F)), rtol=LOOP_TOL, atol=LOOP_TOL)
    np.testing.assert_allclose(got, np.asarray(FD[outer](F)), rtol=FD_TOL, atol=FD_TOL)


def test_the_rule_sees_one_example():
    """Inside the rule, under vmap of jacobian, the primal and the Jacobian the rule takes are
    one example's (they were every example's: a ShapeError, or a jvp of shape (B, B, D))."""
    seen = []
    f = sg.custom_jvp(h)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        J = sg.jacobian(h)(x)
        seen.append((x.shape, J.shape, type(J).__name__))
        return f(x), J @ t
    sg.vmap(sg.jacobian(f))(XS)
    assert seen and all(s == ((D,), (D, D), "Variable") for s in seen), seen
    assert sg.vmap(lambda x: sg.jvp(f, (x,), (V,))[1])(XS).shape == (B, D)


@pytest.mark.parametrize("kind", KINDS)
def test_a_pullback_called_under_vmap_keeps_its_batched_cotangents(kind):
    """The levels a rule is handed batched values at stay: a pullback made outside a vmap,
    called under it with a batch of cotangents, whose rule takes a Jacobian inside."""
    f = function(kind, "jacobian")
    x = XS[0]
    _, pullback = sg.vjp(f, x)
    gs = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, -1.0]])
    got = sg.vmap(lambda g: pullback(g)[0])(gs)
    J = central(f, x)
    np.testing.assert_allclose(got, gs @ J, rtol=FD_TOL, atol=FD_TOL)


@pytest.mark.parametrize("kind", KINDS)
def test_nested_vmaps_of_a_jacobian(kind):
    """Two vmaps around the Jacobian: the rule is one example of both."""
    F = function(kind, "jacobian")
    xs = np.stack([XS, XS[::-1] * 0.7])
    got = sg.vmap(sg.vmap(sg.jacobian(F)))(xs)
    np.testing.assert_allclose(got, [[central(F, x) for x in row] for row in xs],
                               rtol=FD_TOL, atol=FD_TOL)


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_a_rule_reading_a_batched_closure(mode):
    """A custom function made per example over a batched scale c, read through the closures of
    its forward and of its rule (which takes a Jacobian): that level stays, the rest goes."""
    def scaled(c):
        f = sg.custom_jvp(lambda x: h(x) * c)

        @f.defjvp
        def f_jvp(primals, tangents):
            (x,), (t,) = primals, tangents
            return f(x), (sg.jacobian(h)(x) * c) @ t
        return f
    cs = np.array([0.5, 1.5, -2.0])
    got = sg.vmap(lambda x, c: sg.jacobian(scaled(c), mode=mode)(x))(XS, cs)
    want = [central(lambda u, c=c: h(u) * c, x) for x, c in zip(XS, cs)]
    np.testing.assert_allclose(got, want, rtol=FD_TOL, atol=FD_TOL)


@pytest.mark.parametrize("kind", KINDS)
def test_taylor_under_vmap(kind):
    """sg.taylor through the rule under vmap, to order 3: equal to a loop over the batch, and
    orders 1-2 to central differences along V (order 2: step 1e-4, to 1e-5: the step's error
    ~1e-8, rounding ~1e-16 / 1e-8)."""
    F = function(kind, "jacobian")
    got = np.asarray(sg.vmap(lambda x: np.stack(sg.taylor(F, x, V, 3)))(XS))
    loop = [np.stack(sg.taylor(F, x, V, 3)) for x in XS]
    np.testing.assert_allclose(got, loop, rtol=LOOP_TOL, atol=LOOP_TOL)
    np.testing.assert_allclose(got[:, 1], [(F(x + STEP * V) - F(x - STEP * V)) / (2 * STEP)
                                           for x in XS], rtol=FD_TOL, atol=FD_TOL)
    s = 1e-4
    np.testing.assert_allclose(got[:, 2], [(F(x + s * V) - 2 * F(x) + F(x - s * V)) / s ** 2
                                           for x in XS], rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- Kepler under vmap

ECC = 0.3
MS = np.array([0.4, 1.1, 2.5])


def kepler(M):
    """E with E - e sin E = M; the tangent solve divides by the map's derivative, taken by
    sg.derivative inside the rule."""
    def newton1(f, E):
        for _ in range(60):
            E = E - f(E) / sg.derivative(f)(E)
        return E
    return sg.custom_root(lambda E: E - ECC * np.sin(E) - M, M, newton1,
                          lambda g, y: y / sg.derivative(g)(0.0))


def kepler_closed(M, n):
    """d^n E / dM^n in closed form (implicit differentiation of E - e sin E = M, by hand):
    E' = 1 / (1 - e cos E), E'' = -e sin E E'^3, E''' = -e cos E E'^4 + 3 e^2 sin^2 E E'^5."""
    E = M
    for _ in range(60):
        E = E - (E - ECC * np.sin(E) - M) / (1 - ECC * np.cos(E))
    d1 = 1.0 / (1.0 - ECC * np.cos(E))
    return [E, d1, -ECC * np.sin(E) * d1 ** 3,
            -ECC * np.cos(E) * d1 ** 4 + 3 * ECC ** 2 * np.sin(E) ** 2 * d1 ** 5][n]


def nested(transform, f, n):
    for _ in range(n):
        f = transform(f)
    return f


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("transform", [sg.derivative, sg.grad], ids=["forward", "reverse"])
def test_kepler_under_vmap_to_order_3(transform, n):
    want = [kepler_closed(M, n) for M in MS]
    got = sg.vmap(nested(transform, kepler, n))(MS)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-13)


def test_kepler_jacobian_of_vmap_is_diagonal():
    """The Jacobian of the vmapped root (examples independent): E' on the diagonal."""
    got = sg.jacobian(sg.vmap(kepler))(MS)
    np.testing.assert_allclose(got, np.diag([kepler_closed(M, 1) for M in MS]),
                               rtol=1e-11, atol=1e-13)
    got = sg.vmap(sg.hessian(kepler))(MS)
    np.testing.assert_allclose(got, [kepler_closed(M, 2) for M in MS], rtol=1e-11, atol=1e-13)
