"""Chained-equation baselines built on scikit-learn's ``IterativeImputer``: ICE and MissForest.

Both start from column means and then, for ``max_iter`` rounds, regress each column on all the
others (fitted on the rows where it is observed) and re-predict its missing cells.

References
----------
S. van Buuren and K. Groothuis-Oudshoorn. mice: Multivariate imputation by chained equations in
R. Journal of Statistical Software, 2011.

D. J. Stekhoven and P. Buehlmann. MissForest: non-parametric missing value imputation for
mixed-type data. Bioinformatics, 2012.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray
from sklearn.experimental import enable_iterative_imputer  # noqa: F401  (enables the import)
from sklearn.impute import IterativeImputer

from benchmarks.baselines._base import BaseImputer, RandomState, resolve_seed
from tdm._starts import make_ice, make_missforest
from tdm._validation import store_params

__all__ = ["ICEImputer", "MissForestImputer"]


class _IterativeBase(BaseImputer):
    """Fits an ``IterativeImputer`` built by :meth:`_make` and delegates to it."""

    random_state: RandomState

    def _make(self, seed: int) -> IterativeImputer:
        raise NotImplementedError

    def _fit(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> None:
        imputer = self._make(resolve_seed(self.random_state))
        imputer.fit(X)
        self.imputer_ = imputer
        self.n_iter_ = int(imputer.n_iter_)

    def _impute(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        completed: NDArray[np.float64] = self.imputer_.transform(X)
        return completed


class ICEImputer(_IterativeBase):
    """ICE: iterative chained equations with a Bayesian linear regression per column.

    The paper's "ICE (iterative, linear)" baseline: every feature is continuous here, so each
    column is modelled by :class:`~sklearn.linear_model.BayesianRidge` on all the others, and the
    imputation is its posterior mean (``sample_posterior=False``). Columns are visited in
    ascending order of missingness.

    Parameters
    ----------
    max_iter : int, default=10
        Maximum number of rounds over all columns.
    tol : float, default=1e-3
        Stop when the largest change of an imputed value, relative to the largest observed
        absolute value, falls below ``tol`` (scikit-learn's rule); otherwise scikit-learn warns
        with ``ConvergenceWarning``.
    random_state : int, numpy.random.RandomState or None, default=None
        Seed of ``IterativeImputer`` (keyword-only).

    Attributes
    ----------
    imputer_ : sklearn.impute.IterativeImputer
        The fitted imputer.
    n_iter_ : int
        Rounds run.
    n_features_in_ : int
        Number of columns seen in :meth:`fit`.
    """

    def __init__(
        self, *, max_iter: int = 10, tol: float = 1e-3, random_state: RandomState = None
    ) -> None:
        store_params(self, locals())

    def _make(self, seed: int) -> IterativeImputer:
        return make_ice(seed, max_iter=self.max_iter, tol=self.tol)


class MissForestImputer(_IterativeBase):
    """MissForest: iterative imputation with a random forest per column.

    Each column is regressed on all the others by a
    :class:`~sklearn.ensemble.RandomForestRegressor` (bootstrap, ``n_estimators`` trees,
    ``max_features="sqrt"`` candidate features per split, as ``mtry = floor(sqrt(p))`` in
    Stekhoven & Buehlmann), starting from the column means and visiting columns in ascending
    order of missingness.

    Differences from the original MissForest, both documented choices: the stopping rule is
    scikit-learn's (relative change below ``tol``, at most ``max_iter`` rounds) instead of "stop
    as soon as the change grows", and the last round's imputation is returned.

    Parameters
    ----------
    n_estimators : int, default=100
        Trees per forest (MissForest's default).
    max_features : {"sqrt", "log2"}, int, float or None, default="sqrt"
        Candidate features per split (``None``: all of them).
    max_iter : int, default=10
        Maximum number of rounds over all columns (MissForest's default).
    tol : float, default=1e-3
        See :class:`ICEImputer`.
    n_jobs : int or None, default=1
        Parallel jobs of each forest.
    random_state : int, numpy.random.RandomState or None, default=None
        Seed of the imputer and of the forests (keyword-only).

    Attributes
    ----------
    imputer_, n_iter_, n_features_in_
        As in :class:`ICEImputer`.
    """

    def __init__(
        self,
        *,
        n_estimators: int = 100,
        max_features: Literal["sqrt", "log2"] | int | float | None = "sqrt",
        max_iter: int = 10,
        tol: float = 1e-3,
        n_jobs: int | None = 1,
        random_state: RandomState = None,
    ) -> None:
        store_params(self, locals())

    def _make(self, seed: int) -> IterativeImputer:
        return make_missforest(
            seed,
            n_estimators=self.n_estimators,
            max_features=self.max_features,
            max_iter=self.max_iter,
            tol=self.tol,
            n_jobs=self.n_jobs,
        )
