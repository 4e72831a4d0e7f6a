"""Four workloads as users write them, against PyTorch, JAX (jit and eager) and numpy by hand.

- nested: the 8th derivative of tanh at one point by nesting ``sg.grad`` eight times (each
  level records the next: create_graph at every level), against nested
  ``torch.autograd.grad(create_graph=True)``, nested ``jax.grad`` (eager and jitted) and the
  derivative polynomial P_8(tanh x) by hand; also the nesting on ``sg.jit``.
- maml: the meta-gradient of a 1-40-40-1 tanh MLP through 3 inner SGD steps on a sine task
  (``sg.grad`` of a function calling ``sg.grad``), against PyTorch unrolled with
  ``create_graph=True`` and ``jax.grad`` of the same function.
- digits: one training step of a 64-64-10 tanh MLP on a batch of 64 (cross-entropy on integer
  labels, SGD) in the JAX habit, ``sg.value_and_grad`` + ``opt.update``, against PyTorch eager
  (``loss.backward()``, ``torch.optim.SGD``), ``jax.value_and_grad`` + a tree_map update, and
  the step by hand in numpy; also the step through ``sg.jit`` (numpy and numba backends).
- hvp: the Hessian-vector product of the mean squared error of a 2-6-10-1 tanh MLP (99
  parameters, one flat vector) on 40 samples, ``sg.hvp``, against PyTorch's double backward,
  ``jax.jvp(jax.grad)`` and Pearlmutter's R-op by hand in numpy (the forward, the backward and
  the directional derivative of each).

The MAML workload has no numpy column: by hand it is the second derivative of three SGD steps
through the MLP, a program of its own rather than a baseline.

Every run's values are checked against the first run's before timing; ratios are to PyTorch
eager in the same run (to numpy, or to simplegrad, when PyTorch is missing).
Run: python benchmarks/habits.py [--quick] [--only nested,maml,digits,hvp]
"""

from __future__ import annotations

import importlib.util

import numpy as np
import peers
from nth_derivative import tanh_polynomial

import simplegrad as sg
from simplegrad import nn, optim

COLS = {"simplegrad": "simplegrad", "numpy": "numpy (by hand)", "torch": "torch eager",
        "jax jit": "JAX jit", "jax eager": "JAX eager"}


def report(args, title: str, runs: dict, cols: dict, repeat: int, target: str,
           extra: dict | None = None) -> list[dict]:
    """Time the runs, print them, and the table rows: the headline and one per extra run."""
    med = peers.measure(runs, repeat)
    unit = next((k for k in med if cols.get(k) == "torch eager"), None) or \
        next(k for k in med if cols.get(k) == "simplegrad")
    peers.show(f"{title}; median of {repeat} round-robin runs", med, unit, med[unit])
    rows = [{"workload": title, "unit": unit, "target": target,
             "cols": {cols[k]: t / med[unit] for k, t in med.items() if k in cols}}]
    for label, (run, row_target) in (extra or {}).items():
        rows.append({"workload": f"  {label}", "unit": unit, "target": row_target,
                     "cols": {"simplegrad": med[run] / med[unit]}})
    return rows


# ---------------------------------------------------------------- nested sg.grad, scalar


def nested(args, torch, jax) -> list[dict]:
    n, x0 = 8, 0.3
    g = lambda x: x.tanh()      # noqa: E731
    for _ in range(n):
        g = sg.grad(g)
    jitted = sg.jit(g)
    poly = tanh_polynomial(n)
    x = np.array(x0)
    runs = {"simplegrad nested sg.grad": lambda: g(x),
            "simplegrad sg.jit(nested sg.grad)": lambda: jitted(x),
            "numpy (by hand): P_8(tanh x)": lambda: poly(np.tanh(x0))}
    cols = {"simplegrad nested sg.grad": "simplegrad", "numpy (by hand): P_8(tanh x)": "numpy"}
    if torch is not None:
        def torch_run():
            xt = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
            y = torch.tanh(xt)
            for k in range(n):
                (y,) = torch.autograd.grad(y, xt, create_graph=k < n - 1)
            return y
        runs["torch nested autograd.grad"] = torch_run
        cols["torch nested autograd.grad"] = "torch"
    if jax is not None:
        gj = jax.numpy.tanh
        for _ in range(n):
            gj = jax.grad(gj)
        gjit = jax.jit(gj)
        runs["jax jit(nested grad)"] = lambda: gjit(x0).block_until_ready()
        cols["jax jit(nested grad)"] = "jax jit"
        if not args.quick:      # seconds per call: the full run only
            runs["jax nested grad, eager"] = lambda: gj(x0).block_until_ready()
            cols["jax nested grad, eager"] = "jax eager"
    peers.check_agree("nested", {"closed form": poly(np.tanh(x0)),
                                 **{k: fn() for k, fn in runs.items()}}, rtol=1e-9)
    cols = {k: COLS[v] for k, v in cols.items()}
    return report(args, f"d^{n} tanh / dx^{n} at one point, nesting sg.grad", runs, cols,
                  peers.repeats(args, 9, 25), "simplegrad <= 1.0",
                  {"the same nesting through sg.jit": ("simplegrad sg.jit(nested sg.grad)", "")})


# ---------------------------------------------------------------- MAML


def maml(args, torch, jax) -> list[dict]:
    rng = np.random.default_rng(0)
    model = nn.MLP([1, 40, 40, 1], activation="tanh", rng=rng)
    params = model.params()
    keys = list(params)
    amp, phase, lr, steps = 1.5, 0.4, 0.01, 3
    xs, xq = rng.uniform(-3, 3, (10, 1)), rng.uniform(-3, 3, (10, 1))
    ys, yq = amp * np.sin(xs + phase), amp * np.sin(xq + phase)

    def meta(p):
        fast = p
        for _ in range(steps):
            g = sg.grad(lambda q: nn.mse(model.apply(q, xs), ys))(fast)
            fast = {k: fast[k] - lr * g[k] for k in keys}
        return nn.mse(model.apply(fast, xq), yq)
    meta_grad = sg.grad(meta)
    def sg_run():
        g = meta_grad(params)
        return [g[k] for k in keys]
    runs = {"simplegrad sg.grad(meta)": sg_run}
    cols = {"simplegrad sg.grad(meta)": "simplegrad"}
    if torch is not None:
        pt = [torch.tensor(params[k]) for k in keys]
        xst, yst, xqt, yqt = (torch.tensor(a) for a in (xs, ys, xq, yq))

        def fwd(p, x):
            h = torch.tanh(x @ p[0].T + p[1])
            h = torch.tanh(h @ p[2].T + p[3])
            return h @ p[4].T + p[5]

        def torch_run():
            p0 = [t.clone().requires_grad_(True) for t in pt]
            fast = p0
            for _ in range(steps):
                loss = ((fwd(fast, xst) - yst) ** 2).mean()
                gs = torch.autograd.grad(loss, fast, create_graph=True)
                fast = [w - lr * g for w, g in zip(fast, gs)]
            return list(torch.autograd.grad(((fwd(fast, xqt) - yqt) ** 2).mean(), p0))
        runs["torch unrolled, create_graph=True"] = torch_run
        cols["torch unrolled, create_graph=True"] = "torch"
    if jax is not None:
        jnp = jax.numpy

        def jfwd(p, x):
            h = jnp.tanh(x @ p[0].T + p[1])
            h = jnp.tanh(h @ p[2].T + p[3])
            return h @ p[4].T + p[5]

        def jmeta(p):
            fast = p
            for _ in range(steps):
                g = jax.grad(lambda q: jnp.mean((jfwd(q, xs) - ys) ** 2))(fast)
                fast = [w - lr * d for w, d in zip(fast, g)]
            return jnp.mean((jfwd(fast, xq) - yq) ** 2)
        pj = [jnp.asarray(params[k]) for k in keys]
        eager, jitted = jax.grad(jmeta), jax.jit(jax.grad(jmeta))
        runs["jax jit(grad(meta))"] = lambda: [a.block_until_ready() for a in jitted(pj)]
        cols["jax jit(grad(meta))"] = "jax jit"
        if not args.quick:      # a fifth of a second per call: the full run only
            runs["jax grad(meta), eager"] = lambda: [a.block_until_ready() for a in eager(pj)]
            cols["jax grad(meta), eager"] = "jax eager"
    peers.check_agree("maml", {k: fn() for k, fn in runs.items()}, rtol=1e-9, atol=1e-12)
    cols = {k: COLS[v] for k, v in cols.items()}
    return report(args, f"MAML meta-gradient, {steps} inner SGD steps, 1-40-40-1 MLP", runs,
                  cols, peers.repeats(args, 41, 81), "simplegrad <= 1.0")


# ---------------------------------------------------------------- digits step, JAX habit


def digits(args, torch, jax) -> list[dict]:
    rng = np.random.default_rng(0)
    model = nn.MLP([64, 64, 10], activation="tanh", rng=rng)
    params = model.params()
    keys = list(params)
    X = rng.uniform(0, 16, (64, 64)) / 16.0
    y = rng.integers(0, 10, 64)
    lr = 0.1
    opt = optim.SGD(lr=lr)
    state = opt.init(params)

    def loss(p, X, y):
        return nn.cross_entropy(model.apply(p, X), y)

    def step(p, s, X, y):
        value, grads = sg.value_and_grad(loss)(p, X, y)
        p, s = opt.update(grads, s, p)
        return value, p, s

    def flat(out):
        value, p = out[0], out[1]
        return [np.asarray(value), *(np.asarray(p[k]) for k in keys)]

    jitted = sg.jit(step)
    runs = {"simplegrad sg.value_and_grad + opt.update": lambda: flat(step(params, state, X, y)),
            "simplegrad sg.jit(step)": lambda: flat(jitted(params, state, X, y))}
    cols = {"simplegrad sg.value_and_grad + opt.update": "simplegrad"}
    extra = {"the same step through sg.jit": ("simplegrad sg.jit(step)", "")}
    if importlib.util.find_spec("numba") is not None:
        fused = sg.jit(step, backend="numba")
        runs["simplegrad sg.jit(step, backend='numba')"] = lambda: flat(fused(params, state, X,
                                                                               y))
        extra["sg.jit(step, backend='numba')"] = ("simplegrad sg.jit(step, backend='numba')", "")
    W1, b1, W2, b2 = (params[k] for k in ("0.weight", "0.bias", "2.weight", "2.bias"))
    onehot = np.eye(10)[y]

    def numpy_step():
        h = np.tanh(X @ W1.T + b1)
        z = h @ W2.T + b2
        m = z.max(axis=1, keepdims=True)
        e = np.exp(z - m)
        s = e.sum(axis=1, keepdims=True)
        value = -np.mean(np.sum(onehot * (z - m - np.log(s)), axis=1))
        dz = (e / s - onehot) / len(y)
        da = (dz @ W2) * (1 - h * h)
        grads = (da.T @ X, da.sum(axis=0), dz.T @ h, dz.sum(axis=0))
        return [np.asarray(value), *(w - lr * g for w, g in zip((W1, b1, W2, b2), grads))]
    runs["numpy (by hand)"] = numpy_step
    cols["numpy (by hand)"] = "numpy"
    if torch is not None:
        tmodel = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(),
                                     torch.nn.Linear(64, 10)).double()
        topt = torch.optim.SGD(tmodel.parameters(), lr=lr)
        Xt, yt = torch.tensor(X), torch.tensor(y)

        def torch_step():
            with torch.no_grad():
                for t, k in zip(tmodel.parameters(), keys):
                    t.copy_(torch.from_numpy(params[k]))
            topt.zero_grad()
            value = torch.nn.functional.cross_entropy(tmodel(Xt), yt)
            value.backward()
            topt.step()
            return [value.detach().numpy(), *(t.detach().numpy().copy()
                                              for t in tmodel.parameters())]
        runs["torch eager backward + optim.SGD"] = torch_step
        cols["torch eager backward + optim.SGD"] = "torch"
    if jax is not None:
        jstep = jax_step(jax, lr)
        jjit = jax.jit(jstep)
        pj, Xj, yj = jax_arrays(jax, params, X, y)

        def jrun(fn):
            value, p = fn(pj, Xj, yj)
            return [np.asarray(value.block_until_ready()), *(np.asarray(w) for w in p)]
        runs["jax value_and_grad + update, eager"] = lambda: jrun(jstep)
        runs["jax jit(value_and_grad + update)"] = lambda: jrun(jjit)
        cols.update({"jax value_and_grad + update, eager": "jax eager",
                     "jax jit(value_and_grad + update)": "jax jit"})
    peers.check_agree("digits", {k: fn() for k, fn in runs.items()}, rtol=1e-10, atol=1e-12)
    cols = {k: COLS[v] for k, v in cols.items()}
    return report(args, "digits MLP step 64-64-10, batch 64: sg.value_and_grad + opt.update",
                  runs, cols, peers.repeats(args, 41, 101), "simplegrad <= 1.0", extra)


def jax_step(jax, lr: float):
    """The digits step in JAX: ``jax.value_and_grad`` of the cross-entropy of a one-hidden-layer
    tanh MLP (parameters as a list: W1, b1, W2, b2) and a tree_map SGD update."""
    jnp = jax.numpy

    def jloss(p, X, y):
        h = jnp.tanh(X @ p[0].T + p[1])
        z = h @ p[2].T + p[3]
        return -jnp.mean(jax.nn.log_softmax(z)[jnp.arange(len(y)), y])

    def jstep(p, X, y):
        value, g = jax.value_and_grad(jloss)(p, X, y)
        return value, [w - lr * d for w, d in zip(p, g)]
    return jstep


def jax_arrays(jax, params: dict, X: np.ndarray, y: np.ndarray) -> tuple:
    """The parameters (in ``jax_step``'s order), the data and the labels as JAX arrays."""
    jnp = jax.numpy
    return ([jnp.asarray(params[k]) for k in ("0.weight", "0.bias", "2.weight", "2.bias")],
            jnp.asarray(X), jnp.asarray(y))


# ---------------------------------------------------------------- hvp, 99 parameters


SIZES = [(6, 2), (6,), (10, 6), (10,), (1, 10), (1,)]     # a 2-6-10-1 MLP: 99 parameters


def unpack(theta, xp_reshape):
    out, k = [], 0
    for shape in SIZES:
        size = int(np.prod(shape))
        out.append(xp_reshape(theta[k:k + size], shape))
        k += size
    return out


def hvp_by_hand(theta: np.ndarray, v: np.ndarray, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """H v of the MLP's mean squared error, written out: the forward and its directional
    derivative (R-forward), the backward and its directional derivative (R-backward)."""
    w1, b1, w2, b2, w3, b3 = unpack(theta, np.reshape)
    V1, c1, V2, c2, V3, c3 = unpack(v, np.reshape)
    h1 = np.tanh(X @ w1.T + b1)
    d1 = 1 - h1 * h1
    h2 = np.tanh(h1 @ w2.T + b2)
    d2 = 1 - h2 * h2
    r = h2 @ w3.T + b3 - Y
    Rh1 = d1 * (X @ V1.T + c1)
    Rh2 = d2 * (Rh1 @ w2.T + h1 @ V2.T + c2)
    Rr = Rh2 @ w3.T + h2 @ V3.T + c3
    gr, Rgr = r * (2 / r.size), Rr * (2 / r.size)
    gh2 = gr @ w3
    ga2 = gh2 * d2
    Rga2 = (Rgr @ w3 + gr @ V3) * d2 - 2 * gh2 * h2 * Rh2
    gh1 = ga2 @ w2
    Rga1 = (Rga2 @ w2 + ga2 @ V2) * d1 - 2 * gh1 * h1 * Rh1
    parts = [Rga1.T @ X, Rga1.sum(0), Rga2.T @ h1 + ga2.T @ Rh1, Rga2.sum(0),
             Rgr.T @ h2 + gr.T @ Rh2, Rgr.sum(0)]
    return np.concatenate([p.ravel() for p in parts])


def hvp(args, torch, jax) -> list[dict]:
    rng = np.random.default_rng(0)
    n = sum(int(np.prod(s)) for s in SIZES)
    theta = rng.normal(size=n) * 0.5
    v = rng.normal(size=n)
    X = rng.normal(size=(40, 2))
    Y = np.sin(X[:, :1] * 2.0) * X[:, 1:]

    def loss(t):
        w1, b1, w2, b2, w3, b3 = unpack(t, lambda a, s: a.reshape(s))
        h = (X @ w1.T + b1).tanh()
        h = (h @ w2.T + b2).tanh()
        r = h @ w3.T + b3 - Y
        return (r * r).mean()
    runs = {"simplegrad sg.hvp": lambda: sg.hvp(loss, theta, v)}
    cols = {"simplegrad sg.hvp": "simplegrad"}
    jitted = sg.jit(lambda t, u: sg.hvp(loss, t, u))
    runs["simplegrad sg.jit(sg.hvp)"] = lambda: jitted(theta, v)
    runs["numpy (by hand): Pearlmutter's R-op"] = lambda: hvp_by_hand(theta, v, X, Y)
    cols["numpy (by hand): Pearlmutter's R-op"] = "numpy"
    if torch is not None:
        Xt, Yt, tt, vt = (torch.tensor(a) for a in (X, Y, theta, v))

        def tloss(t):
            w1, b1, w2, b2, w3, b3 = unpack(t, lambda a, s: a.reshape(s))
            h = torch.tanh(Xt @ w1.T + b1)
            h = torch.tanh(h @ w2.T + b2)
            return ((h @ w3.T + b3 - Yt) ** 2).mean()

        def torch_run():
            t = tt.clone().requires_grad_(True)
            (g,) = torch.autograd.grad(tloss(t), t, create_graph=True)
            (h,) = torch.autograd.grad(g @ vt, t)
            return h
        runs["torch double backward"] = torch_run
        cols["torch double backward"] = "torch"
    if jax is not None:
        jnp = jax.numpy

        def jloss(t):
            w1, b1, w2, b2, w3, b3 = unpack(t, lambda a, s: a.reshape(s))
            h = jnp.tanh(X @ w1.T + b1)
            h = jnp.tanh(h @ w2.T + b2)
            return jnp.mean((h @ w3.T + b3 - Y) ** 2)

        def jhvp(t, u):
            return jax.jvp(jax.grad(jloss), (t,), (u,))[1]
        jj = jax.jit(jhvp)
        tj, vj = jnp.asarray(theta), jnp.asarray(v)
        runs["jax jvp(grad), eager"] = lambda: jhvp(tj, vj).block_until_ready()
        runs["jax jit(jvp(grad))"] = lambda: jj(tj, vj).block_until_ready()
        cols.update({"jax jvp(grad), eager": "jax eager", "jax jit(jvp(grad))": "jax jit"})
    peers.check_agree("hvp", {k: fn() for k, fn in runs.items()}, rtol=1e-9, atol=1e-12)
    cols = {k: COLS[v] for k, v in cols.items()}
    return report(args, "hvp, 99-parameter MLP (2-6-10-1), 40 samples: sg.hvp", runs, cols,
                  peers.repeats(args, 21, 61), "simplegrad <= 1.0",
                  {"the same through sg.jit": ("simplegrad sg.jit(sg.hvp)", "")})


WORKLOADS = {"nested": nested, "maml": maml, "digits": digits, "hvp": hvp}


def main() -> None:
    p = peers.parser(__doc__)
    p.add_argument("--only", default=",".join(WORKLOADS))
    args = p.parse_args()
    torch, jax = peers.torch_or_none(), peers.jax_or_none()
    rows = []
    for name in args.only.split(","):
        rows += WORKLOADS[name](args, torch, jax)
        print()
    peers.emit(args, rows)


if __name__ == "__main__":
    main()
