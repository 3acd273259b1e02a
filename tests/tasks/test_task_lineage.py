"""The lineage record: one validated `tdm_lineage` row built from what the steps returned."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest

from tasks.lineage import LineageRecord, current_run, package_versions
from tasks.load import SourceTable
from tasks.quality import CheckOutcome, QualityReport
from tasks.results import ImputationOutcome
from tasks.validate import ImputationPlan
from tasks.warehouse.tables import ColumnInfo, Fingerprint, TableInfo

STARTED = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
FINISHED = datetime(2025, 1, 2, 3, 4, 9, tzinfo=UTC)

SOURCE = SourceTable(
    db_path="w.duckdb",
    table=TableInfo("sales", (ColumnInfo("id", "INTEGER"), ColumnInfo("price", "DOUBLE"))),
    fingerprint=Fingerprint(rows=3, content_hash="abc123"),
    frame=pd.DataFrame({"id": [1, 2, 3], "price": [1.0, np.nan, 3.0]}),
)
PLAN = ImputationPlan(
    source_table="sales",
    target_table="sales_imputed",
    columns=("price",),
    key="id",
    replace_source=False,
    n_rows=3,
    missing={"price": 1},
)
QUALITY = QualityReport(checks=(CheckOutcome("output_schema", True, "ok"),), range_factor=1.0)
OUTCOME = ImputationOutcome(
    frame=pd.DataFrame({"price": [1.0, 2.0, 3.0]}),
    imputer="TDMImputer",
    hyperparameters={"max_iter": 5, "device": "cpu"},
    device="cpu",
    n_iter=5,
    final_loss=0.25,
    fit_seconds=1.5,
)


def _record(outcome: ImputationOutcome | None) -> LineageRecord:
    run = current_run(STARTED)
    return LineageRecord(
        run=run,
        source=SOURCE,
        plan=PLAN,
        outcome=outcome,
        quality=QUALITY,
        seed=7,
        hyperparameters={"max_iter": 9},
        versions={"python": "3.11.0"},
    )


def test_outside_prefect_a_run_gets_a_fresh_id_and_the_default_flow_name() -> None:
    """Without a flow run, the run id is a new UUID, the flow `impute-table`, no deployment."""
    first, second = current_run(STARTED), current_run(STARTED)
    assert uuid.UUID(first.run_id) and first.run_id != second.run_id
    assert (first.flow_name, first.deployment_name, first.started_at) == (
        "impute-table",
        None,
        STARTED,
    )


def test_an_imputed_run_records_the_fit_and_its_hyperparameters() -> None:
    """The row holds the plan, the source fingerprint, the fit's numbers and the fit's settings."""
    record = _record(OUTCOME)
    row = record.to_frame(finished_at=FINISHED).iloc[0]
    assert record.status == row["status"] == "imputed"
    assert (row["source_table"], row["target_table"], row["key_column"]) == (
        "sales",
        "sales_imputed",
        "id",
    )
    assert (row["source_rows"], row["source_hash"], row["rows"]) == (3, "abc123", 3)
    assert json.loads(row["columns_imputed"]) == ["price"]
    assert json.loads(row["cells_imputed"]) == {"price": 1}
    assert json.loads(row["hyperparameters"]) == {"device": "cpu", "max_iter": 5}
    assert (row["imputer"], row["device"], row["n_iter"], row["seed"]) == (
        "TDMImputer",
        "cpu",
        5,
        7,
    )
    assert (row["final_loss"], row["fit_seconds"]) == (0.25, 1.5)
    assert bool(row["quality_passed"]) and json.loads(row["package_versions"]) == {
        "python": "3.11.0"
    }
    assert row["started_at"] == pd.Timestamp(STARTED)
    assert row["finished_at"] == pd.Timestamp(FINISHED)


def test_a_copied_run_records_no_fit_and_the_requested_hyperparameters() -> None:
    """Without a fit the row says `copied`, imputer `none`, and keeps the settings asked for."""
    record = _record(None)
    row = record.to_frame(finished_at=FINISHED).iloc[0]
    assert record.status == row["status"] == "copied"
    assert row["imputer"] == "none"
    assert json.loads(row["hyperparameters"]) == {"max_iter": 9}
    assert pd.isna(row["device"]) and pd.isna(row["n_iter"]) and pd.isna(row["fit_seconds"])


def test_package_versions_name_python_and_every_package_that_shapes_a_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Installed packages give their version; a missing one says `not installed`. The
    library's is its own: bug, an editable install's metadata kept the version it was
    installed at (a checkout pulled since recorded 0.15.6 while running 0.19.0)."""
    from importlib import metadata

    import tasks.lineage
    import tdm

    monkeypatch.setattr(tasks.lineage, "_PACKAGES", ("tdm-impute", "numpy", "no-such-package-tdm"))

    def installed(name: str) -> str:
        if name == "no-such-package-tdm":
            raise metadata.PackageNotFoundError(name)
        return {"numpy": np.__version__, "tdm-impute": "0.15.6"}[name]

    monkeypatch.setattr(metadata, "version", installed)
    versions = package_versions()
    assert set(versions) == {"python", "tdm-impute", "numpy", "no-such-package-tdm"}
    assert versions["tdm-impute"] == tdm.__version__
    assert versions["numpy"] == np.__version__
    assert versions["no-such-package-tdm"] == "not installed"
