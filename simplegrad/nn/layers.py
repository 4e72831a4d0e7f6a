"""Layers built only on public primitives: each forward computes with ``o = ops_of(...)``.

With a Variable among its inputs or parameters a layer records on that Variable's Ops; with
plain arrays only it computes values with ``VALUES`` and records nothing. Under ``sg.vmap`` a
layer sees one example, as the function calling it does (``shape_of``): it computes what a
loop over the examples would, Dropout drawing its own mask for each example.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..engine.variable import Variable
from ..errors import ArgumentError, DTypeError, OutOfBoundsError, ShapeError
from .module import Module, batched, ops_of, per_example, shape_of, value_of

__all__ = ["Linear", "Sequential", "MLP", "Embedding", "BatchNorm1d", "LayerNorm", "Dropout",
           "ReLU", "Tanh", "Sigmoid", "LeakyReLU", "Softplus", "Identity"]


def _rng(rng: np.random.Generator | None) -> np.random.Generator:
    if rng is None:
        return np.random.default_rng()
    if not isinstance(rng, np.random.Generator):
        raise ArgumentError(f"rng must be a numpy Generator (np.random.default_rng(seed)), "
                            f"not {type(rng).__name__}")
    return rng


def _last_dim(layer: str, x: Any, n: int) -> None:
    shape = shape_of(x)
    if not shape or shape[-1] != n:
        raise ShapeError(f"{layer}: the input has shape {shape}, expected last dimension {n}")


class Linear(Module):
    """``x @ weight.T + bias`` with PyTorch's layout (weight: out x in) and initialisation."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 rng: np.random.Generator | None = None):
        super().__init__()
        rng = _rng(rng)
        bound = 1.0 / np.sqrt(in_features)
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.register_parameter("weight", rng.uniform(-bound, bound, (out_features, in_features)))
        if bias:
            self.register_parameter("bias", rng.uniform(-bound, bound, (out_features,)))

    def forward(self, x: Any) -> Any:
        """The affine map of the last axis of ``x``."""
        _last_dim("Linear", x, self.in_features)
        w = self.weight
        b = self._parameters.get("bias")
        o = ops_of(x, w, b)
        y = o.matmul(x, o.transpose(w))
        return y if b is None else o.add(y, b)

    def extra_repr(self) -> str:
        """The layer's settings, as its repr shows them."""
        return f"{self.in_features}, {self.out_features}, bias={'bias' in self._parameters}"


class Sequential(Module):
    """Children applied in order; they are named ``"0"``, ``"1"``, ..."""

    def __init__(self, *layers: Module):
        super().__init__()
        for i, layer in enumerate(layers):
            if not isinstance(layer, Module):
                raise ArgumentError(f"Sequential: item {i} is a {type(layer).__name__}, "
                                    "not a Module")
            setattr(self, str(i), layer)

    def forward(self, x: Any) -> Any:
        """Each child applied to the previous one's output."""
        for layer in self._modules.values():
            x = layer(x)
        return x

    def __len__(self) -> int:
        return len(self._modules)

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]


class MLP(Sequential):
    """Linear layers of the given ``sizes`` with an activation between them (not after the last)."""

    def __init__(self, sizes: Sequence[int], activation: str = "relu",
                 rng: np.random.Generator | None = None):
        acts = {"relu": ReLU, "tanh": Tanh, "sigmoid": Sigmoid}
        if activation not in acts:
            raise ArgumentError(f"MLP: activation must be one of {sorted(acts)}, "
                                f"not {activation!r}")
        if len(sizes) < 2:
            raise ArgumentError(f"MLP: sizes needs an input and an output size, got {sizes!r}")
        rng = _rng(rng)
        layers: list[Module] = []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(Linear(n_in, n_out, rng=rng))
            if i < len(sizes) - 2:
                layers.append(acts[activation]())
        super().__init__(*layers)


class Embedding(Module):
    """Rows of a ``num_embeddings x embedding_dim`` table picked by integer indices."""

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 rng: np.random.Generator | None = None):
        super().__init__()
        self.num_embeddings = int(num_embeddings)
        self.register_parameter("weight", _rng(rng).standard_normal((num_embeddings,
                                                                     embedding_dim)))

    def forward(self, idx: Any) -> Any:
        """``weight[idx]``: shape ``idx.shape + (embedding_dim,)``."""
        recorded = isinstance(idx, Variable)        # an integer entry, batched under vmap
        # every example's indices at once (under vmap): the checks pass iff each example's do
        values = np.asarray(value_of(idx) if recorded else idx)
        if values.dtype.kind not in "iu":
            raise DTypeError(f"Embedding: indices must be integers, got dtype {values.dtype}")
        if values.size and (values.min() < 0 or values.max() >= self.num_embeddings):
            raise OutOfBoundsError(f"Embedding: indices must lie in [0, {self.num_embeddings}),"
                                   f" got values from {values.min()} to {values.max()}")
        w = self.weight
        if not recorded:
            return ops_of(w).getitem(w, values)
        o = ops_of(w, idx)
        if not isinstance(w, Variable):             # apply() with arrays: gather from a leaf
            w = o.var(w, requires_grad=False)
        return o.take(w, idx, axis=0)


class BatchNorm1d(Module):
    """Batch normalisation of ``(N, C)`` inputs over the batch, with running statistics.

    Training: ``(x - mean) / sqrt(var + eps) * weight + bias`` with the batch's mean and
    variance; the running mean and the running variance (Bessel-corrected, divided by N - 1,
    as seed 003 and PyTorch keep it) move by ``momentum``. ``variance="biased"`` (PyTorch's)
    normalises with the variance divided by N; ``"unbiased"`` with the Bessel-corrected one,
    as seed 003's hand-written layer does. Evaluation mode uses the running statistics.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 variance: str = "biased"):
        super().__init__()
        if variance not in ("biased", "unbiased"):
            raise ArgumentError(f"BatchNorm1d: variance must be 'biased' or 'unbiased', not "
                                f"{variance!r}")
        self.num_features, self.eps, self.momentum = int(num_features), eps, momentum
        self.variance = variance
        self.register_parameter("weight", np.ones(num_features))
        self.register_parameter("bias", np.zeros(num_features))
        self.register_buffer("running_mean", np.zeros(num_features))
        self.register_buffer("running_var", np.ones(num_features))

    def forward(self, x: Any) -> Any:
        """Normalise each feature (column) of ``x``."""
        shape = shape_of(x)
        if len(shape) != 2 or shape[1] != self.num_features:
            raise ShapeError(f"BatchNorm1d: the input has shape {shape}, expected (N, "
                             f"{self.num_features})")
        w, b = self.weight, self.bias
        if self.training and batched(x, w, b):
            raise ArgumentError("BatchNorm1d: in training mode under vmap: its batch and "
                                "running statistics have no per-example meaning; call .eval() "
                                "to normalise each example with the running statistics, or "
                                "apply the layer to the whole batch outside vmap")
        o = ops_of(x, w, b)
        if not self.training:
            mean, var = self.running_mean, self.running_var
            return o.add(o.mul(o.div(o.sub(x, mean), np.sqrt(var + self.eps)), w), b)
        n = shape[0]
        if n < 2:
            raise ShapeError("BatchNorm1d: training needs at least 2 rows per batch")
        mean = o.mean(x, axis=0, keepdims=True)
        diff = o.sub(x, mean)
        # the biased variance as a mean (numpy sums float16 in float32: no overflow of the sum
        # of squares or of the count), scaled for the unbiased one
        biased = o.mean(o.mul(diff, diff), axis=0, keepdims=True)
        var = biased if self.variance == "biased" else o.mul(biased, n / (n - 1))
        xhat = o.mul(diff, o.pow(o.add(var, self.eps), -0.5))
        m = self.momentum
        unbiased = np.asarray(value_of(biased)[0], dtype=np.float64) * (n / (n - 1))
        self._buffers["running_mean"] = (1 - m) * self.running_mean + m * value_of(mean)[0]
        self._buffers["running_var"] = ((1 - m) * self.running_var + m * unbiased).astype(
            self.running_var.dtype)
        return o.add(o.mul(xhat, w), b)

    def extra_repr(self) -> str:
        """The layer's settings, as its repr shows them."""
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class LayerNorm(Module):
    """Normalisation over the trailing ``normalized_shape`` axes of each sample (biased var)."""

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5,
                 elementwise_affine: bool = True):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        self.normalized_shape, self.eps = tuple(int(n) for n in shape), eps
        if elementwise_affine:
            self.register_parameter("weight", np.ones(self.normalized_shape))
            self.register_parameter("bias", np.zeros(self.normalized_shape))

    def forward(self, x: Any) -> Any:
        """Each sample's trailing axes scaled to mean 0 and variance 1, then affine."""
        k = len(self.normalized_shape)
        shape = shape_of(x)
        if shape[len(shape) - k:] != self.normalized_shape:
            raise ShapeError(f"LayerNorm: the input has shape {shape}, expected it to end in "
                             f"{self.normalized_shape}")
        w, b = self._parameters.get("weight"), self._parameters.get("bias")
        o = ops_of(x, w, b)
        axes = tuple(range(len(shape) - k, len(shape)))
        diff = o.sub(x, o.mean(x, axis=axes, keepdims=True))
        var = o.mean(o.mul(diff, diff), axis=axes, keepdims=True)
        y = o.mul(diff, o.pow(o.add(var, self.eps), -0.5))
        return y if w is None else o.add(o.mul(y, w), b)


class Dropout(Module):
    """Zero each entry with probability ``p`` in training, scaling the rest by 1 / (1 - p)."""

    def __init__(self, p: float, rng: np.random.Generator):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ArgumentError(f"Dropout: p must lie in [0, 1), got {p!r}")
        if not isinstance(rng, np.random.Generator):
            raise ArgumentError("Dropout: pass an explicit rng=np.random.default_rng(seed)")
        self.p, self.rng = float(p), rng

    def forward(self, x: Any) -> Any:
        """``x`` with a fresh random mask in training (one per example under vmap); ``x`` itself
        in evaluation."""
        if not self.training or self.p == 0.0:
            return x
        o = ops_of(x)
        scale = 1.0 / (1.0 - self.p)
        return o.mul(x, per_example(o, x, lambda shape: (self.rng.random(shape) >= self.p) *
                                    scale))

    def extra_repr(self) -> str:
        """The layer's settings, as its repr shows them."""
        return f"p={self.p}"


class ReLU(Module):
    """max(x, 0)."""

    def forward(self, x: Any) -> Any:
        """The activation applied to ``x`` (a Variable or an array)."""
        return ops_of(x).relu(x)


class Tanh(Module):
    """tanh(x)."""

    def forward(self, x: Any) -> Any:
        """The activation applied to ``x`` (a Variable or an array)."""
        return ops_of(x).tanh(x)


class Sigmoid(Module):
    """1 / (1 + exp(-x))."""

    def forward(self, x: Any) -> Any:
        """The activation applied to ``x`` (a Variable or an array)."""
        return ops_of(x).sigmoid(x)


class LeakyReLU(Module):
    """x for x > 0, ``negative_slope * x`` otherwise."""

    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = float(negative_slope)

    def forward(self, x: Any) -> Any:
        """The activation applied to ``x`` (a Variable or an array)."""
        o = ops_of(x)
        return o.maximum(x, o.mul(x, self.negative_slope))


class Softplus(Module):
    """log(1 + exp(x)), computed as relu(x) + log(1 + exp(-|x|)) so it never overflows."""

    def forward(self, x: Any) -> Any:
        """The activation applied to ``x`` (a Variable or an array)."""
        o = ops_of(x)
        return o.add(o.relu(x), o.log(o.add(o.exp(o.neg(o.abs(x))), 1.0)))


class Identity(Module):
    """x unchanged."""

    def forward(self, x: Any) -> Any:
        """The activation applied to ``x`` (a Variable or an array)."""
        return x


def _pair(what: str, v: Any) -> tuple:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v), int(v))
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(
            isinstance(e, (int, np.integer)) and not isinstance(e, bool) for e in v):
        return (int(v[0]), int(v[1]))
    raise ArgumentError(f"{what} must be an int or a pair of ints, not {v!r}")


class Conv2d(Module):
    """``torch.nn.Conv2d``: ``sg.conv`` of (N, C, H, W) or (C, H, W) inputs with a weight of
    shape (out, in / groups, kh, kw), PyTorch's initialisation, and a bias per out channel."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 rng: np.random.Generator | None = None):
        super().__init__()
        rng = _rng(rng)
        if in_channels % groups or out_channels % groups:
            raise ArgumentError(f"Conv2d: in_channels ({in_channels}) and out_channels "
                                f"({out_channels}) must be divisible by groups ({groups})")
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = _pair("Conv2d: kernel_size", kernel_size)
        self.stride = _pair("Conv2d: stride", stride)
        self.padding = padding if isinstance(padding, str) else _pair("Conv2d: padding", padding)
        self.dilation = _pair("Conv2d: dilation", dilation)
        self.groups = int(groups)
        bound = 1.0 / np.sqrt(in_channels // groups * self.kernel_size[0] * self.kernel_size[1])
        self.register_parameter("weight", rng.uniform(
            -bound, bound, (out_channels, in_channels // groups) + self.kernel_size))
        if bias:
            self.register_parameter("bias", rng.uniform(-bound, bound, (out_channels,)))

    def forward(self, x: Any) -> Any:
        """The convolution of ``x`` (N, C, H, W), or of one image (C, H, W)."""
        shape = shape_of(x)
        if len(shape) not in (3, 4) or shape[-3] != self.in_channels:
            raise ShapeError(f"Conv2d: expected (N, {self.in_channels}, H, W) or "
                             f"({self.in_channels}, H, W), got {shape}")
        w = self.weight
        b = self._parameters.get("bias")
        o = ops_of(x, w, b)
        one = len(shape) == 3
        y = o.conv(o.reshape(x, (1,) + shape) if one else x, w, self.stride, self.padding,
                   self.dilation, self.groups)
        if b is not None:
            y = o.add(y, o.reshape(b, (self.out_channels, 1, 1)))
        return o.reshape(y, shape_of(y)[1:]) if one else y

    def extra_repr(self) -> str:
        """The layer's settings, as its repr shows them."""
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, dilation={self.dilation}, "
                f"groups={self.groups}, bias={'bias' in self._parameters}")
