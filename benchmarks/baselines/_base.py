"""The scikit-learn transformer skeleton shared by every baseline imputer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from tdm._validation import validate_params

__all__ = ["BaseImputer", "resolve_seed"]

RandomState = int | np.random.RandomState | None


def resolve_seed(random_state: RandomState) -> int:
    """An integer seed from ``random_state`` (``None``: fresh entropy), never NumPy's global."""
    if random_state is None:
        return int(np.random.default_rng().integers(2**31 - 1))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(2**31 - 1))
    if isinstance(random_state, bool) or not isinstance(random_state, int | np.integer):
        raise TypeError(
            "random_state must be None, an int or a numpy.random.RandomState; got "
            f"{type(random_state).__name__}"
        )
    return int(random_state)


class BaseImputer(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Validation and the observed-cells guarantee around a model-specific ``_fit``/``_impute``;
    subclasses state their hyperparameters' accepted values in ``_PARAMETER_CONSTRAINTS``."""

    _PARAMETER_CONSTRAINTS: ClassVar[Mapping[str, Sequence[Any]]] = {}

    def fit(self, X: ArrayLike, y: Any = None) -> Self:
        """Fit the imputer on ``X`` (NaN for missing values; every column needs an observed
        value); returns ``self``."""
        owner = type(self).__name__
        validate_params(owner, self.get_params(deep=False), self._PARAMETER_CONSTRAINTS)
        data = self._validate(X, reset=True)
        empty = np.flatnonzero(np.isnan(data).all(axis=0))
        if empty.size:
            raise ValueError(
                f"{type(self).__name__}: column(s) {empty.tolist()} of X have no observed value; "
                "drop them or give each at least one observed value"
            )
        if data.shape[0] < 2:
            raise ValueError(
                f"{type(self).__name__} needs at least 2 rows in X; got n_samples={data.shape[0]}"
            )
        self._fit(data, np.isnan(data))
        return self

    def transform(self, X: ArrayLike) -> NDArray[np.float64]:
        """``X`` with every NaN imputed by the fitted model; observed cells unchanged."""
        check_is_fitted(self)
        data = self._validate(X, reset=False)
        mask = np.isnan(data)
        out = data.copy()
        if mask.any():
            completed = self._impute(data, mask)
            out[mask] = completed[mask]
        return out

    def _validate(self, X: ArrayLike, *, reset: bool) -> NDArray[np.float64]:
        data: NDArray[np.float64] = validate_data(
            self,
            X,
            reset=reset,
            dtype=np.float64,
            ensure_all_finite="allow-nan",
            copy=True,
        )
        return data

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def _fit(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> None:
        """Learn from ``X`` (NaN at ``mask``) and set the fitted attributes."""
        raise NotImplementedError

    def _impute(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        """Return a completed copy of ``X``; only the cells at ``mask`` are used."""
        raise NotImplementedError
