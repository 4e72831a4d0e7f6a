"""Where the time of two known gaps goes: the MLP step through sg.value_and_grad, and the hvp
with a writable matrix.

Each gap is taken apart by runs that remove one cost at a time, written with public API only
(so they show what a fix inside simplegrad would save), interleaved in one process, with the
minor page faults per call (fresh buffers the kernel must map and zero) beside each time, in
the interleaved calls and with the run called alone:

MLP step (mlp.py's four-parameter one-hot loss), ratios to numpy by hand:
  sg.value_and_grad             the transform as users call it
  fresh Ops, as the transform   the same work by hand: op.var copies of the parameters, the
                                writable X and Y copied when an entry records them, results
                                copied out (the transform's own work is the difference)
  fresh Ops(borrow=True)        parameters, X and Y recorded as read-only views, no copies;
                                results still copied out
  ... results not copied        and the fresh result arrays handed back as they are
  persistent Ops                parameters and data as leaves made once; record, sweep, release
hvp of sum(tanh(A x)), A 2000x2000, in numpy matvecs: sg.hvp with a writable and a read-only
A, forward-over-reverse on an Ops(borrow=True) with the writable A, and reverse-over-forward
on one (the gradient of x -> J(x) v with a tangent that requires no gradient: its two A^T
products meet in one accumulated cotangent, 3 matvecs, against forward-over-reverse's 4,
which also computes the unused gradient A^T g).
``--profile`` adds cProfile's top entries (by own time) of sg.value_and_grad and of the
persistent step.
Run: python benchmarks/profile_gaps.py [--quick] [--profile]
"""

from __future__ import annotations

import cProfile
import io
import pstats
import resource
import statistics
import time

import numpy as np
import peers
from mlp import data, numpy_step, persistent_step, sg_loss

import simplegrad as sg


def faults(fn, calls: int = 20) -> float:
    """Minor page faults per call of fn."""
    fn()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def frozen(a: np.ndarray) -> np.ndarray:
    """A read-only copy, made once outside the timed calls."""
    b = a.copy()
    b.flags.writeable = False
    return b


def fresh_ops_step(X, Y, params, borrow: bool, copy_out: bool):
    """One step on a fresh Ops, copying what it is given or borrowing it (``Ops(borrow=True)``:
    read-only views of the caller's arrays), with the results copied out or not."""
    loss = sg_loss(X, Y)

    def step():
        op = sg.Ops(borrow=borrow)
        ps = [op.var(p) for p in params]
        L = loss(*ps)
        gs = op.grad(L, ps, create_graph=False)
        out = ((np.array(L.raw), tuple(np.array(g.raw) for g in gs)) if copy_out
               else (L.raw, tuple(g.raw for g in gs)))
        op.release()
        return out
    return step


def table(title: str, runs: dict, repeat: int, unit_label: str, unit: str) -> dict:
    """Round-robin medians (and minima) with the minor page faults of each call, counted in
    the same interleaved calls: a run pays for the buffers the previous one gave back."""
    times: dict[str, list[float]] = {k: [] for k in runs}
    flts: dict[str, list[int]] = {k: [] for k in runs}
    for fn in runs.values():
        fn()
    for _ in range(repeat):
        for k, fn in runs.items():
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
            flts[k].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    med = {k: statistics.median(v) for k, v in times.items()}
    low = {k: min(v) for k, v in times.items()}
    print(f"\n{title}; {repeat} round-robin rounds")
    print(f"{'run':38s} {'median ms':>10s} {'x ' + unit_label:>10s} {'min x':>8s} "
          f"{'faults/call':>12s} {'alone':>6s}")
    for k in runs:
        print(f"{k:38s} {med[k] * 1e3:10.3f} {med[k] / med[unit]:10.2f} "
              f"{low[k] / low[unit]:8.2f} {statistics.median(flts[k]):12.0f} "
              f"{faults(runs[k]):6.0f}")
    return med


def profile(label: str, fn, calls: int = 200) -> None:
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        fn()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(8)
    lines = [ln for ln in s.getvalue().splitlines() if ln.strip()]
    print(f"\ncProfile, {label}, {calls} calls (own time first):")
    print("\n".join(lines[2:]))


def main() -> None:
    p = peers.parser(__doc__)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    repeat = peers.repeats(args, 25, 81)
    X, Y, params = data(np.random.default_rng(0))
    vg = sg.value_and_grad(sg_loss(X, Y), argnums=(0, 1, 2, 3))
    runs = {
        "numpy (by hand)": lambda: numpy_step(X, Y, *params),
        "sg.value_and_grad": lambda: vg(*params),
        "fresh Ops, as the transform": fresh_ops_step(X, Y, params, False, True),
        "fresh Ops(borrow=True)": fresh_ops_step(X, Y, params, True, True),
        "Ops(borrow=True), results not copied": fresh_ops_step(X, Y, params, True, False),
        "persistent Ops": persistent_step(X, Y, params),
    }
    peers.check_agree("MLP step", {k: [fn()[0], *fn()[1]] for k, fn in runs.items()},
                      rtol=1e-12, atol=1e-14)
    table("MLP step 64x784-256-10, four parameters, one-hot loss", runs, repeat, "numpy",
          "numpy (by hand)")

    rng = np.random.default_rng(0)
    n = 2000
    A = rng.normal(size=(n, n)) / np.sqrt(n)
    A_ro = frozen(A)
    x, v = rng.normal(size=n), rng.normal(size=n)

    def hvp_borrowing():
        op = sg.Ops(borrow=True)
        xv = op.var(x)
        g = op.grad((A @ xv).tanh().sum(), xv, create_graph=True)
        out = op.jvp(g, xv, v, create_graph=False).raw
        op.release()
        return out

    def hvp_reverse_over_forward():
        op = sg.Ops(borrow=True)
        xv, vv = op.var(x), op.var(v, requires_grad=False)
        t = op.jvp((A @ xv).tanh().sum(), xv, vv, create_graph=True)
        out = op.grad(t, xv, create_graph=False).raw
        op.release()
        return out

    hruns = {
        "numpy matvec A @ x": lambda: A @ x,
        "sg.hvp, writable A": lambda: sg.hvp(lambda x: (A @ x).tanh().sum(), x, v),
        "sg.hvp, read-only A": lambda: sg.hvp(lambda x: (A_ro @ x).tanh().sum(), x, v),
        "Ops(borrow=True), writable A": hvp_borrowing,
        "rev-over-fwd, Ops(borrow=True)": hvp_reverse_over_forward,
    }
    peers.check_agree("hvp", {k: fn() for k, fn in list(hruns.items())[1:]}, rtol=1e-12)
    table(f"hvp of sum(tanh(A x)), A {n}x{n}", hruns, repeat, "matvec", "numpy matvec A @ x")
    if args.profile:
        profile("sg.value_and_grad", runs["sg.value_and_grad"])
        profile("persistent Ops", runs["persistent Ops"])
        profile("sg.hvp, writable A", hruns["sg.hvp, writable A"], 50)
        profile("sg.hvp, read-only A", hruns["sg.hvp, read-only A"], 50)


if __name__ == "__main__":
    main()
