"""Column kinds: the one place that decides how a column of a table is imputed.

A column is ``"float"``, ``"integer"`` (NumPy or pandas nullable), ``"boolean"`` (``bool``,
pandas ``boolean``) or ``"categorical"`` (``object``, string, ``category``). The imputers, the
metrics and the warehouse pipeline all ask here.
"""

from __future__ import annotations

from typing import Any, Literal, cast

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
