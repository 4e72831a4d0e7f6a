"""One MLP training step (loss and gradients), 64x784 -> 256 (tanh) -> 10, one-hot loss.

loss(W1, b1, W2, b2) = mean over the batch of -sum(Y * log_softmax(tanh(X W1 + b1) W2 + b2)),
with X (64, 784) and one-hot Y (64, 10) fixed numpy arrays. Forms of the simplegrad step:
``sg.value_and_grad`` over the four parameters (a fresh Ops per call), a persistent
``Ops`` holding the parameters and the data as leaves (record, ``op.grad(...,
create_graph=False)``, release), the weights as ``sg.Parameter`` with ``loss.backward()``
(the PyTorch habit; with X and Y as given, which each step copies, and read-only, which it
does not), and the step recorded once and compiled (``sg.compile`` of
``op.program([W1, b1, W2, b2, X, Y], [loss, dW1, db1, dW2, db2])``), the same through
``sg.jit(sg.value_and_grad(...))`` (X and Y closed over: constants of its program); also the
two-parameter form (no biases) through ``sg.value_and_grad``. Against the same step written
by hand in numpy (the unit), and when installed PyTorch eager, ``torch.func.grad_and_value``,
HIPS autograd and ``jax.jit(jax.value_and_grad)``, interleaved after checking that all give
the same loss and gradients.
Run: python benchmarks/mlp.py [--quick]
"""

from __future__ import annotations

import numpy as np
import peers

import simplegrad as sg


def data(rng: np.random.Generator) -> tuple:
    """X, one-hot Y and the four parameters."""
    X = rng.normal(size=(64, 784))
    Y = np.eye(10)[rng.integers(0, 10, 64)]
    W1 = rng.normal(size=(784, 256)) / 28.0
    b1 = rng.normal(size=256) * 0.1
    W2 = rng.normal(size=(256, 10)) / 16.0
    b2 = rng.normal(size=10) * 0.1
    return X, Y, (W1, b1, W2, b2)


def numpy_step(X, Y, W1, b1, W2, b2):
    """Loss and the four gradients, by hand."""
    h = np.tanh(X @ W1 + b1)
    z = h @ W2 + b2
    m = z.max(axis=1, keepdims=True)
    e = np.exp(z - m)
    s = e.sum(axis=1, keepdims=True)
    logp = z - m - np.log(s)
    n = X.shape[0]
    loss = -np.sum(Y * logp) / n
    dz = (e / s * Y.sum(axis=1, keepdims=True) - Y) / n
    dh = dz @ W2.T
    da = dh * (1 - h * h)
    return loss, (X.T @ da, da.sum(axis=0), h.T @ dz, dz.sum(axis=0))


def numpy_step2(X, Y, W1, W2):
    """The two-parameter step (no biases), by hand."""
    h = np.tanh(X @ W1)
    z = h @ W2
    m = z.max(axis=1, keepdims=True)
    e = np.exp(z - m)
    s = e.sum(axis=1, keepdims=True)
    n = X.shape[0]
    loss = -np.sum(Y * (z - m - np.log(s))) / n
    dz = (e / s * Y.sum(axis=1, keepdims=True) - Y) / n
    da = (dz @ W2.T) * (1 - h * h)
    return loss, (X.T @ da, h.T @ dz)


def sg_loss(X, Y):
    def loss(W1, b1, W2, b2):
        z = (X @ W1 + b1).tanh() @ W2 + b2
        return -(Y * z.log_softmax(axis=1)).sum() / X.shape[0]
    return loss


def sg_loss2(X, Y):
    def loss(W1, W2):
        z = (X @ W1).tanh() @ W2
        return -(Y * z.log_softmax(axis=1)).sum() / X.shape[0]
    return loss


def persistent_step(X, Y, params):
    """A persistent Ops: parameters and data are leaves made once; each step records, sweeps
    without recording, and releases the tape."""
    op = sg.Ops()
    ps = [op.var(p) for p in params]
    x, y = op.var(X, requires_grad=False), op.var(Y, requires_grad=False)
    loss = sg_loss(x, y)

    def step():
        L = loss(*ps)
        gs = op.grad(L, ps, create_graph=False)
        out = float(L.value), tuple(g.value for g in gs)
        op.release()
        return out
    return step


def parameter_step(X, Y, params):
    """The PyTorch habit: the weights as ``sg.Parameter``, each step recorded on the implicit
    Ops (freed by reference counting), ``loss.backward()``, the gradients read from ``.grad``."""
    ps = [sg.Parameter(p) for p in params]
    loss = sg_loss(X, Y)

    def step():
        for p in ps:
            p.grad = None
        L = loss(*ps)
        L.backward()
        return float(L.value), tuple(p.grad.value for p in ps)
    return step


def read_only(*arrays: np.ndarray) -> list:
    """Read-only copies: data an Ops records as it is, with no copy per step."""
    out = [a.copy() for a in arrays]
    for a in out:
        a.flags.writeable = False
    return out


def compiled_step(X, Y, params):
    """The step recorded once, extracted as a Program whose inputs are the four parameters and
    the data (so one compiled function serves every batch) and compiled by ``sg.compile``; not
    simplified (``sg.simplify`` only folds the two scalar constants of ``/ 64`` here)."""
    op = sg.Ops()
    ps = [op.var(p) for p in params]
    x, y = op.var(X, requires_grad=False), op.var(Y, requires_grad=False)
    L = sg_loss(x, y)(*ps)
    fn = sg.compile(op.program(ps + [x, y], [L, *op.grad(L, ps)]), name="mlp_step")
    op.release()

    def step():
        loss, *grads = fn(*params, X, Y)
        return float(loss), tuple(grads)
    return step


def main() -> None:
    args = peers.parser(__doc__).parse_args()
    repeat = peers.repeats(args, 41, 81)
    X, Y, params = data(np.random.default_rng(0))
    vg = sg.value_and_grad(sg_loss(X, Y), argnums=(0, 1, 2, 3))
    vg2 = sg.value_and_grad(sg_loss2(X, Y), argnums=(0, 1))
    runs = {
        "numpy (by hand)": lambda: numpy_step(X, Y, *params),
        "simplegrad sg.value_and_grad": lambda: vg(*params),
        "simplegrad persistent Ops": persistent_step(X, Y, params),
        "simplegrad sg.Parameter + backward()": parameter_step(X, Y, params),
        "simplegrad sg.Parameter, read-only X and Y": parameter_step(
            *read_only(X, Y), params),
        "simplegrad sg.compile": compiled_step(X, Y, params),
        "simplegrad sg.jit(sg.value_and_grad)": (lambda f: lambda: f(*params))(
            sg.jit(sg.value_and_grad(sg_loss(X, Y), argnums=(0, 1, 2, 3)))),
    }
    cols = {"numpy (by hand)": "numpy (by hand)", "simplegrad sg.value_and_grad": "simplegrad"}
    torch = peers.torch_or_none()
    if torch is not None:
        import torch.func
        Xt, Yt = torch.tensor(X), torch.tensor(Y)
        pt = [torch.tensor(p) for p in params]

        def loss_t(W1, b1, W2, b2):
            z = torch.tanh(Xt @ W1 + b1) @ W2 + b2
            return -(Yt * torch.log_softmax(z, dim=1)).sum() / Xt.shape[0]

        def torch_eager():
            ps = [p.detach().requires_grad_(True) for p in pt]
            L = loss_t(*ps)
            return L, torch.autograd.grad(L, ps)
        gv = torch.func.grad_and_value(loss_t, argnums=(0, 1, 2, 3))
        runs["torch eager autograd.grad"] = torch_eager
        runs["torch.func.grad_and_value"] = lambda: gv(*pt)[::-1]
        cols["torch eager autograd.grad"] = "torch eager"
        cols["torch.func.grad_and_value"] = "torch.func"
    autograd = peers.autograd_or_none()
    if autograd is not None:
        import autograd.numpy as anp

        def loss_a(ps):
            W1, b1, W2, b2 = ps
            z = anp.dot(anp.tanh(anp.dot(X, W1) + b1), W2) + b2
            m = anp.max(z, axis=1, keepdims=True)
            logp = z - m - anp.log(anp.sum(anp.exp(z - m), axis=1, keepdims=True))
            return -anp.sum(Y * logp) / X.shape[0]
        vg_a = autograd.value_and_grad(loss_a)
        runs["autograd value_and_grad"] = lambda: vg_a(tuple(params))
        cols["autograd value_and_grad"] = "autograd"
    jax = peers.jax_or_none()
    if jax is not None:
        jnp = jax.numpy
        Xj, Yj = jnp.asarray(X), jnp.asarray(Y)
        pj = [jnp.asarray(p) for p in params]

        def loss_j(W1, b1, W2, b2):
            z = jnp.tanh(Xj @ W1 + b1) @ W2 + b2
            return -(Yj * jax.nn.log_softmax(z, axis=1)).sum() / Xj.shape[0]
        vg_j = jax.jit(jax.value_and_grad(loss_j, argnums=(0, 1, 2, 3)))
        runs["jax.jit(jax.value_and_grad)"] = lambda: jax.block_until_ready(vg_j(*pj))
        cols["jax.jit(jax.value_and_grad)"] = "JAX jit"

    peers.check_agree("MLP step", {k: [fn()[0], *fn()[1]] for k, fn in runs.items()},
                      rtol=1e-9, atol=1e-12)
    runs2 = {"numpy (by hand), two parameters": lambda: numpy_step2(X, Y, params[0], params[2]),
             "simplegrad sg.value_and_grad, two parameters": lambda: vg2(params[0], params[2])}
    peers.check_agree("MLP step, two parameters",
                      {k: [fn()[0], *fn()[1]] for k, fn in runs2.items()}, rtol=1e-9,
                      atol=1e-12)
    med = peers.measure({**runs, **runs2}, repeat)
    unit = "numpy (by hand)"
    peers.show(f"MLP step 64x784-256-10, one-hot loss; median of {repeat} round-robin runs",
               med, "numpy", med[unit])
    two = "simplegrad sg.value_and_grad, two parameters"
    ratio2 = med[two] / med["numpy (by hand), two parameters"]
    print(f"two-parameter form: simplegrad / numpy = {ratio2:.2f}")
    peers.emit(args, [
        {"workload": "MLP step 64x784-256-10, four parameters, one-hot loss: sg.value_and_grad",
         "unit": "numpy by hand", "target": "simplegrad <= 1.2",
         "cols": {cols[k]: t / med[unit] for k, t in med.items() if k in cols}},
        {"workload": "  same step through a persistent Ops", "unit": "numpy by hand",
         "target": "simplegrad <= 1.2",
         "cols": {"simplegrad": med["simplegrad persistent Ops"] / med[unit],
                  "numpy (by hand)": 1.0}},
        {"workload": "  same step on sg.Parameter weights, loss.backward()",
         "unit": "numpy by hand", "target": "simplegrad <= 1.2",
         "cols": {"simplegrad": med["simplegrad sg.Parameter + backward()"] / med[unit],
                  "numpy (by hand)": 1.0}},
        {"workload": "  the same with read-only X and Y (recorded without a copy per step)",
         "unit": "numpy by hand", "target": "",
         "cols": {"simplegrad": med["simplegrad sg.Parameter, read-only X and Y"]
                  / med[unit], "numpy (by hand)": 1.0}},
        {"workload": "  same step recorded once, sg.compile(op.program(...)), X and Y inputs",
         "unit": "numpy by hand", "target": "simplegrad <= 1.0",
         "cols": {"simplegrad": med["simplegrad sg.compile"] / med[unit],
                  "numpy (by hand)": 1.0}},
        {"workload": "  same step through sg.jit(sg.value_and_grad), X and Y closed over",
         "unit": "numpy by hand", "target": "",
         "cols": {"simplegrad": med["simplegrad sg.jit(sg.value_and_grad)"] / med[unit],
                  "numpy (by hand)": 1.0}},
        {"workload": "  sg.jit(sg.value_and_grad) over the sg.compile row (X, Y constants there, "
                     "inputs here: jit_cost.py compares one program)", "unit": "sg.compile",
         "target": "",
         "cols": {"simplegrad": med["simplegrad sg.jit(sg.value_and_grad)"]
                  / med["simplegrad sg.compile"]}},
        {"workload": "  two parameters (W1, W2): sg.value_and_grad", "unit": "numpy by hand",
         "target": "simplegrad <= 1.2", "cols": {"simplegrad": ratio2, "numpy (by hand)": 1.0}}])


if __name__ == "__main__":
    main()
