"""The primitive record, the registry, the rule signatures (Protocols), and the helpers every
rule shares, among them those that undo broadcasting (``unbroadcast`` and the structural-zero
masks, at the end).

Vocabulary, used everywhere in ``primitives/``:

- ``o`` is the object a rule computes with. During a recorded sweep it is the
  ``Ops`` (inputs are Variables, results are recorded); without recording it
  is ``VALUES`` (inputs are numpy arrays, results are plain arrays). The same
  rule text serves both, which is what makes every order work.
- ``g`` is the incoming cotangent, ``t`` an incoming tangent, ``out`` the
  primal output, ``x``, ``y`` the inputs.
- A vjp rule returns the cotangent of one input; ``None`` in the rule table
  means "no gradient flows" and keeps zeros off the tape.
- A jvp rule gets one tangent per input (``None`` for "no tangent") and
  returns the tangent of the output, or ``None``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from ..errors import AxisError
from .schema import Schema

if TYPE_CHECKING:
    from . import PrimitiveMethods
    from .series import Series

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import PrimitiveMethods

Sampler = Callable[[np.random.Generator, tuple], np.ndarray]
# the fewest entries a fused rule (FusedVjpRule) computes: below it numpy's calls with ``out=``
# cost more than the arrays they save (measured on 4 to 2^18 float64 entries: equal at 4096)
FUSED_SIZE = 4096
HELD = object()  # a variadic vjp's "no derivative in this input" (None: zero); sweeps raise


@dataclass(frozen=True)
class Case:
    """One check configuration: input shapes, attributes and per-input samplers."""

    shapes: tuple
    attrs: dict = field(default_factory=dict)
    domain: tuple | None = None  # one sampler per input; None means the primitive's default
    label: str = ""
    conditions: tuple = ()  # inputs given as ``sample > 0`` (recorded bool entries)


# ---------------------------------------------------------------- rule signatures
#
# A rule computes with ``o`` (the recording Ops or VALUES) and calls only primitives on it.
# ``*xs`` are the entry's inputs (Variables and constants, or plain values in a value-only
# sweep), ``out`` its output, ``**attrs`` its attributes; a rule answers None for "nothing
# flows" (no gradient, no tangent, no mask), which keeps zeros off the tape.


class Forward(Protocol):
    """The output's value: numpy on the inputs' values."""

    def __call__(self, *xs: Any, **attrs: Any) -> Any: ...


class VjpRule(Protocol):
    """The cotangent of the input at the rule's place in ``vjp``, from ``g``, the output's
    (engine/reverse.py); None: no gradient flows to it."""

    def __call__(self, o: PrimitiveMethods, g: Any, out: Any, /, *xs: Any,
                 **attrs: Any) -> Any: ...


class FusedVjpRule(Protocol):
    """A vjp rule's value on plain numpy arrays, for an input of the output's shape, computed
    into one new array that nothing else holds (a value-only sweep owns it and may add into
    it in place), equal to the rule's value within 1 ulp, or a read-only view of a value the
    rule's value equals exactly (handed on: the sweep does not own it); None where it does
    not apply (the sweep then calls the rule), among them arrays of fewer than
    ``FUSED_SIZE`` entries."""

    def __call__(self, g: Any, out: Any, /, *xs: Any, **attrs: Any) -> Any: ...


class MaskedVjpRule(Protocol):
    """The vjp rule used below a mask ``m`` (elementwise primitives): the cotangent, with
    exact zeros where m holds."""

    def __call__(self, o: PrimitiveMethods, g: Any, out: Any, m: Any, /, *xs: Any,
                 **attrs: Any) -> Any: ...


class VariadicVjpRule(Protocol):
    """The one vjp rule of a variadic primitive (any number of inputs): the cotangent of input
    ``i``."""

    def __call__(self, o: PrimitiveMethods, g: Any, out: Any, i: int, /, *xs: Any,
                 **attrs: Any) -> Any: ...


class JvpRule(Protocol):
    """The output's tangent from one tangent per input, ``ts`` (None for "no tangent"), or
    None (engine/forward.py, engine/batched.py)."""

    def __call__(self, o: PrimitiveMethods, ts: Sequence[Any], out: Any, /, *xs: Any,
                 **attrs: Any) -> Any: ...


class MaskRule(Protocol):
    """Where input ``i``'s cotangent is zero by construction, given ``m``, where the output's
    is (a bool entry or constant broadcastable to the output's shape, or None when the record
    is a ``mask_source``); None: nowhere (see the masks at the end of this module)."""

    def __call__(self, o: PrimitiveMethods, m: Any, i: int, out: Any, /, *xs: Any,
                 **attrs: Any) -> Any: ...


class BatchRule(Protocol):
    """The output for a batch of examples at once, ``batched[i]`` saying whether input i
    carries them along a leading axis (see "batching rules" below; engine/batching.py)."""

    def __call__(self, o: PrimitiveMethods, xs: Sequence[Any], batched: Sequence[bool], /,
                 **attrs: Any) -> Any: ...


class TaylorRule(Protocol):
    """The output's truncated Taylor series from one series per input, ``ss`` (taylor.py;
    engine/taylor.py)."""

    def __call__(self, o: PrimitiveMethods, ss: list[Series], out: Any, /, *xs: Any,
                 **attrs: Any) -> Series: ...


class PrintRule(Protocol):
    """An entry's trace text from its inputs' texts, its attributes and a value renderer."""

    def __call__(self, args: list[str], attrs: dict, render: Callable, /) -> str: ...


# ---------------------------------------------------------------- algebra and other facts
#
# Facts the engine, the compiler and the transforms read from the record (never by name):
# linearity (transforms/linearity.py), commutativity and units (the simplifier, the common
# subexpression key, the batched sweep), and the forms of other backends.

JOINT, EACH = "jointly", "each"


class Linear(NamedTuple):
    """In which inputs a primitive is linear: ``JOINT``, in those inputs together (a constant
    among them makes an entry affine unless it is zero), or ``EACH``, in any one of them with
    the others constant (two moving inputs make it bilinear); ``positions`` None means every
    input, or a function of an entry's attributes giving them (a loop: the inputs its body is
    linear in). ``when(attrs)`` says whether an entry's attributes keep it linear (None:
    always)."""

    kind: str
    positions: tuple[int, ...] | Callable[[dict], tuple[int, ...]] | None = None
    when: Callable[[dict], bool] | None = None

    def at(self, n: int, attrs: dict | None) -> tuple[str, frozenset[int]] | None:
        """(kind, positions) for an entry of ``n`` inputs and these attributes, or None."""
        if self.when is not None and not self.when(attrs or {}):
            return None
        if self.positions is None:
            return self.kind, _EVERY[n] if n < len(_EVERY) else frozenset(range(n))
        given = self.positions(attrs or {}) if callable(self.positions) else self.positions
        return self.kind, frozenset(i for i in given if i < n)


_EVERY = tuple(frozenset(range(n)) for n in range(8))   # (Linear.at: every input of n)


JOINTLY, EACH_ALONE = Linear(JOINT), Linear(EACH)


class Unit(NamedTuple):
    """A constant ``value`` that leaves the input at each of positions ``kept`` as it is when
    it is the other operand (``x * 1``, ``1 * x``, ``x - 0``); ``exact``: bit for bit, nan and
    -0.0 included, for any operand equal to ``value`` (``x + 0`` is not: -0.0 + 0 is +0.0, nor
    ``x - 0``, whose 0 may be -0.0)."""

    value: int
    kept: tuple[int, ...]
    exact: bool


class SymPyForm(NamedTuple):
    """A primitive's closed form in SymPy (program/symbolic.py): ``entry(sp, *args, **attrs)``
    on scalar expressions (None: it has none); ``matrix(sp, *args, **attrs)`` on matrix
    expressions, or None where it has no matrix form; ``single``: the entry form holds only
    when each argument has one entry (a sum of one); ``matrices``: its 2-D inputs are
    matrices (a matrix product), not entrywise values; ``array``: its numpy forward, run on
    object arrays of SymPy expressions, is its closed form entry by entry (data movement,
    sums, matrix products: a program of small arrays, entry by entry)."""

    entry: Callable | None = None
    matrix: Callable | None = None
    single: bool = False
    matrices: bool = False
    array: bool = False


def sympy_call(fn: str) -> SymPyForm:
    """The SymPy form ``sp.<fn>(x)`` of a one-input elementwise primitive."""
    return SymPyForm(lambda sp, x, **attrs: getattr(sp, fn)(x))


PASSES_ON = SymPyForm(lambda sp, x, **attrs: x)      # each entry's value passes on unchanged
ON_ENTRIES = SymPyForm(array=True)      # numpy's forward on arrays of expressions is the form


class LoopForms(NamedTuple):
    """How a loop compiled by ``sg.compile`` writes an entry of a primitive whose form there is
    its own (primitives/loops.py; the others' forms follow from their records' other facts):
    ``kernel(node, shapes)``, its form in a loop compiled whole (a tuple ``kernel_form``
    names, or None: not written there); ``stacked(node, args, stacked, shapes, steps)``, the
    source of the entry on the arrays of all steps at once doing each step's arithmetic
    exactly (None: left in the loop); ``step(node, args, kinds, shapes)``, a function called
    once before the loop on some arguments, making the callable each trip calls on one (with
    those arguments and that one), or None."""

    kernel: Callable | None = None
    stacked: Callable | None = None
    step: Callable | None = None


class StackRule(Protocol):
    """A primitive's output on stacked values (engine/batched.py's value-only sweep) computed
    more directly than by its batching rule: ``inputs`` as given (a ``stack`` instance holds K
    examples along a leading axis in ``.inner``, ``.eye`` when it is the identity basis),
    ``xs`` the plain arrays, ``flags[i]`` whether input i is a stack, ``rank`` the stacks' rank
    (-1 when they differ). A ``stack`` (or an input as it is) out, or None: the general path."""

    def __call__(self, inputs: Sequence[Any], xs: Sequence[Any], flags: Sequence[bool],
                 rank: int, attrs: dict, stack: type, /) -> Any: ...


class DiagonalRule(Protocol):
    """A primitive's output on inputs among which a diagonal stack (engine/batched.py: K
    examples, example k ``.diag[k]`` times the k-th unit vector; ``.eye`` when the diagonal is
    all ones), computed without building the K x K stack: ``inputs`` as given, a ``stack``
    (made with ``stack(inner, fresh=...)`` or ``stack.diagonal(diag)``) out, or None: the
    dense stack's path."""

    def __call__(self, inputs: Sequence[Any], attrs: dict, stack: type, /) -> Any: ...


class Primitive:
    """One differentiable operation: forward, vjp, jvp, print rule, check metadata, and the
    optional mask, batching and Taylor rules (their signatures are the Protocols above)."""

    __slots__ = ("name", "forward", "vjp", "jvp", "fmt", "cases", "domain", "variadic",
                 "sparse_vjp", "vjp_same", "vjp_fused", "common", "tol", "plain", "mask",
                 "mask_source", "elementwise", "differentiable", "vjp_masked", "batch",
                 "taylor", "numpy", "schema",
                 "saves", "saved_inputs", "saves_out", "linear", "commutative", "associative",
                 "ring", "unit", "reduces", "rewrites", "simplifies", "on_stacks",
                 "on_diagonal", "numpy_at", "numba", "python", "python_check", "sympy", "alias",
                 "accumulation", "sized",
                 "counted", "scales", "maps_rows", "sparsity", "release", "work", "trips",
                 "statement", "loop_forms", "__weakref__")

    def __init__(self, name: str, forward: Forward,
                 vjp: Sequence[VjpRule | None] | Sequence[VariadicVjpRule],
                 jvp: JvpRule | None, fmt: str | PrintRule, cases: Sequence[Case],
                 domain: tuple | None = None, variadic: bool = False, sparse_vjp: bool = False,
                 tol: float = 1e-6, plain: bool | None = None, mask: MaskRule | None = None,
                 mask_source: bool = False, elementwise: bool = False,
                 differentiable: bool = True, batch: BatchRule | None = None,
                 taylor: TaylorRule | None = None, numpy: str | None = None,
                 schema: Schema | None = None, linear: Linear | None = None,
                 commutative: bool = False, associative: Callable | None = None,
                 ring: str | None = None, unit: Unit | None = None, reduces: Callable | None = None,
                 rewrites: Callable | None = None, simplifies: Callable | None = None,
                 on_stacks: StackRule | None = None, on_diagonal: DiagonalRule | None = None,
                 numpy_at: Callable[[list, dict], str | None] | None = None,
                 numba: str | None = None, python: str | None = None,
                 python_check: str | None = None, sympy: SymPyForm | None = None,
                 alias: bool = False,
                 accumulation: str | None = None, sized: str | None = None,
                 counted: bool | float = False, scales: str | None = None,
                 maps_rows: bool = False, loop_forms: LoopForms | None = None,
                 saves: Sequence[str | int] = ("inputs", "out")):
        self.name = name
        self.forward = forward
        # one VjpRule per input (None: no gradient flows to it); variadic: one VariadicVjpRule
        self.vjp = tuple(vjp)
        self.jvp = jvp
        self.fmt = fmt
        self.cases = tuple(cases)
        self.domain = domain
        self.variadic = variadic
        self.sparse_vjp = sparse_vjp
        self.tol = tol
        # plain: forward(*inputs, **attrs) has the signature of the Ops method minus name=,
        # so value-only sweeps may call it directly
        self.plain = not variadic if plain is None else plain
        # None when no structural zeros pass through this primitive
        self.mask = mask
        self.mask_source = mask_source  # the mask rule runs even when m is None (where)
        # (vjp, the rules for an input whose shape is the output's: no unbroadcast to do),
        # an elementwise record's derivative rules (elementwise() sets them), else vjp again;
        # a sweep uses them (and vjp_fused) only while ``vjp`` is the tuple they were made beside
        self.vjp_same = (self.vjp, self.vjp)
        # one FusedVjpRule per input (None: none), or None: the cotangent of an input of the
        # output's shape on plain arrays, in one new buffer by in-place ufuncs; value-only
        # sweeps use them beside the ``vjp`` that ``vjp_same`` was made with (elementwise())
        self.vjp_fused: tuple[FusedVjpRule | None, ...] | None = None
        # the sweeps' common entry: one rule per input, no sparse cotangent, no mask source
        self.common = not (variadic or sparse_vjp or mask_source)
        self.elementwise = elementwise
        # differentiable=False: the output (bool or integer) carries no gradient or tangent
        self.differentiable = differentiable
        # one MaskedVjpRule per input, used below a mask (elementwise primitives)
        self.vjp_masked: tuple[MaskedVjpRule | None, ...] | None = None
        # None: engine/batching.py loops over the examples and stacks
        self.batch = batch
        # None: Taylor mode refuses this primitive and sg.derivative nests jvps through it
        self.taylor = taylor
        # numpy: the numpy expression the primitive compiles to (program/compile.py), a
        # template with {0}, {1}, ... for the inputs and {attr} for each attribute; None: a
        # call of forward
        self.numpy = numpy
        self.schema = schema    # the attributes it records, checked on save and load (schema.py)
        # the values its reverse-mode rules (vjp, vjp_masked, mask) read: "inputs" (all), input
        # positions, "out"; () reads shapes only. An entry keeps only these of its Variables
        # (constants are always kept); the default keeps everything. Read by the engine as
        # ``saved_inputs`` (the positions kept, None: every input) and ``saves_out``.
        self.saves, self.saved_inputs, self.saves_out = normalize_saves(
            name, saves, None if variadic else len(self.vjp))
        # ---- algebra: None / False when it does not hold
        self.linear = linear                # in which inputs it is linear (Linear above)
        self.commutative = commutative      # f(x, y) == f(y, x): keys take either order
        # associative(c1, c2): c1 f c2 for Python numbers, where (x f c1) f c2 == x f (c1 f c2)
        # (the simplifiers fold the numbers: (x * 2.0) * 0.5 is x * 1.0)
        self.associative = associative
        # ring: its place in polynomial arithmetic, "add", "sub", "mul" or "neg" (the
        # simplifier's expanded normal form, polynomials.py)
        self.ring = ring
        self.unit = unit                    # the constant that leaves an operand as it is
        # the simplifier's identities (rewrites.py): reduces(prim, inputs, attrs, describe),
        # the input an entry equals (``--x`` is x), or None; rewrites(...), an equal entry
        # ``(prim, inputs, attrs)`` in a simpler form (``x + x`` is ``x * 2.0``), or None;
        # simplifies(prim, inputs, attrs), on tape inputs: False when no rule can apply
        # (``always`` when a record with identities states no quick test)
        self.reduces = reduces
        self.rewrites = rewrites
        if simplifies is None and (reduces is not None or rewrites is not None or
                                   unit is not None):
            simplifies = always
        self.simplifies = simplifies    # (None: no rule applies)
        # ---- special forms
        self.on_stacks = on_stacks          # a direct form on stacked values (StackRule)
        self.on_diagonal = on_diagonal      # a direct form on a diagonal stack (DiagonalRule)
        # numpy_at(shapes, attrs, dtypes): a numpy template (as ``numpy``) valid for inputs of
        # these static shapes (None where unknown) and dtypes, or None: used where ``numpy`` is
        # None
        self.numpy_at = numpy_at
        # numba: the entry on one element of each argument in a fused loop, a template with
        # {0}, {1}, ... (``_w_exp`` and ``_w_tanh`` are the loop's own functions); for a full
        # reduction the loop can accumulate, the accumulating operator ("+=")
        self.numba = numba
        # python: the entry on Python floats in a compiled program of float64 numbers and
        # decisions alone (every value of shape (): program/floats.py), a template with {0},
        # {1}, ... whose double (or bool) is numpy's result bit for bit and which, where numpy
        # would warn (a division by zero, an overflow), raises an ArithmeticError or gives a
        # number that is not finite, once the condition ``python_check`` (a template as well,
        # with the name ``finite``: math.isfinite) holds before it runs: for a ufunc, the
        # inputs on which it raises no floating-point error; for a form a value that is not
        # finite could vanish in (tanh(inf) is 1, x / inf is 0), that it is finite; ``{f}`` in
        # it names the record's own forward (``float({f}({0}))``: the forward on the number,
        # for a record whose forward is numpy code, not a ufunc). None: such a program stays
        # in numpy
        self.python = python
        self.python_check = python_check
        self.sympy = sympy      # its SymPy forms (SymPyForm), None: no closed form
        # alias: an entry of it whose output has its input's shape under a given name is that
        # value renamed (``dW = v12``); accumulation: how the trace names an accumulation
        # recorded with it ("indexing reads added into")
        self.alias = alias
        self.accumulation = accumulation
        # ---- sizes (program/sizes.py, resize.py, extraction.py): how the attribute ``shape``
        # follows a program's sizes: "broadcast" (the output's shape, input axes of one size
        # with it), "scatter" (the output's, its ``indices`` pin the axes they address),
        # "scatter_along" (the output's, every axis pinned), "reshape" (a target with -1)
        self.sized = sized
        # counted: its vjp (and a jvp using it) scales by times / count of the entries it
        # reduces (less ddof), times being the number given (True: 1), and by no other number
        self.counted = counted
        # scales: "times" (x * c) or "over" (x / c) when input 1 is a number scaling input 0
        self.scales = scales
        # maps_rows: with a 2-D input 1, each row of input 0 goes through the same linear map
        # (``x @ W``): rows shared by many points can be mapped once (transforms/operators.py)
        self.maps_rows = maps_rows
        # sparsity: its index-dependency rule (which input entries each output entry depends
        # on), set beside the other records' in sparsity_rules.py; None: its kind says it
        self.sparsity = None
        # release(): called by the reverse sweep once an entry of it is pulled back (a variadic
        # vjp computing every input's cotangent at once lets go of them there); None: nothing
        self.release = None
        # work(attrs): the entries one run of an entry of it computes and its trips (a loop:
        # its body's entries times its trips, trips None when the run decides them); None: one
        self.work = None
        # trips(values, out, attrs): a loop's runs of its bodies, one (trip, body, inputs) per
        # run, each run's outputs sent back (sg.step steps into them); None: not a loop
        self.trips = None
        # statement(target, args, attrs, code): the Python lines computing an entry of it into
        # ``target`` (a loop's ``for`` or ``while``, program/compile.py), ``code`` naming its
        # sub-programs' compiled functions, fresh names and values (loops.Emitter); None: the
        # one expression above
        self.statement = None
        # loop_forms: its own forms in a compiled loop (LoopForms); None: those its other
        # facts give (elementwise, ring, numba)
        self.loop_forms = loop_forms

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"


def normalize_saves(name: str, saves: Sequence[str | int],
                    nin: int | None) -> tuple[tuple, tuple[int, ...] | None, bool]:
    """A ``saves`` declaration as (its canonical form, the input positions it keeps or None
    for every input, whether it keeps the output); a malformed one raises naming ``name``.

    ``nin`` is the number of inputs (None: variadic, any number)."""
    def bad(why: str) -> ValueError:
        return ValueError(f"primitive {name!r}: saves={saves!r} {why}; give a tuple of "
                          '"inputs", "out" and input positions, e.g. ("inputs",), (0, "out") '
                          "or ()")
    if isinstance(saves, (str, bytes)) or not isinstance(saves, Sequence):
        raise bad("is not a tuple")
    everything = out = False
    positions: list[int] = []
    for item in saves:
        if item == "inputs" and type(item) is str:
            if everything:
                raise bad('names "inputs" twice')
            everything = True
        elif item == "out" and type(item) is str:
            if out:
                raise bad('names "out" twice')
            out = True
        elif type(item) is int or isinstance(item, np.integer):
            i = int(item)
            if i < 0:
                raise bad(f"names input {i} (positions count from 0)")
            if nin is not None and i >= nin:
                raise bad(f"names input {i} of a primitive of {nin} input(s)")
            if i in positions:
                raise bad(f"names input {i} twice")
            positions.append(i)
        else:
            raise bad(f"holds {item!r}")
    if everything and positions:
        raise bad('names input positions beside "inputs", which keeps them all')
    kept = None if everything or nin is not None and len(positions) == nin and nin > 0 \
        else tuple(sorted(positions))
    form = (("inputs",) if kept is None else kept) + (("out",) if out else ())
    return form, kept, out


def always(*args: Any) -> bool:
    """The quick test of a record whose identities are always worth a look."""
    return True


REGISTRY: dict[str, Primitive] = {}


def register(prim: Primitive) -> Primitive:
    """Add a primitive to the registry; names are unique."""
    if prim.name in REGISTRY:
        raise ValueError(f"primitive {prim.name!r} is registered twice")
    REGISTRY[prim.name] = prim
    return prim


# ---------------------------------------------------------------- shared check cases

UNARY = [Case(((),)), Case(((3,),)), Case(((3, 1),)), Case(((2, 3, 4),))]
BINARY = [Case(((), ())), Case(((3,), (3,))), Case(((3, 1), (1, 4))),
          Case(((2, 3, 4), (3, 4))), Case(((), (3,)))]
REDUCE = [Case(((),)), Case(((3,),)), Case(((3, 4),), {"axis": 1}),
          Case(((3, 4),), {"axis": 0, "keepdims": True}), Case(((2, 3, 4),), {"axis": (0, 2)}),
          Case(((2, 3, 4),), {"axis": -1, "keepdims": True})]

# ---------------------------------------------------------------- errors

def describe(inputs: Sequence[Any]) -> str:
    """The inputs of an entry as an error message names them (Variables by name)."""
    parts = []
    for x in inputs:
        name = None if is_constant(x) else x.name
        shape = np.shape(x) if name is None else x.shape     # a batched value: one example's
        parts.append(f"constant with shape {shape}" if name is None else
                     f"{name} with shape {shape}")
    return ", ".join(parts)


def error(op: str, inputs: Sequence[Any], reason: str, kind: type) -> Exception:
    """An error of ``kind`` naming the operation, the reason and the inputs' names and shapes."""
    return kind(f"{op}: {reason} ({describe(inputs)})")

# ---------------------------------------------------------------- value helpers

def shape_of(x: Any) -> tuple:
    """Shape of a Variable, an array or a Python number."""
    return getattr(x, "shape", ())


def is_constant(x: Any) -> bool:
    """True for anything that is not a Variable (a number or an array)."""
    return not hasattr(x, "prim")     # (the fastest test for every kind: 55-85 ns)


def value_of(x: Any) -> Any:
    """The numpy value behind a Variable; constants and arrays pass through."""
    return getattr(x, "raw", x)


def dtype_of(x: Any) -> np.dtype | None:
    """dtype of a Variable or array; None for Python numbers."""
    return getattr(x, "dtype", None)


def normalize_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """Axis argument (None, int or tuple) as a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not isinstance(a, (int, np.integer)) or not -ndim <= a < ndim:
            raise AxisError(f"axis {a} is out of range for {ndim} dimension(s)")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise IndexError(f"repeated axis in {axis}")
    return tuple(sorted(out))


def keepdims_shape(shape: tuple, axis: Any) -> tuple:
    """The shape a reduction over ``axis`` has with keepdims=True."""
    if type(axis) is int and -len(shape) <= axis < len(shape):  # one axis: no axes tuple
        return shape[:axis % len(shape)] + (1,) + shape[axis % len(shape) + 1:]
    axes = normalize_axes(axis, len(shape))
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


# ---------------------------------------------------------------- samplers

def uniform(lo: float, hi: float) -> Sampler:
    """Sampler of values uniform in [lo, hi)."""
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def away_from_zero(lo: float = 0.3, hi: float = 2.0) -> Sampler:
    """Sampler of values with |x| in [lo, hi) and random sign (avoids kinks at 0)."""
    return lambda rng, shape: rng.uniform(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)


ANY = uniform(-2.0, 2.0)
POSITIVE = uniform(0.5, 2.0)
NONZERO = away_from_zero()


# ---------------------------------------------------------------- print rules

def method_fmt(method: str, *params: str) -> Callable:
    """Print rule ``x.method(k=v, ...)`` naming only attributes set away from None/False."""
    def fmt(args: list[str], attrs: dict, render: Callable) -> str:
        shown = [f"{k}={render(attrs[k], k)}" for k in params
                 if attrs.get(k) is not None and attrs.get(k) is not False]
        return f"{args[0]}.{method}({', '.join(shown)})"
    return fmt


# ---------------------------------------------------------------- batching rules
#
# A batching rule ``batch(o, xs, batched, **attrs)`` computes a primitive for B examples at
# once. ``batched[i]`` is True when input i carries the examples along a leading batch axis
# (size B, always first); the other inputs are shared by every example. The rule returns the
# output with the batch axis first, computed by primitives called on ``o``, so a batched
# program is recorded (and differentiable) like any other. Rules name their primitive by its
# registered name: a record is built before its rule can refer to it.

def batch_size(xs: Sequence[Any], batched: Sequence[bool]) -> int:
    """B: the leading axis of the first batched input."""
    return next(shape_of(x)[0] for x, b in zip(xs, batched) if b)


def run(o: PrimitiveMethods, name: str, xs: Sequence[Any], attrs: dict) -> Any:
    """The registered primitive ``name`` applied on ``o`` (attributes as recorded)."""
    return o.apply(REGISTRY[name], tuple(xs), dict(attrs) or None, None)


def align(o: PrimitiveMethods, xs: Sequence[Any], batched: Sequence[bool],
          rank: int | None = None) -> list:
    """Batched inputs with singleton axes inserted after the batch axis, so every batched input
    has per-example rank ``rank`` (default: the largest per-example rank); numpy broadcasting
    then pairs the per-example axes as it would for one example."""
    if rank is None:
        rank = max(len(shape_of(x)) - b for x, b in zip(xs, batched))
    out = []
    for x, b in zip(xs, batched):
        s = shape_of(x)
        if b and len(s) - 1 < rank:
            x = o.reshape(x, s[:1] + (1,) * (rank - len(s) + 1) + s[1:])
        out.append(x)
    return out


def pointwise(name: str) -> Callable:
    """Rule of a primitive that broadcasts like numpy ufuncs: align ranks, apply once."""
    def batch(o: PrimitiveMethods, xs, batched, **attrs):
        return run(o, name, align(o, xs, batched), attrs)
    return batch


def mapped(name: str) -> Callable:
    """Rule of a one-input primitive that already maps over leading axes (linear algebra,
    tril, cast): apply it to the stack as it is."""
    def batch(o: PrimitiveMethods, xs, batched, **attrs):
        return run(o, name, xs, attrs)
    return batch


def shift_axis(axis: Any, op: str, x: Any, batched: bool = True, extra: int = 0) -> Any:
    """A per-example axis (int or tuple) of ``op``'s input ``x`` (a batch when ``batched``), for
    examples of x's rank plus ``extra``, as an axis of the batch; out of range, the AxisError
    numpy raises for one example, naming op, the axis and one example's shape."""
    shape = tuple(shape_of(x)[1:] if batched else shape_of(x))
    ndim = len(shape) + extra
    one = isinstance(axis, (int, np.integer))
    for a in (axis,) if one else axis:
        if not -ndim <= a < ndim:
            raise AxisError(f"{op}: axis {a} is out of bounds for array of dimension {ndim} "
                            f"({getattr(x, 'name', 'constant')} with shape {shape})")
    return int(axis) % ndim + 1 if one else tuple(int(a) % ndim + 1 for a in axis)


def along(name: str, key: str = "axis", default: Any = None, flat: bool = False) -> Callable:
    """Rule of a one-input primitive with an axis attribute: the axis moves past the batch
    axis. ``default`` is the forward's default axis. ``axis=None`` means every per-example axis,
    or with ``flat`` the flattened example (argmax, cumsum): each example is raveled first."""
    def batch(o: PrimitiveMethods, xs, batched, **attrs):
        x = xs[0]
        s = shape_of(x)
        axis = attrs.get(key, default)
        new = dict(attrs)
        if axis is not None:
            new[key] = shift_axis(axis, name, x)
            return run(o, name, [x], new)
        if not flat:
            new[key] = tuple(range(1, len(s)))
            return run(o, name, [x], new)
        new[key] = 1
        out = run(o, name, [o.reshape(x, (s[0], -1))], new)
        if attrs.get("keepdims"):
            out = o.reshape(out, (s[0],) + (1,) * (len(s) - 1))
        return out
    return batch


def matrix(name: str, vectors: tuple = (True, True)) -> Callable:
    """Rule of a two-input matrix primitive (matmul, solve) that maps over leading axes and
    reads a 1-D operand as a vector: a batched vector (which the primitive would read as a
    stack of rows) becomes a one-row (first input) or one-column (second input) matrix, and
    that axis is dropped from the result."""
    def batch(o: PrimitiveMethods, xs, batched, **attrs):
        xs, drop = list(xs), []
        for i in (1, 0):
            s = shape_of(xs[i])
            if batched[i] and vectors[i] and len(s) == 2:
                xs[i] = o.reshape(xs[i], s[:1] + (1,) + s[1:] if i == 0 else s + (1,))
                # the row axis is second to last unless a 1-D second operand took the last
                drop.append(-1 if i == 1 or len(shape_of(xs[1])) == 1 else -2)
        out = run(o, name, align(o, xs, batched), attrs)
        if not drop:
            return out
        s = shape_of(out)
        return o.reshape(out, tuple(n for k, n in enumerate(s) if k - len(s) not in drop))
    return batch


# ---------------------------------------------------------------- broadcasting in rules
#
# Undone for cotangents (``unbroadcast``), tangents (``broadcast_to``) and structural-zero
# masks; and the vjp, masked vjp and jvp that an elementwise primitive gets from one derivative
# rule per input (``elementwise``, in elementwise.py, registers with them). Broadcasting is
# undone inside the rules with recorded ``sum`` and ``reshape``, so the gradient of a broadcast
# input has that input's shape, at every order.

# ---------------------------------------------------------------- cotangents and tangents


def unbroadcast(o: PrimitiveMethods, g: Any, shape: tuple, reduce: str = "sum") -> Any:
    """Sum a cotangent down to ``shape``, undoing numpy broadcasting with recorded ops.

    ``reduce="all"`` does the same to a bool mask: an entry is masked when all its copies are.
    """
    gshape = shape_of(g)
    if gshape == shape:
        return g
    fold = o.sum if reduce == "sum" else o.all
    if shape == ():
        return fold(g)
    if gshape[1:] == shape:     # one new leading axis (a bias over a batch): sum it away
        return fold(g, axis=0)
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, n in enumerate(shape) if n == 1 and gshape[i + lead] != 1)
    if lead == 0:
        return fold(g, axis=_one(axes), keepdims=True)
    summed = fold(g, axis=_one(axes))
    return summed if shape_of(summed) == shape else o.reshape(summed, shape)


def broadcast_to(o: PrimitiveMethods, t: Any, shape: tuple) -> Any:
    """Expand a tangent to ``shape`` when broadcasting left it smaller."""
    return t if shape_of(t) == shape else o.expand(t, shape)


def unit_cotangent(g: Any, y: Any) -> bool:
    """True when ``g``, on plain float arrays, is the number 1 at every entry of ``y``'s shape
    and dtype by broadcasting (strides 0, the cotangent of a total): ``g * y`` is ``y``."""
    return type(g) is np.ndarray and type(y) is np.ndarray and g.shape == y.shape and \
        not any(g.strides) and g.dtype == y.dtype and g.dtype.kind == "f" and g.size > 0 and \
        g.item(0) == 1


def read_only(x: np.ndarray) -> np.ndarray:
    """A read-only view of ``x``: a value handed on without a copy can be written by nobody
    (and, being a view, is copied by whatever hands arrays over to their caller)."""
    view = x.view()
    view.setflags(write=False)
    return view


def _one(axes: tuple) -> int | tuple:
    return axes[0] if len(axes) == 1 else axes


# ---------------------------------------------------------------- structural zeros
#
# A cotangent entry can be zero by construction: the untaken side of ``where``. The reverse
# sweep keeps, per cotangent, a bool mask of those entries, computed by recorded primitives
# (so the recorded gradient is the same program at any input). Elementwise vjps below a mask
# zero their result there (``where(m, 0, c)``), so an infinite or undefined local derivative
# (``sqrt`` or ``log`` at 0 on the untaken side) contributes 0, not nan; shape primitives and
# reductions carry the mask to their inputs.

def zero_masked(o: PrimitiveMethods, c: Any, mask: Any) -> Any:
    """c with exact zeros where ``mask`` holds (the mask broadcasts to c's shape)."""
    return o.where(mask, 0, c)


def full_mask(o: PrimitiveMethods, m: Any, shape: tuple) -> Any:
    """A mask broadcast to ``shape``."""
    return m if shape_of(m) == shape else o.expand(m, shape)


def mask_down(o: PrimitiveMethods, m: Any, out_shape: tuple, shape: tuple) -> Any:
    """The mask of an input of ``shape`` that broadcasting took to ``out_shape``."""
    if shape == out_shape:
        return m
    return unbroadcast(o, full_mask(o, m, out_shape), shape, reduce="all")


def elementwise_mask(o: PrimitiveMethods, m: Any, i: int, out: Any, *xs: Any, **attrs: Any) -> Any:
    """Mask rule of elementwise primitives: the output's mask, undone for broadcasting."""
    return None if m is None else mask_down(o, m, shape_of(out), shape_of(xs[i]))


# ---------------------------------------------------------------- rules from derivative rules


def broadcast_vjp(rule: VjpRule | None, i: int, nin: int) -> VjpRule | None:
    """The vjp of input i of ``nin`` from its derivative rule: the rule, then unbroadcast."""
    if rule is None or nin == 1:
        return rule
    if nin == 2:    # the common form, without packing the inputs (every sweep's hot path)
        def binary(o: PrimitiveMethods, g, out, x, y, **attrs):
            c = rule(o, g, out, x, y, **attrs) if attrs else rule(o, g, out, x, y)
            shape = y.shape if i else x.shape
            return c if c.shape == shape else unbroadcast(o, c, shape)
        return binary

    def vjp(o: PrimitiveMethods, g, out, *xs, **attrs):
        c = rule(o, g, out, *xs, **attrs)
        shape = xs[i].shape     # inputs that get cotangents are Variables or arrays
        return c if c.shape == shape else unbroadcast(o, c, shape)
    return vjp


def masked_vjp(rule: VjpRule | None, i: int, nin: int) -> MaskedVjpRule | None:
    """The vjp used below a ``where``: zero where the mask m holds, then unbroadcast."""
    if rule is None:
        return None

    def vjp(o: PrimitiveMethods, g, out, m, *xs, **attrs):
        c = zero_masked(o, rule(o, g, out, *xs, **attrs), m)
        return c if nin == 1 else unbroadcast(o, c, xs[i].shape)
    return vjp


def summed_jvp(rules: Sequence[VjpRule | None]) -> JvpRule:
    """The jvp from one derivative rule per input: the rules on the tangents, summed and
    broadcast to the output's shape."""
    def jvp(o: PrimitiveMethods, ts, out, *xs, **attrs):
        acc = None
        for rule, t in zip(rules, ts):
            if t is not None and rule is not None:
                c = rule(o, t, out, *xs, **attrs)
                acc = c if acc is None else o.add(acc, c)
        return None if acc is None else broadcast_to(o, acc, shape_of(out))
    return jvp
