"""``sg.compile(prog)``: a Program as straight-line numpy source, one assignment per entry.

The source is generated from the Program's data alone, never from text read elsewhere: each
entry's primitive is the registry's record, its forward rule gives the call, its print rule the
comment. A primitive whose record says the numpy expression it compiles to (``numpy=`` in
the record: the operators ``v0 = a + b``, ``sum``, ``reshape``, indexing, ...) prints as that
expression, one whose forward is a numpy function as that function (``v10 = np.tanh(v9)``),
and every other as a call of its own forward rule through the namespace ``F`` the code runs in
(``v7 = F["sigmoid"](v6)``). Attribute values print as Python
literals (ints, tuples, slices, dtypes) or, for arrays, as names bound in that namespace.

The compiled function records nothing and checks only the number, shapes and dtypes of its
inputs, and the program's guards (one line each, after the entry a Python decision read:
``if not v3: G0(v3)`` raises ``ReplayError`` when the decision would go the other way): it is
the fast path for evaluating a gradient again and again. On arrays of other
libraries (dask arrays) it runs ``.dispatch_source`` instead, generated on first use: the same
lines with only calls that dispatch (``np.sum`` for ``np.add.reduce``, the forward for a
subscript), giving lazy outputs.
"""

from __future__ import annotations

import builtins
import functools
import keyword
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine.render import format_operand
from ..engine.variable import Entry
from ..errors import ArgumentError, MaterializeError
from ..primitives.core import REGISTRY
from ..primitives.lazy import is_lazy
from .core import Program
from .floats import FLOATS_AFTER, FLOATS_AT_ONCE, floats_function, may_run_on_floats
from .inputs import RESIZED, input_value
from .nodes import CONST, INPUT, NODE, Names, guard_lines, literal

RESERVED = {"np", "F", "slice"}


class Compiled:
    """A compiled program: call it on arrays; ``.source`` is its numpy code (and
    ``.floats_source`` the code it runs for a program of float64 numbers: floats.py)."""

    def __init__(self, prog: Program, source: str, fn: Callable, name: str = "program"):
        self.program = prog
        self.source = source
        self.name = name
        self._fn = fn           # what a call runs (on Python floats, once made: floats.py)
        self._numpy = fn        # the generated source's function (the backend's)
        self._floats: tuple[str, Callable] | None = None
        self._dispatching: tuple[str, Callable] | None = None
        self._specs = tuple((tuple(i.shape), np.dtype(i.dtype)) for i in prog.inputs)
        self.backend = "numpy"
        self.fallback: tuple[str, ...] = ()     # entries the numba backend left to numpy
        self.kernels: tuple[str, ...] = ()      # the numba backend's fused loops, as source
        self._resized: dict = {}                # Program at other shapes -> compiled
        self.folded: tuple[str, ...] = ()       # entries of constants alone, computed once

    def __call__(self, *arrays: Any, materialize: bool = False) -> Any:
        """Evaluate the program on new input values; one array per output (one when single).

        Arrays of other libraries (dask arrays) run the dispatching source and give lazy
        outputs; ``materialize`` as for ``Program.__call__``.
        """
        specs = self._specs
        fast = len(arrays) == len(specs)
        for a, (shape, dtype) in zip(arrays, specs):     # the common case, checked in a loop
            if type(a) is not np.ndarray or a.shape != shape or a.dtype is not dtype:
                fast = False
                break
        if not fast and len(arrays) == len(specs) and \
                any(np.shape(a) != shape for a, (shape, _) in zip(arrays, specs)):
            return self.with_shapes(*(np.shape(a) for a in arrays))(*arrays,
                                                                     materialize=materialize)
        if not fast and any(is_lazy(a) for a in arrays):
            return self._lazy(arrays, materialize)
        outs = self._fn(*arrays) if fast else self._fn(*self._checked(arrays))
        if self.program.single:
            return outs if type(outs) is np.ndarray else np.asarray(outs)
        return [o if type(o) is np.ndarray else np.asarray(o) for o in outs]

    def with_shapes(self, *shapes: Any) -> Compiled:
        """This program compiled for inputs of these shapes (see ``Program.with_shapes``)."""
        prog = self.program.with_shapes(*shapes)
        if prog is self.program:
            return self
        out = self._resized.get(prog)
        if out is None:
            out = compile(prog, self.name, self.backend)
            if len(self._resized) >= RESIZED:
                self._resized.pop(next(iter(self._resized)))
            self._resized[prog] = out
        return out

    @property
    def floats_source(self) -> str | None:
        """The source a program of float64 numbers runs on Python floats (floats.py), made
        now if not yet; None for any other program."""
        if self._floats is None and self.backend == "numpy":
            self._floats = floats_function(self.program, self.name, self._numpy) or ("", None)
            if self._floats[1] is not None:
                self._fn = self._floats[1]
        return self._floats[0] or None if self._floats is not None else None

    @property
    def dispatch_source(self) -> str:
        """The source run on arrays of other libraries: only calls that dispatch (``np.sum``
        where ``.source`` has ``np.add.reduce``)."""
        return self._dispatch()[0]

    def _dispatch(self) -> tuple[str, Callable]:
        """The dispatching source and its function, generated on first use."""
        if self._dispatching is None:
            self._dispatching = _generate(self.program, self.name, dispatch=True)
        return self._dispatching

    def _lazy(self, arrays: tuple, materialize: bool) -> Any:
        args = self._checked(arrays)
        try:
            return self._dispatch()[1](*args)
        except MaterializeError as e:
            if not materialize:
                raise MaterializeError(f"compiled program: {e}") from e
        return self.program(*args, materialize=True)     # entry by entry, computing inputs

    def __reduce__(self) -> tuple:
        """Pickled as its program and name, compiled again when unpickled."""
        return compile, (self.program, self.name)

    def _checked(self, arrays: tuple) -> list:
        """The inputs as arrays of the program's shapes and dtypes, or a clear error."""
        if len(arrays) != len(self._specs):
            names = ", ".join(i.name for i in self.program.inputs)
            raise ArgumentError(f"compiled program: takes {len(self._specs)} input(s) "
                                f"({names}), got {len(arrays)}")
        return [a if type(a) is np.ndarray and a.shape == spec.shape and a.dtype == spec.dtype
                else input_value("compiled program", spec, a)
                for spec, a in zip(self.program.inputs, arrays)]

    def __repr__(self) -> str:
        return f"<compiled program: {len(self.program.entries)} entries>"


def compile(prog: Program, name: str = "program",  # noqa: A001 (sg.compile)
            backend: str = "numpy") -> Compiled:
    """Compile a Program to a numpy function with no tape; ``.source`` holds its code.

    ``backend="numba"`` (the ``[numba]`` extra) fuses elementwise chains and their sums into
    compiled loops (numba_backend.py); ``.fallback`` names the entries left to numpy."""
    if not isinstance(prog, Program):
        raise ArgumentError(f"compile: expected a Program, got {type(prog).__name__}")
    if not name.isidentifier() or keyword.iskeyword(name) or name in RESERVED:
        raise ArgumentError(f"compile: name must be a Python identifier, got {name!r}")
    if backend not in ("numpy", "numba"):
        raise ArgumentError(f"compile: backend must be 'numpy' or 'numba', not {backend!r}")
    original, kernels, fallback = prog, [], []
    if backend == "numba":
        from .numba_backend import fuse
        prog, kernels, fallback = fuse(prog)
    source, fn, folded = _generate(prog, name, dispatch=False, backend=backend)
    out = Compiled(original, source, fn, name)
    if backend == "numpy" and may_run_on_floats(prog):
        if len(prog.entries) <= FLOATS_AT_ONCE:
            out.floats_source       # noqa: B018 (made now: a fraction of a millisecond)
        else:
            out._fn = _warming(out)
    out.folded = folded
    out.backend, out.fallback = backend, tuple(fallback)
    out.kernels = tuple(k.source for k in kernels)
    return out


def _warming(compiled: Compiled) -> Callable:
    """The numpy function, counting calls: from the ``FLOATS_AFTER``-th on the program runs on
    Python floats (the floats' function is made then: it costs about half of compiling, which
    a program called a few times would not make up)."""
    fn, calls = compiled._numpy, 0

    def warming(*arrays: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls >= FLOATS_AFTER:
            compiled._fn = fn        # (the floats' function, when it is made, replaces it)
            compiled.floats_source  # noqa: B018 (made now)
        return fn(*arrays)
    return warming


# the builtins the generated code may need: ``slice`` (in attribute literals; a loop's
# statement binds what it calls, ``range`` and the like, as names); dask arrays need
# none (their library's functions run in their own modules' namespaces), so nothing is added
BUILTINS = {"slice": slice}
# templates arrays of other libraries do not take: numpy calls that skip dispatch (ufunc
# methods), with the dispatching call of each; subscripts, which dask takes with one index
# array at a time, and numpy's Fourier transforms, which dask takes with the transformed axis
# in one chunk (None: call the forward, which handles that)
DISPATCHING = {"np.add.reduce(": "np.sum(", "[{index}]": None, "np.fft.": None}


def _dispatching(template: str) -> str | None:
    for fast, slow in DISPATCHING.items():
        if fast in template:
            if slow is None:
                return None
            template = template.replace(fast, slow)
    return template


def _generate(prog: Program, name: str, dispatch: bool, backend: str = "numpy"
              ) -> tuple[str, Callable, tuple]:
    """The source of the program's function, the function and the names of the entries
    computed here once (of constants alone: a seed spread over the batch); ``dispatch``: with
    only calls that arrays of other libraries dispatch."""
    names = Names(RESERVED)
    namespace: dict[str, Any] = {"np": np, "F": {}, "__builtins__": dict(BUILTINS)}
    params = [names.take(i.name) for i in prog.inputs]
    text_of: dict[Entry, str] = dict(zip(prog.slots, params))   # an entry -> its name here
    header = [f"def {name}({', '.join(params)}):"]

    def bind(text: str, value: Any) -> None:
        namespace[text] = value
        header.append(f"    # {_comment(text)} = {format_operand(value)}  (constant, "
                      f"{_describe(value)})")
    known: dict[Entry, Any] = {c: c.raw for c in prog.fixed}
    folded = set()
    for i, node in enumerate(prog.entries):
        value = _fold(node, known)
        if value is not None:
            known[node] = value
            folded.add(i)
    used = {x for i, n in enumerate(prog.entries) if i not in folded for x in n.inputs} | \
        {prog.at(r) for r in prog.outputs} | {prog.at(g.ref) for g in prog.guards}
    for i, (c, leaf) in enumerate(zip(prog.constants, prog.fixed)):
        text = literal(c.value) if c.name is None else None
        if text is None:
            text = names.take(c.name or f"c{i}")
            if leaf in used:
                bind(text, c.value)
        text_of[leaf] = text
    for i in sorted(folded):
        e = prog.entries[i]
        text_of[e] = text = names.take(e.name)
        if e in used:
            bind(text, known[e])
    # each dead intermediate's name is deleted on the line of its last use, so its buffer goes
    # back to the allocator then (as in hand-written numpy); a view still holding the buffer
    # keeps it alive, so values cannot change
    dead = prog.dead_after()
    checks: dict[tuple, list] = {}      # (kind, index) -> the guards on that value
    for k, g in enumerate(prog.guards):
        checks.setdefault((g.ref.kind, g.ref.index), []).append((k, g))
    lines = [line for i in range(len(prog.inputs))
             for line in guard_lines(checks.get((INPUT, i), ()), text_of[prog.slots[i]],
                                      namespace, dispatch)]
    code = _Emitter(namespace, names, header, backend)
    for i, node in enumerate(prog.entries):
        if i in folded:
            continue
        target = names.take(node.name)
        args = [text_of[x] for x in node.inputs]
        text_of[node] = target      # (a node nobody reads is deleted on its own line)
        gone = [text_of[prog.entries[j]] for j in dead[i] if j not in folded]
        drop = f"; del {', '.join(gone)}" if gone else ""
        # (a loop's text: its line, its bodies indented below it; their code is in the header)
        comment = prog.format_entry(node).split("\n    ", 1)[0]
        if node.prim.statement is not None and not dispatch and \
                REGISTRY.get(node.prim.name) is node.prim:     # a loop: its lines
            block = node.prim.statement(target, args, node.attrs or {}, code)
            lines += [(f"    {line}", comment if k == 0 else "") for k, line in
                      enumerate(block[:-1])]
            lines.append((f"    {block[-1]}{drop}", comment if len(block) == 1 else ""))
        else:
            expr = _expression(node, args, namespace, names,
                               [_shape(x) for x in node.inputs], dispatch)
            lines.append((f"    {target} = {expr}{drop}", comment))
        lines += guard_lines(checks.get((NODE, i), ()), target, namespace, dispatch)
    width = min(max((len(code) for code, _ in lines), default=0), 60)
    body = [f"{text.ljust(width)}  # {_comment(comment)}" if comment else text
            for text, comment in lines]
    outs = [text_of[prog.at(r)] for r in prog.outputs]
    ret = outs[0] if prog.single else "[" + ", ".join(outs) + "]"
    source = "\n".join(header + body + [f"    return {ret}"]) + "\n"
    code = builtins.compile(source, f"<simplegrad compiled {name}>", "exec")
    exec(code, namespace)  # noqa: S102 -- source generated above from registry records
    return source, namespace[name], tuple(prog.entries[i].name for i in sorted(folded))


class _Emitter:
    """What a loop's statement rule asks of the compiler (primitives/loops.py ``Emitter``):
    each sub-program compiled once, with this program's backend, to a function bound here
    (its source in the header, as comments)."""

    def __init__(self, namespace: dict, names: Names, header: list, backend: str):
        self.namespace, self.names, self.header, self.backend = namespace, names, header, backend
        self.made: dict[int, str] = {}
        self.whole_loops = backend == "numba"   # a loop of plain arithmetic: one kernel

    def kernel(self, loop: Any) -> list[str] | None:
        """A loop (primitives/loops.py ``Loop``) as the call of one compiled kernel, bound
        here (its source in the header, as comments); None where it cannot be written."""
        if not self.whole_loops:
            return None
        from .numba_loops import loop_kernel
        got = loop_kernel(loop)
        if got is None:
            return None
        run, args, source = got
        name = self.names.take("loop_kernel")
        self.namespace[name] = run
        self.header.append(f"    # {name}: the loop compiled whole (numba), its source:")
        self.header += [f"    #   {_comment(line)}" for line in source.splitlines()]
        call = f"{name}({', '.join([loop.steps, *args])})"
        return [f"{', '.join(loop.targets)}, = {call}" if loop.targets else call]

    def fresh(self, stem: str) -> str:
        return self.names.take(stem)

    def value(self, v: Any) -> str:
        if callable(v) and not isinstance(v, np.dtype):     # a helper (pack): bound once
            got = self.made.get(id(v))
            if got is None:
                got = self.made[id(v)] = self.names.take(getattr(v, "__name__", "helper"))
                self.namespace[got] = v
            return got
        return _literal(v, self.namespace, self.names)

    def inline(self, b: Any, args: list[str], fixed: int,
               stacks: Any = None) -> tuple[list[str], list[str], list[str]] | None:
        """Sub-program b's statements written out on the names ``args`` (its inputs, the first
        ``fixed`` the same on every trip of the loop it runs in): those reading only fixed
        names and constants (run once, before the loop), the others, and its outputs as
        source: the code a loop runs each trip without a call (None when b cannot be written
        out: a guard, another backend than numpy). ``stacks`` (primitives/loops.py
        ``Stacks``): the inputs that are one step of an array of all steps, and the entries
        reading only them and fixed names that have a form on all steps at once, computed so
        before the loop (each step's value, where a trip reads it, taken from it); and the
        outputs a ufunc computes each trip into a buffer (``stacks.into``)."""
        prog = b.program
        trace = stacks.trace if stacks is not None else None
        if self.backend != "numpy" and trace is None or prog.guards:
            return None
        if trace is not None:       # (noted again from the start when inlined again)
            trace.clear()
        text_of: dict[Entry, str] = dict(zip(prog.slots, args))
        varies = set(prog.slots[fixed:])
        known: dict[Entry, Any] = {c: c.raw for c in prog.fixed}
        for c, leaf in zip(prog.constants, prog.fixed):
            text = literal(c.value) if c.name is None else None
            if text is None:
                text = self.names.take(c.name or "c")
                self.namespace[text] = c.value
            text_of[leaf] = text
        once: list[str] = []
        each: list[str] = []
        # the values of one step with an array of all steps (an input, or computed before)
        whole: dict[Entry, str] = {}
        if stacks is not None:
            for i, name in stacks.names.items():
                whole[prog.slots[i]] = name
                varies.discard(prog.slots[i])
            varies.difference_update(prog.slots[i] for i in stacks.same)
        taken: set[Entry] = set()
        # how each input of a trip's entry comes (a trip's own entries' new arrays, carries
        # whose every new value is one: ``stacks.step``'s forms rely on their layout)
        kinds: dict[Entry, Any] = {}
        if stacks is not None and stacks.carries:
            moving = {prog.slots[i] for i in stacks.carries}
            for node in prog.entries:
                if any(x in moving for x in node.inputs):
                    moving.add(node)
                    if _new_array(node):
                        kinds[node] = "new"
            outs = [prog.at(r) for r in prog.outputs]
            for i, j in stacks.carries.items():
                if kinds.get(outs[j]) == "new":
                    kinds[prog.slots[i]] = ("carry", stacks.inits[i])
        # outputs a trip writes into a buffer (``stacks.into``): a ufunc's, read by no entry
        into: dict[Entry, str] = {}
        if stacks is not None and stacks.into:
            outs = [prog.at(r) for r in prog.outputs]
            read = {x for node in prog.entries for x in node.inputs}
            into = {outs[i]: buf for i, buf in stacks.into.items()
                    if outs.count(outs[i]) == 1 and outs[i] not in read}
        # outputs a trip writes into its own row of an array of all steps (``stacks.rows``):
        # a ufunc's new array, each at most once; the row is its value from then on (the
        # carry too, when it is one: a row is never written again)
        rows: dict[Entry, str] = {}
        written: set[Entry] = set()     # (those a trip's line computes into their row)
        if stacks is not None and stacks.rows and trace is None:
            outs = [prog.at(r) for r in prog.outputs]
            for i, (row, shape, dtype) in stacks.rows.items():
                node = outs[i]
                if node not in rows and node not in into and type(node) is Entry and \
                        node.prim is not None and tuple(node.shape) == tuple(shape) != () and \
                        np.dtype(node.dtype) == np.dtype(dtype) and _new_array(node) and \
                        node.prim.forward.nout == 1:
                    rows[node] = row

        # the entries of the outputs a trip may leave to after the loop (``stacks.defer``, the
        # terms of sums), and those only they read: computed on the arrays of all steps
        # (chunks of them), the trip keeping the values of its own they read
        deferrable: set[Entry] = set()
        if stacks is not None and stacks.defer:
            outs = [prog.at(r) for r in prog.outputs]
            targets = {outs[i] for i in stacks.defer if outs.count(outs[i]) == 1}
            users: dict[Entry, list] = {}
            for node in prog.entries:
                for x in node.inputs:
                    users.setdefault(x, []).append(node)
            for node in reversed(prog.entries):
                if (node in targets or node not in outs and users.get(node) and
                        all(u in deferrable for u in users[node])) and \
                        node.prim.statement is None and REGISTRY.get(node.prim.name) is node.prim:
                    deferrable.add(node)
        later: dict[Entry, str] = {}        # deferred entries -> their arrays (of a chunk)
        kept: dict[Entry, str] = {}         # a trip's values they read -> arrays of all steps
        chunks: dict[str, str] = {}         # an array of all steps -> its chunk's name
        after: list[str] = []

        names: dict[Any, str] = {}          # (names taken for them, before they are used)

        def chunk_of(name: str) -> str:
            if ("chunk", name) not in names:
                names[("chunk", name)] = self.names.take(f"{name}_c")
            return names[("chunk", name)]

        def kept_of(x: Entry) -> str:
            if ("kept", x) not in names:
                names[("kept", x)] = self.names.take(f"{text_of[x]}_kept")
            return names[("kept", x)]

        # a trip's line computing a ufunc's new array (not a number): its index in ``each``
        # and its arguments, so that a value kept for the chunks is computed into its row
        line_of: dict[Entry, tuple[int, list[str]]] = {}

        def keep(x: Entry) -> None:         # the trip keeps x's values for the chunks
            if x not in kept:
                kept[x] = kept_of(x)
                once.append(f"{kept[x]} = np.empty(({stacks.steps},) + "
                            f"{self.value(tuple(x.shape))}, {self.value(np.dtype(x.dtype))})")
                row = f"{kept[x]}[{stacks.step}]"
                if x in line_of:
                    k, ins = line_of.pop(x)
                    each[k] = f"{text_of[x]} = np.{x.prim.forward.__name__}(" \
                              f"{', '.join(ins)}, out={row})"
                else:
                    each.append(f"{row} = {text_of[x]}")

        def step_of(xs: Any) -> None:      # each step's value, where a trip reads it
            for x in xs:
                if x in whole and x not in taken:
                    taken.add(x)
                    each.append(f"{text_of[x]} = {whole[x]}[{stacks.step}]")
                    if trace is not None:
                        trace.append(("row", text_of[x], whole[x]))
        for node in prog.entries:
            value = _fold(node, known)
            target = self.names.take(node.name)
            text_of[node] = target
            if value is not None:       # (of constants alone: computed here once)
                known[node] = value
                self.namespace[target] = value
                continue
            ins = [text_of[x] for x in node.inputs]
            if node in deferrable and any(x in varies or x in whole or x in later
                                          for x in node.inputs):
                texts = [later[x] if x in later else chunk_of(whole[x]) if x in whole else
                         chunk_of(kept_of(x)) if x in varies else text_of[x]
                         for x in node.inputs]
                form = stacks.form(node, texts, [x in later or x in whole or x in varies
                                                 for x in node.inputs],
                                   [_shape(x) for x in node.inputs], stacks.span,
                                   functools.partial(self._stacked, node))
                if form is not None:
                    for x in node.inputs:
                        if x in varies and x not in later:
                            keep(x)
                        if x in whole or x in varies and x not in later:
                            name = whole.get(x) or kept[x]
                            chunks.setdefault(name, chunk_of(name))
                    later[node] = self.names.take(f"{target}_later")
                    after.append(f"{later[node]} = {form}")
                    continue
            if any(x in later for x in node.inputs):     # (a term left in the loop after all)
                stacks.defer = set()
                return self.inline(b, args, fixed, stacks)
            if node.prim.statement is not None and REGISTRY.get(node.prim.name) is node.prim:
                block = node.prim.statement(target, ins, node.attrs or {}, self)
            else:
                block = [f"{target} = " + _expression(
                    node, ins, self.namespace, self.names, [_shape(x) for x in node.inputs])]
            if any(x in varies for x in node.inputs):
                varies.add(node)
                step_of(node.inputs)
                fn = node.prim.forward
                if node in into and _new_array(node):
                    text_of[node] = into[node]
                    block = [f"np.{fn.__name__}({', '.join(ins)}, out={into[node]})"]
                elif node in rows:
                    block = [f"{target} = np.{fn.__name__}({', '.join(ins)}, out={rows[node]})"]
                    written.add(node)
                elif stacks is not None and trace is None and \
                        REGISTRY.get(node.prim.name) is node.prim:
                    got = stacks.per_step(node, ins, [kinds.get(x, "fixed" if x not in varies and
                                                            x not in whole else None)
                                                  for x in node.inputs],
                                      [_shape(x) for x in node.inputs])
                    if got is not None:
                        bound = self.names.take(f"{target}_fn")
                        once.append(f"{bound} = {self.value(got[0])}({', '.join(got[1])})")
                        block = [f"{target} = {bound}({got[2]})"]
                each += block
                if trace is None and len(block) == 1 and block[0].startswith(f"{target} = ") \
                        and node not in into and node not in rows and _new_array(node) and \
                        node.prim.forward.nout == 1 and tuple(node.shape) != ():
                    line_of[node] = (len(each) - 1, ins)
                if trace is not None:
                    trace.append(("entry", node, target, ins, [_shape(x) for x in node.inputs],
                                  [_dtype(x) for x in node.inputs]))
            elif any(x in whole for x in node.inputs):
                form = stacks.form(node, [whole.get(x, text_of[x]) for x in node.inputs],
                                   [x in whole for x in node.inputs],
                                   [_shape(x) for x in node.inputs], stacks.steps,
                                   functools.partial(self._stacked, node)) \
                    if REGISTRY.get(node.prim.name) is node.prim and node.prim.statement is None \
                    else None
                if form is None:
                    varies.add(node)
                    step_of(node.inputs)
                    each += block
                    if trace is not None:
                        trace.append(("entry", node, target, ins,
                                      [_shape(x) for x in node.inputs],
                                      [_dtype(x) for x in node.inputs]))
                else:
                    whole[node] = self.names.take(f"{target}_all")
                    once.append(f"{whole[node]} = {form}")
            else:
                once += block
        outs = [prog.at(r) for r in prog.outputs]
        if stacks is not None:
            stacks.deferred = {i: later[outs[i]] for i in stacks.defer if outs[i] in later}
            if any(x in later for i, x in enumerate(outs) if i not in stacks.deferred):
                stacks.defer = set()
                return self.inline(b, args, fixed, stacks)
            stacks.after = [*(f"{c} = {name}[{stacks.lo}:{stacks.hi}]"
                              for name, c in chunks.items()), *after]
        step_of(o for o in outs if o not in later)
        if stacks is not None:
            stacks.written = {i for i, x in enumerate(outs) if x in written and
                              i in stacks.rows and rows[x] == stacks.rows[i][0]}
        return once, each, [later.get(x) or text_of[x] for x in outs]

    def _stacked(self, node: Entry, args: list[str]) -> str:
        """The entry's numpy expression on these names (of arrays of all steps)."""
        return _expression(node, args, self.namespace, self.names, [None] * len(args))

    def body(self, b: Any) -> str:
        got = self.made.get(id(b))
        if got is None:
            stem = "".join(ch if ch.isalnum() else "_" for ch in str(b.name))
            got = self.made[id(b)] = self.names.take(f"body_{stem}"[:60])
            inner = compile(b.program, name=got, backend=self.backend)
            fn = inner._numpy       # (its loop passes arrays on: numpy's own values)
            self.namespace[got] = (lambda *v: [fn(*v)]) if b.program.single else fn
            self.header.append(f"    # {got}: the sub-program {_comment(b.name)!r}, compiled:")
            self.header += [f"    #   {_comment(line)}" for line in inner.source.splitlines()]
        return got


def _new_array(node: Entry) -> bool:
    """Whether an entry's value is an array numpy makes for it (a ufunc's, of an elementwise
    record): C-contiguous, positive strides."""
    return isinstance(node.prim.forward, np.ufunc) and node.prim.elementwise and \
        not node.attrs and REGISTRY.get(node.prim.name) is node.prim


def _fold(node: Entry, known: dict) -> Any:
    """The value of an entry of constants alone (None when it has an input or fails); only
    registered primitives (a fused kernel is compiled when called)."""
    inputs = node.inputs
    if not inputs or REGISTRY.get(node.prim.name) is not node.prim or \
            any(x not in known for x in inputs):
        return None
    try:
        with np.errstate(all="ignore"):
            value = node.prim.forward(*[known[x] for x in inputs], **(node.attrs or {}))
    except Exception:       # left to the function, which raises it as before
        return None
    if isinstance(value, np.ndarray) and value.flags.writeable:
        value.setflags(write=False)
    return value



def _comment(text: str) -> str:
    """Text safe inside a comment: no line breaks or other unprintable characters (names come
    from the program, and a loaded program's names from a file)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _describe(x: Any) -> str:
    arr = np.asarray(x)
    return f"{arr.dtype}, shape {arr.shape}"


def _expression(node: Entry, args: list[str], namespace: dict, names: Names,
                shapes: list[tuple | None], dispatch: bool = False) -> str:
    """The numpy expression of one entry (``dispatch``: one arrays of other libraries take)."""
    prim = node.prim
    attrs = node.attrs or {}
    literal = {k: _literal(v, namespace, names) for k, v in attrs.items()}
    registered = REGISTRY.get(prim.name) is prim    # never a template of a look-alike
    template = prim.numpy
    if dispatch and template is not None:
        template = _dispatching(template)
    if registered and template is None and prim.numpy_at is not None:
        # a form for these shapes and dtypes (matmul's @, cast's of a complex value)
        template = prim.numpy_at(shapes, attrs, [_dtype(x) for x in node.inputs])
    if registered and template is not None:
        if template.startswith("{0}.") and not args[0].isidentifier():
            args = [f"np.asarray({args[0]})", *args[1:]]    # a number literal has no methods
        return _fill(template, args, attrs, literal)
    keywords = "".join(f", {k}={v}" for k, v in literal.items())
    fn = prim.forward
    if isinstance(fn, np.ufunc) or getattr(np, getattr(fn, "__name__", ""), None) is fn:
        return f"np.{fn.__name__}({', '.join(args)}{keywords})"
    table = namespace["F"]
    key, k = prim.name, 1
    while table.get(key, fn) is not fn:     # two custom primitives of one name
        k += 1
        key = f"{prim.name}#{k}"
    table[key] = fn
    return f'F[{key!r}]({", ".join(args)}{keywords})'


def _dtype(x: Entry) -> np.dtype:
    """The dtype of an input of an entry (a constant's own)."""
    return np.result_type(x.raw) if x.prim is None and x.attrs == CONST else np.dtype(x.dtype)


def _shape(x: Entry) -> tuple | None:
    """The static shape of an input of an entry: inputs are checked on every call, entries are
    recorded, constants are fixed (None when unknown)."""
    if x.prim is None and x.attrs == CONST:
        return x.raw.shape if isinstance(x.raw, np.ndarray) else None
    return tuple(x.shape)


def _fill(template: str, args: list[str], attrs: dict, literal: dict) -> str:
    def keyword_arg(k: str, default: Any) -> str:
        return f", {k}={literal[k]}" if k in attrs and attrs[k] != default else ""
    fields = {"axis": keyword_arg("axis", None), "keepdims": keyword_arg("keepdims", False),
              "axes": "" if attrs.get("axes") is None else f", {literal['axes']}"}
    # for ufunc reductions ("np.add.reduce({0}{reduce_axis}{keepdims})", whose own default axis
    # is 0) and method templates ("{0}.transpose({axes_arg})"): both skip the dispatch layer of
    # the np.* function, about a microsecond per call, which counts on small arrays
    fields["reduce_axis"] = f", axis={literal['axis']}" if "axis" in attrs else ", axis=None"
    fields["axes_arg"] = fields["axes"][2:]
    for k in literal:       # any other attribute by its name (shape, dtype, norm, ...)
        fields.setdefault(k, literal[k])
    if "index" in attrs:
        fields["index"] = _index(attrs["index"], literal["index"])
    return template.format(*args, **fields)


def _index(index: Any, text: str) -> str:
    """An index in subscript form (``0, 1:3``) when it is made of ints, slices, ``...`` and
    None; otherwise the tuple's literal, whose arrays are bound names."""
    items = index if isinstance(index, tuple) else (index,)
    parts = [_subscript(item) for item in items]
    if any(p is None for p in parts):
        return text
    if not parts:
        return "()"
    return parts[0] + "," if len(parts) == 1 and isinstance(index, tuple) else ", ".join(parts)


def _subscript(item: Any) -> str | None:
    if item is None or item is Ellipsis:
        return "None" if item is None else "..."
    if type(item) is int or isinstance(item, np.integer):
        return str(int(item))
    if isinstance(item, slice):
        bounds = (item.start, item.stop, item.step)
        if not all(p is None or type(p) is int or isinstance(p, np.integer) for p in bounds):
            return None
        text = ":".join("" if p is None else str(int(p)) for p in bounds[:2])
        return text if item.step is None else f"{text}:{int(item.step)}"
    return None


def _literal(value: Any, namespace: dict, names: Names) -> str:
    """Python source for an attribute value; arrays and anything unusual are bound names."""
    if value is None or type(value) in (bool, int, str):
        return repr(value)
    if type(value) is float and math.isfinite(value):
        return repr(value)
    if value is Ellipsis:
        return "..."
    if isinstance(value, np.integer):
        return repr(int(value))
    if isinstance(value, np.dtype):
        return f"np.dtype({value.str!r})"
    if isinstance(value, slice):
        return "slice(" + ", ".join(_literal(p, namespace, names)
                                    for p in (value.start, value.stop, value.step)) + ")"
    if isinstance(value, tuple):
        inner = ", ".join(_literal(v, namespace, names) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    key = names.take("attr")
    namespace[key] = value
    return key
