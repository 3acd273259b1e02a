"""Write-back step: target, imputed-cells record and lineage row are written all or nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

import tasks.write
from tasks.errors import PipelineInputError
from tasks.write import write_back

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_write_back_creates_target_cells_and_lineage(
    warehouse: Path, steps_before_write: Callable[..., tuple]
) -> None:
    """The target keeps every column and type (an imputed INTEGER column too), records are
    kept."""
    source, plan, imputed, lineage = steps_before_write(warehouse)
    result = write_back.fn(source, plan, imputed, lineage)
    assert result.target_table == "readings_imputed"
    assert not result.replaced_existing
    with duckdb.connect(str(warehouse), read_only=True) as con:
        described = con.execute("DESCRIBE readings_imputed").fetchall()
        types = {name: kind for name, kind, *_ in described}
        nulls = con.execute(
            "SELECT count(*) FROM readings_imputed WHERE temperature IS NULL OR visits IS NULL"
        ).fetchall()[0][0]
        cells = con.execute("SELECT count(*) FROM tdm_imputed_cells").fetchall()[0][0]
        lineage_rows = con.execute("SELECT run_id, cells_imputed FROM tdm_lineage").fetchall()
    assert types == {
        "id": "INTEGER", "temperature": "DOUBLE", "pressure": "DOUBLE", "humidity": "DOUBLE",
        "visits": "INTEGER", "site": "VARCHAR", "day": "DATE", "ok": "BOOLEAN",
        "price": "DECIMAL(8,2)",
    }  # fmt: skip
    assert nulls == 0
    assert cells == plan.n_missing
    assert lineage_rows[0][0] == lineage.run.run_id
    assert json.loads(lineage_rows[0][1]) == dict(plan.missing)


def test_failure_inside_the_transaction_leaves_the_warehouse_untouched(
    warehouse: Path,
    steps_before_write: Callable[..., tuple],
    take_snapshot: Callable[[Path], dict],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An error after the target and cells are written (at the lineage row) rolls all back."""
    source, plan, imputed, lineage = steps_before_write(warehouse)
    before = take_snapshot(warehouse)

    def fail(*args: object) -> None:
        raise RuntimeError("injected failure while writing lineage")

    monkeypatch.setattr(tasks.write, "insert_lineage", fail)
    with pytest.raises(RuntimeError, match="injected failure"):
        write_back.fn(source, plan, imputed, lineage)
    assert take_snapshot(warehouse) == before


def test_a_source_changed_since_loading_is_not_overwritten(
    warehouse: Path,
    steps_before_write: Callable[..., tuple],
    take_snapshot: Callable[[Path], dict],
) -> None:
    """If the source changed after it was read, nothing is written."""
    source, plan, imputed, lineage = steps_before_write(warehouse)
    with duckdb.connect(str(warehouse)) as con:
        con.execute("UPDATE readings SET price = price + 1 WHERE id = 1")
    before = take_snapshot(warehouse)
    with pytest.raises(PipelineInputError, match='Table "readings" changed while'):
        write_back.fn(source, plan, imputed, lineage)
    assert take_snapshot(warehouse) == before
