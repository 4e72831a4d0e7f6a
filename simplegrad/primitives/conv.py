"""Convolutions: ``conv``, the cross-correlation of ``torch.nn.functional.conv1d/2d/3d``
(x: N, C, spatial...; w: O, C / groups, kernel...), generalised as JAX's conv_general_dilated
is so that its own transposes are convolutions too.

Attributes: ``stride``, ``dilation`` (of the kernel) and ``lhs_dilation`` (of the input: zeros
between its entries), one int per spatial axis; ``padding`` one (low, high) pair per spatial
axis (negative: cropped); ``groups``. The output at p along an axis reads the padded,
dilated input at p * stride + k * dilation for kernel index k.

Its rules: linear in each input, so the jvp is two convolutions and the Taylor rule the Cauchy
product; the vjp in x is the convolution of the cotangent with the flipped kernel, the
cotangent dilated by the stride and the result read every ``lhs_dilation`` entries; the vjp in
w the convolution of the input with the cotangent as kernel (N as the channels, stride and
dilation exchanged), each group one group of it; under vmap the examples join N, the groups,
or both (so per-example kernel gradients are one grouped convolution).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, DTypeError, ShapeError
from .core import EACH_ALONE, Case, Primitive, dtype_of, register, shape_of
from .schema import ShapeRuleError, attrs, integer, is_held_int, need
from .taylor import multilinear

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

# ---------------------------------------------------------------- forward


def _out_size(s: int, k: int, stride: int, pad: tuple, dil: int, ldil: int) -> int:
    """Output length along one axis (<= 0: the kernel does not fit)."""
    z = (s - 1) * ldil + 1 + pad[0] + pad[1] if s else pad[0] + pad[1]
    return (z - (k - 1) * dil - 1) // stride + 1


def _conv(x, w, stride, padding, dilation, lhs_dilation, groups):
    # (numpy's functions only, dispatched: a dask array stays lazy)
    dtype = np.result_type(x.dtype, w.dtype)
    d = x.ndim - 2
    sp = tuple(range(2, 2 + d))
    for a, lv in zip(sp, lhs_dilation):     # lv - 1 zeros between the input's entries
        if lv != 1 and x.shape[a]:
            n = x.shape[a]
            z = np.pad(np.expand_dims(x, a + 1), [(0, 0)] * (a + 1) + [(0, lv - 1)] +
                       [(0, 0)] * (x.ndim - a - 1))
            z = z.reshape(x.shape[:a] + (n * lv,) + x.shape[a + 1:])
            x = z[(slice(None),) * a + (slice(0, (n - 1) * lv + 1),)]
    crop = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi), n in zip(padding, x.shape[2:]))
    x = x[(slice(None), slice(None)) + crop]
    pads = [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
    if any(p != (0, 0) for p in pads):
        if type(x) is np.ndarray:       # (np.pad's general machinery costs more than the copy)
            z = np.zeros(tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pads)), x.dtype)
            z[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, pads))] = x
            x = z
        else:
            x = np.pad(x, pads)
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    ks = w.shape[2:]
    eff = tuple((k - 1) * dl + 1 for k, dl in zip(ks, dilation))
    win = np.lib.stride_tricks.sliding_window_view(x, eff, axis=sp)
    win = win[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride) +
              tuple(slice(None, None, dl) for dl in dilation)]
    outs = win.shape[2:2 + d]
    g, og, p, kk = groups, o // groups, math.prod(outs), math.prod(ks)
    win = win.reshape((n, g, cg) + outs + ks)
    mats = w.reshape(g, og, cg * kk)
    mats = mats if mats.dtype == dtype else mats.astype(dtype)
    # one matrix product per group, the windows copied into a matrix; a large one with its
    # rows along the last output axis where that is longer than the last kernel axis (the
    # copy's inner loop: 3x faster for a 3x3 kernel)
    wide = outs[-1] > ks[-1] and g * n * p * cg * kk >= _WIDE
    if type(win) is not np.ndarray or type(mats) is not np.ndarray:   # (dask: all, lazily)
        y = _products(win, mats, wide, dtype)
        return y.reshape((n, o) + outs)
    # numpy: the windows of a few groups (or examples) at a time, so that each copy stays
    # in cache and no large buffer is faulted in afresh on every call; each entry is the
    # same dot product as in one call (the same values, measured, unless a chunk has only a
    # few rows: BLAS's path for small matrices may round the last bit differently)
    y = np.empty((n, g, og) + outs, dtype)
    per = p * cg * kk               # one example's windows in one group
    gc = max(1, min(g, _CHUNK // max(n * per, 1)))
    nc = n if gc > 1 else max(1, min(n, _CHUNK // max(per, 1)))
    for g0 in range(0, g, gc):
        for n0 in range(0, n, nc):
            y[n0:n0 + nc, g0:g0 + gc] = _products(win[n0:n0 + nc, g0:g0 + gc],
                                                  mats[g0:g0 + gc], wide, dtype)
    return y.reshape((n, o) + outs)


_CHUNK = 1 << 20        # entries of the windows copied at once (8 MB of float64)
_WIDE = 1 << 16         # entries of the windows from which a copy along the output pays


def _products(win, mats, wide: bool, dtype):
    """The convolution of windows (N, G, Cg, *O, *K) with kernels (G, O / G, Cg * K) as one
    matrix product per group, shape (N, G, O / G, *O)."""
    n, g, cg = win.shape[:3]
    d = (win.ndim - 3) // 2
    outs, ks = win.shape[3:3 + d], win.shape[3 + d:]
    p, kk = math.prod(outs), math.prod(ks)
    o_axes, k_axes = tuple(range(3, 3 + d)), tuple(range(3 + d, 3 + 2 * d))
    if wide:        # (G, Cg, *K, N, *O): each group's kernel times its columns
        cols = win.transpose((1, 2) + k_axes + (0,) + o_axes).reshape(g, cg * kk, n * p)
        y = np.matmul(mats, cols if cols.dtype == dtype else cols.astype(dtype))
        return y.reshape((g, mats.shape[1], n) + outs).transpose(
            (2, 0, 1) + tuple(range(3, 3 + d)))
    # (G, N, *O, Cg, *K): each group's rows times its kernel
    cols = win.transpose((1, 0) + o_axes + (2,) + k_axes).reshape(g, n * p, cg * kk)
    y = np.matmul(cols if cols.dtype == dtype else cols.astype(dtype), mats.transpose(0, 2, 1))
    y = y.reshape((g, n) + outs + (mats.shape[1],))
    return y.transpose((1, 0, 2 + d) + tuple(range(2, 2 + d)))


def _shape_rule(shapes, dtypes, at) -> tuple:
    """N, O and the output length of each spatial axis."""
    xs, ws = tuple(shapes[0]), tuple(shapes[1])
    g = at["groups"]
    if len(xs) < 3 or len(ws) != len(xs):
        raise ShapeRuleError(f"conv needs x of shape (N, C, spatial...) and w of shape (O, C / "
                             f"groups, kernel...) with as many axes, got {xs} and {ws}")
    if xs[1] != ws[1] * g or ws[0] % g:
        raise ShapeRuleError(f"conv: x has {xs[1]} channels and w {ws[0]} x {ws[1]}: with "
                             f"groups={g}, w needs shape (O, {xs[1] // max(g, 1)}, ...) and O "
                             "divisible by groups")
    outs = tuple(_out_size(s, k, st, p, dl, ld) for s, k, st, p, dl, ld in zip(
        xs[2:], ws[2:], at["stride"], at["padding"], at["dilation"], at["lhs_dilation"]))
    if any(m <= 0 for m in outs):
        raise ShapeRuleError(f"conv: the kernel {ws[2:]} (dilation {at['dilation']}) does not "
                             f"fit the padded input {xs[2:]}")
    return (xs[0], ws[0]) + outs, np.result_type(*dtypes)

# ---------------------------------------------------------------- rules


def _flipped(o: PrimitiveMethods, w, groups: int):
    """The kernel of the transposed convolution: per group, in and out channels exchanged,
    the spatial axes reversed (shape (C, O / groups, kernel...))."""
    ws = shape_of(w)
    og, cg, ks = ws[0] // groups, ws[1], ws[2:]
    d = len(ks)
    t = o.reshape(w, (groups, og, cg) + ks)
    t = o.transpose(t, (0, 2, 1) + tuple(range(3, 3 + d)))
    t = o.reshape(t, (groups * cg, og) + ks)
    return o.flip(t, axis=tuple(range(2, 2 + d)))


def _vjp_x(o: PrimitiveMethods, g, out, x, w, stride, padding, dilation, lhs_dilation, groups):
    xs, ws, gs = shape_of(x), shape_of(w), shape_of(g)
    pads = []
    for s, k, m, st, (lo, hi), dl, ld in zip(xs[2:], ws[2:], gs[2:], stride, padding, dilation,
                                             lhs_dilation):
        eff = (k - 1) * dl + 1
        z = (s - 1) * ld + 1 + lo + hi
        r = z - eff + 1 - ((m - 1) * st + 1)     # padded entries no output window starts at
        pads.append((eff - 1 - lo, eff - 1 + r - hi))
    return o.conv_general(g, _flipped(o, w, groups), stride=lhs_dilation, padding=tuple(pads),
                          dilation=dilation, lhs_dilation=stride, groups=groups)


def _vjp_w(o: PrimitiveMethods, g, out, x, w, stride, padding, dilation, lhs_dilation, groups):
    xs, ws, gs = shape_of(x), shape_of(w), shape_of(g)
    d = len(xs) - 2
    og, cg, ks = ws[0] // groups, ws[1], ws[2:]
    sp = tuple(range(3, 3 + d))
    # dw[f, c, k] = sum over n, p of g[n, f, p] z[n, c, p * stride + k * dilation]: a
    # convolution of the input, its channels as N and N as the channels, with the cotangent
    # as the kernel (stride and dilation exchanged), each group one group of it
    if groups == 1:
        xt = o.transpose(x, (1, 0) + tuple(range(2, 2 + d)))
        gt = o.transpose(g, (1, 0) + tuple(range(2, 2 + d)))
    else:               # (Cg, G * N, ...) and (G * Og, N, ...)
        xt = o.transpose(o.reshape(x, (xs[0], groups, cg) + xs[2:]), (2, 1, 0) + sp)
        xt = o.reshape(xt, (cg, groups * xs[0]) + xs[2:])
        gt = o.transpose(o.reshape(g, (gs[0], groups, og) + gs[2:]), (1, 2, 0) + sp)
        gt = o.reshape(gt, (groups * og, gs[0]) + gs[2:])
    dw = o.conv_general(xt, gt, stride=dilation, padding=padding, dilation=stride,
                        lhs_dilation=lhs_dilation, groups=groups)
    if shape_of(dw)[2:] != ks:
        dw = o.getitem(dw, (slice(None), slice(None)) + tuple(slice(0, k) for k in ks))
    return o.transpose(dw, (1, 0) + tuple(range(2, 2 + d)))


def _jvp(o: PrimitiveMethods, ts, out, x, w, **at):
    tx, tw = ts
    a = o.conv_general(tx, w, **at) if tx is not None else None
    b = o.conv_general(x, tw, **at) if tw is not None else None
    return b if a is None else a if b is None else o.add(a, b)


def _batch(o: PrimitiveMethods, xs, batched, stride, padding, dilation, lhs_dilation, groups):
    """The examples joined to N (x batched), to the groups (w batched), or both."""
    x, w = xs
    at = {"stride": stride, "padding": padding, "dilation": dilation,
          "lhs_dilation": lhs_dilation}
    bx, bw = batched
    if bx and not bw:
        s = shape_of(x)
        y = o.conv_general(o.reshape(x, (s[0] * s[1],) + s[2:]), w, groups=groups, **at)
        return o.reshape(y, s[:2] + shape_of(y)[1:])
    ws = shape_of(w)
    b, oc, cg, ks = ws[0], ws[1], ws[2], ws[3:]
    d = len(ks)
    if bw and not bx:       # (G, B, O / G) out channels: the groups stay outermost
        t = o.reshape(w, (b, groups, oc // groups, cg) + ks)
        t = o.transpose(t, (1, 0) + tuple(range(2, 4 + d)))
        y = o.conv_general(x, o.reshape(t, (groups * b * (oc // groups), cg) + ks),
                           groups=groups, **at)
        ys = shape_of(y)
        y = o.reshape(y, (ys[0], groups, b, oc // groups) + ys[2:])
        y = o.transpose(y, (2, 0, 1) + tuple(range(3, 4 + d)))
        return o.reshape(y, (b, ys[0], oc) + ys[2:])
    s = shape_of(x)         # both: example b is groups b * G ... (b + 1) * G - 1
    t = o.transpose(x, (1, 0) + tuple(range(2, 3 + d)))
    t = o.reshape(t, (s[1], b * s[2]) + s[3:])
    y = o.conv_general(t, o.reshape(w, (b * oc, cg) + ks), groups=b * groups, **at)
    ys = shape_of(y)
    y = o.reshape(y, (ys[0], b, oc) + ys[2:])
    return o.transpose(y, (1, 0) + tuple(range(2, 3 + d)))


def _per_spatial(lo: int):
    """One int >= lo per spatial axis of x (the first input)."""
    def check(v: Any, shapes) -> str | None:
        d = max(len(shapes[0]) - 2, 0)
        if type(v) is not tuple or len(v) != d or not all(is_held_int(n) and n >= lo
                                                          for n in v):
            return f"must be {d} int(s) >= {lo}, one per spatial axis"
        return None
    return check


def _pads(v: Any, shapes) -> str | None:
    """One (low, high) pair of ints per spatial axis of x (negative: cropped)."""
    d = max(len(shapes[0]) - 2, 0)
    if type(v) is not tuple or len(v) != d or not all(
            type(p) is tuple and len(p) == 2 and all(is_held_int(n) for n in p) for p in v):
        return f"must be {d} (low, high) pair(s) of ints, one per spatial axis"
    return None


def _fmt(args: list[str], at: dict, render) -> str:
    shown = [f"{k}={render(at[k], k)}" for k, plain in
             (("stride", 1), ("padding", 0), ("dilation", 1), ("lhs_dilation", 1))
             if any(v != plain and v != (plain, plain) for v in at[k])]
    if at["groups"] != 1:
        shown.append(f"groups={at['groups']}")
    return f"conv({', '.join(args + shown)})"


def _case(xs: tuple, ws: tuple, stride=None, padding=None, dilation=None, lhs=None,
          groups: int = 1) -> Case:
    d = len(xs) - 2
    return Case((xs, ws), {"stride": stride or (1,) * d, "padding": padding or ((0, 0),) * d,
                           "dilation": dilation or (1,) * d, "lhs_dilation": lhs or (1,) * d,
                           "groups": groups})


CONV = register(Primitive(
    "conv", _conv, [_vjp_x, _vjp_w], _jvp, _fmt,
    [_case((2, 3, 5), (4, 3, 2)), _case((1, 2, 5, 4), (3, 2, 2, 3)),
     _case((2, 2, 6, 5), (2, 2, 3, 2), stride=(2, 1), padding=((1, 0), (1, 2))),
     _case((1, 4, 7), (4, 2, 3), dilation=(2,), groups=2),
     _case((1, 2, 4), (3, 2, 2), lhs=(2,), padding=((1, -1),), stride=(2,)),
     _case((1, 1, 3, 3, 3), (2, 1, 2, 2, 2), padding=((1, 1),) * 3)],
    linear=EACH_ALONE, batch=_batch, taylor=multilinear("conv"), plain=False,
    schema=attrs(shape_rule=_shape_rule, stride=need(_per_spatial(1)), padding=need(_pads),
                 dilation=need(_per_spatial(1)), lhs_dilation=need(_per_spatial(1)),
                 groups=need(integer(1, 2**31))), saves=("inputs",)))

# ---------------------------------------------------------------- Ops methods


class ConvOps:
    """conv as a method of an Ops."""

    def conv_general(self, x: Any, w: Any, stride: tuple, padding: tuple, dilation: tuple,
                     lhs_dilation: tuple, groups: int, name: str | None = None) -> Variable:
        """The convolution ``conv`` records, every attribute given in full."""
        return self.apply(CONV, (x, w), {"stride": stride, "padding": padding,
                                         "dilation": dilation, "lhs_dilation": lhs_dilation,
                                         "groups": groups}, name)

    def conv(self, x: Any, w: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
             groups: int = 1, name: str | None = None) -> Variable:
        """``torch.nn.functional.conv1d/2d/3d`` of x (N, C, spatial...) and w (O, C / groups,
        kernel...); padding an int, one per spatial axis, "same" or "valid"."""
        return self.conv_general(x, w, **conv_attrs(shape_of(x), shape_of(w), stride, padding,
                                                    dilation, groups), name=name)

# ---------------------------------------------------------------- the public function


def _per_axis(what: str, v: Any, d: int) -> tuple:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v),) * d
    if isinstance(v, (tuple, list)) and len(v) == d and all(
            isinstance(e, (int, np.integer)) and not isinstance(e, bool) for e in v):
        return tuple(int(e) for e in v)
    raise ArgumentError(f"conv: {what} must be an int or {d} ints (one per spatial axis), "
                        f"not {v!r}")


def conv_attrs(xs: tuple, ws: tuple, stride: Any, padding: Any, dilation: Any,
               groups: Any) -> dict:
    """torch's arguments as the primitive's attributes (checked, one entry per spatial axis)."""
    if len(xs) < 3 or len(ws) != len(xs):
        raise ShapeError(f"conv: x needs shape (N, C, spatial...) and w (O, C / groups, "
                         f"kernel...) with as many axes, got {xs} and {ws}")
    d = len(xs) - 2
    stride, dilation = _per_axis("stride", stride, d), _per_axis("dilation", dilation, d)
    if not isinstance(groups, (int, np.integer)) or isinstance(groups, bool) or groups < 1:
        raise ArgumentError(f"conv: groups must be an int >= 1, not {groups!r}")
    if min(stride) < 1 or min(dilation) < 1:
        raise ArgumentError(f"conv: stride and dilation must be >= 1, got {stride} and "
                            f"{dilation}")
    if padding == "valid":
        pads = ((0, 0),) * d
    elif padding == "same":
        if any(s != 1 for s in stride):
            raise ArgumentError("conv: padding='same' needs stride 1 (as torch)")
        total = [dl * (k - 1) for dl, k in zip(dilation, ws[2:])]
        pads = tuple((t // 2, t - t // 2) for t in total)
    else:
        if isinstance(padding, str):
            raise ArgumentError(f"conv: padding must be an int, a tuple, 'same' or 'valid', "
                                f"not {padding!r}")
        pads = tuple((p, p) for p in _per_axis("padding", padding, d))
        if min(p for p, _ in pads) < 0:
            raise ArgumentError(f"conv: padding must be >= 0, got {padding!r}")
    return {"stride": stride, "padding": pads, "dilation": dilation,
            "lhs_dilation": (1,) * d, "groups": int(groups)}


def conv(x: Any, w: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
         groups: int = 1) -> Any:
    """``torch.nn.functional.conv1d/2d/3d`` on arrays and Variables: x (N, C, spatial...), w
    (O, C / groups, kernel...); padding an int, one per spatial axis, "same" or "valid"."""
    for v in (x, w):
        if dtype_of(v).kind not in "biuf":
            raise DTypeError(f"conv: values of dtype {dtype_of(v)} (real values only)")
    rec = next((v.rec for v in (x, w) if hasattr(v, "rec") and hasattr(v, "node")), None)
    if rec is not None:
        return rec.conv(x, w, stride, padding, dilation, groups)
    x, w = np.asarray(x), np.asarray(w)
    at = conv_attrs(x.shape, w.shape, stride, padding, dilation, groups)
    _shape_rule([x.shape, w.shape], [x.dtype, w.dtype], at)     # (errors as when recorded)
    return _conv(x, w, **at)
