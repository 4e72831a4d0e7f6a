"""Per-sample gradients of torch.func's SimpleCNN tutorial model: ``sg.vmap(sg.grad(loss))``
against ``torch.func.vmap(torch.func.grad(loss))`` in the same run (n/a without torch).

The model (float32 in the tutorial, float64 here on both sides): conv 1 -> 32 (3x3), relu,
conv 32 -> 64 (3x3), relu, max_pool2d 2, flatten, linear 9216 -> 128, relu, linear 128 -> 10,
log_softmax, nll loss of one example; a batch of 64 MNIST-sized images (1 x 28 x 28), the
gradient of every parameter per example. Both runs start from the same parameters and
agree before they are timed. Target: simplegrad <= 3x torch.func.
Run: python benchmarks/conv.py [--batch 64] [--quick]
"""

from __future__ import annotations

import numpy as np
import peers

import simplegrad as sg

SHAPES = {"conv1.weight": (32, 1, 3, 3), "conv1.bias": (32,), "conv2.weight": (64, 32, 3, 3),
          "conv2.bias": (64,), "fc1.weight": (128, 9216), "fc1.bias": (128,),
          "fc2.weight": (10, 128), "fc2.bias": (10,)}


def sg_loss(p: dict, x, t):
    """The SimpleCNN loss of one example x (1, 28, 28) with label t, in simplegrad."""
    h = sg.conv(x[None], p["conv1.weight"]) + p["conv1.bias"].reshape(32, 1, 1)
    h = sg.conv(h.relu(), p["conv2.weight"]) + p["conv2.bias"].reshape(64, 1, 1)
    h = sg.nn.max_pool2d(h.relu(), 2).reshape(1, 9216)
    h = (h @ p["fc1.weight"].T + p["fc1.bias"]).relu()
    logp = (h @ p["fc2.weight"].T + p["fc2.bias"]).log_softmax(axis=1)
    return -(logp[0] * t).sum()         # t: the one-hot label


def main() -> None:
    p = peers.parser(__doc__)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args()
    repeat = peers.repeats(args, 5, 11)
    rng = np.random.default_rng(0)
    params = {k: rng.uniform(-1, 1, s) / np.sqrt(np.prod(s[1:]) if len(s) > 1 else s[0])
              for k, s in SHAPES.items()}
    data = rng.normal(size=(args.batch, 1, 28, 28))
    labels = rng.integers(0, 10, args.batch)
    onehot = np.eye(10)[labels]
    per_sample = sg.vmap(sg.grad(sg_loss), in_axes=(None, 0, 0))

    def simplegrad():
        g = per_sample(params, data, onehot)
        return [g[k] for k in SHAPES]
    runs = {"simplegrad": simplegrad}
    torch = peers.torch_or_none()
    if torch is not None:
        import torch.nn.functional as F  # noqa: N812 (the tutorial's name)

        tp = {k: torch.from_numpy(v) for k, v in params.items()}
        tdata, tlabels = torch.from_numpy(data), torch.from_numpy(labels)

        def tloss(p, x, t):
            h = F.relu(F.conv2d(x[None], p["conv1.weight"], p["conv1.bias"]))
            h = F.relu(F.conv2d(h, p["conv2.weight"], p["conv2.bias"]))
            h = torch.flatten(F.max_pool2d(h, 2), 1)
            h = F.relu(F.linear(h, p["fc1.weight"], p["fc1.bias"]))
            return F.nll_loss(F.log_softmax(F.linear(h, p["fc2.weight"], p["fc2.bias"]), dim=1),
                              t[None])
        tper = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0, 0))

        def torch_func():
            g = tper(tp, tdata, tlabels)
            return [g[k] for k in SHAPES]
        runs["torch.func"] = torch_func
    peers.check_agree(f"per-sample gradients, batch {args.batch}",
                      {k: fn() for k, fn in runs.items()}, rtol=1e-8, atol=1e-10)
    med = peers.measure(runs, repeat)
    unit = med.get("torch.func", med["simplegrad"])
    peers.show(f"SimpleCNN per-sample gradients, batch {args.batch}", med,
               "torch.func" if torch is not None else "simplegrad", unit)
    ratio = med["simplegrad"] / med["torch.func"] if torch is not None else None
    print("simplegrad / torch.func: " + ("n/a" if ratio is None else f"{ratio:.2f}") +
          " (target <= 3)")
    if ratio is not None:
        peers.emit(args, [{"workload": f"SimpleCNN per-sample gradients (vmap of grad), batch "
                                       f"{args.batch}", "unit": "torch.func",
                           "target": "simplegrad <= 3", "cols": {"simplegrad": ratio,
                                                                 "torch.func": 1.0}}])


if __name__ == "__main__":
    main()
