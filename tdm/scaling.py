"""Per-column standardisation by the observed values, shared by the imputers and the pipeline."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "FAR_RATIO",
    "MAX_STANDARDISED",
    "MIN_FAR_ROWS",
    "ColumnScaling",
    "far_values",
    "first_too_far",
    "fit_column_scaling",
]

FAR_RATIO = 1_000.0
"""How many times farther from its column's median than every other observed value a few
values must lie to be taken for likely codes (:func:`far_values`) ..."""
MIN_FAR_ROWS = 20
"""... among at least this many observed values."""

MAX_STANDARDISED = 1e17
"""The farthest a new row's value may lie from the mean of the values a column was fitted on,
in their standard deviations: the squares of values much farther overflow float32 in the
transport costs. Within the table a column is fitted on, its values lie within ``sqrt(2 n)``
standard deviations of its mean."""


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


def first_too_far(standardised: np.ndarray, limit: float) -> tuple[int, int] | None:
    """The (row, column) of the first cell of a standardised 2-D array (NaN: missing) that is
    infinite (its value too far from its column's mean to standardise in float64) or farther
    than ``limit`` from 0; ``None`` where there is none."""
    too_far = np.abs(standardised) > limit  # NaN compares False; inf > inf is False
    too_far |= np.isinf(standardised)
    if not too_far.any():
        return None
    column = int(np.flatnonzero(too_far.any(axis=0))[0])
    return int(np.flatnonzero(too_far[:, column])[0]), column


def far_values(column: np.ndarray) -> np.ndarray:
    """The few observed values of ``column`` (no NaN) that lie more than :data:`FAR_RATIO`
    times farther from its median than every other value: at most 1% of the values (five where
    that is more, fewer than half), of :data:`MIN_FAR_ROWS` or more; empty where there are none.
    Codes such as 2147483647 for "unknown" look like this; the largest values of a heavy-tailed
    column (Cauchy, log-normal) lie a few times farther than the next."""
    if column.size < MIN_FAR_ROWS:  # a few values tell no code from a spread
        return column[:0]
    with np.errstate(over="ignore"):  # values near float64's largest: an infinite distance
        distance = np.abs(column - np.median(column))
    limit = min(max(5, distance.size // 100), (distance.size - 1) // 2)
    cut = distance.size - limit - 1
    top = np.sort(np.partition(distance, cut)[cut:])[::-1]  # the limit + 1 largest
    for k in range(1, top.size):
        if top[k] > 0 and top[k - 1] / FAR_RATIO > top[k]:
            return np.sort(column[distance / FAR_RATIO > top[k]])
    return column[:0]
