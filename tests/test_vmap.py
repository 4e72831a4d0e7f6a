"""sg.vmap and its composition with the transforms, against per-example loops and closed forms.

Oracles: the same computation run one example at a time (a Python loop, stacked), and for
per-sample gradients and Hessians of tanh programs their hand-derived closed forms. Float64,
rtol = atol = 1e-10 unless a finite difference is involved.
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.engine.batching import Batched
from simplegrad.transforms.jacobians import hessian_batched, jacobian_fwd_batched

TOL = {"rtol": 1e-10, "atol": 1e-10}


def _loop(f, *args, in_axes=0):
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    n = next(np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None)
    return np.stack([f(*[a if ax is None else np.take(a, k, axis=ax)
                         for a, ax in zip(args, axes)]) for k in range(n)])


def test_f_sees_per_example_shapes(rng: np.random.Generator) -> None:
    seen = []

    def f(x):
        seen.append((x.shape, x.ndim, x.size, len(x), type(x)))
        return (x.tanh() * x).sum()
    xs = rng.normal(size=(5, 3))
    np.testing.assert_allclose(sg.vmap(f)(xs), (np.tanh(xs) * xs).sum(axis=1), **TOL)
    assert seen == [((3,), 1, 3, 3, Batched)]


def test_in_axes_out_axes(rng: np.random.Generator) -> None:
    W, xs = rng.normal(size=(2, 3)), rng.normal(size=(3, 4))    # examples along axis 1

    def f(W, x):
        return (W @ x).tanh()
    got = sg.vmap(f, in_axes=(None, 1), out_axes=1)(W, xs)
    np.testing.assert_allclose(got, np.tanh(W @ xs), **TOL)
    got = sg.vmap(lambda x: (x * 2, W.sum()), in_axes=1, out_axes=(0, None))(xs)
    np.testing.assert_allclose(got[0], 2 * xs.T, **TOL)
    np.testing.assert_allclose(got[1], W.sum(), **TOL)
    # an output that does not depend on the batch is expanded along it
    np.testing.assert_allclose(sg.vmap(lambda x: np.ones(2))(xs.T), np.ones((4, 2)), **TOL)


def test_per_sample_gradients_of_an_mlp_loss(rng: np.random.Generator) -> None:
    W1, W2 = rng.normal(size=(4, 3)), rng.normal(size=(2, 4))
    xs, ys = rng.normal(size=(6, 3)), rng.normal(size=(6, 2))

    def loss(W1, x, y):
        return (((W1 @ x).tanh() @ W2.T - y) ** 2).sum()
    got = sg.vmap(sg.grad(loss), in_axes=(None, 0, 0))(W1, xs, ys)
    assert got.shape == (6, 4, 3)
    for k in range(6):     # closed form: d/dW1 = (W2^T 2 r * (1 - h^2)) x^T
        h = np.tanh(W1 @ xs[k])
        r = W2 @ h - ys[k]
        np.testing.assert_allclose(got[k], np.outer((W2.T @ (2 * r)) * (1 - h * h), xs[k]),
                                   **TOL)


def test_value_and_grad_with_several_argnums(rng: np.random.Generator) -> None:
    a, xs = rng.normal(size=3), rng.normal(size=(4, 3))

    def f(a, x):
        return (a * x).sin().sum()
    vals, (ga, gx) = sg.vmap(sg.value_and_grad(f, argnums=(0, 1)), in_axes=(None, 0))(a, xs)
    np.testing.assert_allclose(vals, np.sin(a * xs).sum(axis=1), **TOL)
    np.testing.assert_allclose(ga, np.cos(a * xs) * xs, **TOL)
    np.testing.assert_allclose(gx, np.cos(a * xs) * a, **TOL)


def test_vmap_of_jvp_vjp_hvp_jacobian_hessian_derivative(rng: np.random.Generator) -> None:
    xs, vs = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))

    def f(x):
        return (x.tanh() * x[0]).sum()

    def g(x):
        return x.tanh() * x[0]
    y, t = sg.vmap(lambda x, v: sg.jvp(f, (x,), (v,)))(xs, vs)
    np.testing.assert_allclose(t, _loop(lambda x, v: sg.jvp(f, (x,), (v,))[1], xs, vs), **TOL)
    np.testing.assert_allclose(y, (np.tanh(xs) * xs[:, :1]).sum(axis=1), **TOL)
    ct = sg.vmap(lambda x, u: sg.vjp(g, x)[1](u)[0])(xs, vs)
    np.testing.assert_allclose(ct, _loop(lambda x, u: sg.vjp(g, x)[1](u)[0], xs, vs), **TOL)
    np.testing.assert_allclose(sg.vmap(lambda x, v: sg.hvp(f, x, v))(xs, vs),
                               _loop(lambda x, v: sg.hvp(f, x, v), xs, vs), **TOL)
    np.testing.assert_allclose(sg.vmap(sg.jacobian(g))(xs), _loop(sg.jacobian(g), xs), **TOL)
    np.testing.assert_allclose(sg.vmap(sg.hessian(f))(xs), _loop(sg.hessian(f), xs), **TOL)
    np.testing.assert_allclose(sg.vmap(sg.derivative(lambda x: x.sin(), 3))(xs), -np.cos(xs),
                               **TOL)


def test_nested_vmap(rng: np.random.Generator) -> None:
    A, B = rng.normal(size=(2, 5, 3)), rng.normal(size=(4, 3))

    def dot(a, b):
        return (a * b).sum()
    inner = sg.vmap(dot, in_axes=(0, None))
    got = sg.vmap(sg.vmap(inner, in_axes=(0, None)), in_axes=(None, 0))(A, B)
    assert got.shape == (4, 2, 5)
    np.testing.assert_allclose(got, np.einsum("abi,ci->cab", A, B), **TOL)
    # per-sample gradients of per-sample gradients: nested vmap of grad
    got = sg.vmap(sg.vmap(sg.grad(lambda a: a.tanh().sum())))(A)
    np.testing.assert_allclose(got, 1 - np.tanh(A) ** 2, **TOL)


def test_grad_of_vmap_is_recorded(rng: np.random.Generator) -> None:
    """vmap inside a differentiated function records on the caller's Ops."""
    xs = rng.normal(size=(5, 3))

    def total(xs):
        return sg.vmap(lambda x: (x.sin() * x).sum())(xs).sum()
    np.testing.assert_allclose(sg.grad(total)(xs), np.sin(xs) + xs * np.cos(xs), **TOL)


def test_loop_fallback_primitive_under_vmap(rng: np.random.Generator) -> None:
    xs = rng.normal(size=(4, 5))
    got = sg.vmap(lambda x: x.sort())(xs)      # argsort + take_along_axis (loop fallback)
    np.testing.assert_allclose(got, np.sort(xs, axis=1), **TOL)


def test_batched_jacobian_and_hessian_in_one_sweep(rng: np.random.Generator) -> None:
    W, x0 = rng.normal(size=(6, 5)), rng.normal(size=5)
    op = sg.Ops()
    x = op.var(x0)
    h = op.tanh(op.matmul(W, x))
    J = jacobian_fwd_batched(op, h, x)
    np.testing.assert_allclose(J.value, (1 - np.tanh(W @ x0) ** 2)[:, None] * W, **TOL)
    H = hessian_batched(op, op.sum(h), x)
    t = np.tanh(W @ x0)     # closed form: W^T diag(-2 t (1 - t^2)) W
    np.testing.assert_allclose(H.value, W.T @ np.diag(-2 * t * (1 - t * t)) @ W, **TOL)
    # the result is recorded: its own gradient matches a central difference
    g = op.grad(op.sum(op.mul(H, H)), x)
    eps = 1e-6
    for j in range(5):
        e = np.zeros(5)
        e[j] = eps
        hp, hm = (sg.hessian(lambda v: (W @ v).tanh().sum())(x0 + s * e) for s in (1, -1))
        np.testing.assert_allclose(g.value[j], ((hp ** 2).sum() - (hm ** 2).sum()) / (2 * eps),
                                   rtol=1e-6, atol=1e-6)


def test_errors() -> None:
    with pytest.raises(sg.ArgumentError, match="no argument is batched"):
        sg.vmap(lambda x: x, in_axes=None)(np.ones(3))
    with pytest.raises(sg.ShapeError, match="different sizes"):
        sg.vmap(lambda x, y: x + y)(np.ones(3), np.ones(4))
    with pytest.raises(sg.ArgumentError, match="in_axes"):
        sg.vmap(lambda x: x, in_axes=(0, 0))(np.ones(3))
    with pytest.raises(sg.ArgumentError, match="where"):
        sg.vmap(lambda x: x if x > 0 else -x)(np.ones(3))
    with pytest.raises(sg.ArgumentError, match="out_axes=None"):
        sg.vmap(lambda x: x * 2, out_axes=None)(np.ones(3))
    with pytest.raises(sg.ShapeError, match="per example, not a scalar"):
        sg.vmap(sg.grad(lambda x: x * 2))(np.ones((2, 3)))


def test_batched_hessian_through_a_custom_primitive_and_its_trace_block() -> None:
    """A custom_vjp entry's jvp rule runs once per tangent; the sweep is one jvp block."""
    from tests.test_custom import sigmoid, softplus, softplus_closed
    x0 = np.array([-1.0, 0.5, 2.0])
    op = sg.Ops()
    x = op.var(x0)
    H = hessian_batched(op, (softplus(x) ** 2).sum(), x)
    s, sp = sigmoid(x0), softplus_closed(x0)
    np.testing.assert_allclose(H.value, np.diag(2 * s * s + 2 * sp * s * (1 - s)), rtol=1e-12,
                               atol=1e-15)
    heads = [line for line in op.format_trace().splitlines() if line.startswith("jvp ")]
    assert len(heads) == 1, heads


def test_gather_with_shared_recorded_indices(rng: np.random.Generator) -> None:
    xs, v = rng.normal(size=(4, 5)), rng.normal(size=5)
    op = sg.Ops()
    idx = op.argsort(op.var(v))                  # a recorded index entry shared by examples
    got = sg.vmap(lambda x: op.take_along_axis(x, idx, 0))(op.var(xs))
    np.testing.assert_allclose(got.value, xs[:, np.argsort(v)], **TOL)


def test_jvp_of_vmap(rng: np.random.Generator) -> None:
    xs, vs = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    y, t = sg.jvp(sg.vmap(lambda x: (x.exp() * x).sum()), (xs,), (vs,))
    np.testing.assert_allclose(y, (np.exp(xs) * xs).sum(axis=1), **TOL)
    np.testing.assert_allclose(t, ((np.exp(xs) * (1 + xs)) * vs).sum(axis=1), **TOL)


def test_advanced_indices_that_are_not_adjacent(rng: np.random.Generator) -> None:
    """numpy puts separated advanced-index axes first; the batch axis must stay in front."""
    xs, gs = rng.normal(size=(3, 3, 4, 5)), rng.normal(size=(3, 2, 4))
    rows, cols = np.array([0, 2]), np.array([1, 3])
    got = sg.vmap(lambda x: x[rows, :, cols])(xs)
    np.testing.assert_allclose(got, np.stack([x[rows, :, cols] for x in xs]), **TOL)

    def scatter(g):
        return g.ops.scatter_add([g], [(rows, slice(None), cols)], (3, 4, 5))
    want = np.zeros((3, 3, 4, 5))
    for k in range(3):
        np.add.at(want[k], (rows, slice(None), cols), gs[k])
    np.testing.assert_allclose(sg.vmap(scatter)(gs), want, **TOL)


def test_custom_primitive_loops_over_the_batch(rng: np.random.Generator) -> None:
    from tests.test_custom import sigmoid, softplus, softplus_closed
    xs = rng.normal(size=(4, 3))
    np.testing.assert_allclose(sg.vmap(lambda x: softplus(x).sum())(xs),
                               softplus_closed(xs).sum(axis=1), **TOL)
    np.testing.assert_allclose(sg.vmap(sg.grad(lambda x: softplus(x).sum()))(xs), sigmoid(xs),
                               **TOL)


def test_numpy_code_and_a_simplifying_ops(rng: np.random.Generator) -> None:
    xs = rng.normal(size=(4, 2, 3))

    def f(x):       # numpy functions, iteration over rows, per-example reshapes and indexing
        a = np.tanh(x).T @ x
        b = np.stack([r.sum() for r in x])
        c = np.concatenate([x.reshape(-1), x[0]])
        return a.sum() + b.sum() + np.sum(c) + x.mean(axis=0).max() + np.linalg.norm(x)
    want = np.array([(np.tanh(x).T @ x).sum() + 2 * x.sum() + x[0].sum() + x.mean(0).max() +
                     np.linalg.norm(x) for x in xs])
    np.testing.assert_allclose(sg.vmap(f)(xs), want, **TOL)
    op = sg.Ops(simplify=True)
    xv = op.var(xs)
    y = sg.vmap(f)(xv)
    np.testing.assert_allclose(y.value, want, **TOL)
    np.testing.assert_allclose(op.grad(y.sum(), xv).value, sg.grad(lambda z: sg.vmap(f)(z).sum())(
        xs), **TOL)


def test_grad_inside_another_transform_inside_vmap(rng: np.random.Generator) -> None:
    """The grad of a vmap on its own Ops runs on values only when nothing differentiates it
    again; here jvp (and grad) differentiate it, so it must record."""
    xs, vs = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))

    def f(x):
        return (x.sin() * x).sum()
    hv = sg.vmap(lambda x, v: sg.jvp(sg.grad(f), (x,), (v,))[1])(xs, vs)
    np.testing.assert_allclose(hv, _loop(lambda x, v: sg.hvp(f, x, v), xs, vs), **TOL)
    gg = sg.vmap(sg.grad(lambda x: (sg.grad(f)(x) ** 2).sum()))(xs)
    np.testing.assert_allclose(gg, _loop(sg.grad(lambda x: (sg.grad(f)(x) ** 2).sum()), xs),
                               **TOL)


def test_pytrees(rng: np.random.Generator) -> None:
    params = {"W": rng.normal(size=(2, 3)), "b": rng.normal(size=2)}
    batch = {"x": rng.normal(size=(5, 3)), "y": rng.normal(size=(5, 2))}

    def loss(p, ex):
        return (((p["W"] @ ex["x"] + p["b"]).tanh() - ex["y"]) ** 2).sum()
    g = sg.vmap(sg.grad(loss), in_axes=(None, 0))(params, batch)
    assert sorted(g) == ["W", "b"] and g["W"].shape == (5, 2, 3) and g["b"].shape == (5, 2)
    for k in range(5):
        want = sg.grad(loss)(params, {"x": batch["x"][k], "y": batch["y"][k]})
        np.testing.assert_allclose(g["W"][k], want["W"], **TOL)
        np.testing.assert_allclose(g["b"][k], want["b"], **TOL)
    out = sg.vmap(lambda ex: {"s": ex["x"].sum(), "pair": (ex["y"] * 2, ex["x"][0])})(batch)
    np.testing.assert_allclose(out["s"], batch["x"].sum(axis=1), **TOL)
    np.testing.assert_allclose(out["pair"][0], 2 * batch["y"], **TOL)
    np.testing.assert_allclose(out["pair"][1], batch["x"][:, 0], **TOL)
    v = sg.tree_map(np.ones_like, params)
    hv = sg.vmap(lambda ex: sg.hvp(lambda p: loss(p, ex), params, v))(batch)
    want = sg.hvp(lambda p: loss(p, {"x": batch["x"][3], "y": batch["y"][3]}), params, v)
    np.testing.assert_allclose(hv["W"][3], want["W"], **TOL)


def test_transform_of_a_closure_over_the_example(rng: np.random.Generator) -> None:
    """Inside vmap every transform is per example, also when the batched value reaches f only
    through a closure (JAX's usual form of per-sample gradients)."""
    W, xs = rng.normal(size=(2, 3)), rng.normal(size=(4, 3))

    def loss(W, x):
        return (W @ x).tanh().sum()
    got = sg.vmap(lambda x: sg.grad(lambda W: loss(W, x))(W))(xs)
    np.testing.assert_allclose(got, _loop(lambda x: sg.grad(loss)(W, x), xs), **TOL)
    # nested: the inner vmap's closure sees the outer example
    A = rng.normal(size=(2, 4, 3))
    got = sg.vmap(lambda a: sg.vmap(lambda x: sg.grad(lambda W: loss(W, x * a[0]))(W))(a))(A)
    want = np.stack([[sg.grad(loss)(W, x * a[0]) for x in a] for a in A])
    np.testing.assert_allclose(got, want, **TOL)


def test_parameters_join_vmaps_ops(rng: np.random.Generator) -> None:
    w, xs = sg.Parameter(rng.normal(size=3), name="w"), rng.normal(size=(4, 3))
    np.testing.assert_allclose(sg.vmap(lambda x, w: (w * x).sum(), in_axes=(0, None))(xs, w),
                               xs @ w.value, **TOL)
    np.testing.assert_allclose(
        sg.vmap(sg.grad(lambda w, x: (w * x).sin().sum()), in_axes=(None, 0))(w, xs),
        np.cos(w.value * xs) * xs, **TOL)
    np.testing.assert_allclose(sg.vmap(lambda v: (v * v).sum())(sg.Parameter(xs)),
                               (xs ** 2).sum(axis=1), **TOL)


def test_per_sample_gradients_through_an_nn_module():
    from simplegrad import nn
    rng = np.random.default_rng(3)
    model = nn.MLP([3, 5, 2], activation="tanh", rng=rng)
    params = model.params()
    X, Y = rng.standard_normal((6, 3)), rng.standard_normal((6, 2))

    def loss(p, x, y):
        return ((model.apply(p, x) - y) ** 2).sum()

    per_sample = sg.vmap(sg.grad(loss), in_axes=(None, 0, 0))(params, X, Y)
    for i in range(6):
        one = sg.grad(loss)(params, X[i], Y[i])
        for k in params:
            np.testing.assert_allclose(per_sample[k][i], one[k], rtol=1e-12, atol=1e-14)
