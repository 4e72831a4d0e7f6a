"""Property tests: gradients through broadcasting binary ops have their input's shape and value.

For L = sum(f(x, y) * w) with f elementwise and broadcasting, the gradient with respect to x is
the broadcast partial derivative times w, summed back over the broadcast axes; these closed
forms are computed here with plain numpy and compared with simplegrad's recorded gradients.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import simplegrad as sg

shapes = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3)


def _sum_to(a: np.ndarray, shape: tuple) -> np.ndarray:
    """Closed-form unbroadcast: sum the leading and stretched axes of ``a`` down to ``shape``."""
    lead = a.ndim - len(shape)
    a = a.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and a.shape[i] != 1)
    return a.sum(axis=axes, keepdims=True).reshape(shape)


PARTIALS = {
    "add": (lambda x, y: np.ones(np.broadcast_shapes(x.shape, y.shape)),
            lambda x, y: np.ones(np.broadcast_shapes(x.shape, y.shape))),
    "sub": (lambda x, y: np.ones(np.broadcast_shapes(x.shape, y.shape)),
            lambda x, y: -np.ones(np.broadcast_shapes(x.shape, y.shape))),
    "mul": (lambda x, y: y + 0 * x, lambda x, y: x + 0 * y),
    "div": (lambda x, y: 1 / y + 0 * x, lambda x, y: -x / y**2),
    "maximum": (lambda x, y: (x > y) + 0.0 * y, lambda x, y: (y > x) + 0.0 * x),
}


@settings(max_examples=40, deadline=None)
@given(shapes=shapes, name=st.sampled_from(sorted(PARTIALS)), seed=st.integers(0, 2**16))
def test_binary_gradients_undo_broadcasting(shapes, name, seed):
    rng = np.random.default_rng(seed)
    sx, sy = shapes.input_shapes
    x = rng.uniform(0.5, 2.0, sx) * rng.choice([-1.0, 1.0], sx)
    y = rng.uniform(0.5, 2.0, sy) * rng.choice([-1.0, 1.0], sy)
    w = rng.normal(size=shapes.result_shape)
    op = sg.Ops()
    vx, vy = op.var(x), op.var(y)
    L = (getattr(op, name)(vx, vy) * w).sum()
    gx, gy = op.grad(L, [vx, vy])
    dx, dy = PARTIALS[name]
    assert gx.shape == sx and gy.shape == sy
    np.testing.assert_allclose(gx.value, _sum_to(dx(x, y) * w, sx), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gy.value, _sum_to(dy(x, y) * w, sy), rtol=1e-12, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(shapes=shapes, seed=st.integers(0, 2**16))
def test_second_order_through_broadcast_mul(shapes, seed):
    # L = sum(x * y * w); dL/dx = sum_to(y * w); M = sum(dL/dx * c) is linear in y, so
    # dM/dy = sum_to(broadcast(c) * w) over the axes y was stretched along
    rng = np.random.default_rng(seed)
    sx, sy = shapes.input_shapes
    x, y = rng.normal(size=sx), rng.normal(size=sy)
    w = rng.normal(size=shapes.result_shape)
    c = rng.normal(size=sx)
    op = sg.Ops()
    vx, vy = op.var(x), op.var(y)
    gx = op.grad((vx * vy * w).sum(), vx)
    gy = op.grad((gx * c).sum(), vy)
    full = np.broadcast_to(np.reshape(c, (1,) * (len(shapes.result_shape) - len(sx)) + sx),
                           shapes.result_shape)
    np.testing.assert_allclose(gy.value, _sum_to(full * w, sy), rtol=1e-12, atol=1e-12)
