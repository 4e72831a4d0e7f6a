"""``sg.jit(f)``: f recorded once per signature, compiled, and replayed with guards.

The first call with a new signature (the argument structure, every float array's shape and
dtype, and the value of everything else) runs ``f`` on fresh Variables of an Ops of its own,
transforms inside ``f`` included, takes the program from those leaves to ``f``'s outputs
(``op.program``) and compiles it (``sg.compile``); later calls with that signature run the
compiled program and record nothing.

Python decisions made on recorded values while recording (``bool(v)``, ``if v > 0:``,
``float(v)``, ``int(v)``, ``v.item()``) fixed which program was recorded. Each becomes a guard:
the Variable it read is an extra output of the program, and every call compares it with what
the recording saw. When one differs, ``f`` is recorded again at those arguments and the new
program joins the signature's (up to ``max_programs``, the most recently used first).
To see the decisions, the recording Ops stores its values as an ndarray subclass (``Watched``)
that notes which Variable a conversion read; a tape listener wraps each new entry's value.

What is not a guard, and so is fixed at recording as in ``op.program``: decisions on plain
numpy values (``x.value > 0``, numpy arrays ``f`` closes over), closed-over arrays and
Variables of other Ops (constants of the program, as in ``jax.jit``), integer and bool array
arguments (their contents are part of the signature: indices are constants of a program).
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from ..engine.events import Leaf
from ..engine.ops import Ops
from ..engine.variable import Variable
from ..errors import ArgumentError
from ..program.compile import Compiled
from ..program.compile import compile as compile_program
from ..program.core import Program
from ..program.nodes import Constant, Node
from ..pytree import tree_flatten, tree_unflatten
from .arguments import around, check_callable, is_int, running

# ---------------------------------------------------------------- watching decisions


class Watched(np.ndarray):
    """A recorded value that tells its recording which Python decisions read it."""

    _sg_var: Variable | None = None     # the Variable whose value this is (None: derived)
    _sg_log: list | None = None         # the recording's guards

    def __array_finalize__(self, obj: Any) -> None:
        self._sg_var = self._sg_log = None      # a derived array stands for no Variable

    def _note(self, kind: str, out: Any) -> Any:
        if self._sg_var is not None and self._sg_log is not None:
            self._sg_log.append((self._sg_var, kind, out))
        return out

    def __bool__(self) -> bool:
        return self._note("bool", np.ndarray.__bool__(self))

    def item(self, *args: Any) -> Any:
        out = np.ndarray.item(self, *args)
        return self._note("item", out) if not args else out

    def __float__(self) -> float:
        return float(self._note("item", np.ndarray.item(self)))

    def __int__(self) -> int:
        return int(self._note("item", np.ndarray.item(self)))


def _watch(v: Variable, log: list) -> None:
    raw = v.raw
    if isinstance(raw, np.ndarray):
        w = raw.view(Watched)
        w._sg_var, w._sg_log = v, log
        v.raw = w


def _plain(x: Any) -> Any:
    """``x`` with any Watched array in it (a constant, an attribute) as a plain ndarray."""
    if isinstance(x, Watched):
        return x.view(np.ndarray)
    if type(x) is tuple:
        return tuple(_plain(e) for e in x)
    if type(x) is list:
        return [_plain(e) for e in x]
    if type(x) is dict:
        return {k: _plain(e) for k, e in x.items()}
    return x


def _same(kind: str, got: np.ndarray, want: Any) -> bool:
    if kind == "bool":
        return bool(got) == want
    value = got.item()
    return value == want or (value != value and want != want)      # nan is nan


# ---------------------------------------------------------------- one recording


class _Recorded:
    """One program of a signature: compiled, with its guards and the output's structure."""

    __slots__ = ("compiled", "guards", "slots", "fixed", "treedef", "n_out")

    def __init__(self, compiled: Compiled | None, guards: list, slots: list, fixed: list,
                 treedef: Any, n_out: int):
        self.compiled = compiled    # None when f's outputs are all constants
        self.guards = guards        # (output position, kind, value seen when recording)
        self.slots = slots          # per output leaf: its position among the program's outputs
        self.fixed = fixed          # per output leaf: the constant (slot None)
        self.treedef = treedef
        self.n_out = n_out

    def run(self, traced: list) -> list | None:
        """The output leaves at ``traced``, or None when a guard does not hold."""
        outs = self.compiled(*traced) if self.compiled is not None else []
        for k, kind, want in self.guards:
            if not _same(kind, outs[k], want):
                return None
        ins = {id(a) for a in traced}
        return [self.fixed[i] if s is None else
                (np.array(outs[s]) if id(outs[s]) in ins or outs[s].base is not None else outs[s])
                for i, s in enumerate(self.slots)]


def _record(f: Callable, treedef: Any, leaves: list, traced_at: list[int], backend: str
            ) -> tuple:
    """Run f once on fresh Variables; its results and the _Recorded that replays it."""
    face = Ops()            # held while recording: the tape keeps every entry meanwhile
    ops = face.recorder
    log: list = []

    def listen(item: Any) -> None:
        if type(item) is Variable:
            _watch(item, log)
        elif type(item) is Leaf:
            _watch(item.var, log)
    ops.tape.listeners.append(listen)
    try:
        call = list(leaves)
        for i in traced_at:
            call[i] = ops.var(leaves[i], name=f"x{i}")
        inputs = [call[i] for i in traced_at]
        args = tree_unflatten(treedef, call)
        with running(ops):
            out = f(*args)
        out_leaves, out_def = tree_flatten(out)
        outputs: list[Variable] = []
        slots, fixed = [], []
        for y in out_leaves:
            if type(y) is Variable and y.rec is ops:
                slots.append(len(outputs))
                fixed.append(None)
                outputs.append(y)
            else:
                slots.append(None)
                fixed.append(y.value if isinstance(y, Variable) else y)
        n_out = len(outputs)
        guards = []
        for v, kind, seen in log:
            if v.rec is ops:
                guards.append((len(outputs), kind, seen))
                outputs.append(v)
        results = [np.array(y.raw) if s is not None else _plain(c)
                   for y, s, c in zip(out_leaves, slots, fixed)]
        compiled = None
        if outputs:
            prog = ops.program(inputs, outputs)
            prog = Program(prog.inputs, [Constant(_plain(c.value), c.name)
                                         for c in prog.constants],
                           [Node(n.prim, n.args, _plain(n.attrs), n.name, n.shape, n.dtype,
                                 n.order) for n in prog.nodes], prog.outputs, check=False)
            compiled = compile_program(prog, "jitted", backend)
    finally:
        ops.tape.listeners.remove(listen)
        ops.release()
    fixed = [_plain(c) for c in fixed]
    return tree_unflatten(out_def, results), _Recorded(compiled, guards, slots, fixed, out_def,
                                                        n_out)


# ---------------------------------------------------------------- sg.jit


class Jitted:
    """``f`` recorded once per signature and replayed compiled; call it as f."""

    def __init__(self, f: Callable, static_argnums: tuple[int, ...], max_programs: int,
                 backend: str):
        self.f = f
        self.backend = backend
        self.static_argnums = static_argnums
        self.max_programs = max_programs
        self.recordings = 0     # how many times f was recorded (new signatures, failed guards)
        self._cache: OrderedDict[Hashable, list[_Recorded]] = OrderedDict()
        functools.update_wrapper(self, f)

    def __call__(self, *args: Any) -> Any:
        """f(*args), from a compiled program when this signature was recorded."""
        if around() is not None or _has_variable(args):
            return self.f(*args)    # inside a transform or on Variables: f records there
        leaves, treedef, key, traced_at = self._signature(args)
        programs = self._cache.get(key)
        if programs is not None:
            traced = [leaves[i] for i in traced_at]
            for k, rec in enumerate(programs):
                outs = rec.run(traced)
                if outs is not None:
                    if k:                   # the most recently used first
                        programs.insert(0, programs.pop(k))
                    return tree_unflatten(rec.treedef, outs)
        out, rec = _record(self.f, treedef, leaves, traced_at, self.backend)
        self.recordings += 1
        programs = self._cache.setdefault(key, [])
        programs.insert(0, rec)
        del programs[self.max_programs:]
        return out

    def programs(self, *args: Any) -> list[Compiled]:
        """The compiled programs recorded for the signature of ``args``, most recent first."""
        key = self._signature(args)[2]
        return [r.compiled for r in self._cache.get(key, []) if r.compiled is not None]

    def _signature(self, args: tuple) -> tuple:
        leaves, treedef = tree_flatten(list(args))
        static: set[int] = set()
        if self.static_argnums:
            starts = [0]
            for child in treedef.children:
                starts.append(starts[-1] + child.num_leaves)
            for k in self.static_argnums:
                if not -len(args) <= k < len(args):
                    raise ArgumentError(f"jit: static_argnums={self.static_argnums!r} is out of "
                                        f"range for a call with {len(args)} argument(s)")
                k %= len(args)
                static.update(range(starts[k], starts[k + 1]))
        return (leaves, treedef, *_signature(treedef, leaves, static))

    def __repr__(self) -> str:
        name = getattr(self.f, "__qualname__", repr(self.f))
        return f"<jit of {name}: {len(self._cache)} signature(s), {self.recordings} recording(s)>"


def jit(f: Callable, static_argnums: int | Sequence[int] = (), max_programs: int = 8,
        backend: str = "numpy") -> Jitted:
    """``f`` recorded on its first call per signature, compiled (``sg.compile``'s ``backend``),
    replayed; Python decisions on recorded values become guards that record it again."""
    check_callable("jit", f)
    nums = (static_argnums,) if is_int(static_argnums) else tuple(static_argnums) \
        if isinstance(static_argnums, (tuple, list)) else None
    if nums is None or not all(is_int(i) for i in nums):
        raise ArgumentError(f"jit: static_argnums must be an int or a tuple of ints, not "
                            f"{static_argnums!r}")
    if isinstance(max_programs, bool) or not isinstance(max_programs, int) or max_programs < 1:
        raise ArgumentError(f"jit: max_programs must be a positive int, not {max_programs!r}")
    if backend not in ("numpy", "numba"):
        raise ArgumentError(f"jit: backend must be 'numpy' or 'numba', not {backend!r}")
    return Jitted(f, tuple(int(i) for i in nums), max_programs, backend)


def _has_variable(args: tuple) -> bool:
    for a in args:
        if type(a) is np.ndarray:
            continue
        if isinstance(a, Variable):
            return True
        if isinstance(a, (dict, list, tuple)):
            return any(isinstance(x, Variable) for x in tree_flatten(a)[0])
    return False


def _signature(treedef: Any, leaves: list, static: set[int]) -> tuple[Hashable, list[int]]:
    """The cache key of a call, and the positions of the leaves the program takes as inputs
    (float arrays and numbers); every other leaf is part of the key by value."""
    key: list = [treedef]
    traced_at = []
    for i, a in enumerate(leaves):
        t = type(a)
        number = t is float or t is int
        if i not in static and (number or (isinstance(a, (np.ndarray, np.generic))
                                           and a.dtype.kind == "f")):
            key.append(((), t) if number else (a.shape, a.dtype))
            traced_at.append(i)
            continue
        if isinstance(a, (np.ndarray, np.generic)):
            a = np.asarray(a)
            key.append(("array", a.shape, a.dtype, a.tobytes()))
            continue
        try:
            hash(a)
        except TypeError:
            raise ArgumentError(f"jit: argument leaf {i} is a {type(a).__name__}, neither an "
                                "array nor hashable; pass arrays (traced) or hashable values "
                                "(part of the signature)") from None
        key.append((t, a))
    return tuple(key), traced_at
