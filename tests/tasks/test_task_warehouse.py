"""DuckDB helpers: identifiers are quoted, lookups follow DuckDB's case rules, fingerprints,
frames registered as views for as long as they are needed."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import pytest

from tasks.errors import PipelineInputError
from tasks.warehouse.names import quote_identifier
from tasks.warehouse.tables import (
    connect,
    find_table,
    fingerprint_table,
    is_numeric_type,
    register_frame,
)


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("plain", '"plain"'),
        ("with space", '"with space"'),
        ('x"; DROP TABLE t; --', '"x""; DROP TABLE t; --"'),
        ("Ünïcode", '"Ünïcode"'),
    ],
    ids=["plain", "space", "injection", "unicode"],
)
def test_quote_identifier_doubles_embedded_quotes(name: str, quoted: str) -> None:
    """Identifiers are wrapped in double quotes with embedded double quotes doubled."""
    assert quote_identifier(name) == quoted


@pytest.mark.parametrize("name", ["", "nul\x00byte"], ids=["empty", "nul"])
def test_quote_identifier_refuses_unusable_names(name: str) -> None:
    """Empty names and names with NUL characters are refused with a clear message."""
    with pytest.raises(PipelineInputError, match="not a usable table or column name"):
        quote_identifier(name)


@pytest.mark.parametrize(
    ("sql_type", "numeric"),
    [
        ("INTEGER", True), ("DOUBLE", True), ("DECIMAL(8,2)", True), ("UBIGINT", True),
        ("FLOAT", True), ("BOOLEAN", False), ("VARCHAR", False), ("DATE", False),
        ("TIMESTAMP", False), ("INTEGER[]", False),
    ],
)  # fmt: skip
def test_is_numeric_type(sql_type: str, numeric: bool) -> None:
    """Numbers (integers, floats, decimals) are numeric; booleans, text and dates are not."""
    assert is_numeric_type(sql_type) is numeric


def test_find_table_is_case_insensitive_like_duckdb(tmp_path: Path) -> None:
    """A table is found by any capitalisation of its name, as DuckDB resolves identifiers."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute('CREATE TABLE "Mixed Case" (a INTEGER, "B c" VARCHAR)')
        info = find_table(con, "mixed case")
        assert info is not None
        assert info.name == "Mixed Case"
        assert [(c.name, c.sql_type) for c in info.columns] == [
            ("a", "INTEGER"),
            ("B c", "VARCHAR"),
        ]
        assert info.column("b C") is not None
        assert find_table(con, "absent") is None


def test_fingerprint_ignores_row_order_and_sees_changes(tmp_path: Path) -> None:
    """The fingerprint is the same for the same rows in another order, and differs on a change."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE a AS SELECT i AS x, i * 2.5 AS y FROM range(10) r(i)")
        con.execute("CREATE TABLE b AS SELECT * FROM a ORDER BY x DESC")
        con.execute("CREATE TABLE c AS SELECT * FROM a")
        con.execute("UPDATE c SET y = 0 WHERE x = 3")
        prints = {name: fingerprint_table(con, find_table(con, name)) for name in "abc"}
    assert prints["a"].rows == 10
    assert prints["a"].content_hash == prints["b"].content_hash
    assert prints["a"].content_hash != prints["c"].content_hash


def test_connect_refuses_a_missing_file(tmp_path: Path) -> None:
    """A database path that does not exist is refused before DuckDB would create it."""
    missing = tmp_path / "nope.duckdb"
    with pytest.raises(PipelineInputError, match="does not exist"):
        connect(missing, read_only=True).__enter__()
    assert not missing.exists()


def _views(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [row[0] for row in con.execute("SELECT view_name FROM duckdb_views()").fetchall()]


def test_a_registered_frame_is_a_view_only_within_the_block() -> None:
    """The frame is queryable under a fresh `<prefix>_<hex>` name, and gone after the block."""
    frame = pd.DataFrame({"x": [1.0, 2.0, 4.0]})
    with duckdb.connect() as con:
        with register_frame(con, frame, "tdm_test") as view:
            assert view.startswith("tdm_test_") and len(view) == len("tdm_test_") + 32
            assert con.execute(f"SELECT sum(x) FROM {view}").fetchall() == [(7.0,)]
            assert view in _views(con)
            with register_frame(con, frame, "tdm_test") as other:
                assert other != view
        assert not [name for name in _views(con) if name.startswith("tdm_test")]


def test_a_registered_frame_is_dropped_when_the_block_fails() -> None:
    """An error inside the block still unregisters the view, and goes on up unchanged."""
    with duckdb.connect() as con:
        with (
            pytest.raises(RuntimeError, match="inside"),
            register_frame(con, pd.DataFrame({"x": [1]}), "tdm_test") as view,
        ):
            assert view in _views(con)
            raise RuntimeError("inside")
        assert not [name for name in _views(con) if name.startswith("tdm_test")]


def test_the_fingerprint_sees_a_change_to_a_pair_of_identical_rows(tmp_path: Path) -> None:
    """A change made meanwhile to two identical rows alike (an UPDATE ... WHERE matching both)
    keeps the row count and the XOR of row hashes; the sum still tells it, so the write sees
    the source changed."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE a AS SELECT i % 5 AS x, 1.5 AS y FROM range(10) r(i)")
        first = fingerprint_table(con, find_table(con, "a"))
        con.execute("UPDATE a SET y = 2.5 WHERE x = 3")  # two identical rows, changed alike
        second = fingerprint_table(con, find_table(con, "a"))
    assert first.rows == second.rows == 10
    assert first.content_hash != second.content_hash
