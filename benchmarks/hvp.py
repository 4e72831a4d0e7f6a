"""Hessian-vector product of f(x) = sum(tanh(A x)) with A 2000x2000, in numpy-matvec units.

The unit is one ``A @ x`` in numpy, measured in the same run. simplegrad ``sg.hvp``
(reverse-over-forward) runs twice: with A a writable numpy array (as users hold it) and with
a read-only A (``A.flags.writeable = False``), which simplegrad may keep without copying. By
hand in numpy the product takes three matvecs: A^T (-2 t (1 - t^2) * (A v)), t = tanh(A x).
Peers when installed: PyTorch eager (reverse-over-reverse, ``autograd.grad`` twice),
``torch.func.jvp`` of ``torch.func.grad``, HIPS autograd's ``hessian_vector_product`` and
``jax.jit`` of ``jax.jvp(jax.grad(f))``, interleaved after checking that all agree.
The same run also times ``sg.grad`` of f (writable A) against the closed-form gradient in
numpy, A^T (1 - tanh(A x)^2) (two matvecs): issue 10 asks for at most 1.3x.
Run: python benchmarks/hvp.py [--n 2000] [--quick]
"""

from __future__ import annotations

import numpy as np
import peers

import simplegrad as sg


def main() -> None:
    p = peers.parser(__doc__)
    p.add_argument("--n", type=int, default=2000)
    args = p.parse_args()
    n, repeat = args.n, peers.repeats(args, 41, 81)
    rng = np.random.default_rng(0)
    A = rng.normal(size=(n, n)) / np.sqrt(n)
    A_ro = A.copy()
    A_ro.flags.writeable = False
    x, v = rng.normal(size=n), rng.normal(size=n)

    def by_hand():
        t = np.tanh(A @ x)
        return A.T @ (-2 * t * (1 - t * t) * (A @ v))

    def grad_by_hand():
        t = np.tanh(A @ x)
        return A.T @ (1 - t * t)

    grad_sg = sg.grad(lambda x: (A @ x).tanh().sum())
    peers.check_agree("grad", {"by hand": grad_by_hand(), "simplegrad": grad_sg(x)}, rtol=1e-10)

    runs = {
        "numpy matvec A @ x (the unit)": lambda: A @ x,
        "numpy gradient by hand (2 matvecs)": grad_by_hand,
        "simplegrad sg.grad, writable A": lambda: grad_sg(x),
        "numpy hvp by hand (3 matvecs)": by_hand,
        "simplegrad sg.hvp, writable A": lambda: sg.hvp(lambda x: (A @ x).tanh().sum(), x, v),
        "simplegrad sg.hvp, read-only A":
            lambda: sg.hvp(lambda x: (A_ro @ x).tanh().sum(), x, v),
    }
    cols = {"numpy hvp by hand (3 matvecs)": "numpy (by hand)",
            "simplegrad sg.hvp, writable A": "simplegrad"}
    torch = peers.torch_or_none()
    if torch is not None:
        import torch.func
        At, xt, vt = torch.tensor(A), torch.tensor(x), torch.tensor(v)

        def ft(x):
            return torch.tanh(At @ x).sum()

        def eager():
            xr = xt.clone().requires_grad_(True)
            (g,) = torch.autograd.grad(ft(xr), xr, create_graph=True)
            return torch.autograd.grad(g @ vt, xr)[0]
        runs["torch eager grad of grad"] = eager
        runs["torch.func jvp(grad)"] = lambda: torch.func.jvp(torch.func.grad(ft), (xt,),
                                                               (vt,))[1]
        cols["torch eager grad of grad"] = "torch eager"
        cols["torch.func jvp(grad)"] = "torch.func"
    autograd = peers.autograd_or_none()
    if autograd is not None:
        import autograd.numpy as anp
        hvp_a = autograd.hessian_vector_product(lambda x: anp.sum(anp.tanh(anp.dot(A, x))))
        runs["autograd hessian_vector_product"] = lambda: hvp_a(x, v)
        cols["autograd hessian_vector_product"] = "autograd"
    jax = peers.jax_or_none()
    if jax is not None:
        Aj, xj, vj = (jax.numpy.asarray(a) for a in (A, x, v))

        def fj(x):
            return jax.numpy.tanh(Aj @ x).sum()
        hvp_j = jax.jit(lambda x, v: jax.jvp(jax.grad(fj), (x,), (v,))[1])
        runs["jax.jit(jvp(grad))"] = lambda: hvp_j(xj, vj).block_until_ready()
        cols["jax.jit(jvp(grad))"] = "JAX jit"

    peers.check_agree("hvp", {k: fn() for k, fn in list(runs.items())[3:]}, rtol=1e-8)
    med = peers.measure(runs, repeat)
    unit = med["numpy matvec A @ x (the unit)"]
    peers.show(f"hvp of sum(tanh(A x)), A {n}x{n}; median of {repeat} round-robin runs", med,
               "matvecs", unit)
    ro = med["simplegrad sg.hvp, read-only A"] / unit
    peers.emit(args, [
        {"workload": f"hvp n = {n}, writable A", "unit": "numpy matvec",
         "target": "simplegrad <= 4",
         "cols": {cols[k]: t / unit for k, t in med.items() if k in cols}},
        {"workload": f"  hvp n = {n}, read-only A", "unit": "numpy matvec",
         "target": "simplegrad <= 4", "cols": {"simplegrad": ro}},
        {"workload": f"  grad n = {n}, writable A", "unit": "numpy gradient by hand",
         "target": "simplegrad <= 1.3",
         "cols": {"simplegrad": med["simplegrad sg.grad, writable A"]
                  / med["numpy gradient by hand (2 matvecs)"], "numpy (by hand)": 1.0}}])


if __name__ == "__main__":
    main()
