"""Incremental runs: which source rows are new since the last run.

A row is new when its key is not in the target yet (`key`), or when its watermark column is
above the highest watermark in the target (`watermark`, when no key is given): the target holds
exactly the rows earlier runs wrote, so it is the state. They are appended by `tasks.write`.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd

from tasks.errors import PipelineInputError, setting
from tasks.partitions import TableProfile
from tasks.warehouse.names import quote_identifier, quote_table
from tasks.warehouse.tables import columns_sql, find_table, is_numeric_type

__all__ = ["NewRows", "StaleRows", "check_watermark", "read_new_rows", "stale_rows", "target_rows"]


@dataclass(frozen=True)
class NewRows:
    """The source rows not in the target yet, indexed by rowid, and the target's row count.
    `late_rows`, by watermark only: source rows at or below the target's highest watermark
    beyond the target's count, rows that arrived after the run that passed their watermark and
    that a watermark never reads (0 when there are none, or with a key)."""

    frame: pd.DataFrame
    rows_before: int
    late_rows: int = 0


def target_rows(con: duckdb.DuckDBPyConnection, target: str) -> int | None:
    """The target's row count, or None when it does not exist."""
    if find_table(con, target) is None:
        return None
    return int(con.execute(f"SELECT count(*) FROM {quote_table(target)}").fetchall()[0][0])


_WATERMARK_TYPES = ("DATE", "TIME", "VARCHAR")
"""Besides numbers, the types a watermark may have (TIME and TIMESTAMP... both start TIME)."""


def check_watermark(con: duckdb.DuckDBPyConnection, profile: TableProfile, watermark: str) -> None:
    """Refuse a watermark column that is missing, imputed, has NULLs, or is of a type whose
    values do not grow with new rows (numbers, dates, times and text are taken)."""
    plan = profile.plan
    column = profile.table.column(watermark)
    if column is None:
        raise PipelineInputError(
            f'Table "{plan.source_table}" has no watermark column "{watermark}".'
        )
    kind = column.sql_type.upper()
    if not (is_numeric_type(kind) or kind.startswith(_WATERMARK_TYPES)) or kind.endswith("]"):
        raise PipelineInputError(
            f'The watermark column "{column.name}" of table "{plan.source_table}" is '
            f"{column.sql_type}, whose values cannot mark the rows added since a run (a run "
            "imputes the rows above the target's highest watermark): choose a number, date, "
            f"timestamp or text column ({setting('watermark')}), or a key ({setting('key')})."
        )
    if column.name in plan.columns:
        raise PipelineInputError(
            f'The watermark column "{watermark}" of table "{plan.source_table}" is named among '
            "the columns to impute; a watermark tells new rows from old ones and is never "
            f"imputed: leave it out of them ({setting('columns')})."
        )
    nulls = con.execute(
        f"SELECT count(*) FROM {profile.table.sql} WHERE {quote_identifier(column.name)} IS NULL"
    ).fetchall()[0][0]
    if nulls:
        raise PipelineInputError(
            f'The watermark column "{watermark}" of table "{plan.source_table}" has {nulls} '
            "NULLs; every row needs a watermark to be imputed once."
        )


def read_new_rows(
    con: duckdb.DuckDBPyConnection,
    profile: TableProfile,
    watermark: str | None,
    *,
    every_row: bool = False,
) -> NewRows:
    """The source rows the target does not hold yet (all of them when there is no target, or
    with `every_row`, for a target written anew), in storage order, indexed by rowid; by key
    when the plan has one, else by `watermark`."""
    plan = profile.plan
    wanted = ([plan.key] if plan.key else []) + list(plan.columns)
    before = None if every_row else target_rows(con, plan.target_table)
    where, late = "", 0
    if before:
        target = quote_table(plan.target_table)
        if plan.key is not None:
            key = quote_identifier(plan.key)
            where = f"WHERE s.{key} NOT IN (SELECT {key} FROM {target} WHERE {key} IS NOT NULL)"
        elif watermark is not None:
            mark = quote_identifier(watermark)
            highest = f"(SELECT max({mark}) FROM {target})"
            where = f"WHERE s.{mark} > {highest}"
            passed = con.execute(
                f"SELECT count(*) FROM {profile.table.sql} AS s WHERE s.{mark} <= {highest}"
            ).fetchall()[0][0]
            late = max(int(passed) - before, 0)
        else:
            raise PipelineInputError(
                f'An incremental run of table "{plan.source_table}" needs a key or a watermark '
                "column to tell new rows from those already imputed."
            )
    frame = con.execute(
        f"SELECT s.rowid AS __tdm_rowid, {columns_sql(wanted, profile.table, plan.key)} "
        f"FROM {profile.table.sql} AS s {where} ORDER BY s.rowid"
    ).df()
    frame.index = pd.Index(frame.pop("__tdm_rowid").to_numpy(dtype=np.int64), name="rowid")
    return NewRows(frame=frame, rows_before=before or 0, late_rows=late)


@dataclass(frozen=True)
class StaleRows:
    """Rows an append keeps in the target that no longer match the source: `changed`, rows
    whose observed source cells differ from the target's (edited, or observed since they were
    imputed), and `deleted`, target rows whose key the source no longer holds; a few values of
    each one's `key` column, as text."""

    key: str
    changed: int
    deleted: int
    changed_keys: tuple[str, ...]
    deleted_keys: tuple[str, ...]

    def describe(self) -> str:
        """E.g. `1 row whose observed cells changed ("id" 5); 2 rows deleted from the source
        ("id" 3, 10)`, the parts that apply; empty when none does."""

        def part(n: int, what: str, keys: tuple[str, ...]) -> str:
            more = ", ..." if n > len(keys) else ""
            return f'{n} row{"s" * (n != 1)} {what} ("{self.key}" {", ".join(keys)}{more})'

        parts = []
        if self.changed:
            parts.append(part(self.changed, "whose observed cells changed", self.changed_keys))
        if self.deleted:
            parts.append(part(self.deleted, "deleted from the source", self.deleted_keys))
        return "; ".join(parts)


def stale_rows(con: duckdb.DuckDBPyConnection, profile: TableProfile, shown: int = 3) -> StaleRows:
    """The target's rows that no longer match the source (`StaleRows`), matched by the plan's
    key; the source's columns are the target's (`tasks.targets.check_same_columns`)."""
    plan = profile.plan
    assert plan.key is not None
    key = quote_identifier(plan.key)
    target = quote_table(plan.target_table)
    differs = " OR ".join(
        f"(s.{c} IS NOT NULL AND s.{c} IS DISTINCT FROM t.{c})"
        for c in (quote_identifier(column.name) for column in profile.table.columns)
        if c != key
    )
    changed, changed_keys = con.execute(
        f"SELECT count(*), list(s.{key}::VARCHAR ORDER BY s.{key})[1:{shown}] "
        f"FROM {profile.table.sql} AS s JOIN {target} AS t ON s.{key} = t.{key} "
        f"WHERE {differs or 'false'}"
    ).fetchall()[0]
    deleted, deleted_keys = con.execute(
        f"SELECT count(*), list(t.{key}::VARCHAR ORDER BY t.{key})[1:{shown}] FROM {target} AS t "
        f"WHERE t.{key} NOT IN (SELECT {key} FROM {profile.table.sql} WHERE {key} IS NOT NULL)"
    ).fetchall()[0]
    return StaleRows(
        plan.key, int(changed), int(deleted), tuple(changed_keys or ()), tuple(deleted_keys or ())
    )
