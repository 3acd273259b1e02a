"""The skeleton of the mixed-type baselines: a DataFrame coded as one float matrix (label
columns as the index of the label among those observed in fit; NaN missing) and decoded back
into its dtypes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_array, check_is_fitted

from tdm._validation import validate_params
from tdm.columns import ColumnKind, column_kinds

__all__ = ["MixedBaseImputer", "start_values"]

_NUMERIC = ("float", "integer")


def start_values(Z: NDArray[np.float64], categorical: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Per coded column: the mean of the observed values, or the most frequent label code (ties:
    the lowest code)."""
    fill = np.nanmean(Z, axis=0)
    for j in np.flatnonzero(categorical):
        observed = Z[~np.isnan(Z[:, j]), j].astype(np.int64)
        fill[j] = float(np.bincount(observed).argmax())
    return fill


class MixedBaseImputer(TransformerMixin, BaseEstimator):
    """Validation, coding and decoding around a model-specific ``_fit_coded``/``_impute_coded``.

    Only missing cells are written: observed cells come back unchanged, every column in its
    dtype, integer columns rounded, categorical cells an observed label. Fitted:
    ``column_kinds_``, ``categories_`` (labels observed in fit), ``n_features_in_``.
    """

    _PARAMETER_CONSTRAINTS: ClassVar[Mapping[str, Sequence[Any]]] = {}

    # ---------------------------------------------------------------- the public API
    def fit(self, X: ArrayLike | pd.DataFrame, y: Any = None) -> Self:
        """Fit the imputer on ``X`` (a DataFrame of mixed kinds, or a float array with NaN)."""
        self._fit_and_impute(X)
        return self

    def fit_transform(self, X: ArrayLike | pd.DataFrame, y: Any = None, **_: Any) -> Any:
        """Fit on ``X`` and return it imputed (the fit's own imputation of its rows)."""
        frame, coded, mask = self._fit_and_impute(X)
        return self._decode(frame, coded, mask, X)

    def transform(self, X: ArrayLike | pd.DataFrame) -> Any:
        """Impute the missing cells of ``X`` (same columns as in ``fit``) with the fitted model."""
        check_is_fitted(self, "column_kinds_")
        frame = self._as_frame(X, reset=False)
        coded, mask = self._code(frame)
        completed = self._impute_coded(coded, mask) if mask.any() else coded
        return self._decode(frame, completed, mask, X)

    # ---------------------------------------------------------------- model hooks
    def _fit_coded(self, Z: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        """Learn from the coded table ``Z`` (NaN at ``mask``); return it completed."""
        raise NotImplementedError

    def _impute_coded(self, Z: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        """Return a completed copy of the coded table ``Z`` (new rows)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- helpers for the models
    @property
    def categorical_(self) -> NDArray[np.bool_]:
        """Which columns are coded labels (categorical or boolean)."""
        return np.array([k not in _NUMERIC for k in self.column_kinds_.values()], dtype=bool)

    @property
    def n_labels_(self) -> NDArray[np.int64]:
        """Observed labels per column (0 for numeric columns)."""
        return np.array(
            [len(self.categories_.get(c, ())) for c in self.column_kinds_], dtype=np.int64
        )

    # ---------------------------------------------------------------- internals
    def _fit_and_impute(
        self, X: ArrayLike | pd.DataFrame
    ) -> tuple[pd.DataFrame, NDArray[np.float64], NDArray[np.bool_]]:
        owner = type(self).__name__
        validate_params(owner, self.get_params(deep=False), self._PARAMETER_CONSTRAINTS)
        frame = self._as_frame(X, reset=True)
        if len(frame) < 2:
            raise ValueError(f"{owner} needs at least 2 rows; got {len(frame)}")
        empty = [str(c) for c in frame.columns if frame[c].isna().all()]
        if empty:
            raise ValueError(
                f"{owner}: column(s) {empty} have no observed value; drop them or give each at "
                "least one observed value"
            )
        kinds: dict[Any, ColumnKind] = column_kinds(frame)
        self.column_kinds_ = kinds
        self.categories_ = {
            c: np.array(sorted(frame[c].dropna().astype(object).unique()), dtype=object)
            for c, kind in kinds.items()
            if kind not in _NUMERIC
        }
        coded, mask = self._code(frame)
        completed = self._fit_coded(coded, mask) if mask.any() else coded
        return frame, completed, mask

    def _as_frame(self, X: ArrayLike | pd.DataFrame, *, reset: bool) -> pd.DataFrame:
        owner = type(self).__name__
        if isinstance(X, pd.DataFrame):
            frame = X
        else:  # a float array, NaN for missing cells; inf is refused below, by column
            array = check_array(X, dtype=np.float64, ensure_all_finite=False, ensure_min_samples=0)
            frame = pd.DataFrame(array)
        numeric = [c for c in frame.columns if pd.api.types.is_float_dtype(frame[c].dtype)]
        for column in numeric:
            values = frame[column].astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan)
            if np.isinf(values).any():
                raise ValueError(f"{owner}: column {column!r} holds infinity; only NaN is missing")
        if reset:
            self.n_features_in_ = frame.shape[1]
            self.columns_ = list(frame.columns)
            if isinstance(X, pd.DataFrame) and all(isinstance(c, str) for c in frame.columns):
                self.feature_names_in_ = np.asarray(frame.columns, dtype=object)
        elif list(frame.columns) != self.columns_:
            raise ValueError(
                f"{owner}: X has columns {list(frame.columns)} but the imputer was fitted on "
                f"{self.columns_} (n_features {self.n_features_in_})"
            )
        return frame

    def _code(self, frame: pd.DataFrame) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        owner = type(self).__name__
        coded = np.empty(frame.shape, dtype=np.float64)
        for j, (column, kind) in enumerate(self.column_kinds_.items()):
            values = frame[column]
            if kind in _NUMERIC:
                coded[:, j] = values.astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan)
                continue
            labels = self.categories_[column]
            present = values.notna().to_numpy()
            observed = values.astype(object).to_numpy()[present]
            index = pd.Index(labels).get_indexer(observed)
            if (index < 0).any():
                unseen = observed[index < 0][0]
                raise ValueError(
                    f"{owner}: column {column!r} holds the label {unseen!r}, which was not "
                    "observed in fit"
                )
            coded[:, j] = np.nan
            coded[present, j] = index
        return coded, np.isnan(coded)

    def _decode(
        self,
        frame: pd.DataFrame,
        completed: NDArray[np.float64],
        mask: NDArray[np.bool_],
        original: ArrayLike | pd.DataFrame,
    ) -> Any:
        if not isinstance(original, pd.DataFrame):
            out_array = frame.to_numpy(dtype=np.float64, copy=True)
            out_array[mask] = completed[mask]
            return out_array
        out = frame.copy()
        for j, (column, kind) in enumerate(self.column_kinds_.items()):
            rows = np.flatnonzero(mask[:, j])
            if rows.size == 0:
                continue
            values = completed[rows, j]
            series = out[column].copy()
            filled: Any
            if kind == "float":
                dtype = series.dtype
                filled = values.astype(dtype) if isinstance(dtype, np.dtype) else values
            elif kind == "integer":
                filled = np.rint(values).astype(np.int64)
            else:
                labels = self.categories_[column]
                codes = np.clip(np.rint(values).astype(np.int64), 0, len(labels) - 1)
                filled = labels[codes]
            series.iloc[rows] = filled
            out[column] = series.astype(frame[column].dtype)
        return out
