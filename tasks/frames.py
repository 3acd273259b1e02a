"""Small conversions between DuckDB-typed pandas columns and what TDM works on: float matrices
for numeric columns, labels for boolean and categorical ones."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from tasks.warehouse.tables import BOOLEAN, LABELLED

__all__ = [
    "as_float_frame",
    "as_labels",
    "as_value_frame",
    "holds_numbers",
    "missing_mask",
    "moments",
    "observed_labels",
]


def holds_numbers(column: pd.Series) -> bool:
    """Whether a column holds numbers (a numeric dtype, not boolean) rather than labels."""
    dtype = column.dtype
    return bool(pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype))


def as_float_frame(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """The `columns` of `frame` as float64, with NULL (and NaN) as NaN; the index is kept."""
    return pd.DataFrame(
        {name: frame[name].to_numpy(dtype=np.float64, na_value=np.nan) for name in columns},
        index=frame.index,
    )


def as_value_frame(
    frame: pd.DataFrame, columns: Sequence[str], kinds: Mapping[str, str]
) -> pd.DataFrame:
    """The `columns` of `frame` as the pipeline checks and writes them: boolean and categorical
    columns (by `kinds`) as labels (`as_labels`), the others as float64 (NaN = missing)."""
    numbers = as_float_frame(frame, [c for c in columns if kinds.get(c) not in LABELLED])
    return pd.DataFrame(
        {
            name: numbers[name]
            if name in numbers
            else as_labels(frame[name], boolean=kinds.get(name) == BOOLEAN)
            for name in columns
        },
        index=frame.index,
    )


def missing_mask(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Whether each cell of `columns` is missing: NULL, or NaN in a float column."""
    return frame[list(columns)].isna()


def as_labels(series: pd.Series, *, boolean: bool) -> pd.Series:
    """A boolean or categorical column as the imputer takes and returns it: pandas "boolean"
    (pd.NA = missing), or object holding str labels (None = missing); the index is kept."""
    if boolean:
        return series.astype("boolean")
    values = [None if pd.isna(v) else str(v) for v in series.to_numpy(dtype=object)]
    return pd.Series(values, index=series.index, name=series.name, dtype=object)


def observed_labels(series: pd.Series) -> tuple[object, ...]:
    """The distinct labels observed in a boolean or categorical column, sorted: bool or str."""
    values = series.dropna().unique()
    labels = {bool(v) if isinstance(v, (bool, np.bool_)) else str(v) for v in values}
    return tuple(sorted(labels, key=lambda v: (str(type(v)), v)))


def moments(values: np.ndarray | pd.Series, *, ddof: int = 1) -> tuple[float, float]:
    """The mean and standard deviation (`ddof`) of `values` but NaN (NaN where there are too
    few), computed on them divided by their largest magnitude, so that numbers near the limit
    of a double do not overflow (1.7e308 twice is inf)."""
    array = np.asarray(values, dtype=float)
    array = array[~np.isnan(array)]
    largest = float(np.max(np.abs(array))) if array.size else 0.0
    scale = largest if 0 < largest < np.inf else 1.0
    scaled = array / scale
    mean = float(scaled.mean()) * scale if array.size else float("nan")
    std = float(scaled.std(ddof=ddof)) * scale if array.size > ddof else float("nan")
    return mean, std
