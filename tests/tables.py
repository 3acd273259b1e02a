"""Warehouse tables for the exactness tests: every numeric column type DuckDB has, with its
extremes (2**63 - 1, -0.0, subnormals, the widest decimals) and NULLs, beside text, enum and
boolean columns (imputed with labels) and date, timestamp and blob columns (passed through);
and the comparisons that prove observed cells unchanged in their own type."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

import duckdb
import numpy as np


def file_hash(path: Path) -> str:
    """The SHA-256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_table(db: Path, table: str, columns: dict[str, str], rows: Sequence[tuple]) -> None:
    """CREATE TABLE `table` with `columns` (name: SQL type or definition) and insert `rows`."""
    with duckdb.connect(str(db)) as con:
        body = ", ".join(f'"{name}" {kind}' for name, kind in columns.items())
        con.execute(f'CREATE TABLE "{table}" ({body})')
        marks = ", ".join("?" for _ in columns)
        con.executemany(f'INSERT INTO "{table}" VALUES ({marks})', [list(r) for r in rows])


def column_types(db: Path, table: str) -> dict[str, str]:
    """Column name to SQL type."""
    with duckdb.connect(str(db), read_only=True) as con:
        return {row[0]: row[1] for row in con.execute(f'DESCRIBE "{table}"').fetchall()}


INTEGER_RANGES = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
    "INTEGER": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
    "HUGEINT": (-(2**127), 2**127 - 1),
    "UTINYINT": (0, 2**8 - 1),
    "USMALLINT": (0, 2**16 - 1),
    "UINTEGER": (0, 2**32 - 1),
    "UBIGINT": (0, 2**64 - 1),
}
DECIMALS = {"DECIMAL(4,2)": (4, 2), "DECIMAL(18,6)": (18, 6), "DECIMAL(38,10)": (38, 10)}
NUMERIC_TYPES = [*INTEGER_RANGES, "FLOAT", "DOUBLE", *DECIMALS]
MOODS = ("lo", "mid", "hi")
# Imputed with labels: s, e, ok; passed through: day, ts, raw.
OTHER_TYPES = {
    "s": "VARCHAR", "e": f"ENUM{MOODS!r}", "day": "DATE", "ts": "TIMESTAMP", "ok": "BOOLEAN",
    "raw": "BLOB",
}  # fmt: skip
FLOAT_EXTREMES = [-0.0, 1e-45, -1.1754942e-38, 3.4028235e38, -3.4028235e38]
EXTREME_RATE = 0.1
DOUBLE_EXTREMES = [-0.0, 5e-324, -2.2250738585072014e-308, 1e300, -1e300]


def random_value(rng: np.random.Generator, sql_type: str, forced: int | None = None) -> object:
    """A value of `sql_type`: one of its extremes (-0.0 and subnormals for floats) at times, or
    always its extreme number `forced` (0: 2**63 - 1 or the greatest value, -0.0; 1: the least
    value, a subnormal, the smallest positive decimal)."""
    extreme = forced is not None or rng.random() < EXTREME_RATE
    if sql_type in INTEGER_RANGES:
        low, high = INTEGER_RANGES[sql_type]
        choices = [min(high, 2**63 - 1), low, high, 0]
    elif sql_type in ("FLOAT", "DOUBLE"):
        choices = FLOAT_EXTREMES if sql_type == "FLOAT" else DOUBLE_EXTREMES
    else:
        digits, scale = DECIMALS[sql_type]
        top = "9" * (digits - scale) + "." + "9" * scale
        choices = [top, "0." + "0" * (scale - 1) + "1", "-" + top]
    if extreme:
        return choices[forced if forced is not None else rng.integers(len(choices))]
    if sql_type in INTEGER_RANGES:
        span = min(high - low, 2**62)
        return low + (high - low) // 2 - span // 4 + int(rng.integers(0, span // 2 + 1))
    if sql_type in ("FLOAT", "DOUBLE"):
        value = rng.normal(0, 1e3)
        return float(np.float32(value)) if sql_type == "FLOAT" else float(value)
    whole = "".join(str(d) for d in rng.integers(0, 10, digits - scale))
    part = "".join(str(d) for d in rng.integers(0, 10, scale))
    return ("-" if rng.random() < 0.5 else "") + str(int(whole)) + "." + part


def random_table(db: Path, seed: int, n_rows: int = 24) -> None:
    """Table `every_type` (key id, each numeric type, text, enum, boolean, date, timestamp and
    blob; a quarter NULL, the first two rows' numbers complete) and an unrelated table
    `other`."""
    rng = np.random.default_rng(seed)
    columns = {"id": "INTEGER PRIMARY KEY"}
    columns |= {f"n{j}": kind for j, kind in enumerate(NUMERIC_TYPES)}
    columns |= OTHER_TYPES
    rows = []
    for i in range(n_rows):
        row: list[object] = [i]
        for kind in NUMERIC_TYPES:
            forced = {0: 0, 1: 1}.get(i)  # rows 0 and 1: 2**63 - 1, -0.0, subnormals, ...
            row.append(None if i >= 2 and rng.random() < 0.25 else random_value(rng, kind, forced))
        passed = [
            f"text {rng.integers(12)}",
            MOODS[int(rng.integers(len(MOODS)))],
            f"2024-0{rng.integers(1, 10)}-1{rng.integers(0, 10)}",
            f"2024-01-01 0{rng.integers(0, 10)}:00:00",
            bool(rng.random() < 0.5),
            bytes(rng.integers(0, 256, 4).astype(np.uint8)),
        ]
        row += [None if rng.random() < 0.25 else v for v in passed]
        rows.append(tuple(row))
    write_table(db, "every_type", columns, rows)
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE other AS SELECT range AS r, range * 0.5 AS half FROM range(5)")


def differing_cells(con: duckdb.DuckDBPyConnection, before: str, after: str) -> dict[str, int]:
    """Per column of `before`: its non-NULL cells that differ in `after` (joined on id), compared
    as text in `before`'s type, so -0.0 differs from 0.0."""
    types = dict(
        con.execute(f"SELECT column_name, column_type FROM (DESCRIBE {before})").fetchall()
    )
    found = {}
    for name, kind in types.items():
        found[name] = con.execute(
            f'SELECT count(*) FROM {before} b JOIN {after} a USING (id) WHERE b."{name}" IS NOT '
            f'NULL AND b."{name}"::VARCHAR IS DISTINCT FROM TRY_CAST(a."{name}" AS {kind})::VARCHAR'
        ).fetchall()[0][0]
    return found


STRICT_COLUMNS = {
    "id": "INTEGER PRIMARY KEY",
    "x": "DOUBLE NOT NULL DEFAULT 0 CHECK (x > -100)",
    "n": "INTEGER CHECK (n >= 0)",
    "y": "DOUBLE",
    "b": "BIGINT",
}


def strict_table(db: Path, *, n_rows: int = 48, seed: int = 3, index: bool = True) -> None:
    """Table `strict` (PRIMARY KEY, NOT NULL, DEFAULT, CHECK, an index on `y` unless not
    `index`; INTEGER and BIGINT-above-2**53 columns with NULLs), and its copy `original`."""
    rng = np.random.default_rng(seed)
    rows = [
        (
            i,
            float(rng.normal()),
            None if i % 4 == 0 else int(rng.integers(10, 50)),
            None if i % 5 == 2 else float(rng.normal()),
            None if i % 6 == 3 else 2**53 + 1 + 2 * i,
        )
        for i in range(n_rows)
    ]
    write_table(db, "strict", STRICT_COLUMNS, rows)
    with duckdb.connect(str(db)) as con:
        if index:
            con.execute("CREATE INDEX strict_y ON strict (y)")
        con.execute("CREATE TABLE original AS SELECT * FROM strict")


def table_definition(db: Path, table: str) -> tuple:
    """The table's CREATE statement and its indexes, as DuckDB reports them."""
    with duckdb.connect(str(db), read_only=True) as con:
        # each fetched at once: `execute` returns the connection, whose result the next replaces
        sql = con.execute("SELECT sql FROM duckdb_tables() WHERE table_name = ?", [table])
        tables = sql.fetchall()
        indexes = con.execute("SELECT sql FROM duckdb_indexes() WHERE table_name = ?", [table])
        return tables, indexes.fetchall()


def strict_changes(db: Path) -> tuple[int, int]:
    """After `strict` was imputed in place: (rows whose observed cells differ from `original`,
    compared in their own type; rows with a cell still missing)."""
    with duckdb.connect(str(db), read_only=True) as con:
        changed = con.execute(
            "SELECT count(*) FROM original o JOIN strict s USING (id) WHERE "
            "(o.n IS NOT NULL AND o.n IS DISTINCT FROM s.n) OR "
            "(o.y IS NOT NULL AND o.y::VARCHAR IS DISTINCT FROM s.y::VARCHAR) OR "
            "(o.b IS NOT NULL AND o.b IS DISTINCT FROM s.b) OR o.x::VARCHAR <> s.x::VARCHAR"
        ).fetchall()[0][0]
        left = con.execute(
            "SELECT count(*) FROM strict WHERE n IS NULL OR y IS NULL OR b IS NULL"
        ).fetchall()[0][0]
    return int(changed), int(left)


CONSTRAINED_READINGS = (
    "id INTEGER PRIMARY KEY, temperature DOUBLE CHECK (temperature BETWEEN -100 AND 100), "
    "pressure DOUBLE, humidity DOUBLE, visits INTEGER DEFAULT 0, "
    "site VARCHAR NOT NULL DEFAULT 'north', day DATE NOT NULL UNIQUE, ok BOOLEAN, "
    "price DECIMAL(8,2) NOT NULL DEFAULT 1 CHECK (price > 0), CHECK (pressure > humidity)"
)
"""The readings table's columns (`tests.conftest.build_readings`) with a PRIMARY KEY, NOT NULL,
CHECK (a bound, and one of two columns), DEFAULT and UNIQUE constraints."""


def constrain_readings(db: Path, table: str = "readings") -> None:
    """Give the readings table `table` the constraints of `CONSTRAINED_READINGS` and a column
    comment, rows kept."""
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE TEMP TABLE rows AS SELECT * FROM {table}")
        con.execute(f"DROP TABLE {table}")
        con.execute(f"CREATE TABLE {table} ({CONSTRAINED_READINGS})")
        con.execute(f"INSERT INTO {table} SELECT * FROM rows")
        con.execute(f"COMMENT ON COLUMN {table}.temperature IS 'in °C, the sensor''s own'")


def table_body(db: Path, table: str) -> str:
    """The table's CREATE statement as DuckDB prints it, from its column list on: its columns,
    types, defaults and constraints, without its name; then its columns' comments."""
    ((sql,),), _ = table_definition(db, table)
    name = r'(?:"(?:[^"]|"")*"|\w+)'
    body = re.sub(rf"^CREATE TABLE (?:{name}\.)?{name}", "", str(sql))
    with duckdb.connect(str(db), read_only=True) as con:
        comments = con.execute(
            "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = ? "
            "AND comment IS NOT NULL AND comment <> '' ORDER BY column_index",
            [table.split(".")[-1]],
        ).fetchall()
    return f"{body} comments {comments}"
