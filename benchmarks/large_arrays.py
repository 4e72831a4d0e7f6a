"""Large arrays, eager: the value and gradient of ``sum(tanh(x) * x)`` at n = 10^6 and 10^7.

Against numpy written by hand (t = tanh(x), the value sum(t x), the gradient t + x (1 - t^2)
computed in place: three arrays at the peak, x, t and the gradient) and PyTorch eager
(``backward()``), in the same run. Time is the median of interleaved rounds; memory is the
peak of numpy's allocations during the call (tracemalloc), in arrays of n float64 values, x
itself counted. Targets (issue 32): <= 1.1x / <= 1.2x the hand version, peak <= 3 arrays.
Run: python benchmarks/large_arrays.py [--quick]
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import peers

import simplegrad as sg


def by_hand(x: np.ndarray) -> tuple[float, np.ndarray]:
    """The value and gradient in numpy, in place where it can be."""
    t = np.tanh(x)
    value = float(np.dot(t, x))
    g = np.multiply(t, t)
    np.subtract(1.0, g, out=g)
    np.multiply(g, x, out=g)
    np.add(g, t, out=g)
    return value, g


def loss(x):
    """sum(tanh(x) * x) on a Variable."""
    return (x.tanh() * x).sum()


value_and_grad = sg.value_and_grad(loss)


def peak_arrays(fn, x: np.ndarray) -> float:
    """The peak of numpy's allocations while ``fn(x)`` runs, x included, in arrays of x's
    size."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return 1 + peak / x.nbytes


def main() -> None:
    args = peers.parser(__doc__).parse_args()
    torch = peers.torch_or_none()
    rows = []
    for n, target in ((10**6, 1.1), (10**7, 1.2)):
        x = np.random.default_rng(0).standard_normal(n)
        runs = {"numpy by hand": lambda x=x: by_hand(x),
                "simplegrad value_and_grad": lambda x=x: value_and_grad(x)}
        results = {"numpy by hand": list(by_hand(x)),
                   "simplegrad": [np.asarray(v) for v in value_and_grad(x)]}
        if torch is not None:
            def torch_run(x=x):
                xt = torch.tensor(x, requires_grad=True)
                y = (torch.tanh(xt) * xt).sum()
                y.backward()
                return y.detach(), xt.grad
            runs["torch eager"] = torch_run
            results["torch eager"] = list(torch_run())
        peers.check_agree(f"n = {n}", results, rtol=1e-10)
        rounds = peers.repeats(args, 5 if n > 10**6 else 9, 15)
        medians = peers.measure(runs, rounds)
        hand = medians["numpy by hand"]
        peers.show(f"sum(tanh(x) * x), value and gradient, n = {n}", medians, "hand", hand)
        peak = peak_arrays(value_and_grad, x)
        peak_hand = peak_arrays(by_hand, x)
        ratio = medians["simplegrad value_and_grad"] / hand
        print(f"n = {n}: simplegrad / hand {ratio:.2f} (target <= {target}), torch / hand "
              + (f"{medians['torch eager'] / hand:.2f}" if torch is not None else "n/a")
              + f"; peak arrays simplegrad {peak:.1f}, hand {peak_hand:.1f} (target <= 3)")
        cols = {"simplegrad": ratio, "numpy (by hand)": 1.0}
        if torch is not None:
            cols["torch eager"] = medians["torch eager"] / hand
        rows.append({"workload": f"sum(tanh(x) * x) value and gradient, eager, n = 10^"
                                 f"{len(str(n)) - 1}", "unit": "numpy by hand",
                     "target": f"simplegrad <= {target}, peak <= 3 arrays", "cols": cols})
    peers.emit(args, rows)


if __name__ == "__main__":
    main()
