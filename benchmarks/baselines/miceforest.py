"""miceforest (chained equations with LightGBM) as a mixed-type baseline; an optional
dependency: ``pip install 'tdm-impute[bench]'``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from benchmarks.baselines._base import RandomState, resolve_seed
from benchmarks.baselines._frames import MixedBaseImputer, start_values
from tdm._validation import Interval, store_params

__all__ = ["MiceForestImputer"]


def _kernel_class() -> Any:
    try:
        from miceforest import ImputationKernel
    except ImportError:  # an optional dependency
        raise ImportError(
            "MiceForestImputer needs miceforest and lightgbm: pip install 'tdm-impute[bench]' "
            "(with -c constraints.txt for the tested versions)"
        ) from None
    return ImputationKernel


class MiceForestImputer(MixedBaseImputer):
    """Chained equations with LightGBM random forests (miceforest), one completed dataset.

    With ``mean_match_candidates=0`` the imputation is the model's prediction (the regression
    value, or the most probable label) rather than a draw among the nearest candidates.

    Parameters
    ----------
    iterations : int, default=5
        Rounds of chained equations.
    mean_match_candidates : int, default=0
        Candidates of mean matching; 0 predicts directly.
    n_jobs : int, default=1
        LightGBM threads.
    random_state : int, numpy.random.RandomState or None, default=None
        Seed of the kernel.
    """

    _PARAMETER_CONSTRAINTS: ClassVar[Mapping[str, Sequence[Any]]] = {
        "iterations": [Interval(Integral, 1, None)],
        "mean_match_candidates": [Interval(Integral, 0, None)],
        "n_jobs": [Interval(Integral, 1, None)],
    }

    def __init__(
        self,
        *,
        iterations: int = 5,
        mean_match_candidates: int = 0,
        n_jobs: int = 1,
        random_state: RandomState = None,
    ) -> None:
        store_params(self, locals())

    def _kernel_frame(self, Z: NDArray[np.float64]) -> pd.DataFrame:
        """The coded table as miceforest reads it: floats, and label codes as ``category``."""
        columns: dict[str, Any] = {}
        for j, labels in enumerate(self.n_labels_):
            if self.categorical_[j]:
                codes = np.where(np.isnan(Z[:, j]), -1, Z[:, j]).astype(np.int64)
                columns[f"c{j}"] = pd.Categorical.from_codes(codes, categories=range(labels))
            else:
                columns[f"c{j}"] = Z[:, j]
        return pd.DataFrame(columns)

    def _from_kernel(self, frame: pd.DataFrame) -> NDArray[np.float64]:
        out = np.empty(frame.shape, dtype=np.float64)
        for j in range(frame.shape[1]):
            column = frame[f"c{j}"]
            if self.categorical_[j]:
                out[:, j] = column.cat.codes.to_numpy(dtype=np.float64)
            else:
                out[:, j] = column.to_numpy(dtype=np.float64)
        return out

    def _fill_unmodelled(self, Z: NDArray[np.float64]) -> NDArray[np.float64]:
        """Missing cells of columns without a model (one observed label, or no missing cell in
        fit) take the fit's mean or mode."""
        Z = Z.copy()
        for j in range(Z.shape[1]):
            if f"c{j}" not in self.modelled_:
                Z[:, j] = np.where(np.isnan(Z[:, j]), self.fill_[j], Z[:, j])
        return Z

    def _fit_coded(self, Z: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        self.fill_ = start_values(Z, self.categorical_)
        # A label column with one observed label cannot be modelled (one class).
        modelled = mask.any(axis=0) & ~(self.categorical_ & (self.n_labels_ == 1))
        self.modelled_ = [f"c{j}" for j in np.flatnonzero(modelled)]
        Z = self._fill_unmodelled(Z)
        if not self.modelled_:
            self.kernel_ = None
            return Z
        kernel = _kernel_class()(
            self._kernel_frame(Z),
            variable_schema=self.modelled_,
            mean_match_candidates=self.mean_match_candidates,
            random_state=resolve_seed(self.random_state),
        )
        kernel.mice(self.iterations, num_threads=self.n_jobs, verbosity=-1)
        self.kernel_ = kernel
        return self._from_kernel(kernel.complete_data(dataset=0))

    def _impute_coded(self, Z: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        Z = self._fill_unmodelled(Z)
        if self.kernel_ is None:
            return Z
        seed = resolve_seed(self.random_state)
        imputed = self.kernel_.impute_new_data(self._kernel_frame(Z), random_state=seed)
        return self._from_kernel(imputed.complete_data(dataset=0))
