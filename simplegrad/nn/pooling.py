"""``max_pool2d`` and ``avg_pool2d`` with ``torch.nn.functional``'s signatures, on (N, C, H, W)
or (C, H, W) inputs: the average a depthwise ``conv`` with a constant kernel, the maximum the
largest of the kernel's strided slices (each window's entries, side by side)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ArgumentError, ShapeError
from ..primitives.conv import _conv
from .layers import _pair
from .module import ops_of, shape_of


def _window(op: str, x: Any, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
            ceil_mode: bool) -> tuple:
    shape = shape_of(x)
    if len(shape) not in (3, 4):
        raise ShapeError(f"{op}: expected (N, C, H, W) or (C, H, W), got {shape}")
    if ceil_mode:
        raise ArgumentError(f"{op}: ceil_mode=True is not supported")
    k = _pair(f"{op}: kernel_size", kernel_size)
    s = k if stride is None or stride == [] else _pair(f"{op}: stride", stride)
    p, d = _pair(f"{op}: padding", padding), _pair(f"{op}: dilation", dilation)
    if any(2 * pi > ki for pi, ki in zip(p, k)):
        raise ArgumentError(f"{op}: padding {p} should be at most half the kernel {k}")
    hw = shape[-2:]
    out = tuple((n + 2 * pi - di * (ki - 1) - 1) // si + 1
                for n, pi, di, ki, si in zip(hw, p, d, k, s))
    if min(out) <= 0:
        raise ShapeError(f"{op}: the kernel {k} does not fit the padded input {hw}")
    return shape, k, s, p, d, out


def max_pool2d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """The largest entry of each window (``torch.nn.functional.max_pool2d``; padding counts
    as -inf)."""
    if return_indices:
        raise ArgumentError("max_pool2d: return_indices=True is not supported")
    shape, k, s, p, d, out = _window("max_pool2d", input, kernel_size, stride, padding,
                                     dilation, ceil_mode)
    o = ops_of(input)
    x = input
    for axis, pi in ((-2, p[0]), (-1, p[1])):
        if pi:
            edge = list(shape_of(x))
            edge[axis] = pi
            neg = np.full(edge, -np.inf)
            x = o.concatenate([neg, x, neg], axis=len(edge) + axis)
    lead = (slice(None),) * (len(shape) - 2)
    parts = [o.getitem(x, lead + (slice(i * d[0], i * d[0] + (out[0] - 1) * s[0] + 1, s[0]),
                                  slice(j * d[1], j * d[1] + (out[1] - 1) * s[1] + 1, s[1])))
             for i in range(k[0]) for j in range(k[1])]
    return parts[0] if len(parts) == 1 else o.max(o.stack(parts, axis=0), axis=0)


def avg_pool2d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Any:
    """The mean of each window (``torch.nn.functional.avg_pool2d``)."""
    shape, k, s, p, _, out = _window("avg_pool2d", input, kernel_size, stride, padding, 1,
                                     ceil_mode)
    o = ops_of(input)
    c = shape[-3]
    x = input if len(shape) == 4 else o.reshape(input, (1,) + shape)
    y = o.conv(x, np.ones((c, 1) + k), s, p, 1, c)
    if divisor_override is not None:
        y = o.mul(y, 1.0 / divisor_override)
    elif count_include_pad or p == (0, 0):
        y = o.mul(y, 1.0 / (k[0] * k[1]))
    else:       # the entries of each window inside the input
        counts = _conv(np.ones((1, 1) + shape[-2:]), np.ones((1, 1) + k), s,
                       ((p[0], p[0]), (p[1], p[1])), (1, 1), (1, 1), 1)
        y = o.mul(y, 1.0 / counts[0, 0])
    return y if len(shape) == 4 else o.reshape(y, shape_of(y)[1:])
