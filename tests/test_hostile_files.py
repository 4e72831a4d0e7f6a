"""Hand-built hostile saved programs: each is refused with an ``sg.FormatError`` naming the
file, the entry and the field, before anything reaches numpy, or loads as exactly what it
says (and then prints, replays, compiles, draws and saves again to the same file).

The cases are the ones issue 18 lists: attributes a primitive never records, names that
forge trace text or repeat, sizes that would allocate terabytes, npy headers that lie, zip
members that are compressed, encrypted, extra or missing, raw exceptions of every kind, and
shapes declared for inputs that cannot give them.
"""

from __future__ import annotations

import io
import json
import threading
import tracemalloc
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.program.serialize import MAX_MEMBERS


def _save(tmp_path: Path, build, *values, name: str = "p") -> tuple[Path, dict]:
    """Record ``build(op, *vars)`` on fresh variables, save it; the path and the document."""
    op = sg.Ops()
    xs = [op.var(np.asarray(v, dtype=float), name=f"x{i}") for i, v in enumerate(values)]
    prog = op.program(xs, build(op, *xs))
    json_path, _ = prog.save(tmp_path / name)
    return json_path, json.loads(json_path.read_text())


def _write(json_path: Path, doc: dict) -> None:
    json_path.write_text(json.dumps(doc))


def _refused(json_path: Path, pattern: str, **kw) -> str:
    with pytest.raises(sg.FormatError, match=pattern) as info:
        sg.load_program(json_path, **kw)
    assert json_path.name in str(info.value) or json_path.with_suffix(".npz").name in \
        str(info.value)
    return str(info.value)


def _round_trips(json_path: Path, tmp_path: Path) -> sg.Program:
    """The loaded program does everything a program does, and saves to the same file."""
    prog = sg.load_program(json_path)
    prog.format()
    sg.compile(prog)
    prog.to_dot()
    prog.stats()
    again, _ = prog.save(tmp_path / "again")
    assert again.read_text() == json_path.read_text()
    return prog

# ---------------------------------------------------------------- attributes


@pytest.mark.parametrize(("attrs", "message"), [
    ({"where": False}, r"node 0 \(v0\): add: unknown attribute 'where' \(it takes: none\)"),
    ({"dtype": {"dtype": "float32"}}, r"add: unknown attribute 'dtype'"),
    ({"out": None}, r"add: unknown attribute 'out'"),
])
def test_attributes_a_primitive_never_records(tmp_path, attrs, message):
    json_path, doc = _save(tmp_path, lambda op, a, b: a + b, [1.0, 2.0], [3.0, 4.0])
    doc["nodes"][0]["attrs"] = attrs
    _write(json_path, doc)
    _refused(json_path, message)


def _set_attrs(doc: dict, **attrs) -> dict:
    doc["nodes"][0]["attrs"].update(attrs)
    return doc


@pytest.mark.parametrize(("build", "change", "message"), [
    (lambda op, x: op.pad(x, ((1, 1),)), lambda d: _set_attrs(d, mode="reflect"),
     r"pad: unknown attribute 'mode'"),
    (lambda op, x: op.pad(x, ((1, 1),)), lambda d: _set_attrs(d, constant_values=None),
     r"attribute 'constant_values': must be a number \(got None\)"),
    (lambda op, x: op.pad(x, ((1, 1),)), lambda d: _set_attrs(d, pad_width=1),
     r"attribute 'pad_width': must be 1 \(before, after\) pair"),
    (lambda op, x: op.roll(x, 1, axis=0), lambda d: _set_attrs(d, shift=1),
     r"attribute 'shift': must be a tuple"),
    (lambda op, x: op.tile(x, (2,)), lambda d: _set_attrs(d, reps=2),
     r"attribute 'reps': must be a tuple"),
    (lambda op, x: op.repeat(x, 2, axis=0), lambda d: d["nodes"][0]["attrs"].pop("axis"),
     r"the attribute 'axis' is missing"),
    (lambda op, x: op.sum(x, axis=0), lambda d: _set_attrs(d, axis=10**30),
     r"attribute 'axis': an integer outside the range"),
    (lambda op, x: op.sum(x, axis=0), lambda d: _set_attrs(d, axis=5),
     r"sum: attribute 'axis': is out of range for 1 dimension"),
    (lambda op, x: op.sum(x, axis=0), lambda d: _set_attrs(d, keepdims=1),
     r"attribute 'keepdims': must be True or False"),
    (lambda op, x: op.cast(x, np.float64), lambda d: _set_attrs(d, dtype={"dtype": ["x"]}),
     r"dtype \"\['x'\]\" is not one of"),
])
def test_attributes_outside_the_schema(tmp_path, build, change, message):
    json_path, doc = _save(tmp_path, build, [1.0, 2.0, 3.0])
    change(doc)
    _write(json_path, doc)
    _refused(json_path, r"node 0 \(v0\): .*" + message if "range of" not in message
             else message)

# ---------------------------------------------------------------- names


def test_names_that_forge_trace_text_are_refused(tmp_path):
    json_path, doc = _save(tmp_path, lambda op, a, b: a + b, [1.0], [2.0])
    for bad in ("b = evil; v0", "v0\nimport os", "", "a.b", "ﬁ", "x" * 201, 7):
        doc["nodes"][0]["name"] = bad
        _write(json_path, doc)
        _refused(json_path, r"node 0: a name must be a Python identifier")


def test_names_are_refused_at_save(tmp_path):
    op = sg.Ops()
    x = op.var([1.0, 2.0], name="x")
    prog = op.program(x, x * 2.0)
    forged = sg.Program([sg.program.Input("b = evil", (2,), np.dtype(float))], prog.constants,
                        prog.nodes, prog.outputs, prog.single)
    with pytest.raises(sg.ArgumentError, match="save: input 0: a name must be a Python "
                                               "identifier"):
        forged.save(tmp_path / "forged")
    assert not (tmp_path / "forged.json").exists()


def test_duplicate_names_are_made_unique_at_save_and_at_load(tmp_path):
    op = sg.Ops()
    w1, w2 = op.var([1.0, 2.0], name="weight"), op.var([3.0, 4.0], name="weight")
    prog = op.program([w1, w2], op.sum(w1 * w2, name="weight"))
    json_path, _ = prog.save(tmp_path / "mlp")
    doc = json.loads(json_path.read_text())
    assert [i["name"] for i in doc["inputs"]] == ["weight", "weight_2"]
    assert [n["name"] for n in doc["nodes"]][-1] == "weight_3"
    back = sg.load_program(json_path)
    assert back.format().splitlines()[0] == "inputs: weight, weight_2"
    np.testing.assert_array_equal(back([1.0, 2.0], [3.0, 4.0]), 11.0)
    # a file written before: the same names, made unique the same way when loading
    doc["inputs"][1]["name"] = doc["nodes"][-1]["name"] = "weight"
    _write(json_path, doc)
    again = sg.load_program(json_path)
    assert again.format() == back.format()
    assert sg.compile(again).source == sg.compile(back).source

# ---------------------------------------------------------------- constants


@pytest.mark.parametrize("dtype", ["bool", "int8", "int16", "int32", "int64", "uint8",
                                   "uint16", "uint32", "uint64", "float16", "float32",
                                   "float64", "complex64", "complex128"])
def test_constants_of_every_dtype_round_trip(tmp_path, dtype):
    op = sg.Ops()
    x = op.var([1.0, -2.0, 3.0], name="x")
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    scalar = np.dtype(dtype).type(True if info is None and dtype == "bool" else
                                  info.max if info is not None else
                                  0.1 - 2.5j if dtype.startswith("complex") else 0.1)
    array = np.array([scalar, scalar, scalar], dtype=dtype)
    shift = op.cast(op.var(scalar), np.float64)
    out = op.where(x > 0, x * op.cast(op.var(array), np.float64) + shift, -x)
    prog = sg.Program(*_constants_only(op.program(x, out)))
    json_path, _ = prog.save(tmp_path / dtype)
    back = _round_trips(json_path, tmp_path)
    for c, d in zip(back.constants, prog.constants):
        assert type(c.value) is type(d.value) and np.asarray(c.value).dtype == \
            np.asarray(d.value).dtype
        np.testing.assert_array_equal(c.value, d.value)
    np.testing.assert_array_equal(back([0.5, -1.0, 2.0]), prog([0.5, -1.0, 2.0]))


def _constants_only(prog: sg.Program) -> tuple:
    return prog.inputs, prog.constants, prog.nodes, prog.outputs, prog.single


def test_a_recorded_bool_condition_saves_and_loads(tmp_path):
    """The issue's data loss: ``op.where(x.value.sum() > 0, x, -x)`` holds a numpy bool."""
    op = sg.Ops()
    x = op.var([1.0, -2.0, 3.0], name="x")
    prog = op.program(x, op.where(x.value.sum() > 0, x, -x))
    json_path, _ = prog.save(tmp_path / "cond")
    back = _round_trips(json_path, tmp_path)
    np.testing.assert_array_equal(back([4.0, 5.0, -6.0]), [4.0, 5.0, -6.0])


@pytest.mark.parametrize(("value", "message"), [
    (10**400, "not valid JSON"),                   # more digits than Python parses
    (10**30, "an integer outside the range of int64 and uint64"),
    ({"scalar": ["int8", 1000]}, "1000 is not a int8 value"),
    ({"scalar": ["bool", 5]}, "a bool scalar holds a bool"),
    ({"scalar": ["float16", 0.1]}, "0.1 is not a float16 value"),
    ({"scalar": ["float64", "1"]}, "holds a float"),
    ({"float": "1e5"}, "unknown or malformed tagged value"),
    ({"complex": [1.0]}, "unknown or malformed tagged value"),
    ({"complex": [1, 2.0]}, "unknown or malformed tagged value"),      # save writes floats
    ({"complex": ["1", 2.0]}, "unknown or malformed tagged value"),
    ({"complex": {"real": 1.0}}, "unknown or malformed tagged value"),
    ({"complex": [1.0, 2.0, 3.0]}, "unknown or malformed tagged value"),
    ({"scalar": ["complex64", {"complex": [0.1, 0.0]}]}, r"\(0.1\+0j\) is not a complex64"),
    ({"scalar": ["complex128", 1.5]}, "a complex128 scalar holds a complex"),
    ({"scalar": ["float64", {"complex": [1.0, 0.0]}]}, "a float64 scalar holds a float"),
    ("text", "a constant is a number or an array"),
])
def test_constants_that_are_not_what_save_writes(tmp_path, value, message):
    json_path, doc = _save(tmp_path, lambda op, a: a * 2.5, [1.0])
    doc["constants"][0]["value"] = value
    text = json.dumps(doc)
    if value == 10**400:
        text = text.replace("1" + "0" * 400, "1" + "0" * 5000)
    json_path.write_text(text)
    _refused(json_path, message)


def test_json_that_is_not_the_format(tmp_path):
    json_path, doc = _save(tmp_path, lambda op, a: a * 2.5, [1.0])
    text = json_path.read_text()
    json_path.write_bytes(b"\xff" + text.encode())
    _refused(json_path, "not valid JSON in UTF-8")
    json_path.write_text(text.replace('"single": true', '"single": false, "single": true'))
    _refused(json_path, "the key 'single' appears twice")
    json_path.write_text(text.replace("2.5", "NaN"))
    _refused(json_path, "NaN is not JSON")
    json_path.write_text(text.replace("2.5", "1e999"))
    _refused(json_path, "a float out of range")
    json_path.write_text("[" * 100_000 + "]" * 100_000)
    _refused(json_path, "holds 100000 arrays and objects in 200000 bytes")
    json_path.write_text("[" * 100_000 + " " * 600_000 + "]" * 100_000)
    _refused(json_path, "not valid JSON")          # nesting: Python's recursion limit

def test_json_dense_with_containers_is_refused_before_parsing(tmp_path):
    """[[], [], ...] would parse to ~25 times its bytes; the format never needs one array or
    object per 5 bytes (its densest documents have one per 19)."""
    json_path, doc = _save(tmp_path, lambda op, a: a * 2.5, [1.0])
    doc["inputs"] = [[]] * 200_000
    _write(json_path, doc)
    tracemalloc.start()
    try:
        _refused(json_path, r"holds 200\d+ arrays and objects in \d+ bytes")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * json_path.stat().st_size


def test_max_bytes_must_be_a_size(tmp_path):
    json_path, _ = _save(tmp_path, lambda op, a: a * 2.5, [1.0])
    with pytest.raises(sg.ArgumentError, match="max_bytes must be an int >= 0, got '1'"):
        sg.load_program(json_path, max_bytes="1")

# ---------------------------------------------------------------- sizes


@pytest.mark.parametrize(("build", "attrs", "shape"), [
    (lambda op, x: op.repeat(x, 2, axis=0), {"repeats": 10**12}, [3 * 10**12]),
    (lambda op, x: op.repeat(x, 2, axis=0), {"repeats": 4_000_000}, [12_000_000]),
    (lambda op, x: op.tile(x, (2,)), {"reps": {"tuple": [10**6, 10**6]}}, [10**6, 3 * 10**6]),
    (lambda op, x: op.pad(x, ((1, 1),)), {"pad_width": {"tuple": [{"tuple": [0, 10**12]}]}},
     [10**12 + 3]),
    (lambda op, x: op.expand(op.reshape(x, (3, 1)), (3, 4)), {"shape": {"tuple": [3, 10**12]}},
     [3, 10**12]),
])
def test_sizes_beyond_the_limit_are_refused_before_allocating(tmp_path, build, attrs, shape):
    json_path, doc = _save(tmp_path, build, [1.0, 2.0, 3.0])
    node = doc["nodes"][-1]
    node["attrs"].update(attrs)
    node["shape"] = shape
    _write(json_path, doc)
    _refused(json_path, r"more than the limit", max_bytes=2**20)


def test_broadcasting_cannot_allocate_past_the_limit(tmp_path):
    """(n, 1) + (1, n): each input within the limit, their broadcast n^2 far beyond it."""
    json_path, doc = _save(tmp_path, lambda op, a, b: a + b, np.ones((4, 1)), np.ones((1, 4)))
    n = 2**16
    doc["inputs"][0]["shape"], doc["inputs"][1]["shape"] = [n, 1], [1, n]
    doc["nodes"][0]["shape"] = [n, n]
    _write(json_path, doc)
    _refused(json_path, r"node 0 \(v0\): shape \(65536, 65536\) needs 34359738368 bytes")
    doc["nodes"][0]["shape"] = [4, 4]      # declared small, computed large
    _write(json_path, doc)
    _refused(json_path, r"add of inputs of shapes \(65536, 1\), \(1, 65536\) gives "
                        r"4294967296 elements, more than the limit")


def test_a_shape_declared_for_an_input_that_cannot_give_it(tmp_path):
    json_path, doc = _save(tmp_path, lambda op, a: op.inv(a), np.eye(3) * 2)
    doc["inputs"][0]["shape"] = [4]
    _write(json_path, doc)
    _refused(json_path, r"node 0 \(v0\): inv cannot run on inputs of shapes \(4,\)")
    for prim in ("svd", "det"):
        _, doc2 = _save(tmp_path, lambda op, a: op.det(a), np.eye(3) * 2, name=prim)
        doc2["inputs"][0]["shape"] = [3, 4]
        _write(json_path, doc2)
        _refused(json_path, r"det cannot run on inputs of shapes \(3, 4\)")

def test_entries_are_checked_without_running_them(tmp_path, monkeypatch):
    """200 copies of one large matmul are checked by matmul's shape rule: no forward runs."""
    json_path, doc = _save(tmp_path, lambda op, a, b: a @ b, np.ones((64, 64)),
                           np.ones((64, 64)))
    doc["nodes"] = [dict(doc["nodes"][0], name=f"v{k}") for k in range(200)]
    _write(json_path, doc)
    calls = []
    matmul = sg.REGISTRY["matmul"]
    forward = matmul.forward
    monkeypatch.setattr(matmul, "forward", lambda *a, **k: calls.append(1) or forward(*a, **k))
    prog = sg.load_program(json_path)
    assert len(prog.nodes) == 200 and len(calls) == 0

# ---------------------------------------------------------------- the .npz


def _npz_with(tmp_path: Path, members: dict[str, bytes], compress: int = zipfile.ZIP_STORED
              ) -> tuple[Path, Path]:
    json_path, doc = _save(tmp_path, lambda op, a: op.getitem(a, np.array([0, 2])),
                           [1.0, 2.0, 3.0])
    npz = json_path.with_suffix(".npz")
    with zipfile.ZipFile(npz, "w", compression=compress) as z:
        for k, data in members.items():
            z.writestr(k, data)
    return json_path, npz


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=False)
    return buf.getvalue()


def _lying_header(shape: tuple) -> bytes:
    good = _npy(np.array([0, 2]))
    header = {"descr": "<i8", "fortran_order": False, "shape": shape}
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    return buf.getvalue() + good[-16:]


@pytest.mark.parametrize(("members", "message"), [
    ({"a0.npy": _lying_header((10**12,))}, r"member a0.npy declares shape \(1000000000000,\)"
     r" of int64 \(8000000000000 bytes\) but holds 16 bytes"),
    ({"a0.npy": _lying_header((3,))}, r"\(24 bytes\) but holds 16 bytes"),
    ({"a0.npy": b"not an array at all"}, r"member a0.npy: not an npy array header"),
    ({"a0.npy": _npy(np.array([0, 2])), "a1.npy": _npy(np.array([1]))},
     r"holds 2 members, more than the 1 arrays its document can refer to"),
    ({}, r"the array 'a0' is not in the .npz file"),
    ({"../evil": _npy(np.array([0, 2]))}, r"member '../evil' is not an array"),
    ({"a0.npy": _npy(np.array([0, 2]).astype(">i8"))}, r"dtype >i8"),
    ({"a0.npy": _npy(np.array([0, 2]).astype(np.clongdouble))},
     rf"dtype {np.dtype(np.clongdouble).name}"),
])
def test_members_that_lie(tmp_path, members, message):
    json_path, _ = _npz_with(tmp_path, members)
    _refused(json_path, message)


def test_compressed_encrypted_and_damaged_members(tmp_path):
    json_path, npz = _npz_with(tmp_path, {"a0.npy": _npy(np.array([0, 2]))},
                               zipfile.ZIP_DEFLATED)
    _refused(json_path, "compressed or encrypted")
    _, npz = _npz_with(tmp_path, {"a0.npy": _npy(np.array([0, 2]))})
    data = bytearray(npz.read_bytes())
    central = data.rfind(b"PK\x01\x02")
    for offset, value in ((8, 1), (10, 99)):        # the encrypted flag; an unknown method
        damaged = bytearray(data)
        damaged[central + offset] = value
        npz.write_bytes(bytes(damaged))
        _refused(json_path, "compressed or encrypted|not a readable .npz")
    damaged = bytearray(data)
    damaged[data.find(b"\x00\x00\x00\x00\x00\x00\x00\x00\x02")] ^= 0xFF     # the data: CRC
    npz.write_bytes(bytes(damaged))
    _refused(json_path, "not a readable .npz|Bad CRC")


def test_members_no_entry_refers_to(tmp_path):
    json_path, _ = _npz_with(tmp_path, {"a0.npy": _npy(np.array([0, 2])),
                                        "a1.npy": _npy(np.array([1]))})
    doc = json.loads(json_path.read_text())
    doc["inputs"][0]["name"] = "array"      # a second "array" in the text: a1 is read
    _write(json_path, doc)
    _refused(json_path, r"the .npz holds arrays no entry refers to: a1")


def test_members_beyond_what_the_document_refers_to_are_refused_unread(tmp_path):
    json_path, npz = _npz_with(tmp_path, {f"a{k}.npy": b"" for k in range(5000)})
    _refused(json_path, "holds 5000 members, more than the 1 arrays its document can refer to")


def test_the_member_count_is_read_before_the_directory(tmp_path):
    json_path, npz = _npz_with(tmp_path, {"a0.npy": _npy(np.array([0, 2]))})
    data = bytearray(npz.read_bytes())
    end = data.rfind(b"PK\x05\x06")
    data[end + 10:end + 12] = (MAX_MEMBERS + 1).to_bytes(2, "little") if MAX_MEMBERS < 0xFFFF \
        else b"\xff\xff"
    npz.write_bytes(bytes(data))
    _refused(json_path, r"holds \d+ members, more than the limit")

# ---------------------------------------------------------------- process-wide state


def test_concurrent_loads_leave_the_warning_filters_alone(tmp_path):
    json_path, _ = _save(tmp_path, lambda op, a: op.log(a - 1.0).sum(), [2.0, 3.0])  # nan at 0.5
    before = list(warnings.filters)
    errors = []

    def load():
        try:
            for _ in range(20):
                sg.load_program(json_path)
        except Exception as e:      # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert warnings.filters == before
    assert np.geterr() == {"divide": "warn", "over": "warn", "under": "ignore",
                           "invalid": "warn"}


def test_no_module_switches_warning_filters():
    root = Path(sg.__file__).parent
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "catch_warnings" not in text and "simplefilter" not in text, path
