"""Saved programs: round trips (same values, same text) and malformed files (FormatError).

Every registered primitive and case at orders 0, 1 and 2 round-trips through the JSON document
and the arrays (attributes of every kind: tuples, slices, Ellipsis, None, index and mask
arrays, dtypes); the seed program round-trips through files. Each malformed file raises
``sg.FormatError`` naming what is wrong, and builds nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.cli import seed_program
from simplegrad.program.load import decode
from simplegrad.program.serialize import encode
from tests.test_primitives import case_id, sample
from tests.test_program import record


def _params() -> list:
    return [pytest.param(prim, case, order, id=f"{prim.name}-{case_id(case)}-order{order}")
            for prim in sg.REGISTRY.values() for case in prim.cases for order in (0, 1, 2)]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize(("prim", "case", "order"), _params())
def test_registry_round_trip(prim, case, order, rng):
    here, there = sample(prim, case, rng), sample(prim, case, rng)
    op, xs, outs = record(prim, case, here, order)
    prog = op.program(xs, outs)
    doc, arrays = encode(prog)
    doc = json.loads(json.dumps(doc, allow_nan=False))         # through JSON text
    back = decode(doc, {k: np.array(a) for k, a in arrays.items()})
    assert back.format() == prog.format()
    assert [n.order for n in back.nodes] == [n.order for n in prog.nodes]
    want, got = prog(*there), back(*there)
    for g, w in zip([got] if order == 0 else got, [want] if order == 0 else want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_arity_comes_from_the_rules():
    for prim in sg.REGISTRY.values():
        if not prim.variadic:
            assert all(len(case.shapes) == len(prim.vjp) for case in prim.cases), prim.name


@pytest.fixture
def saved(tmp_path):
    op, a, b = seed_program(echo=False)
    prog = op.program([a, b], [a.grad, b.grad])
    json_path, npz_path = prog.save(tmp_path / "seed")
    return prog, json_path, npz_path


def test_seed_program_round_trip_through_files(saved, tmp_path):
    prog, json_path, npz_path = saved
    assert json_path.name == "seed.json" and npz_path.name == "seed.npz"
    doc = json.loads(json_path.read_text())
    assert doc["nodes"][0] == {"name": "v0", "primitive": "add",
                               "args": [["input", 0], ["input", 1]], "attrs": None,
                               "shape": [4], "dtype": "float64", "order": 0}
    back = sg.load_program(tmp_path / "seed.json")
    assert back.format() == prog.format()
    a2, b2 = np.array([1.0, -2.0, 0.5, 3.0]), np.array([0.25, 1.0, -1.0, 2.0])
    for g, w in zip(back(a2, b2), prog(a2, b2)):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_allclose(back(a2, b2)[1], 2 * b2 + 4 * (a2 + 2 * b2), rtol=1e-15)


def test_custom_primitives_cannot_be_saved(tmp_path):
    @sg.custom_vjp
    def double(x):
        return x * 2.0

    @double.defvjp
    def _(g, out, x):
        return g * 2.0

    op = sg.Ops()
    x = op.var([1.0, 2.0])
    prog = op.program(x, double(x).sum())
    with pytest.raises(sg.ArgumentError, match="custom primitive .*not in sg.REGISTRY"):
        prog.save(tmp_path / "custom")
    assert not (tmp_path / "custom.json").exists()


def _rewrite(json_path, change) -> None:
    doc = json.loads(json_path.read_text())
    change(doc)
    json_path.write_text(json.dumps(doc))


def _set(path: list, value):
    def change(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


MALFORMED = {
    "unknown primitive": (_set(["nodes", 0, "primitive"], "system"),
                          r"node 0 \(v0\): unknown primitive 'system'"),
    "wrong arity": (_set(["nodes", 0, "args"], [["input", 0]]),
                    r"node 0 \(v0\): add takes 2 input\(s\), got 1"),
    "reference to a later node": (_set(["nodes", 1, "args", 0], ["node", 5]),
                                  r"node 1 \(v3\): the reference \['node', 5\] is not"),
    "reference of an unknown kind": (_set(["outputs", 0], ["global", 0]),
                                     r"output 0: the reference \['global', 0\]"),
    "shape that disagrees": (_set(["nodes", 0, "shape"], [5]),
                             r"v0\): declares shape \(5,\) .* gives shape \(4,\)"),
    "dtype not allowed": (_set(["inputs", 0, "dtype"], "object"),
                          r"input 0: dtype 'object' is not one of"),
    "unknown tag": (_set(["nodes", 0, "attrs"], {"axis": {"eval": "1"}}),
                    r"attribute 'axis': unknown or malformed tagged value"),
    "missing key": (lambda doc: doc["nodes"][2].pop("order"),
                    r"node 2: expected the keys .*missing \['order'\]"),
    "wrong version": (_set(["version"], 99), r"version 99 is not"),
}


@pytest.mark.parametrize("what", list(MALFORMED))
def test_malformed_documents(saved, what):
    prog, json_path, _ = saved
    change, message = MALFORMED[what]
    _rewrite(json_path, change)
    with pytest.raises(sg.FormatError, match=message):
        sg.load_program(json_path)


def test_truncated_json(saved):
    _, json_path, _ = saved
    text = json_path.read_text()
    json_path.write_text(text[: len(text) // 2])
    with pytest.raises(sg.FormatError, match="seed.json is not valid JSON"):
        sg.load_program(json_path)


def test_truncated_npz(saved):
    _, json_path, npz_path = saved
    data = npz_path.read_bytes()
    npz_path.write_bytes(data[: len(data) // 2])
    with pytest.raises(sg.FormatError, match="seed.npz is not a readable .npz"):
        sg.load_program(json_path)


def test_oversized_files(saved):
    _, json_path, _ = saved
    with pytest.raises(sg.FormatError, match=r"seed.json has \d+ bytes, more than the limit"):
        sg.load_program(json_path, max_bytes=100)
    _rewrite(json_path, _set(["inputs", 0, "shape"], [2**20, 2**20]))
    with pytest.raises(sg.FormatError, match=r"needs 8796093022208 bytes"):
        sg.load_program(json_path)


def test_arrays_that_hold_objects_or_are_missing(saved):
    _, json_path, npz_path = saved
    np.savez(npz_path, a0=np.array([1, "x"], dtype=object), a1=np.ones(4))
    with pytest.raises(sg.FormatError, match="member a0.npy has dtype object"):
        sg.load_program(json_path)
    np.savez(npz_path, a0=np.ones(4))
    with pytest.raises(sg.FormatError, match="the array 'a1' is not in the .npz"):
        sg.load_program(json_path)


def test_not_a_program_at_all(tmp_path):
    (tmp_path / "p.json").write_text("[1, 2, 3]")
    np.savez(tmp_path / "p.npz")
    with pytest.raises(sg.FormatError, match="document: expected an object, got list"):
        sg.load_program(tmp_path / "p")
    with pytest.raises(sg.FormatError, match="does not exist"):
        sg.load_program(tmp_path / "absent")


def test_names_with_line_breaks_and_keyword_attrs_are_refused(saved):
    _, json_path, _ = saved
    _rewrite(json_path, _set(["nodes", 0, "name"], "v0\nimport os"))
    with pytest.raises(sg.FormatError, match="node 0: a name must be a Python identifier"):
        sg.load_program(json_path)
    _rewrite(json_path, _set(["nodes", 0, "name"], "v0"))
    _rewrite(json_path, _set(["nodes", 0, "attrs"], {"lambda": 1}))
    with pytest.raises(sg.FormatError, match=r"add: unknown attribute .lambda. \(it takes: none\)"):
        sg.load_program(json_path)


# ---------------------------------------------------------------- files saved by earlier code

DATA = Path(__file__).parent / "data"
A_SAVED = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 3.0]])


def _recorded(build):
    """The same computation recorded now: outputs at (x, A)."""
    def run(x, A):
        op = sg.Ops()
        xv, Av = op.var(x, name="x"), op.var(A, name="A")
        out = build(op, xv, Av)
        return [o.value for o in [out, *op.grad(out, [xv, Av])]]
    return run


@pytest.mark.parametrize(("stem", "build"), [
    ("saved_0_1_gradient", lambda op, x, A: ((A @ x).tanh() * x).sum() + op.logsumexp(x)
     + op.det(A)),
    ("saved_0_1_decompositions", lambda op, x, A: sum(
        (v.sum() for v in (*op.qr(A), *op.eigh(A))), x.cumprod().sum() + x.std())),
])
def test_programs_saved_before_the_package_was_layered_still_load(stem, build):
    """Files written by simplegrad before the move into layers (primitives named as then)
    load and replay at a new input to what recording the same computation now gives."""
    prog = sg.load_program(DATA / stem)
    x, A = np.array([0.3, 1.2, -0.5]), A_SAVED * 1.1
    for got, want in zip(prog(x, A), _recorded(build)(x, A)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_complex_programs_round_trip_through_files(tmp_path):
    """complex64 and complex128 inputs, Python complex numbers, numpy complex scalars and
    complex arrays as constants, and the gradient of a real loss and its gradient (order 2)."""
    A = np.array([[1 - 1j, 0.5], [2j, 1.0]])
    op = sg.Ops()
    z = op.var(np.array([1 + 2j, -0.5 + 1j]), name="z")
    w = op.var(np.array([0.3 - 0.1j, 2j], dtype=np.complex64), name="w")
    y = op.fft(op.conj(A @ z) * (2 - 1j)) + np.complex128(0.5 + 0.25j)
    L = op.sum(op.abs(y) ** 2) + op.sum(op.real(op.cast(w, np.complex128) * z))
    (g,) = op.grad(L, [z])
    L2 = op.sum(op.abs(g) ** 2)
    h, hw = op.grad(L2, [z, w])
    prog = op.program([z, w], [L, g, h, hw])
    json_path, _ = prog.save(tmp_path / "complex")
    text = json_path.read_text()
    assert '"complex": [2.0, -1.0]' in text and '"complex64"' in text and '"complex128"' in text
    back = sg.load_program(json_path)
    assert back.format() == prog.format()
    z2, w2 = np.array([0.2 - 1j, 1.5 + 0.5j]), np.array([1 + 1j, -2j], dtype=np.complex64)
    for got, want in zip(back(z2, w2), prog(z2, w2)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(sg.compile(back)(z2, w2)[1], prog(z2, w2)[1])
