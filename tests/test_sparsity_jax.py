"""``sg.sparse_jacobian`` and ``sg.sparse_hessian`` against JAX's numbers: the dense Jacobians
and Hessians ``jax.jacfwd`` / ``jax.hessian`` computed (float64, CPU, JAX 0.10.2) of the same
banded, block, arrowhead, random sparse, Bratu stencil and Rosenbrock functions written in
jax.numpy, at fixed points, stored in tests/data/sparse_jax.npz (tests/data/sparse_jax.py made
it). Equal to 1e-13 relative to the largest entry, in every mode and colouring; no JAX here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import simplegrad as sg

sparse = pytest.importorskip("scipy.sparse")
from test_sparsity_products import (  # noqa: E402
    BLOCKS,
    HESSIANS,
    JACOBIANS,
    PAIRS,
)

DATA = np.load(Path(__file__).resolve().parent / "data" / "sparse_jax.npz")
HESSIAN_NAMES = ["rosenbrock", "arrowhead", "block", "random_sparse", "bratu"]


def close(got, want) -> None:
    got = got.toarray()
    assert got.shape == want.shape
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 1e-13 * scale, np.abs(got - want).max() / scale


def test_the_data_is_of_these_functions():
    # the random functions' constants drawn alike here and where JAX's numbers were made
    np.testing.assert_array_equal(DATA["pairs"], PAIRS)
    np.testing.assert_array_equal(DATA["blocks"], BLOCKS)


@pytest.mark.parametrize("mode", ["fwd", "rev", "auto"])
@pytest.mark.parametrize("f", JACOBIANS, ids=lambda f: f.__name__)
def test_sparse_jacobian_equals_jaxs(f, mode):
    want = DATA[f"jacobian_{f.__name__}"]
    J = sg.sparse_jacobian(f, mode)(DATA["x"])
    close(J, want)
    # the pattern holds every entry JAX finds nonzero
    assert not ((want != 0) & ~sg.jacobian_sparsity(f)(DATA["x"]).toarray()).any()


@pytest.mark.parametrize("method", ["star", "acyclic"])
@pytest.mark.parametrize("name,f", list(zip(HESSIAN_NAMES, HESSIANS)), ids=HESSIAN_NAMES)
def test_sparse_hessian_equals_jaxs(name, f, method):
    want = DATA[f"hessian_{name}"]
    close(sg.sparse_hessian(f, method)(DATA["x"]), want)
    close(sg.sparse_hessian(f, method)(DATA["x"]).T, want)        # symmetric, as JAX's
    assert not ((want != 0) & ~sg.hessian_sparsity(f)(DATA["x"]).toarray()).any()


def extended_rosenbrock(x):
    odd, even = x[0::2], x[1::2]
    return (100.0 * (even - odd ** 2) ** 2 + (1.0 - odd) ** 2).sum()


@pytest.mark.parametrize("name", ["rosenbrock", "extended_rosenbrock"])
@pytest.mark.parametrize("method", ["star", "acyclic"])
def test_the_rosenbrock_hessians_at_400_variables(name, method):
    """JAX's nonzero entries (row, column, value) of the chained (tridiagonal) and extended
    (2 x 2 blocks) Rosenbrock Hessians at n = 400: the same entries, the same values."""
    f = HESSIANS[0] if name == "rosenbrock" else extended_rosenbrock
    (rows, cols), values = DATA[f"big_{name}"], DATA[f"big_{name}_values"]
    want = sparse.csr_array((values, (rows, cols)), shape=(400, 400))
    H = sg.sparse_hessian(f, method)(DATA["big_x"])
    assert H.nnz == want.nnz == (1198 if name == "rosenbrock" else 800)
    close(H, want.toarray())
