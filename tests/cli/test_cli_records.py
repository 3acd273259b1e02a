"""`tdm records prune` on a warehouse whose targets were written anew or dropped."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pytest

from cli.main import main
from flows.impute_table import impute_table
from tests.tables import file_hash

pytestmark = pytest.mark.usefixtures("prefect_harness", "one_torch_thread")

FAST = {"max_iter": 5}


def _cells(db: Path) -> pd.DataFrame:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            "SELECT run_id, target_table, count(*) AS n FROM tdm_imputed_cells "
            "GROUP BY ALL ORDER BY ALL"
        ).df()


def test_prune_deletes_only_the_cells_no_table_holds_any_more(
    warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: a nightly run that wrote a table anew left the previous run's cells in
    tdm_imputed_cells for ever, describing a table that is gone. `prune` deletes the cells of
    runs whose target was written anew or dropped (not those of recent runs, nor of a source
    updated in place); a dry run deletes nothing; lineage rows stay."""
    old = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, seed=1)
    new = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, seed=2)
    kept = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, target_table="t2")
    in_place = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, seed=1,
                            replace_source=True)  # fmt: skip
    with duckdb.connect(str(warehouse)) as con:
        con.execute("DROP TABLE t2")
    before = _cells(warehouse)
    assert set(before["run_id"]) == {old.run_id, new.run_id, kept.run_id, in_place.run_id}
    prune = ["records", "prune", "--db", str(warehouse)]

    assert main(prune) == 0  # every run is recent: nothing goes
    assert "Deleted 0 tdm_imputed_cells rows of 0 runs" in capsys.readouterr().out
    hashed = file_hash(warehouse)
    assert main([*prune, "--keep-days", "0", "--dry-run"]) == 0
    said = capsys.readouterr().out
    assert (
        f"readings_imputed: {sum(old.cells_imputed.values()):,} cells of run {old.run_id}" in said
    )
    assert f"written anew by run {new.run_id}" in said and "the table no longer exists" in said
    assert "would delete" in said and file_hash(warehouse) == hashed

    assert main([*prune, "--keep-days", "0"]) == 0
    after = _cells(warehouse)
    assert set(after["run_id"]) == {new.run_id, in_place.run_id}
    pd.testing.assert_frame_equal(
        after.sort_values("run_id", ignore_index=True),
        before[before["run_id"].isin(after["run_id"])].sort_values("run_id", ignore_index=True),
    )
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM tdm_lineage").fetchall() == [(4,)]


def test_prune_keeps_the_cells_of_appends_to_an_old_target_and_of_a_renamed_one(
    warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """helper-66: a target written before markers gets its first one from an incremental
    run's append, which wrote no table anew: every earlier run's cells still describe rows of
    it. A target renamed by hand keeps its marker, and its cells."""

    def incremental() -> str:
        return impute_table("readings", db_path=warehouse, key="id", imputer=FAST,
                            incremental=True).status  # fmt: skip

    assert incremental() == "imputed"
    with duckdb.connect(str(warehouse)) as con:  # as a file from before markers
        con.execute("COMMENT ON TABLE readings_imputed IS NULL")
        con.execute("UPDATE tdm_lineage SET target_marker = NULL")
        con.execute(
            "INSERT INTO readings BY NAME SELECT * REPLACE (id + 1000 AS id) FROM readings "
            "WHERE temperature IS NULL LIMIT 5"
        )
    assert incremental() == "appended"
    impute_table("readings", db_path=warehouse, key="id", imputer=FAST, target_table="other")
    with duckdb.connect(str(warehouse)) as con:
        con.execute("ALTER TABLE other RENAME TO renamed")
    before = _cells(warehouse)
    assert main(["records", "prune", "--db", str(warehouse), "--keep-days", "0"]) == 0
    assert "Deleted 0 tdm_imputed_cells rows of 0 runs" in capsys.readouterr().out
    pd.testing.assert_frame_equal(_cells(warehouse), before)
