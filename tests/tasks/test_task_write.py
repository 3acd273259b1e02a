"""Write-back step: target, imputed-cells record and lineage row are written all or nothing."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import duckdb
import numpy as np
import pandas as pd
import pytest

import tasks.write
from tasks.errors import PipelineError, QualityCheckError, WarehouseBusyError
from tasks.retry import retry_when_busy
from tasks.warehouse.constraints import target_definition
from tasks.write import write_back
from tests.conftest import small_mount
from tests.tables import file_hash, table_body

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


def test_the_target_keeps_the_column_comments(
    warehouse: Path, steps_before_write: Callable[..., tuple]
) -> None:
    """Bug: a new target lost the source's COMMENT ON COLUMN texts (its table comment is the
    run's marker, as documented)."""
    with duckdb.connect(str(warehouse)) as con:
        con.execute("COMMENT ON COLUMN readings.temperature IS 'in °C, the sensor''s own'")
        con.execute("COMMENT ON COLUMN readings.id IS 'row id'")
    write_back.fn(*steps_before_write(warehouse))
    comments = (
        "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = ? "
        "AND comment IS NOT NULL AND comment <> '' ORDER BY column_name"
    )
    with duckdb.connect(str(warehouse), read_only=True) as con:
        kept = con.execute(comments, ["readings_imputed"]).fetchall()
    assert kept == [("id", "row id"), ("temperature", "in °C, the sensor's own")]


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


def test_a_full_disk_leaves_the_warehouse_as_it_was_and_says_what_to_do(
    warehouse: Path,
    tmp_path: Path,
    steps_before_write: Callable[..., tuple],
    take_snapshot: Callable[[Path], dict],
) -> None:
    """A write that does not fit on the disk is rolled back, and its error says where to free
    space (bug: DuckDB's "No space left on device" alone)."""
    with small_mount(tmp_path / "small", "8m") as where:
        db = where / "w.duckdb"
        db.write_bytes(warehouse.read_bytes())
        source, plan, imputed, lineage = steps_before_write(db)
        with contextlib.suppress(OSError), (where / "filler").open("wb") as filler:
            while True:  # the disk full, but for a few bytes
                filler.write(bytes(64 * 1024))
                filler.flush()
        before = take_snapshot(db)
        with pytest.raises(PipelineError) as raised:
            write_back.fn(source, plan, imputed, lineage)
        message = str(raised.value)
        assert "failed, and the warehouse was left as it was" in message
        assert f"No space left on device. Free space in '{where}'" in message
        (where / "filler").unlink()
        assert take_snapshot(db) == before


def test_a_checkpoint_a_full_disk_refuses_after_the_commit_is_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Failure injection: with room for the write-ahead log but not for the checkpoint, the
    run said nothing and exited 0, the disk left full. The commit stands (the table is safe in
    the log), and a warning says where to free space; another checkpoint failure is left to the
    close."""

    class Connection:  # DuckDB's, with a disk too full to checkpoint
        def __init__(self, failure: str) -> None:
            self.failure, self.done = failure, []

        def execute(self, sql: str) -> None:
            if sql == "CHECKPOINT":
                raise duckdb.IOException(self.failure)
            self.done.append(sql)

    db = str(tmp_path / "w.duckdb")
    full = Connection("Could not write file: No space left on device")
    with tasks.write.transaction(full, "t_imputed", db):  # type: ignore[arg-type]
        pass
    assert full.done == ["BEGIN TRANSACTION", "COMMIT"]
    assert "is safe in its write-ahead log (w.duckdb.wal)" in caplog.text
    assert f"Free space in '{tmp_path}'" in caplog.text
    caplog.clear()
    with tasks.write.transaction(Connection("another transaction is running"), "t", db):  # type: ignore[arg-type]
        pass
    assert "write-ahead log" not in caplog.text


def test_a_partitioned_write_that_fails_names_its_table(
    warehouse: Path, steps_before_write: Callable[..., tuple]
) -> None:
    """Failure injection: a partitioned run whose staging failed (a full disk) said "Writing to
    '<file>' failed", naming no table."""
    source, plan, _, _ = steps_before_write(warehouse)
    partitioned = tasks.write.WriteMode.PARTITIONED
    with (
        pytest.raises(PipelineError) as raised,
        tasks.write.TableWriter(str(warehouse), partitioned) as writer,
    ):
        writer.create_stage(source, plan)
        raise duckdb.IOException("No space left on device")
    assert str(raised.value).startswith(
        f"Writing table \"{plan.target_table}\" to '{warehouse}' failed, and the warehouse was "
    )


def test_a_source_changed_since_loading_is_not_overwritten(
    warehouse: Path,
    steps_before_write: Callable[..., tuple],
    take_snapshot: Callable[[Path], dict],
) -> None:
    """If the source changed after it was read, nothing is written. Another process's write,
    not bad input: bug, a nightly run whose fit overlapped an insert failed for good, its
    run-level retries dropped; the error is the one they retry (as for a lock)."""
    source, plan, imputed, lineage = steps_before_write(warehouse)
    with duckdb.connect(str(warehouse)) as con:
        con.execute("UPDATE readings SET price = price + 1 WHERE id = 1")
    before = take_snapshot(warehouse)
    with pytest.raises(WarehouseBusyError, match='Table "readings" changed while') as raised:
        write_back.fn(source, plan, imputed, lineage)
    assert take_snapshot(warehouse) == before
    # Not retried as a step (it would meet the same change), only as a whole run.
    changed = SimpleNamespace(data=raised.value)
    locked = SimpleNamespace(data=WarehouseBusyError("locked"))
    assert not retry_when_busy(None, None, changed) and retry_when_busy(None, None, locked)


def test_target_definition_is_the_source_s_statement_but_its_foreign_keys() -> None:
    """The target's statement is DuckDB's statement of the source under the target's name:
    quotes, commas and parentheses in names and strings kept, its FOREIGN KEYs left out; any
    other statement is refused."""
    source = (
        'CREATE TABLE s."we""ird (t"(id BIGINT PRIMARY KEY, "x, y" DOUBLE DEFAULT(1.5) NOT NULL, '
        "code VARCHAR COLLATE nocase DEFAULT('a,(b') UNIQUE, pid INTEGER, g DOUBLE GENERATED "
        'ALWAYS AS(("x, y" * 2)), CHECK(("x, y" >= 0)), FOREIGN KEY (pid) REFERENCES s.p(id), '
        "UNIQUE(id, code), CHECK(((pid < 3) OR (code != 'FOREIGN KEY, x'))));"
    )
    assert target_definition(source, 's."out"') == (
        'CREATE OR REPLACE TABLE s."out"(id BIGINT PRIMARY KEY, "x, y" DOUBLE DEFAULT(1.5) '
        "NOT NULL, code VARCHAR COLLATE nocase DEFAULT('a,(b') UNIQUE, pid INTEGER, g DOUBLE "
        'GENERATED ALWAYS AS(("x, y" * 2)), CHECK(("x, y" >= 0)), UNIQUE(id, code), '
        "CHECK(((pid < 3) OR (code != 'FOREIGN KEY, x'))))"
    )
    with pytest.raises(PipelineError, match="not a CREATE TABLE statement"):
        target_definition("CREATE VIEW v AS SELECT 1", '"out"')


def test_the_target_keeps_the_constraints_and_refuses_values_that_break_them(
    tmp_path: Path,
    steps_before_write: Callable[..., tuple],
    take_snapshot: Callable[[Path], dict],
) -> None:
    """A table of another schema, with a quoted name, a generated column, CHECK, UNIQUE and a
    FOREIGN KEY on imputed columns: its target has the same definition but the FOREIGN KEY, and
    says which columns now hold no NULL. Imputed values that repeat a UNIQUE value, make a
    CHECK false or match no row of the referenced table are refused, naming the column and the
    constraint, and the file is left as it was."""
    db = tmp_path / "w.duckdb"
    rng = np.random.default_rng(42)
    rows = [
        (
            i,
            None if i % 5 == 1 else float(rng.normal()),
            None if i % 5 == 2 else i + float(rng.random()),
            None if i % 5 == 3 else int(rng.integers(1, 6)),
        )
        for i in range(40)
    ]
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE SCHEMA s")
        con.execute("CREATE TABLE s.stores (id INTEGER PRIMARY KEY)")
        con.execute("INSERT INTO s.stores SELECT range FROM range(1, 6)")
        con.execute(
            'CREATE TABLE s."Sales (EU)" (id INTEGER PRIMARY KEY, '
            "x DOUBLE CHECK (x > -100 OR x = 1000), ref DOUBLE UNIQUE, "
            "store INTEGER REFERENCES s.stores (id), twice AS (x * 2))"
        )
        con.executemany('INSERT INTO s."Sales (EU)" VALUES (?, ?, ?, ?)', rows)
    # `ref`, an identifier (UNIQUE on its own), is imputed only when named
    source, plan, imputed, lineage = steps_before_write(
        db, "s.Sales (EU)", columns=["x", "ref", "store"]
    )
    assert plan.target_table == "s.Sales (EU)_imputed"
    before, digest = take_snapshot(db), file_hash(db)
    missing = source.frame.isna()
    for column, value, broken in (
        ("ref", float(source.frame["ref"].max()), r'UNIQUE\("ref"\) .*than one row: 1'),
        ("x", -500.0, r"CHECK\(\(\(x > -100\) OR \(x = 1000\)\)\) .*for which it is false: 8"),
        ("store", 9.0, r'FOREIGN KEY \(store\) .*whose value table "stores" lacks: 8'),
    ):
        wrong = imputed.copy()
        wrong.loc[missing[column].to_numpy(), column] = value
        with pytest.raises(QualityCheckError, match=f'values of "{column}" break {broken}'):
            write_back.fn(source, plan, wrong, lineage)
        assert take_snapshot(db) == before and file_hash(db) == digest

    result = write_back.fn(source, plan, imputed, lineage)
    assert result.could_be_not_null == ("x", "ref", "store")
    body = table_body(db, "Sales (EU)")
    assert "FOREIGN KEY" in body and "GENERATED ALWAYS AS" in body
    without_keys = re.sub(r", FOREIGN KEY \(store\) REFERENCES [^)]*\)", "", body)
    assert without_keys != body
    assert table_body(db, "Sales (EU)_imputed") == without_keys


def test_a_record_table_from_before_the_draws_gains_their_columns(
    warehouse: Path, steps_before_write: Callable[..., tuple]
) -> None:
    """A file whose tdm_imputed_cells predates model versions and draws gets the new columns
    at its next write; its old rows keep their values, with NULL in the new columns."""
    with duckdb.connect(str(warehouse)) as con:
        con.execute(
            "CREATE TABLE tdm_imputed_cells (run_id VARCHAR NOT NULL, target_table VARCHAR NOT "
            "NULL, row_number BIGINT NOT NULL, row_key VARCHAR, column_name VARCHAR NOT NULL)"
        )
        con.execute("INSERT INTO tdm_imputed_cells VALUES ('old', 't', 3, '4', 'x')")
    source, plan, imputed, lineage = steps_before_write(warehouse)
    write_back.fn(source, plan, imputed, lineage)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        columns = [row[0] for row in con.execute("DESCRIBE tdm_imputed_cells").fetchall()]
        old = con.execute("SELECT * FROM tdm_imputed_cells WHERE run_id = 'old'").fetchall()
        new = con.execute("SELECT count(*) FROM tdm_imputed_cells WHERE run_id <> 'old'").fetchall()
    assert columns[-4:] == ["model_version", "low", "high", "probability"]
    assert old == [("old", "t", 3, "4", "x", None, None, None, None)]
    assert new == [(plan.n_missing,)]


def test_each_imputed_cell_record_names_its_row_and_column_in_a_whole_table_write(
    warehouse: Path, steps_before_write: Callable[..., tuple]
) -> None:
    """docs/operator.md: `row_number` is the row's 0-based position in the target when written
    (for a whole table, its position in the source as read too), `row_key` the key's text.
    Every missing cell is recorded once, at the row and column where it was missing and where
    the target now holds a value."""
    source, plan, imputed, lineage = steps_before_write(warehouse)
    write_back.fn(source, plan, imputed, lineage)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        before = con.execute("SELECT * FROM readings ORDER BY rowid").df()
        after = con.execute("SELECT * FROM readings_imputed ORDER BY rowid").df()
        cells = con.execute("SELECT row_number, row_key, column_name FROM tdm_imputed_cells").df()
    expected = {
        (int(i), name) for name in plan.columns for i in np.flatnonzero(before[name].isna())
    }
    recorded = list(zip(cells["row_number"].astype(int), cells["column_name"], strict=True))
    assert len(recorded) == len(set(recorded)) == plan.n_missing
    assert set(recorded) == expected
    for row in cells.itertuples():
        assert str(before.at[row.row_number, "id"]) == row.row_key
        assert str(after.at[row.row_number, "id"]) == row.row_key
        assert pd.notna(after.at[row.row_number, row.column_name])


def test_an_imputed_frame_that_marks_an_observed_cell_missing_is_refused(
    warehouse: Path,
    steps_before_write: Callable[..., tuple],
    take_snapshot: Callable[[Path], dict],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Failure injection for `check_alignment`'s missing-cell comparison: the exactness proof
    checks only the cells the frame marks observed, so a frame marking an observed cell as
    missing would overwrite it unseen. The alignment check refuses it, naming the column."""

    source, plan, imputed, lineage = steps_before_write(warehouse)
    real = tasks.write.imputed_frame

    def marking_one_observed(source, plan, imputed, filled):  # type: ignore[no-untyped-def]
        frame = real(source, plan, imputed, filled)
        column = next(c for c in filled if c.name == "temperature")
        observed = np.flatnonzero(~frame[f"m{column.j}"].to_numpy())[0]
        frame.loc[observed, f"m{column.j}"] = True
        frame.loc[observed, f"c{column.j}"] = 1e6
        return frame

    monkeypatch.setattr(tasks.write, "imputed_frame", marking_one_observed)
    before = take_snapshot(warehouse)
    with pytest.raises(QualityCheckError, match=r'do not line up.*"temperature" \(1 rows\)'):
        write_back.fn(source, plan, imputed, lineage)
    assert take_snapshot(warehouse) == before
