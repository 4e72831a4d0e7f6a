"""A call that fails leaves nothing behind: with the cycle collector paused, the Ops, its
Variables and the arrays of a failed recording or a failed ``sg.grad`` are freed by reference
counting alone once the caller drops the error (issue 28: each failed call used to keep 3.7 KB
on a fresh Ops and 4.7-6 KB inside ``sg.grad``, through the translated error held in a local).
"""

from __future__ import annotations

import gc
import tracemalloc
import weakref

import numpy as np
import pytest
from test_training_memory import collector_paused

import simplegrad as sg

BIG = 20_000    # float64 entries: an array of 160 KB, which a leak could not hide


def failed_recording() -> tuple[weakref.ref, weakref.ref]:
    """A fresh Ops whose ``a + b`` raises ShapeError; weak references to its recorder and to
    one of its arrays."""
    op = sg.Ops()
    a = op.var(np.ones(BIG))
    b = op.var(np.ones(3))
    with pytest.raises(sg.ShapeError, match=r"\(3,\)"):
        a + b
    return weakref.ref(a.rec), weakref.ref(a.raw)


def failed_grad() -> tuple[weakref.ref, weakref.ref]:
    """``sg.grad`` of a function that fails while recording; weak references to the Ops the
    function saw and to the array it recorded."""
    seen = []

    def f(x):
        seen.append((weakref.ref(x.rec), weakref.ref(x.raw)))
        return (x + np.ones(3)).sum()

    with pytest.raises(sg.ShapeError):
        sg.grad(f)(np.ones(BIG))
    return seen[0]


@pytest.mark.parametrize("fail", [failed_recording, failed_grad])
def test_a_failed_call_is_freed_by_reference_counting(fail):
    with collector_paused():
        gc.collect()
        for _ in range(20):
            rec, value = fail()
            assert rec() is None, "the failed call's Ops is still alive"
            assert value() is None, "the failed call's array is still alive"


@pytest.mark.parametrize("fail", [failed_recording, failed_grad])
def test_failed_calls_keep_traced_memory_flat(fail):
    with collector_paused():
        gc.collect()
        for _ in range(20):
            fail()
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            for _ in range(200):
                fail()
            after = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
    grown = sum(d.size_diff for d in after.compare_to(before, "filename"))
    # (a leak keeps at least the 3.7 KB of a frame per call, and here a 160 KB array)
    assert grown / 200 < 1000, f"{grown / 200:.0f} bytes kept per failed call"
