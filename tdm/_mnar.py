"""Missing-not-at-random simulators: the logistic model of masked inputs (MNARL) and quantile
censoring (MNARQ), after Muzellec et al. (2020); see :mod:`tdm.simulate` for the conventions."""

from __future__ import annotations

import math
from typing import get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tdm._masks import (
    Cut,
    RandomState,
    RateScope,
    check_data,
    check_option,
    check_rates,
    keep_one_observed,
    logistic_probabilities,
    n_columns,
    rng_from,
    split_columns,
)

__all__ = [
    "simulate_mnar_logistic",
    "simulate_mnar_quantile",
    "simulate_mnar_quantile_published",
]


def simulate_mnar_logistic(
    X: ArrayLike,
    p: float,
    *,
    p_params: float = 0.3,
    exclude_inputs: bool = True,
    random_state: RandomState = None,
) -> NDArray[np.bool_]:
    """Missing not at random through a logistic model whose inputs can be missing (MNARL).

    With ``exclude_inputs=True`` (the paper's MNARL): a random ``max(floor(p_params *
    n_features), 1)`` columns are the *inputs* of a logistic model built as in
    :func:`simulate_mar` (random weights, unit-variance predictor, intercept by root search) that
    gives every other column rate ``p``; then the input columns are themselves masked MCAR with
    rate ``p``. The missingness of the other columns thus depends on input values that are often
    missing: MNAR.

    With ``exclude_inputs=False``: every column is an input and every column is masked by the
    logistic model of all columns (its own value included), at rate ``p``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Complete, finite data; ``n_features >= 2`` when ``exclude_inputs``.
    p : float
        Missing rate in (0, 1). Every column has expected rate ``p``, so ``p`` is also the
        expected share of missing cells in the whole table.
    p_params : float, default=0.3
        Share of columns used as inputs of the logistic model, in (0, 1) (at least one).
        Ignored when ``exclude_inputs=False``.
    exclude_inputs : bool, default=True
        See above.
    random_state : int, numpy.random.Generator or None, default=None
        Seed or generator (keyword-only).

    Returns
    -------
    mask : ndarray of bool, shape (n_samples, n_features)
        ``True`` where the value is missing.

    References
    ----------
    Muzellec et al. (2020), Section 4 ("MNAR, logistic masking with masked inputs");
    Zhao et al. (2023), Section 5 (MNARL).
    """
    arr = check_data(X)
    check_rates("simulate_mnar_logistic", p=p, p_params=p_params)
    p = float(p)
    p_params = float(p_params)
    if not isinstance(exclude_inputs, bool | np.bool_):
        raise TypeError(f"exclude_inputs must be a bool; got {type(exclude_inputs).__name__}")
    n, d = arr.shape
    rng = rng_from(random_state)
    mask = np.zeros((n, d), dtype=bool)
    if not exclude_inputs:
        probs = logistic_probabilities(arr, d, p, rng)
        mask[:] = rng.random((n, d)) < probs
        return keep_one_observed(mask, rng)
    if d < 2:
        raise ValueError(
            f"simulate_mnar_logistic with exclude_inputs=True needs at least 2 columns; got {d}"
        )
    inputs, targets = split_columns(rng, d, n_columns(p_params, d, round_up=False))
    probs = logistic_probabilities(arr[:, inputs], targets.size, p, rng)
    mask[:, targets] = rng.random((n, targets.size)) < probs
    mask[:, inputs] = rng.random((n, inputs.size)) < p
    return keep_one_observed(mask, rng)


def _tail_cells(
    values: NDArray[np.float64], low: NDArray[np.float64], high: NDArray[np.float64], cut: str
) -> NDArray[np.bool_]:
    if cut == "lower":
        return values <= low
    if cut == "upper":
        return values >= high
    return (values <= low) | (values >= high)


def simulate_mnar_quantile(
    X: ArrayLike,
    p: float,
    *,
    q: float = 0.25,
    p_params: float = 0.7,
    cut: Cut = "both",
    rate_scope: RateScope = "table",
    random_state: RandomState = None,
) -> NDArray[np.bool_]:
    """Missing not at random by quantile censorship: only tail values go missing (MNARQ).

    A random ``ceil(p_params * n_features)`` columns (at least 1) are *affected*. In each, the
    *eligible* cells are those at or below the column's ``q``-quantile and/or at or above its
    ``(1 - q)``-quantile (``cut``; quantiles by linear interpolation, ``numpy.quantile``'s
    default). Every eligible cell is then missing independently with one probability ``r``,
    chosen so that the expected number of missing cells is the target (see ``p``). Cells
    between the quantiles are never missing, so whether a value is missing depends on the value
    itself: MNAR.

    This differs from the published code, which removes eligible cells with probability ``p``
    (so it reaches only ``p`` times the eligible share) and, as called in the TDM experiments
    (``q=0.75``, ``cut="both"``), makes every cell eligible; see
    :func:`simulate_mnar_quantile_published`.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Complete, finite data.
    p : float
        Missing rate in (0, 1). With ``rate_scope="table"``: the expected share of missing cells
        in the whole table (``r = p * n_samples * n_features / n_eligible``). With
        ``rate_scope="affected"``: the expected share within the affected columns.
    q : float, default=0.25
        Tail size: in (0, 0.5) for ``cut="both"``, in (0, 1) for ``"lower"`` or ``"upper"``.
    p_params : float, default=0.7
        Share of columns with missing values, in (0, 1), rounded up. 0.7 is the published split
        (``1 - p_obs`` with ``p_obs=0.3``); with ``q=0.25`` and both tails about half of their
        cells are eligible, so about ``0.7 * 0.5 = 0.35`` of the table can go missing, enough for
        the paper's 30%.
    cut : {"both", "lower", "upper"}, default="both"
        Which tails are eligible.
    rate_scope : {"table", "affected"}, default="table"
        Where ``p`` is hit (see ``p``).
    random_state : int, numpy.random.Generator or None, default=None
        Seed or generator (keyword-only).

    Returns
    -------
    mask : ndarray of bool, shape (n_samples, n_features)
        ``True`` where the value is missing.

    Raises
    ------
    ValueError
        If the target needs more missing cells than there are eligible cells (``r > 1``): raise
        ``p_params`` or ``q``, or lower ``p``. Columns with many ties (discrete data) can have more
        eligible cells than ``2 q n_samples``; the rate is computed from the actual count.

    References
    ----------
    Muzellec et al. (2020), Section 4 ("MNAR, quantile censorship"); Zhao et al. (2023), Section 5.
    """
    arr = check_data(X)
    check_rates("simulate_mnar_quantile", p=p, p_params=p_params, q=q)
    p = float(p)
    p_params = float(p_params)
    q = float(q)
    check_option("simulate_mnar_quantile", "cut", cut, get_args(Cut))
    check_option("simulate_mnar_quantile", "rate_scope", rate_scope, get_args(RateScope))
    if cut == "both" and q >= 0.5:
        raise ValueError(
            f"q must be below 0.5 with cut='both' (both tails would cover every value, which is "
            f"MCAR, the published code's trap); got q={q}"
        )
    n, d = arr.shape
    rng = rng_from(random_state)
    affected, _ = split_columns(rng, d, n_columns(p_params, d, round_up=True))
    values = arr[:, affected]
    low = np.quantile(values, q, axis=0)
    high = np.quantile(values, 1.0 - q, axis=0)
    eligible = _tail_cells(values, low, high, cut)
    n_target = p * n * (d if rate_scope == "table" else affected.size)
    n_eligible = int(eligible.sum())
    rate = n_target / n_eligible
    if rate > 1.0:
        raise ValueError(
            f"p={p} needs {n_target:.0f} missing cells but only {n_eligible} cells lie in the "
            f"'{cut}' tails (q={q}) of the {affected.size} affected columns; raise p_params or q, "
            f"or lower p"
        )
    mask = np.zeros((n, d), dtype=bool)
    mask[:, affected] = eligible & (rng.random(values.shape) < rate)
    return keep_one_observed(mask, rng)


def simulate_mnar_quantile_published(
    X: ArrayLike,
    p: float,
    *,
    q: float = 0.75,
    p_params: float = 0.7,
    cut: Cut = "both",
    random_state: RandomState = None,
) -> NDArray[np.bool_]:
    """The MNARQ mask exactly as the published code draws it, trap included.

    A random ``max(floor(p_params * n_features), 1)`` columns are affected. A column's
    ``q``-"quantile" is its ``floor(q * n_samples)``-th smallest value (1-based, no
    interpolation). Eligible cells are those ``<=`` the ``q``-quantile (``"lower"``), ``>=`` the
    ``(1 - q)``-quantile (``"upper"``), or either (``"both"``); each is missing with probability
    ``p``.

    **The trap.** The TDM experiments call it with ``q=0.75`` and ``cut="both"`` (the defaults
    here): the lower cut is then the 75% point and the upper cut the 25% point, so *every* value
    is eligible and the mask is MCAR with rate ``p`` on the affected columns. The overall share
    of missing cells is about ``p * floor(0.7 n_features) / n_features`` (about 0.21 for
    ``p=0.3``), not ``p``, and nothing about it is "not at random". Use it only to reproduce the
    published numbers; :func:`simulate_mnar_quantile` is the real MNARQ.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Complete, finite data.
    p : float
        Probability, in (0, 1), that an eligible cell is missing.
    q : float, default=0.75
        Quantile level in (0, 1); ``floor(q * n_samples)`` and ``floor((1 - q) * n_samples)``
        must be at least 1.
    p_params : float, default=0.7
        Share of columns with missing values, in (0, 1), floored, at least one.
    cut : {"both", "lower", "upper"}, default="both"
        Which tails are eligible.
    random_state : int, numpy.random.Generator or None, default=None
        Seed or generator (keyword-only).

    Returns
    -------
    mask : ndarray of bool, shape (n_samples, n_features)
        ``True`` where the value is missing. No column is entirely missing (module notes).
    """
    arr = check_data(X)
    check_rates("simulate_mnar_quantile_published", p=p, p_params=p_params, q=q)
    p = float(p)
    p_params = float(p_params)
    q = float(q)
    check_option("simulate_mnar_quantile_published", "cut", cut, get_args(Cut))
    n, d = arr.shape
    k_low, k_high = math.floor(q * n), math.floor((1.0 - q) * n)
    if min(k_low, k_high) < 1:
        raise ValueError(
            f"q={q} with {n} rows gives an empty quantile (floor(q*n) or floor((1-q)*n) is 0); "
            "use more rows or a q closer to 0.5"
        )
    rng = rng_from(random_state)
    affected, _ = split_columns(rng, d, n_columns(p_params, d, round_up=False))
    values = arr[:, affected]
    ordered = np.sort(values, axis=0)
    low = ordered[k_low - 1]
    high = ordered[k_high - 1]
    eligible = _tail_cells(values, low, high, cut)
    mask = np.zeros((n, d), dtype=bool)
    mask[:, affected] = eligible & (rng.random(values.shape) < p)
    return keep_one_observed(mask, rng)
