"""Mixed-type baselines: mean/mode imputation and MissForest with classifiers for labels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any, ClassVar, Literal, TypeAlias

import numpy as np
from numpy.typing import NDArray
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

from benchmarks.baselines._base import RandomState, resolve_seed
from benchmarks.baselines._frames import MixedBaseImputer, start_values
from tdm._validation import Interval, store_params

__all__ = ["MissForestMixedImputer", "ModeImputer"]

Forest: TypeAlias = RandomForestClassifier | RandomForestRegressor


class ModeImputer(MixedBaseImputer):
    """Mean of each numeric column (rounded for integer columns), mode of each label column
    (ties: the first label in sorted order)."""

    def __init__(self, *, random_state: RandomState = None) -> None:
        self.random_state = random_state

    def _fit_coded(self, Z: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        self.fill_ = start_values(Z, self.categorical_)
        return self._impute_coded(Z, mask)

    def _impute_coded(self, Z: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        return np.where(mask, self.fill_, Z)


class MissForestMixedImputer(MixedBaseImputer):
    """MissForest on mixed data: a random-forest regressor per numeric column and a classifier
    per label column, chained.

    Cells start at the column mean or mode; each round visits the columns with missing cells in
    ascending order of missingness and re-predicts them from all other columns (label columns
    with more than two labels one-hot). As in Stekhoven & Buehlmann, rounds stop when the change
    has grown for every kind of column present, returning the previous round, or after
    ``max_iter`` rounds. :meth:`transform` runs one round of the kept forests from the fit's
    means and modes.

    Parameters
    ----------
    n_estimators, max_features, max_iter, n_jobs, random_state
        As in :class:`~benchmarks.baselines.iterative.MissForestImputer`.
    """

    _PARAMETER_CONSTRAINTS: ClassVar[Mapping[str, Sequence[Any]]] = {
        "n_estimators": [Interval(Integral, 1, None)],
        "max_iter": [Interval(Integral, 1, None)],
    }

    def __init__(
        self,
        *,
        n_estimators: int = 100,
        max_features: Literal["sqrt", "log2"] | int | float | None = "sqrt",
        max_iter: int = 10,
        n_jobs: int | None = 1,
        random_state: RandomState = None,
    ) -> None:
        store_params(self, locals())

    # ---------------------------------------------------------------- design matrix
    def _design(self, Z: NDArray[np.float64], target: int) -> NDArray[np.float64]:
        """Every column but ``target``: numeric and two-label columns as they are, other label
        columns one-hot."""
        blocks = []
        for j, labels in enumerate(self.n_labels_):
            if j == target:
                continue
            if labels > 2:
                blocks.append((Z[:, [j]] == np.arange(labels)).astype(np.float64))
            else:
                blocks.append(Z[:, [j]])
        return np.hstack(blocks) if blocks else np.zeros((Z.shape[0], 1))

    def _forest(self, j: int, seed: int) -> Forest:
        kind: type[Forest] = (
            RandomForestClassifier if self.categorical_[j] else RandomForestRegressor
        )
        return kind(
            n_estimators=self.n_estimators,
            max_features=self.max_features,
            n_jobs=self.n_jobs,
            random_state=seed,
        )

    # ---------------------------------------------------------------- fit and impute
    def _fit_coded(self, Z: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        categorical = self.categorical_
        self.fill_ = start_values(Z, categorical)
        rng = np.random.default_rng(resolve_seed(self.random_state))
        counts = mask.sum(axis=0)
        self.order_ = [int(j) for j in np.argsort(counts, kind="stable") if counts[j] > 0]
        numeric = ~categorical
        n_label_cells = int(mask[:, categorical].sum())
        current = np.where(mask, self.fill_, Z)
        previous, previous_models = current, dict[int, Forest]()
        change_old = np.array([np.inf, np.inf])
        self.n_iter_ = 0
        for _ in range(self.max_iter):
            before = current.copy()
            models: dict[int, Forest] = {}
            for j in self.order_:
                rows = mask[:, j]
                forest = self._forest(j, int(rng.integers(2**31 - 1)))
                design = self._design(current, j)
                target = current[~rows, j]
                forest.fit(design[~rows], target.astype(np.int64) if categorical[j] else target)
                current[rows, j] = forest.predict(design[rows])
                models[j] = forest
            self.n_iter_ += 1
            change = np.array([np.inf, np.inf])
            if numeric.any():
                size = float(np.sum(current[:, numeric] ** 2))
                moved = float(np.sum((current[:, numeric] - before[:, numeric]) ** 2))
                change[0] = moved / size if size > 0 else 0.0
            if n_label_cells:
                change[1] = float(np.sum(current[:, categorical] != before[:, categorical]))
                change[1] /= n_label_cells
            present = np.array([numeric.any(), n_label_cells > 0])
            if np.all(change[present] >= change_old[present]):
                self.models_ = previous_models or models
                return previous if previous_models else current
            change_old = change
            previous, previous_models = current.copy(), models
        self.models_ = previous_models
        return current

    def _impute_coded(self, Z: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        current = np.where(mask, self.fill_, Z)
        for j in self.order_:
            rows = mask[:, j]
            if rows.any():
                current[rows, j] = self.models_[j].predict(self._design(current, j)[rows])
        return current
