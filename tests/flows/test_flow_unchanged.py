"""A whole table whose source, settings and target are as its last run left them is not fitted
again: its target stands, and the run is recorded as "unchanged" (`tasks.unchanged`)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pytest

import flows.impute_warehouse as warehouse_flow
from cli.main import _print_warehouse
from flows.impute_table import impute_table
from flows.impute_warehouse import impute_warehouse
from flows.steps import DRY_RUN

pytestmark = pytest.mark.usefixtures("prefect_harness", "one_torch_thread")

FAST = {"max_iter": 10}


def _query(path: Path, sql: str) -> pd.DataFrame:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql).df()


def _target(path: Path) -> tuple[pd.DataFrame, str]:
    with duckdb.connect(str(path), read_only=True) as con:
        comment = con.execute(
            "SELECT comment FROM duckdb_tables() WHERE table_name = 'readings_imputed'"
        ).fetchall()[0][0]
        return con.execute("SELECT * FROM readings_imputed").df(), comment


def _execute(path: Path, sql: str) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute(sql)


@pytest.mark.parametrize("partitioned", [False, True], ids=["whole", "partitioned"])
def test_an_unchanged_table_is_left_as_written_and_recorded_without_a_fit(
    warehouse: Path, partitioned: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: every night refitted and rewrote each table that had not changed, and recorded all
    its imputed cells again. Now the target stands bit for bit with its marker, no cell is
    recorded again, and the lineage row says "unchanged" and names the run that wrote it; a
    dry run says so and writes nothing."""
    if partitioned:
        monkeypatch.setenv("TDM_MAX_FIT_ROWS", "40")
        monkeypatch.setenv("TDM_PARTITION_ROWS", "30")
    first = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, seed=3)
    written, marker = _target(warehouse)
    cells = _query(warehouse, "SELECT * FROM tdm_imputed_cells")

    dry = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, seed=3, dry_run=True)
    assert (dry.status, dry.unchanged_since) == (DRY_RUN, first.run_id)
    assert len(_query(warehouse, "SELECT * FROM tdm_lineage")) == 1

    for _ in range(2):  # the row of an unchanged run is itself a run to stand on
        again = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, seed=3)
        assert (again.status, again.unchanged_since) == ("unchanged", first.run_id)
        assert (again.rows, again.cells_imputed) == (first.rows, first.cells_imputed)
        assert again.n_iter is None and again.run_id != first.run_id
    now, comment = _target(warehouse)
    pd.testing.assert_frame_equal(now, written)
    assert comment == marker and first.run_id in marker
    pd.testing.assert_frame_equal(_query(warehouse, "SELECT * FROM tdm_imputed_cells"), cells)
    lineage = _query(warehouse, "SELECT * FROM tdm_lineage ORDER BY finished_at")
    assert list(lineage["status"]) == ["imputed", "unchanged", "unchanged"]
    assert lineage["target_marker"].nunique() == 1 and lineage["target_hash"].nunique() == 1
    assert lineage["n_iter"].isna().tolist() == [False, True, True]
    assert lineage["run_id"].nunique() == 3


def test_a_changed_source_setting_or_target_is_imputed_again(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run fits and writes again when anything that shapes its target differs from the last
    run's: the target changed by hand (its values or definition: it is written anew), another
    run wrote the target since, the source's definition, column comments, row order (which
    orders the rows the fit reads) or contents, `refit`, or TDM_SKIP_UNCHANGED=false."""

    def run(seed: int = 3, refit: bool = False) -> str:
        return impute_table(
            "readings", db_path=warehouse, key="id", imputer=FAST, seed=seed, refit=refit
        ).status

    assert run() == "imputed"
    written, _ = _target(warehouse)
    _execute(warehouse, "UPDATE readings_imputed SET temperature = temperature + 1 WHERE id = 1")
    assert run() == "imputed"
    pd.testing.assert_frame_equal(_target(warehouse)[0], written)  # the same seed's table
    assert run(seed=4) == "imputed"
    assert run() == "imputed"  # the seed-4 run wrote the target after the seed-3 one
    assert run() == "unchanged"
    _execute(warehouse, "ALTER TABLE readings ALTER COLUMN visits SET DEFAULT 0")
    assert run() == "imputed"  # the target is made from the source's definition
    _execute(
        warehouse,
        "CREATE TEMP TABLE copy AS SELECT * FROM readings; DELETE FROM readings; "
        "INSERT INTO readings SELECT * FROM copy ORDER BY id DESC",
    )
    assert run() == "imputed"
    assert run() == "unchanged"
    _execute(warehouse, "ALTER TABLE readings_imputed ALTER COLUMN visits SET DEFAULT 999")
    assert run() == "imputed"
    _execute(
        warehouse,
        "CREATE TEMP TABLE copy AS SELECT * FROM readings_imputed; DELETE FROM readings_imputed; "
        "INSERT INTO readings_imputed SELECT * FROM copy ORDER BY id DESC",
    )
    assert run() == "imputed"  # its recorded cells' row numbers no longer hold
    _execute(warehouse, "COMMENT ON COLUMN readings.temperature IS 'degrees F'")
    assert run() == "imputed"  # the target carries the source's column comments
    assert run(refit=True) == "imputed"
    _execute(warehouse, "UPDATE readings SET pressure = pressure + 1 WHERE id = 2")
    assert run() == "imputed"
    monkeypatch.setenv("TDM_SKIP_UNCHANGED", "false")
    assert run() == "imputed"


def test_a_warehouse_night_leaves_unchanged_tables_and_imputes_changed_ones(
    warehouse: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The nightly run fits only the tables whose source changed; the others' targets stand,
    each named in the result with the run that wrote it."""
    with duckdb.connect(str(warehouse)) as con:
        con.execute("CREATE TABLE stock AS SELECT * FROM readings")
    names = ("readings", "stock")
    config = tmp_path / "nightly.yaml"
    config.write_text(
        f"db_path: {warehouse}\ntables:\n"
        + "".join(f"  - table: {t}\n    key: id\n    imputer: {{max_iter: 10}}\n" for t in names)
    )
    first = impute_warehouse(str(config))
    _execute(warehouse, "UPDATE stock SET pressure = pressure + 1 WHERE id = 2")
    second = impute_warehouse(str(config))
    assert second.tables["readings"].status == "unchanged"
    assert second.tables["readings"].unchanged_since == first.tables["readings"].run_id
    assert second.tables["stock"].status == "imputed"
    assert list(second.tables) == ["readings", "stock"]  # in the config's order
    with monkeypatch.context() as patched:  # a night with nothing to fit starts no runner
        patched.setattr(warehouse_flow, "started_runner", None)
        third = impute_warehouse(str(config))
    assert [table.status for table in third.tables.values()] == ["unchanged", "unchanged"]
    forced = impute_warehouse(str(config), refit=True)
    assert [table.status for table in forced.tables.values()] == ["imputed", "imputed"]
    _print_warehouse(second)
    said = capsys.readouterr().out
    assert said.startswith(
        f"Imputed 1 of 2 tables in {warehouse} on thread pool (2 at once), left 1 as their last "
        "run wrote them (nothing changed since):\n  readings -> readings_imputed: left as run "
        f"{first.tables['readings'].run_id} wrote it"
    )


def test_a_source_whose_column_named_rowid_hides_its_order_is_always_imputed(
    warehouse: Path,
) -> None:
    """helper-66: a column named rowid hides DuckDB's, by which the fingerprint sees the rows'
    order: such a source is never left unchanged (a reordered one would be fitted otherwise)."""
    _execute(
        warehouse,
        'CREATE TABLE exported AS SELECT id AS "rowid", temperature, pressure FROM readings',
    )
    for _ in range(2):
        assert impute_table("exported", db_path=warehouse, imputer=FAST).status == "imputed"
