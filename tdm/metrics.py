"""Imputation metrics: those of the TDM paper (MAE, RMSE, W2 and downstream SVM accuracy) for
numeric matrices, and for tables of mixed column kinds the numeric errors in column standard
deviations and the categorical error rate.

The matrix metrics compare a ground-truth matrix ``X_true`` with an imputed matrix ``X_imputed``
(both of shape ``(n_samples, n_features)``) on the cells marked ``True`` (missing) in ``mask``;
a mask with no missing cell raises ``ValueError``: the metrics are undefined there. The table
metrics compare a complete DataFrame ``true`` with the imputed ``imputed`` (same columns, same
rows) on the masked cells; numeric columns are float and integer columns, categorical ones
categorical and boolean columns (:func:`tdm.columns.column_kinds`).

References
----------
H. Zhao, K. Sun, A. Dezfouli and E. V. Bonilla. Transformed distribution matching for missing
value imputation. ICML 2023, Section 5 ("Evaluation metrics").

B. Muzellec, J. Josse, C. Boyer and M. Cuturi. Missing data imputation using optimal transport.
ICML 2020.
"""

from __future__ import annotations

import warnings

import numpy as np
import ot
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy.spatial.distance import cdist
from sklearn.model_selection import RepeatedStratifiedKFold, cross_val_score
from sklearn.svm import SVC

from tdm.columns import NUMERIC_KINDS, column_kinds

__all__ = [
    "categorical_error_rate",
    "mae",
    "numeric_mae_sd",
    "numeric_rmse_sd",
    "rmse",
    "svm_accuracy",
    "wasserstein2",
]


def _as_matrix(X: ArrayLike, name: str) -> NDArray[np.float64]:
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be a numeric 2-D array; could not convert it: {exc}"
        ) from exc
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {arr.shape}")
    return arr


def _bool_mask(mask: ArrayLike, shape: tuple[int, ...]) -> NDArray[np.bool_]:
    """``mask`` as booleans of ``shape``: booleans (nullable ones without NA too) or 0/1."""
    arr = np.asarray(mask)
    if arr.dtype == object:  # pandas' nullable booleans
        if pd.isna(arr).any():
            raise ValueError("mask has missing (NA) entries: each must be True (missing) or False")
        if all(isinstance(value, bool | np.bool_) for value in arr.flat):
            arr = arr.astype(bool)
    if arr.dtype != np.bool_:
        if not (np.issubdtype(arr.dtype, np.number) and np.isin(arr, (0, 1)).all()):
            raise ValueError(
                f"mask must be boolean (True = missing) or 0/1; got dtype {arr.dtype} with other "
                "values"
            )
        arr = arr.astype(bool)
    if arr.shape != shape:
        raise ValueError(f"mask must have the shape of the data {shape}; got {arr.shape}")
    return arr


def _as_mask(mask: ArrayLike, shape: tuple[int, ...]) -> NDArray[np.bool_]:
    arr = _bool_mask(mask, shape)
    if not arr.any():
        raise ValueError("mask has no missing cell (no True value): the metric is undefined")
    return arr


def _check_inputs(
    X_true: ArrayLike, X_imputed: ArrayLike, mask: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    true = _as_matrix(X_true, "X_true")
    imputed = _as_matrix(X_imputed, "X_imputed")
    if imputed.shape != true.shape:
        raise ValueError(
            f"X_imputed must have the shape of X_true {true.shape}; got {imputed.shape}"
        )
    return true, imputed, _as_mask(mask, true.shape)


def _check_finite(values: NDArray[np.float64], name: str, where: str) -> None:
    if not np.isfinite(values).all():
        raise ValueError(f"{name} has NaN or inf {where}; every compared value must be finite")


def _masked_errors(X_true: ArrayLike, X_imputed: ArrayLike, mask: ArrayLike) -> NDArray[np.float64]:
    true, imputed, missing = _check_inputs(X_true, X_imputed, mask)
    _check_finite(true[missing], "X_true", "at masked cells")
    _check_finite(imputed[missing], "X_imputed", "at masked cells")
    errors: NDArray[np.float64] = imputed[missing] - true[missing]
    return errors


def mae(X_true: ArrayLike, X_imputed: ArrayLike, mask: ArrayLike) -> float:
    """Mean absolute error over the missing cells.

    ``MAE = (1 / |M|) * sum_{(i, j) in M} |X_imputed[i, j] - X_true[i, j]|`` where ``M`` is the
    set of cells with ``mask[i, j] = True``: one mean over all missing cells of the table (not a
    mean of per-column means). Observed cells are ignored.

    Parameters
    ----------
    X_true : array-like of shape (n_samples, n_features)
        Ground truth; finite at the masked cells.
    X_imputed : array-like of shape (n_samples, n_features)
        Imputed data; finite at the masked cells.
    mask : array-like of bool of shape (n_samples, n_features)
        ``True`` where the value was missing; at least one ``True``.

    Returns
    -------
    float
        The mean absolute error.

    Raises
    ------
    ValueError
        If the shapes differ, the mask has no missing cell, or a compared value is not finite.
    """
    return float(np.mean(np.abs(_masked_errors(X_true, X_imputed, mask))))


def rmse(X_true: ArrayLike, X_imputed: ArrayLike, mask: ArrayLike) -> float:
    """Root mean squared error over the missing cells.

    ``RMSE = sqrt((1 / |M|) * sum_{(i, j) in M} (X_imputed[i, j] - X_true[i, j])**2)``: the
    square root of one mean over all missing cells of the table. Parameters and errors as in
    :func:`mae`; returns the root mean squared error.
    """
    return float(np.sqrt(np.mean(np.square(_masked_errors(X_true, X_imputed, mask)))))


def wasserstein2(
    X_true: ArrayLike,
    X_imputed: ArrayLike,
    mask: ArrayLike,
    *,
    squared: bool = True,
    half: bool = False,
    max_rows: int | None = 5000,
) -> float:
    """Wasserstein-2 distance between the imputed rows and the true rows.

    Only the ``m`` rows with at least one missing cell are compared (whole rows, observed cells
    included). Both sets get uniform weights ``1/m`` and the cost of matching true row ``i`` with
    imputed row ``k`` is the squared Euclidean distance ``||X_true[i] - X_imputed[k]||^2``; the
    exact optimal-transport cost (POT's network simplex, :func:`ot.emd2`) is ``W2^2``::

        W2^2 = min_{P in U(1/m, 1/m)} sum_{i, k} P[i, k] * ||X_true[i] - X_imputed[k]||^2

    What is returned:

    - ``squared=True, half=False`` (default): ``W2^2``.
    - ``squared=True, half=True``: ``W2^2 / 2``, **the quantity the published TDM code reports
      as "OT"** (its cost matrix is the squared distance divided by 2, and it is computed only
      when fewer than 5000 rows have a missing cell). Use this to compare with the paper's tables.
    - ``squared=False``: ``W2`` (``half`` must then be ``False``).

    Parameters
    ----------
    X_true, X_imputed, mask
        As in :func:`mae`; both matrices finite on the compared rows.
    squared : bool, default=True
        Return the squared distance.
    half : bool, default=False
        Divide the squared distance by 2 (the published convention).
    max_rows : int or None, default=5000
        Largest number of compared rows. Exact OT needs ``O(m^2)`` memory and roughly ``O(m^3)``
        time; above the limit the function warns and returns NaN. ``None`` removes the limit.

    Returns
    -------
    float
        The distance (see above), or NaN when more than ``max_rows`` rows would be compared.

    Raises
    ------
    ValueError
        If the shapes differ, the mask has no missing cell, ``half=True`` with ``squared=False``,
        or a compared value is not finite.

    Warns
    -----
    RuntimeWarning
        When more than ``max_rows`` rows have a missing cell (NaN is returned).
    """
    if half and not squared:
        raise ValueError(
            "half=True divides the squared distance by 2 (the published W2^2/2); it needs "
            "squared=True"
        )
    if max_rows is not None and (isinstance(max_rows, bool) or max_rows < 1):
        raise ValueError(f"max_rows must be a positive int or None; got {max_rows!r}")
    true, imputed, missing = _check_inputs(X_true, X_imputed, mask)
    rows = missing.any(axis=1)
    m = int(rows.sum())
    if max_rows is not None and m > max_rows:
        warnings.warn(
            f"wasserstein2: {m} rows have a missing cell, more than max_rows={max_rows}; "
            "returning NaN. Raise max_rows (or pass None) to compute it: exact OT costs O(m^2) "
            "memory and about O(m^3) time.",
            RuntimeWarning,
            stacklevel=2,
        )
        return float("nan")
    a, b = true[rows], imputed[rows]
    _check_finite(a, "X_true", "on the rows with a missing cell")
    _check_finite(b, "X_imputed", "on the rows with a missing cell")
    cost = cdist(a, b, metric="sqeuclidean")
    weights = np.full(m, 1.0 / m)
    # The default iteration cap of the network simplex is too low for thousands of rows.
    value = float(ot.emd2(weights, weights, cost, numItermax=max(100_000, 50 * m * m)))
    if half:
        return value / 2.0
    return value if squared else float(np.sqrt(max(value, 0.0)))


def svm_accuracy(
    X_imputed: ArrayLike,
    y: ArrayLike,
    *,
    n_splits: int = 5,
    n_repeats: int = 10,
    random_state: int | np.random.RandomState | None = None,
) -> float:
    """Downstream classification accuracy of an RBF SVM on the imputed data.

    ``SVC(kernel="rbf", gamma="auto")`` (``gamma = 1 / n_features``, ``C = 1``) is scored by
    stratified, shuffled ``n_splits``-fold cross-validation, repeated ``n_repeats`` times with
    different shuffles (:class:`~sklearn.model_selection.RepeatedStratifiedKFold`); the result
    is the mean accuracy over all ``n_splits * n_repeats`` folds, which equals the mean over
    repeats of the per-repeat CV accuracy. The data are used as given (the paper standardises
    every dataset before masking).

    Parameters
    ----------
    X_imputed : array-like of shape (n_samples, n_features)
        Complete, finite features.
    y : array-like of shape (n_samples,)
        Class labels; every class needs at least ``n_splits`` members.
    n_splits : int, default=5
        Number of CV folds (paper: 5).
    n_repeats : int, default=10
        Number of shuffled repetitions (paper: results averaged over 10 runs).
    random_state : int, numpy.random.RandomState or None, default=None
        Seed of the fold shuffles (keyword-only).

    Returns
    -------
    float
        Mean accuracy in [0, 1].

    Raises
    ------
    ValueError
        If ``X_imputed`` is not finite, the lengths differ, or the fold counts are invalid.
    """
    X = _as_matrix(X_imputed, "X_imputed")
    _check_finite(X, "X_imputed", "(svm_accuracy needs complete data)")
    labels = np.asarray(y)
    if labels.ndim != 1 or labels.shape[0] != X.shape[0]:
        raise ValueError(
            f"y must be 1-D with one label per row of X_imputed ({X.shape[0]}); got shape "
            f"{labels.shape}"
        )
    for name, value, low in (("n_splits", n_splits, 2), ("n_repeats", n_repeats, 1)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            raise ValueError(f"{name} must be an int >= {low}; got {value!r}")
    _, counts = np.unique(labels, return_counts=True)
    if counts.min() < n_splits:
        raise ValueError(
            f"every class of y needs at least n_splits={n_splits} members for stratified CV; "
            f"the smallest has {counts.min()}"
        )
    if random_state is None:  # a fresh seed, without touching NumPy's global random state
        random_state = int(np.random.default_rng().integers(2**31 - 1))
    cv = RepeatedStratifiedKFold(n_splits=n_splits, n_repeats=n_repeats, random_state=random_state)
    # The SVC's seed only shuffles for probability estimates (not made here); without one it
    # draws from NumPy's global random state.
    svc = SVC(kernel="rbf", gamma="auto", random_state=0)
    scores = cross_val_score(svc, X, labels, cv=cv, scoring="accuracy", error_score="raise")
    return float(np.mean(scores))


def _check_tables(true: pd.DataFrame, imputed: pd.DataFrame, mask: ArrayLike) -> NDArray[np.bool_]:
    if not isinstance(true, pd.DataFrame) or not isinstance(imputed, pd.DataFrame):
        raise TypeError("true and imputed must be pandas DataFrames")
    if list(imputed.columns) != list(true.columns) or imputed.shape != true.shape:
        raise ValueError(
            f"imputed must have the columns and shape of true {true.shape}; got "
            f"{imputed.shape} with columns {list(imputed.columns)}"
        )
    return _bool_mask(mask, true.shape)


def _scaled_numeric_errors(
    true: pd.DataFrame, imputed: pd.DataFrame, mask: ArrayLike
) -> NDArray[np.float64]:
    """Imputed minus true at the masked numeric cells, each over its column's std (ddof=0)."""
    missing = _check_tables(true, imputed, mask)
    errors = []
    for j, (name, kind) in enumerate(column_kinds(true).items()):
        rows = missing[:, j]
        if kind not in NUMERIC_KINDS or not rows.any():
            continue
        truth = true[name].astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan)
        guess = imputed[name].astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan)
        if not np.isfinite(guess[rows]).all():
            raise ValueError(f"column {name!r}: an imputed value is missing or not finite")
        if not np.isfinite(truth[rows]).all():
            raise ValueError(f"column {name!r}: a true value at a masked cell is missing")
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
    missing = _check_tables(true, imputed, mask)
    wrong = 0
    total = 0
    for j, (name, kind) in enumerate(column_kinds(true).items()):
        rows = missing[:, j]
        if kind in NUMERIC_KINDS or not rows.any():
            continue
        truth = true[name].astype(object).to_numpy()[rows]
        guess = imputed[name].astype(object).to_numpy()[rows]
        same = np.array(
            [g is not None and not pd.isna(g) and g == t for g, t in zip(guess, truth, strict=True)]
        )
        wrong += int((~same).sum())
        total += int(rows.sum())
    return wrong / total if total else float("nan")
