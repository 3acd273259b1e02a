"""Column kinds: the one place that decides how a column of a table is imputed.

A column is ``"float"``, ``"integer"`` (NumPy or pandas nullable), ``"boolean"`` (``bool``,
pandas ``boolean``) or ``"categorical"`` (``object``, string, ``category``). The imputers, the
metrics and the warehouse pipeline all ask here.
"""

from __future__ import annotations

from typing import Any, Literal, cast

import numpy as np
import pandas as pd

__all__ = [
    "BOOLEAN",
    "CATEGORICAL",
    "FLOAT",
    "INTEGER",
    "NUMERIC_KINDS",
    "ColumnKind",
    "column_kind",
    "column_kinds",
    "holds_only_numbers",
    "mostly_distinct",
]

ColumnKind = Literal["float", "integer", "boolean", "categorical"]

FLOAT: ColumnKind = "float"
INTEGER: ColumnKind = "integer"
BOOLEAN: ColumnKind = "boolean"
CATEGORICAL: ColumnKind = "categorical"
NUMERIC_KINDS: tuple[ColumnKind, ...] = (FLOAT, INTEGER)


def column_kind(dtype: Any) -> ColumnKind:
    """The kind of a column of ``dtype``.

    Raises
    ------
    TypeError
        For any other dtype (dates, complex numbers, sparse columns, ...).
    """
    if isinstance(dtype, pd.SparseDtype):
        raise TypeError(f"dtype {dtype}")  # its cells cannot be filled in place
    if pd.api.types.is_bool_dtype(dtype):
        return BOOLEAN
    if pd.api.types.is_float_dtype(dtype):
        return FLOAT
    if pd.api.types.is_integer_dtype(dtype):
        return INTEGER
    if (
        isinstance(dtype, pd.CategoricalDtype)
        or pd.api.types.is_object_dtype(dtype)
        or pd.api.types.is_string_dtype(dtype)
    ):
        return CATEGORICAL
    raise TypeError(f"dtype {dtype}")


def column_kinds(frame: pd.DataFrame) -> dict[Any, ColumnKind]:
    """The kind of every column of ``frame``, by column name.

    Raises
    ------
    TypeError
        For a column of an unsupported dtype, naming it.
    """
    kinds: dict[Any, ColumnKind] = {}
    for name, dtype in frame.dtypes.items():
        try:
            kinds[name] = cast(ColumnKind, column_kind(dtype))
        except TypeError:
            raise TypeError(
                f"column {name!r} has dtype {dtype}, which is neither float, integer, boolean "
                "nor categorical (object, string, category); convert or drop it"
            ) from None
    return kinds


_NUMBERS = frozenset({"integer", "floating", "mixed-integer-float", "decimal"})
"""What `pandas.api.types.infer_dtype` calls values that are all numbers."""


def holds_only_numbers(values: pd.Series, *, booleans: bool = False) -> bool:
    """Whether the observed values of an ``object`` column are all numbers (or booleans, with
    ``booleans``): a column that is categorical by its dtype only."""
    found = pd.api.types.infer_dtype(values, skipna=True)
    return found in _NUMBERS or (booleans and found == "boolean")


def mostly_distinct(values: pd.Series) -> bool:
    """Whether a label column looks like an identifier or free text: more than two labels, and
    most observed cells hold a label no other cell holds (the warehouse pipeline's
    ``LabelCount.mostly_distinct`` counts the same in SQL)."""
    codes = pd.factorize(values)[0]  # not value_counts: pandas 2 warns on object dtype
    counts = np.bincount(codes[codes >= 0])
    return len(counts) > 2 and 2 * int((counts == 1).sum()) > int(counts.sum())
