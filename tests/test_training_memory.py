"""Training loops keep flat memory with no release() call, by reference counting alone.

Each habit runs 2,000 steps with Python's cycle collector paused: every step's Ops must be
gone as soon as the step ends (a weak reference to it is dead), nothing is left for the
collector, and (slow tests) traced memory is flat after warm-up. Warm-up matters: CPython
keeps up to 2,000 freed tuples per size for reuse, which tracemalloc counts as live until
those lists are full.
"""

from __future__ import annotations

import gc
import tracemalloc
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pytest

import simplegrad as sg
from simplegrad import nn, optim

STEPS = 2000


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cycle collector (restoring its state), so only reference counting frees."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def jax_habit(rng: np.random.Generator) -> tuple[Callable[[], None], Callable[[], float], list]:
    """One step of value_and_grad + Adam.update; a way to read the loss; the steps' Ops."""
    model = nn.MLP([8, 16, 3], rng=rng)
    x, y = rng.normal(size=(32, 8)), rng.integers(0, 3, 32)
    seen: list = []

    def loss(p: dict, xb: np.ndarray, yb: np.ndarray):
        out = nn.cross_entropy(model.apply(p, xb), yb)
        seen[:] = [weakref.ref(out.ops)]        # the last step's only: no growth of its own
        return out

    opt = optim.Adam(lr=1e-2)
    box = {"params": model.params()}
    box["state"] = opt.init(box["params"])

    def step() -> None:
        _, grads = sg.value_and_grad(loss)(box["params"], x, y)
        box["params"], box["state"] = opt.update(grads, box["state"], box["params"])

    return step, lambda: float(nn.cross_entropy(model.apply(box["params"], x), y)), seen


@pytest.mark.slow
def test_jax_habit_frees_every_step_by_reference_counting(rng):
    step, current_loss, seen = jax_habit(rng)
    first = current_loss()
    with collector_paused():
        gc.collect()                            # what the test session left behind
        for _ in range(STEPS):
            step()
            assert seen[-1]() is None           # the step's tape is gone already
        assert gc.collect() == 0                # and nothing waits for the collector
    assert current_loss() < first / 2           # it trained


def flat_traced_memory(step: Callable[[], None]) -> tuple[int, int]:
    """Traced bytes after a traced warm-up (until the free lists are full) and 2,000 steps on."""
    with collector_paused():
        gc.collect()
        tracemalloc.start()
        try:
            for _ in range(STEPS + STEPS // 4):
                step()
            after_warmup = tracemalloc.get_traced_memory()[0]
            for _ in range(STEPS):
                step()
            end = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
    return after_warmup, end


@pytest.mark.slow
def test_jax_habit_traced_memory_is_flat(rng):
    after_warmup, end = flat_traced_memory(jax_habit(rng)[0])
    assert end - after_warmup < 16 * 1024, (after_warmup, end)


def pytorch_habit(rng: np.random.Generator):
    model = nn.MLP([8, 16, 3], rng=rng)
    x, y = rng.normal(size=(32, 8)), rng.integers(0, 3, 32)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    seen: list = []
    lengths: set[int] = set()

    def step() -> None:
        loss = nn.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        seen[:] = [(weakref.ref(loss.ops), len(loss.ops.tape))]
        lengths.add(len(loss.ops.tape))

    return step, lambda: nn.cross_entropy(model(x), y).item(), seen, lengths


def test_pytorch_habit_frees_every_step_by_reference_counting(rng):
    step, current_loss, seen, lengths = pytorch_habit(rng)
    first = current_loss()
    with collector_paused():
        gc.collect()
        for _ in range(STEPS):
            step()
            assert seen[-1][0]() is None
        assert gc.collect() == 0
    assert len(lengths) == 1                    # the same tape length every step
    assert current_loss() < first / 2


@pytest.mark.slow
def test_pytorch_habit_traced_memory_is_flat(rng):
    after_warmup, end = flat_traced_memory(pytorch_habit(rng)[0])
    assert end - after_warmup < 16 * 1024, (after_warmup, end)
