"""Quality step: the checks pass on a good imputation and fail, naming why, on a bad one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tasks.cells import add_checks
from tasks.errors import QualityCheckError
from tasks.quality import CheckOutcome, check_quality, merge_reports, sane_bounds

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_good_imputation_passes_every_check(
    warehouse: Path, steps_before_write: Callable[..., tuple]
) -> None:
    """A real TDM imputation passes GX, the output schema and the observed-cells check."""
    source, plan, imputed, _ = steps_before_write(warehouse)
    report = check_quality.fn(source, plan, imputed)
    names = {c.name for c in report.checks}
    assert report.passed
    assert {"output_schema", "observed_cells_identical"} <= names
    assert 'expect_column_values_to_not_be_null["temperature"]' in names
    assert 'expect_column_values_to_be_unique["id"]' in names
    assert "expect_table_row_count_to_equal" in names
    assert report.to_dict()["passed"] is True
    assert report.bounds == {
        name: sane_bounds(source.frame[name].dropna(), 1.0) for name in plan.columns
    }  # what the report shows as each column's allowed [low, high]
    merged = add_checks(merge_reports([report, report]), [CheckOutcome("x", True, "")])
    assert merged.bounds == report.bounds and merged.checks[-1].name == "x"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("nan", r'expect_column_values_to_not_be_null\["temperature"\]'),
        ("far", r'expect_column_values_to_be_between\["temperature"\]'),
        ("observed", r'observed_cells_identical: 1 observed cell\(s\) changed in "pressure"'),
    ],
    ids=["null-left", "out-of-range", "observed-changed"],
)
def test_damaged_imputation_fails_and_names_the_check(
    warehouse: Path, steps_before_write: Callable[..., tuple], damage: str, message: str
) -> None:
    """Nulls left, values far outside the observed range, or a changed observed cell fail."""
    source, plan, imputed, _ = steps_before_write(warehouse)
    bad = imputed.copy()
    missing_row = int(np.flatnonzero(source.frame["temperature"].isna())[0])
    observed_row = int(np.flatnonzero(source.frame["pressure"].notna())[0])
    if damage == "nan":
        bad.loc[missing_row, "temperature"] = np.nan
    elif damage == "far":
        bad.loc[missing_row, "temperature"] = 1e6
    else:
        bad.loc[observed_row, "pressure"] += 1e-9
    with pytest.raises(QualityCheckError, match=message) as caught:
        check_quality.fn(source, plan, bad)
    assert 'imputed table "readings_imputed"' in str(caught.value)


def test_sane_bounds_widen_the_observed_range_by_k_ranges() -> None:
    """Bounds are [min - k * range, max + k * range]; a constant column gets a unit range."""
    assert sane_bounds(pd.Series([1.0, 3.0, np.nan]), 1.0) == (-1.0, 5.0)
    assert sane_bounds(pd.Series([2.0, 2.0]), 0.5) == (1.0, 3.0)
