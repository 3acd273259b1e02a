"""SoftImpute: low-rank matrix completion by iterative soft-thresholded SVD.

References
----------
R. Mazumder, T. Hastie and R. Tibshirani. Spectral regularization algorithms for learning large
incomplete matrices. Journal of Machine Learning Research 11, 2010 (Algorithm 1, "Soft-Impute").
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from sklearn.exceptions import ConvergenceWarning

from benchmarks.baselines._base import BaseImputer, RandomState
from tdm._validation import Interval, store_params

__all__ = ["SoftImputeImputer"]


class SoftImputeImputer(BaseImputer):
    """Soft-Impute (Mazumder, Hastie & Tibshirani, 2010) for one regularisation level.

    The columns are centred on their observed means and Algorithm 1 of the paper runs for
    ``lambda = shrinkage_ratio * s_max`` (``s_max``: the largest singular value of the centred,
    mean-filled matrix): ``Z <- S_lambda(P_obs(X) + P_miss(Z))`` from ``Z = 0`` until the
    relative squared change is below ``tol``. :meth:`transform` solves each row's fixed point
    ``z_miss = (z A)_miss`` with ``A = V diag(1 - lambda / s) V^T`` exactly, which reproduces
    the fitted imputation on the training rows and extends it to new rows.

    Parameters
    ----------
    shrinkage_ratio : float, default=0.05
        ``lambda`` as a fraction of ``s_max`` (1 or more: mean imputation).
    max_iter : int, default=100
        Maximum number of iterations.
    tol : float, default=1e-5
        Threshold on the relative squared change of ``Z``.
    random_state : None
        Unused (the method is deterministic).

    Attributes
    ----------
    components_ : ndarray of shape (rank_, n_features)
        Right singular vectors kept.
    singular_values_ : ndarray of shape (rank_,)
        Their singular values, before thresholding.
    rank_ : int
        Rank of the solution.
    """

    _PARAMETER_CONSTRAINTS: ClassVar[Mapping[str, Sequence[Any]]] = {
        "shrinkage_ratio": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None)],
        "tol": [Interval(Real, 0, None)],
    }

    def __init__(
        self,
        *,
        shrinkage_ratio: float = 0.05,
        max_iter: int = 100,
        tol: float = 1e-5,
        random_state: RandomState = None,
    ) -> None:
        store_params(self, locals())

    def _fit(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> None:
        self.mean_ = np.nanmean(X, axis=0)
        centred = np.where(mask, 0.0, X - self.mean_)
        s_max = float(np.linalg.norm(centred, ord=2))
        shrinkage = float(self.shrinkage_ratio) * s_max
        Z = np.zeros_like(centred)
        converged = False
        n_iter = 0
        for n_iter in range(1, self.max_iter + 1):  # noqa: B007  (n_iter is reported)
            U, s, Vt = np.linalg.svd(np.where(mask, Z, centred), full_matrices=False)
            Z_new = (U * np.maximum(s - shrinkage, 0.0)) @ Vt
            change = float(np.sum((Z_new - Z) ** 2))
            previous = float(np.sum(Z**2))
            Z = Z_new
            if change <= self.tol * previous:
                converged = True
                break
        if not converged:
            warnings.warn(
                f"SoftImputeImputer did not converge in max_iter={self.max_iter} iterations "
                f"(tol={self.tol}); raise max_iter or tol",
                ConvergenceWarning,
                stacklevel=4,
            )
        _, s, Vt = np.linalg.svd(np.where(mask, Z, centred), full_matrices=False)
        keep = s > shrinkage
        self.shrinkage_ = shrinkage
        self.components_ = Vt[keep]
        self.singular_values_ = s[keep]
        self.rank_ = int(keep.sum())
        self.n_iter_ = n_iter

    def _impute(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        factors = 1.0 - self.shrinkage_ / self.singular_values_
        A = (self.components_.T * factors) @ self.components_
        centred = np.where(mask, 0.0, X - self.mean_)
        patterns, inverse = np.unique(mask, axis=0, return_inverse=True)
        for k, pattern in enumerate(patterns):
            if not pattern.any():
                continue
            rows = np.flatnonzero(inverse.ravel() == k)
            miss, obs = pattern, ~pattern
            system = np.eye(int(miss.sum())) - A[np.ix_(miss, miss)]
            rhs = centred[np.ix_(rows, obs)] @ A[np.ix_(obs, miss)]
            centred[np.ix_(rows, miss)] = np.linalg.solve(system, rhs.T).T
        completed: NDArray[np.float64] = centred + self.mean_
        return completed
