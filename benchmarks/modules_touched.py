"""How many simplegrad modules one ``sg.grad(f)(x)`` passes through, on a small tanh MLP.

A ``sys.setprofile`` hook counts the Python calls made in each ``simplegrad`` module during one
gradient (after a warm-up call, so imports are not counted). Fewer modules on the common path
means fewer places a reader must open to follow what a gradient does; HIPS autograd's grad and
grad-of-grad pass through 9. Issue 27's target is at most 12.
Run: python benchmarks/modules_touched.py [--list]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

import numpy as np

import simplegrad as sg

TARGET = 12


def touched() -> Counter:
    """Calls per simplegrad module during one ``sg.grad`` of a 4-8-1 tanh MLP's loss."""
    rng = np.random.default_rng(0)
    W1, W2, X = rng.normal(size=(4, 8)), rng.normal(size=(8, 1)), rng.normal(size=(16, 4))

    def loss(W1):
        return ((np.tanh(X @ W1) @ W2) ** 2).mean()

    closed = _closed_form(W1, W2, X)
    np.testing.assert_allclose(sg.grad(loss)(W1), closed, rtol=1e-12)   # (and the warm-up)
    calls: Counter = Counter()

    def hook(frame, event, arg):
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if name.startswith("simplegrad"):
                calls[name] += 1

    sys.setprofile(hook)
    try:
        sg.grad(loss)(W1)
    finally:
        sys.setprofile(None)
    return calls


def _closed_form(W1: np.ndarray, W2: np.ndarray, X: np.ndarray) -> np.ndarray:
    """d/dW1 of mean((tanh(X W1) W2)^2), by hand."""
    h = np.tanh(X @ W1)
    y = h @ W2
    dy = 2 * y / y.size
    return X.T @ ((dy @ W2.T) * (1 - h * h))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print each module and its calls")
    args = parser.parse_args()
    calls = touched()
    if args.list:
        for name, n in calls.most_common():
            print(f"{n:6d}  {name}")
    print(f"sg.grad(f)(x) on a small MLP touches {len(calls)} simplegrad modules "
          f"(target <= {TARGET})")


if __name__ == "__main__":
    main()
