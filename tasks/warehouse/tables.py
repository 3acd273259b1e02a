"""DuckDB helpers shared by the tasks: quoting, connections, table and column lookup, frames
registered as views."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from decimal import Decimal, localcontext
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from tasks.errors import PipelineInputError, WarehouseBusyError, setting
from tasks.warehouse.access import busy_message
from tasks.warehouse.constraints import CHECK, UNIQUE_KINDS, Constraint
from tasks.warehouse.names import DEFAULT_SCHEMA, canonical_name, parse_table_name, quote_identifier

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BOOLEAN",
    "CATEGORICAL",
    "DECIMAL_TYPE",
    "FLOAT",
    "INTEGER",
    "LABELLED",
    "ColumnInfo",
    "Fingerprint",
    "TableInfo",
    "column_comments",
    "column_kind",
    "columns_sql",
    "connect",
    "describe_table",
    "find_table",
    "fingerprint_table",
    "is_numeric_type",
    "register_frame",
    "schema_exists",
    "type_range",
    "written_state",
]

# DuckDB's integer types: the signed ones' bits; the unsigned ones are the same names with a U
# in front. DECIMAL(p, s) is matched by `DECIMAL_TYPE`. BOOLEAN is not numeric here.
_INTEGER_BITS = {"TINYINT": 8, "SMALLINT": 16, "INTEGER": 32, "BIGINT": 64, "HUGEINT": 128}
_INTEGER_TYPES = frozenset(_INTEGER_BITS) | {f"U{name}" for name in _INTEGER_BITS}
_NUMERIC_TYPES = _INTEGER_TYPES | {"FLOAT", "DOUBLE"}
DECIMAL_TYPE = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")
"""A DECIMAL(p, s) type name (upper case): its precision and scale."""

# The kinds of column the pipeline imputes (`column_kind`), named as the library names them.
FLOAT = "float"
INTEGER = "integer"
BOOLEAN = "boolean"
CATEGORICAL = "categorical"
LABELLED = (BOOLEAN, CATEGORICAL)
"""The kinds imputed with labels observed in the column (not numbers)."""


@dataclass(frozen=True)
class ColumnInfo:
    """A column of a DuckDB table: its name as stored, its SQL type, for a generated column its
    expression (`b AS (a * 2)`: computed from other columns, never imputed), and whether it may
    hold NULL (no NOT NULL constraint)."""

    name: str
    sql_type: str
    generated: str | None = None
    nullable: bool = True

    @property
    def is_numeric(self) -> bool:
        """Whether the column holds numbers (imputed as numbers, within bounds)."""
        return self.generated is None and is_numeric_type(self.sql_type)

    @property
    def kind(self) -> str | None:
        """How the pipeline imputes the column (`column_kind`); None: it cannot (a generated
        column included)."""
        return None if self.generated is not None else column_kind(self.sql_type)


@dataclass(frozen=True)
class TableInfo:
    """A base table of the database (its name and schema as stored), with its columns in order,
    its constraints and its CREATE TABLE statement as DuckDB prints it (`duckdb_tables().sql`)."""

    name: str
    columns: tuple[ColumnInfo, ...]
    schema: str = DEFAULT_SCHEMA
    constraints: tuple[Constraint, ...] = ()
    definition: str = ""

    @property
    def checks(self) -> tuple[str, ...]:
        """The expressions of its CHECK constraints, as DuckDB prints them (`(x >= 0)`)."""
        return tuple(c.expression for c in self.constraints if c.kind == CHECK and c.expression)

    @property
    def identifiers(self) -> frozenset[str]:
        """The columns that are, each on its own, the table's PRIMARY KEY or UNIQUE: identifiers,
        which no imputation can fill (a filled cell would repeat a value or invent one)."""
        return frozenset(
            c.columns[0] for c in self.constraints if c.kind in UNIQUE_KINDS and len(c.columns) == 1
        )

    @property
    def qualified(self) -> str:
        """The canonical name: `table` in schema main, `schema.table` elsewhere."""
        return canonical_name(self.schema, self.name)

    @property
    def sql(self) -> str:
        """The table's quoted, schema-qualified name for SQL."""
        return f"{quote_identifier(self.schema)}.{quote_identifier(self.name)}"

    def column(self, name: str) -> ColumnInfo | None:
        """The column called `name` (exact match first, then case-insensitive, as DuckDB does)."""
        for column in self.columns:
            if column.name == name:
                return column
        folded = [c for c in self.columns if c.name.lower() == name.lower()]
        return folded[0] if len(folded) == 1 else None


@dataclass(frozen=True)
class Fingerprint:
    """Row count and an order-independent content hash of a table (and its column types);
    `order_hash` changes with the rows' storage order too (which orders the rows a fit reads)."""

    rows: int
    content_hash: str
    order_hash: str = ""


def is_numeric_type(sql_type: str) -> bool:
    """Whether a DuckDB type name is a number type the imputer accepts."""
    upper = sql_type.upper()
    return upper in _NUMERIC_TYPES or upper.startswith("DECIMAL")


def type_range(sql_type: str) -> tuple[Decimal, Decimal] | None:
    """The least and greatest value of an integer or DECIMAL type, exactly (None for the
    others, whose range a double holds)."""
    kind = sql_type.upper()
    if kind in _INTEGER_BITS:
        top = 2 ** (_INTEGER_BITS[kind] - 1)
        return Decimal(-top), Decimal(top - 1)
    if kind in _INTEGER_TYPES:
        return Decimal(0), Decimal(2 ** _INTEGER_BITS[kind[1:]] - 1)
    decimal = DECIMAL_TYPE.fullmatch(kind)
    if decimal is None:
        return None
    digits, scale = int(decimal[1]), int(decimal[2])
    with localcontext() as exactly:
        exactly.prec = 100  # DECIMAL(38, s) needs 38 digits, and no rounding
        top = Decimal(10) ** (digits - scale) - Decimal(10) ** -scale
        return -top, top


def column_kind(sql_type: str) -> str | None:
    """How a column of this DuckDB type is imputed: "integer" (TINYINT…HUGEINT, unsigned),
    "float" (FLOAT, DOUBLE, DECIMAL: rounded to its scale when written), "boolean", or
    "categorical" (VARCHAR, ENUM: a label observed in the column); None for the other types
    (dates, times, blobs, nested), which pass through."""
    upper = sql_type.upper()
    if upper in _INTEGER_TYPES:
        return INTEGER
    if is_numeric_type(upper):
        return FLOAT
    if upper == "BOOLEAN":
        return BOOLEAN
    if upper == "VARCHAR" or upper.startswith("ENUM("):
        return CATEGORICAL
    return None


def _is_lock_error(error: duckdb.Error) -> bool:
    text = str(error).lower()
    return "lock" in text and ("conflicting" in text or "could not set" in text)


@contextmanager
def connect(db_path: str | Path, *, read_only: bool) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the DuckDB file (which must exist), translating open errors into clear messages."""
    path = Path(db_path)
    if not path.is_file():
        where = "is a directory, not a DuckDB file" if path.is_dir() else "does not exist"
        if not path.is_absolute():
            where += f" (relative to the working folder, {str(Path.cwd())!r})"
        raise PipelineInputError(
            f"Database file '{path}' {where}. Give the path of an existing DuckDB file "
            f"({setting('db_path')}); `tdm demo` creates one to try."
        )
    try:
        con = duckdb.connect(str(path), read_only=read_only)
    except duckdb.Error as error:
        if _is_lock_error(error):
            raise WarehouseBusyError(busy_message(path, error, read_only=read_only)) from None
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
    """Within it, `frame` is a view of `con` under a fresh name `<prefix>_<hex>`, yielded.

    When the block fails inside a transaction, unregistering fails too ("transaction is
    aborted"): that second error is dropped, so the block's own error is the one raised.
    """
    view = f"{prefix}_{uuid.uuid4().hex}"
    con.register(view, frame)
    try:
        yield view
    except BaseException:
        with suppress(duckdb.Error):
            con.unregister(view)
        raise
    con.unregister(view)


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0].rstrip(".!") if str(error).strip() else repr(error)


def _lookup(
    con: duckdb.DuckDBPyConnection, catalog: str, column: str, schema: str | None, name: str
) -> tuple[str, str] | None:
    """(schema, name) as stored of the object of `catalog` called `schema.name`, if any
    (case-insensitively, an exact spelling first; no schema: the default schema). A schema
    named like a database (`_check_schema_name`) is refused."""
    if schema is not None:
        _check_schema_name(con, schema, name)
    rows = con.execute(
        f"SELECT schema_name, {column} FROM {catalog}() "
        "WHERE database_name = current_database() "
        "AND lower(schema_name) = lower(coalesce(?, current_schema())) "
        f"AND lower({column}) = lower(?) ORDER BY {column} = ? DESC",
        [schema, name, name],
    ).fetchall()
    return (rows[0][0], rows[0][1]) if rows else None


def _check_schema_name(con: duckdb.DuckDBPyConnection, schema: str, name: str) -> None:
    """Refuse the schema `schema` when a database of the connection has its name (the file's
    own, named after its stem, or DuckDB's `system` and `temp`): DuckDB cannot tell the two
    apart in `schema.name`, and refuses such a name as ambiguous."""
    databases = con.execute(
        "SELECT database_name, path FROM duckdb_databases() WHERE lower(database_name) = lower(?)",
        [schema],
    ).fetchall()
    if not databases or schema.lower() == DEFAULT_SCHEMA or not schema_exists(con, schema):
        return  # no such schema: `_find` may still find a table named with the dot
    database, path = databases[0]
    own = f" (DuckDB names the database of '{path}' after the file)" if path else ""
    raise PipelineInputError(
        f'Table "{schema}.{name}": its schema "{schema}" has the name of the database '
        f'"{database}"{own}, so DuckDB cannot tell the two apart in SQL (it refuses '
        f'"{schema}.{name}" as ambiguous). Give the file another name, or use a table of '
        "another schema."
    )


def _find(
    con: duckdb.DuckDBPyConnection, catalog: str, column: str, name: str
) -> tuple[str, str] | None:
    """`name` split at its first dot (`tasks.warehouse.names`); when that finds nothing, the
    whole name as one of the default schema (a table called `a.b` made before schemas were
    supported)."""
    parsed = parse_table_name(name)
    found = _lookup(con, catalog, column, parsed.schema, parsed.table)
    if found is None and parsed.schema is not None:
        found = _lookup(con, catalog, column, None, name)
    return found


def find_table(
    con: duckdb.DuckDBPyConnection, name: str, *, whole_name: bool = True
) -> TableInfo | None:
    """Look up a base table called `name` or `schema.name` (case-insensitively, like DuckDB);
    `whole_name=False`: only as split at the first dot (a target, created as so split)."""
    if whole_name:
        found = _find(con, "duckdb_tables", "table_name", name)
    else:
        parsed = parse_table_name(name)
        found = _lookup(con, "duckdb_tables", "table_name", parsed.schema, parsed.table)
    return describe_table(con, found[1], schema=found[0]) if found else None


def find_view(con: duckdb.DuckDBPyConnection, name: str) -> str | None:
    """The canonical name of a view called `name` or `schema.name`, if there is one."""
    found = _find(con, "duckdb_views", "view_name", name)
    return canonical_name(*found) if found else None


def schema_exists(con: duckdb.DuckDBPyConnection, schema: str) -> bool:
    """Whether the database has a schema called `schema` (case-insensitively)."""
    rows = con.execute(
        "SELECT 1 FROM duckdb_schemas() WHERE database_name = current_database() "
        "AND lower(schema_name) = lower(?)",
        [schema],
    ).fetchall()
    return bool(rows)


def list_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Canonical names of the base tables of every schema of the database, sorted."""
    rows = con.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() "
        "WHERE database_name = current_database() "
        "ORDER BY schema_name <> 'main', schema_name, table_name"
    ).fetchall()
    return [canonical_name(schema, table) for schema, table in rows]


def describe_table(
    con: duckdb.DuckDBPyConnection, name: str, *, schema: str = DEFAULT_SCHEMA
) -> TableInfo:
    """The columns of the base table `name` of `schema` (stored names), in table order, its
    constraints and its CREATE TABLE statement."""
    where = "WHERE database_name = current_database() AND schema_name = ? AND table_name = ?"
    rows = con.execute(
        "SELECT column_name, data_type, CASE WHEN is_generated THEN generation_expression END, "
        f"is_nullable FROM duckdb_columns() {where} ORDER BY column_index",
        [schema, name],
    ).fetchall()
    constraints = con.execute(
        "SELECT constraint_type, constraint_text, constraint_column_names, expression, "
        f"referenced_table, referenced_column_names FROM duckdb_constraints() {where} "
        "ORDER BY constraint_index",
        [schema, name],
    ).fetchall()
    definition = con.execute(f"SELECT sql FROM duckdb_tables() {where}", [schema, name])
    return TableInfo(
        name=name,
        columns=tuple(ColumnInfo(*row) for row in rows),
        schema=schema,
        constraints=tuple(
            Constraint(
                kind,
                text,
                tuple(dict.fromkeys(columns)),  # a CHECK lists a column per use
                expression,
                (referenced, tuple(keys)) if referenced else None,
            )
            for kind, text, columns, expression, referenced, keys in constraints
        ),
        definition=str(definition.fetchall()[0][0]),
    )


def fingerprint_table(con: duckdb.DuckDBPyConnection, table: TableInfo) -> Fingerprint:
    """Row count, content hash (independent of row order) and order hash of `table`, computed
    inside DuckDB."""
    quoted = ", ".join(quote_identifier(c.name) for c in table.columns)
    # Sum and xor of per-row hashes: order-independent; the sum keeps duplicate rows distinct.
    # With each row's storage position (rowid) in its hash, the order counts too.
    sql = (
        f"SELECT count(*), coalesce(sum(hash({quoted})), 0)::VARCHAR, "
        f"coalesce(bit_xor(hash({quoted})), 0)::VARCHAR, "
        f"coalesce(sum(hash(rowid, {quoted})), 0)::VARCHAR FROM {table.sql}"
    )
    rows, total, xor, ordered = con.execute(sql).fetchall()[0]
    schema = "\x1f".join(f"{c.name}\x1e{c.sql_type}" for c in table.columns)
    digest = hashlib.sha256(f"{schema}|{rows}|{total}|{xor}".encode()).hexdigest()
    order = hashlib.sha256(f"{digest}|{ordered}".encode()).hexdigest()
    return Fingerprint(rows=int(rows), content_hash=digest[:32], order_hash=order[:32])


def written_state(con: duckdb.DuckDBPyConnection, table: TableInfo) -> str:
    """A hash of the table `table` as a run wrote it: its contents and their order
    (`fingerprint_table`: committed rows only, as rows a transaction has not committed yet have
    rowids of their own), its definition (constraints, defaults) and its columns' comments."""
    written = fingerprint_table(con, table)
    state = [written.content_hash, written.order_hash, table.definition]
    state += [f"{name}\x1e{comment}" for name, comment in column_comments(con, table)]
    return hashlib.sha256("\x1f".join(state).encode()).hexdigest()[:32]


def column_comments(con: duckdb.DuckDBPyConnection, table: TableInfo) -> list[tuple[str, str]]:
    """The columns of `table` that have a comment, with it, in column order."""
    return con.execute(
        "SELECT column_name, comment FROM duckdb_columns() WHERE database_name = "
        "current_database() AND schema_name = ? AND table_name = ? AND comment IS NOT NULL "
        "AND comment <> '' ORDER BY column_index",
        [table.schema, table.name],
    ).fetchall()


def columns_sql(
    names: Sequence[str], table: TableInfo | None = None, key: str | None = None
) -> str:
    """A comma-separated list of quoted identifiers, to read into pandas: the key column `key`
    as its text in DuckDB (exact for every type, HUGEINT and DECIMAL included, and what
    `key::VARCHAR` finds), and with `table`, a UHUGEINT column (which DuckDB cannot hand to
    NumPy) as DOUBLE, each under its name. The frame's values only guide the imputer; observed
    cells are copied in their own type."""

    def read(name: str) -> str:
        column = table.column(name) if table is not None else None
        quoted = quote_identifier(name)
        if name == key:
            return f"{quoted}::VARCHAR AS {quoted}"
        if column is not None and column.sql_type.upper() == "UHUGEINT":
            return f"{quoted}::DOUBLE AS {quoted}"
        return quoted

    return ", ".join(read(n) for n in names)
