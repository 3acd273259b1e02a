"""Quality step: the checks pass on a good imputation and fail, naming why, on a bad one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tasks.artifacts import CHECK_KINDS
from tasks.errors import QualityCheckError
from tasks.quality import (
    LABEL_SHARES,
    CheckOutcome,
    QualityReport,
    check_quality,
    merge_reports,
    sane_bounds,
    spread_range,
)
from tasks.warehouse.cells import add_checks

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
        name: sane_bounds(source.frame[name].dropna(), 1.0)
        for name in plan.columns
        if name not in plan.labels
    }  # what the report shows as each column's allowed [low, high]
    merged = add_checks(merge_reports([report, report]), [CheckOutcome("x", True, "")])
    assert merged.bounds == report.bounds and merged.checks[-1].name == "x"
    # Every kind of check has its short name in the run report (observed_share had none).
    assert {c.name.split("[")[0] for c in report.checks} <= set(CHECK_KINDS)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("nan", r'expect_column_values_to_not_be_null\["temperature"\]'),
        ("far", r'expect_column_values_to_be_between\["temperature"\]'),
        (
            "far",
            r'within_bounds\["temperature"\]: 1 unexpected value\(s\), e\.g\. \[1000000\.0\], '
            r"outside its bounds \[-?[\d.]+, [\d.]+\] \(observed\)",
        ),
        ("observed", r'observed_cells_identical: 1 observed cell\(s\) changed in "pressure"'),
    ],
    ids=["null-left", "out-of-range", "out-of-bounds", "observed-changed"],
)
def test_damaged_imputation_fails_and_names_the_check(
    warehouse: Path, steps_before_write: Callable[..., tuple], damage: str, message: str
) -> None:
    """Nulls left, values far outside the observed range, or a changed observed cell fail; a
    value outside its bounds is said with them and where they come from (bug: a TINYINT's 127
    was not named)."""
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


def _mixed_plan(tmp_path: Path) -> tuple:
    """A table with an integer, a double (config bounds [0, 5], narrower than the data), a text
    and a boolean column with NULLs; its plan, and an imputation that passes every check."""
    from tasks.frames import as_value_frame
    from tasks.load import load_table
    from tasks.validate import validate_input
    from tests.tables import write_table

    db = tmp_path / "w.duckdb"
    rows = [
        (k, None if k % 4 == 1 else k, None if k % 5 == 2 else k / 2,
         None if k % 3 == 0 else "ab"[k % 2], None if k % 6 == 4 else k % 2 == 0)
        for k in range(20)
    ]  # fmt: skip
    columns = {"id": "INTEGER", "n": "INTEGER", "x": "DOUBLE", "s": "VARCHAR", "ok": "BOOLEAN"}
    write_table(db, "t", columns, rows)
    source = load_table.fn(str(db), "t", "id")
    plan = validate_input.fn(source, None, "id", bounds={"x": [0, 5]})
    imputed = as_value_frame(source.frame, plan.columns, plan.kinds)
    missing = source.frame.isna()
    imputed.loc[missing["n"], "n"] = 3.0
    imputed.loc[missing["x"], "x"] = 4.5
    imputed.loc[missing["s"], "s"] = "b"
    imputed.loc[missing["ok"], "ok"] = True
    return source, plan, imputed


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        (None, None, None),
        ("s", "c", r'expect_column_values_to_be_in_set\["s"\]: 1 unexpected value\(s\)'),
        ("n", 3.5, r'integral_values\["n"\]: 1 fractional value\(s\), e\.g\. \[3\.5\]'),
        ("x", 5.5, r'within_bounds\["x"\]: 1 unexpected value\(s\), e\.g\. \[5\.5\]'),
        ("s", None, r'expect_column_values_to_not_be_null\["s"\]'),
    ],
    ids=["passes", "unseen-label", "fractional-integer", "outside-bounds", "label-left-null"],
)
def test_labels_integers_and_bounds_are_checked_on_imputed_cells(
    tmp_path: Path, column: str | None, value: object, message: str | None
) -> None:
    """An imputed label never observed, a fractional integer, or an imputed number outside its
    bounds fails; observed values outside the config's bounds (x up to 9.5) do not."""
    source, plan, imputed = _mixed_plan(tmp_path)
    if column is None:
        report = check_quality.fn(source, plan, imputed)
        assert report.passed and report.labels == {"s": 2, "ok": 2}
        assert report.to_dict()["bounds"]["x"] == [0.0, 5.0, "config", "config"]
        assert report.to_dict()["bounds"]["n"] == [0.0, 19.0, "observed", "observed"]
        return
    row = int(np.flatnonzero(source.frame[column].isna())[0])
    imputed.loc[row, column] = value
    with pytest.raises(QualityCheckError, match=message):
        check_quality.fn(source, plan, imputed)


def test_imputed_label_shares_far_from_the_observed_ones_warn_without_failing(
    tmp_path: Path,
) -> None:
    """Bug: 94% of a column's imputed cells on one label passed every check unremarked. Every
    imputed cell of "s" on "b" (7 cells; "b" is 54% of the observed ones) is past the threshold:
    a warning naming the column and the label, not a failure; "ok" (3 cells on one label) is
    within chance; imputed shares like the observed ones, or a threshold of 0.9, do not warn;
    partitions keep the warning when merged."""
    source, plan, imputed = _mixed_plan(tmp_path)
    report = check_quality.fn(source, plan, imputed)
    assert report.passed and [c.name for c in report.warnings] == [LABEL_SHARES]
    detail = report.warnings[0].detail
    assert '"s" 0.46 (7 cells; "b": 54% of the observed cells, 100% of the imputed ones)' in detail
    assert '"ok"' not in detail
    assert merge_reports([report, report]).warnings[0].warning
    assert not check_quality.fn(source, plan, imputed, label_share_threshold=0.9).warnings
    missing = source.frame["s"].isna().to_numpy()
    imputed.loc[missing, "s"] = ["a", "b"] * 3 + ["a"]
    shares = check_quality.fn(source, plan, imputed).checks[-1]
    assert shares.passed and shares.detail.startswith("largest distance 0.")
    assert shares.detail.endswith(  # bug: "0.59 ..., threshold 0.3" read as a contradiction
        "; within chance for 3 imputed cells (labels drawn at random with the observed shares "
        "reach 0.59)"
    )


def test_many_labels_collapsed_onto_one_warn_though_chance_alone_is_large() -> None:
    """Bug: 61 imputed cells of a column of 239 labels, all on one label (distance 1.00),
    passed: as many random draws show 0.77 on average, so "three times chance" could never be
    reached. Past all but 0.1% of random draws, they warn; drawn at random, they do not."""
    from tasks.quality import _label_shares

    labels = [f"t{k:03d}" for k in range(239)]
    source = pd.DataFrame({"c": labels + [None] * 61})
    collapsed = source.fillna({"c": "t000"})
    report = _label_shares(source, collapsed, ["c"], 0.3)
    assert not report.passed and '"c" 1.00 (61 cells; "t000"' in report.detail
    drawn = np.random.default_rng(1).choice(labels, 61)
    spread = source.copy()
    spread.loc[source["c"].isna(), "c"] = drawn
    assert _label_shares(source, spread, ["c"], 0.3).passed


def test_the_spread_warning_allows_chance_and_the_threshold() -> None:
    """The imputed cells' std may go from (1 - t) to 1 / (1 - t) times the observed cells',
    wider where few cells are imputed; no range without three imputed cells or a spread."""
    from tasks.quality import spread_range

    given = pd.Series([0.0, 2.0, 4.0, 6.0, 8.0] * 40 + [np.nan] * 200)
    spread = spread_range(given, 0.5)
    assert spread is not None
    assert spread.observed == pytest.approx(given.std())
    assert (spread.low, spread.high) == pytest.approx((0.5 * spread.observed, 2 * spread.observed))
    few = spread_range(pd.Series([0.0, 2.0, 4.0, 6.0, 8.0] + [np.nan] * 5), 0.5)
    assert few is not None and few.low == 0.0 and few.high > 2 * few.observed  # 3 / sqrt(8)
    assert spread_range(pd.Series([1.0, 2.0, np.nan, np.nan]), 0.5) is None
    assert spread_range(pd.Series([3.0, 3.0, 3.0] + [np.nan] * 5), 0.5) is None


def test_partitions_merge_their_checks_by_name() -> None:
    """Bug: checks were merged by position, but a spread check runs only where a partition has
    imputed cells: the lists differ, and a check's verdict went to another. Merged by name,
    each says on how many partitions it ran."""
    spread = CheckOutcome('imputed_spread["x"]', False, "0.3 times", warning=True)
    first = QualityReport((CheckOutcome("a", True, "ok"), spread), range_factor=1.0)
    second = QualityReport((CheckOutcome("a", False, "bad"),), range_factor=1.0)
    merged = merge_reports([first, second])
    assert [(c.name, c.passed) for c in merged.checks] == [("a", False), (spread.name, False)]
    assert merged.checks[0].detail == "failed on 1 of 2 partitions: bad"
    assert merged.checks[1].detail == "failed on 1 of 1 partitions it ran on (of 2): 0.3 times"
    assert not merged.passed and merged.warnings == (merged.checks[1],)
    # Bug: "all 2 partitions: observed 150" read as if every partition had the first's count.
    passed = merge_reports([first, first]).checks[0]
    assert passed.detail == "all 2 partitions; the first: ok"


def test_a_part_of_a_table_is_checked_against_the_whole_tables_observed_cells() -> None:
    """Bug: an incremental night of one row, its label NULL and imputed "south", warned "0.50
    ("south": 0% of the observed cells, 100% of the imputed ones)": the night's own observed
    cells (none) were the reference, while "south" is a third of the table's. Against the whole
    table's shares one cell is within chance, and 40 cells all on a label the table holds at 5%
    still warn; a numeric column's spread range is set by the whole table's deviation."""
    from tasks.quality import _label_shares

    one = pd.DataFrame({"region": [None]})
    south = pd.DataFrame({"region": ["south"]})
    assert not _label_shares(one, south, ["region"], 0.3).passed  # the night alone
    whole = {"region": {"south": 1 / 3, "north": 2 / 3}}
    assert _label_shares(one, south, ["region"], 0.3, whole).passed
    many = pd.DataFrame({"region": [None] * 40})
    rare = pd.DataFrame({"region": ["rare"] * 40})
    outcome = _label_shares(many, rare, ["region"], 0.3, {"region": {"rare": 0.05, "north": 0.95}})
    assert not outcome.passed and '"rare": 5% of the observed cells' in outcome.detail
    given = pd.Series([1.0, 1.1, np.nan, np.nan, np.nan])
    spread = spread_range(given, 0.5, observed_std=10.0)
    assert spread is not None and spread.observed == 10.0 and spread.low <= 5.0
    assert spread_range(given, 0.5).observed < 0.1


def test_a_column_observed_in_few_rows_warns_with_its_counts() -> None:
    """Bug: a column added to a table, observed in 8 of 462 rows, had 454 cells imputed without
    a word. Observed in under 10% of the rows, it warns with its counts; in a part of a table
    (an incremental night), the whole table's counts decide: a night whose rows observe nothing
    of a well-observed column does not warn, and a sparse column warns though the night
    observes it."""
    from tasks.quality import SPARSE_SHARE, ObservedCells, _observed_share

    frame = pd.DataFrame({"discount": [1.5] * 8 + [np.nan] * 454, "price": np.arange(462.0)})
    outcome = _observed_share(frame, ["discount", "price"], None)
    assert not outcome.passed and outcome.warning
    assert '"discount" 8 observed values in 462 rows (2%) for 454 imputed cells' in outcome.detail
    assert '"price"' not in outcome.detail
    assert _observed_share(frame.iloc[:60], ["discount"], None).passed  # 8 of 60
    night = pd.DataFrame({"discount": [np.nan, np.nan, 2.0], "price": [np.nan, 1.0, 2.0]})

    def whole(discount: int) -> ObservedCells:
        return ObservedCells({}, {}, {}, 1000, {"discount": discount, "price": 900})

    assert _observed_share(night, ["discount", "price"], whole(500)).passed
    sparse = _observed_share(night, ["discount", "price"], whole(int(SPARSE_SHARE * 1000) - 1))
    assert not sparse.passed and '"discount" 99 observed values in 1000 rows' in sparse.detail
