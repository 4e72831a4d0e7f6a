"""A real client: ``scipy.optimize.minimize(method="trust-constr")`` with the sparse Hessian of
the n-dimensional Rosenbrock function (scipy's ``rosen`` written in numpy), and a 2-D Bratu
problem solved with the sparse Jacobian of its residual; scipy's own ``rosen_hess`` and the
residual at the answer are the oracles."""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg

pytest.importorskip("scipy")
from scipy import optimize  # noqa: E402
from scipy.sparse import csr_array  # noqa: E402
from scipy.sparse.linalg import spsolve  # noqa: E402


def rosen(x):
    """scipy.optimize.rosen, in numpy."""
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2.0) ** 2.0 + (1 - x[:-1]) ** 2.0)


def bratu(k: int, lam: float):
    def residual(u):
        g, h = u.reshape(k, k), 1.0 / (k + 1)
        p = np.pad(g, 1)
        lap = (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * g) / h ** 2
        return (-lap - lam * np.exp(g)).reshape(-1)
    return residual


def test_the_sparse_hessian_is_scipys_rosen_hess(rng):
    x = rng.uniform(-2, 2, 40)
    H = sg.sparse_hessian(rosen)(x)
    want = optimize.rosen_hess(x)
    assert np.abs(H.toarray() - want).max() <= 1e-13 * np.abs(want).max()


def test_trust_constr_on_rosenbrock_with_the_sparse_hessian():
    n = 30
    hess = sg.sparse_hessian(rosen)
    x0 = np.full(n, -0.5)
    res = optimize.minimize(rosen, x0, method="trust-constr", jac=sg.grad(rosen), hess=hess,
                            options={"gtol": 1e-10, "maxiter": 2000})
    assert res.success, res.message
    np.testing.assert_allclose(res.x, np.ones(n), atol=1e-6)
    assert len(hess.plans) == 1         # one pattern and colouring for every iterate


def test_trust_constr_on_a_bratu_residual_with_the_sparse_jacobian():
    k, lam = 12, 2.0
    residual = bratu(k, lam)
    jac = sg.sparse_jacobian(residual)

    def objective(u):
        r = residual(u)
        return 0.5 * r @ r, jac(u).T @ r

    def gauss_newton(u):
        J = jac(u)
        return csr_array(J.T @ J)
    res = optimize.minimize(objective, np.zeros(k * k), jac=True, hess=gauss_newton,
                            method="trust-constr", options={"gtol": 1e-12, "xtol": 1e-14,
                                                            "maxiter": 500})
    assert np.abs(residual(res.x)).max() < 1e-6
    u = np.zeros(k * k)
    for _ in range(8):                  # Newton from zero with the same Jacobian: same answer
        u = u - spsolve(jac(u).tocsc(), residual(u))
    assert np.abs(residual(u)).max() < 1e-9
    np.testing.assert_allclose(res.x, u, atol=1e-6)
    assert u.max() > 0.05              # the lower branch of the Bratu solutions, not zero


@pytest.mark.slow
def test_the_example_script_runs_quick(tmp_path):
    """examples/sparse_optimisation.py (both clients, with their checks) exits 0."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}   # this simplegrad
    done = subprocess.run([sys.executable, str(root / "examples" / "sparse_optimisation.py"),
                           "--quick"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all checks passed" in done.stdout
    assert "3 products per call" in done.stdout and "5 colours" in done.stdout
