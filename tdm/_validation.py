"""Input and hyperparameter checks shared by the imputers: errors that name the column."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

__all__ = [
    "MIN_SAMPLES",
    "check_choice",
    "check_finite_or_nan",
    "check_frame_numeric",
    "check_positive",
    "column_labels",
    "resolve_device",
    "resolve_dtype",
]

MIN_SAMPLES = 4
"""Fewest rows an imputer fits on: two disjoint batches of at least two rows each."""


def column_labels(X: Any, n_features: int) -> list[str]:
    """Names to use in messages: the DataFrame's column names, else ``column 0`` … ."""
    if isinstance(X, pd.DataFrame):
        return [repr(str(c)) for c in X.columns]
    return [f"column {j}" for j in range(n_features)]


def check_frame_numeric(X: pd.DataFrame, owner: str) -> None:
    """Refuse a DataFrame with a non-numeric (or boolean) column, naming the column."""
    for name, dtype in X.dtypes.items():
        if pd.api.types.is_bool_dtype(dtype) or not pd.api.types.is_numeric_dtype(dtype):
            raise ValueError(
                f"{owner}: column {str(name)!r} is not numeric (dtype {dtype}); only numeric "
                "columns can be imputed. Select the numeric columns before imputing, e.g. "
                "X.select_dtypes('number')."
            )


def check_finite_or_nan(X: Any, owner: str) -> None:
    """Refuse ``±inf``, naming the column and the first row holding one.

    Arrays that cannot be read as floats are left alone here: scikit-learn's own validation,
    which runs next, gives the standard error for them.
    """
    try:
        if isinstance(X, pd.DataFrame):
            values = X.to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            raw = np.asarray(X)
            if raw.dtype.kind == "c":
                return  # scikit-learn's validation refuses complex data with its own message
            values = raw.astype(np.float64)
    except (TypeError, ValueError):
        return
    if values.ndim != 2:
        return
    infinite = np.isinf(values)
    if not infinite.any():
        return
    labels = column_labels(X, values.shape[1])
    j = int(np.flatnonzero(infinite.any(axis=0))[0])
    rows = np.flatnonzero(infinite[:, j])
    raise ValueError(
        f"{owner}: {labels[j]} holds {rows.size} infinite value(s) (first at row {int(rows[0])}). "
        "Infinite values cannot be imputed or used: replace them with NaN to have them imputed, "
        "or with finite values."
    )


def check_positive(
    name: str, value: Any, *, integer: bool, owner: str, allow_zero: bool = False
) -> None:
    """Raise unless ``value`` is a positive number (an integer when ``integer``)."""
    kinds: tuple[type, ...] = (
        (int, np.integer) if integer else (int, float, np.integer, np.floating)
    )
    ok = isinstance(value, kinds) and not isinstance(value, bool)
    ok = ok and (value >= 0 if allow_zero else value > 0) and np.isfinite(value)
    if not ok:
        what = "a non-negative" if allow_zero else "a positive"
        kind = "integer" if integer else "number"
        raise ValueError(f"{owner}: {name} must be {what} {kind}; got {name}={value!r}")


def check_choice(name: str, value: Any, allowed: Sequence[str], *, owner: str) -> None:
    """Raise unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{owner}: {name} must be one of {tuple(allowed)}; got {name}={value!r}")


def resolve_device(device: str | torch.device, owner: str) -> torch.device:
    """``"auto"`` → CUDA when available, else CPU; any other value is checked."""
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(
            f"{owner}: device must be 'auto', 'cpu', 'cuda' or 'cuda:N'; got device={device!r}"
        ) from err
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"{owner}: device={device!r} was asked for, but CUDA is not available on this "
            "machine; use device='auto' or 'cpu'."
        )
    return resolved


def resolve_dtype(dtype: str, owner: str) -> torch.dtype:
    """``"float32"`` or ``"float64"`` as a torch dtype."""
    check_choice("dtype", dtype, ("float32", "float64"), owner=owner)
    return torch.float32 if dtype == "float32" else torch.float64
