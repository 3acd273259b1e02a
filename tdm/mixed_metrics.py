"""Metrics of the mixed-type benchmark: numeric errors in column standard deviations and the
categorical error rate, on the masked cells of a table with columns of several kinds.

Numeric columns are float and integer columns; categorical columns are categorical and boolean
columns (:func:`benchmarks.mixed_data.column_kinds`). Every metric compares the complete table
``true`` with the imputed table ``imputed`` (same columns, same rows) on the cells where
``mask`` is ``True`` (missing).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from tdm.columns import column_kinds

__all__ = ["categorical_error_rate", "numeric_mae_sd", "numeric_rmse_sd"]

_NUMERIC = ("float", "integer")


def _check(true: pd.DataFrame, imputed: pd.DataFrame, mask: ArrayLike) -> NDArray[np.bool_]:
    if not isinstance(true, pd.DataFrame) or not isinstance(imputed, pd.DataFrame):
        raise TypeError("true and imputed must be pandas DataFrames")
    if list(imputed.columns) != list(true.columns) or imputed.shape != true.shape:
        raise ValueError(
            f"imputed must have the columns and shape of true {true.shape}; got "
            f"{imputed.shape} with columns {list(imputed.columns)}"
        )
    missing = np.asarray(mask)
    if missing.dtype != np.bool_ or missing.shape != true.shape:
        raise ValueError(f"mask must be boolean of shape {true.shape}; got {missing.dtype}, "
                         f"{missing.shape}")  # fmt: skip
    return missing


def _scaled_numeric_errors(
    true: pd.DataFrame, imputed: pd.DataFrame, mask: ArrayLike
) -> NDArray[np.float64]:
    """Imputed minus true at the masked numeric cells, each over its column's std (ddof=0)."""
    missing = _check(true, imputed, mask)
    errors = []
    for j, (name, kind) in enumerate(column_kinds(true).items()):
        rows = missing[:, j]
        if kind not in _NUMERIC or not rows.any():
            continue
        truth = true[name].astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan)
        guess = imputed[name].astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan)
        if not np.isfinite(guess[rows]).all():
            raise ValueError(f"column {name!r}: an imputed value is missing or not finite")
        scale = float(np.std(truth))
        errors.append((guess[rows] - truth[rows]) / (scale if scale > 0 else 1.0))
    return np.concatenate(errors) if errors else np.empty(0)


def numeric_mae_sd(true: pd.DataFrame, imputed: pd.DataFrame, mask: ArrayLike) -> float:
    """Mean absolute error over the masked numeric cells, in column standard deviations.

    Each cell's absolute error is divided by its column's standard deviation in ``true``
    (``ddof=0``; a constant column counts in its own units), then one mean is taken over all
    masked numeric cells of the table. On z-scored data this is :func:`tdm.metrics.mae`.

    Parameters
    ----------
    true : pandas.DataFrame
        The complete table.
    imputed : pandas.DataFrame
        The imputed table, same columns and rows; finite at the masked numeric cells.
    mask : ndarray of bool, shape (n_samples, n_features)
        ``True`` where a cell was missing.

    Returns
    -------
    float
        The error, or NaN when no numeric cell is masked.
    """
    errors = _scaled_numeric_errors(true, imputed, mask)
    return float(np.mean(np.abs(errors))) if errors.size else float("nan")


def numeric_rmse_sd(true: pd.DataFrame, imputed: pd.DataFrame, mask: ArrayLike) -> float:
    """Root mean squared error over the masked numeric cells, in column standard deviations.

    As :func:`numeric_mae_sd` with squared errors; NaN when no numeric cell is masked.
    """
    errors = _scaled_numeric_errors(true, imputed, mask)
    return float(np.sqrt(np.mean(np.square(errors)))) if errors.size else float("nan")


def categorical_error_rate(true: pd.DataFrame, imputed: pd.DataFrame, mask: ArrayLike) -> float:
    """Share of the masked categorical and boolean cells whose imputed label is wrong.

    Parameters
    ----------
    true, imputed, mask
        As in :func:`numeric_mae_sd`. A masked cell left missing counts as wrong.

    Returns
    -------
    float
        In [0, 1], or NaN when no categorical or boolean cell is masked.
    """
    missing = _check(true, imputed, mask)
    wrong = 0
    total = 0
    for j, (name, kind) in enumerate(column_kinds(true).items()):
        rows = missing[:, j]
        if kind in _NUMERIC or not rows.any():
            continue
        truth = true[name].astype(object).to_numpy()[rows]
        guess = imputed[name].astype(object).to_numpy()[rows]
        same = np.array(
            [g is not None and not pd.isna(g) and g == t for g, t in zip(guess, truth, strict=True)]
        )
        wrong += int((~same).sum())
        total += int(rows.sum())
    return wrong / total if total else float("nan")
