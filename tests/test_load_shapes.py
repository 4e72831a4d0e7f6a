"""load_program computes every entry's shape and dtype from its primitive's shape rule, before
any array is made, and runs no forward to do it.

A declared shape or dtype the rule contradicts is a FormatError naming the file, the entry and
the field; inputs a primitive cannot take (inner sizes that do not multiply, float16 in
linalg) are refused by the rule; Python numbers in a file are weak scalars as numpy 2 reads
them (``x_f32 * 2.0`` is float32, ``x_f32 * np.float64(2.0)`` float64). The one value-dependent
check (an integer constant in integer arithmetic) runs that entry alone on stand-ins.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.program.core import Program
from tests.test_hostile_mutations import build


def _save(tmp_path: Path, build_fn, *values, name: str = "p") -> tuple[Path, dict]:
    op = sg.Ops()
    xs = [op.var(np.asarray(v), name=f"x{i}") for i, v in enumerate(values)]
    prog = op.program(xs, build_fn(op, *xs))
    json_path, _ = prog.save(tmp_path / name)
    return json_path, json.loads(json_path.read_text())


def _refused(json_path: Path, doc: dict, pattern: str) -> None:
    json_path.write_text(json.dumps(doc))
    with pytest.raises(sg.FormatError, match=pattern) as info:
        sg.load_program(json_path)
    assert json_path.name in str(info.value)


def test_a_declared_dtype_or_shape_the_rule_contradicts(tmp_path):
    json_path, doc = _save(tmp_path, lambda op, a, b: a + b, [1.0, 2.0], [3.0, 4.0])
    doc["nodes"][0]["dtype"] = "float32"
    _refused(json_path, doc, r"p.json: node 0 \(v0\): declares shape \(2,\) and dtype float32, "
                             r"but add of these inputs gives shape \(2,\) and dtype float64")
    doc["nodes"][0].update(dtype="float64", shape=[1, 2])
    _refused(json_path, doc, r"declares shape \(1, 2\) .* gives shape \(2,\)")
    doc["nodes"][0]["shape"] = [2]
    doc["inputs"][1]["dtype"] = "int8"          # float64 + int8 is float64: still loads
    json_path.write_text(json.dumps(doc))
    assert sg.load_program(json_path).nodes[0].dtype == np.float64
    doc["inputs"][0]["dtype"] = "int8"          # int8 + int8 is int8: the declaration is wrong
    _refused(json_path, doc, r"add of these inputs gives shape \(2,\) and dtype int8")


@pytest.mark.parametrize(("build_fn", "values", "change", "pattern"), [
    (lambda op, a, b: a @ b, (np.ones((3, 4)), np.ones((4, 2))),
     lambda d: d["inputs"][1].update(shape=[5, 2]),
     r"matmul cannot run on inputs of shapes \(3, 4\), \(5, 2\) and dtypes float64, float64: "
     r"shapes \(3, 4\) and \(5, 2\) do not multiply"),
    (lambda op, a: op.cholesky(a), (np.eye(3),), lambda d: d["inputs"][0].update(dtype="float16"),
     r"cholesky cannot run on .*float16 is unsupported in linalg"),
    (lambda op, a: a - a, (np.ones(3),), lambda d: d["inputs"][0].update(dtype="bool"),
     r"sub cannot run on inputs of shapes \(3,\), \(3,\) and dtypes bool, bool: TypeError"),
    (lambda op, a: op.getitem(a, np.array([0, 2])), (np.ones(3),),
     lambda d: d["inputs"][0].update(shape=[2]),
     r"getitem cannot run on .*: index out of range for a dimension of 2"),
    (lambda op, a: op.reshape(a, (2, 3)), (np.ones(6),),
     lambda d: d["inputs"][0].update(shape=[5]),
     r"reshape cannot run on inputs of shapes \(5,\) and dtypes float64: cannot reshape 5 "
     r"elements into \(2, 3\)"),
])
def test_inputs_a_primitive_cannot_take(tmp_path, build_fn, values, change, pattern):
    json_path, doc = _save(tmp_path, build_fn, *values)
    change(doc)
    _refused(json_path, doc, r"node 0 \(v0\): " + pattern)


def test_loading_runs_no_forward(tmp_path, monkeypatch):
    """A program of 60-odd primitives and their gradients loads with every forward broken."""
    prog = build()
    prog.save(tmp_path / "big")

    def broken(*args, **kwargs):
        raise AssertionError("a forward ran while loading")
    for prim in sg.REGISTRY.values():
        monkeypatch.setattr(prim, "forward", broken)
    back = sg.load_program(tmp_path / "big")
    monkeypatch.undo()              # printing folds constants: it runs forwards
    assert back.format() == prog.format() and len(back.nodes) == len(prog.nodes) > 100


def test_python_numbers_are_weak_scalars(tmp_path):
    json_path, doc = _save(tmp_path, lambda op, a: a * 2.0, np.ones(3, np.float32))
    assert doc["constants"][0]["value"] == 2.0 and doc["nodes"][0]["dtype"] == "float32"
    assert sg.load_program(json_path).nodes[0].dtype == np.float32
    doc["constants"][0]["value"] = {"scalar": ["float64", 2.0]}   # a numpy scalar is strong
    _refused(json_path, doc, r"declares shape \(3,\) and dtype float32, but mul of these inputs "
                             r"gives shape \(3,\) and dtype float64")


def test_a_python_int_that_does_not_fit_an_integer_input(tmp_path, monkeypatch):
    """The one check that needs a value: that entry alone runs, on stand-ins."""
    json_path, doc = _save(tmp_path, lambda op, a: (a + 3) * 1.5, np.arange(3.0))
    doc["inputs"][0]["dtype"] = doc["nodes"][0]["dtype"] = "int8"     # x_int8 + 3: int8
    json_path.write_text(json.dumps(doc))
    calls = []
    for name in ("add", "mul"):
        prim = sg.REGISTRY[name]
        monkeypatch.setattr(prim, "forward", lambda *a, _f=prim.forward, _n=name, **k:
                            calls.append(_n) or _f(*a, **k))
    assert sg.load_program(json_path).nodes[0].dtype == np.int8
    assert calls == ["add"]         # int8 + a Python int: run; the float multiply: not
    doc["constants"][0]["value"] = 300
    _refused(json_path, doc, r"node 0 \(v0\): add cannot run on inputs of shapes \(3,\), \(\) "
                             r"and dtypes int8, int: OverflowError")


def test_an_integer_to_a_negative_integer_power(tmp_path):
    json_path, doc = _save(tmp_path, lambda op, a: a ** np.array([2, 1, 3]), np.arange(3.0))
    for x in (doc["inputs"][0], doc["nodes"][0]):
        x["dtype"] = "int64"
    json_path.write_text(json.dumps(doc))
    npz = json_path.with_suffix(".npz")
    np.savez(npz, a0=np.array([2, 1, 3]))           # x_int ** [2, 1, 3]: fine
    assert sg.load_program(json_path).nodes[0].dtype == np.int64
    np.savez(npz, a0=np.array([2, -1, 3]))
    _refused(json_path, doc, r"pow cannot run on inputs of shapes \(3,\), \(3,\) and dtypes "
                             r"int64, int64: ValueError: Integers to negative integer powers")


def test_save_refuses_what_the_rule_contradicts(tmp_path):
    op = sg.Ops()
    x = op.var(np.ones(3), name="x")
    prog = op.program(x, op.exp(x))
    wrong = prog.nodes[0]._replace(dtype=np.dtype(np.float32))
    bad = Program(prog.inputs, prog.constants, [wrong], prog.outputs, prog.single)
    with pytest.raises(sg.ArgumentError, match=r"save: v0 = exp\(...\): declares shape \(3,\) "
                                               r"and dtype float32, but exp of these inputs "
                                               r"gives shape \(3,\) and dtype float64"):
        bad.save(tmp_path / "bad")
