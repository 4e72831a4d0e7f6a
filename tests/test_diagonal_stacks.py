"""Diagonal stacks (engine/batched.py): the identity basis that seeds a Jacobian's value-only
sweep, and what rules linear in it make of it, kept as its K diagonal entries. Every registered
primitive and case on a diagonal stack gives what it gives on the dense K x K stack, bit for
bit (the dense stack's own zeros off the diagonal stay zeros, where a dense 0 * inf or 0 / 0
makes nans); whole Jacobians, of every registered primitive and of a composite, in both modes,
equal the dense sweep's exactly; the K x K stack is never built on the way through a matrix
product."""

from __future__ import annotations

import numpy as np
import pytest
from test_primitives import case_id, sample

import simplegrad as sg
from simplegrad.engine import batched
from simplegrad.engine.batched import STACKS, Stack
from simplegrad.primitives import REGISTRY


def _positions() -> list:
    """(primitive, case, input position) for every 1-D input a diagonal stack can stand for."""
    out = []
    for prim in REGISTRY.values():
        for case in prim.cases:
            for i, shape in enumerate(case.shapes):
                if len(shape) == 1 and shape[0] > 1 and i not in case.conditions:
                    out.append(pytest.param(prim, case, i,
                                            id=f"{prim.name}-{case_id(case)}-at{i}"))
    return out


def _inputs(prim, case, rng) -> list:
    xs = sample(prim, case, rng)
    return [x > 0 if j in case.conditions else x for j, x in enumerate(xs)]


def _dense(d: np.ndarray) -> Stack:
    return Stack(np.diag(d))


def _built(s: Stack) -> bool:
    """Whether the K x K stack of a diagonal one has been built (``inner`` read)."""
    return s.dense is not None


def _same(got, want) -> None:
    assert type(got) is type(want)
    if type(got) is Stack:
        got, want = got.inner, want.inner
    assert np.shape(got) == np.shape(want) and np.result_type(got) == np.result_type(want)
    np.testing.assert_array_equal(got, want)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize(("prim", "case", "i"), _positions())
def test_every_rule_on_a_diagonal_stack_equals_the_dense_stack(prim, case, i, rng):
    xs = _inputs(prim, case, rng)
    d = np.asarray(xs[i])
    try:
        want = STACKS.apply(prim, [*xs[:i], _dense(d), *xs[i + 1:]], case.attrs)
    except Exception as e:       # the rule refuses the stack: so must the diagonal one
        with pytest.raises(type(e)):
            STACKS.apply(prim, [*xs[:i], Stack.diagonal(d.copy()), *xs[i + 1:]], case.attrs)
        return
    _same(STACKS.apply(prim, [*xs[:i], Stack.diagonal(d.copy()), *xs[i + 1:]], case.attrs),
          want)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum"])
def test_two_diagonal_stacks_equal_the_dense_stacks(name, rng):
    a, b = rng.normal(size=5) + 3.0, rng.normal(size=5) + 3.0
    got = STACKS.apply(REGISTRY[name], [Stack.diagonal(a), Stack.diagonal(b)])
    _same(got, STACKS.apply(REGISTRY[name], [_dense(a), _dense(b)]))
    if name in ("add", "sub", "mul"):       # linear in both (or in each): still diagonal
        assert got.diag is not None


def test_linear_rules_keep_the_diagonal_and_matrix_products_never_build_it(rng):
    eye = Stack.identity(4, np.dtype(np.float64))
    c, W = rng.normal(size=4), rng.normal(size=(3, 4))
    s = STACKS.mul(STACKS.neg(STACKS.mul(eye, 2.0)), c)    # -(2 I) * c
    assert s.diag is not None and not _built(s)
    np.testing.assert_array_equal(s.diag, -(np.ones(4) * 2.0) * c)
    rows = STACKS.matmul(s, W.T)            # (d_k e_k) @ W^T is d_k W[:, k]
    cols = STACKS.matmul(W, s)              # W @ (d_k e_k) is d_k W[:, k] too
    np.testing.assert_array_equal(rows.inner, s.diag[:, None] * W.T)
    np.testing.assert_array_equal(cols.inner, s.diag[:, None] * W.T)
    assert rows.fresh and cols.fresh and not _built(s)
    assert STACKS.reshape(s, (4,)) is s
    assert STACKS.tanh(s).diag is None      # not linear: the dense stack
    np.testing.assert_array_equal(STACKS.tanh(s).inner, np.tanh(np.diag(s.diag)))


def test_structural_zeros_stay_zeros_where_the_dense_product_makes_nans():
    W = np.array([[1.0, np.inf], [2.0, 3.0], [-1.0, 0.5]])
    want = np.array([[2.0, np.inf], [4.0, 6.0], [-2.0, 1.0]])
    with np.errstate(invalid="raise"):      # (no 0 * inf computed anywhere)
        np.testing.assert_array_equal(
            sg.jacobian(lambda x: W @ (x * 2.0), mode="fwd")(np.ones(2)), want)
        np.testing.assert_array_equal(
            sg.jacobian(lambda x: (W @ x) * 2.0, mode="rev")(np.ones(2)), want)
    c = np.array([0.0, 2.0, 4.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        jac = sg.jacobian(lambda x: x / c, mode="rev")(np.ones(3))
    np.testing.assert_array_equal(jac, np.diag([np.inf, 0.5, 0.25]))


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_jacobians_equal_the_dense_sweep_exactly(mode, rng, monkeypatch):
    W, V, x = rng.normal(size=(40, 30)), rng.normal(size=(30, 40)), rng.normal(size=30)

    def f(x):
        u = (W @ x).tanh() * 2.0 + W @ x.sin()
        return V @ (u * u.cos()) - x * 3.0 + x.sum()
    got = sg.jacobian(f, mode=mode)(x)
    monkeypatch.setattr(batched, "_on_diagonal", lambda prim, inputs, attrs: None)
    want = sg.jacobian(f, mode=mode)(x)
    if mode == "rev":
        np.testing.assert_array_equal(got, want)
    else:   # (the tangents' stacks reach V @ in another memory layout than the dense sweep's,
        # and OpenBLAS may sum them in another order: seen on AMD EPYC, 3e-13 relative)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    t = np.tanh(W @ x)
    u = np.tanh(W @ x) * 2.0 + W @ np.sin(x)
    du = (2 * (1 - t * t))[:, None] * W + W * np.cos(x)
    closed = V @ ((np.cos(u) - u * np.sin(u))[:, None] * du) - 3.0 * np.eye(30) + 1.0
    np.testing.assert_allclose(got, closed, rtol=1e-11, atol=1e-11)


def _registry_cases() -> list:
    """Each differentiable primitive's first case, and every case with a 1-D input."""
    return [pytest.param(prim, case, id=f"{prim.name}-{case_id(case)}")
            for prim in REGISTRY.values() if prim.differentiable for case in prim.cases
            if case is prim.cases[0] or any(len(s) == 1 for s in case.shapes)]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.filterwarnings("ignore::simplegrad.DisconnectedWarning")
@pytest.mark.parametrize(("prim", "case"), _registry_cases())
def test_every_registered_jacobian_equals_the_dense_sweeps_exactly(prim, case, rng,
                                                                   monkeypatch):
    # a complex input enters as its real and imaginary parts, a complex output leaves as its
    # two parts: Jacobians of real functions, which either mode takes
    args, split = [], []
    for i, x in enumerate(sample(prim, case, rng)):
        split.append(i not in case.conditions and np.iscomplexobj(x))
        args += [np.real(x).copy(), np.imag(x).copy()] if split[-1] else [x]
    conditions = {i + sum(split[:i]) for i in case.conditions}
    nums = tuple(i for i in range(len(args)) if i not in conditions)
    if not nums:
        pytest.skip("no differentiable input")

    def f(*parts):
        op = next(x.ops for x in parts if isinstance(x, sg.Variable))
        ins, k = [], 0
        for c in split:
            ins.append(op.add(parts[k], op.mul(parts[k + 1], 1j)) if c else parts[k])
            k += 2 if c else 1
        ins = [op.greater(x, 0) if i in case.conditions else x for i, x in enumerate(ins)]
        y = op.apply(prim, ins, case.attrs)
        return (op.real(y), op.imag(y)) if y.dtype.kind == "c" else y
    modes = ("rev", "fwd")
    got = [sg.tree_leaves(sg.jacobian(f, argnums=nums, mode=m)(*args)) for m in modes]
    monkeypatch.setattr(batched, "_on_diagonal", lambda prim, inputs, attrs: None)
    for mode, leaves in zip(modes, got):
        for a, b in zip(leaves, sg.tree_leaves(sg.jacobian(f, argnums=nums, mode=mode)(*args))):
            np.testing.assert_array_equal(a, b)
