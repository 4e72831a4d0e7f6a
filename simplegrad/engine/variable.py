"""Variable: a value on an Ops' tape, and the tape entry that computed it.

Its Python operators and array methods (``x + y``, ``x.sum()``) are in operators.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, ConversionWarning, GraphError, warn
from ..primitives import VariableMethods
from ..primitives.numpy_api import array_refusal, ufunc_refusal, ufuncs
from .operators import Operators

if TYPE_CHECKING:
    from .ops import Ops
    from .params import FreeOps


class Variable(Operators, VariableMethods):
    """A value recorded on an ``Ops``: a leaf, or the output of one primitive.

    A Variable is also its own tape entry: ``prim``, ``inputs`` and ``attrs``
    say how it was computed (``prim`` is None for a leaf). ``raw`` is the stored
    array for engine code (never mutate it); ``value`` is a view of it that no flag set on it
    can make writable (recorded values are immutable).

    The inputs of a unary or binary entry sit in the slots ``in0`` and ``in1`` (``in1`` is
    ``UNARY`` for one input) and ``more`` is None; any other count is the tuple ``more``.
    So the common entry is one object for the cycle collector to walk, not two (see
    ``inputs``).
    """

    __slots__ = ("raw", "label", "rec", "grad", "requires_grad", "prim", "in0", "in1", "more",
                 "attrs", "position", "__weakref__")
    __array_priority__ = 1000

    raw: Any           # the stored value; engine code reads it, users read .value
    label: int | str | None    # the v-number, the given name, or None (unrecorded)
    position: int      # an entry's place on the tape; a leaf's: where its dependents can start
    rec: Ops           # the recorder: the Ops object that records and differentiates it
    grad: Variable | None

    # ------------------------------------------------------------ data

    @property
    def ops(self) -> Ops:
        """The Ops this Variable belongs to: the ``sg.Ops()`` you hold, or, once nothing holds
        that any more, the recorder behind it (same tape, same methods)."""
        r = self.rec
        face = r.face
        if face is not None:
            f = face()
            if f is not None:
                return f
        return r

    @property
    def value(self) -> np.ndarray:
        """The numpy value, read-only: a view that cannot be made writable (no copy)."""
        v = self.raw
        if type(v) is not np.ndarray:
            return v
        if v.flags.writeable:
            v.flags.writeable = False
        base = v.base       # numpy refuses writeable=True on a view whose bases are read-only
        if type(base) is np.ndarray and base.flags.writeable and \
                not getattr(self.rec, "borrow", False):     # (a borrowed base is the caller's)
            base.flags.writeable = False
        return v.view()

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
        number = float(self._one("float"))
        if self.requires_grad and not isinstance(self.attrs, NoHistory):
            _warn_dropped(self, "float")
        return number

    def __int__(self) -> int:
        number = int(self._one("int"))
        if self.requires_grad and not isinstance(self.attrs, NoHistory):
            _warn_dropped(self, "int")
        return number

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
            yield self.rec.getitem(self, i)

    # ------------------------------------------------------------ numpy's protocols

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """numpy ufuncs on Variables: recorded as the matching primitive (np.exp(x), A @ x)."""
        if method == "__call__" and not kwargs:
            name = ufuncs().get(ufunc)
            if name is not None:
                return getattr(self.rec, name)(*inputs)
            if ufunc is np.equal:           # == stays identity, whichever side numpy is on
                return inputs[0] is inputs[1]
            if ufunc is np.not_equal:
                return inputs[0] is not inputs[1]
        raise ArgumentError(ufunc_refusal(ufunc, method, kwargs, self.name))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise ArgumentError(array_refusal(self.name, dtype))

    def __setitem__(self, index: Any, value: Any) -> None:
        raise GraphError(f"{self.name} is recorded and cannot be written into; build a new "
                         "variable instead (op.where, op.scatter_add, op.concatenate)")

    __hash__ = object.__hash__


def _warn_dropped(v: Variable, what: str) -> None:
    """Warn that ``what``(v) gives a constant: no gradient flows through the number. The
    message names no Variable, so Python's default filter shows it once per line."""
    warn(f"{what}() of a Variable that carries a gradient history gives a plain number: no "
         "gradient flows through it (numpy's y[i] = v into a numpy array y converts the same "
         "way). To keep the dependence, build the array from Variables: x.at[i].set(v), "
         "np.stack([...]) or np.where; to print or log, use v.item() or v.value (no warning)",
         ConversionWarning)


class NoHistory:
    """Why a Variable that was computed has no history to differentiate: the ``attrs`` of such
    a leaf (``RELEASED``: its Ops was released after it was recorded; ``UNRECORDED``: computed
    under ``no_grad``). A leaf made as a leaf has ``attrs`` None."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return self.reason.upper()


RELEASED = NoHistory("released")
UNRECORDED = NoHistory("unrecorded")


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


def leaf_variable(value: Any, ops: Ops | FreeOps, label: int | str | None, requires_grad: bool,
                  position: int, cls: type | None = None) -> Variable:
    """A Variable computed by no primitive (a leaf, a seed, an unrecorded or free value)."""
    v = object.__new__(cls or Variable)
    v.raw = value
    v.rec = ops
    v.label = label
    v.grad = None
    v.requires_grad = requires_grad
    v.prim = None
    set_inputs(v, ())
    v.attrs = None
    v.position = position
    return v
