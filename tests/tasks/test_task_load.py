"""Load step: reads the imputable and key columns read-only; clear errors for missing things."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tasks.errors import PipelineInputError
from tasks.load import load_table


def test_load_reads_imputable_columns_and_key_with_fingerprint(warehouse: Path) -> None:
    """Numeric, text and boolean columns and the key are read in table order; a DATE column
    and the columns to skip (passed through) stay in DuckDB."""
    source = load_table.fn(str(warehouse), "readings", "id")
    assert list(source.frame.columns) == [
        "id", "temperature", "pressure", "humidity", "visits", "site", "ok", "price",
    ]  # fmt: skip
    assert source.fingerprint.rows == 80
    assert len(source.frame) == 80
    assert source.table.column("site").sql_type == "VARCHAR"
    skipped = load_table.fn(str(warehouse), "readings", "id", ["SITE", "ok"])
    assert "site" not in skipped.frame and "ok" not in skipped.frame


def test_load_reads_check_constraints(tmp_path: Path) -> None:
    """The table's CHECK constraints are read with its columns (the bounds use them)."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t (x DOUBLE CHECK (x >= 0), y INTEGER, CHECK (y < x))")
    assert load_table.fn(str(path), "t").table.checks == ("(x >= 0)", "(y < x)")


def test_load_reads_a_non_numeric_key(tmp_path: Path) -> None:
    """A text key column is read along with the numeric columns."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t AS SELECT 'k' || i AS code, i * 1.0 AS x FROM range(5) r(i)")
    source = load_table.fn(str(path), "t", "code")
    assert list(source.frame.columns) == ["code", "x"]


def test_load_refuses_a_missing_database(tmp_path: Path) -> None:
    """A missing database file gets a message naming the path, and is not created."""
    path = tmp_path / "absent.duckdb"
    with pytest.raises(PipelineInputError, match=r"absent\.duckdb' does not exist"):
        load_table.fn(str(path), "readings")
    assert not path.exists()


def test_load_refuses_a_file_that_is_not_duckdb(tmp_path: Path) -> None:
    """A file that is not a DuckDB database gets a message naming it."""
    path = tmp_path / "notes.duckdb"
    path.write_text("not a database\n" * 100)
    with pytest.raises(PipelineInputError, match="could not be opened as a DuckDB database") as e:
        load_table.fn(str(path), "readings")
    assert not str(e.value).endswith("!.")  # bug: DuckDB's "...file!" and the sentence's "."


def test_load_refuses_a_missing_table_and_lists_the_tables(warehouse: Path) -> None:
    """A missing table is named, with the user's tables that do exist (not the pipeline's own
    records)."""
    with duckdb.connect(str(warehouse)) as con:
        con.execute("CREATE TABLE tdm_lineage (run_id VARCHAR)")
    with pytest.raises(PipelineInputError, match=r'Table "nope" does not exist') as refused:
        load_table.fn(str(warehouse), "nope")
    assert 'Tables there: "readings".' in str(refused.value)
    assert "Did you mean" not in str(refused.value)


def test_a_missing_table_s_message_names_the_tables_of_a_like_name_first(
    warehouse: Path,
) -> None:
    """Bug: a table renamed since the config was written (`customers` to `customers_v2`) was
    named among the first 20 tables alphabetically, or not at all in a larger warehouse."""
    with duckdb.connect(str(warehouse)) as con:
        for n in range(30):
            con.execute(f"CREATE TABLE a{n:02d} (x INTEGER)")
        con.execute("CREATE TABLE Customers_V2 (x INTEGER)")
    with pytest.raises(PipelineInputError) as refused:
        load_table.fn(str(warehouse), "customers")
    assert "does not exist in" in str(refused.value)
    assert '`schema.table`). Did you mean "Customers_V2"? Tables there: ' in str(refused.value)


def test_load_refuses_a_view(warehouse: Path) -> None:
    """A view is refused with the advice to materialise it."""
    with duckdb.connect(str(warehouse)) as con:
        con.execute("CREATE VIEW recent AS SELECT * FROM readings")
    with pytest.raises(PipelineInputError, match="is a view"):
        load_table.fn(str(warehouse), "recent")


def test_a_schema_named_like_the_database_is_refused_by_name(tmp_path: Path) -> None:
    """Bug: in `analytics.duckdb`, a table of the schema `analytics` failed as "unexpected
    error: BinderException: Ambiguous reference" (DuckDB names the file's database after its
    stem). The run now says so, and what to do."""
    path = tmp_path / "analytics.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE SCHEMA analytics.analytics")
        con.execute("CREATE TABLE analytics.analytics.s AS SELECT 1.0 AS x")
    with pytest.raises(PipelineInputError) as refused:
        load_table.fn(str(path), "Analytics.s")
    assert str(refused.value).startswith(
        'Table "Analytics.s": its schema "Analytics" has the name of the database "analytics" '
        f"(DuckDB names the database of '{path}' after the file)"
    )


def test_a_dotted_table_name_like_a_database_s_is_still_found(tmp_path: Path) -> None:
    """A table of main named with a dot, whose first part names a database but no schema
    (`"temp.x"`; DuckDB's `temp` database), is found by its whole name, as before the refusal
    of schemas named like a database."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute('CREATE TABLE "temp.x" AS SELECT 1.0 AS x')
    assert load_table.fn(str(path), "temp.x").table.name == "temp.x"
