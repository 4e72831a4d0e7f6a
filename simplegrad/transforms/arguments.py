"""The arguments and results of the transforms: which Ops records (under ``no_grad`` too),
primals, results, keyword arguments, ``has_aux`` outputs, argnums.

Every transform is a thin layer over ``Ops.grad`` (the reverse sweep) and
``Ops.jvp`` (the forward sweep), so whatever it computes is recorded by the
same primitives as any other program. The helpers here are what they share.

Nesting rule. A transform records on the Ops of its Variable arguments; with none, on the
Ops of the transform whose function is running around it (``running``: a per-thread
stack), so a function may close over the Variables of any transform around it, at any
depth; in both cases it returns Variables, which the transform around it (or
``op.grad``) can differentiate again. At top level, given no Variable, it makes its own
Ops and returns numpy arrays; nothing can differentiate those, so its outermost
derivative pass runs on values only (``create_graph=False``). Free Variables
(sg.Parameter) join the Ops the transform records on. ``recording_ops`` answers "which
Ops" for nn's layers (``nn.ops_of``) and the optimisers too. Under ``no_grad`` a
transform still computes its derivatives (on an Ops of its own) and records nothing on
the caller's: its results are Variables of that Ops holding values only (``run_paused``).
Under vmap a transform is the same code: its primals are lifted to every running vmap's
level (``active``, ``lifted``) and the sweeps run on the stacks (engine/batching.py); inside a
vmap on an Ops of its own, with no other transform around, a gradient is a value-only sweep
(``values_only``), as at top level.

A Variable argument enters ``f`` through one identity entry,
``x.reshape(x.shape)``. Derivatives are taken with respect to that entry, so
they count only the paths through ``f``'s use of its argument and not a
closure's use of the same Variable (``grad(lambda y: x * y)(x)`` is ``x``,
not ``2 * x``). The reverse sweep stops at that entry (``Ops.grad`` never
sweeps entries older than its oldest ``wrt``), so the caller's graph is not
differentiated again.
Arguments not named by ``argnums`` reach ``f`` unchanged (arrays stay arrays).

Under ``op.no_grad()``: a derivative taken while the caller's Ops records nothing cannot be
recorded there; the transform runs on the arguments' values instead (per example inside vmap,
on an Ops of its own at the same levels), and its results return as Variables of the caller's
Ops holding values only. A function among the results (vjp's pullback) runs the same way when
called.

Keyword arguments reach ``f`` unchanged and are never differentiated (as in JAX); they count
for which Ops the transform records on (a Variable among them belongs to the caller), and
under ``no_grad`` they are handed to the paused call with the positional ones.
``has_aux=True``: ``f`` returns ``(output, aux)``; the output is differentiated and ``aux``,
any pytree, is handed back beside the result: Variables as they are when nested (the
transform around can differentiate them, as JAX's tracers), else plain arrays.

Arguments, results, cotangents and tangents may be pytrees (nested dicts, lists and tuples;
see pytree.py): every leaf of a differentiated argument is a primal, and derivatives come back
in the argument's structure, as with JAX.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ..engine.batching import Batched, Level, lifted, stacked, unstack
from ..engine.ops import Ops
from ..engine.params import FREE, FreeOps
from ..engine.variable import Variable, float_array
from ..errors import ArgumentError, DisconnectedWarning, GraphError, ShapeError, warn
from ..primitives.core import value_of
from ..primitives.shape import RESHAPE
from ..pytree import LEAF, TreeDef, tree_flatten, tree_leaves, tree_map, tree_unflatten

ArgNums = int | tuple[int, ...]
Result = Any        # a Variable when nested, a numpy array otherwise


# ---------------------------------------------------------------- which Ops records


def recording_ops(fname: str, leaves: Iterable[Any]) -> Ops | FreeOps | None:
    """The Ops that records the Variables among ``leaves``, or None when there is none.

    The bound Variables must all belong to one Ops; free Variables (sg.Parameter) join it.
    When every Variable is free this is ``FREE``, which records them on its implicit Ops.
    """
    ops = first = None
    for a in leaves:
        if isinstance(a, Variable) and a.rec is not ops:
            if ops is None or ops is FREE:
                ops, first = a.rec, a
            elif a.rec is not FREE:
                raise GraphError(f"{fname}: the arguments belong to different Ops ({first.name} "
                                 f"and {a.name}); create them on one Ops, or pass arrays")
    return ops


_RUNNING = threading.local()    # .stack: a frame per transform whose f runs, innermost last


def around() -> Ops | None:
    """The Ops of the innermost transform whose function is running in this thread, if any."""
    stack = getattr(_RUNNING, "stack", None)
    return stack[-1].ops if stack else None


def active(ops: Ops) -> list[Level]:
    """(level, batch size) of every vmap of ``ops`` whose function is running in this thread,
    outermost first: a transform called now runs at all of them (its primals are lifted)."""
    return [f.batch for f in _vmap_frames(ops)]


def _vmap_frames(ops: Ops) -> list[running]:
    """The frames of the vmaps of ``ops`` whose function is running in this thread, outermost
    first, less those a frame inside them sets ``apart`` (see ``running``)."""
    frames: list[running] = []
    for f in getattr(_RUNNING, "stack", ()):
        if f.ops is not ops:
            continue
        if f.batch is not None:
            frames.append(f)
        elif f.apart:
            frames = [v for v in frames if v.batch[0] not in f.apart]
    return frames


def values_only(ops: Ops) -> bool:
    """Whether a gradient taken now on ``ops`` can be computed on values only: inside a vmap
    on an Ops of its own (its results leave as arrays) and no other transform."""
    stack = getattr(_RUNNING, "stack", ())
    first = stack[0] if stack else None
    return first is not None and first.ops is ops and first.batch is not None and \
        first.final and all(f.batch is not None or f.ops is not ops for f in stack)


def context(fname: str, args: Sequence[Any], borrow: bool = True,
            derivative: bool = True, simplify: bool = True,
            keep_values: bool = True) -> tuple[Ops, bool | None]:
    """The Ops a transform records on, and whether it is the caller's (that of the Variable
    arguments, see ``recording_ops``, or of the transform running around this call) rather
    than a new one of its own.

    A transform's own Ops borrows the caller's arrays (no copies): it is released before the
    call returns, and its results are copied out. ``borrow=False`` for one that outlives it.
    ``derivative=False`` for a transform that takes none (vmap): it may record under no_grad;
    any other gets ``None`` for "the caller's" under no_grad, and hands the call to
    ``run_paused``. An Ops of its own records with the rules of ``sg.simplify`` (shared
    subexpressions, identities removed, sweeps pruned to what was asked) from its second
    recorded derivative pass on, unless ``simplify=False``; the caller's records as the caller
    made it. ``keep_values=False`` for a transform whose sweeps are reverse sweeps only (grad,
    vjp): its entries keep only what their rules read, as a user's Ops does.
    """
    for a in args:
        if type(a) is not np.ndarray:
            ops = recording_ops(fname, _leaves(args))
            break
    else:           # arrays only (the common case): no tree to walk
        ops = None
    if ops is None or ops is FREE:      # free Variables join the Ops the transform records on
        ops = around()
        if ops is None:
            return Ops(borrow=borrow, simplify=simplify, from_derivatives=True,
                       keep_values=keep_values), False
    if derivative and not ops.recording:
        return ops, None        # under no_grad: see ``run_paused``
    return ops, True


def _leaves(args: Sequence[Any]) -> Sequence[Any]:
    """The leaves of the arguments, in ``tree_leaves`` order."""
    if all(type(a) is np.ndarray or isinstance(a, Variable) for a in args):
        return args
    return flatten(args[0])[0] if len(args) == 1 else tree_leaves(list(args))


def flatten(tree: Any) -> tuple[list, TreeDef]:
    """``tree_flatten(tree)``, read off directly for one dict of arrays and Variables (a
    model's parameters, the common argument)."""
    if type(tree) is dict:
        try:
            keys = tuple(sorted(tree))
        except TypeError:       # (keys that do not sort: tree_flatten says so)
            return tree_flatten(tree)
        leaves = [tree[k] for k in keys]
        if all(type(a) is np.ndarray or isinstance(a, Variable) for a in leaves):
            return leaves, TreeDef(dict, keys, (LEAF,) * len(keys))
    return tree_flatten(tree)


class running:  # noqa: N801 (used as ``with running(ops):``)
    """Within the block, transforms called without Variable arguments record on ``ops``;
    ``batch`` = (level, size) marks a vmap's function, inside which they run per example;
    ``final``: that vmap runs on an Ops of its own (its results leave as arrays, so nothing
    outside can differentiate what is recorded at its level). ``apart``: levels of vmaps of
    ``ops`` running around the block at which the block's code is one example already (a
    custom rule of an entry recorded per example), so transforms in it do not run there."""

    __slots__ = ("ops", "batch", "final", "apart")

    def __init__(self, ops: Ops, batch: tuple[int, int] | None = None,
                 final: bool = False, apart: tuple[int, ...] = ()) -> None:
        self.ops = ops
        self.batch = batch
        self.final = final
        self.apart = apart

    def __enter__(self) -> None:
        stack = getattr(_RUNNING, "stack", None)
        if stack is None:
            stack = _RUNNING.stack = []
        stack.append(self)

    def __exit__(self, *exc: object) -> None:
        _RUNNING.stack.pop()


class own(running):  # noqa: N801 (used as ``with own(ops, nested):``)
    """A transform's call: its f runs with ``ops`` around (``running``), and its own Ops is
    released when it is done (results are copied out as arrays); a plain context manager, not
    a generator: every transform call enters one."""

    __slots__ = ("nested",)

    def __init__(self, ops: Ops, nested: bool) -> None:
        self.ops = ops
        self.batch = None
        self.final = False
        self.apart = ()
        self.nested = nested

    def __exit__(self, *exc: object) -> None:
        _RUNNING.stack.pop()
        if not self.nested:
            self.ops.release()


# ---------------------------------------------------------------- under no_grad


def run_paused(ops: Ops, fn: Callable, args: Sequence[Any]) -> Any:
    """``fn`` (the transform) on the values of ``args``, its results handed back as Variables
    of ``ops`` that hold values only; a function among the results is wrapped the same way."""
    frames = _vmap_frames(ops)
    if frames:      # (the frames of vmaps of ops whose function runs: ``active``)
        return _paused_at(ops, frames, fn, args)
    values = tree_map(lambda a: a.raw if isinstance(a, Variable) else a, list(args))
    _RUNNING.stack, saved = [], getattr(_RUNNING, "stack", [])
    try:
        out = fn(*values)
    finally:
        _RUNNING.stack = saved
    return _unrecorded(ops, out)


def _paused_at(ops: Ops, frames: list[running], fn: Callable, args: Sequence[Any]) -> Any:
    """``run_paused`` under vmap: ``fn`` at the same levels on an Ops of its own, on every
    example's values; a function among the results (a pullback) runs there again when called,
    so that Ops lives as long as such a function does (and is freed with it)."""
    mine = Ops()
    rec = mine.recorder
    levels = [f.batch for f in frames]

    def example(a: Any) -> Variable:    # a's values at every level, batched there on mine
        return unstack(rec.var(value_of(stacked(ops, a, levels, "an argument")),
                               requires_grad=False), levels)

    def back(r: Any) -> Variable:       # a result's values, as unrecorded on ops
        return unstack(ops.unrecorded(np.array(value_of(stacked(rec, r, levels, "a result")))),
                       levels)

    def results(out: Any) -> Any:
        if callable(out):
            return lambda *a, _keep=mine: call(out, a)
        if isinstance(out, tuple) and any(callable(o) for o in out):
            return tuple(results(o) for o in out)
        return tree_map(back, out)

    def call(f: Callable, a: Sequence[Any]) -> Any:
        _RUNNING.stack, saved = [running(rec, f.batch, f.final) for f in frames], getattr(
            _RUNNING, "stack", [])
        try:
            return results(f(*tree_map(example, list(a))))
        finally:
            _RUNNING.stack = saved

    out = call(fn, args)
    if not (callable(out) or isinstance(out, tuple) and any(callable(o) for o in out)):
        rec.release()       # nothing calls back into it: its memory returns now
    return out


def _unrecorded(ops: Ops, out: Any) -> Any:
    if callable(out):
        return lambda *a: _unrecorded(ops, run_paused(ops, out, a))
    if isinstance(out, tuple) and any(callable(o) for o in out):
        return tuple(_unrecorded(ops, o) for o in out)
    return tree_map(lambda r: ops.unrecorded(np.asarray(r)) if isinstance(r, np.ndarray) or
                    np.isscalar(r) else r, out)


# ---------------------------------------------------------------- primals


def primals(ops: Ops, args: Sequence[Any], nums: Sequence[int],
            levels: list[Level] | None = None) -> tuple[list, list]:
    """The arguments to call f with, and per differentiated argument its structure and the
    Variables standing for its leaves.

    Under vmap each primal is lifted to every running vmap's level (``levels``, by default
    ``active``): one not batched at a level is expanded along its batch, so that each example
    has its own primal and the sweep of the stacked program gives each its own derivative.
    Every expansion comes before every primal, so that the sweep, which stops at the oldest
    primal, sweeps none.
    """
    levels = active(ops) if levels is None else levels
    call = list(args)
    trees = []
    if levels:
        args = [a if i not in nums else lifted(ops, a, levels) if type(a) is np.ndarray or
                isinstance(a, Variable) else tree_map(lambda b: lifted(ops, b, levels), a)
                for i, a in enumerate(args)]
    for i in nums:
        a = args[i]
        # one array, or one stack: one leaf, no tree to walk
        if isinstance(a, Variable) if levels else type(a) is np.ndarray:
            call[i] = x = unstack(primal(ops, a), levels) if levels else ops.var(a)
            trees.append((LEAF, [x]))
            continue
        leaves, treedef = flatten(a)
        xs = [primal(ops, a) if not levels else unstack(primal(ops, a), levels) for a in leaves]
        call[i] = tree_unflatten(treedef, xs)
        trees.append((treedef, xs))
    return call, trees


def primal(ops: Ops, a: Any) -> Variable:
    """The Variable standing for one leaf of a differentiated argument."""
    if isinstance(a, Variable) and a.requires_grad:
        # the identity entry (see the module docstring), kept even on an Ops that simplifies
        return ops.record_exactly(RESHAPE, (a,), {"shape": tuple(a.shape)})
    if isinstance(a, Variable):
        # (its value is read-only already: held, not copied, so that a primal lifted under
        # vmap stays a zero-stride view of one array instead of a stack of copies)
        return ops.leaf(float_array(a, None, borrow=True))
    return ops.var(a)


def flat(trees: list) -> list[Variable]:
    """The primal Variables of every differentiated argument, in order."""
    return [x for _, xs in trees for x in xs]


def regroup(trees: list, flat: list) -> tuple:
    """``flat`` (one item per primal leaf) rebuilt as one pytree per differentiated argument."""
    out, k = [], 0
    for treedef, xs in trees:
        out.append(flat[k] if treedef is LEAF else tree_unflatten(treedef, flat[k:k + len(xs)]))
        k += len(xs)
    return tuple(out)


def leaves_like(fname: str, what: str, ref: str, treedef: TreeDef, tree: Any) -> list:
    """The leaves of ``tree``, which must have the structure ``treedef``."""
    if treedef.kind == "leaf":
        return [tree]
    leaves, other = tree_flatten(tree)
    if other != treedef:
        raise ArgumentError(f"{fname}: {what} has structure {other} but {ref} has {treedef}")
    return leaves


def leaf_shape(a: Any) -> tuple:
    """The shape of a Variable (one example's under vmap), an array or a number."""
    return a.shape if isinstance(a, Variable) else np.shape(a)


# ---------------------------------------------------------------- results


def output(fname: str, ops: Ops, out: Any) -> Variable:
    """f's result as a Variable of ``ops`` (a constant result becomes a leaf with no gradient)."""
    if isinstance(out, Variable):
        if out.rec is not ops:
            raise GraphError(f"{fname}: f returned {out.name}, a Variable of another Ops; "
                             "compute the result from f's arguments")
        return out
    if not isinstance(out, (np.ndarray, np.generic, int, float)):
        raise ArgumentError(f"{fname}: f must return one Variable or array, not "
                            f"{type(out).__name__}")
    return ops.var(out, requires_grad=False)


def outputs(fname: str, ops: Ops, out: Any) -> tuple[list[Variable], TreeDef]:
    """f's result, a pytree of Variables or arrays, as its leaves (Variables) and structure."""
    leaves, treedef = tree_flatten(out)
    if not leaves:
        raise ArgumentError(f"{fname}: f returned {out!r}, which holds no array")
    return [output(fname, ops, y) for y in leaves], treedef


def scalar(fname: str, y: Variable) -> Variable:
    """``y``, checked to have one entry."""
    if y.size != 1:
        each = " per example" if type(y) is Batched else ""
        raise ShapeError(f"{fname}: f returned shape {y.shape}{each}, not a scalar; use "
                         "sg.jacobian for the full derivative or sg.vjp for a vector-Jacobian "
                         "product")
    return y


def result(nested: bool, v: Variable) -> Result:
    """``v`` itself when nested, else an array of the caller's own (see ``results``)."""
    return results(nested, [v])[0]


def results(nested: bool, vs: list) -> list[Result]:
    """The Variables themselves when nested; else arrays the caller owns (``vs`` may hold
    arrays already: a value-only sweep's gradients).

    An array the transform's own Ops computed (it owns its memory, so it is nobody's view) is
    handed over as it is, made writable; anything else (a view of an argument or a constant,
    or an array handed over already) is copied.
    """
    if nested:
        return list(vs)
    out, given = [], set()
    for v in vs:
        arr = v.raw if type(v) is Variable else v
        if type(arr) is np.ndarray and arr.base is None and id(arr) not in given:
            if not arr.flags.writeable:
                arr.flags.writeable = True
            given.add(id(arr))
            out.append(arr)
        else:
            out.append(np.array(arr))
    return out


def disconnected(fname: str, f: Callable, ops: Ops | None, ys: Sequence[Variable]) -> None:
    """Warn (``sg.DisconnectedWarning``) when f's output depends on none of the differentiated
    inputs: its derivative is zeros (JAX's answer). Read from the sweep of one output just run
    on ``ops``; without one (``ops`` None, or several outputs), from whether any requires grad."""
    if ops.tape.reached if ops is not None and len(ys) == 1 else \
            any(y.requires_grad for y in ys):
        return
    name = getattr(f, "__qualname__", None) or repr(f)
    warn(f"{fname}: the output of {name} does not depend on the inputs it is differentiated "
         "in, so its derivative is zeros; is it a constant, or computed from a value that left "
         "the tape (.value, float(), math.*)?", DisconnectedWarning)


# ---------------------------------------------------------------- keyword arguments and has_aux


def everything(args: Sequence[Any], kwargs: dict) -> tuple:
    """The positional and keyword arguments together, for ``context`` to find the Ops."""
    return (*args, *kwargs.values()) if kwargs else tuple(args)


def paused(ops: Ops, fn: Callable, args: Sequence[Any], kwargs: dict) -> Any:
    """``run_paused`` of ``fn(*args, **kwargs)``."""
    if not kwargs:
        return run_paused(ops, fn, args)
    n, keys = len(args), list(kwargs)
    return run_paused(ops, lambda *a: fn(*a[:n], **dict(zip(keys, a[n:]))),
                      (*args, *kwargs.values()))


def split_aux(fname: str, out: Any, has_aux: bool) -> tuple[Any, Any]:
    """``(output, aux)`` of f's result (aux None without ``has_aux``)."""
    if not has_aux:
        return out, None
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        got = f"a {type(out).__name__} of length {len(out)}" if isinstance(
            out, (tuple, list)) else type(out).__name__
        raise ArgumentError(f"{fname}: with has_aux=True, f must return a pair (output, aux), "
                            f"got {got}")
    return out[0], out[1]


def aux_result(nested: bool, aux: Any) -> Any:
    """``aux`` handed back: as it is when nested, else its Variables as arrays of their own."""
    if nested:
        return aux
    return tree_map(lambda a: np.array(a.raw) if isinstance(a, Variable) else a, aux)


def check_has_aux(fname: str, has_aux: Any) -> bool:
    """``has_aux`` checked to be a bool."""
    if not isinstance(has_aux, (bool, np.bool_)):
        raise ArgumentError(f"{fname}: has_aux must be True or False, not {has_aux!r}")
    return bool(has_aux)


# ---------------------------------------------------------------- argnums and checks


def argnums_kind(fname: str, argnums: Any) -> bool:
    """Check argnums' type; True when it is a single int."""
    if is_int(argnums):
        return True
    if (isinstance(argnums, tuple) and argnums and all(is_int(i) for i in argnums)
            and len(set(argnums)) == len(argnums)):
        return False
    raise ArgumentError(f"{fname}: argnums must be an int or a non-empty tuple of distinct "
                        f"ints, not {argnums!r}")


def resolve(fname: str, argnums: ArgNums, nargs: int) -> tuple[int, ...]:
    """argnums as a tuple of non-negative positions, checked against the call."""
    nums = (argnums,) if is_int(argnums) else argnums
    out = []
    for i in nums:
        if not -nargs <= i < nargs:
            raise ArgumentError(f"{fname}: argnums={argnums!r} is out of range for a call with "
                                f"{nargs} positional argument(s)")
        out.append(int(i) % nargs)
    if len(set(out)) != len(out):
        raise ArgumentError(f"{fname}: argnums={argnums!r} names one argument twice")
    return tuple(out)


def is_int(i: Any) -> bool:
    """True for an int (bool excluded)."""
    return isinstance(i, (int, np.integer)) and not isinstance(i, bool)


def check_callable(fname: str, f: Any) -> None:
    """Raise ArgumentError unless ``f`` is callable."""
    if not callable(f):
        raise ArgumentError(f"{fname}: expected a function, got {type(f).__name__}")
