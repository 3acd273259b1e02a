"""Where a run may write: the checks on target tables, made before anything is imputed and
again inside the write transaction.

A target may not be a view, lie in a schema that does not exist, or replace a table the
pipeline did not write unless asked to (`replace_target`). A table the pipeline wrote is named as
a target by a row of `tdm_lineage` and still carries that run's marker as its comment; a table
made again under that name, by hand, does not. (Targets written before the marker existed are
known by the lineage row alone, until a run writes them again.) In a warehouse config no target
may name a listed table, another entry's target, a `tdm_*` table or a view: such a config is
refused as a whole.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
from prefect import task
from prefect.cache_policies import NO_CACHE

from schemas.lineage import LINEAGE_TABLE, RECORD_COLUMNS
from schemas.warehouse import WarehouseConfig
from tasks.errors import PipelineInputError, setting
from tasks.retry import warehouse_task
from tasks.validate import ImputationPlan
from tasks.warehouse.constraints import UNIQUE_KINDS
from tasks.warehouse.names import (
    canonical_name,
    parse_table_name,
    quote_identifier,
    quote_table,
)
from tasks.warehouse.tables import TableInfo, connect, find_table, find_view, schema_exists

__all__ = [
    "check_record_tables",
    "check_same_columns",
    "check_target_table",
    "check_target_writable",
    "check_warehouse_targets",
    "marked_run",
    "table_comment",
    "target_marker",
    "written_by_pipeline",
]


def check_target_table(
    con: duckdb.DuckDBPyConnection, plan: ImputationPlan, *, replacing: bool = True
) -> bool:
    """Whether the target table exists already (and may be replaced); refuse a target that is a
    view, lies in a missing schema, or is a table the pipeline did not write (unless
    `plan.replace_target`, or the target is the source and `plan.replace_source`); and, when
    the run would write it anew (`replacing`: not an append), one another table's FOREIGN KEY
    references (`_check_replaceable`)."""
    check_record_tables(con)
    target = plan.target_table
    schema = parse_table_name(target).schema
    if schema is not None and not schema_exists(con, schema):
        raise PipelineInputError(
            f'The target "{target}" lies in the schema "{schema}", which does not exist in the '
            f'database (a name with a dot is `schema.table`). Create it (CREATE SCHEMA "{schema}")'
            f" or choose another target ({setting('target_table')})."
        )
    if find_view(con, target) is not None:
        raise PipelineInputError(
            f'The target "{target}" is an existing view; the pipeline writes tables '
            f"only. Choose another target ({setting('target_table')})."
        )
    existing = find_table(con, target, whole_name=False)
    if existing is None:
        return False
    if plan.replace_source or plan.replace_target or written_by_pipeline(con, target):
        if plan.replace_source:
            _check_updatable(con, existing, plan)
        elif replacing:
            _check_replaceable(con, existing)
        return True
    raise PipelineInputError(
        f'The target table "{existing.qualified}" already exists and was not written by this '
        f"pipeline (no row of {LINEAGE_TABLE} names it as a target, or the table does not carry "
        "the marker comment such a run left on it), so it is left as it is and "
        f'nothing was written for table "{plan.source_table}". Choose another target '
        f"({setting('target_table')}), or set replace_target to replace it "
        f"({setting('replace_target')})."
    )


def _foreign_keys(
    con: duckdb.DuckDBPyConnection, table: TableInfo
) -> list[tuple[str, list[str], list[str]]]:
    """The FOREIGN KEYs of other tables that reference `table` (a foreign key never crosses
    schemas): each referencing table, its columns and the referenced columns."""
    return con.execute(
        "SELECT table_name, constraint_column_names, referenced_column_names FROM "
        "duckdb_constraints() WHERE database_name = current_database() AND constraint_type = "
        "'FOREIGN KEY' AND schema_name = ? AND lower(referenced_table) = lower(?) "
        "AND table_name <> ? ORDER BY table_name",
        [table.schema, table.name, table.name],
    ).fetchall()


def _check_replaceable(con: duckdb.DuckDBPyConnection, table: TableInfo) -> None:
    """Refuse to write the existing `table` anew while another table's FOREIGN KEY references
    it: DuckDB drops no table another one references."""
    keys = _foreign_keys(con, table)
    if keys:
        children = ", ".join(
            dict.fromkeys(f'"{canonical_name(table.schema, child)}"' for child, _, _ in keys)
        )
        raise PipelineInputError(
            f'The target table "{table.qualified}" would be written anew, but {children} '
            "references it with a FOREIGN KEY, and DuckDB drops no table another one "
            "references, so nothing was written. Drop that foreign key, or choose another "
            f"target ({setting('target_table')})."
        )


def _check_updatable(
    con: duckdb.DuckDBPyConnection, table: TableInfo, plan: ImputationPlan
) -> None:
    """Refuse to update `table` in place when a row to update is referenced by another table's
    FOREIGN KEY and has a missing cell in an indexed column (CREATE INDEX, PRIMARY KEY or
    UNIQUE): DuckDB updates an indexed column by deleting and inserting the row, which that
    foreign key forbids."""
    imputed = [name for name in plan.columns if plan.missing.get(name, 0)]
    indexed = _indexed_columns(con, table, imputed)
    keys = _foreign_keys(con, table) if indexed else []
    if not keys:
        return
    missing = " OR ".join(f"p.{quote_identifier(name)} IS NULL" for name in indexed)
    blocked = []
    for child, columns, referenced in keys:
        on = " AND ".join(
            f"c.{quote_identifier(a)} = p.{quote_identifier(b)}"
            for a, b in zip(columns, referenced, strict=True)
        )
        child_sql = quote_table(canonical_name(table.schema, child))
        rows = con.execute(
            f"SELECT count(*) FROM {child_sql} AS c JOIN {table.sql} AS p ON {on} WHERE {missing}"
        ).fetchall()[0][0]
        if rows:
            blocked.append(f'{rows} of "{canonical_name(table.schema, child)}"')
    if blocked:
        listed = ", ".join(f'"{name}" ({why})' for name, why in indexed.items())
        raise PipelineInputError(
            f'Table "{table.qualified}" cannot be updated in place: DuckDB updates an indexed '
            f"column ({listed}) by deleting and inserting the row, and rows that FOREIGN KEYs "
            f"reference would be updated ({', '.join(blocked)} referencing rows), which the "
            "foreign keys forbid, so nothing was written. Impute into a target table (without "
            f"{setting('replace_source')}), or pass those columns through "
            f"({setting('pass_through')})."
        )


def _indexed_columns(
    con: duckdb.DuckDBPyConnection, table: TableInfo, names: list[str]
) -> dict[str, str]:
    """Those of `names` that an index of `table` covers, each with the index (its name, or
    PRIMARY KEY or UNIQUE); a name inside an index's expression counts, a function's not."""
    indexes = con.execute(
        "SELECT index_name, expressions FROM duckdb_indexes() WHERE database_name = "
        "current_database() AND schema_name = ? AND table_name = ?",
        [table.schema, table.name],
    ).fetchall()
    found: dict[str, str] = {}
    for name in names:
        word = re.escape(name)
        mention = re.compile(rf'(?<![\w"]){word}(?![\w"(])|"{word}"', re.IGNORECASE)
        for index, expressions in indexes:
            if mention.search(str(expressions)):
                found.setdefault(name, f"index {index}")
        for constraint in table.constraints:
            if constraint.kind in UNIQUE_KINDS and name in constraint.columns:
                found.setdefault(name, constraint.kind)
    return found


def check_same_columns(con: duckdb.DuckDBPyConnection, plan: ImputationPlan) -> None:
    """Refuse to append to the target when the source's columns are no longer the target's
    (names, order and types), naming each difference."""
    source = find_table(con, plan.source_table)
    target = find_table(con, plan.target_table)
    assert source is not None and target is not None
    before = {c.name: c.sql_type for c in target.columns}
    now = {c.name: c.sql_type for c in source.columns}
    if list(before.items()) == list(now.items()):
        return
    changes = [f'"{n}" {t} added' for n, t in now.items() if n not in before]
    changes += [f'"{n}" {t} dropped' for n, t in before.items() if n not in now]
    changes += [
        f'"{n}" {before[n]} now {t}' for n, t in now.items() if n in before and before[n] != t
    ]
    if not changes:
        changes = ["the columns' order changed"]
    raise PipelineInputError(
        f'Table "{plan.source_table}" no longer has the columns of its target '
        f'"{plan.target_table}" ({"; ".join(changes)}), so new rows cannot be appended: refit '
        "with the old imputations rewritten (TDM_REWRITE_ON_REFIT=true with --refit)."
    )


def check_record_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Refuse a database whose `tdm_lineage` or `tdm_imputed_cells` is not the pipeline's record
    (it lacks columns the record has had from the start): every run adds rows to both."""
    for name, columns in RECORD_COLUMNS.items():
        found = find_table(con, name, whole_name=False)
        if found is None:
            continue
        lacking = sorted(columns - {column.name.lower() for column in found.columns})
        if lacking:
            listed = ", ".join(repr(c) for c in lacking)
            raise PipelineInputError(
                f'The table "{found.qualified}" is not the record this pipeline keeps of its runs '
                f"(it lacks {listed}), and every run adds rows to it, so nothing was run or "
                "written. Rename that table, or use another database file."
            )


def target_marker(run_id: str) -> str:
    """The comment a run leaves on the target table it writes."""
    return f"written by tdm-impute, run {run_id}"


def marked_run(marker: str | None) -> str | None:
    """The run id a target marker (`target_marker`) names; None for another comment."""
    prefix = target_marker("")
    return marker[len(prefix) :] if marker and marker.startswith(prefix) else None


def table_comment(con: duckdb.DuckDBPyConnection, table: str) -> str | None:
    """The comment of the table `table` (found as a target is, `find_table`), if any."""
    found = find_table(con, table, whole_name=False)
    if found is None:
        return None
    rows = con.execute(
        "SELECT comment FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = ? AND table_name = ?",
        [found.schema, found.name],
    ).fetchall()
    return rows[0][0] if rows else None


def written_by_pipeline(con: duckdb.DuckDBPyConnection, target: str) -> bool:
    """Whether the table `target` is one the pipeline wrote: a row of `tdm_lineage` names it as
    its target, and the table carries the marker of such a row (unless all of them predate
    markers)."""
    lineage = find_table(con, LINEAGE_TABLE, whole_name=False)
    if lineage is None:
        return False
    marker = "target_marker" if lineage.column("target_marker") is not None else "NULL"
    key = parse_table_name(target).key
    rows = con.execute(f"SELECT DISTINCT target_table, {marker} FROM {LINEAGE_TABLE}").fetchall()
    named = [found for name, found in rows if name and parse_table_name(name).key == key]
    if not named:
        return False
    markers = {found for found in named if found is not None}
    return not markers or table_comment(con, target) in markers


@warehouse_task("check-target")
def check_target_writable(db_path: str, plan: ImputationPlan) -> bool:
    """`check_target_table` on a read-only connection, before a table is imputed."""
    with connect(db_path, read_only=True) as con:
        return check_target_table(con, plan)


@task(name="check-warehouse-targets", cache_policy=NO_CACHE)
def check_warehouse_targets(db_path: str, config: WarehouseConfig, target_suffix: str) -> None:
    """Refuse, naming the entries, a config where a target (explicit or default) names a
    listed table, another entry's target, a `tdm_*` table or a view of the database."""
    problems = config.target_clashes(target_suffix)
    if Path(db_path).is_file():  # else every table fails on its own, saying the file is missing
        with connect(db_path, read_only=True) as con:
            for number, (entry, target) in enumerate(
                zip(config.tables, config.targets(target_suffix), strict=True), 1
            ):
                view = find_view(con, target) if target else None
                if view is not None:
                    problems.append(
                        f'entry {number} ("{entry.table}") writes to "{target}", which is a view'
                    )
    if problems:
        raise PipelineInputError(
            f"The warehouse config's targets clash, so nothing was run: {'; '.join(problems)}. "
            "Give each entry a target of its own (`target:`) that names no listed table, view "
            "or tdm_* table."
        )
