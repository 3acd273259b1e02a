"""Small conversions between DuckDB-typed pandas columns and the float matrices TDM works on."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["as_float_frame"]


def as_float_frame(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """The `columns` of `frame` as float64, with NULL (and NaN) as NaN; the index is kept."""
    return pd.DataFrame(
        {name: frame[name].to_numpy(dtype=np.float64, na_value=np.nan) for name in columns},
        index=frame.index,
    )
