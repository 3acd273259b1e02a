"""Chained-equation imputation with a Bayesian linear regression per column (ICE).

One construction shared by the ICE baseline (:class:`tdm.baselines.ICEImputer`) and the ``"ice"``
initialisation of :class:`tdm.TDMImputer`, so that the two are the same method.
"""

from __future__ import annotations

import numpy as np
from sklearn.experimental import enable_iterative_imputer  # noqa: F401  (enables the import)
from sklearn.impute import IterativeImputer
from sklearn.linear_model import BayesianRidge

__all__ = ["ice_fill", "make_ice"]


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


def ice_fill(values: np.ndarray, mask: np.ndarray, seed: int) -> np.ndarray:
    """``values`` with its ``mask`` cells replaced by ICE imputations (10 rounds at most).

    scikit-learn's ``ConvergenceWarning`` (the rounds ran out before its tolerance was met) is
    passed on as the ICE baseline passes it: silencing it here would mean changing the process's
    warning filters, which is global state shared with other threads.
    """
    completed = make_ice(seed).fit_transform(np.where(mask, np.nan, values))
    return np.where(mask, completed, values)
