"""Small seeded datasets shared by the library tests."""

from __future__ import annotations

import numpy as np
import pytest


def low_rank(n: int = 256, d: int = 6, rank: int = 2, seed: int = 0) -> np.ndarray:
    """Correlated data where conditional imputation clearly beats the column mean."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, rank)) @ rng.normal(size=(rank, d)) + 0.1 * rng.normal(size=(n, d))


def mcar(X: np.ndarray, p: float, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``X`` with a share ``p`` of cells NaN (never a whole column); returns (X_nan, mask)."""
    mask = np.random.default_rng(seed).random(X.shape) < p
    mask[0] = False  # every column keeps an observed value
    X_nan = X.copy()
    X_nan[mask] = np.nan
    return X_nan, mask


@pytest.fixture
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X = low_rank()
    X_nan, mask = mcar(X, 0.2)
    return X, X_nan, mask
