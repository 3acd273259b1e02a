"""Missing-value simulators: MCAR, MAR, MNAR logistic and MNAR quantile masks.

The mechanisms follow the protocol of Muzellec et al. (2020), which the TDM paper (Zhao et al.,
ICML 2023, Section 5) reuses with 30% missing values. Every simulator takes a complete data matrix
``X`` of shape ``(n_samples, n_features)`` and a keyword-only ``random_state`` (an int, a
``numpy.random.Generator`` or None; NumPy's global random state is never used), and returns a
boolean mask of the same shape where ``True`` means *missing*.

What ``p`` means
----------------
``p`` is the share of missing cells in the **whole table** wherever the mechanism allows it:
the expected number of missing cells is ``p * n_samples * n_features`` for MCAR, MAR, MNARL and
MNARQ. The published code instead hits ``p`` only inside the columns that receive missing values
(so its MAR masks have ``p * d_na / d`` missing overall); pass ``rate_scope="affected"`` to MAR and
MNARQ to get that convention. For MNARL both conventions coincide (every column has rate ``p``).

No column is ever entirely missing: when a draw leaves a column with no observed value, one cell
of that column, chosen uniformly at random with the same generator, is made observed again. This
changes the missing rate by at most ``1 / n_samples`` in that column and only happens for tiny or
extreme inputs. Rows may be entirely missing, as in the published protocol.

References
----------
B. Muzellec, J. Josse, C. Boyer and M. Cuturi. Missing data imputation using optimal transport.
ICML 2020.

H. Zhao, K. Sun, A. Dezfouli and E. V. Bonilla. Transformed distribution matching for missing
value imputation. ICML 2023.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq
from scipy.special import expit

from tdm._validation import Interval, Options, validate_params

__all__ = [
    "MECHANISMS",
    "Mechanism",
    "simulate",
    "simulate_mar",
    "simulate_mcar",
    "simulate_mnar_logistic",
    "simulate_mnar_quantile",
    "simulate_mnar_quantile_published",
]

Mechanism = Literal["mcar", "mar", "mnarl", "mnarq", "mnarq_published"]
RateScope = Literal["table", "affected"]
Cut = Literal["both", "lower", "upper"]
RandomState = int | np.random.Generator | None

#: The mechanisms accepted by :func:`simulate`, in the paper's order, plus the published MNARQ.
MECHANISMS: tuple[str, ...] = get_args(Mechanism)

_OPEN_UNIT = Interval(Real, 0, 1, closed="neither")


def simulate_mcar(X: ArrayLike, p: float, *, random_state: RandomState = None) -> NDArray[np.bool_]:
    """Missing completely at random: every cell is missing independently with probability ``p``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Complete, finite data (only its shape is used).
    p : float
        Probability that a cell is missing, in (0, 1); the expected share of missing cells in the
        whole table.
    """
    arr, rng, (p,) = _checked("simulate_mcar", X, random_state, p=p)
    return _keep_one_observed(rng.random(arr.shape) < p, rng)


def simulate_mar(
    X: ArrayLike,
    p: float,
    *,
    p_obs: float = 0.3,
    rate_scope: RateScope = "table",
    random_state: RandomState = None,
) -> NDArray[np.bool_]:
    """Missing at random through a logistic model of fully observed columns.

    A random ``max(floor(p_obs * n_features), 1)`` columns (the *drivers*) stay fully observed.
    Each other column j gets a logistic model with random Gaussian weights on the standardised
    drivers, rescaled to a unit-variance linear predictor, whose intercept is found by a 1-D
    root search (Brent's method) so that the mean missing probability of column j is the target
    rate. Each cell of column j is then missing by a Bernoulli draw of its row's probability.
    Missingness depends only on observed values: MAR.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Complete, finite data; ``n_features >= 2``.
    p : float
        Missing rate in (0, 1). With ``rate_scope="table"`` it is the expected share of missing
        cells in the whole table, so the non-driver columns get rate ``p * n_features / d_na``
        (``d_na`` = number of non-driver columns), which must stay below 1. With
        ``rate_scope="affected"`` it is the rate in the non-driver columns only, as in the
        published code (overall share ``p * d_na / n_features``).
    p_obs : float, default=0.3
        Share of columns kept fully observed, in (0, 1) (at least one column).
    rate_scope : {"table", "affected"}, default="table"
        Where ``p`` is hit (see ``p``).

    Raises
    ------
    ValueError
        If ``n_features < 2`` or the rate needed in the non-driver columns is 1 or more.

    References
    ----------
    Muzellec et al. (2020), Section 4 and their ``MAR`` mechanism; Zhao et al. (2023), Section 5.
    """
    arr, rng, (p, p_obs) = _checked("simulate_mar", X, random_state, p=p, p_obs=p_obs)
    _check_option("simulate_mar", "rate_scope", rate_scope, get_args(RateScope))
    d = arr.shape[1]
    if d < 2:
        raise ValueError(f"simulate_mar needs at least 2 columns (drivers and targets); got {d}")
    drivers, targets = _split_columns(rng, d, _n_columns(p_obs, d, round_up=False))
    rate = p * d / targets.size if rate_scope == "table" else p
    if rate >= 1.0:
        raise ValueError(
            f"p={p} over the whole table needs a rate of {rate:.3f} >= 1 in the {targets.size} "
            f"non-driver columns; lower p or p_obs, or pass rate_scope='affected'"
        )
    mask = np.zeros(arr.shape, dtype=bool)
    _draw(mask, targets, _logistic_probabilities(arr[:, drivers], targets.size, rate, rng), rng)
    return _keep_one_observed(mask, rng)


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

    References
    ----------
    Muzellec et al. (2020), Section 4 ("MNAR, logistic masking with masked inputs");
    Zhao et al. (2023), Section 5 (MNARL).
    """
    owner = "simulate_mnar_logistic"
    arr, rng, (p, p_params) = _checked(owner, X, random_state, p=p, p_params=p_params)
    if not isinstance(exclude_inputs, bool | np.bool_):
        raise TypeError(f"exclude_inputs must be a bool; got {type(exclude_inputs).__name__}")
    n, d = arr.shape
    mask = np.zeros((n, d), dtype=bool)
    if not exclude_inputs:
        _draw(mask, np.arange(d), _logistic_probabilities(arr, d, p, rng), rng)
        return _keep_one_observed(mask, rng)
    if d < 2:
        raise ValueError(f"{owner} with exclude_inputs=True needs at least 2 columns; got {d}")
    inputs, targets = _split_columns(rng, d, _n_columns(p_params, d, round_up=False))
    _draw(mask, targets, _logistic_probabilities(arr[:, inputs], targets.size, p, rng), rng)
    _draw(mask, inputs, np.full((n, inputs.size), p), rng)
    return _keep_one_observed(mask, rng)


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
    owner = "simulate_mnar_quantile"
    arr, rng, (p, p_params, q) = _checked(owner, X, random_state, p=p, p_params=p_params, q=q)
    _check_option(owner, "cut", cut, get_args(Cut))
    _check_option(owner, "rate_scope", rate_scope, get_args(RateScope))
    if cut == "both" and q >= 0.5:
        raise ValueError(
            f"q must be below 0.5 with cut='both' (both tails would cover every value, which is "
            f"MCAR, the published code's trap); got q={q}"
        )
    n, d = arr.shape
    affected, _ = _split_columns(rng, d, _n_columns(p_params, d, round_up=True))
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
    return _censor(arr.shape, affected, eligible, rate, rng)


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
    """
    owner = "simulate_mnar_quantile_published"
    arr, rng, (p, p_params, q) = _checked(owner, X, random_state, p=p, p_params=p_params, q=q)
    _check_option(owner, "cut", cut, get_args(Cut))
    n, d = arr.shape
    k_low, k_high = math.floor(q * n), math.floor((1.0 - q) * n)
    if min(k_low, k_high) < 1:
        raise ValueError(
            f"q={q} with {n} rows gives an empty quantile (floor(q*n) or floor((1-q)*n) is 0); "
            "use more rows or a q closer to 0.5"
        )
    affected, _ = _split_columns(rng, d, _n_columns(p_params, d, round_up=False))
    values = arr[:, affected]
    ordered = np.sort(values, axis=0)
    eligible = _tail_cells(values, ordered[k_low - 1], ordered[k_high - 1], cut)
    return _censor(arr.shape, affected, eligible, p, rng)


def simulate(
    X: ArrayLike,
    mechanism: Mechanism,
    p: float,
    *,
    random_state: RandomState = None,
    **params: Any,
) -> NDArray[np.bool_]:
    """Draw a missing-value mask with the named mechanism.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Complete, finite data.
    mechanism : {"mcar", "mar", "mnarl", "mnarq", "mnarq_published"}
        :func:`simulate_mcar`, :func:`simulate_mar`, :func:`simulate_mnar_logistic`,
        :func:`simulate_mnar_quantile` or :func:`simulate_mnar_quantile_published`.
    p : float
        Missing rate in (0, 1); see each simulator for exactly what is hit.
    random_state : int, numpy.random.Generator or None, default=None
        Seed or generator (keyword-only).
    **params
        Further keyword arguments of the chosen simulator (e.g. ``p_obs``, ``q``).

    Returns
    -------
    mask : ndarray of bool, shape (n_samples, n_features)
        ``True`` where the value is missing.
    """
    simulators = {
        "mcar": simulate_mcar,
        "mar": simulate_mar,
        "mnarl": simulate_mnar_logistic,
        "mnarq": simulate_mnar_quantile,
        "mnarq_published": simulate_mnar_quantile_published,
    }
    _check_option("simulate", "mechanism", mechanism, MECHANISMS)
    simulator: Any = simulators[mechanism]
    mask: NDArray[np.bool_] = simulator(X, p, random_state=random_state, **params)
    return mask


def _checked(
    owner: str, X: ArrayLike, random_state: RandomState, **rates: float
) -> tuple[NDArray[np.float64], np.random.Generator, tuple[float, ...]]:
    """``X`` as a checked matrix, the local generator, and the ``rates`` (each strictly between
    0 and 1) as floats."""
    arr = _check_data(X)
    validate_params(owner, rates, {name: [_OPEN_UNIT] for name in rates})
    return arr, _rng_from(random_state), tuple(float(v) for v in rates.values())


def _check_option(owner: str, name: str, value: Any, allowed: tuple[str, ...]) -> None:
    """Raise unless ``value`` is one of ``allowed``."""
    validate_params(owner, {name: value}, {name: [Options(allowed)]})


def _check_data(X: ArrayLike) -> NDArray[np.float64]:
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


def _rng_from(random_state: RandomState) -> np.random.Generator:
    """A local generator: never touches NumPy's global random state."""
    if isinstance(random_state, bool) or not (
        random_state is None or isinstance(random_state, int | np.integer | np.random.Generator)
    ):
        raise TypeError(
            "random_state must be None, an int or a numpy.random.Generator; got "
            f"{type(random_state).__name__}"
        )
    if isinstance(random_state, int | np.integer) and random_state < 0:
        raise ValueError(f"random_state must be a non-negative int; got {random_state}")
    return np.random.default_rng(random_state)


def _n_columns(share: float, d: int, *, round_up: bool) -> int:
    """Number of columns for a share of ``d``: floored (or ceiled), at least 1 and at most d."""
    # round() first: 0.3 * 10 is 3.0000000000000004 in floating point.
    exact = round(share * d, 9)
    k = math.ceil(exact) if round_up else math.floor(exact)
    return min(max(k, 1), d)


def _split_columns(
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


def _logistic_probabilities(
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


def _draw(
    mask: NDArray[np.bool_],
    columns: NDArray[np.intp],
    probs: NDArray[np.float64],
    rng: np.random.Generator,
) -> None:
    """Mark each cell of ``mask[:, columns]`` missing with its probability in ``probs``."""
    mask[:, columns] = rng.random(probs.shape) < probs


def _tail_cells(
    values: NDArray[np.float64], low: NDArray[np.float64], high: NDArray[np.float64], cut: str
) -> NDArray[np.bool_]:
    if cut == "lower":
        return values <= low
    if cut == "upper":
        return values >= high
    return (values <= low) | (values >= high)


def _censor(
    shape: tuple[int, ...],
    affected: NDArray[np.intp],
    eligible: NDArray[np.bool_],
    rate: float,
    rng: np.random.Generator,
) -> NDArray[np.bool_]:
    """A mask of ``shape`` where each ``eligible`` cell of the ``affected`` columns is missing
    with probability ``rate``."""
    mask = np.zeros(shape, dtype=bool)
    mask[:, affected] = eligible & (rng.random(eligible.shape) < rate)
    return _keep_one_observed(mask, rng)


def _keep_one_observed(mask: NDArray[np.bool_], rng: np.random.Generator) -> NDArray[np.bool_]:
    """Make one random cell observed again in every column that is entirely missing."""
    n = mask.shape[0]
    for j in np.flatnonzero(mask.all(axis=0)):
        mask[rng.integers(n), j] = False
    return mask
