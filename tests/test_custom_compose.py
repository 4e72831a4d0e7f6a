"""custom_vjp and checkpoint composed with Parameters, closures, other transforms, Dropout and
forward mode (issue 16), against closed forms, the unwrapped function, and float64 central
differences (step 1e-6, rtol 1e-6, atol 1e-8).

Tolerances: closed forms and the unwrapped function to rtol 1e-12 (the same float64 terms,
possibly summed in another order); a checkpointed block against the same block unwrapped, with
the same random mask, exactly or to rtol 1e-12.
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from simplegrad import nn
from simplegrad.transforms.custom import linear_in_cotangent

TOL = {"rtol": 1e-12, "atol": 1e-14}
FD = {"rtol": 1e-6, "atol": 1e-8}
EPS = 1e-6


def central(f, x, v):
    """float64 central difference of f at x along v."""
    return (np.asarray(f(x + EPS * v)) - np.asarray(f(x - EPS * v))) / (2 * EPS)


@sg.custom_vjp
def csin(x):
    return x.sin()


@csin.defvjp
def _csin_bwd(g, out, x):
    return g * x.cos()


# ---------------------------------------------------------------- 1. Parameters as arguments

def test_parameter_as_first_argument_of_checkpoint():
    p = sg.Parameter([0.3, -1.2, 2.0])
    x = np.array([1.5, 0.5, -0.7])
    L = sg.checkpoint(lambda p, x: (p * x).sin().sum())(p, x)
    L.backward()
    np.testing.assert_allclose(p.grad.value, np.cos(p.value * x) * x, **TOL)


def test_parameter_as_first_argument_of_custom_vjp():
    p = sg.Parameter([0.3, -1.2, 2.0])
    (csin(p) * 2.0).sum().backward()
    np.testing.assert_allclose(p.grad.value, 2 * np.cos(p.value), **TOL)


def test_parameter_with_a_variable_joins_its_ops():
    p = sg.Parameter([0.3, -1.2])
    op = sg.Ops()
    x = op.var([2.0, 3.0])
    times = sg.custom_vjp(lambda p, x: p * x)
    times.defvjp(lambda g, out, p, x: (g * x, g * p))
    cases = [(sg.checkpoint(lambda p, x: p * x.sin()), np.sin(x.value), p.value * np.cos(x.value)),
             (times, x.value, p.value)]
    for f, dp, dx in cases:
        y = f(p, x)
        assert y.ops is op
        gp, gx = op.grad(y.sum(), [op.leaf_for(p), x])
        np.testing.assert_allclose(gp.value, dp, **TOL)
        np.testing.assert_allclose(gx.value, dx, **TOL)


def test_parameter_only_call_inside_a_transform_records_on_it():
    p = sg.Parameter([0.3, -1.2])
    x0 = np.array([2.0, 3.0])
    g = sg.grad(lambda x: (sg.checkpoint(lambda p: p.exp())(p) * x).sum())(x0)
    np.testing.assert_allclose(g, np.exp(p.value), **TOL)
    g = sg.grad(lambda x: (csin(p) * x).sum())(x0)
    np.testing.assert_allclose(g, np.sin(p.value), **TOL)

# ---------------------------------------------------------------- 2. closures


def test_checkpoint_reading_a_parameter_through_a_closure():
    W = sg.Parameter(np.array([[0.5, -1.0], [0.25, 2.0], [1.5, 0.1]]))
    b = sg.Parameter([0.1, -0.2])
    x = np.array([[1.0, 2.0, -1.0], [0.5, -0.3, 0.2]])

    def block(h):
        return (h @ W + b).tanh()

    grads = []
    for f in (block, sg.checkpoint(block)):
        W.grad = b.grad = None
        (f(x) ** 2).sum().backward()
        grads.append((W.grad.value, b.grad.value))
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, want, **TOL)
    t = np.tanh(x @ W.value + b.value)
    np.testing.assert_allclose(grads[1][0], x.T @ (2 * t * (1 - t * t)), **TOL)
    assert np.abs(grads[1][0]).min() > 0


def test_checkpoint_reading_nn_layer_parameters():
    lin = nn.Linear(3, 2, rng=np.random.default_rng(1))
    x = np.random.default_rng(2).normal(size=(4, 3))
    grads = []
    for f in (lambda h: lin(h).tanh(), sg.checkpoint(lambda h: lin(h).tanh())):
        for p in lin.parameters():
            p.grad = None
        (f(x) ** 2).sum().backward()
        grads.append([p.grad.value for p in lin.parameters()])
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, **TOL)


def test_checkpoint_closure_over_an_outer_transform_variable():
    x0, w0 = np.array([0.3, -1.1, 2.0]), np.array([1.5, 0.4, -0.8])

    def loss(w):
        return sg.checkpoint(lambda x: (x * w).sin().sum())(x0)
    np.testing.assert_allclose(sg.grad(loss)(w0), np.cos(x0 * w0) * x0, **TOL)
    np.testing.assert_allclose(sg.hessian(loss)(w0), np.diag(-np.sin(x0 * w0) * x0 ** 2),
                               **TOL)
    np.testing.assert_allclose(sg.jacobian(sg.grad(loss), mode="rev")(w0),
                               np.diag(-np.sin(x0 * w0) * x0 ** 2), **TOL)


@pytest.mark.parametrize("create_graph", [True, False], ids=["recorded", "values"])
def test_checkpoint_closure_over_a_variable_of_its_ops(create_graph):
    op = sg.Ops()
    x = op.var([0.3, -1.1])
    w = op.var([1.5, 0.4])
    plain = lambda x: (x * w).exp() * w      # noqa: E731
    got = op.grad(sg.checkpoint(plain)(x).sum(), [x, w], create_graph=create_graph)
    want = op.grad(plain(x).sum(), [x, w], create_graph=create_graph)
    for g, h in zip(got, want):
        np.testing.assert_allclose(g.value, h.value, **TOL)


def test_nested_checkpoints_reading_closures_and_dropout():
    op = sg.Ops()
    W = op.var(np.array([[0.5, -1.0], [0.25, 2.0]]))
    p = sg.Parameter([0.3, -0.1])
    x0 = np.array([[1.0, 2.0], [0.5, -0.3], [0.2, 0.1]])
    grads = []
    for wrap in (lambda f: f, sg.checkpoint):
        drop = nn.Dropout(0.5, rng=np.random.default_rng(4))
        inner = wrap(lambda h, drop=drop: drop(h @ W + p).tanh())
        outer = wrap(lambda x, inner=inner: inner(inner(x)) * 2.0)
        x = op.var(x0)
        L = (outer(x) ** 2).sum()
        gx, gW, gp = op.grad(L, [x, W, op.leaf_for(p)])
        h = op.grad((gW * gW).sum(), [x, W])
        grads.append([v.value for v in (L, gx, gW, gp, *h)])
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, **TOL)
    assert np.abs(grads[1][2]).max() > 0


def test_checkpoint_of_parameters_reading_a_variable_records_on_its_ops():
    op = sg.Ops()
    W = op.var([1.5, -0.5])
    p = sg.Parameter([0.2, 0.7])
    y = sg.checkpoint(lambda p: (p * W).sin())(p)
    assert y.ops is op
    gW, gp = op.grad(y.sum(), [W, op.leaf_for(p)])
    np.testing.assert_allclose(gW.value, np.cos(p.value * W.value) * p.value, **TOL)
    np.testing.assert_allclose(gp.value, np.cos(p.value * W.value) * W.value, **TOL)


def test_checkpoint_argument_also_read_through_a_closure():
    # as the unwrapped block: both uses of W count (d/dW of W * W is 2 W)
    op = sg.Ops()
    W = op.var([1.5, -0.5])
    y = sg.checkpoint(lambda w: w * W)(W)
    np.testing.assert_allclose(op.grad(y.sum(), W).value, 2 * W.value, **TOL)


def test_checkpoint_reading_another_ops_raises():
    a, b = sg.Ops(), sg.Ops()
    W = a.var([1.0, 2.0])
    x = b.var([3.0, 4.0])
    n = len(b.tape)
    with pytest.raises(sg.GraphError, match=r"checkpoint\(<lambda>\): the block reads v0"):
        sg.checkpoint(lambda x: x * W)(x)
    assert len(b.tape) == n


def test_custom_vjp_refuses_a_closure_parameter():
    p = sg.Parameter([1.0, 2.0])
    f = sg.custom_vjp(lambda x: x * p)
    with pytest.raises(sg.GraphError, match="<lambda>.*closure"):
        f(np.array([1.0, 2.0]))

# ---------------------------------------------------------------- 3. Dropout


@pytest.mark.parametrize("create_graph", [True, False], ids=["recorded", "values"])
def test_checkpoint_with_dropout_matches_the_same_mask(create_graph):
    x0 = np.random.default_rng(5).normal(size=(3, 4))
    w0 = np.random.default_rng(6).normal(size=(4,))
    out = []
    for wrap in (lambda f: f, sg.checkpoint):
        drop = nn.Dropout(0.5, rng=np.random.default_rng(7))
        op = sg.Ops()
        x, w = op.var(x0), op.var(w0)
        y = wrap(lambda x, w, drop=drop: (drop(x) * w).tanh())(x, w)
        gx, gw = op.grad((y ** 2).sum(), [x, w], create_graph=create_graph)
        out.append((y.value, gx.value, gw.value, drop.rng.random()))
    for got, want in zip(*out):
        np.testing.assert_array_equal(got, want)     # and the generator advanced once
    m = (np.random.default_rng(7).random((3, 4)) >= 0.5) * 2.0
    t = np.tanh(m * x0 * w0)
    np.testing.assert_allclose(out[1][1], 2 * t * (1 - t * t) * m * w0, **TOL)


def test_checkpoint_with_dropout_order_two():
    x0 = np.random.default_rng(5).normal(size=(5,))
    res = []
    for wrap in (lambda f: f, sg.checkpoint):
        drop = nn.Dropout(0.3, rng=np.random.default_rng(8))
        block = wrap(lambda x, drop=drop: drop(x).sin())
        res.append(sg.hessian(lambda x, block=block: block(x).sum())(x0))
    np.testing.assert_allclose(res[1], res[0], **TOL)
    s = (np.random.default_rng(8).random(5) >= 0.3) / 0.7
    np.testing.assert_allclose(res[1], np.diag(-np.sin(s * x0) * s * s), **TOL)

# ---------------------------------------------------------------- 4. transforms inside


@sg.custom_vjp
def grad_inside(x):
    return sg.grad(lambda y: (x * y ** 2).sum())(np.ones(2))        # 2 x


@grad_inside.defvjp
def _grad_inside_bwd(g, out, x):
    return sg.jvp(lambda z: 2.0 * z, (x,), (g,))[1]                  # 2 g


@sg.custom_vjp
def cubed(x):
    return sg.grad(lambda y: (x * y ** 3).sum())(x)                  # 3 x^3


@cubed.defvjp
def _cubed_bwd(g, out, x):
    return sg.jvp(lambda z: 3.0 * z ** 3, (x,), (g,))[1]             # 9 x^2 g


@sg.custom_vjp
def vjp_sin(x):
    return sg.vmap(lambda r: r.sin())(x)


@vjp_sin.defvjp
def _vjp_sin_bwd(g, out, x):
    return sg.vjp(lambda z: z.sin(), x)[1](g)[0]                     # g cos x


def test_custom_vjp_with_transforms_in_forward_and_backward():
    x = np.array([1.0, -3.0])
    np.testing.assert_allclose(grad_inside(x), 2 * x, **TOL)
    np.testing.assert_allclose(sg.grad(lambda x: grad_inside(x).sum())(x), [2.0, 2.0], **TOL)
    np.testing.assert_allclose(cubed(x), 3 * x ** 3, **TOL)
    np.testing.assert_allclose(sg.grad(lambda x: cubed(x).sum())(x), 9 * x ** 2, **TOL)
    np.testing.assert_allclose(sg.hessian(lambda x: cubed(x).sum())(x), np.diag(18 * x), **TOL)
    np.testing.assert_allclose(sg.jacobian(cubed, mode="fwd")(x), np.diag(9 * x ** 2), **TOL)


def test_custom_vjp_whose_backward_is_a_vjp():
    x = np.array([[0.3, -1.0], [2.0, 0.5]])
    np.testing.assert_allclose(vjp_sin(x), np.sin(x), **TOL)
    for mode in ("rev", "fwd", "auto"):
        J = sg.jacobian(vjp_sin, mode=mode)(x)
        np.testing.assert_allclose(J.reshape(4, 4), np.diag(np.cos(x).ravel()), **TOL)
    H = sg.hessian(lambda x: vjp_sin(x).sum())(x)
    np.testing.assert_allclose(H.reshape(4, 4), np.diag(-np.sin(x).ravel()), **TOL)


def test_checkpoint_with_transforms_inside():
    x = np.array([0.7, -1.3])
    block = sg.checkpoint(lambda x: sg.grad(lambda y: (x * y ** 3).sum())(x))
    np.testing.assert_allclose(block(x), 3 * x ** 3, **TOL)
    np.testing.assert_allclose(sg.grad(lambda x: block(x).sum())(x), 9 * x ** 2, **TOL)
    np.testing.assert_allclose(sg.hessian(lambda x: block(x).sum())(x), np.diag(18 * x), **TOL)
    two = sg.checkpoint(lambda x: sg.grad(lambda y: (x * y ** 2).sum())(np.ones(2)) * x)
    np.testing.assert_allclose(sg.grad(lambda x: two(x).sum())(x), 4 * x, **TOL)
    op = sg.Ops()
    xv = op.var(x)
    (gx,) = [op.grad(block(xv).sum(), xv, create_graph=False)]
    np.testing.assert_allclose(gx.value, 9 * x ** 2, **TOL)

# ---------------------------------------------------------------- 5. forward mode


def _clip(name: str, with_jvp: bool) -> sg.transforms.custom.CustomVJP:
    def clip_gradient(x):
        return x * 1.0

    clip_gradient.__name__ = name
    f = sg.custom_vjp(clip_gradient)
    f.defvjp(lambda g, out, x: g.clip(-0.5, 0.5))
    if with_jvp:
        f.defjvp(lambda primals, tangents: (primals[0] * 1.0, tangents[0].clip(-0.5, 0.5)))
    return f


def test_forward_mode_through_a_nonlinear_rule_raises_naming_it():
    clip = _clip("clip_gradient", False)
    x = np.array([0.3, -0.2])
    F = lambda x: (clip(x) ** 2).sum() / 2      # noqa: E731
    np.testing.assert_allclose(sg.jacobian(sg.grad(F), mode="rev")(x), 0.5 * np.eye(2), **TOL)
    for call in (lambda: sg.jvp(clip, (x,), (np.ones(2),)),
                 lambda: sg.hessian(F)(x),
                 lambda: sg.hvp(F, x, np.ones(2)),
                 lambda: sg.jacobian(clip, mode="fwd")(x),
                 lambda: sg.derivative(lambda z: clip(z))(x)):
        with pytest.raises(sg.NotDifferentiableError, match="clip_gradient: .*not linear"):
            call()
    np.testing.assert_allclose(sg.jacobian(clip, mode="rev")(x), 0.5 * np.eye(2), **TOL)


def test_jacobian_auto_falls_back_to_reverse_mode_for_a_nonlinear_rule(monkeypatch):
    """mode="auto" answers by reverse mode where forward mode cannot go: even when the cost
    model prefers forward mode (forced here), the Jacobian is the rule's 0.5 * cos(x)."""
    import simplegrad.transforms.jacobians as jacobians
    monkeypatch.setattr(jacobians, "prefers_forward", lambda xs, ys: True)
    clip = _clip("clip_gradient", False)
    x = np.array([0.3, -0.2, 1.0])
    got = sg.jacobian(lambda z: clip(z.sin()) * 2.0)(x)
    np.testing.assert_allclose(got, np.diag(0.5 * np.cos(x)), **TOL)


def test_a_jvp_rule_makes_every_mode_agree():
    clip = _clip("clip_gradient", True)
    x, v = np.array([0.3, -0.2]), np.array([1.0, -2.0])
    F = lambda x: (clip(x) ** 2).sum() / 2      # noqa: E731
    grad_of_grad = sg.jacobian(sg.grad(F), mode="rev")(x)
    np.testing.assert_allclose(grad_of_grad, 0.5 * np.eye(2), **TOL)    # closed form
    np.testing.assert_allclose(sg.hessian(F)(x), grad_of_grad, **TOL)
    np.testing.assert_allclose(sg.jacobian(sg.grad(F), mode="fwd")(x), grad_of_grad, **TOL)
    # (the rules clip v as they clip g: both sides see the same [0.5, -0.5])
    np.testing.assert_allclose(sg.hvp(F, x, v), sg.vjp(sg.grad(F), x)[1](v)[0], **TOL)
    np.testing.assert_allclose(sg.hvp(F, x, v / 4), v / 4, **TOL)
    np.testing.assert_allclose(sg.vjp(sg.grad(F), x)[1](v / 4)[0], v / 4, **TOL)
    for mode in ("rev", "fwd", "auto"):
        np.testing.assert_allclose(sg.jacobian(clip, mode=mode)(x), 0.5 * np.eye(2), **TOL)
    y, t = sg.jvp(clip, (x,), (v,))
    np.testing.assert_allclose(t, np.clip(v, -0.5, 0.5), **TOL)
    np.testing.assert_allclose(y, x, **TOL)


def test_a_linear_rule_gives_jvp_equal_to_the_reverse_jacobian(rng):
    x, t = rng.normal(size=(4,)), rng.normal(size=(4,))
    J = sg.jacobian(csin, mode="rev")(x)
    np.testing.assert_allclose(J, np.diag(np.cos(x)), **TOL)
    np.testing.assert_allclose(sg.jvp(csin, (x,), (t,))[1], J @ t, **TOL)
    np.testing.assert_allclose(sg.jvp(csin, (x,), (t,))[1],
                               central(lambda z: np.sin(z), x, t), **FD)
    for mode in ("fwd", "auto"):
        np.testing.assert_allclose(sg.jacobian(csin, mode=mode)(x), J, **TOL)
    H = sg.hessian(lambda x: (csin(x) ** 2).sum())(x)
    np.testing.assert_allclose(H, np.diag(2 * np.cos(2 * x)), **TOL)


def test_a_jvp_rule_of_numpy_arrays_works_at_first_order_only():
    f = sg.custom_vjp(lambda x: x.sin())
    f.defvjp(lambda g, out, x: g * x.cos())
    f.defjvp(lambda primals, tangents: (np.sin(primals[0].value),
                                        np.cos(primals[0].value) * tangents[0].value))
    x = np.array([0.4, 1.0])
    np.testing.assert_allclose(sg.jvp(f, (x,), (np.ones(2),))[1], np.cos(x), **TOL)
    with pytest.raises(sg.NotDifferentiableError, match="<lambda>: its jvp rule returned"):
        sg.jacobian(lambda x: sg.jvp(f, (x,), (np.ones(2),))[1], mode="fwd")(x)


def test_jvp_rule_misuse_raises():
    f = sg.custom_vjp(lambda x: x.sin())
    with pytest.raises(sg.ArgumentError, match="defjvp: expected a function"):
        f.defjvp(3)
    f.defjvp(lambda primals, tangents: tangents[0])
    with pytest.raises(sg.ArgumentError, match="a pair"):
        sg.jvp(f, (np.ones(2),), (np.ones(2),))
    f.defjvp(lambda primals, tangents: (primals[0], tangents[0].sum()))
    with pytest.raises(sg.ShapeError, match="tangent of shape"):
        sg.jvp(f, (np.ones(2),), (np.ones(2),))


@pytest.mark.parametrize("rule, linear", [
    (lambda g: [g * 3.0, None], True),
    (lambda g: [np.cumsum(g[::-1]), g * 0.0], True),
    (lambda g: [np.clip(g, -0.5, 0.5), None], False),
    (lambda g: [np.clip(g, -1e3, 1e3), None], False),
    (lambda g: [g * g, None], False),
    (lambda g: [g + 1.0, None], False),
    (lambda g: [np.abs(g), None], False),
    (lambda g: [g / np.linalg.norm(g), None], False),
    (lambda g: [(g.astype(np.float32) * np.float32(0.1)).astype(g.dtype), None], True),
    (lambda g: [g + 1e-7, None], False),
], ids=["scale", "cumsum", "clip", "wide-clip", "square", "shift", "abs", "normalise",
        "float32-inside", "tiny-shift"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_linearity_test(rule, linear, dtype):
    assert linear_in_cotangent(rule, np.zeros(5, dtype=dtype)) is linear

# ---------------------------------------------------------------- 6. divergence


def test_divergence_at_a_point_that_takes_no_gradient():
    op = sg.Ops()
    x0 = np.array([0.5, -1.0, 2.0])
    x = op.var(x0, requires_grad=False)
    W = op.var([1.0, 2.0, 3.0])
    d = sg.divergence(lambda x: (x ** 3) * W, x)
    np.testing.assert_allclose(d.value, (3 * x0 ** 2 * W.value).sum(), **TOL)
    np.testing.assert_allclose(op.grad(d, W).value, 3 * x0 ** 2, **TOL)
    for method, k in (("hutchinson", 6), ("hutch++", 6)):
        est = sg.divergence(lambda x: x.sin(), x, method=method, samples=k, rng=0)
        assert np.isfinite(est.value)
    p = sg.Parameter(x0)
    np.testing.assert_allclose(sg.divergence(lambda x: x.exp(), p).value, np.exp(x0).sum(),
                               **TOL)

# ---------------------------------------------------------------- under vmap


def test_checkpoint_under_vmap_matches_a_loop():
    X, W = np.arange(6.0).reshape(3, 2) / 5, np.array([1.0, 2.0])
    block = sg.checkpoint(lambda x: (x * W).sin() * 2)
    np.testing.assert_allclose(sg.vmap(block)(X), 2 * np.sin(X * W), **TOL)
    np.testing.assert_allclose(sg.vmap(sg.grad(lambda x: block(x).sum()))(X),
                               2 * np.cos(X * W) * W, **TOL)
    per_w = sg.vmap(sg.grad(lambda w, x: sg.checkpoint(lambda w: (w * x).sin().sum())(w)),
                    in_axes=(None, 0))(W, X)
    np.testing.assert_allclose(per_w, np.cos(W * X) * X, **TOL)
    closure = sg.vmap(sg.grad(lambda x: sg.checkpoint(lambda w: (w * x).sin().sum())(W)))(X)
    np.testing.assert_allclose(closure, np.cos(W * X) * W, **TOL)


def test_custom_vjp_forward_reads_a_constant_through_a_closure():
    op = sg.Ops()
    c = op.var([2.0, -1.0], requires_grad=False)
    W = op.var([1.0, 1.0])
    f = sg.custom_vjp(lambda x: x * c)
    f.defvjp(lambda g, out, x: g * c)
    x = op.var([0.5, 0.25])
    np.testing.assert_allclose(op.grad(f(x).sum(), x).value, [2.0, -1.0], **TOL)
    n = len(op.tape)
    with pytest.raises(sg.GraphError, match=r"<lambda>: .*reads v\d+ \(a Variable of another "
                       r"Ops\) through a closure.*pass every Variable it reads as an argument"):
        sg.custom_vjp(lambda x: x * W)(x)
    assert len(op.tape) == n


def test_forward_mode_through_a_float32_custom_function():
    x = np.array([0.3, -1.2, 2.0], dtype=np.float32)
    t = np.array([1.0, 0.5, -2.0], dtype=np.float32)
    y, ty = sg.jvp(csin, (x,), (t,))
    assert ty.dtype == np.float32
    np.testing.assert_allclose(ty, np.cos(x) * t, rtol=1e-6)


ONES = np.ones(3)
TRANSFORMS = {      # each computes 2 c for the closure c (a Variable), through a transform
    "grad": lambda c: sg.grad(lambda y: (c * y ** 2).sum())(ONES),
    "value_and_grad": lambda c: sg.value_and_grad(lambda y: (c * y ** 2).sum())(ONES)[1],
    "jvp": lambda c: sg.jvp(lambda y: c * y ** 2, (ONES,), (ONES,))[1],
    "vjp": lambda c: sg.vjp(lambda y: c * y ** 2, ONES)[1](ONES)[0],
    "jacobian-rev": lambda c: sg.jacobian(lambda y: c * y ** 2, mode="rev")(ONES).sum(axis=0),
    "jacobian-fwd": lambda c: sg.jacobian(lambda y: c * y ** 2, mode="fwd")(ONES).sum(axis=0),
    "hessian": lambda c: sg.hessian(lambda y: (c * y ** 3).sum() / 3)(ONES).sum(axis=0),
    "hvp": lambda c: sg.hvp(lambda y: (c * y ** 3).sum() / 3, ONES, ONES),
    "derivative": lambda c: sg.derivative(lambda y: c * y ** 2)(ONES),
    "derivative-2": lambda c: sg.derivative(lambda y: c * y ** 3 / 3, 2)(ONES),
    "taylor": lambda c: sg.taylor(lambda y: c * y ** 2, ONES, ONES, 1)[1],
    "vmap": lambda c: sg.vmap(lambda y: c * y * 2.0)(ONES[None])[0],
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_transforms_inside_checkpoint_and_custom_vjp_forwards(name):
    """F(x) = 2 x^2 computed by a transform closing over x * x: value, gradient 4 x, Hessian
    diag(4) (reverse over reverse, forward over reverse) and the jvp, in a checkpoint, in a
    custom_vjp forward, and in a custom_vjp rule."""
    T = TRANSFORMS[name]
    x = np.array([0.5, -1.5, 2.0])
    ck = sg.checkpoint(lambda x: T(x * x))
    cv = sg.custom_vjp(lambda x: T(x * x))
    cv.defvjp(lambda g, out, x: g * 4.0 * x)
    rule = sg.custom_vjp(lambda x: 2.0 * x * x)
    rule.defvjp(lambda g, out, x: T(g * x) * 2.0)       # 4 g x, computed by T
    for F in (ck, cv, rule):
        np.testing.assert_allclose(F(x), 2 * x * x, **TOL)
        np.testing.assert_allclose(sg.grad(lambda x, F=F: F(x).sum())(x), 4 * x, **TOL)
        H = sg.jacobian(sg.grad(lambda x, F=F: F(x).sum()), mode="rev")(x)
        np.testing.assert_allclose(H, 4 * np.eye(3), **TOL)
        np.testing.assert_allclose(sg.hessian(lambda x, F=F: F(x).sum())(x), H, **TOL)
        np.testing.assert_allclose(sg.jvp(F, (x,), (ONES,))[1], 4 * x, **TOL)
