"""Load step: read the source table from DuckDB, read-only, with its fingerprint."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pandas as pd

from tasks.errors import PipelineInputError
from tasks.retry import warehouse_task
from tasks.warehouse.names import is_reserved, quote_identifier
from tasks.warehouse.tables import (
    Fingerprint,
    TableInfo,
    columns_sql,
    connect,
    find_table,
    find_view,
    fingerprint_table,
    list_tables,
)

__all__ = ["NAN_TYPES", "SourceTable", "count_nan", "count_nulls", "load_table", "untyped_columns"]

NAN_TYPES = ("FLOAT", "DOUBLE")
"""The column types that can hold NaN, a value in DuckDB (not NULL, not missing)."""


@dataclass(frozen=True, eq=False)
class SourceTable:
    """The source table: where it lives, its columns, its fingerprint and the columns read.

    `frame` holds the columns the pipeline can impute (numeric, text, enum, boolean) and the key
    column (whatever its type), in table order and in DuckDB's scan order; the other columns
    are never read: they pass through in SQL. In `frame` a NaN and a NULL are alike (NaN);
    `nan_cells` counts the NaN values of each FLOAT or DOUBLE column that has some.
    """

    db_path: str
    table: TableInfo
    fingerprint: Fingerprint
    frame: pd.DataFrame
    nan_cells: Mapping[str, int] = field(default_factory=dict)
    untyped_nulls: Mapping[str, int] = field(default_factory=dict)


def _missing_table_message(con: duckdb.DuckDBPyConnection, db_path: str | Path, table: str) -> str:
    view = find_view(con, table)
    if view is not None:
        return (
            f"\"{view}\" in '{db_path}' is a view; the pipeline imputes base tables only. "
            f'Materialise it first (CREATE TABLE ... AS SELECT * FROM "{view}") and impute that.'
        )
    tables = [name for name in list_tables(con) if not is_reserved(name)]
    close = difflib.get_close_matches(table.lower(), [t.lower() for t in tables], n=3, cutoff=0.6)
    like = [t for t in tables if t.lower() in close]
    meant = " Did you mean " + " or ".join(f'"{t}"' for t in like) + "?" if like else ""
    known = ", ".join(f'"{t}"' for t in tables[:20]) if tables else "none"
    more = f" (and {len(tables) - 20} more)" if len(tables) > 20 else ""
    return (
        f"Table \"{table}\" does not exist in '{db_path}' (a name is `table`, in schema main, or "
        f"`schema.table`).{meant} Tables there: {known}{more}."
    )


@warehouse_task("load-table")
def load_table(
    db_path: str, table: str, key: str | None = None, skip: Sequence[str] = ()
) -> SourceTable:
    """Read the source table's columns the pipeline can impute (numeric, text, enum, boolean)
    but those in `skip` (passed through), and its key, read-only, with its fingerprint."""
    with connect(db_path, read_only=True) as con:
        info = find_table(con, table)
        if info is None:
            raise PipelineInputError(_missing_table_message(con, db_path, table))
        key_info = info.column(key) if key is not None else None
        skipped = {c.name for c in map(info.column, skip) if c is not None}
        wanted = [
            c.name
            for c in info.columns
            if (c.kind is not None and c.name not in skipped) or c is key_info
        ]
        try:
            fingerprint = fingerprint_table(con, info)
            if wanted:
                read = columns_sql(wanted, info, key_info.name if key_info else None)
                sql = f"SELECT {read} FROM {info.sql}"
                frame = con.execute(sql).df()
            else:
                frame = pd.DataFrame(index=pd.RangeIndex(fingerprint.rows))
            nan_cells = count_nan(con, info, wanted)
            key_name = key_info.name if key_info is not None else None
            untyped_nulls = count_nulls(con, info, untyped_columns(info, key_name))
        except duckdb.Error as error:
            raise PipelineInputError(
                f"Table \"{info.qualified}\" in '{db_path}' could not be read: "
                f"{str(error).splitlines()[0]}"
            ) from None
    return SourceTable(
        db_path=str(db_path),
        table=info,
        fingerprint=fingerprint,
        frame=frame,
        nan_cells=nan_cells,
        untyped_nulls=untyped_nulls,
    )


def count_nan(
    con: duckdb.DuckDBPyConnection, info: TableInfo, names: Sequence[str]
) -> dict[str, int]:
    """The NaN values of each FLOAT or DOUBLE column among `names` that has some."""
    types = {column.name: column.sql_type.upper() for column in info.columns}
    floats = [name for name in names if types.get(name) in NAN_TYPES]
    if not floats:
        return {}
    counts = ", ".join(f"count(*) FILTER (WHERE isnan({quote_identifier(n)}))" for n in floats)
    row = con.execute(f"SELECT {counts} FROM {info.sql}").fetchall()[0]
    return {name: int(n) for name, n in zip(floats, row, strict=True) if n}


def untyped_columns(info: TableInfo, key: str | None) -> list[str]:
    """The columns of a type the pipeline does not impute (DATE, TIMESTAMP, BLOB, ...), the key
    aside, in table order."""
    return [c.name for c in info.columns if c.kind is None and c.name != key]


def count_nulls(
    con: duckdb.DuckDBPyConnection, info: TableInfo, names: Sequence[str]
) -> dict[str, int]:
    """The NULLs of each column among `names` that has some, in table order."""
    if not names:
        return {}
    counts = ", ".join(f"count(*) FILTER (WHERE {quote_identifier(n)} IS NULL)" for n in names)
    row = con.execute(f"SELECT {counts} FROM {info.sql}").fetchall()[0]
    return {name: int(n) for name, n in zip(names, row, strict=True) if n}
