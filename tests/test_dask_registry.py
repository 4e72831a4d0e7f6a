"""Every registered primitive on dask arrays: lazy, or a MaterializeError naming it.

For each primitive and check case, a program holding the entry and its first-order gradient
(the gradient rules' own primitives included: nd fancy indexing in det's, the scatters) is
replayed on dask arrays split into two chunks along every axis, as a Program and compiled,
while a scheduler that refuses to run any task is set: building the outputs must compute
nothing. Each output computed from the inputs is then a dask array whose value equals the
numpy replay of the same program (1e-12 relative, 1e-10 absolute for sums across chunks),
or the replay raises ``sg.MaterializeError`` naming the primitive and ``materialize=True``
gives the numpy value. The first case of each primitive runs by default, every case in the
slow run.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_primitives import sample

import simplegrad as sg

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")


class ComputedError(Exception):
    """A dask task ran while a program was only being built."""


def _refuse(*args, **kwargs):
    raise ComputedError("a dask task was computed before .compute()")


def chunked(x: np.ndarray):
    """x as a dask array in two chunks along every axis (one for length-1 axes)."""
    return da.from_array(x, chunks=tuple(max(1, (n + 1) // 2) for n in x.shape))


def recorded(prim, case, rng):
    """A program of the entry and its first-order gradients, and its numpy inputs."""
    xs = sample(prim, case, rng)
    op = sg.Ops()
    vs = [op.var(x) for x in xs]
    args = [op.greater(v, 0) if i in case.conditions else v for i, v in enumerate(vs)]
    out = op.apply(prim, args, case.attrs)
    outs = [out]
    if prim.differentiable and np.issubdtype(out.dtype, np.floating):
        weights = np.cos(np.arange(out.value.size)).reshape(out.shape)
        outs += [g for g in op.grad(op.sum(out * weights), vs) if g is not None]
    return op.program(vs, outs), xs


def _params(every: bool) -> list:
    out = []
    for name, prim in sorted(sg.REGISTRY.items()):
        for k, case in enumerate(prim.cases if every else prim.cases[:1]):
            marks = [pytest.mark.slow] if every else []
            out.append(pytest.param(prim, case, id=f"{name}-{k}", marks=marks))
    return out


def from_inputs(prog) -> set:
    """The nodes computed from an input (a seed's spread is computed from constants alone)."""
    found: set = set()
    for k, node in enumerate(prog.nodes):
        if any(r.kind == "input" or r.kind == "node" and r.index in found for r in node.args):
            found.add(k)
    return found


def check_lazy(prim, case, rng):
    prog, xs = recorded(prim, case, rng)
    computed = from_inputs(prog)
    want = prog(*xs)
    for run in (prog, sg.compile(prog)):
        lazy = [chunked(x) for x in xs]
        try:
            with dask.config.set(scheduler=_refuse), warnings.catch_warnings():
                warnings.simplefilter("error")          # dask's "computing" FutureWarning
                got = run(*lazy)
        except sg.MaterializeError as e:
            assert prim.name in str(e) or "getitem" in str(e) or "scatter" in str(e), str(e)
            got = run(*lazy, materialize=True)
        else:
            for g, r in zip(got, prog.outputs):
                if r.kind == "node" and r.index in computed:
                    assert isinstance(g, da.Array), f"{prim.name}: output is {type(g)}"
        values = dask.compute(*got, scheduler="sync")
        for g, w in zip(values, want):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("prim, case", _params(every=False))
def test_first_case_stays_lazy(prim, case, rng):
    check_lazy(prim, case, rng)


@pytest.mark.parametrize("prim, case", _params(every=True))
def test_every_case_stays_lazy(prim, case, rng):
    check_lazy(prim, case, rng)


def test_the_refusing_scheduler_catches_a_silent_compute():
    """The oracle itself: a numpy function dask lacks computes, and the test sees it."""
    x = chunked(np.eye(3) * 2.0)
    with dask.config.set(scheduler=_refuse), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ComputedError):
            np.linalg.det(x)
