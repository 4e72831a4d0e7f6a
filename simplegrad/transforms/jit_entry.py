"""A jitted function's fast entry: one generated Python function per recorded program.

``sg.jit``'s general call path walks the arguments into leaves, hashes the signature, looks it
up, runs the program and rebuilds the output pytree leaf by leaf: tens of microseconds, which
a small training step notices. The entry does the same work as straight-line code written for
the one signature it was recorded at: it reads each leaf where the structure puts it
(``args[0]["0.weight"]``), checks it (a container's exact type and length, a dict's keys by
reading them, a traced array's type, shape and dtype, a static value's type and value), calls
the compiled program's function on the traced leaves, checks the guards on the values they
read, and returns the output pytree as one literal (``(r0, {"0.bias": o1, ...}, ...)``).

It answers ``MISS`` when the arguments are not of its signature (the general path decides
then) and ``GUARD`` when they are but a guard does not hold (the program ran; another program
of the signature, or a new recording, serves the call). It never accepts a call the general
path would treat differently: anything unusual (a subclass of dict, list or tuple, an array
subclass, a number out of int64's range) is a miss. A namedtuple or a registered pytree node
is read through ``pytree.node_children`` (its registered flatten), its type, length and
auxiliary data checked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..program.compile import Compiled
from ..program.nodes import CONST, INPUT
from ..pytree import TreeDef, node_children, tree_unflatten

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


def make_entry(compiled: Compiled | None, guards: Sequence[tuple], slots: Sequence[int | None],
               fixed: Sequence[Any], out_def: TreeDef, call_def: TreeDef, seen: list,
               key: tuple, traced_at: Sequence[int]) -> Callable[[tuple, dict], Any] | None:
    """The entry of one recorded program (None when its structure is not written out), from
    the recording call's structure, leaves and signature key."""
    src = _Source()
    try:
        leaves = _read_arguments(src, call_def)
        _check_leaves(src, leaves, seen, key, traced_at, compiled)
        results = _run(src, compiled, [leaves[i] for i in traced_at], guards)
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
    """One check per leaf against its part of the signature's key (``jit._signature``);
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


def _run(src: _Source, compiled: Compiled | None, traced: list[str],
         guards: Sequence[tuple]) -> list[str]:
    """The line calling the program, the guards' checks; the names of its results."""
    if compiled is None:
        return []
    n = len(compiled.program.outputs)
    results = [f"r{k}" for k in range(n)]
    call = f"{src.bind(compiled._fn)}({', '.join(traced)})"
    if compiled.program.single:
        src.line(f"r0 = {call}")
    else:
        src.line(f"{', '.join(results)}{',' if n == 1 else ''} = {call}")
    for k, kind, want in guards:
        if kind == "bool":
            src.line(f"if bool(r{k}) != {bool(want)!r}: return GUARD")
        else:               # nan is nan, as in jit._same
            w = src.bind(want)
            src.line(f"g = r{k}.item()")
            src.line(f"if g != {w} and (g == g or {w} == {w}): return GUARD")
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
    return compiled.program.nodes[ref.index].name in compiled.folded


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
