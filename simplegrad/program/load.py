"""Loading saved programs: ``sg.load_program(path)``, without pickle.

The format is described in serialize.py. Loading validates everything before building
anything: sizes, JSON syntax, keys and types, primitive names (looked up in ``sg.REGISTRY``),
arities, references, dtypes, and the shapes and dtypes each entry declares (its forward is run
once on stand-in values of the declared inputs). Any failure is a ``FormatError``.
"""

from __future__ import annotations

import contextlib
import json
import keyword
import math
import os
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormatError
from ..primitives.core import REGISTRY
from .core import Program
from .nodes import CONST, INPUT, NODE, Constant, Input, Node, Ref
from .serialize import DTYPES, FORMAT, KINDS, MAX_BYTES, MAX_DEPTH, VERSION, paths

# ---------------------------------------------------------------- loading


def load_program(path: str | os.PathLike, max_bytes: int = MAX_BYTES) -> Program:
    """Read a program written by ``prog.save``; validates all of it before building it."""
    json_path, npz_path = paths(path)
    text = _read(json_path, max_bytes).decode("utf-8", errors="strict") \
        if _exists(json_path) else None
    if text is None:
        raise FormatError(f"load_program: {json_path} does not exist")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise FormatError(f"load_program: {json_path.name} is not valid JSON (truncated or "
                          f"malformed): {e}") from None
    arrays = _read_npz(npz_path, max_bytes)
    return decode(doc, arrays, max_bytes, json_path.name)


def _exists(p: Path) -> bool:
    return p.is_file()


def _read(p: Path, max_bytes: int) -> bytes:
    size = p.stat().st_size
    if size > max_bytes:
        raise FormatError(f"load_program: {p.name} has {size} bytes, more than the limit of "
                          f"{max_bytes} (pass max_bytes= to read it)")
    try:
        return p.read_bytes()
    except OSError as e:
        raise FormatError(f"load_program: cannot read {p.name}: {e}") from None


def _read_npz(p: Path, max_bytes: int) -> dict[str, np.ndarray]:
    if not p.is_file():
        raise FormatError(f"load_program: {p} does not exist (a program is saved as a .json "
                          "and a .npz file)")
    _read(p, max_bytes)         # the size check
    try:
        with zipfile.ZipFile(p) as z:
            unpacked = sum(info.file_size for info in z.infolist())
        if unpacked > max_bytes:
            raise FormatError(f"load_program: {p.name} unpacks to {unpacked} bytes, more than "
                              f"the limit of {max_bytes}")
        with np.load(p, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except FormatError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as e:
        raise FormatError(f"load_program: {p.name} is not a readable .npz of plain arrays "
                          f"(truncated, or holding objects): {e}") from None
    for k, a in arrays.items():
        if a.dtype.name not in DTYPES:
            raise FormatError(f"load_program: array {k} in {p.name} has dtype {a.dtype}; "
                              f"allowed: {', '.join(sorted(DTYPES))}")
        a.flags.writeable = False
    return arrays


def decode(doc: Any, arrays: dict[str, np.ndarray], max_bytes: int = MAX_BYTES,
           source: str = "program") -> Program:
    """Validate a JSON document and its arrays, then build the Program they describe."""
    return _Reader(arrays, max_bytes, source).program(doc)


class _Reader:
    """Checks each part of a document, raising FormatError at the first problem."""

    def __init__(self, arrays: dict, max_bytes: int, source: str):
        self.arrays = arrays
        self.max_bytes = max_bytes
        self.source = source

    def fail(self, where: str, what: str) -> FormatError:
        return FormatError(f"load_program: {self.source}: {where}: {what}")

    def fields(self, obj: Any, where: str, keys: set) -> dict:
        if not isinstance(obj, dict):
            raise self.fail(where, f"expected an object, got {type(obj).__name__}")
        if set(obj) != keys:
            missing, extra = sorted(keys - set(obj)), sorted(set(obj) - keys)
            raise self.fail(where, f"expected the keys {sorted(keys)} (missing {missing}, "
                                   f"unknown {extra})")
        return obj

    def program(self, doc: Any) -> Program:
        doc = self.fields(doc, "document", {"format", "version", "inputs", "constants",
                                            "nodes", "outputs", "single"})
        if doc["format"] != FORMAT or doc["version"] != VERSION:
            raise self.fail("document", f"format {doc['format']!r} version {doc['version']!r}"
                                        f" is not {FORMAT!r} version {VERSION}")
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
                                      f"{doc['single']!r}")
        self.check_shapes(inputs, constants, nodes)
        return Program(inputs, constants, nodes, outputs, doc["single"])

    def items(self, doc: dict, key: str) -> list:
        if not isinstance(doc[key], list):
            raise self.fail(key, f"expected a list, got {type(doc[key]).__name__}")
        return doc[key]

    def input(self, x: Any, where: str) -> Input:
        x = self.fields(x, where, {"name", "shape", "dtype"})
        return Input(self.name(x["name"], where), self.shape(x["shape"], where),
                     self.dtype(x["dtype"], where))

    def constant(self, x: Any, where: str) -> Constant:
        x = self.fields(x, where, {"name", "value"})
        value = self.value(x["value"], where)
        if not (type(value) in (int, float) or isinstance(value, np.ndarray)):
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
            raise self.fail(where, f"unknown primitive {x['primitive']!r} (not in "
                                   "sg.REGISTRY)")
        if not isinstance(x["args"], list):
            raise self.fail(where, "args must be a list of references")
        args = tuple(self.ref(r, where, sizes) for r in x["args"])
        arity = len(prim.vjp)
        if (not prim.variadic and len(args) != arity) or not args:
            raise self.fail(where, f"{prim.name} takes {arity} input(s), got {len(args)}")
        attrs = x["attrs"]
        if attrs is not None:
            if not isinstance(attrs, dict) or not all(
                    isinstance(k, str) and k.isidentifier() and not keyword.iskeyword(k)
                    for k in attrs):
                raise self.fail(where, "attrs must be null or an object keyed by identifiers")
            attrs = {k: self.value(v, f"{where} attribute {k}") for k, v in attrs.items()}
        order = x["order"]
        if type(order) is not int or order < 0:
            raise self.fail(where, f"order must be an int >= 0, got {order!r}")
        return Node(prim, args, attrs, name, self.shape(x["shape"], where),
                    self.dtype(x["dtype"], where), order)

    def ref(self, r: Any, where: str, sizes: dict) -> Ref:
        ok = isinstance(r, list) and len(r) == 2 and r[0] in KINDS and type(r[1]) is int
        if not ok or not 0 <= r[1] < sizes[r[0]]:
            raise self.fail(where, f"the reference {r!r} is not an input, a constant or an "
                                   f"earlier node (there are {sizes[INPUT]} inputs, "
                                   f"{sizes[CONST]} constants, {sizes[NODE]} earlier nodes)")
        return Ref(r[0], r[1])

    def name(self, x: Any, where: str) -> str:
        if not isinstance(x, str) or not x or len(x) > 200 or not x.isprintable():
            raise self.fail(where, f"a name must be a non-empty printable string of at most 200 "
                                   f"characters, got {x!r}")
        return x

    def shape(self, x: Any, where: str) -> tuple:
        if not isinstance(x, list) or len(x) > 32 or \
                not all(type(n) is int and n >= 0 for n in x):
            raise self.fail(where, f"a shape is a list of ints >= 0, got {x!r}")
        return tuple(x)

    def dtype(self, x: Any, where: str) -> np.dtype:
        if x not in DTYPES:
            raise self.fail(where, f"dtype {x!r} is not one of {', '.join(sorted(DTYPES))}")
        return np.dtype(x)

    def value(self, x: Any, where: str, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise self.fail(where, f"values nest deeper than {MAX_DEPTH}")
        if x is None or type(x) in (bool, int, float, str):
            return x
        if not isinstance(x, dict) or len(x) != 1:
            raise self.fail(where, f"expected a value or a one-key tagged object, got {x!r}")
        (tag, body), = x.items()
        sub = [] if not isinstance(body, list) else \
            [self.value(v, where, depth + 1) for v in body]
        if tag == "float" and body in ("nan", "inf", "-inf"):
            return float(body)
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
            dt = self.dtype(body[0], where)
            if type(sub[1]) not in (bool, int, float):
                raise self.fail(where, f"a scalar holds a number, got {body[1]!r}")
            return dt.type(sub[1])
        if tag == "array" and isinstance(body, str):
            if body not in self.arrays:
                raise self.fail(where, f"the array {body!r} is not in the .npz file")
            return self.arrays[body]
        raise self.fail(where, f"unknown or malformed tagged value {x!r}")

    def check_shapes(self, inputs: list, constants: list, nodes: list) -> None:
        """Run each entry's forward on stand-in values; compare shapes and dtypes declared."""
        for spec in [*inputs, *nodes]:
            size = math.prod(spec.shape) * spec.dtype.itemsize
            if size > self.max_bytes:
                raise self.fail(spec.name, f"shape {spec.shape} needs {size} bytes, more than "
                                           f"the limit of {self.max_bytes}")
        env = {(INPUT, i): _stand_in(s.shape, s.dtype) for i, s in enumerate(inputs)}
        env.update({(CONST, i): c.value for i, c in enumerate(constants)})
        for i, node in enumerate(nodes):
            args = [env[(r.kind, r.index)] for r in node.args]
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out = node.prim.forward(*args, **(node.attrs or {}))
            except np.linalg.LinAlgError:   # a stand-in the matrix function cannot take
                out = _stand_in(node.shape, node.dtype)
            except (ValueError, TypeError, IndexError, KeyError, AttributeError) as e:
                shapes = ", ".join(str(np.shape(a)) for a in args)
                raise self.fail(f"node {i} ({node.name})",
                                f"{node.prim.name} cannot run on inputs of shapes {shapes} "
                                f"with attrs {node.attrs}: {e}") from None
            out = np.asarray(out)
            if out.shape != node.shape or out.dtype != node.dtype:
                raise self.fail(f"node {i} ({node.name})",
                                f"declares shape {node.shape} and dtype {node.dtype}, but "
                                f"{node.prim.name} of these inputs gives shape {out.shape} "
                                f"and dtype {out.dtype}")
            env[(NODE, i)] = out


def _stand_in(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """A value to check shapes with: 2 I + 0.1 (positive definite) for square matrices."""
    if dtype.kind == "b":
        return np.ones(shape, dtype)
    if len(shape) >= 2 and shape[-1] == shape[-2]:
        n = shape[-1]
        with contextlib.suppress(ValueError):
            return np.broadcast_to(2 * np.eye(n) + 0.1, shape).astype(dtype)
    return np.full(shape, 0.5 if dtype.kind == "f" else 1, dtype)
