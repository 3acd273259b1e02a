"""Table names as the pipeline takes them: `table` (schema main) or `schema.table`.

A name is split at its first dot: `sales` is the table `sales` of the default schema (`main`),
`s.sales` the table `sales` of the schema `s`, `main.a.b` the table `a.b` of `main`. The
canonical form of a name (what plans, results and lineage rows hold) is the bare table name for
a table of `main` whose name has no dot, and `schema.table` otherwise, so that splitting it again
gives back the same table. DuckDB names are case-insensitive: two names are the same table when
their lowercased parts are equal. A dot inside a quoted name (`"my.schema".t`) is not supported.
"""

from __future__ import annotations

from dataclasses import dataclass

from tasks.errors import PipelineInputError

__all__ = [
    "DEFAULT_SCHEMA",
    "DEFAULT_TARGET_SUFFIX",
    "RESERVED_PREFIX",
    "TableName",
    "canonical_name",
    "is_reserved",
    "parse_table_name",
    "quote_identifier",
    "quote_table",
    "same_table",
]

DEFAULT_SCHEMA = "main"
DEFAULT_TARGET_SUFFIX = "_imputed"
"""Default target table name: the source name plus this suffix."""
RESERVED_PREFIX = "tdm_"
"""Tables whose name starts with this are the pipeline's own (lineage, imputed cells, staging)."""


@dataclass(frozen=True)
class TableName:
    """A table's schema (None: the default schema) and its name within the schema."""

    schema: str | None
    table: str

    @property
    def key(self) -> tuple[str, str]:
        """What identifies the table in DuckDB: both parts lowercased, the schema filled in."""
        return ((self.schema or DEFAULT_SCHEMA).lower(), self.table.lower())

    @property
    def canonical(self) -> str:
        """The name as plans and lineage rows hold it (see the module's docstring)."""
        return canonical_name(self.schema or DEFAULT_SCHEMA, self.table)

    @property
    def sql(self) -> str:
        """The quoted name for SQL: `"table"` or `"schema"."table"`."""
        if self.schema is None:
            return quote_identifier(self.table)
        return f"{quote_identifier(self.schema)}.{quote_identifier(self.table)}"


def parse_table_name(text: str) -> TableName:
    """Split `text` at its first dot into schema and table (no dot: the default schema)."""
    quote_identifier(text)  # refuses empty names and NUL characters
    schema, dot, table = text.partition(".")
    if not dot:
        return TableName(None, text)
    return TableName(_part(schema, text), _part(table, text))


def quote_identifier(name: str) -> str:
    """Quote a DuckDB identifier: double quotes around it, embedded double quotes doubled."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise PipelineInputError(
            f"{name!r} is not a usable table or column name: names must be non-empty text "
            "without NUL characters."
        )
    return '"' + name.replace('"', '""') + '"'


def _part(part: str, text: str) -> str:
    """`part` of the name `text`, refused when it is empty (`.t`, `s.`)."""
    if not part:
        raise PipelineInputError(
            f'"{text}" is not a usable table name: write it `table` or `schema.table`, '
            "with neither part empty."
        )
    return part


def canonical_name(schema: str, table: str) -> str:
    """The canonical text of the table `table` of `schema` (see the module's docstring)."""
    if schema.lower() == DEFAULT_SCHEMA and "." not in table:
        return table
    return f"{schema}.{table}"


def quote_table(text: str) -> str:
    """The table named `text` (split at its first dot), quoted for SQL."""
    return parse_table_name(text).sql


def same_table(first: str, second: str) -> bool:
    """Whether two names denote the same table (case-insensitively, as DuckDB compares)."""
    return parse_table_name(first).key == parse_table_name(second).key


def is_reserved(text: str) -> bool:
    """Whether the table part of `text` starts with the pipeline's own prefix `tdm_`."""
    return parse_table_name(text).table.lower().startswith(RESERVED_PREFIX)
