"""DuckDB helpers shared by the tasks: quoting, connections, table and column lookup, frames
registered as views."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from tasks.errors import PipelineInputError, WarehouseBusyError

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ColumnInfo",
    "Fingerprint",
    "TableInfo",
    "connect",
    "describe_table",
    "find_table",
    "fingerprint_table",
    "is_numeric_type",
    "quote_identifier",
    "register_frame",
]

# DuckDB's numeric types; DECIMAL(p, s) is matched by prefix. BOOLEAN is not numeric here.
_NUMERIC_TYPES = frozenset(
    {
        "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
        "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT",
        "FLOAT", "DOUBLE",
    }
)  # fmt: skip


@dataclass(frozen=True)
class ColumnInfo:
    """A column of a DuckDB table: its name as stored and its SQL type."""

    name: str
    sql_type: str

    @property
    def is_numeric(self) -> bool:
        """Whether the pipeline can impute this column."""
        return is_numeric_type(self.sql_type)


@dataclass(frozen=True)
class TableInfo:
    """A base table of the database's default schema, with its columns in order."""

    name: str
    columns: tuple[ColumnInfo, ...]

    def column(self, name: str) -> ColumnInfo | None:
        """The column called `name` (exact match first, then case-insensitive, as DuckDB does)."""
        for column in self.columns:
            if column.name == name:
                return column
        folded = [c for c in self.columns if c.name.lower() == name.lower()]
        return folded[0] if len(folded) == 1 else None


@dataclass(frozen=True)
class Fingerprint:
    """Row count and an order-independent content hash of a table (and its column types)."""

    rows: int
    content_hash: str


def quote_identifier(name: str) -> str:
    """Quote a DuckDB identifier: double quotes around it, embedded double quotes doubled."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise PipelineInputError(
            f"{name!r} is not a usable table or column name: names must be non-empty text "
            "without NUL characters."
        )
    return '"' + name.replace('"', '""') + '"'


def is_numeric_type(sql_type: str) -> bool:
    """Whether a DuckDB type name is a number type the imputer accepts."""
    upper = sql_type.upper()
    return upper in _NUMERIC_TYPES or upper.startswith("DECIMAL")


def _is_lock_error(error: duckdb.Error) -> bool:
    text = str(error).lower()
    return "lock" in text and ("conflicting" in text or "could not set" in text)


@contextmanager
def connect(db_path: str | Path, *, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the DuckDB file (which must exist), translating open errors into clear messages."""
    path = Path(db_path)
    if not path.is_file():
        where = "is a directory, not a DuckDB file" if path.is_dir() else "does not exist"
        raise PipelineInputError(
            f"Database file '{path}' {where}. Pass the path of an existing DuckDB file with "
            "--db (or TDM_DB_PATH); `tdm demo` creates one to try."
        )
    try:
        con = duckdb.connect(str(path), read_only=read_only)
    except duckdb.Error as error:
        if _is_lock_error(error):
            raise WarehouseBusyError(
                f"Database file '{path}' is locked by another process that is writing to it; "
                "DuckDB allows one writer at a time. Retry when that process has finished."
            ) from None
        raise PipelineInputError(
            f"Database file '{path}' could not be opened as a DuckDB database: "
            f"{_first_line(error)}."
        ) from None
    try:
        yield con
    finally:
        con.close()


@contextmanager
def register_frame(
    con: duckdb.DuckDBPyConnection, frame: pd.DataFrame, prefix: str
) -> Iterator[str]:
    """Within it, `frame` is a view of `con` under a fresh name `<prefix>_<hex>`, yielded."""
    view = f"{prefix}_{uuid.uuid4().hex}"
    con.register(view, frame)
    try:
        yield view
    finally:
        con.unregister(view)


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0].rstrip(".") if str(error).strip() else repr(error)


def find_table(con: duckdb.DuckDBPyConnection, name: str) -> TableInfo | None:
    """Look up a base table of the default schema by name (case-insensitively, like DuckDB)."""
    quote_identifier(name)  # refuses empty names and NUL characters
    rows = con.execute(
        "SELECT table_name FROM duckdb_tables() "
        "WHERE database_name = current_database() AND schema_name = current_schema() "
        "AND lower(table_name) = lower(?) ORDER BY table_name = ? DESC",
        [name, name],
    ).fetchall()
    if not rows:
        return None
    return describe_table(con, rows[0][0])


def find_view(con: duckdb.DuckDBPyConnection, name: str) -> str | None:
    """The stored name of a view of the default schema called `name`, if there is one."""
    rows = con.execute(
        "SELECT view_name FROM duckdb_views() "
        "WHERE database_name = current_database() AND schema_name = current_schema() "
        "AND lower(view_name) = lower(?)",
        [name],
    ).fetchall()
    return rows[0][0] if rows else None


def list_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Names of the base tables of the default schema, sorted."""
    rows = con.execute(
        "SELECT table_name FROM duckdb_tables() "
        "WHERE database_name = current_database() AND schema_name = current_schema() "
        "ORDER BY table_name"
    ).fetchall()
    return [row[0] for row in rows]


def describe_table(con: duckdb.DuckDBPyConnection, name: str) -> TableInfo:
    """The columns of the base table `name` (its stored name), in table order."""
    rows = con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = current_schema() "
        "AND table_name = ? ORDER BY column_index",
        [name],
    ).fetchall()
    return TableInfo(name=name, columns=tuple(ColumnInfo(n, t) for n, t in rows))


def fingerprint_table(con: duckdb.DuckDBPyConnection, table: TableInfo) -> Fingerprint:
    """Row count and content hash of `table`, computed inside DuckDB (independent of row order)."""
    quoted = ", ".join(quote_identifier(c.name) for c in table.columns)
    # Sum and xor of per-row hashes: order-independent; the sum keeps duplicate rows distinct.
    sql = (
        f"SELECT count(*), coalesce(sum(hash({quoted})), 0)::VARCHAR, "
        f"coalesce(bit_xor(hash({quoted})), 0)::VARCHAR FROM {quote_identifier(table.name)}"
    )
    rows, total, xor = con.execute(sql).fetchall()[0]
    schema = "\x1f".join(f"{c.name}\x1e{c.sql_type}" for c in table.columns)
    digest = hashlib.sha256(f"{schema}|{rows}|{total}|{xor}".encode()).hexdigest()
    return Fingerprint(rows=int(rows), content_hash=digest[:32])


def columns_sql(names: Sequence[str]) -> str:
    """A comma-separated list of quoted identifiers."""
    return ", ".join(quote_identifier(n) for n in names)
