"""What ``sg.jit`` adds to a training step over the compiled program it replays.

The JAX-habit step of habits.py's digits workload (``sg.value_and_grad`` of the cross-entropy
of a tanh MLP, then ``opt.update`` with SGD; batch 64), for a 64-64-10 and a 784-256-10 MLP:
the jitted step, against its own compiled program (``jitted.programs(...)[0]``) called on the
same arrays the jitted call hands it, their ratio (target: at most 1.10), and ``jax.jit`` of the
same step when JAX is installed. Values are checked first: the jitted step equals its program
exactly and ``jax.jit``'s to 1e-10.
Run: python benchmarks/jit_cost.py [--quick]
"""

from __future__ import annotations

import numpy as np
import peers
from habits import jax_arrays, jax_step

import simplegrad as sg
from simplegrad import nn, optim

SIZES = ((64, 64, 10), (784, 256, 10))


def jit_over_compiled(args, jax, sizes: tuple[int, int, int], batch: int = 64) -> list[dict]:
    """The jitted step against the compiled program it replays, on the same arrays."""
    rng = np.random.default_rng(0)
    model = nn.MLP(list(sizes), activation="tanh", rng=rng)
    params = model.params()
    X = rng.uniform(0, 1, (batch, sizes[0]))
    y = rng.integers(0, sizes[-1], batch)
    lr = 0.1
    opt = optim.SGD(lr=lr)

    def step(p, s, X, y):
        value, grads = sg.value_and_grad(lambda p: nn.cross_entropy(model.apply(p, X), y))(p)
        p, s = opt.update(grads, s, p)
        return value, p, s

    jitted = sg.jit(step)
    state = jitted(params, opt.init(params), X, y)[2]   # a training loop's: step a 0-d array
    jitted(params, state, X, y)                         # recorded at this signature
    (compiled,) = jitted.programs(params, state, X, y)
    # the traced leaves, as the jitted call hands them to the program: float arrays in order
    arrays = [a for a in sg.tree_leaves([params, state, X, y]) if a.dtype.kind == "f"]
    runs = {"simplegrad sg.jit(step)": lambda: jitted(params, state, X, y),
            "its compiled program, the same arrays": lambda: compiled(*arrays)}
    jitted_leaves = sg.tree_leaves(runs["simplegrad sg.jit(step)"]())
    peers.check_agree(f"sg.jit and its program {sizes}",
                      {"sg.jit": jitted_leaves, "compiled": compiled(*arrays)}, rtol=0, atol=0)
    if jax is not None:
        jjit = jax.jit(jax_step(jax, lr))
        pj, Xj, yj = jax_arrays(jax, params, X, y)
        runs["jax jit(value_and_grad + update)"] = lambda: jax.block_until_ready(
            jjit(pj, Xj, yj))
        value, p = runs["jax jit(value_and_grad + update)"]()
        out = jitted(params, state, X, y)
        order = ("0.weight", "0.bias", "2.weight", "2.bias")
        peers.check_agree(f"sg.jit and jax.jit {sizes}",
                          {"sg.jit": [out[0], *(out[1][k] for k in order)], "jax.jit": [value, *p]},
                          rtol=1e-10, atol=1e-12)
    calls = 10 if sizes[0] * sizes[1] < 10 ** 4 else 1     # a sample of ~1 ms or more
    repeat = peers.repeats(args, 301, 901)
    med = {k: t / calls for k, t in peers.measure({k: _times(fn, calls) for k, fn in
                                                   runs.items()}, repeat).items()}
    unit = "its compiled program, the same arrays"
    name = "-".join(map(str, sizes))
    peers.show(f"sg.jit over its compiled program: MLP {name}, batch {batch}, sg.value_and_grad"
               f" + opt.update; per call, median of {repeat} round-robin samples of {calls}",
               med, unit, med[unit])
    cols = {"simplegrad": med["simplegrad sg.jit(step)"] / med[unit]}
    if jax is not None:
        cols["JAX jit"] = med["jax jit(value_and_grad + update)"] / med[unit]
    return [{"workload": f"sg.jit(step) over its own sg.compile'd program, MLP {name}, batch "
             f"{batch}", "unit": "the compiled program", "target": "simplegrad <= 1.10",
             "cols": cols}]


def _times(fn, n: int):
    def run():
        for _ in range(n):
            fn()
    return run


def main() -> None:
    args = peers.parser(__doc__).parse_args()
    jax = peers.jax_or_none()
    rows = []
    for sizes in SIZES:
        rows += jit_over_compiled(args, jax, sizes)
        print()
    peers.emit(args, rows)


if __name__ == "__main__":
    main()
