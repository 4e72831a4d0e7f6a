"""The tape entry (``Entry``, a plain record) and the ``Variable`` a user holds (its handle).

An entry is what a primitive records: the primitive, its input entries (or constants), its
attributes, its output's shape, dtype and name, and only the values its rules read (``raw``,
None once no rule needs it: ``Primitive.saves``). It points at no Variable and at no Ops, so a
tape and the Variables recorded on it form no reference cycle. A Variable is the handle: its
value, its entry and its Ops, with its Python operators and array methods (``x + y``,
``x.sum()``: ``Operators``).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError, ConversionWarning, DTypeError, GraphError, warn
from ..primitives import VariableMethods
from ..primitives.elementwise import (
    ADD,
    COS,
    DIV,
    EXP,
    LOG,
    MUL,
    NEG,
    SIGMOID,
    SIN,
    SQRT,
    SUB,
    TANH,
)
from ..primitives.numpy_api import array_refusal, ufunc_refusal, ufuncs
from ..primitives.numpy_arrays import ENTRIES as NUMPY_FORMS
from ..primitives.piecewise import ABS, RELU, SIGN
from .guards import note as note_decision

if TYPE_CHECKING:
    from .ops import Ops
    from .params import FreeOps

# ---------------------------------------------------------------- a Variable's operators


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
        return self.rec.apply(NEG, (self,), None, None)

    def __pos__(self) -> Variable:
        return self

    def __abs__(self) -> Variable:
        return self.rec.apply(ABS, (self,), None, None)

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
        return self.rec.apply(SIGN, (self,), None, None)

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
        return self.rec.apply(EXP, (self,), None, None)

    def log(self) -> Variable:
        """Elementwise natural logarithm."""
        return self.rec.apply(LOG, (self,), None, None)

    def sqrt(self) -> Variable:
        """Elementwise square root."""
        return self.rec.apply(SQRT, (self,), None, None)

    def sin(self) -> Variable:
        """Elementwise sine."""
        return self.rec.apply(SIN, (self,), None, None)

    def cos(self) -> Variable:
        """Elementwise cosine."""
        return self.rec.apply(COS, (self,), None, None)

    def tanh(self) -> Variable:
        """Elementwise hyperbolic tangent."""
        return self.rec.apply(TANH, (self,), None, None)

    def sigmoid(self) -> Variable:
        """Elementwise logistic function."""
        return self.rec.apply(SIGMOID, (self,), None, None)

    def relu(self) -> Variable:
        """Elementwise max(self, 0)."""
        return self.rec.apply(RELU, (self,), None, None)

    def abs(self) -> Variable:
        """Elementwise absolute value."""
        return self.rec.apply(ABS, (self,), None, None)

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
        """The same value, recorded as an entry through which no gradient flows
        (``sg.stop_gradient``)."""
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


# ---------------------------------------------------------------- a leaf's value from user data

MASKED = ("masked arrays are not supported (the mask would be dropped): pass "
          "np.ma.filled(m, fill), or pass m.data and apply the mask inside with "
          "np.where(np.ma.getmaskarray(m), fill, x)")
_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64),
           np.dtype(np.complex64), np.dtype(np.complex128))


def float_array(value: Any, name: str | None, borrow: bool = False) -> np.ndarray:
    """A fresh float array from user data (bool and int become float64); ``borrow``: a view of
    a float array, not a copy."""
    if type(value) is np.ndarray and value.dtype in _FLOATS:    # (the common call)
        return value.view() if borrow else np.array(value)
    if isinstance(value, Variable):
        value = value.raw
    if isinstance(value, np.ma.MaskedArray):
        raise ArgumentError(f"var {name or ''}: {MASKED}")
    try:
        arr = np.asarray(value).view() if borrow else np.array(value)
    except MemoryError:
        raise
    except Exception as e:
        raise DTypeError(f"var {name or ''}: cannot make an array of {type(value).__name__}: "
                         f"{e}") from None
    if arr.dtype in _FLOATS:
        return arr
    if arr.dtype.kind in "biu":
        return arr.astype(np.float64)
    raise DTypeError(f"var {name or ''}: values of dtype {arr.dtype} cannot be differentiated; "
                     "use floats (float16, float32, float64) or complex64/complex128")


# ---------------------------------------------------------------- entries


class Entry:
    """One recorded entry of a tape, or a leaf: a plain record (see the module docstring).

    The inputs of a unary or binary entry sit in the slots ``in0`` and ``in1`` (``in1`` is
    ``UNARY`` for one input) and ``more`` is None; any other count is the tuple ``more``.
    ``raw`` is the value when a rule reads it (a leaf always keeps its own), else None.
    """

    __slots__ = ("prim", "in0", "in1", "more", "attrs", "position", "label", "shape", "dtype",
                 "requires_grad", "raw", "__weakref__")

    prim: Any           # the primitive; None for a leaf
    label: int | str | None    # the v-number or the given name
    position: int       # its place on the tape; a leaf's: where its dependents can start
    raw: Any            # its value when a rule reads it (always for a leaf), else None
    shape: tuple        # its output's shape and dtype
    dtype: Any

    def forget(self) -> None:
        """Let go of the value (its shape and dtype stay)."""
        self.raw = None

    @property
    def name(self) -> str:
        """The given name, or ``v<N>`` from the Ops' counter."""
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
    def inputs(self) -> tuple:
        """The input entries (and constants) this entry was computed from (empty for a leaf)."""
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
        """True for an entry computed by no primitive."""
        return self.prim is None

    @property
    def ndim(self) -> int:
        """Number of dimensions of the output."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of entries of the output."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def value(self) -> Any:
        """The value: the one the entry keeps, or recomputed by replay (``value_of``)."""
        return value_of(self)

    def __repr__(self) -> str:
        what = "leaf" if self.prim is None else self.prim.name
        return f"<entry {self.name}: {what} {self.shape} {self.dtype}>"


def entry_of(x: Any) -> Any:
    """The entry behind a Variable; an entry, a constant or anything else as it is."""
    return x.node if isinstance(x, Variable) and x.node is not None else x

# ---------------------------------------------------------------- Variables


class Variable(Operators, VariableMethods):
    """A value recorded on an ``Ops``: the handle of a leaf, or of the output of a primitive.

    ``node`` is its tape entry (``prim``, ``inputs`` and ``attrs`` say how it was computed;
    ``prim`` is None for a leaf), ``rec`` its Ops. ``raw`` is the stored array for engine
    code (never mutate it); ``value`` is a view of it that no flag set on it can make writable
    (recorded values are immutable).
    """

    __slots__ = ("raw", "node", "rec", "grad", "__weakref__")
    __array_priority__ = 1000

    raw: Any           # the stored value; engine code reads it, users read .value
    node: Entry        # the tape entry (or a leaf's)
    rec: Ops           # the Ops that records and differentiates it
    grad: Variable | None

    # ------------------------------------------------------------ data

    @property
    def ops(self) -> Ops:
        """The Ops this Variable belongs to."""
        return self.rec

    @property
    def value(self) -> np.ndarray:
        """The numpy value, read-only: a view that cannot be made writable (no copy)."""
        v = self.raw
        if type(v) is not np.ndarray:
            return v
        if v.flags.writeable:
            v.setflags(write=False)
        base = v.base       # numpy refuses writeable=True on a view whose bases are read-only
        if type(base) is np.ndarray and base.flags.writeable and \
                not getattr(self.rec, "borrow", False):     # (a borrowed base is the caller's)
            base.setflags(write=False)
        return v.view()

    @property
    def label(self) -> int | str | None:
        """The v-number, the given name, or None (unrecorded): the entry's."""
        return self.node.label

    @label.setter
    def label(self, label: int | str | None) -> None:
        self.node.label = label

    @property
    def name(self) -> str:
        """The given name, or ``v<N>`` from the Ops' counter; settable (the trace follows)."""
        n = self.node.label
        if type(n) is str:
            return n
        return "(unrecorded)" if n is None else f"v{n}"

    @name.setter
    def name(self, name: str) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise ArgumentError(f"a name must be a Python identifier, got {name!r}")
        self.node.label = name

    @property
    def prim(self) -> Any:
        """The primitive that computed it (None for a leaf)."""
        return self.node.prim

    @property
    def inputs(self) -> tuple:
        """The entries (and constants) it was computed from (empty for a leaf)."""
        return self.node.inputs

    @property
    def attrs(self) -> Any:
        """The attributes of its entry."""
        return self.node.attrs

    @property
    def position(self) -> int:
        """Its entry's place on the tape."""
        return self.node.position

    @property
    def requires_grad(self) -> bool:
        """Whether a gradient flows to it."""
        return self.node.requires_grad

    @requires_grad.setter
    def requires_grad(self, on: bool) -> None:
        self.node.requires_grad = on

    # (read in every rule: C-level getters, no Python frame per read)
    shape = property(attrgetter("raw.shape"), doc="Shape of the value.")
    dtype = property(attrgetter("raw.dtype"), doc="dtype of the value.")

    @property
    def ndim(self) -> int:
        """Number of dimensions of the value."""
        return self.raw.ndim

    @property
    def size(self) -> int:
        """Number of entries of the value."""
        return self.raw.size

    @property
    def is_leaf(self) -> bool:
        """True for a variable created directly, not computed by a primitive."""
        return self.node.prim is None

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
        seen = bool(self.raw)
        note_decision(self, "bool", seen)     # a guard: a replay must decide the same
        return seen

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
        seen = self.raw.item()
        if what != "format":        # (printing decides nothing)
            note_decision(self, "item", seen)
        return seen

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


def set_inputs(v: Entry, inputs: tuple) -> None:
    """Store ``inputs`` in the entry's slots (see ``Entry``)."""
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


def leaf_entry(value: Any, label: int | str | None, requires_grad: bool, position: int,
               attrs: Any = None) -> Entry:
    """An entry computed by no primitive (a leaf, a seed, an unrecorded or free value)."""
    e = Entry()      # (a class call with no arguments: no argument tuple)
    e.prim = None
    e.in0 = e.in1 = None
    e.more = ()
    e.attrs = attrs
    e.position = position
    e.label = label
    e.shape = getattr(value, "shape", ())
    e.dtype = getattr(value, "dtype", None)
    e.requires_grad = requires_grad
    e.raw = value
    return e


def handle(value: Any, node: Entry, ops: Any, cls: type | None = None) -> Variable:
    """The Variable holding ``value`` for ``node`` on ``ops``."""
    v = Variable() if cls is None else object.__new__(cls)
    v.raw = value
    v.node = node
    v.rec = ops
    v.grad = None
    return v


def leaf_variable(value: Any, ops: Ops | FreeOps, label: int | str | None, requires_grad: bool,
                  position: int, cls: type | None = None) -> Variable:
    """A Variable computed by no primitive (a leaf, a seed, an unrecorded or free value)."""
    return handle(value, leaf_entry(value, label, requires_grad, position), ops, cls)


def value_of(e: Any) -> Any:
    """The value of an entry: the one it keeps, or recomputed from its inputs' values by
    replaying the entries whose values were freed (then kept on them); a Variable's own value
    and a constant as they are."""
    if type(e) is not Entry:
        return e.raw if isinstance(e, Variable) else e
    if e.raw is not None:
        return e.raw
    need: dict[int, Entry] = {}     # position -> entry whose value is gone
    stack = [e]
    while stack:
        v = stack.pop()
        if v.raw is not None or v.position in need:
            continue
        if v.prim is None:
            raise GraphError(f"{e.name}: the value of {v.name}, which it is computed from, is "
                             "gone (its Ops was released and nothing kept it), so it cannot be "
                             "recomputed")
        need[v.position] = v
        stack.extend(x for x in v.inputs if type(x) is Entry and x.raw is None)
    for p in sorted(need):
        v = need[p]
        values = [x.raw if type(x) is Entry else x for x in v.inputs]
        with np.errstate(all="ignore"):     # (its recording warned already, if it did)
            out = v.prim.forward(*values, **v.attrs) if v.attrs else v.prim.forward(*values)
        if type(out) is not np.ndarray and isinstance(out, np.generic):
            out = np.asarray(out)
        v.raw = out
    return e.raw
