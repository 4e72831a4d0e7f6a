"""Scalar code: a chain of 0-d ops and its gradient in 200 parameters, per op.

The chain (micrograd's habit: every value a scalar) cycles through ``x * p_i``, ``x + p_j``,
``tanh(x)`` and ``x * 0.9`` over 200 float64 parameters; the gradient is taken in all of them.
Measured in the same run, each as microseconds per op of record + gradient:
- simplegrad: ``op.grad(x, params, create_graph=False)`` on 0-d Variables of a fresh Ops,
  values only, as PyTorch's ``backward()`` computes them (the headline row); beside it the
  default ``op.grad(x, params)``, which records the gradient as a program too (it can be
  printed, compiled, differentiated again: what PyTorch does with ``create_graph=True``);
- PyTorch eager (when installed): 0-d float64 tensors, ``backward()``;
- the limit: Python floats with the same chain's reverse sweep written by hand (the tape a
  list of (op, operand) pairs, swept newest first).
Values are checked first (every run's gradient against the hand sweep, to 1e-12). Targets
(issue 32): <= 1.2 us/op on a quiet machine and <= 0.2x PyTorch 0-d.
Run: python benchmarks/scalar_chain.py [--quick] [--ops 100000]
"""

from __future__ import annotations

import math

import numpy as np
import peers

import simplegrad as sg

PARAMS = 200


def parameters() -> list[float]:
    return list(np.random.default_rng(0).uniform(-0.5, 0.5, PARAMS))


def chain(x, ps, n: int, tanh):
    """n ops on x, cycling through a product, a sum, tanh and a scaling."""
    k = 0
    for i in range(n):
        step = i % 4
        if step == 0:
            x = x * ps[k % PARAMS]
            k += 1
        elif step == 1:
            x = x + ps[k % PARAMS]
            k += 1
        elif step == 2:
            x = tanh(x)
        else:
            x = x * 0.9
    return x


def by_hand(ps: list[float], n: int) -> list[float]:
    """The chain on Python floats and its reverse sweep written out: the gradient in ps."""
    x, tape, k = 0.5, [], 0
    for i in range(n):
        step = i % 4
        if step == 0:
            j = k % PARAMS
            tape.append((0, j, x))      # d/dx = p_j, d/dp_j = x
            x = x * ps[j]
            k += 1
        elif step == 1:
            tape.append((1, k % PARAMS, 0.0))
            x = x + ps[k % PARAMS]
            k += 1
        elif step == 2:
            x = math.tanh(x)
            tape.append((2, 0, x))      # d/dx = 1 - tanh^2
        else:
            tape.append((3, 0, 0.0))
            x = x * 0.9
    grads = [0.0] * PARAMS
    g = 1.0
    for kind, j, v in reversed(tape):
        if kind == 0:
            grads[j] += g * v
            g = g * ps[j]
        elif kind == 1:
            grads[j] += g
        elif kind == 2:
            g = g * (1 - v * v)
        else:
            g = g * 0.9
    return grads


def simplegrad_grad(ps: list[float], n: int, create_graph: bool = False) -> list:
    op = sg.Ops()
    vs = [op.var(np.float64(p)) for p in ps]
    x = chain(op.var(np.float64(0.5)), vs, n, lambda v: v.tanh())
    return op.grad(x, vs, create_graph=create_graph)


def main() -> None:
    p = peers.parser(__doc__)
    p.add_argument("--ops", type=int, default=None)
    args = p.parse_args()
    n = args.ops or (20_000 if args.quick else 100_000)
    repeat = peers.repeats(args, 5, 9)
    ps = parameters()
    runs = {"Python floats by hand": lambda: by_hand(ps, n),
            "simplegrad op.grad": lambda: simplegrad_grad(ps, n),
            "simplegrad op.grad, recorded": lambda: simplegrad_grad(ps, n, True)}
    results = {"Python floats by hand": by_hand(ps, n),
               "simplegrad op.grad": [g for g in simplegrad_grad(ps, n)],
               "simplegrad op.grad, recorded": [g.value for g in
                                                simplegrad_grad(ps, n, True)]}
    torch = peers.torch_or_none()
    if torch is not None:
        def torch_grad():
            ts = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in ps]
            x = chain(torch.tensor(0.5, dtype=torch.float64), ts, n, torch.tanh)
            x.backward()
            return [t.grad for t in ts]
        runs["torch eager 0-d"] = torch_grad
        results["torch eager 0-d"] = torch_grad()
    peers.check_agree(f"scalar chain of {n} ops", results, rtol=1e-12, atol=1e-14)
    t = peers.measure(runs, repeat)
    hand = t["Python floats by hand"]
    peers.show(f"chain of {n} 0-d ops, gradient in {PARAMS} parameters", t, "hand", hand)
    torch_t = t.get("torch eager 0-d")
    rows = []
    for key, what, target in (("simplegrad op.grad", "values only, as backward()",
                               "<= 1.2 us/op, <= 0.2x torch"),
                              ("simplegrad op.grad, recorded", "the gradient recorded too", "")):
        us = t[key] / n * 1e6
        vs_torch = t[key] / torch_t if torch_t else None
        print(f"{key}: {us:.2f} us/op" + (" (target <= 1.2)" if target else "") +
              f", {hand / n * 1e6:.3f} us/op by hand; / torch 0-d " +
              (f"{vs_torch:.2f}" if vs_torch else "n/a") + (" (target <= 0.2)" if target else ""))
        rows.append({"workload": (f"scalar chain, {n} 0-d ops, gradient in {PARAMS} parameters"
                                  if target else "  the same") + f", {what} ({us:.1f} us/op)",
                     "unit": "torch eager 0-d", "target": target,
                     "cols": {"simplegrad": vs_torch,
                              **({"numpy (by hand)": hand / torch_t} if target else {})}
                     if vs_torch else {"simplegrad": None}})
    peers.emit(args, rows)


if __name__ == "__main__":
    main()
