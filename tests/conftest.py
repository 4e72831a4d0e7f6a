"""Shared fixtures: every test starts from the same random state."""

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _seed_numpy() -> None:
    """Seed numpy's global RNG before each test, so any use of it is reproducible."""
    np.random.seed(0)


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh generator with a fixed seed."""
    return np.random.default_rng(0)
