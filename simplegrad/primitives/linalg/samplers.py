"""The inputs the linalg check cases are drawn from: random matrices that are well
conditioned for the primitive they feed (distinct eigen- and singular values, a determinant
away from 0, positive definite)."""

from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------- square matrices


def diagonally_dominant(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Square matrices with entries in [-1, 1) plus n on the diagonal: well conditioned."""
    n = shape[-1]
    return rng.uniform(-1.0, 1.0, shape) + n * np.eye(n)


def near_identity(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """I plus entries in [-1/n, 1/n): well conditioned, with a determinant of order 1."""
    n = shape[-1]
    return np.eye(n) + rng.uniform(-1.0, 1.0, shape) / n


def negative_det(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Diagonally dominant matrices with the first row negated (negative determinant)."""
    a = diagonally_dominant(rng, shape)
    a[..., 0, :] *= -1.0
    return a


def positive_definite(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Symmetric positive definite matrices B B^T / n + I."""
    b = rng.uniform(-1.0, 1.0, shape)
    return b @ np.swapaxes(b, -1, -2) / shape[-1] + np.eye(shape[-1])


MATRIX = (diagonally_dominant,)

# ---------------------------------------------------------------- spread spectra


def symmetric_spread(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Matrices whose symmetric part has eigenvalues near 1, 2, ..., n (gaps >= 0.5), plus an
    antisymmetric part that the symmetrisation removes."""
    n = shape[-1]
    q, _ = np.linalg.qr(rng.normal(size=shape))
    lam = np.arange(1.0, n + 1) + rng.uniform(-0.25, 0.25, shape[:-1])
    k = rng.uniform(-0.5, 0.5, shape)
    return (q * lam[..., None, :]) @ np.swapaxes(q, -1, -2) + k - np.swapaxes(k, -1, -2)


def spread_singular(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Matrices with singular values near 1, 2, ..., min(m, n) (gaps >= 0.5)."""
    m, n = shape[-2:]
    k = min(m, n)
    u, _ = np.linalg.qr(rng.normal(size=shape[:-2] + (m, k)))
    v, _ = np.linalg.qr(rng.normal(size=shape[:-2] + (n, k)))
    s = np.arange(1.0, k + 1) + rng.uniform(-0.25, 0.25, shape[:-2] + (k,))
    return (u * s[..., None, :]) @ np.swapaxes(v, -1, -2)
