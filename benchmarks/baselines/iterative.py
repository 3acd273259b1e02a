"""Chained-equation baselines on scikit-learn's ``IterativeImputer``: ICE and MissForest."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from sklearn.experimental import enable_iterative_imputer  # noqa: F401  (enables the import)
from sklearn.impute import IterativeImputer

from benchmarks.baselines._base import BaseImputer, RandomState, resolve_seed
from tdm._starts import make_ice, make_missforest
from tdm._validation import store_params

__all__ = ["ICEImputer", "MissForestImputer"]


class _IterativeBase(BaseImputer):
    """Fits the ``IterativeImputer`` that ``_make`` builds and delegates to it: ``_make`` takes
    the seed and, as keywords, the estimator's parameters but ``random_state``."""

    _make: ClassVar[Callable[..., IterativeImputer]]

    def _fit(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> None:
        params = self.get_params(deep=False)
        imputer = self._make(resolve_seed(params.pop("random_state")), **params)
        imputer.fit(X)
        self.imputer_ = imputer
        self.n_iter_ = int(imputer.n_iter_)

    def _impute(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        completed: NDArray[np.float64] = self.imputer_.transform(X)
        return completed


class ICEImputer(_IterativeBase):
    """ICE: iterative chained equations with a Bayesian linear regression per column, imputing
    the posterior mean.

    Parameters
    ----------
    max_iter : int, default=10
        Maximum number of rounds over all columns.
    tol : float, default=1e-3
        Stop when the largest change of an imputed value, relative to the largest observed
        absolute value, falls below ``tol``.
    random_state : int, numpy.random.RandomState or None, default=None
        Seed of ``IterativeImputer``.
    """

    _make = staticmethod(make_ice)

    def __init__(
        self, *, max_iter: int = 10, tol: float = 1e-3, random_state: RandomState = None
    ) -> None:
        store_params(self, locals())


class MissForestImputer(_IterativeBase):
    """MissForest (Stekhoven & Buehlmann, 2012): iterative imputation with a random forest per
    column, stopped by scikit-learn's rule (relative change below ``tol``).

    Parameters
    ----------
    n_estimators : int, default=100
        Trees per forest.
    max_features : {"sqrt", "log2"}, int, float or None, default="sqrt"
        Candidate features per split.
    max_iter : int, default=10
        Maximum number of rounds over all columns.
    tol : float, default=1e-3
        See :class:`ICEImputer`.
    n_jobs : int or None, default=1
        Parallel jobs of each forest.
    random_state : int, numpy.random.RandomState or None, default=None
        Seed of the imputer and of the forests.
    """

    _make = staticmethod(make_missforest)

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
