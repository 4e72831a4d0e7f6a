"""Variable: a value on an Ops' tape, with Python operators routed to that Ops."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, GraphError
from ..primitives import VariableMethods
from ..primitives.numpy_api import ufuncs

if TYPE_CHECKING:
    from .ops import Ops


class Variable(VariableMethods):
    """A value recorded on an ``Ops``: a leaf, or the output of one primitive.

    A Variable is also its own tape entry: ``prim``, ``inputs`` and ``attrs``
    say how it was computed (``prim`` is None for a leaf). ``raw`` is the stored
    array for engine code (never mutate it); ``value`` is the same array, read-only.

    The inputs of a unary or binary entry sit in the slots ``in0`` and ``in1`` (``in1`` is
    ``UNARY`` for one input) and ``more`` is None; any other count is the tuple ``more``.
    So the common entry is one object for the cycle collector to walk, not two (see
    ``inputs``).
    """

    __slots__ = ("raw", "label", "ops", "grad", "requires_grad", "prim", "in0", "in1", "more",
                 "attrs", "position", "__weakref__")
    __array_priority__ = 1000

    raw: Any           # the stored value; engine code reads it, users read .value
    label: int | str | None    # the v-number, the given name, or None (unrecorded)
    position: int      # an entry's place on the tape; a leaf's: where its dependents can start
    ops: Ops
    grad: Variable | None

    # ------------------------------------------------------------ data

    @property
    def value(self) -> np.ndarray:
        """The numpy value, read-only."""
        v = self.raw
        if type(v) is np.ndarray and v.flags.writeable:
            v.flags.writeable = False
        return v

    @property
    def name(self) -> str:
        """The given name, or ``v<N>`` from the Ops' counter; settable (the trace follows)."""
        n = self.label
        if type(n) is str:
            return n
        return "(unrecorded)" if n is None else f"v{n}"

    @name.setter
    def name(self, name: str) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise ArgumentError(f"a name must be a Python identifier, got {name!r}")
        self.label = name

    @property
    def shape(self) -> tuple:
        """Shape of the value."""
        return self.raw.shape

    @property
    def dtype(self) -> np.dtype:
        """dtype of the value."""
        return self.raw.dtype

    @property
    def ndim(self) -> int:
        """Number of dimensions of the value."""
        return self.raw.ndim

    @property
    def size(self) -> int:
        """Number of entries of the value."""
        return self.raw.size

    @property
    def inputs(self) -> tuple:
        """The inputs this entry was computed from (empty for a leaf)."""
        more = self.more
        if more is not None:
            return more
        b = self.in1
        return (self.in0,) if b is UNARY else (self.in0, b)

    @inputs.setter
    def inputs(self, inputs: tuple) -> None:
        set_inputs(self, inputs)

    @property
    def is_leaf(self) -> bool:
        """True for a variable created directly, not computed by a primitive."""
        return self.prim is None

    def item(self) -> float:
        """The single entry of a one-element variable as a Python number."""
        return self._one("item")

    def numpy(self) -> np.ndarray:
        """The value as a read-only numpy array (the same array as ``.value``, no copy)."""
        return self.value

    def __repr__(self) -> str:
        body = np.array2string(np.asarray(self.raw), precision=4, separator=", ")
        return f"Variable({self.name} = {body})"

    def __len__(self) -> int:
        if not self.raw.shape:
            raise TypeError(f"len() of a 0-d variable {self.name}")
        return self.raw.shape[0]

    def __bool__(self) -> bool:
        if self.raw.size != 1:
            raise TypeError(f"the truth value of {self.name} with shape {self.shape} "
                            "is ambiguous; use .value.any() or .value.all()")
        return bool(self.raw)

    def __float__(self) -> float:
        return float(self._one("float"))

    def __int__(self) -> int:
        return int(self._one("int"))

    def __format__(self, spec: str) -> str:
        if not spec:
            return str(self)
        return format(self._one("format"), spec)

    def _one(self, what: str) -> Any:
        if self.raw.size != 1:
            raise TypeError(f"{what}() of {self.name} with shape {self.shape}: only a "
                            "one-element Variable converts; use .value for the array")
        return self.raw.item()

    def __iter__(self):
        for i in range(len(self)):
            yield self.ops.getitem(self, i)

    # ------------------------------------------------------------ operators

    def __add__(self, other: Any) -> Variable:
        return self.ops.add(self, other)

    def __radd__(self, other: Any) -> Variable:
        return self.ops.add(other, self)

    def __sub__(self, other: Any) -> Variable:
        return self.ops.sub(self, other)

    def __rsub__(self, other: Any) -> Variable:
        return self.ops.sub(other, self)

    def __mul__(self, other: Any) -> Variable:
        return self.ops.mul(self, other)

    def __rmul__(self, other: Any) -> Variable:
        return self.ops.mul(other, self)

    def __truediv__(self, other: Any) -> Variable:
        return self.ops.div(self, other)

    def __rtruediv__(self, other: Any) -> Variable:
        return self.ops.div(other, self)

    def __pow__(self, other: Any) -> Variable:
        return self.ops.pow(self, other)

    def __rpow__(self, other: Any) -> Variable:
        return self.ops.pow(other, self)

    def __matmul__(self, other: Any) -> Variable:
        return self.ops.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Variable:
        return self.ops.matmul(other, self)

    def __neg__(self) -> Variable:
        return self.ops.neg(self)

    def __pos__(self) -> Variable:
        return self

    def __abs__(self) -> Variable:
        return self.ops.abs(self)

    def __getitem__(self, index: Any) -> Variable:
        return self.ops.getitem(self, index)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """numpy ufuncs on Variables: recorded as the matching primitive (np.exp(x), A @ x)."""
        if method == "__call__" and not kwargs:
            name = ufuncs().get(ufunc)
            if name is not None:
                return getattr(self.ops, name)(*inputs)
            if ufunc is np.equal:           # == stays identity, whichever side numpy is on
                return inputs[0] is inputs[1]
            if ufunc is np.not_equal:
                return inputs[0] is not inputs[1]
        called = ufunc.__name__ + ("" if method == "__call__" else f".{method}")
        raise ArgumentError(f"numpy's {called}{' with ' + ', '.join(kwargs) if kwargs else ''} has "
                        f"no simplegrad rule for {self.name}; use an op.<primitive> method, or "
                        f"{self.name}.value for the plain value")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise ArgumentError(f"{self.name} is a Variable: numpy would drop it from the tape. Use "
                        f"{self.name}.value for its (read-only) value, or a simplegrad operation "
                        "(op.concatenate, op.stack, op.where, ...) to keep it recorded")

    def __setitem__(self, index: Any, value: Any) -> None:
        raise GraphError(f"{self.name} is recorded and cannot be written into; build a new "
                         "variable instead (op.where, op.scatter_add, op.concatenate)")

    # comparisons record bool entries (no gradient); == and != stay identity
    def __lt__(self, other: Any) -> Variable:
        return self.ops.less(self, other)

    def __le__(self, other: Any) -> Variable:
        return self.ops.less_equal(self, other)

    def __gt__(self, other: Any) -> Variable:
        return self.ops.greater(self, other)

    def __ge__(self, other: Any) -> Variable:
        return self.ops.greater_equal(self, other)

    def __invert__(self) -> Variable:
        return self.ops.logical_not(self)

    def __and__(self, other: Any) -> Variable:
        return self.ops.logical_and(self, other)

    def __rand__(self, other: Any) -> Variable:
        return self.ops.logical_and(other, self)

    def __or__(self, other: Any) -> Variable:
        return self.ops.logical_or(self, other)

    def __ror__(self, other: Any) -> Variable:
        return self.ops.logical_or(other, self)

    __hash__ = object.__hash__

    # ------------------------------------------------------------ methods

    def sum(self, axis: Any = None, keepdims: bool = False, **numpy_args: Any) -> Variable:
        """Sum over ``axis``."""
        if numpy_args:
            _numpy_defaults("sum", self, numpy_args)
        return self.ops.sum(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False, **numpy_args: Any) -> Variable:
        """Mean over ``axis``."""
        if numpy_args:
            _numpy_defaults("mean", self, numpy_args)
        return self.ops.mean(self, axis=axis, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False, **numpy_args: Any) -> Variable:
        """Maximum over ``axis``."""
        if numpy_args:
            _numpy_defaults("max", self, numpy_args)
        return self.ops.max(self, axis=axis, keepdims=keepdims)

    def min(self, axis: Any = None, keepdims: bool = False, **numpy_args: Any) -> Variable:
        """Minimum over ``axis``."""
        if numpy_args:
            _numpy_defaults("min", self, numpy_args)
        return self.ops.min(self, axis=axis, keepdims=keepdims)

    def any(self, axis: Any = None, keepdims: bool = False, **numpy_args: Any) -> Variable:
        """Whether any entry over ``axis`` is true (a bool entry)."""
        if numpy_args:
            _numpy_defaults("any", self, numpy_args)
        return self.ops.any(self, axis=axis, keepdims=keepdims)

    def all(self, axis: Any = None, keepdims: bool = False, **numpy_args: Any) -> Variable:
        """Whether every entry over ``axis`` is true (a bool entry)."""
        if numpy_args:
            _numpy_defaults("all", self, numpy_args)
        return self.ops.all(self, axis=axis, keepdims=keepdims)

    def sign(self) -> Variable:
        """Elementwise -1, 0 or 1 (derivative 0)."""
        return self.ops.sign(self)

    def logsumexp(self, axis: Any = None, keepdims: bool = False) -> Variable:
        """log(sum(exp(self))) over ``axis``, without overflow."""
        return self.ops.logsumexp(self, axis=axis, keepdims=keepdims)

    def softmax(self, axis: int = -1) -> Variable:
        """Softmax along ``axis``."""
        return self.ops.softmax(self, axis=axis)

    def log_softmax(self, axis: int = -1) -> Variable:
        """Log-softmax along ``axis``."""
        return self.ops.log_softmax(self, axis=axis)

    def exp(self) -> Variable:
        """Elementwise e ** self."""
        return self.ops.exp(self)

    def log(self) -> Variable:
        """Elementwise natural logarithm."""
        return self.ops.log(self)

    def sqrt(self) -> Variable:
        """Elementwise square root."""
        return self.ops.sqrt(self)

    def sin(self) -> Variable:
        """Elementwise sine."""
        return self.ops.sin(self)

    def cos(self) -> Variable:
        """Elementwise cosine."""
        return self.ops.cos(self)

    def tanh(self) -> Variable:
        """Elementwise hyperbolic tangent."""
        return self.ops.tanh(self)

    def sigmoid(self) -> Variable:
        """Elementwise logistic function."""
        return self.ops.sigmoid(self)

    def relu(self) -> Variable:
        """Elementwise max(self, 0)."""
        return self.ops.relu(self)

    def abs(self) -> Variable:
        """Elementwise absolute value."""
        return self.ops.abs(self)

    def expand(self, *shape: Any) -> Variable:
        """Broadcast to ``shape`` (given as a sequence or as separate ints)."""
        return self.ops.expand(self, _shape_args(shape))

    def reshape(self, *shape: Any) -> Variable:
        """The same entries in a new shape (given as a sequence or as separate ints)."""
        return self.ops.reshape(self, _shape_args(shape))

    def transpose(self, *axes: Any) -> Variable:
        """Axes permuted (reversed when none are given)."""
        return self.ops.transpose(self, _shape_args(axes) if axes else None)

    @property
    def T(self) -> Variable:  # noqa: N802 - numpy's name
        """The axes reversed."""
        return self.ops.transpose(self)

    def astype(self, dtype: Any) -> Variable:
        """The value converted to a floating ``dtype``."""
        return self.ops.cast(self, dtype)

    def detach(self) -> Variable:
        """A new leaf with the same value that no gradient flows through."""
        return self.ops.detach(self)

    def backward(self, seed: Any = None, create_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into ``.grad`` of every leaf that requires grad."""
        self.ops.backward(self, seed=seed, create_graph=create_graph)


class _Unary:
    """The type of ``UNARY``, the ``in1`` of an entry with one input."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNARY"


UNARY = _Unary()


def set_inputs(v: Variable, inputs: tuple) -> None:
    """Store ``inputs`` in v's slots (see ``Variable``)."""
    n = len(inputs)
    if n == 2:
        v.in0, v.in1 = inputs
        v.more = None
    elif n == 1:
        v.in0 = inputs[0]
        v.in1 = UNARY
        v.more = None
    else:
        v.in0 = v.in1 = None
        v.more = tuple(inputs)


def leaf_variable(value: Any, ops: Any, label: int | str | None, requires_grad: bool,
                  position: int, cls: type | None = None) -> Variable:
    """A Variable computed by no primitive (a leaf, a seed, an unrecorded or free value)."""
    v = object.__new__(cls or Variable)
    v.raw = value
    v.ops = ops
    v.label = label
    v.grad = None
    v.requires_grad = requires_grad
    v.prim = None
    set_inputs(v, ())
    v.attrs = None
    v.position = position
    return v




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
