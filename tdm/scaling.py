"""Per-column standardisation by the observed values, shared by the imputers and the pipeline."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ColumnScaling", "fit_column_scaling"]


@dataclass(frozen=True, eq=False)
class ColumnScaling:
    """``mean`` and ``scale`` per column; ``(X - mean) / scale`` standardises."""

    mean: np.ndarray
    scale: np.ndarray


def fit_column_scaling(X: np.ndarray) -> ColumnScaling:
    """Mean and standard deviation (ddof=0) of each column's observed values (NaN = missing).

    A constant column gets scale 1. Values are divided by the column's largest magnitude first,
    so that squares of huge values cannot overflow. A column with no observed value gets mean 0
    and scale 1.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)

    Returns
    -------
    ColumnScaling
    """
    values = np.asarray(X, dtype=np.float64)
    observed = ~np.isnan(values)
    magnitude = np.max(np.abs(values), axis=0, where=observed, initial=0.0)
    magnitude[~(magnitude > 0) | ~np.isfinite(magnitude)] = 1.0
    reduced = values / magnitude
    count = observed.sum(axis=0)
    safe = np.maximum(count, 1)
    mean = np.where(observed, reduced, 0.0).sum(axis=0) / safe
    var = np.where(observed, (reduced - mean) ** 2, 0.0).sum(axis=0) / safe
    scale = np.sqrt(var) * magnitude
    scale[~(scale > 0) | ~np.isfinite(scale)] = 1.0
    return ColumnScaling(mean=mean * magnitude, scale=scale)
