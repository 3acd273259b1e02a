"""What a run shows in the Prefect UI: report, statistics table, loss plot, failure messages."""

from __future__ import annotations

import base64
import io
import re
import struct
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
from tasks.artifacts import (
    artifact_key,
    column_statistics,
    downsample_loss,
    loss_plot_markdown,
    loss_plot_png,
    publish_run_report,
    run_report_markdown,
)
from tasks.load import SourceTable
from tasks.params import ImputerParams
from tasks.quality import CheckOutcome, QualityReport
from tasks.results import ImputationOutcome, ImputeTableResult

FAST = ImputerParams(max_iter=15)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


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
    )


QUALITY = QualityReport(
    checks=(
        CheckOutcome("expect_table_row_count_to_equal", True, "observed 40"),
        CheckOutcome('expect_column_values_to_be_between["price"]', False, "2 | unexpected"),
    ),
    range_factor=1.0,
)


def test_report_names_the_table_counts_checks_lineage_and_time_split() -> None:
    """The report states rows, cells per column, each check, the lineage run id and timings."""
    text = run_report_markdown(_result(), quality=QUALITY, outcome=_outcome())
    assert text.startswith("# Imputation of `sales` → `sales_imputed`")
    assert "rows: 40; cells imputed: 10 in 1 of 2 columns" in text
    assert "| `price` | 10 | 25.0% |" in text and "| `qty` | 0 | 0.0% |" in text
    assert "quality checks: **FAILED**" in text
    assert "| expect_table_row_count_to_equal | yes | observed 40 |" in text
    assert '| expect_column_values_to_be_between["price"] | **no** | 2 \\| unexpected |' in text
    assert "WHERE run_id = '0b0e4ba1-5d6c-4c41-9f0a-1d2e3f405162'" in text
    assert "TDMImputer on `cpu`, 300 iterations in 3.00 s, final loss 0.125" in text
    assert "| load | 1.00 | 25% |" in text and "| impute | 3.00 | 75% |" in text
    assert "| **total** | **4.00** | |" in text


def test_report_of_a_copied_table_says_so_and_quotes_odd_names() -> None:
    """No fit: the report says the table was copied; backticks and pipes cannot break it."""
    result = _result(source_table="a`b|c", status="copied", cells_imputed={"x|y": 0})
    text = run_report_markdown(result, quality=QUALITY, outcome=None)
    assert text.startswith("# Imputation of `` a`b|c `` →")
    assert "copied through" in text
    assert "| `x\\|y` | 0 | 0.0% |" in text


def test_statistics_match_hand_computed_values() -> None:
    """Counts, mean, sample std, min and max before (observed only) and after, per column."""
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
    rows = column_statistics(source, imputed, {"a": 1, "d": 2, "c": 0})
    assert [r["column"] for r in rows] == ["a", "d", "c"]
    a, d, c = rows
    assert (a["observed"], a["missing"], a["imputed"]) == (3, 1, 1)
    # before: 1, 3, 5 -> mean 3, std sqrt((4 + 0 + 4) / 2) = 2; after: 1, 3, 3, 5 -> sqrt(8 / 3)
    assert (a["mean before"], a["std before"], a["min before"], a["max before"]) == (3, 2, 1, 5)
    assert (a["mean after"], a["min after"], a["max after"]) == (3, 1, 5)
    np.testing.assert_allclose(a["std after"], np.sqrt(8 / 3), rtol=5e-6)  # 6 digits
    np.testing.assert_allclose(a["std after"], imputed["a"].std(), rtol=5e-6)  # as pandas
    assert a["std after"] == 1.63299  # six significant digits
    assert (d["observed"], d["missing"], d["mean before"], d["std before"]) == (2, 2, 2.5, 0.0)
    assert (d["mean after"], d["min after"], d["max after"]) == (2.5, 1.0, 4.0)
    assert (c["missing"], c["imputed"], c["std before"], c["std after"]) == (0, 0, 0.0, 0.0)


def test_statistics_of_a_single_observed_value_have_no_std() -> None:
    """The sample std of one value is undefined: None in the table (JSON has no NaN)."""
    source = pd.DataFrame({"a": [2.0, np.nan, np.nan, np.nan]})
    rows = column_statistics(source, source.fillna(2.0), {"a": 3})
    assert rows[0]["std before"] is None and rows[0]["std after"] == 0.0
    assert rows[0]["mean before"] == 2.0


def test_loss_is_averaged_in_bins_and_non_finite_values_are_dropped() -> None:
    """Ten losses in three bins: means, extremes and middle iterations by hand."""
    curve = downsample_loss(np.arange(10.0), max_points=3)  # bins 0-3, 4-6, 7-9
    np.testing.assert_allclose(curve.iteration, [2.5, 6.0, 9.0])
    np.testing.assert_allclose(curve.mean, [1.5, 5.0, 8.0])
    np.testing.assert_allclose(curve.low, [0.0, 4.0, 7.0])
    np.testing.assert_allclose(curve.high, [3.0, 6.0, 9.0])
    assert curve.n_iter == 10
    short = downsample_loss(np.array([1.0, np.nan, 3.0, np.inf]))
    np.testing.assert_allclose(short.iteration, [1.0, 3.0])
    np.testing.assert_allclose(short.mean, [1.0, 3.0])
    assert downsample_loss(np.arange(20_000.0)).iteration.size == 300
    with pytest.raises(ValueError, match="max_points must be at least 1, got 0"):
        downsample_loss(np.arange(3.0), max_points=0)


def _png_size(png: bytes) -> tuple[int, int]:
    assert png.startswith(PNG_SIGNATURE)
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk comes first
    return int(width), int(height)


def test_loss_plot_is_a_small_reproducible_png() -> None:
    """480 x 200 pixels, under 60 kB for a long noisy history, the same bytes every time."""
    rng = np.random.default_rng(0)
    loss = np.exp(-np.arange(10_000) / 2000) + 0.1 * rng.random(10_000)
    png = loss_plot_png(downsample_loss(loss))
    assert _png_size(png) == (480, 200)
    assert len(png) < 60_000
    assert loss_plot_png(downsample_loss(loss)) == png


def test_loss_markdown_embeds_the_png_as_a_data_uri_with_a_summary() -> None:
    """The Prefect UI renders a markdown image whose address is a base64 PNG."""
    loss = np.array([4.0, 2.0, np.nan, 1.0, 1.5])
    text = loss_plot_markdown(loss, "sales")
    match = re.search(r"!\[[^\]]*\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", text)
    assert match is not None
    assert _png_size(base64.b64decode(match.group(1))) == (480, 200)
    assert "5 iterations: loss 4 at the first, 1.5 at the last, lowest 1 (iteration 4)." in text
    assert "1 non-finite losses are left out." in text
    assert "No loss was recorded" in loss_plot_markdown(np.empty(0), "sales")


def test_artifact_keys_are_valid_prefect_keys() -> None:
    """Lowercase letters, digits and dashes only, whatever the table is called."""
    assert artifact_key("loss", "Sales 2024") == "tdm-loss-sales-2024"
    assert re.fullmatch(r"[a-z0-9-]+", artifact_key("report", 'x"; DROP TABLE t; --'))
    assert artifact_key("report", "___") == "tdm-report-table"


def test_publishing_outside_a_flow_run_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps called without Prefect (unit tests, scripts) publish nothing and do not fail."""
    published: list[object] = []  # recorded, not raised: the publisher swallows what is raised

    def record(**kwargs: object) -> None:
        published.append(kwargs.get("key"))

    monkeypatch.setattr(tasks.artifacts, "create_markdown_artifact", record)
    monkeypatch.setattr(tasks.artifacts, "create_table_artifact", record)
    source = cast("SourceTable", None)  # never looked at outside a flow run
    publish_run_report(
        _result(), source=source, imputed=pd.DataFrame(), quality=QUALITY, outcome=_outcome()
    )
    assert published == []


# Under Prefect's test harness: a real flow run, artifacts read back from its API.


def _artifacts_of(flow_run_id: Any) -> dict[str, Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
    return {a.key: a for a in found if a.key}


@pytest.mark.usefixtures("prefect_harness", "one_torch_thread")
def test_a_flow_run_publishes_report_statistics_loss_and_progress(warehouse: Path) -> None:
    """One impute-table run leaves four keyed artifacts holding the run's numbers."""
    state = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, return_state=True)
    assert state.is_completed(), state.message
    result = state.result()
    artifacts = _artifacts_of(state.state_details.flow_run_id)
    assert set(artifacts) == {
        artifact_key(kind, "readings") for kind in ("report", "statistics", "loss", "progress")
    }
    report = artifacts["tdm-report-readings"]
    assert report.type == "markdown" and result.run_id in report.data
    assert f"| `temperature` | {result.cells_imputed['temperature']} |" in report.data
    statistics = artifacts["tdm-statistics-readings"]
    assert statistics.type == "table"
    rows = pd.read_json(io.StringIO(statistics.data))
    assert list(rows["column"]) == list(result.cells_imputed)
    assert rows.set_index("column")["imputed"].to_dict() == result.cells_imputed
    assert (rows["observed"] + rows["missing"] == 80).all()
    loss = artifacts["tdm-loss-readings"]
    assert "data:image/png;base64," in loss.data and "15 iterations" in loss.data
    progress = artifacts["tdm-progress-readings"]
    assert progress.type == "progress" and float(progress.data) == 100.0


@pytest.mark.usefixtures("prefect_harness", "one_torch_thread")
def test_a_failure_to_publish_does_not_fail_a_written_run(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table is committed before the artifacts: an API hiccup then is only a warning."""

    calls: list[object] = []

    def fail(**kwargs: object) -> None:
        calls.append(kwargs.get("key"))
        raise RuntimeError("artifact API unavailable")

    monkeypatch.setattr(tasks.artifacts, "create_table_artifact", fail)
    state = impute_table("readings", db_path=warehouse, imputer=FAST, return_state=True)
    assert state.is_completed(), state.message
    assert calls == ["tdm-statistics-readings"]
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
    assert "PipelineInputError" in message
