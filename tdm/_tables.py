"""The imputers' tables in and out: an array or a DataFrame read into the optimised space
(:mod:`tdm._mixed`), the bounds of its numeric columns, and the completed table in the input's
own type, every column in its own dtype, integer columns rounded and every imputed value within
its bounds.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.utils.validation import validate_data

from tdm._bounds import column_bounds
from tdm._mixed import TableEncoding
from tdm._validation import caller_stacklevel, check_finite_or_nan
from tdm.columns import BOOLEAN, FLOAT, INTEGER, holds_only_numbers, mostly_distinct
from tdm.scaling import FAR_RATIO, MAX_STANDARDISED, far_values, first_too_far

__all__ = [
    "BoundsParam",
    "complete_table",
    "fingerprint",
    "fitted_bounds",
    "read_table",
    "standardised",
    "warn_far_values",
]


@dataclass(frozen=True)
class BoundsParam:
    """The ``bounds`` hyperparameter: ``"observed"``, ``None`` or a mapping of columns to
    ``(low, high)`` pairs (the pairs are checked in ``fit``, against the columns)."""

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` is ``"observed"``, ``None`` or a mapping."""
        return value is None or value == "observed" or isinstance(value, Mapping)

    def describe(self) -> str:
        """What ``bounds`` may be."""
        return "'observed', None or a dict {column: (low, high)}"


def read_table(estimator: Any, X: Any, *, reset: bool, owner: str) -> np.ndarray:
    """``X`` in the optimised space (NaN where missing), checking its columns against ``fit``'s.

    With ``reset``, ``estimator.encoding_`` is built from ``X`` (and the feature names and
    count set); else ``X`` must have the fitted columns.
    """
    if not isinstance(X, pd.DataFrame):
        if not reset and estimator.encoding_.frame:  # before its cells are read as numbers
            raise ValueError(f"{owner} was fitted on a DataFrame; pass a DataFrame.")
        _check_exact_integers(X, owner)
        _check_numbers(X, owner)
        check_finite_or_nan(X, owner)
        values: np.ndarray = validate_data(
            estimator,
            X,
            reset=reset,
            dtype=[np.float64, np.float32],
            ensure_all_finite="allow-nan",
            ensure_min_samples=1,
        )
        if reset:
            estimator.encoding_ = TableEncoding.from_array(values.shape[1])
        return values
    if X.columns.has_duplicates:
        repeated = X.columns[X.columns.duplicated()][0]
        raise ValueError(f"{owner}: column names must be unique; {repeated!r} is repeated.")
    if not reset and estimator.encoding_.frame:
        _refuse_reordered_columns(X, estimator.encoding_, owner)
    validate_data(estimator, X, reset=reset, skip_check_array=True)
    if len(X) < 1:
        raise ValueError(f"{owner}: the DataFrame has no row; at least 1 is required.")
    if reset:
        estimator.encoding_ = TableEncoding.from_frame(X, owner)
        _warn_doubtful_labels(X, estimator.encoding_, owner)
    encoding: TableEncoding = estimator.encoding_
    if not encoding.frame:
        raise ValueError(f"{owner} was fitted on an array; pass an array.")
    numeric = list(encoding.numeric)
    check_finite_or_nan(X.iloc[:, numeric], owner)
    if not reset:
        _check_fitted_columns(X, encoding, owner)
    return encoding.encode(X)


def standardised(
    values: np.ndarray,
    mean: np.ndarray,
    scale: np.ndarray,
    encoding: TableEncoding,
    labels: list[str],
    owner: str,
    *,
    new_rows: bool,
) -> np.ndarray:
    """``(values - mean) / scale``, refusing (a ``ValueError`` naming the column and the row)
    an observed value this puts out of float64's range (values too far apart to standardise,
    such as huge codes for "unknown") and, for ``new_rows`` (rows the scaling was not fitted
    on), one more than :data:`tdm.scaling.MAX_STANDARDISED` standard deviations from the mean.
    ``labels`` name the table's columns."""
    with np.errstate(over="ignore"):
        Z = (values.astype(np.float64) - mean) / scale
    found = first_too_far(Z, MAX_STANDARDISED if new_rows else np.inf)
    if found is None:
        return Z
    row, k = found  # a numeric coordinate: label coordinates are not rescaled
    value, label = values[row, k], labels[encoding.numeric[k]]
    if np.isinf(Z[row, k]):
        raise ValueError(
            f"{owner}: {label} holds {value:.6g} (row {row}), too far from the column's mean "
            f"to standardise in float64 (mean {mean[k]:.6g}, standard deviation "
            f"{scale[k]:.6g}). If such values are codes (for 'unknown', say), replace them with "
            "NaN; otherwise divide the column by a power of ten."
        )
    raise ValueError(
        f"{owner}: {label} holds {value:.6g} (row {row}), {abs(Z[row, k]):.3g} standard "
        f"deviations from the mean of the values it was fitted on (mean {mean[k]:.6g}, standard "
        f"deviation {scale[k]:.6g}): too far to impute. Refit on rows that include such "
        "values, or replace them with NaN if they are codes."
    )


def warn_far_values(
    values: np.ndarray, encoding: TableEncoding, labels: list[str], owner: str
) -> None:
    """Warn of each numeric column with :func:`tdm.scaling.far_values`, naming it and the
    values: they set the column's scale, so its imputed cells may land between them and the
    rest."""
    for k, j in enumerate(encoding.numeric):
        column = values[:, k]
        far = far_values(column[~np.isnan(column)])
        if not far.size:
            continue
        shown = ", ".join(f"{v:.10g}" for v in np.unique(far)[:3])
        warnings.warn(
            f"{owner}: {labels[j]} has {far.size} observed value(s) ({shown}) over "
            f"{FAR_RATIO:,.0f} times farther from its median than any other; if they are codes "
            "(for 'unknown', say), replace them with NaN: they set the column's scale, so its "
            "imputed cells may land between them and the rest.",
            UserWarning,
            stacklevel=caller_stacklevel(),
        )


def _inexact(value: Any) -> bool:
    """Whether ``value`` is an integer that float64 cannot hold exactly."""
    if not isinstance(value, int | np.integer) or isinstance(value, bool | np.bool_):
        return False
    try:
        return abs(int(value)) > 2**53 and int(float(value)) != int(value)
    except OverflowError:  # beyond float64's range
        return True


def _check_exact_integers(X: Any, owner: str) -> None:
    """Refuse an integer of a 2-D array (or nested list) that float64 cannot hold exactly
    (beyond 2**53), naming its column and row: an array is read as float64, so it would come
    back changed."""
    raw = np.array(X, dtype=object) if isinstance(X, list) else X  # a list keeps its ints
    if not (isinstance(raw, np.ndarray) and raw.ndim == 2 and raw.dtype.kind in "iuO"):
        return
    if raw.dtype.kind in "iu":
        cells = np.argwhere((raw > 2**53) | (raw < -(2**53)))
    else:
        try:  # most cells are small: test only those a double may not hold
            cells = np.argwhere(np.abs(raw.astype(np.float64)) >= 2**53)
        except (TypeError, ValueError, OverflowError):
            cells = np.argwhere(np.ones(raw.shape, dtype=bool))
    for row, j in cells:
        value = raw[row, j]
        if _inexact(value):
            digits = str(int(value))
            shown = digits if len(digits) <= 40 else f"{digits[:12]}... ({len(digits)} digits)"
            raise ValueError(
                f"{owner}: column {j} of the array holds {shown} (row {row}), an integer "
                "beyond 2**53 that float64 cannot hold exactly; an array is read as float64, so "
                "it would come back changed. Pass a DataFrame with an integer column to keep "
                "such values exact, or leave the column out (an identifier is not imputed)."
            )


def _check_numbers(X: Any, owner: str) -> None:
    """Refuse a 2-D NumPy array of text or objects with a text cell that is not a number,
    naming its column: an array is read as numbers, a DataFrame's text columns as labels."""
    if not (isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype.kind in "USO"):
        return
    try:
        X.astype(np.float64)
        return
    except (TypeError, ValueError):
        pass  # find the cell below
    for j in range(X.shape[1]):
        for value in X[:, j]:
            if not isinstance(value, str | bytes):
                continue  # a number, None or another object: scikit-learn's own checks apply
            try:
                float(value)
            except ValueError:
                raise ValueError(
                    f"{owner}: column {j} of the array holds {str(value)!r}, which is not a "
                    "number; an array is read as numbers. Pass a DataFrame to impute text "
                    "columns as labels."
                ) from None


def _warn_doubtful_labels(X: pd.DataFrame, encoding: TableEncoding, owner: str) -> None:
    """Warn of a label column with a missing cell that is unlikely meant as labels: an object
    column that holds only numbers (each number becomes a label), or one where most observed
    cells hold a label no other cell holds (an identifier or free text: a missing cell can only
    copy another row's)."""
    for j in encoding.categorical:
        series = X.iloc[:, j]
        if not series.isna().any():
            continue
        name = encoding.columns[j].name
        if series.dtype == object and holds_only_numbers(series):
            warnings.warn(
                f"{owner}: column {name!r} has dtype object and holds only numbers, so it is "
                "imputed as labels (a missing cell takes one of its observed numbers); convert "
                "it with pandas.to_numeric to impute it as numbers.",
                UserWarning,
                stacklevel=caller_stacklevel(),
            )
            continue
        if mostly_distinct(series):
            warnings.warn(
                f"{owner}: column {name!r} looks like an identifier or free text (most of its "
                "observed cells hold a label no other cell holds), so its missing cells copy "
                "other rows' labels; drop it from X if it is not a category.",
                UserWarning,
                stacklevel=caller_stacklevel(),
            )


# The nullable dtype that holds a column of each kind with missing cells.
_NULLABLE = {INTEGER: "Int64", BOOLEAN: "boolean"}


def _refuse_reordered_columns(X: pd.DataFrame, encoding: TableEncoding, owner: str) -> None:
    """Refuse new rows ``X`` holding the fitted columns in another order, saying how to reorder
    them (scikit-learn's contract: a transformer does not match columns by name; its message
    comes first, as its checks expect). Names match by value and type (``repr``)."""
    names = [coding.name for coding in encoding.columns]
    given = list(X.columns)
    if given == names or X.columns.has_duplicates:
        return
    if sorted(map(repr, given)) == sorted(map(repr, names)):
        raise ValueError(
            "The feature names should match those that were passed during fit.\n"
            "Feature names must be in the same order as they were in fit.\n"
            f"{owner}: X has the fitted columns in another order; pass X[{names!r}]."
        )


def _check_fitted_columns(X: pd.DataFrame, encoding: TableEncoding, owner: str) -> None:
    """Refuse new rows ``X`` whose columns are not the fitted ones, in their order (names of
    any type: scikit-learn compares string names only), or not of their fitted kinds (but a
    float column may come as integers with no missing cell), or an ordered category without a
    label seen in fit, which one of its missing cells may take."""
    names = [coding.name for coding in encoding.columns]
    if list(X.columns) != names:
        raise ValueError(
            f"{owner}: the columns of X are not those seen in fit, in their order: fitted "
            f"{names}, got {list(X.columns)}."
        )
    for j, coding in enumerate(encoding.columns):
        dtype = X.dtypes.iloc[j]
        kind = TableEncoding.from_frame(X.iloc[:, [j]], owner).columns[0].kind
        missing = X.iloc[:, j].isna().any()
        if coding.kind == FLOAT and kind == INTEGER and not missing:
            continue  # whole numbers of a float column, nothing to impute: they come back as given
        if coding.kind != kind:
            hint = ""
            if coding.kind in _NULLABLE and missing:
                hint = (
                    f" (with a missing value, pandas turns it into {dtype}: give it the dtype "
                    f"{_NULLABLE[coding.kind]!r})"
                )
            elif coding.kind == FLOAT and kind == INTEGER:
                hint = " (its missing cells take fractional values: give it a float dtype)"
            raise ValueError(
                f"{owner}: column {coding.name!r} was {coding.kind} in fit; got dtype "
                f"{dtype}{hint}."
            )
        if isinstance(dtype, pd.CategoricalDtype) and dtype.ordered and X.iloc[:, j].isna().any():
            fitted = () if coding.labels is None else coding.labels
            absent = [label for label in fitted if label not in dtype.categories]
            if absent:
                raise ValueError(
                    f"{owner}: column {coding.name!r} is an ordered category without labels "
                    f"seen in fit ({', '.join(map(repr, absent[:5]))}), which its missing cells "
                    "may take; give it the categories it had in fit."
                )


def fitted_bounds(
    bounds: Any, margin: float, encoding: TableEncoding, values: np.ndarray, owner: str
) -> dict[Hashable, tuple[float, float]]:
    """``bounds_``: each numeric column's ``(low, high)`` in the data's units. Bounds of an
    integer column that hold no integer are refused."""
    names = [encoding.columns[j].name for j in encoding.numeric]
    if isinstance(bounds, Mapping):
        labelled = [c for c in encoding.columns if c.name in bounds and c.name not in names]
        if labelled:
            raise ValueError(
                f"{owner}: bounds names column {labelled[0].name!r}, which is "
                f"{labelled[0].kind}; bounds apply to numeric columns only."
            )
    low, high = column_bounds(bounds, margin, names, values[:, : len(names)], owner)
    for k, j in enumerate(encoding.numeric):
        if encoding.columns[j].kind == INTEGER and np.ceil(low[k]) > np.floor(high[k]):
            raise ValueError(
                f"{owner}: bounds[{names[k]!r}] = ({low[k]:g}, {high[k]:g}) holds no integer, and "
                f"column {names[k]!r} is an integer column; widen the bounds to hold one."
            )
        narrow = _narrow_float(encoding.columns[j].dtype if encoding.frame else values.dtype)
        if narrow is not None and not _holds_a_value(low[k], high[k], narrow):
            raise ValueError(
                f"{owner}: bounds[{names[k]!r}] = ({float(low[k])!r}, {float(high[k])!r}) holds "
                f"no finite {narrow} number, and column {names[k]!r} is {narrow}; widen the "
                "bounds to hold one."
            )
    return {name: (float(lo), float(hi)) for name, lo, hi in zip(names, low, high, strict=True)}


def bounds_arrays(
    bounds: Mapping[Hashable, tuple[float, float]], encoding: TableEncoding
) -> tuple[np.ndarray, np.ndarray]:
    """The low and high bounds of the numeric columns, in their order in the optimised space."""
    pairs = [bounds[encoding.columns[j].name] for j in encoding.numeric]
    low = np.asarray([p[0] for p in pairs], dtype=np.float64)
    high = np.asarray([p[1] for p in pairs], dtype=np.float64)
    return low, high


def complete_table(
    X: Any,
    values: np.ndarray,
    filled: np.ndarray,
    encoding: TableEncoding,
    mean: np.ndarray,
    scale: np.ndarray,
    bounds: Mapping[Hashable, tuple[float, float]],
) -> Any:
    """``X`` with its missing cells from ``filled`` (the optimised, standardised space): numeric
    values mapped back by ``mean``/``scale``, clamped to ``bounds`` and, for integer columns,
    rounded to an integer within them and their type's range; half- and single-precision
    columns within ``bounds`` (and finite) once rounded; categorical cells by label. Same type
    as ``X``."""
    mask = np.isnan(values)
    p = len(encoding.numeric)
    low, high = bounds_arrays(bounds, encoding)
    with np.errstate(all="ignore"):
        numeric = np.clip(filled[:, :p] * scale[:p] + mean[:p], low, high)
        for k, j in enumerate(encoding.numeric):
            if encoding.columns[j].kind == INTEGER:
                least, most = _integer_range(X.dtypes.iloc[j])
                lo, hi = max(np.ceil(low[k]), least), min(np.floor(high[k]), most)
                numeric[:, k] = np.clip(np.rint(numeric[:, k]), lo, hi)
            elif narrow := _narrow_float(X.dtypes.iloc[j] if encoding.frame else values.dtype):
                numeric[:, k] = _narrow_within(numeric[:, k], low[k], high[k], narrow)
    if not encoding.frame:
        out = values.copy()
        out[mask] = numeric[mask].astype(out.dtype)
        return out
    return encoding.decode(X, numeric, filled)


def _numpy_dtype(dtype: Any) -> Any:
    """The NumPy dtype of a column's dtype (a masked ``Float32``'s is ``float32``)."""
    return getattr(dtype, "numpy_dtype", dtype)


def _integer_range(dtype: Any) -> tuple[float, float]:
    """The least and the most double an integer column of ``dtype`` holds (``2**63 - 1`` rounds
    up to ``2**63`` as a double, past ``int64``: the double below it is taken)."""
    info = np.iinfo(_numpy_dtype(dtype))
    most = float(info.max)
    return float(info.min), most if most <= info.max else float(np.nextafter(most, 0.0))


def _narrow_float(dtype: Any) -> np.dtype | None:
    """The NumPy dtype of a float column narrower than a double (half or single precision, a
    masked ``Float32`` too), else None."""
    found = np.dtype(_numpy_dtype(dtype))
    return found if found.kind == "f" and found.itemsize < 8 else None


def _finite_part(low: float, high: float, dtype: np.dtype) -> tuple[float, float]:
    """``[low, high]`` cut to the finite numbers of ``dtype`` (half precision ends at 65504)."""
    most = float(np.finfo(dtype).max)
    return max(low, -most), min(high, most)


def _narrow_within(values: np.ndarray, low: float, high: float, dtype: np.dtype) -> np.ndarray:
    """``values`` (within ``[low, high]``) rounded to ``dtype``, an end that rounds outside the
    bounds, or past ``dtype``'s finite numbers, moved to the next ``dtype`` number inside them
    (`_holds_a_value`: there is one)."""
    low, high = _finite_part(low, high, dtype)
    with np.errstate(over="ignore"):
        narrow = values.astype(dtype)
    up = narrow.astype(np.float64) > high
    narrow[up] = np.nextafter(narrow[up], dtype.type(-np.inf))
    down = narrow.astype(np.float64) < low
    narrow[down] = np.nextafter(narrow[down], dtype.type(np.inf))
    return narrow.astype(np.float64)


def _holds_a_value(low: float, high: float, dtype: np.dtype) -> bool:
    """Whether ``[low, high]`` holds a finite number of ``dtype``: the least one at or above
    ``low`` is at most ``high``."""
    low, high = _finite_part(low, high, dtype)
    if low > high:
        return False
    least = dtype.type(low)
    if float(least) < low:
        least = np.nextafter(least, dtype.type(np.inf))
    return float(least) <= high


def fingerprint(values: np.ndarray) -> str:
    """A digest of ``values``' shape, dtype and bytes (equal arrays, equal digests): how
    ``transform`` recognises the data ``fit`` saw."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(str(values.shape).encode())
    digest.update(str(values.dtype).encode())
    digest.update(np.ascontiguousarray(values).tobytes())
    return digest.hexdigest()
