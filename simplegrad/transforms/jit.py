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

Keyword arguments are traced like positional ones; ``static_argnums`` and ``static_argnames``
make arguments part of the signature by value, each naming f's positional parameters both
ways when the other is not given (``jax.jit``'s rule). The call's signature is
jit_signature.py's; each recorded program also gets a generated entry (jit_entry.py) that
checks a call against the signature it was recorded at and replays it with no walk of the
arguments: the last few used are tried first, so a training step costs its compiled program
and a few microseconds.

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
from .jit_entry import GUARD, MISS, make_entry, shared_output
from .jit_signature import call_signature, has_variable, positional_arguments, static_both_ways

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


def _fresh(c: Any) -> Any:
    """A constant result as the caller's own: arrays copied (f would make them anew)."""
    return np.array(c) if type(c) is np.ndarray else c


def _same(kind: str, got: np.ndarray, want: Any) -> bool:
    if kind == "bool":
        return bool(got) == want
    value = got.item()
    return value == want or (value != value and want != want)      # nan is nan


# ---------------------------------------------------------------- one recording


class _Recorded:
    """One program of a signature: compiled, with its guards and the output's structure."""

    __slots__ = ("compiled", "guards", "slots", "fixed", "treedef", "n_out", "entry", "family")

    def __init__(self, compiled: Compiled | None, guards: list, slots: list, fixed: list,
                 treedef: Any, n_out: int):
        self.compiled = compiled    # None when f's outputs are all constants
        self.guards = guards        # (output position, kind, value seen when recording)
        self.slots = slots          # per output leaf: its position among the program's outputs
        self.fixed = fixed          # per output leaf: the constant (slot None)
        self.treedef = treedef
        self.n_out = n_out
        self.entry: Callable | None = None      # the fast entry (jit_entry.py), when written
        self.family: list[_Recorded] = [self]   # the programs of its signature

    def run(self, traced: list) -> list | None:
        """The output leaves at ``traced``, or None when a guard does not hold."""
        outs = self.compiled(*traced) if self.compiled is not None else []
        for k, kind, want in self.guards:
            if not _same(kind, outs[k], want):
                return None
        return [_fresh(self.fixed[i]) if s is None else
                np.array(outs[s]) if outs[s].base is not None or
                shared_output(self.compiled, s) else outs[s]
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
        *args, kwargs = tree_unflatten(treedef, call)
        with running(ops):
            out = f(*args, **kwargs)
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
    fixed = [np.array(c) if isinstance(c, np.ndarray) else c for c in map(_plain, fixed)]
    return tree_unflatten(out_def, results), _Recorded(compiled, guards, slots, fixed, out_def,
                                                        n_out)


# ---------------------------------------------------------------- sg.jit

FAST = 8    # fast entries tried per call (the most recently used programs)


class Jitted:
    """``f`` recorded once per signature and replayed compiled; call it as f."""

    def __init__(self, f: Callable, static_argnums: tuple[int, ...],
                 static_argnames: tuple[str, ...], max_programs: int, backend: str):
        self.f = f
        self.backend = backend
        self.static_argnums = static_argnums
        self.static_argnames = static_argnames
        self._positional = positional_arguments(f)[0]
        self.max_programs = max_programs
        self.recordings = 0     # how many times f was recorded (new signatures, failed guards)
        self._cache: OrderedDict[Hashable, list[_Recorded]] = OrderedDict()
        self._fast: list[_Recorded] = []     # programs with an entry, most recently used first
        functools.update_wrapper(self, f)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """f(*args, **kwargs), from a compiled program when this signature was recorded."""
        if around() is not None:
            return self.f(*args, **kwargs)      # inside a transform: f records there
        ran = None                  # programs whose guards failed on this call
        for k, rec in enumerate(self._fast):
            out = rec.entry(args, kwargs)
            if out is MISS:
                continue
            if out is GUARD:
                ran = [rec] if ran is None else [*ran, rec]
                continue
            if k:
                self._use(rec)
            return out
        if has_variable(args) or kwargs and has_variable(tuple(kwargs.values())):
            return self.f(*args, **kwargs)      # on Variables: f records there
        leaves, treedef, key, traced_at = self._signature(args, kwargs)
        programs = self._cache.get(key)
        if programs is not None:
            traced = [leaves[i] for i in traced_at]
            for rec in list(programs):
                if ran is not None and rec in ran:
                    continue
                outs = rec.run(traced)
                if outs is not None:
                    self._use(rec)
                    return tree_unflatten(rec.treedef, outs)
        call_def = treedef or tree_flatten([*args, kwargs])[1]
        out, rec = _record(self.f, call_def, leaves, traced_at, self.backend)
        self.recordings += 1
        rec.entry = make_entry(rec.compiled, rec.guards, rec.slots, rec.fixed, rec.treedef,
                               call_def, leaves, key, traced_at)
        rec.family = programs = self._cache.setdefault(key, [])
        programs.insert(0, rec)
        gone = programs[self.max_programs:]
        del programs[self.max_programs:]
        if gone:
            self._fast = [r for r in self._fast if r not in gone]
        self._use(rec)
        return out

    def _use(self, rec: _Recorded) -> None:
        """Put ``rec`` first among its signature's programs and among the fast entries."""
        family = rec.family
        if family[0] is not rec and rec in family:
            family[:] = [rec, *(r for r in family if r is not rec)]
        if rec.entry is not None:        # (a new list: a call in another thread may iterate)
            self._fast = [rec, *(r for r in self._fast if r is not rec)][:FAST]

    def programs(self, *args: Any, **kwargs: Any) -> list[Compiled]:
        """The compiled programs recorded for the signature of a call, most recent first."""
        key = self._signature(args, kwargs)[2]
        return [r.compiled for r in self._cache.get(key, []) if r.compiled is not None]

    def _signature(self, args: tuple, kwargs: dict) -> tuple:
        return call_signature(args, kwargs, self.static_argnums, self.static_argnames,
                              self._positional)

    def __repr__(self) -> str:
        name = getattr(self.f, "__qualname__", repr(self.f))
        return f"<jit of {name}: {len(self._cache)} signature(s), {self.recordings} recording(s)>"


def jit(f: Callable, static_argnums: int | Sequence[int] | None = None,
        static_argnames: str | Sequence[str] | None = None, max_programs: int = 8,
        backend: str = "numpy") -> Jitted:
    """``f`` recorded on its first call per signature, compiled (``sg.compile``'s ``backend``),
    replayed; Python decisions on recorded values become guards that record it again."""
    check_callable("jit", f)
    nums = () if static_argnums is None else (static_argnums,) if is_int(static_argnums) \
        else tuple(static_argnums) if isinstance(static_argnums, (tuple, list)) else None
    if nums is None or not all(is_int(i) for i in nums):
        raise ArgumentError(f"jit: static_argnums must be an int or a tuple of ints, not "
                            f"{static_argnums!r}")
    names = () if static_argnames is None else (static_argnames,) \
        if isinstance(static_argnames, str) else tuple(static_argnames) \
        if isinstance(static_argnames, (tuple, list)) else None
    if names is None or not all(isinstance(n, str) for n in names):
        raise ArgumentError(f"jit: static_argnames must be a str or a tuple of str, not "
                            f"{static_argnames!r}")
    nums, names = static_both_ways(f, tuple(int(i) for i in nums), names,
                                    static_argnums is None or static_argnames is None)
    count = positional_arguments(f)[0]
    if any(not -count <= i < count for i in nums):
        name = getattr(f, "__qualname__", type(f).__name__)
        raise ArgumentError(f"jit: static_argnums={nums!r} is out of range for {name}, which "
                            f"takes {count} positional argument(s)")
    if isinstance(max_programs, bool) or not isinstance(max_programs, int) or max_programs < 1:
        raise ArgumentError(f"jit: max_programs must be a positive int, not {max_programs!r}")
    if backend not in ("numpy", "numba"):
        raise ArgumentError(f"jit: backend must be 'numpy' or 'numba', not {backend!r}")
    return Jitted(f, nums, names, max_programs, backend)
