"""Jacobian accumulation counts on small graphs counted by hand, and the Jacobian they leave.

Costs: eliminating vertex v costs |pred(v)| * |succ(v)| multiplications. Each hand count below
lists the vertices (one per scalar) and the order of elimination. The Jacobian left on the
edges after elimination, in every order, must equal float64 central differences (eps 1e-6,
rtol 1e-7, atol 1e-9).
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.engine.explain import blocks
from simplegrad.program.accumulation import eliminate, jacobian_from, linearise

W = np.array([1.0, -2.0, 0.5])


def product_chain(x1, x2, x3):
    """t = x1 x2, u = t x3, y = sin(u): intermediates t (2 preds, 1 succ) and u (2, 1).

    forward: t 2*1, then u has preds x1 x2 x3: 3*1 -> 5
    reverse: u 2*1, then t has succ y: 2*1 -> 4
    markowitz: t and u both 2: the earlier, t, first -> as forward, 5
    """
    return ((x1 * x2) * x3).sin()


def two_parts(x, s):
    """y = exp(sin(sum(x))) for x in R^3 and z = cos(sin(s)) * W (three outputs).

    t = sum(x) (3 preds, 1 succ), u = sin t (1, 1); p = sin s (1, 1), q = cos p (1, 3)
    forward: t 3, u 3*1, p 1, q 1*3 -> 10
    reverse: q 1*3, p 1*3, u 1, t 3*1 -> 10
    markowitz: u 1, t 3; p 1, q 3 (smallest first, ties by tape order: u p t q) -> 8
    """
    return x.sum().sin().exp(), s.sin().cos() * W


def fan_out(x):
    """R^4 -> R^3: y = exp(cos(sin(x[0]))) * W + x[1:].

    g = x[0], s, c, e a chain from x0 (e has 3 succs t_k = e w_k), h_k = x[k+1], y_k = t_k + h_k
    forward: g 1, s 1, c 1, e 1*3, t_k 1 each, h_k 1 each -> 12
    reverse: h_k 1 each, t_k 1 each, e 1*3, c 1*3, s 1*3, g 1*3 -> 18
    markowitz: g s c 1 each, t_k h_k 1 each, e 1*3 -> 12
    """
    return x[0].sin().cos().exp() * W + x[1:]


CASES = [
    pytest.param(product_chain, (0.5, 0.7, 0.9), (5, 4, 5, 3, 1, 2, 5), id="product-chain"),
    pytest.param(two_parts, (np.array([0.1, 0.2, 0.3]), np.array(0.7)), (10, 10, 8, 4, 4, 4, 10),
                 id="two-parts"),
    pytest.param(fan_out, (np.array([0.3, -0.2, 0.9, 0.4]),), (12, 18, 12, 4, 3, 10, 16),
                 id="fan-out"),
]


@pytest.mark.parametrize(("f", "args", "counts"), CASES)
def test_counts_by_hand(f, args, counts):
    assert tuple(sg.jacobian_cost(f, *args)) == counts


def _values(f, args) -> np.ndarray:
    """Every output of f at args, flattened into one vector."""
    op = sg.Ops()
    y = f(*[op.var(a) for a in args])
    return np.concatenate([np.ravel(v.value) for v in (y if isinstance(y, tuple) else (y,))])


def _dense_jacobian(f, args, eps=1e-6) -> np.ndarray:
    """The (m, n) Jacobian by float64 central differences, input scalar by input scalar."""
    flat = [np.array(a, dtype=float) for a in args]
    cols = []
    for i, a in enumerate(flat):
        for k in range(a.size):
            up, down = [b.copy() for b in flat], [b.copy() for b in flat]
            up[i].flat[k] += eps
            down[i].flat[k] -= eps
            cols.append((_values(f, up) - _values(f, down)) / (2 * eps))
    return np.stack(cols, axis=1)


@pytest.mark.parametrize(("f", "args", "counts"), CASES)
def test_elimination_leaves_the_jacobian(f, args, counts):
    op = sg.Ops()
    xs = [op.var(a) for a in args]
    y = f(*xs)
    prog = op.program(xs, list(y) if isinstance(y, tuple) else [y])
    g = linearise(prog, *[x.value for x in xs])
    middle = sorted(set(g.pred) - set(g.inputs) - set(g.outputs))
    want = _dense_jacobian(f, args)
    for order in (middle, middle[::-1], None):
        _, left = eliminate(g, order)
        np.testing.assert_allclose(jacobian_from(g, left), want, rtol=1e-7, atol=1e-9)


def test_auto_mode_takes_the_sweep_of_fewer_seeds():
    """fan_out has 4 inputs and 3 outputs, too small for its sweeps' work to tell them apart:
    auto takes the one batched sweep of fewer seeds, reverse mode's 3 rows (grad blocks), with
    forward mode's values."""
    op = sg.Ops()
    x = op.var([0.3, -0.2, 0.9, 0.4])
    J = sg.jacobian(fan_out)(x)
    assert {b.kind for b in blocks(op.tape)} == {"grad"}
    np.testing.assert_allclose(J.value, sg.jacobian(fan_out, mode="fwd")(x.value), rtol=1e-14)


def test_outputs_that_are_read_again_or_are_inputs():
    # y = x * x is an output and is read by z: it gets a sink behind an edge of 1
    def f(x):
        y = x * 3.0
        return y, y.sin(), x
    cost = sg.jacobian_cost(f, np.array(0.5))
    assert (cost.inputs, cost.outputs) == (1, 3)
    # vertices: x, y, z = sin y, sinks y', x'; y is the one intermediate: 1 pred, 2 succs
    assert (cost.forward, cost.reverse, cost.markowitz, cost.intermediates) == (2, 2, 2, 1)


def test_errors():
    with pytest.raises(sg.ArgumentError, match="must be callable"):
        sg.jacobian_cost(3, 1.0)
    with pytest.raises(sg.ArgumentError, match="must return a Variable"):
        sg.jacobian_cost(lambda x: 2.0, 1.0)


def _registry_params() -> list:
    from tests.test_primitives import case_id
    return [pytest.param(prim, case, id=f"{prim.name}-{case_id(case)}")
            for prim in sg.REGISTRY.values() if prim.differentiable for case in prim.cases]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize(("prim", "case"), _registry_params())
def test_every_primitive_linearises_to_its_jacobian(prim, case, rng):
    """The jvp-built linearised graph, eliminated in every order, leaves the Jacobian that the
    reverse sweep (vjp rules) builds, for every registered primitive and case."""
    from tests.test_primitives import applying, real_view, sample

    f, args = real_view(applying(prim, case), sample(prim, case, rng))
    op = sg.Ops()
    xs = [op.var(a) for a in args]
    prog = op.program(xs, f(*xs))
    g = linearise(prog, *args)
    nums = tuple(range(len(args)))
    parts = sg.jacobian(f, argnums=nums, mode="rev")(*args)
    m = int(np.prod(prog.nodes[-1].shape, dtype=int))
    want = np.hstack([np.reshape(p, (m, -1)) for p in parts])
    middle = sorted(set(g.pred) - set(g.inputs) - set(g.outputs))
    for order in (middle, middle[::-1], None):
        _, left = eliminate(g, order)
        np.testing.assert_allclose(jacobian_from(g, left), want, rtol=1e-10, atol=1e-12)
