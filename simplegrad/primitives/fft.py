"""Discrete Fourier transforms: numpy's ``np.fft.fft``, ``ifft``, ``rfft``, ``irfft``,
``fftn`` and ``ifftn`` (``norm`` as numpy takes it).

Each transform is linear, so its jvp is itself applied to the tangent. The DFT matrix is
symmetric, so in JAX's convention (complex.py: a cotangent pairs with a tangent without a
conjugate) the vjp of ``fft``, ``ifft``, ``fftn`` and ``ifftn`` is the same transform of the
cotangent. ``rfft`` keeps the first ``n // 2 + 1`` rows of that matrix: its vjp is the full
``fft`` of the cotangent padded with zeros (the sweep keeps its real part for the real input).
``irfft`` reads a half spectrum as Hermitian: output ``x_m`` is ``Re(sum_k w_k X_k e_km)`` with
weights ``w_k`` 1 for the zero frequency (and Nyquist, for even n) and 2 for the others, so its
vjp is ``w * ifft(g)`` cut to the half spectrum.

A length ``n`` other than the input's (``fft``, ``ifft``, ``rfft``) is recorded as a slice or
a zero padding before the transform; only ``irfft`` keeps ``n`` as an attribute (the output's
length).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from ..errors import ArgumentError, DTypeError
from .complex import complex_sampler
from .core import JOINTLY, REGISTRY, Case, Primitive, dtype_of, register, shape_of, shift_axis
from .lazy import dask_array, per_block
from .schema import AXES, AXIS, attrs, integer, need, one_of
from .shape_rules import ShapeRuleError, axes_of
from .taylor import linear

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

NORMS = ("backward", "ortho", "forward")

# ---------------------------------------------------------------- dtype and shape rules


def _complex_of(d: Any) -> np.dtype:
    """numpy.fft's complex output dtype: complex64 for half and single precision, complex128
    otherwise (integers and bools included)."""
    d = np.dtype(d)
    return np.dtype(np.complex64) if d in (np.float16, np.float32, np.complex64) else \
        np.dtype(np.complex128)


def _real_of(d: Any) -> np.dtype:
    """irfft's real output dtype: a real float input's own, float32 for complex64, float64
    otherwise."""
    d = np.dtype(d)
    if d in (np.float16, np.float32):
        return d
    return np.dtype(np.float32) if d == np.complex64 else np.dtype(np.float64)


def _same_shape(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """fft, ifft: the input's shape (at least one dimension), complex."""
    if not shapes[0]:
        raise ShapeRuleError("a Fourier transform takes an array of at least one dimension")
    axes_of(attrs.get("axis", attrs.get("axes")), len(shapes[0]))
    return tuple(shapes[0]), _complex_of(dtypes[0])


def _half_shape(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """rfft: ``n // 2 + 1`` along the axis, complex."""
    shape = list(shapes[0])
    if not shape:
        raise ShapeRuleError("rfft takes an array of at least one dimension")
    (ax,) = axes_of(attrs["axis"], len(shape))
    shape[ax] = shape[ax] // 2 + 1
    return tuple(shape), _complex_of(dtypes[0])


def _full_shape(shapes: Sequence[tuple], dtypes: Sequence[Any], attrs: dict) -> tuple:
    """irfft: ``n`` along the axis, real."""
    shape = list(shapes[0])
    if not shape:
        raise ShapeRuleError("irfft takes an array of at least one dimension")
    (ax,) = axes_of(attrs["axis"], len(shape))
    shape[ax] = attrs["n"]
    return tuple(shape), _real_of(dtypes[0])


# ---------------------------------------------------------------- forwards


def _along(fn: Any) -> Any:
    """The forward of numpy's one-axis transform ``fn``: an axis out of range raises numpy's
    AxisError; on a dask array, per block with the axis whole (lazy)."""
    def forward(x: Any, axis: int, norm: str, **n: int) -> Any:
        axis = normalize_axis_index(axis, np.ndim(x))
        if dask_array(x) is None:
            return fn(x, axis=axis, norm=norm, **n)
        m = x.shape[axis]
        size = {"rfft": m // 2 + 1, "irfft": n.get("n")}.get(fn.__name__, m)
        dtype = _real_of(x.dtype) if fn.__name__ == "irfft" else _complex_of(x.dtype)
        return per_block(lambda b: fn(b, axis=-1, norm=norm, **n), "(i)->(j)", x,
                         axes=[(axis,), (axis,)], dtypes=dtype, sizes={"j": size})
    forward.__name__ = forward.__qualname__ = fn.__name__
    return forward


def _over(fn: Any) -> Any:
    """The forward of numpy's transform ``fn`` over several axes (fftn, ifftn), as ``_along``."""
    def forward(x: Any, axes: tuple, norm: str) -> Any:
        axes = normalize_axis_tuple(axes, np.ndim(x))
        if dask_array(x) is None:
            return fn(x, axes=axes, norm=norm)
        core = ",".join(f"i{k}" for k in range(len(axes)))
        return per_block(lambda b: fn(b, axes=tuple(range(-len(axes), 0)), norm=norm),
                         f"({core})->({core})", x, axes=[axes, axes],
                         dtypes=_complex_of(x.dtype))
    forward.__name__ = forward.__qualname__ = fn.__name__
    return forward


# ---------------------------------------------------------------- the records


def _cut(o: PrimitiveMethods, x: Any, n: int, axis: int) -> Any:
    """x cut or padded with zeros to length ``n`` along ``axis``, recorded."""
    shape = shape_of(x)
    axis %= len(shape)
    if shape[axis] == n:
        return x
    if shape[axis] > n:
        return o.getitem(x, (slice(None),) * axis + (slice(0, n),))
    widths = [(0, 0)] * len(shape)
    widths[axis] = (0, n - shape[axis])
    return o.pad(x, widths)


def _one_axis(name: str) -> Any:
    def batch(o: PrimitiveMethods, xs, batched, **attrs):
        new = dict(attrs)
        new["axis"] = shift_axis(attrs["axis"], name, xs[0])
        return o.apply(REGISTRY[name], tuple(xs), new)
    return batch


def _many_axes(name: str) -> Any:
    def batch(o: PrimitiveMethods, xs, batched, **attrs):
        new = dict(attrs)
        new["axes"] = shift_axis(attrs["axes"], name, xs[0])
        return o.apply(REGISTRY[name], tuple(xs), new)
    return batch


def _fmt(call: str, *params: str) -> Any:
    def fmt(args: list[str], attrs: dict, render: Any) -> str:
        shown = [f"{k}={render(attrs[k], k)}" for k in params
                 if k != "norm" or attrs[k] != "backward"]
        return f"np.fft.{call}({', '.join([args[0], *shown])})"
    return fmt


_CASES = [Case(((4,),), {"axis": -1, "norm": "backward"}),
          Case(((3, 5),), {"axis": 0, "norm": "ortho"}),
          Case(((2, 3),), {"axis": 1, "norm": "forward"})]

FFT = register(Primitive(
    "fft", _along(np.fft.fft),
    [lambda o, g, out, x, axis, norm: o.apply(FFT, (g,), {"axis": axis, "norm": norm})],
    lambda o, ts, out, x, axis, norm: o.apply(FFT, (ts[0],), {"axis": axis, "norm": norm}),
    _fmt("fft", "axis", "norm"), _CASES, domain=(complex_sampler(),), linear=JOINTLY,
    batch=_one_axis("fft"), taylor=linear("fft"),
    numpy="np.fft.fft({0}{axis}, norm={norm})",
    schema=attrs(shape_rule=_same_shape, axis=need(AXIS), norm=need(one_of(*NORMS))), saves=()))

IFFT = register(Primitive(
    "ifft", _along(np.fft.ifft),
    [lambda o, g, out, x, axis, norm: o.apply(IFFT, (g,), {"axis": axis, "norm": norm})],
    lambda o, ts, out, x, axis, norm: o.apply(IFFT, (ts[0],), {"axis": axis, "norm": norm}),
    _fmt("ifft", "axis", "norm"), _CASES, domain=(complex_sampler(),), linear=JOINTLY,
    batch=_one_axis("ifft"), taylor=linear("ifft"),
    numpy="np.fft.ifft({0}{axis}, norm={norm})",
    schema=attrs(shape_rule=_same_shape, axis=need(AXIS), norm=need(one_of(*NORMS))), saves=()))


def _rfft_vjp(o: PrimitiveMethods, g, out, x, axis, norm):
    n = shape_of(x)[axis]
    return o.apply(FFT, (_cut(o, g, n, axis),), {"axis": axis, "norm": norm})


RFFT = register(Primitive(
    "rfft", _along(np.fft.rfft),
    [_rfft_vjp],
    lambda o, ts, out, x, axis, norm: o.apply(RFFT, (ts[0],), {"axis": axis, "norm": norm}),
    _fmt("rfft", "axis", "norm"), _CASES, linear=JOINTLY,
    batch=_one_axis("rfft"), taylor=linear("rfft"),
    numpy="np.fft.rfft({0}{axis}, norm={norm})",
    schema=attrs(shape_rule=_half_shape, axis=need(AXIS), norm=need(one_of(*NORMS))), saves=()))


def _irfft_weights(m: int, n: int, ndim: int, axis: int) -> np.ndarray:
    """w_k of a half spectrum of m entries read as n: 1 at 0 (and at n / 2), 2 elsewhere."""
    w = np.full(m, 2.0)
    w[0] = 1.0
    if n % 2 == 0 and n // 2 < m:
        w[n // 2] = 1.0
    w[min(m, n // 2 + 1):] = 0.0      # entries irfft does not read
    return w.reshape((m,) + (1,) * (ndim - 1 - axis % ndim))


def _irfft_vjp(o: PrimitiveMethods, g, out, x, n, axis, norm):
    shape = shape_of(x)
    m = shape[axis]
    spectrum = o.apply(IFFT, (g,), {"axis": axis, "norm": norm})
    return o.mul(_cut(o, spectrum, m, axis), _irfft_weights(m, n, len(shape), axis))


IRFFT = register(Primitive(
    "irfft", _along(np.fft.irfft),
    [_irfft_vjp],
    lambda o, ts, out, x, n, axis, norm: o.apply(IRFFT, (ts[0],),
                                                 {"n": n, "axis": axis, "norm": norm}),
    _fmt("irfft", "n", "axis", "norm"),
    [Case(((3,),), {"n": 4, "axis": -1, "norm": "backward"}),
     Case(((3, 4),), {"n": 5, "axis": 0, "norm": "ortho"}),
     Case(((2, 4),), {"n": 6, "axis": 1, "norm": "forward"})],
    domain=(complex_sampler(),), linear=JOINTLY, batch=_one_axis("irfft"),
    taylor=linear("irfft"),
    numpy="np.fft.irfft({0}, {n}{axis}, norm={norm})",
    schema=attrs(shape_rule=_full_shape, n=need(integer(1)), axis=need(AXIS),
                 norm=need(one_of(*NORMS))),
    saves=()))

_MANY = [Case(((2, 3),), {"axes": (0, 1), "norm": "backward"}),
         Case(((2, 3, 2),), {"axes": (0, 2), "norm": "ortho"})]

FFTN = register(Primitive(
    "fftn", _over(np.fft.fftn),
    [lambda o, g, out, x, axes, norm: o.apply(FFTN, (g,), {"axes": axes, "norm": norm})],
    lambda o, ts, out, x, axes, norm: o.apply(FFTN, (ts[0],), {"axes": axes, "norm": norm}),
    _fmt("fftn", "axes", "norm"), _MANY, domain=(complex_sampler(),), linear=JOINTLY,
    batch=_many_axes("fftn"), taylor=linear("fftn"),
    numpy="np.fft.fftn({0}, None{axes}, norm={norm})",
    schema=attrs(shape_rule=_same_shape, axes=need(AXES), norm=need(one_of(*NORMS))), saves=()))

IFFTN = register(Primitive(
    "ifftn", _over(np.fft.ifftn),
    [lambda o, g, out, x, axes, norm: o.apply(IFFTN, (g,), {"axes": axes, "norm": norm})],
    lambda o, ts, out, x, axes, norm: o.apply(IFFTN, (ts[0],), {"axes": axes, "norm": norm}),
    _fmt("ifftn", "axes", "norm"), _MANY, domain=(complex_sampler(),), linear=JOINTLY,
    batch=_many_axes("ifftn"), taylor=linear("ifftn"),
    numpy="np.fft.ifftn({0}, None{axes}, norm={norm})",
    schema=attrs(shape_rule=_same_shape, axes=need(AXES), norm=need(one_of(*NORMS))), saves=()))


# ---------------------------------------------------------------- Ops methods


def _norm(fname: str, x: Any, norm: Any) -> str:
    norm = "backward" if norm is None else norm
    if norm not in NORMS:
        raise ArgumentError(f"np.fft.{fname}: norm must be one of {', '.join(NORMS)}, "
                            f"not {norm!r}")
    return norm


def _axis(fname: str, x: Any, axis: int) -> int:
    nd = len(shape_of(x))
    if not nd or not -nd <= axis < nd:
        raise ArgumentError(f"np.fft.{fname}: axis {axis} is out of range for an array of "
                            f"shape {shape_of(x)}")
    return int(axis) % nd


class FFTOps:
    """numpy.fft's transforms as methods of an Ops (numpy's signatures, ``out=`` aside)."""

    def fft(self, a: Any, n: int | None = None, axis: int = -1, norm: str | None = None,
            name: str | None = None) -> Variable:
        """The discrete Fourier transform along ``axis`` (np.fft.fft)."""
        axis = _axis("fft", a, axis)
        a = a if n is None else _cut(self, a, int(n), axis)
        return self.apply(FFT, (a,), {"axis": axis, "norm": _norm("fft", a, norm)}, name)

    def ifft(self, a: Any, n: int | None = None, axis: int = -1, norm: str | None = None,
             name: str | None = None) -> Variable:
        """The inverse discrete Fourier transform along ``axis`` (np.fft.ifft)."""
        axis = _axis("ifft", a, axis)
        a = a if n is None else _cut(self, a, int(n), axis)
        return self.apply(IFFT, (a,), {"axis": axis, "norm": _norm("ifft", a, norm)}, name)

    def rfft(self, a: Any, n: int | None = None, axis: int = -1, norm: str | None = None,
             name: str | None = None) -> Variable:
        """The transform of a real input, its ``n // 2 + 1`` non-negative frequencies."""
        if dtype_of(a) is not None and dtype_of(a).kind == "c":
            raise DTypeError("np.fft.rfft takes real values (np.fft.fft takes complex ones)")
        axis = _axis("rfft", a, axis)
        a = a if n is None else _cut(self, a, int(n), axis)
        return self.apply(RFFT, (a,), {"axis": axis, "norm": _norm("rfft", a, norm)}, name)

    def irfft(self, a: Any, n: int | None = None, axis: int = -1, norm: str | None = None,
              name: str | None = None) -> Variable:
        """The real signal of length ``n`` (default ``2 (m - 1)``) whose half spectrum is a."""
        axis = _axis("irfft", a, axis)
        n = 2 * (shape_of(a)[axis] - 1) if n is None else int(n)
        if n < 1:
            raise ArgumentError(f"np.fft.irfft: n must be at least 1, got {n}")
        return self.apply(IRFFT, (a,), {"n": n, "axis": axis,
                                        "norm": _norm("irfft", a, norm)}, name)

    def fftn(self, a: Any, s: Any = None, axes: Sequence[int] | None = None,
             norm: str | None = None, name: str | None = None) -> Variable:
        """The n-dimensional transform over ``axes`` (every axis by default)."""
        return self.apply(FFTN, (_resized(self, "fftn", a, s, axes),),
                          {"axes": _axes(a, s, axes), "norm": _norm("fftn", a, norm)}, name)

    def ifftn(self, a: Any, s: Any = None, axes: Sequence[int] | None = None,
              norm: str | None = None, name: str | None = None) -> Variable:
        """The n-dimensional inverse transform over ``axes`` (every axis by default)."""
        return self.apply(IFFTN, (_resized(self, "ifftn", a, s, axes),),
                          {"axes": _axes(a, s, axes), "norm": _norm("ifftn", a, norm)}, name)


def _axes(a: Any, s: Any, axes: Any) -> tuple:
    nd = len(shape_of(a))
    if axes is None:
        axes = range(nd - len(s), nd) if s is not None else range(nd)
    return tuple(int(ax) % nd for ax in axes)


def _resized(o: Any, fname: str, a: Any, s: Any, axes: Any) -> Any:
    if s is None:
        return a
    axes = _axes(a, s, axes)
    if len(s) != len(axes):
        raise ArgumentError(f"np.fft.{fname}: s and axes have different lengths")
    for n, ax in zip(s, axes):
        a = _cut(o, a, int(n), ax)
    return a
