"""sg.compile(prog, backend="numba"): fused loops equal the numpy backend's values.

Skipped without numba (the optional [numba] extra). The oracle is the numpy backend (itself
tested against the tape in test_compile.py) and, for the gradient, central differences. Values
are compared normwise, |a - b| <= 1e-12 * max |a| (and for a sum, relative to the sum of the
magnitudes of its terms): numba's libm and numpy's own transcendental functions differ in
the last bit, so an entry where terms cancel can differ more than that relative to itself.
"""

import math
import re
import sys

import numpy as np
import pytest

import simplegrad as sg

numba = pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path, monkeypatch):
    """Compiled kernels go to a temporary directory, never the user's cache."""
    monkeypatch.setenv("SIMPLEGRAD_CACHE_DIR", str(tmp_path / "cache"))


def chain(h, steps=3):
    for _ in range(steps):
        h = (h * 1.1 + h.tanh()).exp() * 0.5 + h * h
        h = h / (1 + h * h)
    return h


def close(a, b, scale=None):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    if a.dtype == bool:
        np.testing.assert_array_equal(a, b)
        return
    same_nan = np.isnan(a) == np.isnan(b)
    assert same_nan.all()
    fin = ~np.isnan(a)
    assert (np.isinf(a[fin]) == np.isinf(b[fin])).all()
    ok = np.isfinite(a)
    scale = np.max(np.abs(a[ok]), initial=0.0) if scale is None else scale
    assert np.all(np.abs(a[ok] - b[ok]) <= 1e-12 * scale)


@pytest.mark.slow
def test_value_and_gradient_of_an_elementwise_chain_fuse_into_one_loop():
    op = sg.Ops()
    x = op.var(np.linspace(0.1, 1.0, 5000), name="x")
    L = chain(x).sum()
    g = op.grad(L, x)
    prog = op.program([x], [L, g])
    fast = sg.compile(prog, backend="numba")
    plain = sg.compile(prog)
    assert fast.backend == "numba" and fast.fallback == () and len(fast.kernels) == 1
    assert "for i in range" in fast.kernels[0] and "fused" in fast.source
    rng = np.random.default_rng(3)
    for _ in range(3):
        xv = rng.uniform(-1.5, 1.5, 5000)
        (l0, g0), (l1, g1) = plain(xv), fast(xv)
        terms = np.abs(np.asarray(chain_numpy(xv)))
        close(l0, l1, scale=terms.sum())
        close(g0, g1)
    # the gradient itself, against central differences of the numpy chain
    xv = rng.uniform(-1, 1, 5000)
    eps = 1e-6
    fd = (chain_numpy(xv + eps) - chain_numpy(xv - eps)) / (2 * eps)
    np.testing.assert_allclose(fast(xv)[1], fd, rtol=1e-6, atol=1e-8)


def test_the_fused_loop_is_vectorised_without_gathers_or_overlap_checks(tmp_path, monkeypatch):
    """The loop LLVM vectorises reads each array at consecutive indices: no gather (2^k is built
    from its bits, not read from a table) and no runtime check that an output overlaps an input
    (with numba's wraparound of negative indices, LLVM guarded the vector loop with one, which
    sent every block down the scalar loop when malloc placed the output just past an input)."""
    from simplegrad.program import numba_kernels
    from simplegrad.program.numba_backend import fuse

    monkeypatch.setenv("SIMPLEGRAD_CACHE_DIR", str(tmp_path))    # compiled here: its IR kept
    monkeypatch.setattr(numba_kernels, "_BUILT", {})
    op = sg.Ops()
    x = op.var(np.linspace(0.1, 1.0, 5000), name="x")
    L = chain(x).sum()
    _, kernels, _ = fuse(op.program([x], [L, op.grad(L, x)]))
    llvm = kernels[0].llvm()
    assert "vector.body" in llvm and re.search(r"<\d+ x double>", llvm)
    assert "gather" not in llvm and "vector.memcheck" not in llvm


def chain_numpy(h, steps=3):
    for _ in range(steps):
        h = np.exp(h * 1.1 + np.tanh(h)) * 0.5 + h * h
        h = h / (1 + h * h)
    return h


def _sweep():
    """Inputs across exp's and tanh's whole range: dense grids, the points where the reduction
    x = k ln 2 + r changes k (for exp at x = (k + 1/2) ln 2, for tanh at 2|x| = (k + 1/2) ln 2)
    and their neighbours, results that are subnormal or round to 0, overflow, and the special
    values."""
    rng = np.random.default_rng(5)
    k = np.arange(-1080, 1030)
    edges = np.concatenate([(k + 0.5) * np.log(2), (k[k >= 0] + 0.5) * np.log(2) / 2])
    edges = np.concatenate([np.nextafter(np.nextafter(edges, -np.inf), -np.inf),
                            np.nextafter(edges, -np.inf), edges, np.nextafter(edges, np.inf)])
    tiny = np.geomspace(5e-324, 1e-3, 2000)
    return np.concatenate([
        np.linspace(-760, 720, 200_001), rng.uniform(-1, 1, 100_000),
        rng.uniform(-25, 25, 100_000), np.linspace(-745.2, -708.3, 20_001), edges,
        edges * -1, tiny, -tiny,
        [0.0, -0.0, np.inf, -np.inf, np.nan, 709.78, 709.79, 710.0, -745.13, -745.14, 22.0,
         -22.0, 44.0, 1e300, -1e300, np.finfo(float).max, -np.finfo(float).max]])


def _ulps(got, want):
    """|got - want| in units of the last place of want (subnormal results too)."""
    return np.abs(got - want) / np.spacing(np.abs(want))


def test_exp_and_tanh_written_into_the_loop_match_numpy_everywhere():
    """exp and tanh are fused as arithmetic (a reduction by ln 2, a polynomial, 2^k from its
    bits): over a dense sweep of their whole range, exp is within 1 ulp of numpy's (subnormal
    results included, rounded once) and tanh within 3, as measured here; the bounds allow one
    ulp more for numpy builds whose own exp and tanh round differently. nan, +-inf,
    +-0.0, overflow to inf and underflow to 0 are numpy's exactly."""
    xs = _sweep()
    op = sg.Ops()
    x = op.var(np.zeros(xs.size), name="x")
    prog = op.program([x], [x.exp() * 1.0, x.tanh() * 1.0])
    fast = sg.compile(prog, backend="numba")
    assert len(fast.kernels) == 1 and "_w_exp(" in fast.kernels[0] and fast.fallback == ()
    got_exp, got_tanh = fast(xs)
    with np.errstate(over="ignore"):
        want_exp, want_tanh = np.exp(xs), np.tanh(xs)
    for got, want, bound in ((got_exp, want_exp, 2.0), (got_tanh, want_tanh, 4.0)):
        assert np.array_equal(np.isnan(got), np.isnan(want))
        exact = ~np.isfinite(want) | (want == 0)       # inf, and 0 (its sign too)
        exact &= ~np.isnan(want)
        assert np.array_equal(got[exact], want[exact])
        assert np.array_equal(np.signbit(got[exact]), np.signbit(want[exact]))
        rest = ~exact & ~np.isnan(want)
        assert np.max(_ulps(got[rest], want[rest])) <= bound
    assert np.array_equal(np.signbit(got_tanh), np.signbit(want_tanh))


@pytest.mark.parametrize("n", [64, 65, 1023, 1025, 2049, 3001])
def test_sums_and_values_of_every_size_of_the_last_block(n):
    """A block's values run as two interleaved chains; when its count is odd, both compute its
    middle value, and the sum takes it once."""
    op = sg.Ops()
    x = op.var(np.zeros(n), name="x")
    y = (x * x + 0.5).tanh()
    prog = op.program([x], [y, (y * 2.0 - 1.0).sum()])
    fast = sg.compile(prog, backend="numba")
    assert len(fast.kernels) == 1
    xv = np.random.default_rng(n).uniform(-2, 2, n)
    got_y, got_sum = fast(xv)
    want_y = np.tanh(xv * xv + 0.5)
    np.testing.assert_allclose(got_y, want_y, rtol=4 * np.finfo(float).eps, atol=0)
    terms = 2.0 * got_y - 1.0
    assert abs(got_sum - math.fsum(terms)) <= 1e-13 * np.sum(np.abs(terms))


def test_other_functions_run_on_numpy_between_fused_loops():
    op = sg.Ops()
    x = op.var(np.linspace(-1, 1, 1000), name="x")
    L = ((x * 2.0 + 1.0).sin() * x * 3.0 - x).sum()
    prog = op.program([x], [L, op.grad(L, x)])
    fast = sg.compile(prog, backend="numba")
    assert "np.sin(" in fast.source and "np.cos(" in fast.source and fast.fallback == ()
    assert len(fast.kernels) >= 2
    xv = np.linspace(-2, 2, 1000)
    a, b = sg.compile(prog)(xv), fast(xv)
    close(a[0], b[0], scale=np.sum(np.abs(np.sin(xv * 2 + 1) * xv * 3 - xv)))
    close(a[1], b[1])


def test_broadcast_scalars_comparisons_where_and_nonfinite_values():
    op = sg.Ops()
    x = op.var(np.linspace(-1, 1, 300), name="x")
    s = op.var(np.array(2.5), name="s")       # one value: read at [0] in the loop
    with np.errstate(all="ignore"):
        y = op.where(x > 0, (x * s).log(), x / (x * 0.0)) * 1.5
        prog = op.program([x, s], [y, (y * 2.0).sum(), x > s * 0.1])
    fast = sg.compile(prog, backend="numba")
    assert len(fast.kernels) == 2 and fast.fallback == () and "np.log(" in fast.source
    with np.errstate(all="ignore"):
        for xv in (np.linspace(-1, 1, 300), np.linspace(-2, 3, 300)):
            a, b = sg.compile(prog)(xv, np.array(2.5)), fast(xv, np.array(2.5))
            for u, v in zip(a, b):
                close(u, v)      # nan where x <= 0 (0/0, -x/0 is -inf, inf*0 is nan): as numpy


def test_entries_numba_cannot_compile_fall_back_and_are_named():
    op = sg.Ops()
    x = op.var(np.linspace(0.1, 0.9, 200), name="x")
    z = op.clip(x.tanh() * 2, 0.3, 0.8)     # np.clip has no scalar form in numba
    z.name = "clipped"
    y = (z.exp() * x + 1.0).sum()
    prog = op.program([x], [y])
    fast = sg.compile(prog, backend="numba")
    assert fast.fallback == ("clipped",)
    assert "np.clip" in fast.source and len(fast.kernels) == 2
    xv = np.linspace(-0.5, 0.9, 200)
    close(sg.compile(prog)(xv)[0], fast(xv)[0], scale=200 * np.e * 1.0 + 200)


def test_mlp_step_with_matmuls_between_fused_groups():
    rng = np.random.default_rng(0)
    op = sg.Ops()
    W1, W2 = op.var(rng.normal(size=(16, 32)) * 0.3), op.var(rng.normal(size=(32, 4)) * 0.3)
    X, Y = op.var(rng.normal(size=(64, 16))), op.var(rng.normal(size=(64, 4)))
    h = (X @ W1).tanh()
    r = h @ W2 - Y
    loss = (r * r).sum() * 0.5
    grads = op.grad(loss, [W1, W2])
    prog = op.program([W1, W2, X, Y], [loss, *grads])
    fast = sg.compile(prog, backend="numba")
    assert fast.kernels and fast.fallback == ()
    args = [rng.normal(size=s) for s in [(16, 32), (32, 4), (64, 16), (64, 4)]]
    for u, v in zip(sg.compile(prog)(*args), fast(*args)):
        close(u, v)


def test_small_programs_stay_numpy_and_bad_backends_are_refused():
    op = sg.Ops()
    x = op.var(np.ones(3))
    prog = op.program([x], [(x * 2.0 + 1.0).exp()])
    fast = sg.compile(prog, backend="numba")
    assert fast.kernels == () and "F['fused" not in fast.source     # 3 values: no kernel
    np.testing.assert_array_equal(fast(np.ones(3))[0], np.exp(np.ones(3) * 3))
    with pytest.raises(sg.ArgumentError, match="backend must be 'numpy' or 'numba'"):
        sg.compile(prog, backend="jax")


def test_jit_on_the_numba_backend():
    jf = sg.jit(sg.value_and_grad(lambda x: chain(x).sum()), backend="numba")
    xv = np.linspace(-1, 1, 1000)
    jf(xv)
    value, g = jf(xv * 0.5)
    assert jf.programs(xv)[0].backend == "numba"
    want = sg.value_and_grad(lambda x: chain(x).sum())(xv * 0.5)
    close(want[1], g)
    assert value == pytest.approx(want[0], rel=1e-12)


def test_missing_numba_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)     # import numba now raises ImportError
    op = sg.Ops()
    x = op.var(np.ones(3))
    with pytest.raises(sg.MissingToolError, match=r"simplegrad\[numba\]"):
        sg.compile(op.program([x], [x * 2.0]), backend="numba")


def test_bool_arrays_in_and_out_of_a_kernel_pass_as_bytes():
    """A mask the kernel reads and a comparison it writes (a C function of pointers: bools are
    bytes) equal the numpy backend's."""
    op = sg.Ops()
    x = op.var(np.linspace(-1, 1, 3000), name="x")
    mask = np.random.default_rng(1).uniform(size=3000) > 0.5
    h = x * 2.0
    c = h > 0.1
    y = op.where(mask, op.where(c, h * h, -h) * 3.0, h + 1.0)
    prog = op.program([x], [(y * x).sum(), op.grad((y * x).sum(), x), c])
    fast = sg.compile(prog, backend="numba")
    assert len(fast.kernels) == 1 and fast.fallback == () and "!= 0" in fast.kernels[0]
    xv = np.random.default_rng(0).uniform(-1, 1, 3000)
    (l0, g0, c0), (l1, g1, c1) = sg.compile(prog)(xv), fast(xv)
    assert c1.dtype == bool and np.array_equal(c0, c1)
    close(l0, l1, scale=float(np.abs(xv).sum()) * 10)
    close(g0, g1)
