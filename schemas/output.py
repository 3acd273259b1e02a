"""Pandera schema for an imputed table's columns before they are written back."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np
import pandas as pd
import pandera.pandas as pa

__all__ = ["output_schema"]


def _finite(series: pd.Series) -> pd.Series:
    return np.isfinite(series)


def output_schema(
    columns: Sequence[str], key: str | None, n_rows: int, labelled: Collection[str] = ()
) -> pa.DataFrameSchema:
    """Schema of the imputed columns (numeric ones float64 and finite; the `labelled` ones,
    boolean or categorical, of any dtype; none null), the key and the row count."""
    spec: dict[str, pa.Column] = {
        name: pa.Column(nullable=False)
        if name in labelled
        else pa.Column("float64", nullable=False, checks=pa.Check(_finite, name="finite"))
        for name in columns
    }
    if key is not None:
        spec[key] = pa.Column(nullable=False, unique=True)
    return pa.DataFrameSchema(
        spec,
        checks=[pa.Check(lambda frame: len(frame) == n_rows, name="row_count")],
        strict=True,
    )
