"""Column-mean imputation, the paper's simplest baseline."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from benchmarks.baselines._base import BaseImputer, RandomState

__all__ = ["MeanImputer"]


class MeanImputer(BaseImputer):
    """Replace every missing value by the mean of the observed values of its column."""

    def __init__(self, *, random_state: RandomState = None) -> None:
        self.random_state = random_state

    def _fit(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> None:
        self.mean_ = np.nanmean(X, axis=0)

    def _impute(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        return np.where(mask, self.mean_, X)
