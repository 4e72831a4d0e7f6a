"""Reverse-mode Jacobian R^1000 -> R^1000: ``sg.jacobian(mode="rev")`` against numpy by hand and
``torch.func.jacrev``, in the same run.

f(x) = tanh(W x) * 2 + W sin(x); by hand J = diag(2 (1 - tanh(W x)^2)) W + W diag(cos x).
simplegrad pulls the identity back through one reverse sweep of stacked cotangents (every row
at once), kept as its diagonal where the rules are linear in it (engine/batched.py).
Targets: <= 10x numpy by hand, <= 0.35x ``torch.func.jacrev`` (n/a without torch).
Run: python benchmarks/jacobian_rev.py [--quick]
"""

from __future__ import annotations

import numpy as np
import peers

import simplegrad as sg


def main() -> None:
    p = peers.parser(__doc__)
    args = p.parse_args()
    repeat = peers.repeats(args, 5, 11)
    n = 1000
    rng = np.random.default_rng(0)
    W = rng.normal(size=(n, n)) / np.sqrt(n)
    x = rng.normal(size=n)

    def hand() -> np.ndarray:
        t = np.tanh(W @ x)
        return (2 * (1 - t * t))[:, None] * W + W * np.cos(x)[None, :]

    jac = sg.jacobian(lambda x: (W @ x).tanh() * 2.0 + W @ x.sin(), mode="rev")
    runs = {"numpy (by hand)": hand, "simplegrad": lambda: jac(x)}
    torch = peers.torch_or_none()
    if torch is not None:
        Wt, xt = torch.from_numpy(W), torch.from_numpy(x)
        jacrev = torch.func.jacrev(lambda x: torch.tanh(Wt @ x) * 2.0 + Wt @ torch.sin(x))
        runs["torch.func"] = lambda: jacrev(xt)
    peers.check_agree(f"Jacobian {n} -> {n}", {k: fn() for k, fn in runs.items()}, rtol=1e-10,
                      atol=1e-12)
    med = peers.measure(runs, repeat)
    hand_s = med["numpy (by hand)"]
    peers.show(f"jacobian(mode='rev'), R^{n} -> R^{n}", med, "hand", hand_s)
    vs_torch = med["simplegrad"] / med["torch.func"] if torch is not None else None
    print(f"simplegrad / numpy by hand: {med['simplegrad'] / hand_s:.2f} (target <= 10)")
    print("simplegrad / torch.func.jacrev: " +
          ("n/a" if vs_torch is None else f"{vs_torch:.2f}") + " (target <= 0.35)")
    cols = {k: t / hand_s for k, t in med.items()}
    peers.emit(args, [{"workload": f"jacobian(mode='rev'), R^{n} -> R^{n}",
                       "unit": "numpy (by hand)", "target": "simplegrad <= 10, <= 0.35 torch.func",
                       "cols": cols}])


if __name__ == "__main__":
    main()
