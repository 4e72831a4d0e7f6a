"""Peak memory of a deep chain's gradient, in every habit that asks for no graph, against the
bytes PyTorch's autograd saves for the same chain.

The chain: 32 steps of ``h = tanh(h @ W)`` on 256x256 float64 arrays, then ``h.sum()``; the
gradient in W. Habits: ``sg.grad(f, argnums=1)`` (its own Ops), ``op.grad(L, W,
create_graph=False)`` on a user's Ops (kept, or released by ``with sg.Ops() as op:``), and
``W = sg.Parameter`` with ``L.backward()``. Each habit's peak is what tracemalloc (numpy
reports its buffers to it) counts above the memory before the step's forward began, through
the end of its backward, for one step and for a loop of three (where the names of one step,
the loss and its Ops, stay bound while the next forward runs); the inputs (x, W, a Parameter)
exist before. The cycle collector is paused while measuring, so only reference counting frees
(as in a training loop between collections).

PyTorch (optional) saves, per step, ``h`` for ``mm`` (W is a leaf) and ``tanh``'s output:
counted by ``torch.autograd.graph.saved_tensors_hooks`` two ways, once per storage (what it
holds: the 32 outputs of tanh, each also the next mm's input) and once per save (64 arrays).
Without torch the same counts are taken analytically. A simplegrad entry keeps the values its
rules read (``Primitive.saves``: matmul its inputs, tanh its output), as PyTorch does, so what
the forward holds at its end is about one array per step; the peak adds the backward's few
working arrays (a value-only sweep that is a tape's last lets go of each value once pulled
back).
Run: python benchmarks/memory.py [--steps 32] [--n 256]
"""

from __future__ import annotations

import functools
import gc
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import peers

import simplegrad as sg

MARKS: list[int] = []    # traced bytes at the end of each forward (``chain`` notes them)


def peak_bytes(step: Callable[[], Any]) -> tuple[int, int, Any]:
    """tracemalloc's peak above the memory before ``step`` ran, and what the last forward held
    at its end (the graph's saved values and the results), with the collector paused."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    MARKS.clear()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = step()
        return tracemalloc.get_traced_memory()[1] - base, MARKS[-1] - base, out
    finally:
        tracemalloc.stop()
        if was:
            gc.enable()


def torch_saved(torch: Any, X: np.ndarray, W: np.ndarray, steps: int) -> tuple[int, int]:
    """The bytes autograd saves for the chain (leaves excluded): per storage and per save."""
    storages: dict[int, int] = {}
    per_save = [0]
    Wt, Xt = torch.tensor(W, requires_grad=True), torch.tensor(X)
    leaves = {Wt.untyped_storage().data_ptr(), Xt.untyped_storage().data_ptr()}

    def pack(t: Any) -> Any:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in leaves:
            storages[ptr] = t.untyped_storage().nbytes()
            per_save[0] += t.untyped_storage().nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        h = Xt
        for _ in range(steps):
            h = torch.tanh(h @ Wt)
        L = h.sum()
    L.backward()
    return sum(storages.values()), per_save[0]


def main() -> None:
    p = peers.parser(__doc__)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--n", type=int, default=256)
    args = p.parse_args()
    steps, n = args.steps, args.n
    rng = np.random.default_rng(0)
    X, W0 = rng.normal(size=(n, n)), rng.normal(size=(n, n)) / np.sqrt(n)
    one = X.nbytes

    def chain(h: Any, W: Any) -> Any:
        for _ in range(steps):
            h = (h @ W).tanh()
        L = h.sum()
        MARKS.append(tracemalloc.get_traced_memory()[0])     # what the forward holds
        return L

    # each habit as a user's loop of k steps: the names of one step stay bound while the
    # next step's forward runs (the previous loss, its Ops)
    def by_grad(k: int) -> np.ndarray:
        for _ in range(k):
            g = sg.grad(chain, argnums=1)(X, W0)
        return g

    def by_ops(k: int) -> np.ndarray:
        for _ in range(k):
            op = sg.Ops()
            W = op.var(W0)
            L = chain(op.var(X, requires_grad=False), W)
            g = op.grad(L, W, create_graph=False).value
        return g

    def by_ops_with(k: int) -> np.ndarray:
        for _ in range(k):
            with sg.Ops() as op:
                W = op.var(W0)
                L = chain(op.var(X, requires_grad=False), W)
                g = op.grad(L, W, create_graph=False).value
        return g

    P = sg.Parameter(W0)

    def by_parameter(k: int) -> np.ndarray:
        for _ in range(k):
            P.grad = None
            loss = chain(X, P)
            loss.backward()
        return P.grad.value

    habits = {"sg.grad": by_grad, "op.grad(create_graph=False)": by_ops,
              "the same in `with sg.Ops() as op:`": by_ops_with,
              "Parameter + backward()": by_parameter}
    # the inputs each habit copies inside its step, as torch's leaves not counted as saved:
    # op.var copies X and W; a constant X is copied once recorded; sg.grad borrows both
    copies = {"sg.grad": 0, "op.grad(create_graph=False)": 2,
              "the same in `with sg.Ops() as op:`": 2, "Parameter + backward()": 1}
    peaks, loops, grads, held = {}, {}, {}, {}
    for label, loop in habits.items():
        loop(1)                     # warm: first-call caches are not the step's memory
        peaks[label], held[label], grads[label] = peak_bytes(functools.partial(loop, 1))
        held[label] -= copies[label] * one
        loops[label] = peak_bytes(functools.partial(loop, 3))[0]
    peers.check_agree("chain gradient", grads)
    torch = peers.torch_or_none()
    if torch is not None:
        torch.set_default_dtype(torch.float64)
        stored, saved = torch_saved(torch, X, W0, steps)
        source = "PyTorch saved_tensors_hooks"
    else:
        stored, saved = steps * one, 2 * steps * one
        source = "analytic count (PyTorch not installed)"
    print(f"chain of {steps} x tanh(h @ W), {n}x{n} float64 ({one / 1e6:.2f} MB an array); "
          f"torch saves {stored / 1e6:.2f} MB held ({stored / one:.0f} arrays), "
          f"{saved / 1e6:.2f} MB counted per save ({saved / one:.0f}); {source}")
    print(f"\n{'held by the graph after the forward:':36s} {'MB':>8s} {'arrays':>7s} "
          f"{'x held':>7s}")
    for label, b in held.items():
        print(f"{label:36s} {b / 1e6:8.2f} {b / one:7.1f} {b / stored:7.2f}")
    for what, table in (("peak, one step", peaks), ("peak, a loop of 3 steps", loops)):
        print(f"\n{what + ':':36s} {'peak MB':>8s} {'arrays':>7s} {'x held':>7s} "
              f"{'x per save':>11s}")
        for label, b in table.items():
            print(f"{label:36s} {b / 1e6:8.2f} {b / one:7.1f} {b / stored:7.2f} "
                  f"{b / saved:11.2f}")
    # an Ops the loop keeps holds its tape until it is released or rebound, by contract (a
    # second op.grad of the same loss may follow): in a loop its row has no target, as
    # PyTorch's would not with retain_graph=True
    kept = "op.grad(create_graph=False)"
    rows = [{"workload": f"peak memory, gradient of {steps} x tanh(h @ W) on {n}x{n}, one step, "
             f"{label}", "unit": "bytes torch autograd saves (per save)",
             "target": "simplegrad <= 1.15", "cols": {"simplegrad": b / saved, "torch eager": 1.0}}
            for label, b in peaks.items()]
    rows += [{"workload": f"  the same in a loop of 3 steps, {label}" + (
                  " (the Ops kept between steps holds its tape)" if label == kept else ""),
              "unit": "bytes torch autograd saves (per save)",
              "target": "" if label == kept else "simplegrad <= 1.15",
              "cols": {"simplegrad": b / saved, "torch eager": 1.0}}
             for label, b in loops.items()]
    rows += [{"workload": f"  held by the graph after the forward (inputs' copies aside), "
              f"{label} (each entry keeps what its rules read)",
              "unit": "bytes torch autograd holds (per storage)", "target": "simplegrad <= 1.05",
              "cols": {"simplegrad": b / stored, "torch eager": 1.0}}
             for label, b in held.items()]
    rows.append({"workload": "  one step's peak, sg.grad, against what torch holds (its saves "
                 "counted per storage; the difference is the backward's working arrays)",
                 "unit": "bytes torch autograd holds (per storage)", "target": "",
                 "cols": {"simplegrad": peaks["sg.grad"] / stored, "torch eager": 1.0}})
    peers.emit(args, rows)


if __name__ == "__main__":
    main()
