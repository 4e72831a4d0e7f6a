"""Saving programs: ``prog.save(path)``, the format ``sg.load_program`` (load.py) reads.

A program is saved as two files side by side: ``<path>.json`` holds the structure and
``<path>.npz`` the arrays (constants and array attributes; written by ``np.savez``, read back
by arrays.py, each npy header checked before its data). The JSON document::

    {"format": "simplegrad-program", "version": 1,
     "inputs":    [{"name": "a", "shape": [4], "dtype": "float64"}, ...],
     "constants": [{"name": "v3" or null, "value": VALUE}, ...],
     "nodes":     [{"name": "v0", "primitive": "add", "args": [["input", 0], ["input", 1]],
                    "attrs": {"axis": VALUE, ...} or null, "shape": [4], "dtype": "float64",
                    "order": 0}, ...],
     "outputs":   [["node", 13], ...], "single": false,
     "counts":    [[2, 8, null, 0, null], ...] or null,
     "alike":     [[["node", 9], ["input", 0]], ...]}

``counts`` (absent in files of earlier versions, read as null: sizes fixed as recorded) lists
the constants that are a count of entries and follow the inputs' sizes (``sizes.Count``:
constant, node, axes or null, ddof, times or null); null when the program's sizes are fixed.
``alike`` (absent before: none) lists pairs of references of one shape by construction (a
gradient and its variable).

An argument refers to an input slot, a constant or an earlier node by index. A VALUE is JSON
null, a boolean, an integer, a finite float or a string as itself, or one tagged object:
``{"float": "nan" | "inf" | "-inf"}``, ``{"complex": [REAL, IMAG]}`` (two floats, each as a
float VALUE is written), ``{"tuple": [VALUE, ...]}``, ``{"list": [...]}``,
``{"slice": [start, stop, step]}``, ``{"ellipsis": null}``, ``{"dtype": "int64"}``,
``{"scalar": ["int64", VALUE]}`` (a numpy scalar), ``{"array": "a0"}`` (the array stored
under that key in the .npz; dtypes bool, int, uint, float and complex64 / complex128) or
``{"body": BODY}``, a loop's sub-program (its body, condition or a branch)::

    {"name": "cell", "ins": [[[3], "float64"], ...], "outs": [...], "example": [VALUE, ...],
     "program": DOCUMENT}

where DOCUMENT is a document of this format (its arrays in the one .npz), checked as the
outer one is, its inputs and outputs those ``ins`` and ``outs`` declare, ``example`` one array
per input (the values derived bodies are traced at). Sub-programs nest ``MAX_DEPTH`` deep at
most.

Primitives are named, and looked up in ``sg.REGISTRY`` when loading: a program through a
``custom_vjp`` or ``checkpoint`` function (not in the registry) cannot be saved. Each entry's
attributes must pass its primitive's schema (primitives/schema.py), and its shape and dtype must
be what the schema's shape rule gives for its inputs, as load.py checks them.
Names are Python identifiers (NFKC-normalized, at most ``MAX_NAME`` characters); duplicates
are made unique as ``sg.compile`` does (``weight``, ``weight_2``), in the order inputs, named
constants, entries, here and when loading. Limits, checked when loading: ``max_bytes`` per
file (``MAX_BYTES`` by default) and per declared value, ``MAX_ENTRIES`` items per list,
``MAX_MEMBERS`` arrays, ``MAX_DEPTH`` levels of nested values, 32 dimensions.
"""

from __future__ import annotations

import json
import math
import os
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArgumentError
from ..primitives.core import REGISTRY
from ..primitives.loops import is_body
from ..primitives.schema import DTYPES, ShapeRuleError
from .nodes import CONST, INPUT, NODE, Names

if TYPE_CHECKING:     # (prog.save calls here: no runtime import back)
    from .core import Program

FORMAT, VERSION = "simplegrad-program", 1
MAX_BYTES = 256 * 2**20     # default limit for each file and for any declared value
MAX_ENTRIES = 2**20         # inputs, constants, entries and outputs, each
MAX_MEMBERS = 2**16 - 1     # arrays in the .npz (a zip without its 64-bit extension)
MAX_NAME = 200              # characters in a name
KINDS = (INPUT, CONST, NODE)
MAX_DEPTH = 32

# ---------------------------------------------------------------- saving


def paths(path: str | os.PathLike) -> tuple[Path, Path]:
    """The .json and .npz paths of a saved program (``path`` with or without either suffix)."""
    p = Path(path)
    if p.suffix in (".json", ".npz"):
        p = p.with_suffix("")
    return p.with_name(p.name + ".json"), p.with_name(p.name + ".npz")


def save(prog: Program, path: str | os.PathLike) -> tuple[Path, Path]:
    """Write ``prog`` to ``<path>.json`` and ``<path>.npz``; returns both paths."""
    doc, arrays = encode(prog)
    json_path, npz_path = paths(path)
    json_path.write_text(_dumps(doc), encoding="utf-8")
    with open(npz_path, "wb") as f:
        np.savez(f, **arrays)
    return json_path, npz_path


def _dumps(doc: dict) -> str:
    """The document as JSON text with one input, constant, node or output per line."""
    def item(key: str, value: Any) -> str:
        if isinstance(value, list) and value:
            inner = ",\n".join("  " + json.dumps(x, allow_nan=False) for x in value)
            return f" {json.dumps(key)}: [\n{inner}\n ]"
        return f" {json.dumps(key)}: {json.dumps(value, allow_nan=False)}"
    return "{\n" + ",\n".join(item(k, v) for k, v in doc.items()) + "\n}\n"


def encode(prog: Program, arrays: dict[str, np.ndarray] | None = None
           ) -> tuple[dict, dict[str, np.ndarray]]:
    """The JSON document and the arrays of a program (added to ``arrays`` when given)."""
    arrays = {} if arrays is None else arrays
    for node in prog.entries:
        if REGISTRY.get(node.prim.name) is not node.prim:
            raise ArgumentError(
                f"save: {node.name} is computed by {node.prim.name!r}, a custom primitive "
                "(custom_vjp or checkpoint) that is not in sg.REGISTRY; only programs of "
                "registered primitives can be saved")
    for node, (shapes, dtypes) in zip(prog.entries, prog_specs(prog)):
        why = attr_problem(node.prim, node.attrs, shapes)
        if why is None:
            why = rule_problem(node, shapes, dtypes)
        if why is not None:
            raise ArgumentError(f"save: {node.name} = {node.prim.name}(...): {why}, which a "
                                "saved program cannot hold")
    names = unique_names([i.name for i in prog.inputs], [c.name for c in prog.constants],
                         [n.name for n in prog.entries], "save")
    if isinstance(names, str):
        raise ArgumentError(names)
    ins, consts, nodes = names
    guards = {"guards": [{"ref": [g.ref.kind, g.ref.index], "kind": g.kind,
                          "seen": _encode(g.seen, arrays, "a guard"),
                          "file": os.path.basename(g.file),
                          "line": g.line, "text": g.text} for g in prog.guards]} \
        if prog.guards else {}      # (a program without guards saves as before)
    return {
        "format": FORMAT, "version": VERSION,
        "inputs": [{"name": name, "shape": list(i.shape), "dtype": i.dtype.name}
                   for name, i in zip(ins, prog.inputs)],
        "constants": [{"name": name, "value": _encode(c.value, arrays, f"constant {k}")}
                      for k, (name, c) in enumerate(zip(consts, prog.constants))],
        "nodes": [{"name": name, "primitive": n.prim.name,
                   "args": [[NODE if x.prim is not None else x.attrs, x.position]
                            for x in n.inputs],
                   "attrs": None if n.attrs is None else
                   {k: _encode(v, arrays, f"{n.name}'s attribute {k}")
                    for k, v in n.attrs.items()},
                   "shape": list(n.shape), "dtype": np.dtype(n.dtype).name, "order": order}
                  for name, n, order in zip(nodes, prog.entries, prog.orders)],
        "outputs": [[r.kind, r.index] for r in prog.outputs],
        "single": prog.single,
        "counts": None if prog.counts is None else
        [[k.const, k.node, None if k.axes is None else list(k.axes), k.ddof, k.times]
         for k in prog.counts],
        "alike": [[[a.kind, a.index], [b.kind, b.index]] for a, b in prog.alike],
        **guards,
    }, arrays


def name_problem(name: object) -> str | None:
    """What makes ``name`` unfit for a saved program, or None."""
    if not isinstance(name, str) or not name.isidentifier() or len(name) > MAX_NAME or \
            unicodedata.normalize("NFKC", name) != name:
        return (f"a name must be a Python identifier (NFKC-normalized, at most {MAX_NAME} "
                f"characters), got {name!r}"[:300])
    return None


def unique_names(inputs: list, constants: list, nodes: list, where: str
                 ) -> tuple[list, list, list] | str:
    """The names made unique (inputs, named constants, entries, in that order), or what is
    wrong with the first that is not an identifier."""
    taken = Names(source=False)
    out = []
    for kind, group in (("input", inputs), ("constant", constants), ("entry", nodes)):
        names = []
        for k, name in enumerate(group):
            if name is None and kind == "constant":
                names.append(None)
                continue
            why = name_problem(name)
            if why is not None:
                return f"{where}: {kind} {k}: {why}"
            names.append(taken.take(name))
        out.append(names)
    return out[0], out[1], out[2]


def attr_problem(prim: Any, attrs: dict | None, shapes: list) -> str | None:
    """What is wrong with an entry's attributes by its primitive's schema, or None."""
    if prim.schema is None:
        return f"{prim.name} declares no attribute schema"
    return prim.schema.problem(attrs, shapes)


def rule_problem(node: Any, shapes: list, dtypes: list) -> str | None:
    """How an entry's declared shape and dtype differ from its primitive's shape rule's answer
    for these inputs, or None."""
    try:
        shape, dtype = node.prim.schema.abstract(shapes, dtypes, node.attrs)
    except ShapeRuleError as e:
        return f"{node.prim.name} cannot run on inputs of shapes {listed(shapes)} and " \
               f"dtypes {listed(dtypes)}: {e}"
    if shape != tuple(node.shape) or dtype != node.dtype:
        return f"declares shape {tuple(node.shape)} and dtype {node.dtype}, but " \
               f"{node.prim.name} of these inputs gives shape {shape} and dtype {dtype}"
    return None


def listed(items: list) -> str:
    """Shapes or dtypes as an error message lists them (a Python number's type by name)."""
    return ", ".join(getattr(d, "__name__", None) or str(d) for d in items) or "()"


def value_spec(value: Any) -> tuple[tuple, Any]:
    """A constant's shape and dtype as shape rules take them: a Python int or float is its type
    (NEP 50's weak scalar), anything else its numpy dtype."""
    if type(value) in (int, float, complex):
        return (), type(value)
    return np.shape(value), np.result_type(value)


def prog_specs(prog: Program) -> list[tuple[list, list]]:
    """Per node, the shapes and the dtypes of its arguments."""
    def spec(x: Any) -> tuple:
        if x.prim is None and x.attrs == CONST:
            return value_spec(x.raw)
        return tuple(x.shape), x.dtype
    out = []
    for n in prog.entries:
        specs = [spec(x) for x in n.inputs]
        out.append(([s for s, _ in specs], [d for _, d in specs]))
    return out


def _encode(x: Any, arrays: dict, where: str) -> Any:
    if x is None or type(x) in (bool, int, str):
        return x
    if type(x) is float:
        return x if math.isfinite(x) else {"float": repr(x)}
    if type(x) is complex:
        return {"complex": [_encode(x.real, arrays, where), _encode(x.imag, arrays, where)]}
    if x is Ellipsis:
        return {"ellipsis": None}
    if isinstance(x, (tuple, list)):
        return {type(x).__name__: [_encode(v, arrays, where) for v in x]}
    if isinstance(x, slice):
        return {"slice": [_encode(v, arrays, where) for v in (x.start, x.stop, x.step)]}
    if isinstance(x, np.dtype) and x.name in DTYPES:
        return {"dtype": x.name}
    if isinstance(x, np.generic) and x.dtype.name in DTYPES:
        return {"scalar": [x.dtype.name, _encode(x.item(), arrays, where)]}
    if isinstance(x, np.ndarray) and x.dtype.name in DTYPES:
        key = f"a{len(arrays)}"
        arrays[key] = x
        return {"array": key}
    if is_body(x):
        return {"body": encode_body(x, arrays)}
    raise ArgumentError(f"save: {where} is a {type(x).__name__} "
                        f"({getattr(x, 'dtype', '')}), which the format cannot hold")


def encode_body(body: Any, arrays: dict[str, np.ndarray]) -> dict:
    """A loop's sub-program as the format nests it (its arrays added to ``arrays``)."""
    doc, _ = encode(body.program, arrays)
    return {"name": body.name,
            "ins": [[list(s), np.dtype(d).name] for s, d in body.ins],
            "outs": [[list(s), np.dtype(d).name] for s, d in body.outs],
            "example": [_encode(np.array(v), arrays, f"{body.name}'s example")
                        for v in body.example],
            "program": doc}
