"""A table larger than one fit: fitted on a sample, imputed partition by partition."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import flows.partitioned as partitioned
from flows.impute_table import impute_table
from tasks.errors import PipelineInputError, QualityCheckError
from tasks.write import TableWriter
from tests.failures import refused
from tests.tables import (
    column_types,
    constrain_readings,
    differing_cells,
    file_hash,
    random_table,
    table_body,
)

pytestmark = pytest.mark.usefixtures("prefect_harness", "one_torch_thread")

COLUMNS = ["temperature", "pressure", "humidity", "visits"]


@pytest.fixture
def large(tmp_path: Path, make_readings: Callable[..., pd.DataFrame], monkeypatch) -> Path:
    """230 rows, where one fit takes 60: five partitions of 46 rows (50 at most)."""
    db = tmp_path / "warehouse.duckdb"
    make_readings(db, table="readings", n_rows=230, seed=5)
    monkeypatch.setenv("TDM_MAX_FIT_ROWS", "60")
    monkeypatch.setenv("TDM_PARTITION_ROWS", "50")
    monkeypatch.setenv("TDM_MAX_ITER", "10")
    return db


def read(db: Path, sql: str) -> pd.DataFrame:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).df()


def test_a_large_table_is_imputed_in_partitions_with_observed_cells_unchanged(
    large: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every row comes back in order, observed cells bit for bit, each imputed cell recorded;
    never more than workers + 1 partitions read and not yet written, none over the size; the
    target keeps the source's definition (PRIMARY KEY, NOT NULL, CHECK, DEFAULT, UNIQUE)."""
    sizes: list[int] = []
    outstanding = [0, 0]  # now, most

    def reading(*args: object) -> pd.DataFrame:
        frame = read_partition(*args)
        sizes.append(len(frame))
        outstanding[0] += 1
        outstanding[1] = max(outstanding)
        return frame

    def writing(self: TableWriter, *args: object) -> None:
        stage(self, *args)
        outstanding[0] -= 1

    read_partition, stage = partitioned.read_partition, TableWriter.stage
    monkeypatch.setattr(partitioned, "read_partition", reading)
    monkeypatch.setattr(TableWriter, "stage", writing)
    monkeypatch.setenv("TDM_MAX_WORKERS", "2")
    constrain_readings(large)
    result = impute_table("readings", db_path=str(large), key="id")
    assert sum(sizes) == 230 and max(sizes) <= 50 and len(sizes) == 5
    assert outstanding == [0, 3]
    assert table_body(large, "readings_imputed") == table_body(large, "readings")
    assert result.could_be_not_null == tuple(COLUMNS)

    source = read(large, "SELECT * FROM readings ORDER BY rowid")
    target = read(large, "SELECT * FROM readings_imputed ORDER BY rowid")
    assert list(target["id"]) == list(source["id"])  # every row, in the source's order
    assert not target[COLUMNS].isna().any().any()
    observed = source[COLUMNS].notna()
    for name in COLUMNS:  # bit for bit
        assert (target[name][observed[name]] == source[name][observed[name]].astype(float)).all()
    assert target["site"].equals(source["site"]) and target["price"].equals(source["price"])

    cells = read(large, "SELECT row_number, row_key, column_name FROM tdm_imputed_cells")
    assert (
        len(cells) == int(source[COLUMNS].isna().sum().sum()) == sum(result.cells_imputed.values())
    )
    for row in cells.itertuples():
        assert pd.isna(source.at[row.row_number, row.column_name])
        assert str(source.at[row.row_number, "id"]) == row.row_key
    lineage = read(large, "SELECT * FROM tdm_lineage").iloc[0]
    used = json.loads(lineage["hyperparameters"])
    assert (used["fit_sample_rows"], used["partitions"], used["partition_rows"]) == (60, 5, 50)
    assert lineage["rows"] == 230 and bool(lineage["quality_passed"])
    assert "all 5 partitions" in lineage["quality_report"]
    assert not list(large.parent.glob(".tdm-staging-*"))


def test_a_failure_in_a_late_partition_leaves_the_warehouse_as_it_was(
    large: Path, monkeypatch: pytest.MonkeyPatch, take_snapshot: Callable[[Path], dict]
) -> None:
    """A check failing on the fourth partition leaves no target, record or staging file."""
    before = take_snapshot(large)
    calls = []

    def check(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 4:
            raise QualityCheckError("partition 4 failed its checks (test)")
        return check_quality(*args, **kwargs)

    check_quality = partitioned.check_partition
    monkeypatch.setattr(partitioned, "check_partition", check)
    with refused(QualityCheckError, match="partition 4"):
        impute_table("readings", db_path=str(large), key="id")
    assert take_snapshot(large) == before  # no target, no cells, no lineage table even
    assert not list(large.parent.glob(".tdm-staging-*"))  # the staging file is gone too


def test_other_processes_write_the_warehouse_during_the_fit(
    large: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: a partitioned run held the warehouse for writing from its first read to its commit,
    locking every other process out for the whole fit (docs/operator.md promises the opposite);
    a table written by another process meanwhile is kept, and the run still writes its own."""
    fit = partitioned.fit_on_runner

    def fit_while_another_writes(*args: object, **kwargs: object) -> object:
        code = f"import duckdb; duckdb.connect({str(large)!r}).execute('CREATE TABLE b (x INT)')"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return fit(*args, **kwargs)

    monkeypatch.setattr(partitioned, "fit_on_runner", fit_while_another_writes)
    impute_table("readings", db_path=str(large), key="id")
    assert read(large, "SELECT count(*) AS n FROM b")["n"].item() == 0
    assert not read(large, "SELECT * FROM readings_imputed")[COLUMNS].isna().any().any()


def test_deleted_rows_leave_gaps_that_the_partitions_follow(large: Path) -> None:
    """After deletes, every remaining row is imputed once, in the source's order."""
    with duckdb.connect(str(large)) as con:
        con.execute("DELETE FROM readings WHERE id % 3 = 0")  # rowids now have gaps
    impute_table("readings", db_path=str(large), key="id")
    source = read(large, "SELECT id FROM readings ORDER BY rowid")
    target = read(large, "SELECT id, humidity FROM readings_imputed ORDER BY rowid")
    assert list(target["id"]) == list(source["id"]) and len(target) == 230 - 76
    assert target["humidity"].notna().all()


def test_a_warehouse_or_schema_named_like_the_staging_file_is_imputed(large: Path) -> None:
    """Bug: a warehouse file called `tdm_stage.duckdb` failed in partitions ("database with
    name "tdm_stage" already exists": the staging file is attached under that name); a schema
    so called made the staged tables ambiguous. The staging file takes another name."""
    db = large.with_name("tdm_stage.duckdb")
    large.rename(db)
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE SCHEMA tdm_stage_1")
    impute_table("readings", db_path=str(db), key="id")
    assert read(db, "SELECT count(*) AS n FROM readings_imputed")["n"][0] == 230


def test_writing_a_large_table_over_itself_is_refused(large: Path) -> None:
    """`replace_source` on a table imputed in partitions is refused, naming the row count."""
    with refused(PipelineInputError, match=r'"readings" has 230 rows.*another table'):
        impute_table("readings", db_path=str(large), replace_source=True)


def test_bad_values_anywhere_in_a_large_table_are_named(large: Path) -> None:
    """An infinite value in a row no sample may hold is found and named with its column."""
    with duckdb.connect(str(large)) as con:
        con.execute("UPDATE readings SET pressure = 'inf'::DOUBLE WHERE id = 200")
    with refused(PipelineInputError, match=r'"readings".*"pressure" has 1 infinite'):
        impute_table("readings", db_path=str(large), key="id")


@pytest.mark.parametrize("seed", [1, 3])
def test_every_column_type_keeps_its_observed_cells_in_partitions(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    take_snapshot: Callable[[Path], dict],
    seed: int,
) -> None:
    """Property, as for a single fit (`tests/tasks/test_task_exactness.py`): over a random table
    of every column type imputed in partitions (text, enum and boolean ones with labels), every
    observed cell comes back identical in its own type, every type is kept, every imputed cell
    is set, and no other table changes; or the run is refused (an imputed value beyond its type)
    and the file is as it was."""
    db = tmp_path / "w.duckdb"
    random_table(db, seed, n_rows=90)
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE original AS SELECT * FROM every_type")
    monkeypatch.setenv("TDM_MAX_FIT_ROWS", "40")
    monkeypatch.setenv("TDM_PARTITION_ROWS", "30")
    monkeypatch.setenv("TDM_MAX_ITER", "10")
    source_types = column_types(db, "every_type")
    before, digest = take_snapshot(db), file_hash(db)
    try:
        result = impute_table("every_type", db_path=str(db), key="id")
    except QualityCheckError as error:  # refused: an imputed value beyond its type or range
        assert "nothing was written" in str(error)
        assert take_snapshot(db) == before and file_hash(db) == digest
        return
    after = take_snapshot(db)
    assert {n: after[n] for n in before} == before  # the source and every other table
    lineage = read(db, "SELECT hyperparameters, quality_report FROM tdm_lineage").iloc[0]
    assert json.loads(lineage["hyperparameters"])["partitions"] == 3
    assert "observed cells identical in their source types" in lineage["quality_report"]
    with duckdb.connect(str(db), read_only=True) as con:
        assert set(differing_cells(con, "original", "every_type_imputed").values()) == {0}
        for name in result.cells_imputed:
            unset = f'SELECT count(*) FROM every_type_imputed WHERE "{name}" IS NULL'
            assert con.execute(unset).fetchall()[0][0] == 0, name
    assert result.cells_imputed["s"] and result.cells_imputed["e"]  # labels, partitioned too
    assert column_types(db, "every_type_imputed") == source_types


def test_many_partitions_log_a_line_at_every_tenth_not_each() -> None:
    """Bug: 500 partitions logged 500 lines; up to 20 still log one each."""
    from flows.partitioned import _progress_line

    assert [n for n in range(1, 501) if _progress_line(n, 500)] == [1, *range(50, 501, 50)]
    assert all(_progress_line(n, 20) for n in range(1, 21))
