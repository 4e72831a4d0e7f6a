"""Loading saved programs: ``sg.load_program(path)``, without pickle, from any bytes.

The format is described in serialize.py. Loading validates everything before building
anything, and any failure is a ``FormatError`` naming the file, the entry and the field:
sizes and counts (``max_bytes``, ``MAX_ENTRIES``, ``MAX_MEMBERS``), the JSON (UTF-8, no
duplicate keys, no NaN or Infinity literals), keys and types, names (identifiers, made
unique as at save), primitive names (looked up in ``sg.REGISTRY``), arities, references,
dtypes, each entry's attributes against its primitive's schema, and its declared shape and
dtype against what its primitive's shape rule computes from the declared inputs' shapes and
dtypes and the attributes (before any array is made; the output's size within ``max_bytes``).
No forward runs while loading, but for an entry with an integer constant in integer
arithmetic (standins.py says why). The .npz is read by arrays.py, headers before data; the
shape checks are declared.py.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ArgumentError, FormatError
from ..primitives.core import REGISTRY
from ..primitives.schema import DTYPES, INT_RANGE, MAX_RANK, is_real
from .arrays import read_npz
from .body import Body
from .core import Program
from .declared import Declared
from .nodes import CONST, INPUT, NODE, Constant, Guard, Input, Node, Ref
from .serialize import (
    FORMAT,
    KINDS,
    MAX_BYTES,
    MAX_DEPTH,
    MAX_ENTRIES,
    MAX_MEMBERS,
    MAX_NAME,
    VERSION,
    name_problem,
    paths,
    unique_names,
)
from .sizes import read_alike, read_counts

# one JSON array or object per this many bytes at most: the format's densest documents have
# one per 19 bytes or more, and so parsing never takes more than about 15 times the file's bytes
CONTAINER_BYTES = 5
MAX_TEXT = 4096     # the longest file name or source line a guard may hold

# ---------------------------------------------------------------- loading


def load_program(path: str | os.PathLike, max_bytes: int = MAX_BYTES) -> Program:
    """Read a program written by ``prog.save``, validating all of it first; any failure, on
    any bytes, is an ``sg.FormatError`` naming the file, the entry and the field."""
    if type(max_bytes) is not int or max_bytes < 0:
        raise ArgumentError(f"load_program: max_bytes must be an int >= 0, got {max_bytes!r}")
    json_path, npz_path = paths(path)
    try:
        doc, referred = _read_json(json_path, max_bytes)
        arrays = read_npz(npz_path, max_bytes, MAX_MEMBERS, referred)
        return decode(doc, arrays, max_bytes, json_path.name)
    except FormatError:
        raise
    except Exception as e:      # a check this module lacks: still the format's
        raise FormatError(f"load_program: {json_path.name}: cannot be read: "
                          f"{type(e).__name__}: {str(e)[:200]}") from None


def _read_json(p: Path, max_bytes: int) -> tuple[Any, int]:
    """The document, and how many arrays it can refer to (its ``"array"`` strings)."""
    if not p.is_file():
        raise FormatError(f"load_program: {p} does not exist")
    size = p.stat().st_size
    if size > max_bytes:
        raise FormatError(f"load_program: {p.name} has {size} bytes, more than the limit of "
                          f"{max_bytes} (pass max_bytes= to read it)")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise FormatError(f"load_program: cannot read {p.name}: {e}") from None
    containers = data.count(b"[") + data.count(b"{")
    if containers * CONTAINER_BYTES > len(data) + 1000:
        raise FormatError(f"load_program: {p.name} holds {containers} arrays and objects in "
                          f"{len(data)} bytes, more than one per {CONTAINER_BYTES} bytes that a "
                          "saved program has (each would cost ~60 bytes parsed)")
    try:
        text = data.decode("utf-8")
        doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
        return doc, data.count(b'"array"')
    except (ValueError, RecursionError) as e:      # UnicodeDecodeError is a ValueError
        raise FormatError(f"load_program: {p.name} is not valid JSON in UTF-8 (truncated or "
                          f"malformed): {str(e)[:200]}") from None


def _no_duplicates(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"the key {twice[:40]!r} appears twice in one object")
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (the format writes {{\"float\": \"nan\"}})")


def decode(doc: Any, arrays: dict[str, np.ndarray], max_bytes: int = MAX_BYTES,
           source: str = "program") -> Program:
    """Validate a JSON document and its arrays, then build the Program they describe."""
    return _Reader(arrays, max_bytes, source).program(doc)


class _Reader:
    """Checks each part of a document, raising FormatError at the first problem."""

    def __init__(self, arrays: dict, max_bytes: int, source: str):
        self.arrays = arrays
        self.used: set = set()
        self.max_bytes = max_bytes
        self.source = source
        self.inside: list[str] = []     # where the sub-program being read is, outermost first

    def fail(self, where: str, what: str) -> FormatError:
        inside = "".join(f"{w}: " for w in self.inside)     # (a sub-program's outer entries)
        return FormatError(f"load_program: {self.source}: {inside}{where}: {what}")

    def fields(self, obj: Any, where: str, keys: set) -> dict:
        if not isinstance(obj, dict):
            raise self.fail(where, f"expected an object, got {type(obj).__name__}")
        if set(obj) != keys:
            missing, extra = sorted(keys - set(obj)), sorted(map(str, set(obj) - keys))
            raise self.fail(where, f"expected the keys {sorted(keys)} (missing {missing}, "
                                   f"unknown {extra[:5]})")
        return obj

    def program(self, doc: Any, nested: bool = False) -> Program:
        keys = {"format", "version", "inputs", "constants", "nodes", "outputs", "single"}
        doc = self.fields(doc, "document", keys | ({"counts", "alike", "guards"} & set(doc) if
                                                   isinstance(doc, dict) else set()))
        if doc["format"] != FORMAT or doc["version"] != VERSION or \
                type(doc["version"]) is not int:
            raise self.fail("document", f"format {str(doc['format'])[:40]!r} version "
                                        f"{str(doc['version'])[:20]} is not {FORMAT!r} "
                                        f"version {VERSION}")
        inputs = [self.input(x, f"input {i}") for i, x in enumerate(self.items(doc, "inputs"))]
        constants = [self.constant(x, f"constant {i}")
                     for i, x in enumerate(self.items(doc, "constants"))]
        sizes = {INPUT: len(inputs), CONST: len(constants), NODE: 0}
        nodes = []
        for i, x in enumerate(self.items(doc, "nodes")):
            nodes.append(self.node(x, f"node {i}", sizes))
            sizes[NODE] = i + 1
        outputs = [self.ref(r, f"output {k}", sizes) for k, r in enumerate(self.items(doc,
                                                                                  "outputs"))]
        if not outputs:
            raise self.fail("outputs", "a program needs at least one output")
        if not isinstance(doc["single"], bool) or (doc["single"] and len(outputs) != 1):
            raise self.fail("single", f"must be true (one output) or false, got "
                                      f"{str(doc['single'])[:40]}")
        unused = sorted(set(self.arrays) - self.used)
        if unused and not nested:
            raise self.fail("arrays", f"the .npz holds arrays no entry refers to: "
                                      f"{', '.join(unused[:5])}")
        inputs, constants, nodes = self.renamed(inputs, constants, nodes)
        Declared(self.fail, self.max_bytes, inputs, constants).check(nodes)
        counts = read_counts(doc.get("counts"), constants, nodes, self.fail)
        alike = read_alike(doc.get("alike", []), inputs, constants, nodes,
                           lambda r, where: self.ref(r, where, sizes), self.fail)
        guards = [self.guard(g, f"guard {k}", sizes)
                  for k, g in enumerate(self.items(doc, "guards"))] if "guards" in doc else []
        return Program(inputs, constants, nodes, outputs, doc["single"], counts=counts,
                       alike=alike, guards=guards)

    def guard(self, x: Any, where: str, sizes: dict) -> Guard:
        """A Python decision the program was recorded through (``nodes.Guard``)."""
        x = self.fields(x, where, {"ref", "kind", "seen", "file", "line", "text"})
        if x["kind"] not in ("bool", "item"):
            raise self.fail(where, f"kind must be 'bool' or 'item', got {str(x['kind'])[:40]!r}")
        seen = self.value(x["seen"], where)
        if type(seen) not in ((bool,) if x["kind"] == "bool" else (bool, int, float)):
            raise self.fail(where, f"a {x['kind']} guard saw a {type(seen).__name__}")
        for key in ("file", "text"):
            if not isinstance(x[key], str) or len(x[key]) > MAX_TEXT:
                raise self.fail(where, f"{key} must be a string of at most {MAX_TEXT} "
                                       "characters")
        if type(x["line"]) is not int or x["line"] < 0:
            raise self.fail(where, f"line must be a non-negative int, got {str(x['line'])[:20]}")
        return Guard(self.ref(x["ref"], where, sizes), x["kind"], seen, x["file"], x["line"],
                     x["text"])

    def renamed(self, inputs: list, constants: list, nodes: list) -> tuple:
        """Names made unique as ``prog.save`` makes them (files of earlier versions)."""
        names = unique_names([i.name for i in inputs], [c.name for c in constants],
                             [n.name for n in nodes], "names")
        if isinstance(names, str):
            raise self.fail(*names.split(": ", 1))
        ins, consts, ents = names
        return ([i._replace(name=n) for i, n in zip(inputs, ins)],
                [c._replace(name=n) for c, n in zip(constants, consts)],
                [x._replace(name=n) for x, n in zip(nodes, ents)])

    def items(self, doc: dict, key: str) -> list:
        if not isinstance(doc[key], list):
            raise self.fail(key, f"expected a list, got {type(doc[key]).__name__}")
        if len(doc[key]) > MAX_ENTRIES:
            raise self.fail(key, f"{len(doc[key])} items, more than the limit of "
                                 f"{MAX_ENTRIES}")
        return doc[key]

    def input(self, x: Any, where: str) -> Input:
        x = self.fields(x, where, {"name", "shape", "dtype"})
        return Input(self.name(x["name"], where), self.shape(x["shape"], where),
                     self.dtype(x["dtype"], where))

    def constant(self, x: Any, where: str) -> Constant:
        x = self.fields(x, where, {"name", "value"})
        value = self.value(x["value"], where)
        if not (type(value) in (bool, int, float, complex) or
                isinstance(value, (np.ndarray, np.generic))):
            raise self.fail(where, f"a constant is a number or an array, got "
                                   f"{type(value).__name__}")
        return Constant(value, None if x["name"] is None else self.name(x["name"], where))

    def node(self, x: Any, where: str, sizes: dict) -> Node:
        x = self.fields(x, where, {"name", "primitive", "args", "attrs", "shape", "dtype",
                                   "order"})
        name = self.name(x["name"], where)
        where = f"{where} ({name})"
        prim = REGISTRY.get(x["primitive"]) if isinstance(x["primitive"], str) else None
        if prim is None:
            raise self.fail(where, f"unknown primitive {str(x['primitive'])[:80]!r} (not in "
                                   "sg.REGISTRY)")
        if not isinstance(x["args"], list) or len(x["args"]) > MAX_ENTRIES:
            raise self.fail(where, "args must be a list of references")
        args = tuple(self.ref(r, where, sizes) for r in x["args"])
        arity = len(prim.vjp)
        if (not prim.variadic and len(args) != arity) or not args:
            raise self.fail(where, f"{prim.name} takes {arity} input(s), got {len(args)}")
        attrs = x["attrs"]
        if attrs is not None:
            if not isinstance(attrs, dict):
                raise self.fail(where, "attrs must be null or an object")
            attrs = {k: self.value(v, f"{where}: attribute {k[:40]!r}") for k, v in attrs.items()}
        order = x["order"]
        if type(order) is not int or not 0 <= order < 2**31:
            raise self.fail(where, f"order must be an int >= 0, got {str(order)[:40]}")
        return Node(prim, args, attrs, name, self.shape(x["shape"], where),
                    self.dtype(x["dtype"], where), order)

    def ref(self, r: Any, where: str, sizes: dict) -> Ref:
        ok = isinstance(r, list) and len(r) == 2 and isinstance(r[0], str) and \
            r[0] in KINDS and type(r[1]) is int
        if not ok or not 0 <= r[1] < sizes[r[0]]:
            raise self.fail(where, f"the reference {str(r)[:60]} is not an input, a constant "
                                   f"or an earlier node (there are {sizes[INPUT]} inputs, "
                                   f"{sizes[CONST]} constants, {sizes[NODE]} earlier nodes)")
        return Ref(r[0], r[1])

    def name(self, x: Any, where: str) -> str:
        why = name_problem(x)
        if why is not None:
            raise self.fail(where, why)
        return x

    def shape(self, x: Any, where: str) -> tuple:
        if not isinstance(x, list) or len(x) > MAX_RANK or \
                not all(type(n) is int and 0 <= n < 2**62 for n in x):
            raise self.fail(where, f"a shape is a list of at most {MAX_RANK} ints >= 0, got "
                                   f"{str(x)[:60]}")
        return tuple(x)

    def dtype(self, x: Any, where: str) -> np.dtype:
        if not isinstance(x, str) or x not in DTYPES:
            raise self.fail(where, f"dtype {str(x)[:40]!r} is not one of "
                                   f"{', '.join(sorted(DTYPES))}")
        return np.dtype(x)

    def value(self, x: Any, where: str, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise self.fail(where, f"values nest deeper than {MAX_DEPTH}")
        if x is None or type(x) in (bool, str):
            return x
        if type(x) is int:
            if not INT_RANGE[0] <= x < INT_RANGE[1]:
                raise self.fail(where, "an integer outside the range of int64 and uint64")
            return x
        if type(x) is float:
            if not math.isfinite(x):
                raise self.fail(where, "a float out of range (the format writes "
                                       "{\"float\": \"inf\"})")
            return x
        if not isinstance(x, dict) or len(x) != 1:
            raise self.fail(where, f"expected a value or a one-key tagged object, got "
                                   f"{str(x)[:60]}")
        (tag, body), = x.items()
        sub = [] if not isinstance(body, list) else \
            [self.value(v, where, depth + 1) for v in body]
        if tag == "float" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "complex" and isinstance(body, list) and len(sub) == 2 and \
                all(type(v) is float for v in sub):
            return complex(*sub)
        if tag in ("tuple", "list") and isinstance(body, list):
            return tuple(sub) if tag == "tuple" else sub
        if tag == "slice" and isinstance(body, list) and len(sub) == 3 and \
                all(v is None or type(v) is int for v in sub):
            return slice(*sub)
        if tag == "ellipsis" and body is None:
            return Ellipsis
        if tag == "dtype":
            return self.dtype(body, where)
        if tag == "scalar" and isinstance(body, list) and len(body) == 2:
            return self.scalar(self.dtype(body[0], where), sub[1], where)
        if tag == "body":
            return self.body(body, where, depth + 1)
        if tag == "array" and isinstance(body, str):
            if body not in self.arrays:
                raise self.fail(where, f"the array {body[:40]!r} is not in the .npz file")
            if body in self.used:
                raise self.fail(where, f"the array {body!r} is referred to twice")
            self.used.add(body)
            return self.arrays[body]
        raise self.fail(where, f"unknown or malformed tagged value {str(x)[:60]}")

    def body(self, x: Any, where: str, depth: int) -> Body:
        """A loop's sub-program: its document read as the outer one is, then its declared
        inputs, outputs and example values checked against it."""
        where = f"{where}: sub-program"
        if len(self.inside) >= MAX_DEPTH:
            raise self.fail(where, f"sub-programs nest deeper than {MAX_DEPTH}")
        x = self.fields(x, where, {"name", "ins", "outs", "example", "program"})
        if not isinstance(x["name"], str) or not x["name"] or len(x["name"]) > MAX_NAME:
            raise self.fail(where, f"name must be a string of 1 to {MAX_NAME} characters")
        where = f"{where} {x['name'][:40]!r}"
        avals = {}
        for key in ("ins", "outs"):
            if not isinstance(x[key], list) or len(x[key]) > MAX_ENTRIES or not all(
                    isinstance(a, list) and len(a) == 2 for a in x[key]):
                raise self.fail(where, f"{key} must be a list of [shape, dtype] pairs")
            avals[key] = [(self.shape(s, where), self.dtype(d, where)) for s, d in x[key]]
        if not isinstance(x["example"], list) or len(x["example"]) != len(avals["ins"]):
            raise self.fail(where, "example must hold one array per input")
        example = [self.value(v, where, depth) for v in x["example"]]
        for k, (v, (shape, dtype)) in enumerate(zip(example, avals["ins"])):
            if not isinstance(v, np.ndarray) or v.shape != shape or v.dtype != dtype:
                raise self.fail(where, f"example {k} must be an array of shape {shape} and "
                                       f"dtype {dtype}")
        self.inside.append(where)
        try:
            prog = self.program(x["program"], nested=True)
        finally:
            self.inside.pop()
        got_ins = [(tuple(i.shape), np.dtype(i.dtype)) for i in prog.inputs]
        got_outs = [_aval_of(prog, r) for r in prog.outputs]
        if got_ins != avals["ins"] or got_outs != avals["outs"]:
            raise self.fail(where, f"its program takes {got_ins} and gives {got_outs}, not the "
                                   f"declared {avals['ins']} and {avals['outs']}")
        return Body(prog, avals["ins"], avals["outs"], example, x["name"])

    def scalar(self, dt: np.dtype, v: Any, where: str) -> np.generic:
        """A numpy scalar whose value is exactly the one written (as save writes it)."""
        kind = {"b": bool, "i": int, "u": int, "f": float, "c": complex}[dt.kind]
        if type(v) is not kind or not is_real(v) and kind not in (bool, complex):
            raise self.fail(where, f"a {dt} scalar holds a {kind.__name__}, got {str(v)[:40]}")
        with np.errstate(all="ignore"):
            try:
                s = dt.type(v)
            except (OverflowError, ValueError):
                s = None
        parts = (lambda z: (z.real, z.imag)) if kind is complex else (lambda z: (z,))
        if s is None or not all(a == b or (a != a and b != b)
                                for a, b in zip(parts(s.item()), parts(v))):
            raise self.fail(where, f"{str(v)[:40]} is not a {dt} value")
        return s


def _aval_of(prog: Program, r: Any) -> tuple[tuple, np.dtype]:
    """The (shape, dtype) a program's output reference has."""
    if r.kind == INPUT:
        x = prog.inputs[r.index]
        return tuple(x.shape), np.dtype(x.dtype)
    if r.kind == NODE:
        n = prog.nodes[r.index]
        return tuple(n.shape), np.dtype(n.dtype)
    v = prog.constants[r.index].value
    return tuple(np.shape(v)), np.asarray(v).dtype
