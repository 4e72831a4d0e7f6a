"""A gallery of grad-of-grad uses, each checked against an independent computation.

1. MAML: the outer gradient through k inner SGD steps of an nn.MLP (functional form), against
   central finite differences of the outer loss along random directions.
2. A gradient penalty: mean ||d D(x)/dx||^2 of a small critic, differentiated with respect to
   its weights, against finite differences.
3. A physics-informed loss: u_xx of a small network u(x) by nested derivatives, against a
   second central difference of u; the loss mean (u_xx + sin x)^2 differentiated with respect
   to the weights, against finite differences.
4. Newton's method with Hessian-vector products (conjugate gradient, no Hessian formed) on a
   small logistic regression: each hvp against the closed form X^T diag(p (1 - p)) X / N + lam I,
   and the solution's gradient norm driven below 1e-9.

Run: python examples/higher_order.py [--quick]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import simplegrad as sg
from simplegrad import nn, optim


def directional_fd(fn, params: dict, direction: dict, eps: float = 1e-6) -> float:
    """(fn(p + eps d) - fn(p - eps d)) / (2 eps) for dict parameters."""
    hi = {k: params[k] + eps * direction[k] for k in params}
    lo = {k: params[k] - eps * direction[k] for k in params}
    return (float(fn(hi)) - float(fn(lo))) / (2 * eps)


def check_gradient(label: str, fn, params: dict, rng: np.random.Generator,
                   failures: list[str], probes: int = 3) -> None:
    """sg.grad(fn) against directional finite differences; record a failure if off."""
    g = sg.grad(fn)(params)
    worst = 0.0
    for _ in range(probes):
        d = {k: rng.normal(size=v.shape) for k, v in params.items()}
        analytic = sum(float(np.sum(g[k] * d[k])) for k in params)
        fd = directional_fd(fn, params, d)
        worst = max(worst, abs(analytic - fd) / max(1.0, abs(fd)))
    ok = worst < 1e-6
    print(f"{label}: largest relative error against finite differences {worst:.1e} "
          f"{'(ok)' if ok else '(FAILED)'}")
    if not ok:
        failures.append(label)


def maml(rng: np.random.Generator, failures: list[str], k: int) -> None:
    """Sine-regression tasks; the outer gradient through k inner SGD steps."""
    model = nn.MLP([1, 16, 1], activation="tanh", rng=rng)
    opt = optim.SGD(lr=0.05)
    tasks = []
    for _ in range(3):
        amp, phase = rng.uniform(0.5, 2), rng.uniform(0, np.pi)
        xs, xq = rng.uniform(-3, 3, (8, 1)), rng.uniform(-3, 3, (8, 1))
        tasks.append((xs, amp * np.sin(xs + phase), xq, amp * np.sin(xq + phase)))

    def outer(params: dict):
        total = 0.0
        for xs, ys, xq, yq in tasks:
            fast, state = params, opt.init(params)
            for _ in range(k):
                g = sg.grad(lambda p, xs=xs, ys=ys: nn.mse(model.apply(p, xs), ys))(fast)
                fast, state = opt.update(g, state, fast)
            total = total + nn.mse(model.apply(fast, xq), yq)
        return total / len(tasks)

    check_gradient(f"1. MAML outer gradient through {k} inner SGD steps", outer, model.params(),
                   rng, failures)


def gradient_penalty(rng: np.random.Generator, failures: list[str]) -> None:
    """A critic's input-gradient norm, differentiated with respect to its weights."""
    critic = nn.MLP([3, 12, 1], activation="tanh", rng=rng)
    x = rng.normal(size=(6, 3))

    def penalty(params: dict):
        # params ride along as an argument, so the inner grad records on their Ops (when they
        # are Variables of the outer gradient) and the penalty can be differentiated again
        dx = sg.grad(lambda z, p: critic.apply(p, z).sum())(x, params)    # dD/dx, per row
        return ((dx * dx).sum(1)).mean()

    check_gradient("2. gradient penalty mean ||dD/dx||^2, d/dweights", penalty, critic.params(),
                   rng, failures)


def pinn(rng: np.random.Generator, failures: list[str]) -> None:
    """u_xx of a network by nested derivatives, and the residual loss's weight gradient."""
    u = nn.MLP([1, 16, 16, 1], activation="tanh", rng=rng)
    xs = np.linspace(-2, 2, 9)

    def u_xx(params: dict, x):
        scalar = lambda t: u.apply(params, t.reshape(1, 1)).sum()
        op = nn.ops_of(*params.values())
        if isinstance(op, sg.Ops):      # x on the parameters' Ops: derivatives nest there
            x = op.var(x, requires_grad=False)
        return sg.derivative(scalar, order=2)(x)

    params = u.params()
    h = 1e-4
    worst = 0.0
    for x in xs[:4]:
        val = lambda t: float(u(np.array([[t]]))[0, 0])
        fd = (val(x + h) - 2 * val(x) + val(x - h)) / h ** 2
        worst = max(worst, abs(float(u_xx(params, np.array(x))) - fd))
    ok = worst < 1e-5
    print(f"3. u_xx by nested derivatives vs second central differences: largest error "
          f"{worst:.1e} {'(ok)' if ok else '(FAILED)'}")
    if not ok:
        failures.append("3. u_xx")

    def residual_loss(p: dict):
        total = 0.0
        for x in xs:
            r = u_xx(p, np.array(x)) + np.sin(x)
            total = total + r * r
        return total / len(xs)

    check_gradient("3. physics-informed loss mean (u_xx + sin x)^2, d/dweights", residual_loss,
                   params, rng, failures, probes=2)


def newton_cg(rng: np.random.Generator, failures: list[str]) -> None:
    """Newton steps solved by conjugate gradients from hvps, on a logistic regression."""
    n, d, lam = 200, 5, 1e-2
    X = rng.normal(size=(n, d))
    y = (X @ rng.normal(size=d) + 0.5 * rng.normal(size=n) > 0).astype(float)

    def loss(w):
        z = X @ w
        # mean of log(1 + e^z) - y z (|z| stays small here, so exp cannot overflow)
        return ((z.exp() + 1).log() - y * z).mean() + 0.5 * lam * (w * w).sum()

    hvp = sg.hvp(loss)
    w = np.zeros(d)
    worst_hvp = 0.0
    for it in range(8):
        g = sg.grad(loss)(w)
        p = 1 / (1 + np.exp(-(X @ w)))
        H = X.T @ (X * (p * (1 - p))[:, None]) / n + lam * np.eye(d)
        v = rng.normal(size=d)
        worst_hvp = max(worst_hvp, float(np.max(np.abs(hvp(w, v) - H @ v))))
        # conjugate gradient on H s = -g, with hvps only
        s, r = np.zeros(d), -g
        q = r.copy()
        for _ in range(d):
            Hq = hvp(w, q)
            alpha = (r @ r) / (q @ Hq)
            s, r_new = s + alpha * q, r - alpha * Hq
            if np.linalg.norm(r_new) < 1e-14:
                break
            q, r = r_new + (r_new @ r_new) / (r @ r) * q, r_new
        w = w + s
        gnorm = float(np.linalg.norm(sg.grad(loss)(w)))
        print(f"   Newton-CG iteration {it + 1}: |grad| = {gnorm:.2e}")
        if gnorm < 1e-9:
            break
    ok = worst_hvp < 1e-10 and gnorm < 1e-9
    print(f"4. Newton-CG with hvps: hvp vs closed-form Hessian {worst_hvp:.1e}, final |grad| "
          f"{gnorm:.1e} {'(ok)' if ok else '(FAILED)'}")
    if not ok:
        failures.append("4. Newton-CG")


def main(argv: list[str] | None = None) -> int:
    """Run the four checks; exit 1 if any fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer inner steps, for the tests")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    failures: list[str] = []
    maml(rng, failures, k=2 if args.quick else 5)
    gradient_penalty(rng, failures)
    pinn(rng, failures)
    newton_cg(rng, failures)
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    print("all checks passed" if not failures else f"{len(failures)} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
