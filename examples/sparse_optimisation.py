"""scipy's trust-constr with simplegrad's sparse Hessians and Jacobians as ``hess=`` and ``jac=``.

Two problems, each with its sparse derivative as a ``scipy.sparse.csr_array``:

1. the n-dimensional Rosenbrock function (scipy's ``rosen``, written in numpy), minimised by
   ``scipy.optimize.minimize(method="trust-constr")`` with ``jac=sg.grad(rosen)`` and
   ``hess=sg.sparse_hessian(rosen)`` (three Hessian-vector products per iterate, however large
   n is: the Hessian is tridiagonal); checked against scipy's own ``rosen_hess_prod`` and the
   minimum at (1, ..., 1);
2. the 2-D Bratu problem -Laplacian(u) = lam exp(u) on the unit square, zero boundary, on a
   k x k grid: its residual's Jacobian by ``sg.sparse_jacobian`` (five-point stencil, a few
   colours), inside trust-constr on half the squared residual (gradient J^T r, Gauss-Newton
   Hessian J^T J, both sparse) and in Newton's method with ``spsolve``; checked against the
   dense Jacobian, by the residual at the answer, and the two answers against each other.

The pattern and colouring are made at the first call and replayed at every later iterate.
Run: python examples/sparse_optimisation.py [--quick]   (needs scipy)
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import simplegrad as sg

try:
    from scipy import optimize
    from scipy.sparse import csr_array
    from scipy.sparse.linalg import spsolve
except ImportError:         # pragma: no cover - the [sparse] extra
    sys.exit("this example needs scipy: pip install 'simplegrad[sparse]'")


def rosen(x):
    """scipy.optimize.rosen, in numpy."""
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2.0) ** 2.0 + (1 - x[:-1]) ** 2.0)


def bratu(k: int, lam: float):
    """The Bratu residual on a k x k interior grid (zero boundary values)."""
    def residual(u):
        g, h = u.reshape(k, k), 1.0 / (k + 1)
        p = np.pad(g, 1)
        lap = (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * g) / h ** 2
        return (-lap - lam * np.exp(g)).reshape(-1)
    return residual


def rosenbrock(n: int, failures: list[str]) -> None:
    hess = sg.sparse_hessian(rosen)
    x0 = np.full(n, 0.5)
    x = np.random.default_rng(0).uniform(-2, 2, n)
    H = hess(x)
    # scipy's rosen_hess_prod (H p without forming H) on a few vectors
    p = np.random.default_rng(1).standard_normal((n, 3))
    want = np.stack([optimize.rosen_hess_prod(x, q) for q in p.T], axis=1)
    err = np.abs(H @ p - want).max() / np.abs(want).max()
    plan = next(iter(hess.plans.values()))
    print(f"Rosenbrock, n = {n}: Hessian {H.shape}, {H.nnz} entries, {plan.seeds.shape[0]} "
          f"products per call; H p against scipy's rosen_hess_prod: {err:.1e}")
    if err > 1e-13:
        failures.append(f"sparse Hessian differs from rosen_hess_prod by {err:.1e}")
    t0 = time.perf_counter()
    res = optimize.minimize(rosen, x0, method="trust-constr", jac=sg.grad(rosen), hess=hess,
                            options={"gtol": 1e-10, "maxiter": 3000})
    print(f"  trust-constr: {res.nit} iterations, {res.njev} gradients, {res.nhev} sparse "
          f"Hessians, {time.perf_counter() - t0:.2f} s; |x - 1|_max = "
          f"{np.abs(res.x - 1).max():.1e}")
    if not res.success or np.abs(res.x - 1).max() > 1e-6:
        failures.append(f"trust-constr on Rosenbrock: {res.message}")
    if len(hess.plans) != 1:
        failures.append("the Hessian was planned more than once")


def bratu_problem(k: int, lam: float, failures: list[str]) -> None:
    residual = bratu(k, lam)
    jac = sg.sparse_jacobian(residual)
    u0 = np.zeros(k * k)
    J = jac(u0)
    plan = next(iter(jac.plans.values()))
    dense = sg.jacobian(residual)(u0)
    err = np.abs(J.toarray() - dense).max() / np.abs(dense).max()
    print(f"Bratu, {k} x {k} grid, lambda = {lam}: Jacobian {J.shape}, {J.nnz} entries, "
          f"{plan.seeds.shape[0]} colours; against dense sg.jacobian: {err:.1e}")
    if err > 1e-13:
        failures.append(f"sparse Jacobian differs from the dense one by {err:.1e}")

    newton = u0.copy()
    for _ in range(10):
        newton = newton - spsolve(jac(newton).tocsc(), residual(newton))
    print(f"  Newton with spsolve: |residual|_max = {np.abs(residual(newton)).max():.1e}, "
          f"max u = {newton.max():.4f}")

    def objective(u):
        r = residual(u)
        return 0.5 * r @ r, jac(u).T @ r

    def gauss_newton(u):
        Ju = jac(u)
        return csr_array(Ju.T @ Ju)

    t0 = time.perf_counter()
    res = optimize.minimize(objective, u0, jac=True, hess=gauss_newton, method="trust-constr",
                            options={"gtol": 1e-12, "xtol": 1e-14, "maxiter": 500})
    worst = np.abs(residual(res.x)).max()
    print(f"  trust-constr on |r|^2 / 2 with J^T r and J^T J: {res.nit} iterations, "
          f"{time.perf_counter() - t0:.2f} s; |residual|_max = {worst:.1e}, |u - Newton's|_max "
          f"= {np.abs(res.x - newton).max():.1e}")
    if worst > 1e-6 or np.abs(res.x - newton).max() > 1e-6:
        failures.append("trust-constr on Bratu did not reach Newton's answer")
    if np.abs(residual(newton)).max() > 1e-9 or newton.max() < 0.01:
        failures.append("Newton on Bratu did not reach the lower solution")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller problems, for the tests")
    args = parser.parse_args()
    failures: list[str] = []
    rosenbrock(30 if args.quick else 10_000, failures)
    bratu_problem(10 if args.quick else 40, 2.0, failures)
    print("all checks passed" if not failures else f"{len(failures)} check(s) failed")
    for f in failures:
        print("  -", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
