"""Chained-equation imputation: ICE (a Bayesian linear regression per column) and MissForest (a
random forest per column).

One construction of each, shared by the baselines (:class:`tdm.baselines.ICEImputer`,
:class:`tdm.baselines.MissForestImputer`) and by the ``"ice"`` and ``"forest"`` starting points
of :class:`tdm.TDMImputer`, so that a start and its baseline are the same method.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from sklearn.ensemble import RandomForestRegressor
from sklearn.experimental import enable_iterative_imputer  # noqa: F401  (enables the import)
from sklearn.impute import IterativeImputer, SimpleImputer
from sklearn.linear_model import BayesianRidge

from tdm._seeds import spawn_seeds

__all__ = ["FOREST_START", "forest_fill", "ice_fill", "make_ice", "make_missforest", "start_fill"]

#: The forest of TDM's ``init="forest"`` start: MissForest with 20 trees and 3 rounds, about 1/15
#: of the MissForest baseline's cost (100 trees, up to 10 rounds).
FOREST_START: dict[str, int] = {"n_estimators": 20, "max_iter": 3}


def make_ice(seed: int, *, max_iter: int = 10, tol: float = 1e-3) -> IterativeImputer:
    """scikit-learn's ``IterativeImputer`` as ICE: BayesianRidge per column, posterior means,
    columns in ascending order of missingness, started from the column means."""
    return IterativeImputer(
        estimator=BayesianRidge(),
        max_iter=max_iter,
        tol=tol,
        initial_strategy="mean",
        sample_posterior=False,
        random_state=seed,
    )


def make_missforest(
    seed: int,
    *,
    n_estimators: int = 100,
    max_features: Literal["sqrt", "log2"] | int | float | None = "sqrt",
    max_iter: int = 10,
    tol: float = 1e-3,
    n_jobs: int | None = 1,
) -> IterativeImputer:
    """scikit-learn's ``IterativeImputer`` as MissForest: a bootstrap random forest per column
    (``max_features`` candidates per split), columns in ascending order of missingness, started
    from the column means. The forests and the imputer get two seeds derived from ``seed``."""
    forest_seed, imputer_seed = _forest_seeds(seed)
    return IterativeImputer(
        estimator=_forest(forest_seed, n_estimators, max_features, n_jobs),
        max_iter=max_iter,
        tol=tol,
        initial_strategy="mean",
        random_state=imputer_seed,
    )


def _forest(
    seed: int,
    n_estimators: int,
    max_features: Literal["sqrt", "log2"] | int | float | None = "sqrt",
    n_jobs: int | None = 1,
) -> RandomForestRegressor:
    return RandomForestRegressor(
        n_estimators=n_estimators, max_features=max_features, n_jobs=n_jobs, random_state=seed
    )


def _forest_seeds(seed: int) -> tuple[int, int]:
    """The seeds of the forests and of the imputer, derived from ``seed``."""
    forest, imputer = (s % (2**31 - 1) for s in spawn_seeds(seed, 2))
    return forest, imputer


def ice_fill(values: np.ndarray, mask: np.ndarray, seed: int) -> np.ndarray:
    """``values`` with its ``mask`` cells replaced by ICE imputations (10 rounds at most).

    scikit-learn's ``ConvergenceWarning`` (the rounds ran out before its tolerance was met) is
    passed on as the ICE baseline passes it: silencing it here would mean changing the process's
    warning filters, which is global state shared with other threads.
    """
    completed = make_ice(seed).fit_transform(np.where(mask, np.nan, values))
    return np.where(mask, completed, values)


def forest_fill(values: np.ndarray, mask: np.ndarray, seed: int) -> np.ndarray:
    """``values`` with its ``mask`` cells replaced by a light MissForest's (:data:`FOREST_START`).

    The rounds of ``make_missforest(seed, **FOREST_START).fit_transform``, written out: the same
    imputations, bit for bit (tested), without scikit-learn's ``ConvergenceWarning``, which three
    rounds would raise on almost every fit although stopping there is the design, and without
    fitting forests for columns that have nothing to impute.
    """
    forest_seed = _forest_seeds(seed)[0]
    filled = SimpleImputer(strategy="mean").fit_transform(np.where(mask, np.nan, values))
    n_features = values.shape[1]
    if n_features == 1:  # no other column to regress on: the mean, as IterativeImputer gives
        return np.where(mask, filled, values)
    order = np.argsort(mask.mean(axis=0), kind="mergesort")  # ascending missingness
    for _ in range(FOREST_START["max_iter"]):
        for j in order:
            rows = mask[:, j]
            if not rows.any():
                continue
            others = np.concatenate([np.arange(j), np.arange(j + 1, n_features)])
            forest = _forest(forest_seed, FOREST_START["n_estimators"])
            forest.fit(filled[~rows][:, others], filled[~rows, j])
            filled[rows, j] = forest.predict(filled[rows][:, others])
    return np.where(mask, filled, values)


def start_fill(init: str, values: np.ndarray, mask: np.ndarray, seed: int) -> np.ndarray:
    """The ``"ice"`` or ``"forest"`` starting point of the ``mask`` cells of ``values``."""
    fills = {"ice": ice_fill, "forest": forest_fill}
    return fills[init](values, mask, seed)
