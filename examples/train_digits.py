"""An MLP on scikit-learn's 8x8 digits, every gradient checked while it trains (seed 004).

The network (64 -> 64 -> 10, ReLU) is a simplegrad.nn.MLP trained with SGD and momentum, in
the PyTorch habit (``loss.backward(); opt.step(); opt.zero_grad()`` on sg.Parameters, the
default) or with ``--habit jax`` in the functional one (``sg.value_and_grad(loss)(params, x,
y)`` and ``opt.update``); both take the same steps. At every step the
same network in PyTorch (float64), when it is installed, computes the gradients of the same
batch, and they must agree to 1e-10; without PyTorch, every 50 steps a few sampled entries
of each gradient are compared with central finite differences (to 1e-6). The largest error
seen is printed, and the test accuracy must reach 95%.

scikit-learn's digits ship with scikit-learn (no download): ``pip install 'simplegrad[examples]'``.
With --quick and no scikit-learn, a small synthetic 8x8 dataset stands in, and it says so.

Run: python examples/train_digits.py [--quick] [--habit torch|jax]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

import simplegrad as sg
from simplegrad import nn, optim


def load(rng: np.random.Generator, quick: bool) -> tuple[np.ndarray, np.ndarray, str] | None:
    """Digits scaled to [0, 1] and their labels (synthetic ones under --quick without sklearn)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        if not quick:
            print("train_digits needs scikit-learn: pip install 'simplegrad[examples]'",
                  file=sys.stderr)
            return None
        centres = rng.uniform(0, 1, (10, 64))
        y = rng.integers(0, 10, 600)
        x = np.clip(centres[y] + rng.normal(0, 0.25, (600, 64)), 0, 1)
        return x, y, "synthetic 8x8 data (scikit-learn is not installed)"
    x, y = load_digits(return_X_y=True)
    return x / 16.0, y, "scikit-learn's digits"


class TorchTwin:
    """The same MLP in PyTorch (float64), loaded with our parameters at every step."""

    def __init__(self, torch: object, model: nn.Module):
        self.torch = torch
        layers = [torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)]
        self.net = torch.nn.Sequential(*layers).double()

    def grads(self, params: dict, x: np.ndarray, y: np.ndarray) -> dict:
        torch = self.torch
        self.net.load_state_dict({k: torch.tensor(v) for k, v in params.items()})
        self.net.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.net(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        return {k: p.grad.numpy() for k, p in self.net.named_parameters()}


def finite_difference_error(loss, params: dict, grads: dict, x: np.ndarray, y: np.ndarray,
                            rng: np.random.Generator, per_param: int = 3) -> float:
    """Largest |analytic - central difference| over a few sampled entries of each gradient."""
    eps, worst = 1e-6, 0.0
    for key, p in params.items():
        for flat in rng.choice(p.size, size=min(per_param, p.size), replace=False):
            idx = np.unravel_index(flat, p.shape)
            hi, lo = p.copy(), p.copy()
            hi[idx] += eps
            lo[idx] -= eps
            fd = (loss({**params, key: hi}, x, y) - loss({**params, key: lo}, x, y)) / (2 * eps)
            worst = max(worst, abs(float(grads[key][idx]) - float(fd)))
    return worst


def main(argv: list[str] | None = None) -> int:
    """Train, checking gradients as it goes; exit 1 if a check fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few steps, for the tests")
    parser.add_argument("--habit", choices=("torch", "jax"), default="torch",
                        help="loss.backward() and opt.step() (torch) or value_and_grad and "
                             "opt.update (jax)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    data = load(rng, args.quick)
    if data is None:
        return 1
    x, y, source = data
    order = rng.permutation(len(y))
    n_test = len(y) // 5
    x_test, y_test = x[order[:n_test]], y[order[:n_test]]
    x_train, y_train = x[order[n_test:]], y[order[n_test:]]
    print(f"data: {source}: {len(y_train)} training and {len(y_test)} test images")

    try:
        import torch
    except ImportError:
        torch = None
    model = nn.MLP([64, 64, 10], activation="relu", rng=rng)
    twin = TorchTwin(torch, model) if torch is not None else None
    print("gradient check: " + ("PyTorch (float64) at every step, tolerance 1e-10" if twin else
                                "central finite differences every 50 steps, tolerance 1e-6"))

    def loss(p: dict, xb: np.ndarray, yb: np.ndarray):
        """The batch's mean cross-entropy with parameters ``p``."""
        return nn.cross_entropy(model.apply(p, xb), yb)

    def accuracy(xs: np.ndarray, ys: np.ndarray) -> float:
        """The fraction of ``xs`` classified as ``ys`` with the current parameters."""
        current = model.params() if args.habit == "torch" else box["params"]
        return float(np.mean(np.argmax(model.apply(current, xs), axis=1) == ys))

    if args.habit == "torch":
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def train_step(xb: np.ndarray, yb: np.ndarray) -> tuple[float, dict, dict]:
            params = model.params()             # the values this step differentiates at
            value = nn.cross_entropy(model(xb), yb)
            value.backward()
            grads = {k: p.grad.value for k, p in model.named_parameters()}
            opt.step()
            opt.zero_grad()
            return float(value), grads, params
    else:
        opt = optim.SGD(lr=0.1, momentum=0.9)
        box = {"params": model.params()}
        box["state"] = opt.init(box["params"])

        def train_step(xb: np.ndarray, yb: np.ndarray) -> tuple[float, dict, dict]:
            params = box["params"]
            value, grads = sg.value_and_grad(loss)(params, xb, yb)
            box["params"], box["state"] = opt.update(grads, box["state"], params)
            return float(value), grads, params

    steps = 60 if args.quick else 400
    batch = 64
    worst = 0.0
    columns = [TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/"
               "{task.total}"), TextColumn("loss {task.fields[loss]:.3f}"),
               TextColumn("acc {task.fields[acc]:.3f}"), TimeElapsedColumn()]
    with Progress(*columns) as progress:
        task = progress.add_task(f"training ({args.habit} habit)", total=steps,
                                 loss=float("nan"), acc=0.0)
        for step in range(steps):
            idx = rng.choice(len(y_train), size=batch, replace=False)
            xb, yb = x_train[idx], y_train[idx]
            value, grads, params = train_step(xb, yb)
            if twin is not None:
                ref = twin.grads(params, xb, yb)
                worst = max(worst, max(float(np.max(np.abs(grads[k] - ref[k]))) for k in ref))
            elif step % 50 == 0:
                worst = max(worst, finite_difference_error(loss, params, grads, xb, yb, rng))
            acc = accuracy(xb, yb) if step % 10 == 0 else progress.tasks[0].fields["acc"]
            progress.update(task, advance=1, loss=value, acc=acc)

    test_acc = accuracy(x_test, y_test)
    tolerance = 1e-10 if twin else 1e-6
    target = 0.80 if args.quick else 0.95
    print(f"largest gradient error seen: {worst:.2e} (tolerance {tolerance:g})")
    print(f"test accuracy: {test_acc:.3f} (required: {target:.2f})")
    failed = False
    if not worst <= tolerance:
        print("FAILED: a gradient disagrees with the reference", file=sys.stderr)
        failed = True
    if test_acc < target:
        print("FAILED: test accuracy below the target", file=sys.stderr)
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
