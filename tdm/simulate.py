"""Missing-value simulators: MCAR, MAR, MNAR logistic and MNAR quantile masks.

The mechanisms follow the protocol of Muzellec et al. (2020), which the TDM paper (Zhao et al.,
ICML 2023, Section 5) reuses with 30% missing values. Every simulator takes a complete data matrix
``X`` of shape ``(n_samples, n_features)`` and returns a boolean mask of the same shape where
``True`` means *missing*.

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

from typing import Any, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tdm._masks import (
    Mechanism,
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
from tdm._mnar import (
    simulate_mnar_logistic,
    simulate_mnar_quantile,
    simulate_mnar_quantile_published,
)

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

#: The mechanisms accepted by :func:`simulate`, in the paper's order, plus the published MNARQ.
MECHANISMS: tuple[str, ...] = get_args(Mechanism)


def simulate_mcar(X: ArrayLike, p: float, *, random_state: RandomState = None) -> NDArray[np.bool_]:
    """Missing completely at random: every cell is missing independently with probability ``p``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Complete, finite data (only its shape is used).
    p : float
        Probability that a cell is missing, in (0, 1); the expected share of missing cells in the
        whole table.
    random_state : int, numpy.random.Generator or None, default=None
        Seed or generator (keyword-only). The global NumPy random state is never used.

    Returns
    -------
    mask : ndarray of bool, shape (n_samples, n_features)
        ``True`` where the value is missing. No column is entirely missing (see the module notes).
    """
    arr = check_data(X)
    check_rates("simulate_mcar", p=p)
    p = float(p)
    rng = rng_from(random_state)
    mask = rng.random(arr.shape) < p
    return keep_one_observed(mask, rng)


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
    random_state : int, numpy.random.Generator or None, default=None
        Seed or generator (keyword-only).

    Returns
    -------
    mask : ndarray of bool, shape (n_samples, n_features)
        ``True`` where the value is missing. The driver columns have no missing value.

    Raises
    ------
    ValueError
        If ``n_features < 2`` or the rate needed in the non-driver columns is 1 or more.

    References
    ----------
    Muzellec et al. (2020), Section 4 and their ``MAR`` mechanism; Zhao et al. (2023), Section 5.
    """
    arr = check_data(X)
    check_rates("simulate_mar", p=p, p_obs=p_obs)
    p = float(p)
    p_obs = float(p_obs)
    check_option("simulate_mar", "rate_scope", rate_scope, get_args(RateScope))
    n, d = arr.shape
    if d < 2:
        raise ValueError(f"simulate_mar needs at least 2 columns (drivers and targets); got {d}")
    rng = rng_from(random_state)
    n_obs = n_columns(p_obs, d, round_up=False)
    drivers, targets = split_columns(rng, d, n_obs)
    rate = p * d / targets.size if rate_scope == "table" else p
    if rate >= 1.0:
        raise ValueError(
            f"p={p} over the whole table needs a rate of {rate:.3f} >= 1 in the {targets.size} "
            f"non-driver columns; lower p or p_obs, or pass rate_scope='affected'"
        )
    probs = logistic_probabilities(arr[:, drivers], targets.size, rate, rng)
    mask = np.zeros((n, d), dtype=bool)
    mask[:, targets] = rng.random((n, targets.size)) < probs
    return keep_one_observed(mask, rng)


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
    check_option("simulate", "mechanism", mechanism, MECHANISMS)
    simulator: Any = simulators[mechanism]
    mask: NDArray[np.bool_] = simulator(X, p, random_state=random_state, **params)
    return mask
