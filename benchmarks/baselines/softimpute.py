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

    The columns are centred on their observed means, and the centred matrix ``X`` (missing
    cells at 0, i.e. mean-filled) is completed by Algorithm 1 of the paper for a single
    ``lambda``: starting from ``Z = 0``, repeat

    ``Z <- S_lambda(P_obs(X) + P_miss(Z))``,

    where ``S_lambda(Y) = U diag(max(s - lambda, 0)) V^T`` soft-thresholds the singular values of
    ``Y = U diag(s) V^T``, until ``||Z_new - Z||_F^2 / ||Z||_F^2 < tol`` or ``max_iter``
    iterations. The means are added back at the end.

    **Choice of lambda** (the paper computes a path over a grid): ``lambda = shrinkage_ratio *
    s_max``, where ``s_max`` is the largest singular value of the centred, mean-filled matrix
    (the smallest ``lambda`` whose solution is 0). The default ``0.05`` was picked on the shipped
    UCI datasets with 30% MCAR (standardised), where it beat column means on every one.

    **New rows.** The fitted solution is a fixed point ``z_miss = (z A)_miss`` with the symmetric
    matrix ``A = V diag(1 - lambda / s) V^T`` (over the singular values ``s > lambda`` of the
    final filled matrix). :meth:`transform` solves that linear system exactly for each row,
    ``z_miss = z_obs A[obs, miss] (I - A[miss, miss])^{-1}``, which reproduces the fitted
    imputation on the training rows (up to ``tol``) and extends it to new rows.

    Parameters
    ----------
    shrinkage_ratio : float, default=0.05
        ``lambda`` as a fraction of ``s_max``; must be positive (1 or more gives rank 0, i.e.
        mean imputation).
    max_iter : int, default=100
        Maximum number of Soft-Impute iterations.
    tol : float, default=1e-5
        Convergence threshold on the relative squared change of ``Z``.
    random_state : int, numpy.random.RandomState or None, default=None
        Unused (the method is deterministic); accepted for a uniform interface.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,)
        Observed column means.
    shrinkage_ : float
        The ``lambda`` used.
    components_ : ndarray of shape (rank_, n_features)
        Right singular vectors kept (singular value above ``lambda``).
    singular_values_ : ndarray of shape (rank_,)
        Their singular values, before thresholding.
    rank_ : int
        Rank of the solution.
    n_iter_ : int
        Iterations run.
    n_features_in_ : int
        Number of columns seen in :meth:`fit`.
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
