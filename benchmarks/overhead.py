"""Per-op overhead: a chain of elementwise ops on a length-4 vector, then its gradient.

Prints microseconds per recorded op (forward) and per op of forward+backward,
each as a ratio to the same chain in plain numpy measured in the same run. Each run's tape is
dropped without ``release()``, so the cost of Python's cycle collector freeing it is included.
The compiled rows run ``sg.compile`` of the recorded chain (forward) and of its recorded
gradient program (forward and backward), compiled once outside the timing: the fast path for
evaluating the same gradient again and again. If PyTorch is installed, its eager mode is
measured on the same chain too, and the compiled gradient program is quoted per op as a ratio to
PyTorch eager's forward+backward with create_graph=False (its cheaper mode). Values are checked
first: the compiled programs against the recorded chain and plain numpy, and PyTorch's gradient
against the compiled one.
Run: python benchmarks/overhead.py [--ops 1000] [--repeat 15]
"""

from __future__ import annotations

import argparse

import numpy as np
from timing import interleaved_medians

import simplegrad as sg

STEPS = (  # the chain cycles through these four ops
    lambda x, lib: x * 0.999,
    lambda x, lib: x + 0.001,
    lambda x, lib: lib.tanh(x),
    lambda x, lib: lib.sin(x),
)


class _Methods:
    """tanh/sin as methods, so one chain serves Variables and tensors alike."""

    @staticmethod
    def tanh(x):
        return x.tanh()

    @staticmethod
    def sin(x):
        return x.sin()


def chain(x, n: int, lib=np):
    """n elementwise ops on x; lib supplies tanh and sin (numpy, or methods of x)."""
    for i in range(n):
        x = STEPS[i % 4](x, lib)
    return x


def chain_sg(x, n: int):
    """The chain on a simplegrad Variable."""
    return chain(x, n, _Methods)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    n, repeat = args.ops, args.repeat
    x0 = np.array([0.1, 0.2, 0.3, 0.4])

    def numpy_run():
        chain(x0, n)

    def forward():
        x = sg.Ops().var(x0)        # the tape is dropped, not released: the collector frees it
        chain_sg(x, n).sum()

    def fwd_bwd(create_graph: bool):
        def run():
            op = sg.Ops()
            x = op.var(x0)
            op.grad(chain_sg(x, n).sum(), [x], create_graph=create_graph)
        return run

    op = sg.Ops()
    x = op.var(x0)
    y = chain_sg(x, n).sum()
    compiled_forward = sg.compile(op.program(x, y))
    compiled_gradient = sg.compile(op.program(x, [y, op.grad(y, x)]))
    want_y, want_g = float(y.value), np.array(op.grad(y, x).value)
    op.release()
    got_y, got_g = compiled_gradient(x0)
    if not (np.allclose(compiled_forward(x0), want_y, rtol=1e-12, atol=0)
            and np.allclose(got_y, want_y, rtol=1e-12, atol=0)
            and np.allclose(got_g, want_g, rtol=1e-12, atol=0)
            and np.allclose(np.sum(chain(x0, n)), want_y, rtol=1e-12, atol=0)):
        raise SystemExit("overhead: compiled chain disagrees with the recorded chain")

    runs = {
        "numpy forward": numpy_run,
        "simplegrad forward (recorded)": forward,
        "simplegrad fwd+bwd create_graph=True": fwd_bwd(True),
        "simplegrad fwd+bwd create_graph=False": fwd_bwd(False),
        "sg.compile forward": lambda: compiled_forward(x0),
        "sg.compile fwd+bwd (gradient program)": lambda: compiled_gradient(x0),
    }

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(1)

        def torch_run(create_graph: bool):
            def run():
                x = torch.tensor(x0, requires_grad=True)
                y = chain(x, n, _Methods)
                torch.autograd.grad(y.sum(), [x], create_graph=create_graph)
            return run
        xt = torch.tensor(x0, requires_grad=True)
        (gt,) = torch.autograd.grad(chain(xt, n, _Methods).sum(), [xt])
        if not np.allclose(gt.numpy(), got_g, rtol=1e-10, atol=1e-14):
            raise SystemExit("overhead: PyTorch's gradient disagrees with the compiled one")
        runs["torch eager fwd+bwd create_graph=True"] = torch_run(True)
        runs["torch eager fwd+bwd create_graph=False"] = torch_run(False)

    rows = list(interleaved_medians(runs, repeat).items())
    base = rows[0][1]
    print(f"chain of {n} elementwise ops on a length-4 vector, median of {repeat} runs")
    print(f"{'measurement':42s} {'us/op':>8s} {'x numpy':>8s}")
    for label, t in rows:
        print(f"{label:42s} {t / n * 1e6:8.2f} {t / base:8.1f}")
    if torch is not None:
        table = dict(rows)
        for mode in ("True", "False"):
            ratio = (table[f"simplegrad fwd+bwd create_graph={mode}"]
                     / table[f"torch eager fwd+bwd create_graph={mode}"])
            print(f"simplegrad / torch, create_graph={mode}: {ratio:.2f}")
        ratio = (table["sg.compile fwd+bwd (gradient program)"]
                 / table["torch eager fwd+bwd create_graph=False"])
        print(f"sg.compile gradient program / torch eager fwd+bwd, per op: {ratio:.2f}")


if __name__ == "__main__":
    main()
