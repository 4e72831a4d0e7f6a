"""The first call of ``sg.compile(prog, backend="numba")`` in a fresh process, cold and warm.

Each measurement is a new interpreter that imports numpy and simplegrad, then times
``import numba`` alone, records the program (not timed), and times ``sg.compile(prog,
backend="numba")`` plus its first call. Cold: ``SIMPLEGRAD_CACHE_DIR`` is an empty directory;
warm: the same directory again, now holding the kernels the cold run wrote. Programs: the
value-and-gradient program of fused.py's elementwise chain (10^5 values) and the digits MLP
step 64-64-10 (fused.py's). Beside each: ``jax.jit`` of the same function's first call in a
fresh process (after ``import jax``; "n/a" without JAX), and numba's own floor: the first
compile of a one-line function, which pays numba's lazy initialisation (its typing and
lowering registries, and scipy's BLAS, which numba loads on first use). Seconds are wall
clock and CPU time of the process (on a loaded machine CPU time is the steadier figure); the
minimum over rounds is kept (noise only adds). Targets: cold <= 0.6 s, warm <= 0.2 s beyond
numba's import.
Run: python benchmarks/numba_first_call.py [--quick]
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ("chain", "digits")


# ---------------------------------------------------------------- in the fresh process


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t: tuple[float, float]) -> list[float]:
    now = _clock()
    return [now[0] - t[0], now[1] - t[1]]


def chain_program():
    """fused.py's chain: its value-and-gradient program and an input."""
    import numpy as np
    from fused import chain

    import simplegrad as sg
    x0 = np.random.default_rng(0).uniform(-1, 1, 100_000)
    op = sg.Ops()
    x = op.var(x0, name="x")
    L = chain(x, lambda a: a.tanh()).sum()
    prog = op.program([x], [L, op.grad(L, x)])
    op.release()
    return prog, [x0]


def digits_program():
    """fused.py's digits step: the program of the loss and its gradients, and its inputs."""
    import numpy as np

    import simplegrad as sg
    from simplegrad import nn
    rng = np.random.default_rng(0)
    model = nn.MLP([64, 64, 10], activation="tanh", rng=rng)
    X = rng.uniform(0, 1, (64, 64))
    y = rng.integers(0, 10, 64)
    op = sg.Ops()
    params = {k: op.var(v, name="p" + k.replace(".", "_")) for k, v in model.params().items()}
    Xv = op.var(X, name="X", requires_grad=False)
    loss = nn.cross_entropy(model.apply(params, Xv), y)
    prog = op.program([*params.values(), Xv], [loss, *op.grad(loss, list(params.values()))])
    values = [p.value for p in params.values()] + [X]
    op.release()
    return prog, values, (model, X, y)


def child_numba(what: str) -> dict:
    import numpy as np  # noqa: F401  (a user's process has numpy and simplegrad loaded)

    import simplegrad as sg
    t = _clock()
    import numba
    out = {"import": _since(t)}
    if what == "floor":
        t = _clock()
        numba.njit("float64(float64)")(lambda x: x + 1.0)(1.0)
        out["first"] = _since(t)
        return out
    prog, args = chain_program() if what == "chain" else digits_program()[:2]
    t = _clock()
    fast = sg.compile(prog, backend="numba")
    fast(*args)
    out["first"] = _since(t)
    out["kernels"] = len(fast.kernels)
    out["entries"] = len(prog.entries)
    return out


def child_jax(what: str) -> dict:
    import numpy as np
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    if what == "chain":
        from fused import chain
        f = jax.jit(jax.value_and_grad(lambda h: chain(h, jnp.tanh).sum()))
        args = (jnp.asarray(np.random.default_rng(0).uniform(-1, 1, 100_000)),)
    else:
        from habits import jax_arrays
        _, _, (model, X, y) = digits_program()

        def jloss(p, X, y):
            h = jnp.tanh(X @ p[0].T + p[1])
            z = h @ p[2].T + p[3]
            return -jnp.mean(jax.nn.log_softmax(z)[jnp.arange(len(y)), y])
        f = jax.jit(jax.value_and_grad(jloss))
        args = jax_arrays(jax, model.params(), X, y)
    t = _clock()
    jax.block_until_ready(f(*args))
    return {"first": _since(t)}


# ---------------------------------------------------------------- the parent


def fresh(kind: str, what: str, cache: str) -> dict:
    """One measurement in a new interpreter, with this cache directory."""
    env = {**os.environ, "SIMPLEGRAD_CACHE_DIR": cache, "PYTHONPATH": os.pathsep.join(
        [os.path.dirname(HERE), HERE, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, __file__, "--child", kind, what], env=env,
                          capture_output=True, text=True, cwd=HERE)
    if proc.returncode != 0:
        sys.exit(f"numba_first_call: the {kind} {what} run failed:\n{proc.stdout}{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _best(runs: list[dict], key: str) -> list[float]:
    return [min(r[key][0] for r in runs), min(r[key][1] for r in runs)]


def main() -> None:
    import peers
    args = peers.parser(__doc__).parse_args()
    rounds = peers.repeats(args, 1, 3)
    have_jax = importlib.util.find_spec("jax") is not None
    got: dict[str, list] = {}
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as empty:
            got.setdefault("floor", []).append(fresh("numba", "floor", empty))
        for what in WORKLOADS:
            with tempfile.TemporaryDirectory() as cache:
                got.setdefault(f"{what} cold", []).append(fresh("numba", what, cache))
                got.setdefault(f"{what} warm", []).append(fresh("numba", what, cache))
            if have_jax:
                got.setdefault(f"{what} jax", []).append(fresh("jax", what, cache))
    floor = _best(got["floor"], "first")
    imp = _best(got["floor"] + got["chain cold"], "import")
    print(f"import numba: {imp[0]:.3f} s ({imp[1]:.3f} s CPU); numba's first compile of a "
          f"one-line function (its lazy initialisation): {floor[0]:.3f} s ({floor[1]:.3f} s CPU)")
    print(f"{'program':8s} {'cache':5s} {'s beyond import':>16s} {'CPU s':>7s} "
          f"{'jax.jit first':>14s} {'x jax':>6s} {'target':>7s}")
    rows = []
    for what in WORKLOADS:
        jax_s = _best(got[f"{what} jax"], "first")[0] if have_jax else None
        sample = got[f"{what} cold"][0]
        print(f"{what}: {sample['entries']} entries, {sample['kernels']} kernel(s)")
        for temp, target in (("cold", 0.6), ("warm", 0.2)):
            wall, cpu = _best(got[f"{what} {temp}"], "first")
            ratio = f"{wall / jax_s:6.2f}" if jax_s else "   n/a"
            jtext = f"{jax_s:14.3f}" if jax_s else f"{'n/a':>14s}"
            print(f"{what:8s} {temp:5s} {wall:16.3f} {cpu:7.3f} {jtext} {ratio} {target:7.1f}")
            cols = {"simplegrad": wall / jax_s, "JAX jit": 1.0} if jax_s else {}
            rows.append({"workload": f"sg.compile(backend='numba') + first call, fresh process, "
                         f"{temp} cache: {what} ({wall:.2f} s, {cpu:.2f} s CPU)",
                         "unit": "jax.jit first call", "target": f"<= {target} s", "cols": cols})
    peers.emit(args, rows)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        kind, what = sys.argv[2], sys.argv[3]
        print(json.dumps(child_numba(what) if kind == "numba" else child_jax(what)))
    else:
        main()
