"""Pandera schema for the columns of a source table about to be imputed."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
import pandera.pandas as pa

__all__ = [
    "CHECK_FINITE",
    "CHECK_LABELS",
    "CHECK_MIN_ROWS",
    "CHECK_OBSERVED",
    "MAX_COLUMNS",
    "MAX_LABELS",
    "MIN_ROWS",
    "LabelCount",
    "input_schema",
    "is_label_feature",
]

MIN_ROWS = 4
"""Fewest rows the imputer accepts (it draws two batches of at least two rows)."""

MAX_COLUMNS = 400
"""Most columns one run imputes together: beyond it the default start takes hours and the fit
can diverge (docs/operator.md, Wide tables); choose the columns, or split the table."""

MAX_LABELS = 500
"""Most distinct labels a text or enum column to impute may hold: beyond it, the column is
more likely an identifier or free text than a category (leave it out, or pass it through)."""


def is_label_feature(n_labels: int, n_rows: int) -> bool:
    """Whether a complete text, enum or boolean column of `n_labels` distinct labels over
    `n_rows` rows informs the fit by default: from 2 labels (one tells nothing) to `MAX_LABELS`,
    each held by two rows on average (a column of mostly distinct values is a key or free text,
    not a label)."""
    return 2 <= n_labels <= MAX_LABELS and 2 * n_labels <= n_rows


class LabelCount(NamedTuple):
    """A text, enum or boolean column's distinct labels, its observed cells, and its observed
    cells that hold a label no other cell holds."""

    labels: int
    observed: int
    once: int

    @property
    def mostly_distinct(self) -> bool:
        """Whether the column looks like an identifier or free text: more than two labels, and
        most observed cells hold a label of their own. Its NULLs have no label to learn."""
        return self.labels > 2 and 2 * self.once > self.observed

    def imputed_by_default(self, n_rows: int) -> bool:
        """Whether the column (of `n_rows` rows) is taken when the columns to impute are not
        named: one with a NULL and an observed cell unless `mostly_distinct` (its NULLs are then
        kept, and logged), a complete one when `is_label_feature` (it informs the fit)."""
        if self.observed == n_rows:
            return is_label_feature(self.labels, n_rows)
        return self.observed > 0 and not self.mostly_distinct


# Check names, reported in failure cases and turned into sentences by tasks.validate.
CHECK_FINITE = "finite"
CHECK_OBSERVED = "has_observed_value"
CHECK_MIN_ROWS = "min_rows"
CHECK_LABELS = "at_most_max_labels"


def _finite(series: pd.Series) -> pd.Series:
    return ~np.isinf(series)


def _has_observed_value(series: pd.Series) -> bool:
    return bool(series.notna().any())


def _few_labels(series: pd.Series) -> bool:
    return int(series.nunique(dropna=True)) <= MAX_LABELS


def input_schema(
    columns: Sequence[str],
    key: str | None = None,
    *,
    min_rows: int = MIN_ROWS,
    labelled: Collection[str] = (),
) -> pa.DataFrameSchema:
    """Schema of the chosen columns and the key column, if any.

    Each numeric column to impute is float64 (NaN = missing) and finite where observed; each
    column in `labelled` (text, enum or boolean: any dtype, NULL = missing) holds at most
    `MAX_LABELS` distinct labels; every column to impute has at least one observed value; the
    key column is unique and never null; the table has at least `min_rows` rows.
    """
    observed = pa.Check(
        _has_observed_value, name=CHECK_OBSERVED, error=CHECK_OBSERVED, ignore_na=False
    )
    spec: dict[str, pa.Column] = {
        name: pa.Column(
            nullable=True,
            checks=[pa.Check(_few_labels, name=CHECK_LABELS, error=CHECK_LABELS), observed],
        )
        if name in labelled
        else pa.Column(
            "float64",
            nullable=True,
            checks=[pa.Check(_finite, name=CHECK_FINITE, error=CHECK_FINITE), observed],
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
