"""What a run shows in the Prefect UI: report, statistics table, loss plot, failure messages."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import duckdb
import numpy as np
import pandas as pd
import pytest

import tasks.artifacts
from flows.impute_table import impute_table
from tasks.artifacts import artifact_key, publish_run_report, run_report_markdown
from tasks.artifacts.markdown import format_number
from tasks.artifacts.statistics import column_statistics, statistics_markdown
from tasks.load import SourceTable
from tasks.quality import CheckOutcome, QualityReport
from tasks.results import ImputationOutcome, ImputeTableResult

FAST = {"max_iter": 15}


def _result(**changes: Any) -> ImputeTableResult:
    fields: dict[str, Any] = {
        "run_id": "0b0e4ba1-5d6c-4c41-9f0a-1d2e3f405162",
        "db_path": "warehouse.duckdb",
        "source_table": "sales",
        "target_table": "sales_imputed",
        "replaced_existing": False,
        "status": "imputed",
        "rows": 40,
        "cells_imputed": {"price": 10, "qty": 0},
        "device": "cpu",
        "n_iter": 300,
        "final_loss": 0.125,
        "fit_seconds": 3.0,
        "seconds": {"load": 1.0, "impute": 3.0},
    }
    return ImputeTableResult(**{**fields, **changes})


def _outcome(loss: np.ndarray | None = None) -> ImputationOutcome:
    return ImputationOutcome(
        frame=pd.DataFrame(),
        imputer="TDMImputer",
        hyperparameters={},
        device="cpu",
        n_iter=300,
        final_loss=0.125,
        fit_seconds=3.0,
        loss_history=np.linspace(1.0, 0.1, 300) if loss is None else loss,
        cost_ratio_history=np.r_[np.full(200, 0.9), np.full(100, 0.25)],
    )


BOUNDS = {"price": (-3.5, 12_345.678), "qty": (0.0, 8.0)}


def _check(kind: str, column: str | None = None, passed: bool = True, detail: str = "") -> Any:
    name = kind + (f'["{column}"]' if column is not None else "")
    return CheckOutcome(name, passed, detail or "0 unexpected value(s)")


PASSED = QualityReport(
    checks=(
        _check("expect_table_row_count_to_equal", detail="observed 40"),
        _check("expect_column_values_to_not_be_null", "price"),
        _check("expect_column_values_to_be_between", "price"),
        _check("expect_column_values_to_not_be_null", "qty"),
        _check("expect_column_values_to_be_between", "qty"),
        _check("output_schema", detail="float64, finite, no nulls, key unique"),
        _check("observed_cells_identical", detail="70 cells"),
    ),
    range_factor=1.0,
    bounds=BOUNDS,
)
QUALITY = QualityReport(
    checks=(
        _check("expect_table_row_count_to_equal", detail="observed 40"),
        _check("expect_column_values_to_be_between", "price", False, "2 | unexpected"),
        _check("expect_column_values_to_be_between", "qty"),
    ),
    range_factor=2.0,
    bounds=BOUNDS,
)


def test_report_leads_with_the_verdict_and_collapses_passed_checks_by_kind() -> None:
    """First the verdict line (table, rows, cells, target), then one line per kind of check,
    the sane range explained once and each column's bounds, then the fit, lineage and timings."""
    text = run_report_markdown(_result(), quality=PASSED, outcome=_outcome())
    lines = text.splitlines()
    assert lines[:3] == [
        "# Imputation of `sales` → `sales_imputed`: passed",
        "",
        "**Passed**: 10 cells imputed in 1 of 2 columns of `sales` (40 rows), written to "
        "`sales_imputed`; all 7 quality checks passed.",
    ]
    checks = lines[lines.index("## Checks") + 2 : lines.index("## Checks") + 8]
    assert checks == [
        "- row count: passed (observed 40)",
        "- not null: 2 columns passed",
        "- sane range: 2 columns passed",
        "- output schema: passed (float64, finite, no nulls, key unique)",
        "- observed cells unchanged: passed (70 cells)",
        "",
    ]
    assert "Failed" not in text and "0 unexpected" not in text
    assert "widened on both sides by 1 times the observed range" in text
    assert "| `price` | 10 | 25.0% | [-3.500, 12,350] |" in text
    assert "| `qty` | 0 | 0.0% | [0.000, 8.000] |" in text
    assert "TDMImputer on `cpu`, 300 iterations in 3.00 s, final loss 0.125" in text
    # the ratio's median over the last 100 iterations, not its first values
    assert "relative transport cost 0.250 (median of the last 100 iterations" in text
    assert "WHERE run_id = '0b0e4ba1-5d6c-4c41-9f0a-1d2e3f405162'" in text
    assert "| load | 1.00 | 25% |" in text and "| impute | 3.00 | 75% |" in text
    assert "| **total** | **4.00** | |" in text


def test_report_lists_failures_first_with_the_bounds_they_broke() -> None:
    """A failed check comes right after the verdict, with its column, detail and bounds."""
    text = run_report_markdown(_result(), quality=QUALITY, outcome=_outcome())
    lines = text.splitlines()
    assert lines[0] == "# Imputation of `sales` → `sales_imputed`: FAILED"
    assert lines[2].startswith("**FAILED**: 10 cells imputed in 1 of 2 columns of `sales` (40 ")
    assert lines[2].endswith("target `sales_imputed`; 1 of 3 quality checks failed.")
    assert lines[4:7] == [
        "## Failed checks",
        "",
        "- sane range of `price`: 2 | unexpected (allowed [-3.500, 12,350])",
    ]
    assert "- sane range: 1 column passed" in text
    assert "by 2 times the observed range" in text


def test_report_of_a_copied_table_says_so_and_quotes_odd_names() -> None:
    """No fit: the report says the table was copied; backticks and pipes cannot break it."""
    result = _result(source_table="a`b|c", status="copied", cells_imputed={"x|y": 0})
    quality = QualityReport(checks=PASSED.checks[:1], range_factor=1.0)
    text = run_report_markdown(result, quality=quality, outcome=None)
    assert text.startswith("# Imputation of `` a`b|c `` →")
    assert "no missing value in the columns to impute: copied, written to `sales_imputed`" in text
    assert "copied through" in text
    assert "| `x\\|y` | 0 | 0.0% |" in text
    assert "Sane range" not in text  # no bounds were given


def test_report_of_an_incremental_run_names_its_model_rows_and_drift() -> None:
    """An incremental run's report says which model version imputed how many new rows, how many
    were kept, why a model was or was not fitted, and every column's drift, below the threshold
    too; a run without a model store has no such section."""
    drift = {
        "price": {"measure": "mean_shift_sd", "value": 3.02, "observed": 25,
                  "threshold": 1.0, "chance": 0.658, "exceeded": True},
        "shop": {"measure": "label_tv", "value": 0.1, "observed": 30, "threshold": 0.25,
                 "chance": 0.31, "exceeded": True, "unseen_labels": ["kiosk"]},
        "qty": {"measure": "mean_shift_sd", "value": 0.2, "observed": 28,
                "threshold": 1.0, "chance": 0.622, "exceeded": False},
    }  # fmt: skip
    kept = _result(model_version=2, rows_new=30, rows_reused=80, refit_reason=None,
                   drift=drift, appended=True)  # fmt: skip
    text = run_report_markdown(kept, quality=PASSED, outcome=None)
    assert "- version 2 in `tdm_models` imputed 30 new rows; 80 rows imputed before were" in text
    assert "the stored model imputed the new rows (no refit)" in text
    assert "| `price` | mean_shift_sd | 3.02 | 1.00 | 0.658 | 25 | yes |" in text
    assert "| `shop` | label_tv | 0.100 | 0.250 | 0.310 | 30 | yes (unseen labels: kiosk) |" in text
    assert "| `qty` | mean_shift_sd | 0.200 | 1.00 | 0.622 | 28 | no |" in text
    # Bug: a run that imputed with the stored model said "imputer: none (... copied through)".
    assert "imputer: the stored model, version 2 in `tdm_models`, imputed the new rows" in text
    assert "copied through" not in text
    refit = _result(model_version=3, rows_new=110, rows_reused=0, appended=False,
                    refit_reason="refit asked for")  # fmt: skip
    text = run_report_markdown(refit, quality=PASSED, outcome=None)
    assert "the target was written anew" in text and "fitted: refit asked for" in text
    assert "Drift of the new rows" not in text
    assert "## Model" not in run_report_markdown(_result(), quality=PASSED, outcome=None)


def test_report_shows_each_column_s_bounds_and_where_they_come_from_or_its_labels() -> None:
    """With bounds and labels, a column of the table gives each numeric column's [low, high]
    and where each end comes from (an open end as ∞), and a labelled column's label count;
    the new checks have short names."""
    from tasks.bounds import ColumnBounds

    quality = QualityReport(
        checks=(
            _check("within_bounds", "price"),
            _check("expect_column_values_to_be_in_set", "kind"),
            _check("integral_values", "qty", detail="40 whole numbers"),
        ),
        range_factor=1.0,
        value_bounds={
            "price": ColumnBounds(0.01, float("inf"), "CHECK", "open"),
            "qty": ColumnBounds(0.0, 8.0),
        },
        labels={"kind": 3},
    )
    result = _result(cells_imputed={"price": 4, "qty": 0, "kind": 6})
    text = run_report_markdown(result, quality=quality, outcome=None)
    assert "| `price` | 4 | 10.0% | [0.01, ∞] (CHECK / open) |" in text
    assert "| `qty` | 0 | 0.0% | [0, 8] (observed) |" in text
    assert "| `kind` | 6 | 15.0% | 3 observed labels |" in text
    assert "- within bounds: 1 column passed" in text
    assert "- observed labels: 1 column passed" in text and "- integral: 1 column passed" in text
    assert "`CHECK` (a CHECK constraint)" in text


def test_report_names_the_columns_that_could_be_declared_not_null() -> None:
    """Imputed columns that are nullable only for their gaps are named below the columns table
    (none named: no such line)."""
    text = run_report_markdown(_result(could_be_not_null=("price",)), quality=PASSED, outcome=None)
    assert (
        'NOT NULL: "price" hold no NULL now that their gaps are imputed; nullable in the '
        "source, they are nullable in 'sales_imputed' too, and could be declared NOT NULL."
    ) in text
    assert "NOT NULL:" not in run_report_markdown(_result(), quality=PASSED, outcome=None)


def test_report_lists_warnings_apart_and_still_passes() -> None:
    """A warning check that did not pass (imputed label shares far from the observed ones) gets
    a section of its own after the verdict; the run still passed."""
    warned = CheckOutcome("label_shares", False, '"kind" 0.61 (40 cells)', warning=True)
    quality = QualityReport(checks=(*PASSED.checks, warned), range_factor=1.0)
    assert quality.passed and quality.warnings == (warned,) and not quality.failures
    text = run_report_markdown(_result(), quality=quality, outcome=None)
    lines = text.splitlines()
    assert lines[0].endswith(": passed")
    assert lines[2].endswith("; 7 of 8 quality checks passed, 1 warned (not a failure).")
    assert lines[4:7] == ["## Warnings", "", '- imputed label shares: "kind" 0.61 (40 cells)']
    assert "Failed" not in text


def test_an_unknown_check_keeps_its_own_name() -> None:
    """A check the report has no short name for is listed under its name."""
    quality = QualityReport(checks=(CheckOutcome("new_check", True, "fine"),), range_factor=1.0)
    text = run_report_markdown(_result(), quality=quality, outcome=None)
    assert "- new_check: passed (fine)" in text


def _frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    source = pd.DataFrame(
        {
            "id": [1, 2, 3, 4],
            "a": [1.0, np.nan, 3.0, 5.0],
            "d": [Decimal("2.50"), Decimal("2.50"), None, None],  # DuckDB DECIMAL, as read
            "c": [1.0, 1.0, 1.0, 1.0],
        },
        index=[10, 11, 12, 13],
    )
    imputed = pd.DataFrame(
        {"a": [1.0, 3.0, 3.0, 5.0], "d": [2.5, 2.5, 1.0, 4.0], "c": [1.0] * 4},
        index=source.index,
    )
    return source, imputed


def test_statistics_match_hand_computed_values() -> None:
    """Counts, mean, sample std, min and max before (observed only) and after, per column; the
    mean's shift in observed stds and the std's relative change."""
    source, imputed = _frames()
    rows = column_statistics(source, imputed, {"a": 1, "d": 2, "c": 0})
    assert [r["column"] for r in rows] == ["a", "d", "c"]
    a, d, c = rows
    assert (a["observed"], a["missing"], a["imputed"]) == (3, 1, 1)
    # before: 1, 3, 5 -> mean 3, std sqrt((4 + 0 + 4) / 2) = 2; after: 1, 3, 3, 5 -> sqrt(8 / 3)
    assert (a["mean before"], a["std before"], a["min before"], a["max before"]) == (3, 2, 1, 5)
    assert (a["mean after"], a["min after"], a["max after"]) == (3, 1, 5)
    np.testing.assert_allclose(a["std after"], np.sqrt(8 / 3), rtol=1e-12)
    np.testing.assert_allclose(a["std after"], imputed["a"].std(), rtol=1e-12)  # as pandas
    assert a["mean shift"] == 0.0
    np.testing.assert_allclose(a["std change"], np.sqrt(8 / 3) / 2 - 1, rtol=1e-12)
    assert (d["observed"], d["missing"], d["mean before"], d["std before"]) == (2, 2, 2.5, 0.0)
    assert (d["mean after"], d["min after"], d["max after"]) == (2.5, 1.0, 4.0)
    assert d["mean shift"] is None and d["std change"] is None  # relative to a std of 0
    assert (c["missing"], c["imputed"], c["std before"], c["std after"]) == (0, 0, 0.0, 0.0)
    # the imputed cells alone: one in "a" (no std), 1 and 4 in "d" against an observed std of 0
    assert a["std imputed"] is None and a["imputed spread"] is None
    np.testing.assert_allclose(d["std imputed"], np.std([1.0, 4.0], ddof=1), rtol=1e-12)
    assert d["imputed spread"] is None


def test_the_spread_of_imputed_cells_is_set_against_the_observed_ones() -> None:
    """Bug: a point imputation halves a column's spread and nothing said so. `imputed spread`
    is the std of the imputed cells alone over that of the observed ones."""
    source = pd.DataFrame({"x": [0.0, 4.0, 8.0, np.nan, np.nan, np.nan]})
    imputed = source.assign(x=[0.0, 4.0, 8.0, 3.0, 4.0, 5.0])
    (row,) = column_statistics(source, imputed, {"x": 3})
    assert (row["std before"], row["std imputed"]) == (4.0, 1.0)
    assert row["imputed spread"] == 0.25
    assert "| 4.000 → 2.608 | 0.25 |" in statistics_markdown([row], "t")


def test_statistics_of_a_labelled_column_are_its_label_shares() -> None:
    """Bug: label columns showed n/a only, so imputed cells all on one label went unseen. A
    text, enum or boolean column gets, in a table of its own, its counts, the label shares of
    its observed and imputed cells, their total variation distance, the label that moved most
    and the most common labels; a complete column, its observed shares only."""
    source = pd.DataFrame(
        {
            "s": ["a", None, "b", None, "a", "c"],
            "k": ["x", "x", "y", "x", "y", "x"],
            "m": list("pqrstu"),
            "x": [1.0, 2.0, np.nan, 4.0, 5.0, 6.0],
        }
    )
    imputed = source.assign(s=["a", "b", "b", "b", "a", "c"], x=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    label, complete, many, number = column_statistics(
        source, imputed, {"s": 2, "k": 0, "m": 0, "x": 1}
    )
    assert (label["observed"], label["missing"], label["imputed"]) == (4, 2, 2)
    assert label["labels"] == 3
    assert label["shares"] == {"a": [0.5, 0.0], "b": [0.25, 1.0], "c": [0.25, 0.0]}
    assert label["share distance"] == 0.75 and label["largest departure"] == "b"
    assert complete["share distance"] is None and complete["shares"]["x"] == [4 / 6, None]
    assert number["mean after"] == 3.5
    text = statistics_markdown([number, label, complete, many], "t")
    assert "| column | observed | imputed | labels | distance | largest departure |" in text
    assert "| `s` | 4 | 2 | 3 | 0.750 | `b` 25% → 100% |" in text
    assert "| `k` | 6 | 0 | 2 | n/a | n/a |" in text
    assert text.index("| `x` |") < text.index("| column | observed | imputed | labels")
    # the most common labels in a list, which wraps where a table would be clipped
    assert "- `s`: `a` 50% → 0%, `b` 25% → 100%, `c` 25% → 0%" in text
    assert "- `k`: `x` 67%, `y` 33%" in text
    assert "- `m`: `p` 17%, `q` 17%, `r` 17%, … (3 more)" in text


def test_statistics_of_a_single_observed_value_have_no_std() -> None:
    """The sample std of one value is undefined: None (JSON has no NaN), shown as n/a."""
    source = pd.DataFrame({"a": [2.0, np.nan, np.nan, np.nan]})
    rows = column_statistics(source, source.fillna(2.0), {"a": 3})
    assert rows[0]["std before"] is None and rows[0]["std after"] == 0.0
    assert rows[0]["mean before"] == 2.0 and rows[0]["std change"] is None
    text = statistics_markdown(rows, "t")
    assert "| `a` | 1 | 3 | 2.000 → 2.000 | n/a | n/a → 0.000 | n/a |" in text


def test_statistics_markdown_puts_before_and_after_in_one_cell_right_aligned() -> None:
    """Bug: the table of 11 columns was clipped on the UI's artifact page at 1,400 px. One row
    per column: counts, mean and std as before → after, and their changes; then the ranges in a
    table of their own (7 and 3 columns fit the page's 800 px)."""
    source, imputed = _frames()
    text = statistics_markdown(column_statistics(source, imputed, {"a": 1, "d": 2}), "t")
    lines = text.splitlines()
    assert lines[0] == "# Column statistics of `t`"
    header = lines.index(next(line for line in lines if line.startswith("| column |")))
    assert lines[header : header + 4] == [
        "| column | observed | imputed | mean | shift (sd) | std | spread |",
        "|---|" + "---:|" * 6,
        "| `a` | 3 | 1 | 3.000 → 3.000 | +0.000 | 2.000 → 1.633 | n/a |",
        "| `d` | 2 | 2 | 2.500 → 2.500 | n/a | 0.000 → 1.225 | n/a |",
    ]
    assert lines[header + 5 : header + 9] == [
        "| column | min | max |",
        "|---|---:|---:|",
        "| `a` | 1 → 1 | 5 → 5 |",
        "| `d` | 2.5 → 1 | 2.5 → 4 |",
    ]
    assert "4 significant digits" in text


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (1065.0, "1,065"),
        (12_345.6, "12,350"),
        (13.0, "13.00"),
        (0.0053, "0.005300"),
        (9.99996, "10.00"),
        (-2.5, "-2.500"),
        (0.0, "0.000"),
        (1.234e-5, "1.234e-05"),
        (3e10, "3.000e+10"),
        (float("nan"), ""),
        (None, ""),
    ],
)
def test_numbers_have_four_significant_digits(value: float | None, shown: str) -> None:
    assert format_number(value) == shown


def test_artifact_keys_are_valid_prefect_keys() -> None:
    """Lowercase letters, digits and dashes only, whatever the table is called."""
    assert artifact_key("loss", "Sales 2024") == "tdm-loss-sales-2024"
    assert re.fullmatch(r"[a-z0-9-]+", artifact_key("report", 'x"; DROP TABLE t; --'))
    assert artifact_key("report", "___") == "tdm-report-table"
    # Bug: a non-ASCII name made a key Prefect refuses, after the whole fit.
    unicode = {artifact_key("report", name) for name in ("Ünïcode表", "Ånícode表", "ünïcode")}
    assert len(unicode) == 3 and all(re.fullmatch(r"[a-z0-9-]+", key) for key in unicode)
    assert len(artifact_key("statistics", "x" * 300)) <= 100


def test_publishing_outside_a_flow_run_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps called without Prefect (unit tests, scripts) publish nothing and do not fail."""
    published: list[object] = []  # recorded, not raised: the publisher swallows what is raised

    def record(**kwargs: object) -> None:
        published.append(kwargs.get("key"))

    monkeypatch.setattr(tasks.artifacts, "create_markdown_artifact", record)
    source = cast("SourceTable", None)  # never looked at outside a flow run
    publish_run_report(
        _result(), source=source, imputed=pd.DataFrame(), quality=QUALITY, outcome=_outcome()
    )
    assert published == []


# Under Prefect's test harness: a real flow run, artifacts read back from its API.


def _written(artifact: Any) -> float:
    """When an artifact was last written (created or updated), in seconds since the epoch."""
    return max(moment.timestamp() for moment in (artifact.created, artifact.updated) if moment)


def _artifacts_of(flow_run_id: Any) -> dict[str, Any]:
    """The artifacts of a flow run by key: of several under one key, the one written last. (Two
    under one key: the client re-sent a creation whose answer it had lost, under load, and the
    run went on updating the second.)"""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
    return {a.key: a for a in sorted(found, key=_written) if a.key}


@pytest.mark.usefixtures("prefect_harness", "one_torch_thread")
def test_a_flow_run_publishes_report_statistics_loss_and_progress(warehouse: Path) -> None:
    """One impute-table run leaves four keyed artifacts holding the run's numbers; the
    progress artifact follows the start's models, then the steps."""
    imputer = {**FAST, "init": "trees"}
    state = impute_table(
        "readings", db_path=warehouse, key="id", imputer=imputer, return_state=True
    )
    assert state.is_completed(), state.message
    result = state.result()
    artifacts = _artifacts_of(state.state_details.flow_run_id)
    assert set(artifacts) == {
        artifact_key(kind, "readings") for kind in ("report", "statistics", "loss", "progress")
    }
    report = artifacts["tdm-report-readings"]
    assert report.type == "markdown" and result.run_id in report.data
    assert report.data.startswith("# Imputation of `readings` → `readings_imputed`: passed")
    assert f"| `temperature` | {result.cells_imputed['temperature']} |" in report.data
    statistics = artifacts["tdm-statistics-readings"]
    assert statistics.type == "markdown"
    rows = re.findall(r"^\| `([^`]+)` \| (\d+) \| (\d+) \|", statistics.data, re.MULTILINE)
    assert sorted(column for column, _, _ in rows) == sorted(result.cells_imputed)
    assert {column: int(n) for column, _, n in rows} == result.cells_imputed
    assert "- `site`: `" in statistics.data  # a complete label column: its observed shares
    assert all(int(observed) + int(n) == 80 for _, observed, n in rows)
    loss = artifacts["tdm-loss-readings"]
    assert "data:image/png;base64," in loss.data
    assert "Relative transport cost over 15 iterations" in loss.data
    progress = artifacts["tdm-progress-readings"]
    assert progress.type == "progress" and float(progress.data) == 100.0
    assert progress.description == 'TDM fit on table "readings": optimisation steps'


@pytest.mark.usefixtures("prefect_harness", "one_torch_thread")
def test_a_failure_to_publish_does_not_fail_a_written_run(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table is committed before the artifacts: an API hiccup then is only a warning."""

    calls: list[object] = []

    def fail(**kwargs: object) -> None:
        calls.append(kwargs.get("key"))
        raise RuntimeError("artifact API unavailable")

    monkeypatch.setattr(tasks.artifacts, "create_markdown_artifact", fail)
    state = impute_table("readings", db_path=warehouse, imputer=FAST, return_state=True)
    assert state.is_completed(), state.message
    assert calls == ["tdm-report-readings"]
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM tdm_lineage").fetchall() == [(1,)]


def _table_with_inf(tmp_path: Path) -> Path:
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE TABLE gauges AS SELECT CASE WHEN i = 2 THEN 'inf'::DOUBLE "
            "WHEN i = 3 THEN NULL ELSE i END AS level FROM range(9) r(i)"
        )
    return path


FAILURES: dict[str, tuple[Callable[[Path], Path], str, str]] = {
    "inf": (_table_with_inf, "gauges", r'column "level" holds infinite values'),
    "missing-table": (_table_with_inf, "nope", r"does not exist in '.*w\.duckdb'"),
}


@pytest.mark.parametrize(("build", "table", "reason"), FAILURES.values(), ids=FAILURES)
@pytest.mark.usefixtures("prefect_harness")
def test_a_failed_run_names_the_table_and_the_reason_in_its_state_message(
    tmp_path: Path, build: Callable[[Path], Path], table: str, reason: str
) -> None:
    """The UI shows the failed run's state message: it alone says which table and why."""
    state = impute_table(table, db_path=build(tmp_path), imputer=FAST, return_state=True)
    assert state.is_failed()
    message = str(state.message)
    assert f'Table "{table}"' in message, message
    assert re.search(reason, message), message
    assert message == str(state.result(raise_on_failure=False))  # the reason, and only it


@pytest.mark.usefixtures("prefect_harness", "one_torch_thread")
def test_columns_left_with_their_nulls_are_named_in_the_report(warehouse: Path) -> None:
    """Bug: by default an all-NULL text column was skipped without a word while an all-NULL
    number refused the whole table, and the report, saying "no nulls", named neither. Both
    are now left with their NULLs by default, named in the log and the report (named in the
    columns, such a column is refused)."""
    with duckdb.connect(str(warehouse)) as con:
        con.execute("ALTER TABLE readings ADD COLUMN note VARCHAR")
        con.execute("ALTER TABLE readings ADD COLUMN discount DOUBLE")
    state = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, return_state=True)
    assert state.is_completed(), state.message
    report = _artifacts_of(state.state_details.flow_run_id)["tdm-report-readings"].data
    left = 'Left with their NULLs, as every cell is NULL (no value to learn them from): "note", '
    assert f"## Not imputed\n\n- {left}" in report
    with duckdb.connect(str(warehouse), read_only=True) as con:
        nulls = con.execute(
            "SELECT count(note), count(discount), count(*) FROM readings_imputed"
        ).fetchall()
    assert nulls == [(0, 0, 80)]
