"""The Great Expectations suite an imputed table must pass before it is written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # great_expectations takes seconds to import: only the quality task needs it.
    import great_expectations as gx

__all__ = ["RANGE_FACTOR", "SUITE_NAME", "expectation_suite"]

SUITE_NAME = "tdm-imputed-table"

RANGE_FACTOR = 1.0
"""Default k of the sane-range check: imputed values must lie within
[min - k * (max - min), max + k * (max - min)] of the column's observed values."""


def expectation_suite(
    columns: Sequence[str],
    key: str | None,
    n_rows: int,
    bounds: Mapping[str, tuple[float, float]],
) -> gx.ExpectationSuite:
    """Expectations on the imputed columns: no nulls, the source's row count, unique non-null
    keys, and every value within `bounds[column]` (the sane range around the observed values)."""
    import great_expectations as gx
    import great_expectations.expectations as gxe

    expectations: list[gxe.Expectation] = [gxe.ExpectTableRowCountToEqual(value=n_rows)]
    for name in columns:
        low, high = bounds[name]
        expectations += [
            gxe.ExpectColumnValuesToNotBeNull(column=name),
            gxe.ExpectColumnValuesToBeBetween(column=name, min_value=low, max_value=high),
        ]
    if key is not None:
        expectations += [
            gxe.ExpectColumnValuesToNotBeNull(column=key),
            gxe.ExpectColumnValuesToBeUnique(column=key),
        ]
    # Built from a list, the suite needs no data context until it is run.
    return gx.ExpectationSuite(name=SUITE_NAME, expectations=expectations)
