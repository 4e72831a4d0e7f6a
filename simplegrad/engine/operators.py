"""The Python operators and array methods of a Variable: each one call on its Ops.

``x + y`` records ``add`` on ``x.rec`` (the arithmetic operators call its one recording path
directly: the hot path), ``x.sum()`` is ``x.rec.sum(x)``; comparisons record bool
entries (no gradient), while ``==`` and ``!=`` stay identity. numpy's protocols (ufuncs,
``__array__``) are in variable.py, on the array class itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError
from ..primitives.elementwise import ADD, DIV, MUL, SUB
from ..primitives.numpy_arrays import ENTRIES as NUMPY_FORMS

if TYPE_CHECKING:
    from .variable import Variable


class Operators:
    """Python's operators and numpy's array methods, routed to the Variable's Ops."""

    __slots__ = ()

    # ------------------------------------------------------------ operators

    def __add__(self, other: Any) -> Variable:
        return self.rec.apply(ADD, (self, other), None, None)

    def __radd__(self, other: Any) -> Variable:
        return self.rec.apply(ADD, (other, self), None, None)

    def __sub__(self, other: Any) -> Variable:
        return self.rec.apply(SUB, (self, other), None, None)

    def __rsub__(self, other: Any) -> Variable:
        return self.rec.apply(SUB, (other, self), None, None)

    def __mul__(self, other: Any) -> Variable:
        return self.rec.apply(MUL, (self, other), None, None)

    def __rmul__(self, other: Any) -> Variable:
        return self.rec.apply(MUL, (other, self), None, None)

    def __truediv__(self, other: Any) -> Variable:
        return self.rec.apply(DIV, (self, other), None, None)

    def __rtruediv__(self, other: Any) -> Variable:
        return self.rec.apply(DIV, (other, self), None, None)

    def __pow__(self, other: Any) -> Variable:
        return self.rec.pow(self, other)

    def __rpow__(self, other: Any) -> Variable:
        return self.rec.pow(other, self)

    def __matmul__(self, other: Any) -> Variable:
        return self.rec.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Variable:
        return self.rec.matmul(other, self)

    def __neg__(self) -> Variable:
        return self.rec.neg(self)

    def __pos__(self) -> Variable:
        return self

    def __abs__(self) -> Variable:
        return self.rec.abs(self)

    def __getitem__(self, index: Any) -> Variable:
        return self.rec.getitem(self, index)

    # comparisons record bool entries (no gradient); == and != stay identity
    def __lt__(self, other: Any) -> Variable:
        return self.rec.less(self, other)

    def __le__(self, other: Any) -> Variable:
        return self.rec.less_equal(self, other)

    def __gt__(self, other: Any) -> Variable:
        return self.rec.greater(self, other)

    def __ge__(self, other: Any) -> Variable:
        return self.rec.greater_equal(self, other)

    def __invert__(self) -> Variable:
        return self.rec.logical_not(self)

    def __and__(self, other: Any) -> Variable:
        return self.rec.logical_and(self, other)

    def __rand__(self, other: Any) -> Variable:
        return self.rec.logical_and(other, self)

    def __or__(self, other: Any) -> Variable:
        return self.rec.logical_or(self, other)

    def __ror__(self, other: Any) -> Variable:
        return self.rec.logical_or(other, self)

    # ------------------------------------------------------------ methods

    def sum(self, axis: Any = None, keepdims: bool = False, **numpy_args: Any) -> Variable:
        """Sum over ``axis`` (numpy's ``dtype``, ``initial`` and ``where`` as ``np.sum``)."""
        if numpy_args:          # numpy's dtype=, initial=, where= (out= is refused there)
            return NUMPY_FORMS[np.sum](self.rec, self, axis=axis, keepdims=keepdims,
                                        **numpy_args)
        return self.rec.sum(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False, **numpy_args: Any) -> Variable:
        """Mean over ``axis``."""
        if numpy_args:
            _numpy_defaults("mean", self, numpy_args)
        return self.rec.mean(self, axis=axis, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False, **numpy_args: Any) -> Variable:
        """Maximum over ``axis`` (numpy's ``initial`` and ``where`` as ``np.max``)."""
        if numpy_args:          # numpy's dtype=, initial=, where= (out= is refused there)
            return NUMPY_FORMS[np.max](self.rec, self, axis=axis, keepdims=keepdims,
                                        **numpy_args)
        return self.rec.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis: Any = None, keepdims: bool = False, **numpy_args: Any) -> Variable:
        """Minimum over ``axis`` (numpy's ``initial`` and ``where`` as ``np.min``)."""
        if numpy_args:          # numpy's dtype=, initial=, where= (out= is refused there)
            return NUMPY_FORMS[np.min](self.rec, self, axis=axis, keepdims=keepdims,
                                        **numpy_args)
        return self.rec.min(self, axis=axis, keepdims=keepdims)

    def any(self, axis: Any = None, keepdims: bool = False, **numpy_args: Any) -> Variable:
        """Whether any entry over ``axis`` is true (a bool entry)."""
        if numpy_args:
            _numpy_defaults("any", self, numpy_args)
        return self.rec.any(self, axis=axis, keepdims=keepdims)

    def all(self, axis: Any = None, keepdims: bool = False, **numpy_args: Any) -> Variable:
        """Whether every entry over ``axis`` is true (a bool entry)."""
        if numpy_args:
            _numpy_defaults("all", self, numpy_args)
        return self.rec.all(self, axis=axis, keepdims=keepdims)

    def sign(self) -> Variable:
        """Elementwise -1, 0 or 1 (derivative 0)."""
        return self.rec.sign(self)

    def logsumexp(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """log(sum(exp(self))) over ``axis``, without overflow."""
        return self.rec.logsumexp(self, axis=axis, keepdims=keepdims)

    def softmax(self, axis: int = -1) -> Variable:
        """Softmax along ``axis``."""
        return self.rec.softmax(self, axis=axis)

    def log_softmax(self, axis: int = -1) -> Variable:
        """Log-softmax along ``axis``."""
        return self.rec.log_softmax(self, axis=axis)

    def exp(self) -> Variable:
        """Elementwise e ** self."""
        return self.rec.exp(self)

    def log(self) -> Variable:
        """Elementwise natural logarithm."""
        return self.rec.log(self)

    def sqrt(self) -> Variable:
        """Elementwise square root."""
        return self.rec.sqrt(self)

    def sin(self) -> Variable:
        """Elementwise sine."""
        return self.rec.sin(self)

    def cos(self) -> Variable:
        """Elementwise cosine."""
        return self.rec.cos(self)

    def tanh(self) -> Variable:
        """Elementwise hyperbolic tangent."""
        return self.rec.tanh(self)

    def sigmoid(self) -> Variable:
        """Elementwise logistic function."""
        return self.rec.sigmoid(self)

    def relu(self) -> Variable:
        """Elementwise max(self, 0)."""
        return self.rec.relu(self)

    def abs(self) -> Variable:
        """Elementwise absolute value."""
        return self.rec.abs(self)

    def expand(self, *shape: Any) -> Variable:
        """Broadcast to ``shape`` (given as a sequence or as separate ints)."""
        return self.rec.expand(self, _shape_args(shape))

    def reshape(self, *shape: Any) -> Variable:
        """The same entries in a new shape (given as a sequence or as separate ints)."""
        return self.rec.reshape(self, _shape_args(shape))

    def transpose(self, *axes: Any) -> Variable:
        """Axes permuted (reversed when none are given)."""
        return self.rec.transpose(self, _shape_args(axes) if axes else None)

    @property
    def T(self) -> Variable:  # noqa: N802 - numpy's name
        """The axes reversed."""
        return self.rec.transpose(self)

    def astype(self, dtype: Any) -> Variable:
        """The value converted to a floating ``dtype``."""
        return self.rec.cast(self, dtype)

    def detach(self) -> Variable:
        """A new leaf with the same value that no gradient flows through."""
        return self.rec.detach(self)

    def backward(self, seed: Any = None, create_graph: bool = False,
                 retain_graph: bool | None = None) -> None:
        """Accumulate d(self)/d(leaf) into ``.grad`` of every leaf that requires grad."""
        self.rec.backward(self, seed=seed, create_graph=create_graph, retain_graph=retain_graph)


def _numpy_defaults(method: str, x: Variable, numpy_args: dict) -> None:
    """np.sum(x) and friends call x.sum(axis=..., dtype=None, out=None): allow only defaults."""
    for key, value in numpy_args.items():
        if key not in ("dtype", "out", "where", "initial") or value is not None and not (
                key == "where" and value is True):
            raise ArgumentError(f"{method} of {x.name}: {key}={value!r} is not supported on "
                                "Variables")


def _shape_args(args: Sequence[Any]) -> tuple:
    if len(args) == 1 and not isinstance(args[0], (int, np.integer)):
        return tuple(args[0])
    return tuple(args)
