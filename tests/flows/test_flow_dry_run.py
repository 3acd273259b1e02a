"""`dry_run`: fit and check as a run would, say what would be written, and leave the DuckDB file
byte for byte as it was."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from flows.impute_table import impute_table
from flows.impute_warehouse import WarehouseRunError, impute_warehouse
from flows.steps import DRY_RUN, describe_dry_run
from tasks.errors import QualityCheckError
from tests.conftest import auto_device
from tests.failures import refused
from tests.tables import file_hash

pytestmark = pytest.mark.usefixtures("prefect_harness", "one_torch_thread")

FAST = {"max_iter": 5}
COLUMNS = ("temperature", "pressure", "humidity", "visits")


def missing_cells(db: Path, table: str) -> dict[str, int]:
    with duckdb.connect(str(db), read_only=True) as con:
        frame = con.execute(f'SELECT * FROM "{table}"').df()
    return {name: int(frame[name].isna().sum()) for name in COLUMNS}


def test_a_dry_run_fits_checks_and_reports_but_writes_nothing(warehouse: Path) -> None:
    before = file_hash(warehouse)
    result = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, dry_run=True)

    assert file_hash(warehouse) == before
    assert result.status == DRY_RUN and result.target_table == "readings_imputed"
    assert result.rows == 80 and not result.replaced_existing
    assert {c: result.cells_imputed[c] for c in COLUMNS} == missing_cells(warehouse, "readings")
    assert result.n_iter == 5 and result.device == auto_device()  # it did fit
    text = describe_dry_run(result)
    assert "nothing written" in text and "create the table 'readings_imputed'" in text

    impute_table("readings", db_path=warehouse, key="id", imputer=FAST)  # now the target exists
    written = file_hash(warehouse)
    again = impute_table(  # another seed: a run would fit again (the same one leaves it)
        "readings", db_path=warehouse, key="id", imputer=FAST, seed=1, dry_run=True
    )
    assert file_hash(warehouse) == written
    assert again.replaced_existing
    assert "replace the existing table 'readings_imputed'" in describe_dry_run(again)


@pytest.mark.parametrize("replace_source", [False, True])
def test_a_dry_run_refuses_what_the_write_would_refuse(
    tmp_path: Path, replace_source: bool
) -> None:
    """Bug: a dry run said a run would succeed where the write then refused the imputed values
    (a CHECK they make false; checked only when writing). The dry run now makes the write's
    checks too, with the same message, and leaves the file as it was."""
    db = tmp_path / "w.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE gap (id INTEGER PRIMARY KEY, a DOUBLE CHECK (a < 40 OR a > 60))")
        con.execute(
            "INSERT INTO gap SELECT i, CASE WHEN i % 3 = 0 THEN NULL WHEN i % 2 = 0 "
            "THEN 10 + i % 25 ELSE 70 + i % 25 END FROM range(60) r(i)"
        )
    before = file_hash(db)
    options = {"key": "id", "imputer": FAST, "replace_source": replace_source}
    breaks = r"The imputed values of \"a\" break CHECK\(\(\(a < 40\) OR \(a > 60\)\)\)"
    with refused(QualityCheckError, match=breaks):
        impute_table("gap", db_path=db, dry_run=True, **options)
    assert file_hash(db) == before
    with refused(QualityCheckError, match=breaks):
        impute_table("gap", db_path=db, **options)  # the run itself, refused alike
    assert file_hash(db) == before


def test_a_partitioned_table_s_dry_run_fits_the_sample_and_writes_nothing(
    tmp_path: Path, make_readings: Callable[..., pd.DataFrame], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "warehouse.duckdb"
    make_readings(db, n_rows=150, seed=3)
    monkeypatch.setenv("TDM_MAX_FIT_ROWS", "60")
    monkeypatch.setenv("TDM_PARTITION_ROWS", "50")
    before = file_hash(db)

    result = impute_table("readings", db_path=str(db), key="id", imputer=FAST, dry_run=True)

    assert file_hash(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["warehouse.duckdb"]  # no staging
    assert result.status == DRY_RUN and result.rows == 150
    assert {c: result.cells_imputed[c] for c in COLUMNS} == missing_cells(db, "readings")
    assert result.n_iter == 5


def test_a_warehouse_dry_run_covers_every_table_and_writes_nothing(
    tmp_path: Path, make_readings: Callable[..., pd.DataFrame], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "warehouse.duckdb"
    for seed, table in enumerate(("north", "south")):
        make_readings(db, table=table, n_rows=40, seed=seed)
    config = tmp_path / "w.yaml"
    config.write_text(f"db_path: {db}\ntables:\n  - table: north\n  - table: south\n")
    monkeypatch.setenv("TDM_MAX_ITER", "5")
    before = file_hash(db)

    result = impute_warehouse(str(config), dry_run=True)

    assert file_hash(db) == before
    assert result.dry_run and set(result.tables) == {"north", "south"}
    for table, done in result.tables.items():
        assert done.status == DRY_RUN and done.target_table == f"{table}_imputed"
        assert {c: done.cells_imputed[c] for c in COLUMNS} == missing_cells(db, table)


def test_a_warehouse_dry_run_with_a_failing_table_says_nothing_was_written(
    tmp_path: Path, make_readings: Callable[..., pd.DataFrame], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: it said "the others were written" of a dry run."""
    db = tmp_path / "warehouse.duckdb"
    make_readings(db, table="north", n_rows=40)
    config = tmp_path / "w.yaml"
    config.write_text(f"db_path: {db}\ntables:\n  - table: north\n  - table: nosuch\n")
    monkeypatch.setenv("TDM_MAX_ITER", "5")
    before = file_hash(db)
    with refused(WarehouseRunError, match=r"1 of 2 tables failed \(a dry run: nothing written\)"):
        impute_warehouse(str(config), dry_run=True)
    assert file_hash(db) == before
