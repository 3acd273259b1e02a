"""Pandera schema for the columns of a source table about to be imputed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pandera.pandas as pa

__all__ = ["CHECK_FINITE", "CHECK_MIN_ROWS", "CHECK_OBSERVED", "MIN_ROWS", "input_schema"]

MIN_ROWS = 4
"""Fewest rows the imputer accepts (it draws two batches of at least two rows)."""

# Check names, reported in failure cases and turned into sentences by tasks.validate.
CHECK_FINITE = "finite"
CHECK_OBSERVED = "has_observed_value"
CHECK_MIN_ROWS = "min_rows"


def _finite(series: pd.Series) -> pd.Series:
    return ~np.isinf(series)


def _has_observed_value(series: pd.Series) -> bool:
    return bool(series.notna().any())


def input_schema(
    columns: Sequence[str], key: str | None = None, *, min_rows: int = MIN_ROWS
) -> pa.DataFrameSchema:
    """Schema of the chosen columns (as float64, NaN = missing) and the key column, if any.

    Each column to impute is float64, finite where observed, and has at least one observed value;
    the key column is unique and never null; the table has at least `min_rows` rows.
    """
    spec: dict[str, pa.Column] = {
        name: pa.Column(
            "float64",
            nullable=True,
            checks=[
                pa.Check(_finite, name=CHECK_FINITE, error=CHECK_FINITE),
                pa.Check(
                    _has_observed_value,
                    name=CHECK_OBSERVED,
                    error=CHECK_OBSERVED,
                    ignore_na=False,
                ),
            ],
        )
        for name in columns
    }
    if key is not None:
        spec[key] = pa.Column(nullable=False, unique=True)
    return pa.DataFrameSchema(
        spec,
        checks=[
            pa.Check(
                lambda frame: len(frame) >= min_rows, name=CHECK_MIN_ROWS, error=CHECK_MIN_ROWS
            )
        ],
        strict=True,
        ordered=False,
    )
