"""``sg.jit(f)``: f recorded once per signature, compiled, and replayed with guards.

The first call with a new signature (the argument structure, every float array's shape and
dtype, and the value of everything else) runs ``f`` on fresh Variables of an Ops of its own,
transforms inside ``f`` included, takes the program from those leaves to ``f``'s outputs
(``op.program``) and compiles it (``sg.compile``); later calls with that signature run the
compiled program and record nothing.

Python decisions made on recorded values while recording (``bool(v)``, ``if v > 0:``,
``float(v)``, ``int(v)``, ``v.item()``) fixed which program was recorded. Each is a guard on the
tape (engine/guards.py), kept by the extracted program and checked by its compiled function,
which raises ``ReplayError`` when one differs (as any replayed program does). Then ``f`` is
recorded again at those arguments and the new program joins the signature's (up to
``max_programs``, the most recently used first).

Keyword arguments are traced like positional ones; ``static_argnums`` and ``static_argnames``
make arguments part of the signature by value, each naming f's positional parameters both
ways when the other is not given (``jax.jit``'s rule).

The signature of a call (``call_signature``): its leaves, its structure, the key its programs
are cached under, and which leaves the program takes as inputs. The key holds the structure
(plain dicts, lists, tuples and None walked into nested tuples, hashed and compared in C; any
other container as pytree.py's TreeDef), each traced leaf's shape and dtype (float arrays and
Python numbers), and every other leaf by value.

The fast entry (``make_entry``): each recorded program also gets one generated Python
function that checks a call against the signature it was recorded at and replays it with no
walk of the arguments; the last few used are tried first, so a training step costs its
compiled program and a few microseconds. The general call path walks the arguments into
leaves, hashes the signature, looks it up, runs the program and rebuilds the output pytree
leaf by leaf: tens of microseconds, which a small training step notices. The entry does the
same work as straight-line code written for the one signature it was recorded at: it reads
each leaf where the structure puts it (``args[0]["0.weight"]``), checks it (a container's
exact type and length, a dict's keys by reading them, a traced array's type, shape and dtype,
a static value's type and value), calls the compiled program's function on the traced
leaves (which checks the guards), and returns the output pytree as one
literal (``(r0, {"0.bias": o1, ...}, ...)``). It answers ``MISS`` when the arguments are not
of its signature (the general path decides then) and ``GUARD`` when they are but a guard does
not hold (the program ran; another program of the signature, or a new recording, serves the
call). It never accepts a call the general path would treat differently: anything unusual (a
subclass of dict, list or tuple, an array subclass, a number out of int64's range) is a miss.
A namedtuple or a registered pytree node is read through ``pytree.node_children`` (its
registered flatten), its type, length and auxiliary data checked.

``f`` records as a transform's own Ops does: from its second derivative pass on with the rules
of ``sg.simplify`` (the values to the bit, equal entries shared). A program that holds
derivatives of derivatives (order 2 or more: ``sg.grad(sg.grad(f))``, a Hessian) is simplified
again with ``expand=True`` before it is compiled (the ring arithmetic of the nested rules
gathered into polynomials: the compiled values equal the recorded ones to float64 round-off);
any other (a training step's gradients) is compiled as recorded.

What is not a guard, and so is fixed at recording as in ``op.program``: decisions on plain
numpy values (``x.value > 0``, numpy arrays ``f`` closes over), closed-over arrays and
Variables of other Ops (constants of the program, as in ``jax.jit``), integer and bool array
arguments (their contents are part of the signature: indices are constants of a program).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from ..engine.ops import Ops
from ..engine.variable import Variable
from ..errors import ArgumentError, ReplayError
from ..program.compile import Compiled
from ..program.compile import compile as compile_program
from ..program.core import extract
from ..program.nodes import CONST, INPUT
from ..program.simplify import simplify
from ..pytree import TreeDef, is_node, node_children, tree_flatten, tree_unflatten
from .arguments import around, check_callable, is_int, running

# ---------------------------------------------------------------- the signature of a call


def call_signature(args: tuple, kwargs: dict, static_argnums: tuple[int, ...],
                   static_argnames: tuple[str, ...], positional: float) -> tuple:
    """The call's leaves, structure (a TreeDef, or None when plain), signature key and
    traced positions."""
    call = [*args, kwargs]
    leaves: list = []
    try:
        structure = _structure(call, leaves)
    except (TypeError, _OtherContainerError):    # a namedtuple, unsortable keys: pytree.py
        leaves, structure = [], None
    treedef = None
    if structure is None:
        leaves, treedef = tree_flatten(call)
        structure = treedef
    static: set[int] = set()
    if static_argnums or static_argnames:
        treedef = treedef or tree_flatten(call)[1]
        starts = [0]
        for child in treedef.children:
            starts.append(starts[-1] + child.num_leaves)
        named = treedef.children[-1]        # the keyword arguments, keys sorted
        start = starts[-2]
        for name, child in zip(named.meta, named.children):
            if name in static_argnames:
                static.update(range(start, start + child.num_leaves))
            start += child.num_leaves
        for k in static_argnums:
            if 0 <= k < positional and k >= len(args):
                continue        # passed by keyword, or left to its default
            if not -len(args) <= k < len(args):
                raise ArgumentError(f"jit: static_argnums={static_argnums!r} is out of "
                                    f"range for a call with {len(args)} argument(s)")
            k %= len(args)
            static.update(range(starts[k], starts[k + 1]))
    return (leaves, treedef, *_key(structure, leaves, static))


def positional_arguments(f: Callable) -> tuple[float, list[str], set[str]]:
    """How many arguments f takes by position (inf with ``*args`` or no signature), their
    names, and the names it takes by keyword."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):     # a builtin without a signature
        return math.inf, [], set()
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                        p.POSITIONAL_OR_KEYWORD)]
    keyword = {p.name for p in params if p.kind is not p.POSITIONAL_ONLY}
    varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
    return (math.inf if varargs else len(positional)), positional, keyword


def static_both_ways(f: Callable, nums: tuple[int, ...], names: tuple[str, ...],
                      infer: bool) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """``jax.jit``'s rule: when only one of static_argnums and static_argnames is given, the
    positional parameters of f's signature name the same arguments both ways."""
    if not infer or not (nums or names):
        return nums, names
    count, positional, keyword = positional_arguments(f)
    more_nums = tuple(positional.index(n) for n in names if n in positional)
    more_names = tuple(positional[i] for i in nums if -len(positional) <= i < len(positional)
                       and positional[i] in keyword)
    return (tuple(dict.fromkeys(nums + more_nums)), tuple(dict.fromkeys(names + more_names)))


def has_variable(args: tuple) -> bool:
    """Whether any argument is or holds a Variable."""
    for a in args:
        if type(a) is np.ndarray:
            continue
        if isinstance(a, Variable):
            return True
        if is_node(a):
            return any(isinstance(x, Variable) for x in tree_flatten(a)[0])
    return False


class _OtherContainerError(Exception):
    """A container pytree.py walks differently from a plain dict, list or tuple."""


def _structure(tree: Any, leaves: list) -> Hashable:
    """pytree.py's walk of plain dicts, lists, tuples and None (the same leaves in the same
    order), its structure as nested tuples: hashed and compared in C, not per TreeDef node."""
    t = type(tree)
    if t is dict:
        keys = tuple(sorted(tree))
        return (keys, tuple([_structure(tree[k], leaves) for k in keys]))
    if t is list or t is tuple:
        return (t, tuple([_structure(c, leaves) for c in tree]))
    if tree is None:
        return None
    if is_node(tree):       # a namedtuple, a dict subclass, a registered node
        raise _OtherContainerError
    leaves.append(tree)
    return 0


def _key(structure: Hashable, leaves: list, static: set[int]) -> tuple[Hashable, list[int]]:
    """The cache key of a call, and the positions of the leaves the program takes as inputs
    (float arrays and numbers); every other leaf is part of the key by value."""
    key: list = [structure]
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


# ---------------------------------------------------------------- one recording


def _fresh(c: Any) -> Any:
    """A constant result as the caller's own: arrays copied (f would make them anew)."""
    return np.array(c) if type(c) is np.ndarray else c


class _Recorded:
    """One program of a signature: compiled (its guards checked there), with the output's
    structure."""

    __slots__ = ("compiled", "slots", "fixed", "treedef", "n_out", "entry", "family")

    def __init__(self, compiled: Compiled | None, slots: list, fixed: list, treedef: Any,
                 n_out: int):
        self.compiled = compiled    # None when f's outputs are constants and decided nothing
        self.slots = slots          # per output leaf: its position among the program's outputs
        self.fixed = fixed          # per output leaf: the constant (slot None)
        self.treedef = treedef
        self.n_out = n_out
        self.entry: Callable | None = None      # the fast entry (make_entry), when written
        self.family: list[_Recorded] = [self]   # the programs of its signature

    def run(self, traced: list) -> list | None:
        """The output leaves at ``traced``, or None when a guard does not hold."""
        try:
            outs = self.compiled(*traced) if self.compiled is not None else []
        except ReplayError:
            return None
        return [_fresh(self.fixed[i]) if s is None else
                np.array(outs[s]) if outs[s].base is not None or
                shared_output(self.compiled, s) else outs[s]
                for i, s in enumerate(self.slots)]


def _record(f: Callable, treedef: Any, leaves: list, traced_at: list[int], backend: str
            ) -> tuple:
    """Run f once on fresh Variables; its results and the _Recorded that replays it."""
    ops = Ops(keep_values=True, simplify=True, from_derivatives=True)
    try:
        call = list(leaves)
        for i in traced_at:
            call[i] = ops.var(leaves[i], name=f"x{i}")
        inputs = [call[i] for i in traced_at]
        *args, kwargs = tree_unflatten(treedef, call)
        with running(ops):
            out = f(*args, **kwargs)
        out_leaves, out_def = tree_flatten(out)
        outputs: list[Any] = []
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
        results = [np.array(y.raw) if s is not None else c
                   for y, s, c in zip(out_leaves, slots, fixed)]
        compiled = None
        # the decisions f made on recorded values are the program's guards (engine/guards.py);
        # with no output to compute, the values they read are its outputs
        if not outputs:
            outputs = [g.entry for g in ops.tape.guards]
        if outputs:
            prog = extract(inputs, outputs, ops)
            if max(prog.orders, default=0) >= 2:    # derivatives of derivatives: their
                prog = simplify(prog, expand=True)  # algebra simplified first
            if n_out or prog.guards:
                compiled = compile_program(prog, "jitted", backend)
    finally:
        ops.release()
    fixed = [np.array(c) if isinstance(c, np.ndarray) else c for c in fixed]
    return tree_unflatten(out_def, results), _Recorded(compiled, slots, fixed, out_def, n_out)


# ---------------------------------------------------------------- the fast entry


MISS = object()     # the arguments are not of the entry's signature
GUARD = object()    # they are, but a guard's answer differs from the recording's

MAX_DEPTH = 32      # deeper structures keep the general path (the parser nests expressions)
INT64 = (-(2 ** 63), 2 ** 63 - 1)


class _UnsupportedError(Exception):
    """A structure the entry does not write out (the general path serves it)."""


class _Source:
    """The lines of the entry's body and the names its namespace binds."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {"np": np, "ndarray": np.ndarray, "MISS": MISS,
                                          "GUARD": GUARD, "__builtins__": {
                                              "type": type, "len": len, "bool": bool,
                                              "dict": dict, "list": list, "tuple": tuple,
                                              "int": int, "float": float,
                                              "KeyError": KeyError}}
        self.lines: list[str] = []
        self.count = 0
        self.indent = 1

    def bind(self, value: Any) -> str:
        """A name in the namespace holding ``value``."""
        self.count += 1
        name = f"c{self.count}"
        self.namespace[name] = value
        return name

    def temp(self) -> str:
        self.count += 1
        return f"t{self.count}"

    def key(self, k: Any) -> str:
        """A dict key as a literal (str, int) or a bound name."""
        return repr(k) if type(k) in (str, int) else self.bind(k)

    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)


def make_entry(compiled: Compiled | None, slots: Sequence[int | None],
               fixed: Sequence[Any], out_def: TreeDef, call_def: TreeDef, seen: list,
               key: tuple, traced_at: Sequence[int]) -> Callable[[tuple, dict], Any] | None:
    """The entry of one recorded program (None when its structure is not written out), from
    the recording call's structure, leaves and signature key."""
    src = _Source()
    try:
        leaves = _read_arguments(src, call_def)
        _check_leaves(src, leaves, seen, key, traced_at, compiled)
        results = _run(src, compiled, [leaves[i] for i in traced_at])
        outs = _outputs(src, compiled, slots, fixed, results)
        src.line(f"return {_build(src, out_def, iter(outs), 0)}")
    except _UnsupportedError:
        return None
    source = "def entry(args, kwargs):\n" + "\n".join(src.lines) + "\n"
    code = compile(source, "<simplegrad jit entry>", "exec")
    exec(code, src.namespace)  # noqa: S102 -- generated above from the recorded structure
    fn = src.namespace["entry"]
    fn.source = source
    return fn


def _read_arguments(src: _Source, call_def: TreeDef) -> list[str]:
    """Lines that check the containers of the call and name its leaves, in order. A dict of
    the right length missing one of the keys is a KeyError on reading it: the reads run in a
    ``try`` that answers MISS (the program runs after it)."""
    leaves: list[str] = []
    *positional, named = call_def.children
    src.line(f"if len(args) != {len(positional)} or len(kwargs) != {len(named.children)}: "
             "return MISS")
    src.line("try:")
    src.indent += 1
    stack = [(f"kwargs[{src.key(k)}]", c, 1) for k, c in reversed(list(zip(named.meta,
                                                                            named.children)))]
    stack += [(f"args[{j}]", c, 1) for j, c in reversed(list(enumerate(positional)))]
    while stack:
        expr, d, depth = stack.pop()
        kind = d.kind
        if kind == "leaf":
            leaves.append(f"l{len(leaves)}")
            src.line(f"{leaves[-1]} = {expr}")
            continue
        if kind is None:
            src.line(f"if {expr} is not None: return MISS")
            continue
        if depth > MAX_DEPTH:
            raise _UnsupportedError
        name = src.temp()
        src.line(f"{name} = {expr}")
        if kind is dict:
            src.line(f"if type({name}) is not dict or len({name}) != {len(d.children)}: "
                     "return MISS")
            items = [f"{name}[{src.key(k)}]" for k in d.meta]
        elif kind is list or kind is tuple:
            src.line(f"if type({name}) is not {kind.__name__} or len({name}) != "
                     f"{len(d.children)}: return MISS")
            items = [f"{name}[{j}]" for j in range(len(d.children))]
        else:               # a namedtuple or a registered node: its children as pytree.py's
            children = src.temp()
            src.line(f"if type({name}) is not {src.bind(kind)}: return MISS")
            src.line(f"_, meta, {children} = {src.bind(node_children)}({name})")
            src.line(f"if len({children}) != {len(d.children)} or not meta == "
                     f"{src.bind(d.meta)}: return MISS")
            items = [f"{children}[{j}]" for j in range(len(d.children))]
        stack.extend(reversed([(e, c, depth + 1) for e, c in zip(items, d.children)]))
    src.line("pass")
    src.indent -= 1
    src.line("except KeyError:")
    src.line("    return MISS")
    return leaves


def _check_leaves(src: _Source, leaves: list[str], seen: list, key: tuple,
                  traced_at: Sequence[int], compiled: Compiled | None) -> None:
    """One check per leaf against its part of the signature's key (``_key``);
    traced leaves not of the program's input shape and dtype are converted as it would."""
    specs = list(compiled.program.inputs) if compiled is not None else [None] * len(traced_at)
    spec_of = dict(zip(traced_at, specs))
    for i, leaf in enumerate(leaves):
        part = key[1 + i]
        if i in spec_of:
            spec = spec_of[i]
            shape, what = part
            if what is float or what is int:
                low, high = INT64
                bounds = f" or not {low} <= {leaf} <= {high}" if what is int else ""
                src.line(f"if type({leaf}) is not {what.__name__}{bounds}: return MISS")
                dtype = spec.dtype if spec is not None else np.dtype(float)
                src.line(f"{leaf} = np.array({leaf}, {src.bind(dtype)})")
                continue
            kind = type(seen[i])     # an ndarray, or a numpy scalar (made an array below)
            src.line(f"if type({leaf}) is not {src.bind(kind)} or {leaf}.shape != {shape!r} "
                     f"or {leaf}.dtype is not {src.bind(what)}: return MISS")
            if kind is not np.ndarray:
                src.line(f"{leaf} = np.asarray({leaf})")
            if spec is not None and np.dtype(spec.dtype) != what:
                src.line(f"{leaf} = {leaf}.astype({src.bind(np.dtype(spec.dtype))})")
        elif type(part[0]) is str:          # ("array", shape, dtype, bytes): by value
            _, shape, dtype, data = part
            src.line(f"if type({leaf}) is not ndarray or {leaf}.shape != {shape!r} or "
                     f"{leaf}.dtype is not {src.bind(dtype)} or {leaf}.tobytes() != "
                     f"{src.bind(data)}: return MISS")
        else:                               # (type, value): a hashable compared by value
            t, value = part
            v = src.bind(value)
            src.line(f"if type({leaf}) is not {src.bind(t)} or ({leaf} is not {v} and not "
                     f"{leaf} == {v}): return MISS")


def _run(src: _Source, compiled: Compiled | None, traced: list[str]) -> list[str]:
    """The lines calling the program (which checks its guards: ``ReplayError`` is a failed
    guard, answered GUARD); the names of its results."""
    if compiled is None:
        return []
    n = len(compiled.program.outputs)
    results = [f"r{k}" for k in range(n)]
    call = f"{src.bind(compiled)}._fn({', '.join(traced)})"    # (on floats once it is made)
    src.line("try:")
    if compiled.program.single:
        src.line(f"    r0 = {call}")
    else:
        src.line(f"    {', '.join(results)}{',' if n == 1 else ''} = {call}")
    src.line(f"except {src.bind(ReplayError)}:")
    src.line("    return GUARD")
    return results


def _outputs(src: _Source, compiled: Compiled | None, slots: Sequence[int | None],
             fixed: Sequence[Any], results: list[str]) -> list[str]:
    """Each output leaf as a name: an array the caller owns (inputs, constants and views
    copied, as ``_Recorded.run`` does), or the recorded constant."""
    names = []
    for i, s in enumerate(slots):
        name = f"o{i}"
        names.append(name)
        if s is None:       # a constant: arrays copied (f would make them anew)
            c = src.bind(fixed[i])
            src.line(f"{name} = np.array({c})" if type(fixed[i]) is np.ndarray else
                     f"{name} = {c}")
        elif shared_output(compiled, s):
            src.line(f"{name} = np.array({results[s]})")
        else:
            r = results[s]
            src.line(f"{name} = {r} if type({r}) is ndarray and {r}.base is None else "
                     f"np.array({r})")
    return names


def shared_output(compiled: Compiled, s: int) -> bool:
    """Whether output ``s`` is an array the program holds on to between calls (an input, a
    constant, an entry folded when compiling): the caller gets a copy."""
    ref = compiled.program.outputs[s]
    if ref.kind in (INPUT, CONST):
        return True
    return compiled.program.entries[ref.index].name in compiled.folded


def _build(src: _Source, d: TreeDef, outs: Any, depth: int) -> str:
    """The output pytree as one expression over the output names."""
    if depth > MAX_DEPTH:
        raise _UnsupportedError
    kind = d.kind
    if kind == "leaf":
        return next(outs)
    if kind is None:
        return "None"
    if kind not in (dict, list, tuple):     # a namedtuple or registered node: pytree.py's
        names = [next(outs) for _ in range(d.num_leaves)]
        return f"{src.bind(tree_unflatten)}({src.bind(d)}, [{', '.join(names)}])"
    children = [_build(src, c, outs, depth + 1) for c in d.children]
    if kind is dict:
        return "{" + ", ".join(f"{src.key(k)}: {c}" for k, c in zip(d.meta, children)) + "}"
    if kind is list:
        return "[" + ", ".join(children) + "]"
    return "(" + ", ".join(children) + ("," if len(children) == 1 else "") + ")"


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
        rec.entry = make_entry(rec.compiled, rec.slots, rec.fixed, rec.treedef, call_def,
                               leaves, key, traced_at)
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
        backend: str = "numpy") -> Jitted | Callable:
    """``f`` recorded on its first call per signature, compiled (``sg.compile``'s ``backend``),
    replayed; Python decisions on recorded values become guards that record it again. A
    function that already does so (``compiles_itself``: ``sg.sparse_hessian(f)``) is itself."""
    check_callable("jit", f)
    if getattr(f, "compiles_itself", False) is True:
        return f
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
