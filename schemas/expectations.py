"""The Great Expectations suite an imputed table must pass before it is written."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # great_expectations takes seconds to import: only the quality task needs it.
    import great_expectations as gx

__all__ = [
    "CHECK_COLUMN",
    "CHECK_META",
    "IMPUTED_SPREAD",
    "LABEL_SHARE_THRESHOLD",
    "RANGE_FACTOR",
    "SPREAD_THRESHOLD",
    "SUITE_NAME",
    "WITHIN_BOUNDS",
    "expectation_suite",
]

SUITE_NAME = "tdm-imputed-table"

RANGE_FACTOR = 1.0
"""Default k of the sane-range check: imputed values must lie within
[min - k * (max - min), max + k * (max - min)] of the column's observed values."""

LABEL_SHARE_THRESHOLD = 0.3
"""Default total variation distance between the label shares of a text, enum or boolean
column's imputed cells and of its observed cells beyond which the run warns (not fails)."""

SPREAD_THRESHOLD = 0.5
"""Default t of the spread warning: a numeric column whose imputed cells' standard deviation
is below (1 - t) or above 1 / (1 - t) times its observed cells' is named (not failed)."""

CHECK_META = "tdm_check"
"""The `meta` entry naming a check where the expectation's type alone does not (two checks of
one column use `expect_column_values_to_be_between`)."""
CHECK_COLUMN = "tdm_column"
"""The `meta` entry naming the table's column an expectation checks, where it runs on another
column of the checked frame (one holding only the column's imputed cells)."""
WITHIN_BOUNDS = "within_bounds"
"""The name of the check that a numeric column's values lie within its bounds."""
IMPUTED_SPREAD = "imputed_spread"
"""The name of the check that a numeric column's imputed cells are about as spread as its
observed ones (a warning, not a failure)."""


def expectation_suite(
    columns: Sequence[str],
    key: str | None,
    n_rows: int,
    bounds: Mapping[str, tuple[float, float]],
    value_bounds: Mapping[str, tuple[float, float]] | None = None,
    labels: Mapping[str, Sequence[object]] | None = None,
    imputed_cells: Mapping[str, str] | None = None,
    spreads: Mapping[str, tuple[float, float]] | None = None,
) -> gx.ExpectationSuite:
    """Expectations on the imputed columns: no nulls, the source's row count, unique non-null
    keys; every value of a numeric column within `bounds[column]` (the sane range around the
    observed values); every imputed value of a numeric column within `value_bounds[column]`
    (the bounds imputed values were held to; an infinite end is open, and no check is made
    where both are), and of a labelled column
    (boolean, text, enum) in `labels[column]`, the labels observed in it. `imputed_cells` names,
    per column, the column of the checked frame that holds only its imputed cells (the others
    null), on which those two run; without it they run on the whole column. `spreads` gives,
    per numeric column, the range the standard deviation of its imputed cells may take: a
    warning (severity "warning") when it does not."""
    import great_expectations as gx
    import great_expectations.expectations as gxe
    from great_expectations.expectations.metadata_types import FailureSeverity

    value_bounds = value_bounds or {}
    labels = labels or {}
    imputed_cells = imputed_cells or {}
    spreads = spreads or {}
    expectations: list[gxe.Expectation] = [gxe.ExpectTableRowCountToEqual(value=n_rows)]
    for name in columns:
        expectations.append(gxe.ExpectColumnValuesToNotBeNull(column=name))
        imputed = imputed_cells.get(name, name)
        if name in labels:
            expectations.append(
                gxe.ExpectColumnValuesToBeInSet(
                    column=imputed, value_set=list(labels[name]), meta={CHECK_COLUMN: name}
                )
            )
            continue
        low, high = bounds[name]
        expectations.append(
            gxe.ExpectColumnValuesToBeBetween(column=name, min_value=low, max_value=high)
        )
        low, high = value_bounds.get(name, (-math.inf, math.inf))
        if math.isfinite(low) or math.isfinite(high):  # both ends open: nothing to check
            expectations.append(
                gxe.ExpectColumnValuesToBeBetween(
                    column=imputed,
                    min_value=low if math.isfinite(low) else None,
                    max_value=high if math.isfinite(high) else None,
                    meta={CHECK_META: WITHIN_BOUNDS, CHECK_COLUMN: name},
                )
            )
        if name in spreads:
            low, high = spreads[name]
            expectations.append(
                gxe.ExpectColumnStdevToBeBetween(
                    column=imputed,
                    min_value=low,
                    max_value=high,
                    severity=FailureSeverity.WARNING,
                    meta={CHECK_META: IMPUTED_SPREAD, CHECK_COLUMN: name},
                )
            )
    if key is not None:
        expectations += [
            gxe.ExpectColumnValuesToNotBeNull(column=key),
            gxe.ExpectColumnValuesToBeUnique(column=key),
        ]
    # Built from a list, the suite needs no data context until it is run.
    return gx.ExpectationSuite(name=SUITE_NAME, expectations=expectations)
