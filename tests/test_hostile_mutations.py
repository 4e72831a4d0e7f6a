"""Random mutations of a saved program: ``sg.load_program`` raises ``sg.FormatError`` or
returns a program that is exactly what the file says, within bounded memory, touching no
process-wide state.

A 114-entry gradient program (matmul, pad, repeat, tile, getitem with an index array, a
recorded bool condition, softmax, roll, einsum, flip, slogdet, inv, det, cast, concatenate,
stack, take_along_axis and their gradients) is saved once; hypothesis then changes one leaf of
its JSON (any value, or the key deleted, or a key or list item added), one byte of its .npz,
truncates the .npz, adds or removes a member, or rewrites a member's npy header to lie about
its shape and dtype (a lie that agrees with everything else is a different program that
loads). Each load is measured with tracemalloc. A program that loads is printed, replayed
and compiled (the two agree), drawn, and saved again; loading and saving that file gives the
same file (and the mutated document itself when its names were unique). The terabyte cases run
in a child process under an address-space limit (RLIMIT_AS), where an attempt to allocate
them would fail with MemoryError instead of a FormatError.
"""

from __future__ import annotations

import copy
import gc
import io
import json
import subprocess
import sys
import textwrap
import tracemalloc
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simplegrad as sg
from simplegrad.program.standins import stand_in

MAX_BYTES = 2**20


def build() -> sg.Program:
    """The program every mutation starts from."""
    op = sg.Ops()
    rng = np.random.default_rng(0)
    x = op.var(rng.uniform(-1, 1, (3, 4)), name="x")
    w = op.var(rng.uniform(-1, 1, (4, 4)), name="weight")
    b = op.var(rng.uniform(-1, 1, (4,)), name="bias")
    h = op.tanh(x @ w + b)
    h = op.tile(op.repeat(op.pad(h, ((1, 0), (0, 1)), constant_values=0.5), 2, axis=0), (1, 2))
    g = op.getitem(h, (np.array([0, 2, 5]), slice(None, None, 2)))
    g = op.where(x.value.sum() > 0, g, -g)
    s = op.softmax(g, axis=1) * op.roll(g, (1,), axis=(0,))
    m = op.einsum("ij,kj->ik", s, op.flip(g, axis=(1,)))
    eye = op.cast(op.var(np.eye(3, dtype=np.float32)), np.float64)
    spd = m @ op.transpose(m) + eye * 3.0
    d = op.slogdet(spd) + op.sum(op.inv(spd)) + op.det(spd) * 1e-3
    c = op.concatenate([op.cumsum(b), op.stack([b, b], axis=0).sum(axis=0)])
    t = op.take_along_axis(c, np.array([1, 0, 3]), 0)
    loss = op.sum(d + op.logsumexp(t) + op.mean(op.maximum(x, 0.1) ** 2), name="loss")
    return op.program([x, w, b], [loss, *op.grad(loss, [x, w, b])])


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    where = tmp_path_factory.mktemp("mutations")
    prog = build()
    json_path, npz_path = prog.save(where / "base")
    return prog, json.loads(json_path.read_text()), npz_path.read_bytes(), where


def _state() -> tuple:
    return (list(warnings.filters), np.geterr(), gc.isenabled(), gc.get_threshold(),
            np.get_printoptions(), sys.getrecursionlimit())


def _load(where: Path, text: str, npz: bytes) -> sg.Program | None:
    """Load the files under the bounds: None for a FormatError, else the program."""
    (where / "m.json").write_text(text, encoding="utf-8", errors="surrogatepass")
    (where / "m.npz").write_bytes(npz)
    before = _state()
    tracemalloc.start()
    try:
        prog = sg.load_program(where / "m", max_bytes=MAX_BYTES)
    except sg.FormatError:
        prog = None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert _state() == before
    size = len(text.encode("utf-8", "surrogatepass")) + len(npz)
    assert peak <= 3 * MAX_BYTES + 64 * size, f"peak {peak} bytes for {size} bytes of files"
    return prog


def _usable(prog: sg.Program, where: Path) -> str:
    """Print, replay, compile, draw and save a loaded program; returns the saved JSON."""
    prog.format()
    prog.to_dot()
    prog.stats()
    args = [np.array(stand_in(i.shape, i.dtype)) for i in prog.inputs]
    with np.errstate(all="ignore"):
        got, compiled = prog(*args), sg.compile(prog)(*args)
    for g, c in zip([got] if prog.single else got, [compiled] if prog.single else compiled):
        np.testing.assert_array_equal(g, c)
    json_path, _ = prog.save(where / "again")
    text = json_path.read_text()
    back = sg.load_program(where / "again", max_bytes=MAX_BYTES)
    assert back.format() == prog.format()
    again, _ = back.save(where / "again2")
    assert again.read_text() == text
    return text

# ---------------------------------------------------------------- the JSON


def _leaves(doc, path=()):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _leaves(v, (*path, i))
    yield path


def _parent(doc, path):
    for k in path[:-1]:
        doc = doc[k]
    return doc


NUMBERS = st.one_of(st.integers(-5, 40), st.sampled_from([2**31, 2**62, 2**63, 2**64, -2**63 - 1,
                                                           10**12, 10**30, 10**300]),
                    st.floats(allow_nan=False, allow_infinity=False), st.integers())
WORDS = st.one_of(st.sampled_from(
    ["input", "const", "node", "float64", "float32", "int64", "bool", "object", "<f8",
     "add", "repeat", "tile", "pad", "inv", "getitem", "x", "weight", "v0", "a0", "a1", "a9",
     "tuple", "list", "slice", "array", "scalar", "dtype", "float", "ellipsis", "nan", "inf",
     "b = evil; v0", "where", "mode", "reflect", "axis", "shape", "__class__"]),
    st.text(max_size=6))
LEAF = st.recursive(st.one_of(st.none(), st.booleans(), NUMBERS, WORDS),
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(WORDS, inner, max_size=2)),
                    max_leaves=6)


ALIKE = {bool: st.booleans(), int: st.integers(-2, 6),
         float: st.floats(allow_infinity=False, allow_nan=False, width=32),
         str: st.sampled_from(["x", "weight", "bias", "v0", "v3", "loss", "lambda", "a0",
                               "float32", "int64", "bool", "node", "input", "const", "mul",
                               "add", "sub", "Q"])}


@st.composite
def json_mutations(draw, doc):
    doc = copy.deepcopy(doc)
    paths = [p for p in _leaves(doc) if p]
    path = draw(st.sampled_from(paths))
    parent, key = _parent(doc, path), path[-1]
    kind = draw(st.sampled_from(["alike", "alike", "set", "set", "delete", "insert", "copy"]))
    if kind == "alike":     # a value of the same type: more mutations make a valid program
        parent[key] = draw(ALIKE.get(type(parent[key]), LEAF))
    elif kind == "set":
        parent[key] = draw(LEAF)
    elif kind == "delete":
        del parent[key]
    elif kind == "insert" and isinstance(parent, list):
        parent.insert(key, draw(LEAF))
    elif kind == "insert":
        parent[draw(WORDS)] = draw(LEAF)
    else:
        parent[key] = copy.deepcopy(draw(st.sampled_from([_parent(doc, p)[p[-1]]
                                                          for p in paths[:200]])))
    return doc


def _names(doc) -> list:
    try:
        return [x["name"] for part in ("inputs", "constants", "nodes") for x in doc[part]
                if x["name"] is not None]
    except (KeyError, TypeError):
        return []


def _canonical(doc) -> str:
    return json.dumps(doc, sort_keys=True)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=True)
@given(data=st.data())
def test_json_mutations(saved, data):
    prog, doc, npz, where = saved
    mutated = data.draw(json_mutations(doc))
    text = json.dumps(mutated)
    loaded = _load(where, text, npz)
    if loaded is None:
        return
    resaved = _usable(loaded, where)
    names = _names(mutated)
    if len(set(names)) == len(names):
        assert _canonical(json.loads(resaved)) == _canonical(mutated)

# ---------------------------------------------------------------- the .npz


def _members(npz: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(npz)) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for k, v in members.items():
            z.writestr(k, v)
    return buf.getvalue()


def _lie(npy: bytes, shape: tuple, descr: str) -> bytes:
    """The member with its header rewritten to declare ``shape`` and ``descr``."""
    f = io.BytesIO(npy)
    np.lib.format.read_magic(f)
    np.lib.format.read_array_header_1_0(f)
    data = npy[f.tell():]
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": descr, "fortran_order": False,
                                                "shape": shape})
    return out.getvalue() + data


@st.composite
def npz_mutations(draw, npz):
    kind = draw(st.sampled_from(["byte", "byte", "truncate", "add", "remove", "lie"]))
    if kind == "byte":
        at = draw(st.integers(0, len(npz) - 1))
        return kind, npz[:at] + bytes([draw(st.integers(0, 255))]) + npz[at + 1:]
    if kind == "truncate":
        return kind, npz[:draw(st.integers(0, len(npz) - 1))]
    members = _members(npz)
    name = draw(st.sampled_from(sorted(members)))
    if kind == "remove":
        del members[name]
    elif kind == "add":
        members[draw(st.sampled_from(["a99.npy", "a0.npy.bak", "extra", name.upper()]))] = \
            draw(st.one_of(st.binary(max_size=64), st.just(members[name])))
    else:
        shape = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, 10**6, 10**12]),
                                    max_size=3)))
        members[name] = _lie(members[name], shape, draw(st.sampled_from(
            ["<f8", "<i8", "|b1", "<f4", "|O", ">f8", "<c16"])))
    return kind, _zip(members)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=True)
@given(data=st.data())
def test_npz_mutations(saved, data):
    prog, doc, npz, where = saved
    kind, mutated = data.draw(npz_mutations(npz))
    loaded = _load(where, json.dumps(doc), mutated)
    if loaded is None:
        return
    if kind != "lie":       # a harmless byte (the zip checks its CRCs): the same program
        assert loaded.format() == prog.format()
        for c, d in zip(loaded.constants, prog.constants):
            np.testing.assert_array_equal(c.value, d.value)
    _usable(loaded, where)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_many_more_mutations(saved, data):
    prog, doc, npz, where = saved
    if data.draw(st.booleans()):
        test_json_mutations.hypothesis.inner_test(saved=saved, data=data)
    else:
        test_npz_mutations.hypothesis.inner_test(saved=saved, data=data)

# ---------------------------------------------------------------- terabytes


CHILD = textwrap.dedent("""
    import io, json, resource, sys, zipfile
    import numpy as np
    import simplegrad as sg
    limit = int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        np.ones(limit // 8)         # the limit holds: this must fail
        raise SystemExit("the address-space limit does not hold")
    except MemoryError:
        pass
    where = sys.argv[1]
    base = json.load(open(where + "/t.json"))
    T = 10**12
    cases = {
        "repeat": ("repeat", {"repeats": T, "axis": 0}, [3 * T]),
        "tile": ("tile", {"reps": {"tuple": [T]}}, [3 * T]),
        "pad": ("pad", {"pad_width": {"tuple": [{"tuple": [0, T]}]}}, [T + 3]),
        "expand": ("expand", {"shape": {"tuple": [T, 3]}}, [T, 3]),
        "scatter_add": ("scatter_add", {"indices": {"tuple": [{"tuple": [{"slice":
                        [0, 3, None]}]}]}, "shape": {"tuple": [T]}}, [T]),
    }
    for label, (prim, attrs, shape) in cases.items():
        doc = json.loads(json.dumps(base))
        doc["nodes"][0].update(primitive=prim, args=[["input", 0]], attrs=attrs, shape=shape)
        open(where + "/t.json", "w").write(json.dumps(doc))
        try:
            sg.load_program(where + "/t", max_bytes=2**20)
            raise SystemExit(f"{label} loaded")
        except sg.FormatError as e:
            print(label, "FormatError:", str(e)[:90])
        # within a limit of 2**62 bytes the declarations are consistent: the program loads,
        # its shapes checked by the shape rules, nothing allocated (2 GiB of address space)
        sg.load_program(where + "/t", max_bytes=2**62)
        print(label, "loaded without allocating")
    open(where + "/t.json", "w").write(json.dumps(base))
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False,
                                               "shape": (T,)})
    with zipfile.ZipFile(where + "/t.npz", "w") as z:
        z.writestr("a0.npy", buf.getvalue() + bytes(32))
    try:
        sg.load_program(where + "/t", max_bytes=2**62)
        raise SystemExit("the lying header loaded")
    except sg.FormatError as e:
        print("npy", "FormatError:", str(e)[:90])
""")


def test_terabyte_declarations_under_an_address_space_limit(tmp_path):
    pytest.importorskip("resource")
    op = sg.Ops()
    x = op.var([1.0, 2.0, 3.0], name="x")
    prog = op.program(x, x * np.array([1.0, 2.0, 3.0]))
    prog.save(tmp_path / "t")
    env = {"PYTHONPATH": str(Path(sg.__file__).parents[1]), "OPENBLAS_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), str(2 * 2**30)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("FormatError") == 6, run.stdout
    assert run.stdout.count("loaded without allocating") == 5, run.stdout
    assert "Traceback" not in run.stderr
