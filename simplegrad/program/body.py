"""Sub-programs: the bodies (and conditions, branches) a loop or branch entry holds
(primitives/loops.py's ``Body`` protocol), the bodies derived from them by tracing again, and
a program's dependence walk (its Jacobian pattern, which a loop's sparsity rule reads).

A ``Body`` is a ``Program`` with flat inputs and outputs, their (shape, dtype), an example
value of each input (what derived bodies are traced at) and a name. ``sg.scan`` and the other
loops (transforms/loops.py) make them from the user's functions; the loader
(``sg.load_program``) makes them from a saved program's nested sub-programs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..engine.batching import Batched, new_level, wrap
from ..engine.explain import origins
from ..engine.ops import Ops
from ..engine.render import head
from ..engine.taylor import carry
from ..engine.variable import Variable
from ..errors import MissingToolError
from ..primitives.core import value_of
from ..primitives.lazy import is_lazy
from ..primitives.loops import RUN_ATTRS, Aval, is_float, ones
from ..primitives.methods import VALUES
from ..primitives.sparsity_rules import rule_for
from .compile import compile as compile_program
from .core import Program, extract
from .nodes import CONST, INPUT, NODE, refs_of
from .residuals import split

__all__ = ["Body", "trace_body", "settled", "walk_dependence", "scipy_sparse"]

COMPILE_AFTER = 16      # runs of a body after which it runs compiled


# ---------------------------------------------------------------- bodies


class Body:
    """A sub-program with flat inputs and outputs, and the bodies derived from it."""

    def __init__(self, program: Program, ins: Sequence[Aval], outs: Sequence[Aval],
                 example: Sequence[Any], name: str):
        # a body runs many times, each run its own: the entries keep nothing of the one run
        # they were traced at (a while loop's trips)
        for e in program.entries:
            if e.attrs and any(k in e.attrs for k in RUN_ATTRS):
                e.attrs = {k: v for k, v in e.attrs.items() if k not in RUN_ATTRS}
        self.program = program
        self.ins = tuple((tuple(s), np.dtype(d)) for s, d in ins)
        self.outs = tuple((tuple(s), np.dtype(d)) for s, d in outs)
        self.example = tuple(example)
        self.name = name
        self._derived: dict = {}
        self._build: Callable | None = None     # how a derived body was traced (notes)
        # each step runs the program on values of the inputs' shapes and dtypes (the loop
        # keeps them so): the run without the checks of a call on new arrays, where the
        # program offers one; a body run many times, compiled to numpy code (no per-entry
        # dispatch) once it has run COMPILE_AFTER times
        self._run = getattr(program, "_run", None)
        self._calls = 0
        self._compiled: Any = None
        self._raw: Any = None       # the compiled function without a call's checks

    def __repr__(self) -> str:
        return self.name

    def __call__(self, *values: Any) -> list:
        """The outputs' values at these inputs (lazy ones: the program run on them, lazily
        where its entries are)."""
        for v in values:
            if type(v) is not np.ndarray and is_lazy(v):
                got = self.program(*values)
                return [got] if self.program.single else got
        fast = self._compiled
        if fast is not None:
            return fast(*values)
        self._calls += 1
        if self._calls == COMPILE_AFTER:
            self._compile()
        if self._run is not None:
            return self._run([v if type(v) is np.ndarray else np.asarray(v) for v in values])
        return self.program(*values)

    def _compile(self) -> None:
        """Run the body as compiled numpy code from now on (where it compiles)."""
        try:
            fn = compile_program(self.program, name="body")
        except Exception:       # (a program the compiler does not take runs as it did)
            return
        self._compiled = (lambda *v: [fn(*v)]) if self.program.single else fn
        array, asarray = np.ndarray, np.asarray
        self._raw = (lambda *v: [asarray(fn._fn(*v))]) if self.program.single else \
            (lambda *v: [o if type(o) is array else asarray(o) for o in fn._fn(*v)])

    def runner(self, trips: int) -> Callable:
        """What a loop of ``trips`` steps calls, on numpy arrays of the inputs' shapes and
        dtypes (the loop keeps them so): the compiled function without a call's checks,
        compiled now when the loop takes it past ``COMPILE_AFTER`` runs; else the body."""
        if self._compiled is None and self._calls + trips >= COMPILE_AFTER:
            self._calls = COMPILE_AFTER
            self._compile()
        return self if self._raw is None else self._raw

    def simplified(self) -> Body:
        """The body with its program simplified (``sg.simplify``; itself when nothing
        changes)."""
        from .simplify import simplify
        prog = simplify(self.program)
        if prog.format(raw=True) == self.program.format(raw=True):
            return self
        body = Body(prog, self.ins, self.outs, self.example, self.name)
        body._build = self._build
        return body

    def lines(self, explain: bool = False) -> list[str]:
        """The body as text, one line per entry (as a program prints); ``explain``: each line
        of a derived body with what it differentiates (``notes``), its loops explained."""
        notes = self.notes() if explain else None
        return self.program.format(raw=True, explain=explain, notes=notes).splitlines()

    def notes(self) -> dict[str, str]:
        """Entry name -> what it differentiates, for a body derived by differentiating one
        (a vjp or jvp body): read off a second trace of it, made when first asked."""
        got = self._derived.get(("notes",))
        if got is None:
            build = self._build
            got = {} if build is None else _notes(build, self.ins, self.example,
                                                   {e.label for e in self.program.entries})
            self._derived[("notes",)] = got
        return got

    def work(self) -> int:
        """The entries one run of the body computes (a loop inside: by its trips)."""
        return self.program.stats().work

    def dependence(self, *values: Any) -> Any:
        """The body's Jacobian pattern at these input values: a boolean csr_array, its
        outputs' entries (concatenated) by its float inputs' (concatenated, C order)."""
        return dependence(self.program, values)

    def reads_integers(self) -> bool:
        """Whether the body's pattern may depend on its integer inputs' values (one reaches
        a rule that reads values: an index, a loop)."""
        got = self._derived.get(("reads_integers",))
        if got is None:
            got = self._derived[("reads_integers",)] = reads_integers(self.program)
        return got

    def record(self, o: Any, *inputs: Any) -> list:
        """The outputs recorded on ``o`` (the Ops, or VALUES for values)."""
        if o is VALUES or not isinstance(o, Ops):
            return self.program(*[value_of(x) for x in inputs])
        seen = getattr(o, "noted", None)    # (traced again for notes: who recorded what)
        if seen is None:
            return self.program.record(o, *inputs)
        recorded: dict = {}
        for x, spec in zip(inputs, self.program.inputs):
            if isinstance(x, Variable):
                seen.setdefault(id(x.node), (self, spec.name))
        outs = self.program.record(o, *inputs, seen=recorded)
        for k, line in recorded.items():
            seen.setdefault(k, (self, line))
        return outs

    def derive(self, key: tuple, ins: Sequence[Aval], example: Sequence[Any],
               build: Callable) -> Body:
        """The body traced from ``build(o, *leaves)`` at ``ins``, once per key."""
        got = self._derived.get(key)
        if got is None:
            got = self._derived[key] = trace_body(build, ins, example, f"{self.name}.{key[0]}")
        return got

    def vjp(self, wrt: tuple[int, ...]) -> Body:
        """(ins, one cotangent per float output) -> the cotangents of the inputs at ``wrt``."""
        floats = [j for j, a in enumerate(self.outs) if is_float(a)]
        n = len(self.ins)

        def build(o: Ops, *a: Any) -> list:
            outs = self.record(o, *a[:n])
            total = None
            for j, g in zip(floats, a[n:]):
                if isinstance(outs[j], Variable):
                    term = o.sum(o.mul(outs[j], g))
                    total = term if total is None else o.add(total, term)
            targets = [a[i] for i in wrt]
            if total is None:
                return [np.zeros(self.ins[i][0], self.ins[i][1]) for i in wrt]
            grads = o.grad(total, targets, create_graph=True)
            return list(grads)

        example = [*self.example, *(ones(self.outs[j][0], self.outs[j][1]) for j in floats)]
        return self.derive(("vjp", wrt), [*self.ins, *(self.outs[j] for j in floats)],
                           example, build)

    def split(self, wrt: tuple[int, ...], nc: int, nk: int) -> Any:
        """The vjp at ``wrt`` split where it reads its cotangents (``residuals.split``: the
        forward keeping what the pullback reads), or None (also where the vjp does not trace:
        the gradient, which traces it, says why); made once."""
        key = ("split", wrt, nc, nk)
        if key not in self._derived:
            try:
                got = split(self, self.vjp(wrt), nc, nk, Body)
            except Exception:   # (a speed-up only: the sweep runs the vjp itself)
                got = None
            self._derived[key] = got
        return self._derived[key]

    def jvp(self, moving: tuple[int, ...]) -> Body:
        """(ins, one tangent per input at ``moving``) -> (outs, one tangent per float output)."""
        n = len(self.ins)

        def build(o: Ops, *a: Any) -> list:
            outs = self.record(o, *a[:n])
            tangents = []
            for (shape, dtype), y in zip(self.outs, outs):
                if np.dtype(dtype).kind not in "fc":
                    continue
                t = None
                if isinstance(y, Variable) and y.requires_grad:
                    t = o.jvp(y, [a[i] for i in moving], list(a[n:]), create_graph=True)
                tangents.append(np.zeros(shape, dtype) if t is None else t)
            return [*outs, *tangents]

        example = [*self.example, *(ones(self.ins[i][0], self.ins[i][1]) for i in moving)]
        return self.derive(("jvp", moving), [*self.ins, *(self.ins[i] for i in moving)],
                           example, build)

    def taylor(self, moving: tuple[int, ...], order: int) -> Body:
        """(ins, coefficients 1..order of each input at ``moving``) -> (outs, coefficients
        1..order of each float output): the body's truncated Taylor series."""
        n = len(self.ins)

        def build(o: Ops, *a: Any) -> list:
            leaves = a[:n]
            outs = self.record(o, *leaves)
            known = {leaves[i]: [leaves[i], *a[n + j * order:n + (j + 1) * order]]
                     for j, i in enumerate(moving)}
            coefs = []
            for (shape, dtype), y in zip(self.outs, outs):
                if np.dtype(dtype).kind not in "fc":
                    continue
                series = [y] + [None] * order
                if isinstance(y, Variable) and y.rec is o:
                    given = [c for x, c in known.items() if x is y]
                    series = given[0] if given else carry(o, y, known, order, True)
                coefs += [np.zeros(shape, dtype) if c is None else c for c in series[1:]]
            return [*outs, *coefs]

        ins = [*self.ins, *(self.ins[i] for i in moving for _ in range(order))]
        example = [*self.example, *(ones(self.ins[i][0], self.ins[i][1]) for i in moving
                                    for _ in range(order))]
        return self.derive(("taylor", moving, order), ins, example, build)

    def batched(self, flags: tuple[bool, ...], size: int) -> Body:
        """The body on ``size`` examples at once: inputs at ``flags`` carry them along a
        leading axis, every output does."""
        ins = [((size, *s), d) if f else (s, d) for (s, d), f in zip(self.ins, flags)]
        example = [np.broadcast_to(v, (size, *np.shape(v))).copy() if f else v
                   for v, f in zip(self.example, flags)]

        def build(o: Ops, *a: Any) -> list:
            level = new_level()
            outs = self.record(o, *[wrap(x, level) if f else x for x, f in zip(a, flags)])
            stacks = []
            for (shape, _), y in zip(self.outs, outs):
                if type(y) is Batched and y.level == level:
                    stacks.append(y.inner)
                else:           # the same for every example
                    y = o.reshape(y, (1, *shape)) if isinstance(y, Variable) else \
                        np.reshape(y, (1, *shape))
                    stacks.append(o.expand(y, (size, *shape)) if isinstance(y, Variable)
                                  else np.broadcast_to(y, (size, *shape)).copy())
            return stacks
        return self.derive(("batched", flags, size), ins, example, build)


def _traced(build: Callable, ins: Sequence[Aval], example: Sequence[Any],
            noted: dict | None = None) -> tuple:
    """``build(o, *leaves)`` recorded on a scratch Ops: the Ops, the leaves, the outputs
    (``noted``: the Ops notes in it which body recorded each entry, ``Body.record``)."""
    s = Ops(simplify=True)
    if noted is not None:
        s.noted = noted
    leaves = [s.leaf(np.array(v, dtype=d).reshape(shape), None, is_float((shape, d)))
              for (shape, d), v in zip(ins, example)]
    with np.errstate(all="ignore"):
        outs = build(s, *leaves)
    return s, leaves, [settled(s, y) for y in outs]


def trace_body(build: Callable, ins: Sequence[Aval], example: Sequence[Any], name: str) -> Body:
    """A derived body: ``build(o, *leaves)`` recorded once on a scratch Ops."""
    s, leaves, outs = _traced(build, ins, example)
    program = extract(leaves, outs, s)
    body = Body(program, ins, [(y.shape, y.dtype) for y in outs], example, name)
    body._build = build
    return body


def _notes(build: Callable, ins: Sequence[Aval], example: Sequence[Any],
           kept: set[str]) -> dict[str, str]:
    """What each entry of a derived body differentiates, by name: the same trace made again
    (it names its entries as the first did), noting which body recorded each entry. An entry
    the sweep recorded pulling back through a body's line says which line and input
    (``d(v2 = v0 * v0)/dv0 in square``); one recorded by running a derived body keeps that
    body's note."""
    # id of an entry -> (the body, its entry or input name): kept on the scratch Ops of this
    # trace (which keeps every entry it names alive), so nothing outside it is noted
    seen: dict[int, tuple] = {}
    s, _, _ = _traced(build, ins, example, seen)
    tape = s.tape
    notes: dict[str, str] = {}
    for p, (entry, i) in origins(tape).items():
        name = tape.at(p).name
        body, line = seen.get(id(entry), (None, None))
        if name not in kept or body is None or type(line) is str:
            continue
        if i < 0:       # a tangent pushed through the line
            notes[name] = f"jvp of ({head(body.program.format_entry(line))}) in {body!r}"
            continue
        wrt = seen.get(id(entry.inputs[i]), (None, None))[1]
        if wrt is None:
            continue
        wrt = wrt if type(wrt) is str else wrt.label
        notes[name] = f"d({head(body.program.format_entry(line))})/d{wrt} in {body!r}"
    for p, x in tape.accumulations.items():
        name = tape.at(p).name
        body, line = seen.get(id(x), (None, None))
        if name in kept and body is not None and name not in notes:
            what = tape.at(p).prim.accumulation or "accumulation of"
            of = line if type(line) is str else line.label
            notes[name] = f"{what} the cotangents of {of} in {body!r}"
    for v in tape.entries:
        body, line = seen.get(id(v), (None, None))
        if body is not None and type(line) is not str and v.name in kept and \
                v.name not in notes:
            note = body.notes().get(line.label)
            if note is not None:
                notes[v.name] = note
    return notes


def settled(s: Ops, y: Any) -> Variable:
    """An output as a Variable of ``s`` (a constant becomes a leaf, so a program keeps it)."""
    if isinstance(y, Variable) and y.rec is s:
        return y
    return s.leaf(np.array(value_of(y)), None, False)


# ---------------------------------------------------------------- dependence (sparsity rules)


def reads_integers(program: Program) -> bool:
    """Whether a value computed from an integer input of ``program`` reaches a sparsity rule
    that reads values (not only shapes)."""
    tainted = {(INPUT, k) for k, i in enumerate(program.inputs)
               if np.dtype(i.dtype).kind not in "fc"}
    for k, node in enumerate(program.entries):
        refs = [(r.kind, r.index) for r in refs_of(node)]
        if any(r in tainted for r in refs):
            if rule_for(node.prim).reads:
                return True
            tainted.add((NODE, k))
    return False


def dependence(program: Program, values: Sequence[Any]) -> Any:
    """Which entries of the inputs (float ones, concatenated in C order) each entry of the
    outputs (concatenated) may depend on, at these input values: a boolean csr_array, the
    program's Jacobian pattern (the inputs taken as varying; the rules of
    primitives/sparsity_rules.py propagated over its entries)."""
    sp = scipy_sparse()
    values = [np.asarray(v) for v in values]
    total = sum(v.size for v in values)
    vals: list = [*values, *(c.value for c in program.constants)]
    pats: list = []
    col = 0
    for v in values:
        if v.dtype.kind in "fc":
            pats.append(sp.csr_array((np.ones(v.size, np.float32),
                                      (np.arange(v.size), col + np.arange(v.size))),
                                     shape=(v.size, total)))
        else:
            pats.append(None)
        col += v.size
    pats += [None] * len(program.constants)
    varies = [True] * len(values) + [False] * len(program.constants)
    at = walk_dependence(program, vals, pats, varies)
    blocks = []
    for r in program.outputs:
        p = pats[at(r)]
        n = int(np.size(vals[at(r)]))
        blocks.append(sp.csr_array((n, total), dtype=np.float32) if p is None else p)
    return sp.csr_array(sp.vstack(blocks, format="csr"), dtype=bool)


def walk_dependence(prog: Any, values: list, patterns: list, varies: list) -> Callable:
    """Run ``prog``'s entries, appending each one's value, dependence pattern (None: on none of
    the inputs the patterns start from) and whether it varies, to the lists that hold its
    inputs' then its constants'; the index of a Ref in those lists is what it returns."""
    sp = scipy_sparse()
    first = len(prog.inputs)
    base = first + len(prog.constants)

    def at(r: Any) -> int:
        return r.index + (0 if r.kind == INPUT else first if r.kind == CONST else base)
    for node in prog.entries:
        refs = refs_of(node)
        args = [values[at(r)] for r in refs]
        attrs = node.attrs or {}
        with np.errstate(all="ignore"):     # (a pattern is read at any point, nan included)
            values.append(node.prim.forward(*args, **attrs))
        fixed = [not varies[at(r)] for r in refs]
        varies.append(not all(fixed))
        ins = [patterns[at(r)] for r in refs]
        if all(p is None for p in ins):
            patterns.append(None)
            continue
        size = int(np.prod(node.shape))
        deps = rule_for(node.prim)(node.prim, args, tuple(node.shape), attrs, fixed=fixed)
        acc = None
        for p, a, dep in zip(ins, args, deps):
            if p is None or dep is None:
                continue
            rows, cols = dep
            if np.shape(a) == tuple(node.shape) and rows.size == size and \
                    np.array_equal(rows, cols) and np.array_equal(rows, np.arange(size)):
                term = p        # an entry on its own input's entry alone
            else:
                local = sp.csr_array((np.ones(rows.size, np.float32), (rows, cols)),
                                     shape=(size, int(np.size(a))))
                term = local @ p
            acc = term if acc is None else acc + term
        if acc is not None:
            acc = sp.csr_array(acc)
            acc.sum_duplicates()
            acc.eliminate_zeros()
            acc.data[:] = 1
        patterns.append(acc)
    return at


def scipy_sparse() -> Any:
    """scipy.sparse, or an error saying how to install it."""
    try:
        import scipy.sparse
    except ImportError:
        raise MissingToolError("sparse Jacobians and Hessians need scipy: pip install "
                               "'simplegrad[sparse]'") from None
    return scipy.sparse


# ---------------------------------------------------------------- the loops' check cases
#
# The registry walks (tests/test_primitives.py and the others) check every record on its
# cases; a loop's cases hold bodies, which are programs, so they are made here and put on
# the records (as sparsity_rules.attach_rules puts the index-dependency rules).


def _body(build: Callable, *shapes: tuple, name: str) -> Body:
    ins = [(s, np.dtype(np.float64)) for s in shapes]
    return trace_body(build, ins, [np.full(s, 0.5) for s in shapes], name)


def _loop_cases() -> None:
    from ..primitives.core import NONZERO, POSITIVE, Case, uniform
    from ..primitives.loops import (
        COND,
        PART,
        PLACED,
        SCAN,
        WHILE,
        WHILE_VJP,
        cond_attrs,
        scan_attrs,
        while_attrs,
    )
    rnn = _body(lambda o, w, c, x: [o.tanh(o.add(o.mul(c, x), w)), o.mul(o.sin(c), w)],
                (3,), (3,), (3,), name="cell")
    decay = _body(lambda o, c, x: [o.mul(c, o.cos(x)), o.add(c, x)], (2,), (2,), name="decay")
    square = _body(lambda o, c: [o.add(o.mul(o.mul(c, c), 0.5), 0.1)], (2,), name="square")
    SCAN.cases = (Case(((3,), (3,), (4, 3)), scan_attrs(rnn, 1, 1, 4), label="rnn"),
                  Case(((2,), (3, 2)), scan_attrs(decay, 0, 1, 3, reverse=True),
                       label="reverse"),
                  Case(((2,),), scan_attrs(square, 0, 1, 3), label="length"))
    # Newton's sqrt(a) for a counted 3 trips (k from 0 by ones while k < 2.5)
    newton = _body(lambda o, a, x, k: [o.mul(o.add(x, o.div(a, x)), 0.5), o.add(k, 1.0)],
                   (), (), (), name="newton")
    below = _body(lambda o, a, x, k: [o.less(k, 2.5)], (), (), (), name="below")
    zero = uniform(0.0, 0.0)
    newton_domain = (POSITIVE, POSITIVE, zero)
    WHILE.cases = (Case(((), (), ()), while_attrs(newton, below, 1), newton_domain,
                        label="newton"),
                   Case(((), (), ()), while_attrs(newton, below, 1, checkpoints=2),
                        newton_domain, label="checkpoints"),
                   Case(((), (), ()), while_attrs(newton, below, 1, max_steps=2),
                        newton_domain, label="max_steps"))
    loop = while_attrs(newton, below, 1)
    three = uniform(3.0, 3.0)       # (a packed output whose trip count is 3)
    WHILE_VJP.cases = (Case(((), (), (), (1, 3), (1, 3)),
                            {"body": newton, "nc": 1, "layout": loop["layout"],
                             "width": loop["width"], "checkpoints": 2},
                            (POSITIVE, POSITIVE, zero, POSITIVE, three), label="newton"),)
    branches = (_body(lambda o, x, y: [o.mul(x, y), o.sum(x)], (3,), (3,), name="product"),
                _body(lambda o, x, y: [o.add(o.sin(x), y), o.sum(o.mul(y, y))], (3,), (3,),
                      name="sine"))
    COND.cases = (Case(((), (3,), (3,)), cond_attrs(branches), (NONZERO, NONZERO, NONZERO),
                       label="two", conditions=(0,)),)
    part = {"offset": 1, "shape": (2,), "stacked": False}
    block = dict(part, rows=True)
    PART.cases = (Case(((3, 5),), part), Case(((3, 5),), dict(part, stacked=True)),
                  Case(((3, 5),), block))
    PLACED.cases = (Case(((2,), (3, 5)), part), Case(((2, 2), (3, 5)), dict(part, stacked=True)),
                    Case(((3, 2), (3, 5)), block))


_loop_cases()
