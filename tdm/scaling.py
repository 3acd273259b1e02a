"""Per-column standardisation by the observed values, shared by the imputers and the pipeline."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "FAR_RATIO",
    "MAX_STANDARDISED",
    "ColumnScaling",
    "far_values",
    "first_too_far",
    "fit_column_scaling",
]

FAR_RATIO = 1_000.0
"""How many times farther from its column's median than every other observed value a few
values must lie to be taken for likely codes (:func:`far_values`)."""

MAX_STANDARDISED = 1e15
"""The farthest an observed value may lie from its column's mean, in standard deviations: no
imputation is meaningful beyond, and the squares of values much farther overflow float32 in
the transport costs. Within one table it cannot be reached (a column's values lie within
``sqrt(2 n)`` standard deviations of its mean), so only float64's own overflow or new rows
meet it."""


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


def first_too_far(standardised: np.ndarray) -> tuple[int, int] | None:
    """The (row, column) of the first cell of a standardised 2-D array (NaN: missing) more than
    :data:`MAX_STANDARDISED` from 0, infinite included: a value too far from its column's mean
    to standardise (a huge code for "unknown", say); ``None`` where there is none."""
    too_far = np.abs(standardised) > MAX_STANDARDISED  # NaN compares False
    if not too_far.any():
        return None
    column = int(np.flatnonzero(too_far.any(axis=0))[0])
    return int(np.flatnonzero(too_far[:, column])[0]), column


def far_values(column: np.ndarray) -> np.ndarray:
    """The few observed values of ``column`` (no NaN) that lie more than :data:`FAR_RATIO`
    times farther from its median than every other value: at most 1% of the values (five where
    that is more, fewer than half); empty where there are none. Codes such as 2147483647 for
    "unknown" look like this; the largest values of a heavy-tailed column (Cauchy, log-normal)
    lie a few times farther than the next."""
    if column.size < 3:
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
