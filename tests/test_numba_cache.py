"""The numba backend's kernel cache: a kernel compiled once is loaded from disk after.

Skipped without numba. Every test writes to its own ``tmp_path`` (``SIMPLEGRAD_CACHE_DIR``),
and forgets the kernels this process built (``numba_kernels._BUILT``) to stand for a fresh
process. The oracle for a hit is the miss's values, bit for bit.
"""

import numpy as np
import pytest

import simplegrad as sg

numba = pytest.importorskip("numba")

from simplegrad.program import numba_kernels  # noqa: E402
from simplegrad.program.numba_backend import fuse  # noqa: E402


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("SIMPLEGRAD_CACHE_DIR", str(root))
    monkeypatch.setattr(numba_kernels, "_BUILT", {})
    return root / "numba"


def program(scale=1.1):
    op = sg.Ops()
    x = op.var(np.linspace(0.1, 1.0, 3000), name="x")
    h = (x * scale + x.tanh()).exp() * 0.5 + x * x
    L = (h / (1 + h * h)).sum()
    return op.program([x], [L, op.grad(L, x)])


def compiled(prog, monkeypatch):
    """The kernels of ``prog`` built as a fresh process builds them, and the values."""
    monkeypatch.setattr(numba_kernels, "_BUILT", {})
    fused, kernels, _ = fuse(prog)
    xv = np.random.default_rng(1).uniform(-1.5, 1.5, 3000)
    return kernels, sg.compile(prog, backend="numba")(xv)


def hits(kernels):
    return sum(k.loaded for k in kernels)


def test_a_second_build_loads_the_kernel_from_disk_with_identical_values(cache, monkeypatch):
    prog = program()
    first, a = compiled(prog, monkeypatch)
    assert hits(first) == 0 and len(list(cache.glob("k*.o"))) == 1
    again, b = compiled(prog, monkeypatch)
    assert hits(again) == len(again) == 1
    for u, v in zip(a, b):
        assert np.array_equal(u, v)         # bit for bit
    np.testing.assert_allclose(b[1], sg.compile(prog)(np.random.default_rng(1).uniform(
        -1.5, 1.5, 3000))[1], rtol=1e-12, atol=1e-14)


def test_a_changed_program_misses(cache, monkeypatch):
    compiled(program(1.1), monkeypatch)
    other, (_, g) = compiled(program(1.2), monkeypatch)
    assert hits(other) == 0 and len(list(cache.glob("k*.o"))) == 2
    xv = np.random.default_rng(1).uniform(-1.5, 1.5, 3000)
    np.testing.assert_allclose(g, sg.compile(program(1.2))(xv)[1], rtol=1e-12, atol=1e-14)


@pytest.mark.slow
def test_corrupt_cache_files_are_ignored_and_rebuilt(cache, monkeypatch):
    prog = program()
    _, a = compiled(prog, monkeypatch)
    (path,) = cache.glob("k*.o")
    whole = path.read_bytes()
    for bad in (b"\x80not a cache file", whole[:len(whole) // 2],     # not ours; cut short
                whole[:-8] + bytes(8)):                               # its code changed
        path.write_bytes(bad)
        rebuilt, b = compiled(prog, monkeypatch)
        assert hits(rebuilt) == 0 and len(rebuilt) == 1     # compiled again, not left to numpy
        written = path.read_bytes()                         # and written again, whole
        assert written.startswith(numba_kernels._MAGIC) and written != bad
        for u, v in zip(a, b):
            assert np.array_equal(u, v)     # bit for bit
    again, c = compiled(prog, monkeypatch)      # what was rebuilt is read back
    assert hits(again) == 1
    for u, v in zip(a, c):
        assert np.array_equal(u, v)


def test_the_environment_variable_relocates_the_cache(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv("SIMPLEGRAD_CACHE_DIR", str(elsewhere))
    compiled(program(), monkeypatch)
    assert list((elsewhere / "numba").glob("k*.o"))
    assert not (tmp_path / "cache").exists()
    monkeypatch.delenv("SIMPLEGRAD_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert numba_kernels.cache_dir() == tmp_path / "xdg" / "simplegrad" / "numba"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert numba_kernels.cache_dir() == tmp_path / "home" / ".cache" / "simplegrad" / "numba"


def test_an_unwritable_cache_compiles_in_memory(tmp_path, monkeypatch):
    blocked = tmp_path / "a file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("SIMPLEGRAD_CACHE_DIR", str(blocked))
    kernels, (_, g) = compiled(program(), monkeypatch)
    assert len(kernels) == 1 and blocked.read_text() == "not a directory"
    xv = np.random.default_rng(1).uniform(-1.5, 1.5, 3000)
    np.testing.assert_allclose(g, sg.compile(program())(xv)[1], rtol=1e-12, atol=1e-14)


def test_pointers_read_through_ctypes_give_the_same_values(cache, monkeypatch):
    """Where an array's data pointer cannot be read from its object (another numpy's layout),
    the kernel takes ``.ctypes.data``: the same values."""
    prog = program()
    _, a = compiled(prog, monkeypatch)
    monkeypatch.setattr(numba_kernels, "_data_field", lambda: (None, 0))
    _, b = compiled(prog, monkeypatch)
    for u, v in zip(a, b):
        assert np.array_equal(u, v)
