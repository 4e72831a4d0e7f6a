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


@pytest.fixture(autouse=True, scope="session")
def _kernel_cache(tmp_path_factory: pytest.TempPathFactory):
    """Compiled numba kernels go to a directory of this run, never to the user's cache (a test
    that needs another sets ``SIMPLEGRAD_CACHE_DIR`` itself)."""
    import os
    before = os.environ.get("SIMPLEGRAD_CACHE_DIR")
    os.environ["SIMPLEGRAD_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernels"))
    yield
    if before is None:
        del os.environ["SIMPLEGRAD_CACHE_DIR"]
    else:
        os.environ["SIMPLEGRAD_CACHE_DIR"] = before
