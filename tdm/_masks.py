"""Shared pieces of the missing-value simulators: input checks, the local generator, column
draws and the logistic missingness model (Muzellec et al., 2020)."""

from __future__ import annotations

import math
from numbers import Real
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq
from scipy.special import expit

from tdm._validation import Interval, Options, validate_params

__all__ = [
    "Cut",
    "Mechanism",
    "RandomState",
    "RateScope",
    "check_data",
    "check_option",
    "check_rates",
    "keep_one_observed",
    "logistic_probabilities",
    "n_columns",
    "rng_from",
    "split_columns",
]

Mechanism = Literal["mcar", "mar", "mnarl", "mnarq", "mnarq_published"]
RateScope = Literal["table", "affected"]
Cut = Literal["both", "lower", "upper"]
RandomState = int | np.random.Generator | None

_OPEN_UNIT = Interval(Real, 0, 1, closed="neither")


def check_data(X: ArrayLike) -> NDArray[np.float64]:
    """Return ``X`` as a finite float64 matrix with at least 2 rows and 1 column."""
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"X must be a numeric 2-D array; could not convert it: {exc}") from exc
    if arr.ndim != 2:
        raise ValueError(
            f"X must be 2-D (n_samples, n_features); got {arr.ndim}-D shape {arr.shape}"
        )
    n, d = arr.shape
    if n < 2 or d < 1:
        raise ValueError(f"X must have at least 2 rows and 1 column; got shape {arr.shape}")
    if not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(
            "X must be complete and finite (it is the ground truth to mask); found "
            f"{arr[bad[0], bad[1]]} at row {bad[0]}, column {bad[1]}"
        )
    return arr


def check_rates(owner: str, **rates: Any) -> None:
    """Raise unless every rate is a number strictly between 0 and 1."""
    validate_params(owner, rates, {name: [_OPEN_UNIT] for name in rates})


def check_option(owner: str, name: str, value: Any, allowed: tuple[str, ...]) -> None:
    """Raise unless ``value`` is one of ``allowed``."""
    validate_params(owner, {name: value}, {name: [Options(allowed)]})


def rng_from(random_state: RandomState) -> np.random.Generator:
    """A local generator: never touches NumPy's global random state."""
    if isinstance(random_state, bool) or not (
        random_state is None or isinstance(random_state, int | np.integer | np.random.Generator)
    ):
        raise TypeError(
            "random_state must be None, an int or a numpy.random.Generator; got "
            f"{type(random_state).__name__}"
        )
    return np.random.default_rng(random_state)


def n_columns(share: float, d: int, *, round_up: bool) -> int:
    """Number of columns for a share of ``d``: floored (or ceiled), at least 1 and at most d."""
    # round() first: 0.3 * 10 is 3.0000000000000004 in floating point.
    exact = round(share * d, 9)
    k = math.ceil(exact) if round_up else math.floor(exact)
    return min(max(k, 1), d)


def split_columns(
    rng: np.random.Generator, d: int, k: int
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Draw ``k`` columns at random; return (chosen, others), each sorted."""
    perm = rng.permutation(d)
    return np.sort(perm[:k]), np.sort(perm[k:])


def _standardize(X: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per-column z-score (ddof=0); a constant column is only centred."""
    std = X.std(axis=0)
    std[std == 0.0] = 1.0
    return (X - X.mean(axis=0)) / std


def logistic_probabilities(
    inputs: NDArray[np.float64], n_targets: int, rate: float, rng: np.random.Generator
) -> NDArray[np.float64]:
    """Missing probabilities of ``n_targets`` columns from a random logistic model of ``inputs``.

    Each target column j gets weights ``w_j ~ N(0, I)`` on the standardised inputs; the linear
    predictor ``inputs @ w_j`` is rescaled to unit variance (so the model neither saturates nor
    flattens with the number of inputs) and its intercept ``b_j`` is the root, found by Brent's
    method, of ``mean_i sigmoid(inputs_i @ w_j + b_j) = rate``. The expected share of missing
    cells in column j is therefore exactly ``rate`` over the given rows.

    Returns
    -------
    ndarray of shape (n_samples, n_targets)
        Missing probability of each cell of the target columns.
    """
    weights = rng.standard_normal((inputs.shape[1], n_targets))
    eta = _standardize(inputs) @ weights
    scale = eta.std(axis=0)
    scale[scale == 0.0] = 1.0
    eta /= scale
    probs = np.empty_like(eta)
    for j in range(n_targets):
        column = eta[:, j]

        def excess(b: float, column: NDArray[np.float64] = column) -> float:
            return float(expit(column + b).mean()) - rate

        lo, hi = -1.0, 1.0
        while excess(lo) > 0.0:
            lo *= 2.0
        while excess(hi) < 0.0:
            hi *= 2.0
        intercept = brentq(excess, lo, hi, xtol=1e-12)
        probs[:, j] = expit(column + intercept)
    return probs


def keep_one_observed(mask: NDArray[np.bool_], rng: np.random.Generator) -> NDArray[np.bool_]:
    """Make one random cell observed again in every column that is entirely missing."""
    n = mask.shape[0]
    for j in np.flatnonzero(mask.all(axis=0)):
        mask[rng.integers(n), j] = False
    return mask
