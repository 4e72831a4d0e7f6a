"""Every example runs with --quick, prints its checks and exits 0."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

CASES = [
    ("seed_trace.py", "same entries"),
    ("makemore_backprop.py", "largest difference"),
    ("forward_vs_reverse.py", "all checks passed"),
    ("higher_order.py", "all checks passed"),
    ("lanczos_hessian.py", "all checks passed"),
    ("ode_fit.py", "all checks passed"),
    ("newton_solve.py", "all checks passed"),
    pytest.param("poisson_pinn.py", "all checks passed", marks=pytest.mark.slow),
    pytest.param("hutchinson.py", "all checks passed", marks=pytest.mark.slow),
    pytest.param("train_digits.py", "largest gradient error seen", marks=pytest.mark.slow),
    pytest.param("train_digits.py --habit jax", "jax habit", marks=pytest.mark.slow),
    pytest.param("dask_logistic_regression.py", "all checks passed", marks=[
        pytest.mark.slow, pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                                             reason="needs simplegrad[dask]")]),
]


@pytest.mark.parametrize("script, expected", CASES)
def test_example_runs_quick(script, expected, tmp_path):
    env = {**os.environ, "COLUMNS": "100", "MPLBACKEND": "Agg"}
    script, *extra = script.split()
    args = [sys.executable, str(EXAMPLES / script), "--quick", *extra]
    if script == "hutchinson.py":
        args += ["--plot", str(tmp_path / "h.png")]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert expected in done.stdout


def test_train_digits_without_sklearn_or_torch(tmp_path):
    """Without the extras: synthetic data, finite-difference checks, and it says so."""
    hide = tmp_path / "hide"
    for name in ("sklearn", "torch"):
        (hide / name).mkdir(parents=True)
        (hide / name / "__init__.py").write_text(f"raise ImportError('{name} hidden')\n")
    env = {**os.environ, "PYTHONPATH": str(hide), "COLUMNS": "100"}
    done = subprocess.run([sys.executable, str(EXAMPLES / "train_digits.py"), "--quick"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "synthetic" in done.stdout and "finite differences" in done.stdout
    done = subprocess.run([sys.executable, str(EXAMPLES / "train_digits.py")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1 and "scikit-learn" in done.stderr
