"""Incremental runs: which source rows are new since the last run, and appending them.

A row is new when its key is not in the target yet (`key`), or when its watermark column is
above the highest watermark in the target (`watermark`, when no key is given): the target holds
exactly the rows earlier runs wrote, so it is the state. Rows of the target are never rewritten
by an append; a refit that rewrites them replaces the target whole (`AppendWrite(replace=True)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace as dataclass_replace
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from tasks.cells import add_checks, filled_columns, write_checks
from tasks.errors import PipelineError, PipelineInputError
from tasks.lineage import LineageRecord
from tasks.load import SourceTable
from tasks.models import ModelFolder, NewModel, insert_model
from tasks.names import quote_table
from tasks.partitions import TableProfile
from tasks.quality import CheckOutcome
from tasks.results import WriteResult
from tasks.staging import insert_imputed_rows
from tasks.validate import ImputationPlan
from tasks.warehouse import columns_sql, find_table, quote_identifier
from tasks.write import (
    check_source_unchanged,
    ensure_record_tables,
    insert_lineage,
    record_imputed_cells,
    summarise_write,
    transaction,
)

__all__ = ["AppendWrite", "NewRows", "check_watermark", "read_new_rows", "target_rows"]


@dataclass(frozen=True)
class NewRows:
    """The source rows not in the target yet, indexed by rowid, and the target's row count."""

    frame: pd.DataFrame
    rows_before: int


def target_rows(con: duckdb.DuckDBPyConnection, target: str) -> int | None:
    """The target's row count, or None when it does not exist."""
    if find_table(con, target) is None:
        return None
    return int(con.execute(f"SELECT count(*) FROM {quote_table(target)}").fetchall()[0][0])


def check_watermark(con: duckdb.DuckDBPyConnection, profile: TableProfile, watermark: str) -> None:
    """Refuse a watermark column that is missing, imputed, or has NULLs."""
    plan = profile.plan
    column = profile.table.column(watermark)
    if column is None:
        raise PipelineInputError(
            f'Table "{plan.source_table}" has no watermark column "{watermark}".'
        )
    if watermark in plan.columns:
        raise PipelineInputError(
            f'The watermark column "{watermark}" of table "{plan.source_table}" is one of the '
            "columns to impute; pass it through (or name the columns to impute)."
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
    where = ""
    if before:
        target = quote_table(plan.target_table)
        if plan.key is not None:
            key = quote_identifier(plan.key)
            where = f"WHERE s.{key} NOT IN (SELECT {key} FROM {target} WHERE {key} IS NOT NULL)"
        elif watermark is not None:
            mark = quote_identifier(watermark)
            where = f"WHERE s.{mark} > (SELECT max({mark}) FROM {target})"
        else:
            raise PipelineInputError(
                f'An incremental run of table "{plan.source_table}" needs a key or a watermark '
                "column to tell new rows from those already imputed."
            )
    frame = con.execute(
        f"SELECT s.rowid AS __tdm_rowid, {columns_sql(wanted, profile.table)} "
        f"FROM {profile.table.sql} AS s {where} ORDER BY s.rowid"
    ).df()
    frame.index = pd.Index(frame.pop("__tdm_rowid").to_numpy(dtype=np.int64), name="rowid")
    return NewRows(frame=frame, rows_before=before or 0)


class AppendWrite:
    """One transaction: the new rows into the target (created, or replaced when `replace`),
    their imputed cells, the new model version if one was fitted, and the lineage row; the
    source is checked unchanged first. A failure leaves the warehouse as it was: a model file
    written to the model `folder` is removed again."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        db_path: str,
        *,
        replace: bool,
        folder: ModelFolder | None = None,
    ) -> None:
        self.con = con
        self.db_path = db_path
        self.replace = replace
        self.folder = folder
        self.checks: list[CheckOutcome] = []

    def commit(
        self,
        plan: ImputationPlan,
        source: SourceTable,
        new: NewRows,
        imputed: pd.DataFrame,
        lineage: LineageRecord,
        model: NewModel | None,
        version: int,
    ) -> tuple[WriteResult, LineageRecord]:
        """Write it all, in one transaction; `version` is the model version of the cells (and of
        `model`, when one was fitted). Returns what was written and `lineage` with the write's
        checks added, as stored."""
        con = self.con
        part = SourceTable(
            db_path=source.db_path, table=source.table, fingerprint=source.fingerprint,
            frame=new.frame,
        )  # fmt: skip
        files: list[Path] = []
        try:
            with transaction(con, plan.target_table, self.db_path):
                check_source_unchanged(con, source)
                exists = find_table(con, plan.target_table) is not None
                lineage = self._write(plan, part, new, imputed, lineage, exists, version)
                if model is not None:
                    stored, file = insert_model(con, model, self.folder)
                    files += [file] if file is not None else []
                    if stored != version:
                        raise PipelineError(
                            f'Another run stored a model of table "{plan.target_table}" '
                            f"meanwhile (version {stored - 1}); nothing was written. Run again."
                        )
                insert_lineage(con, lineage)
        except BaseException:
            for file in files:  # the transaction is undone: so is its model file
                file.unlink(missing_ok=True)
            raise
        written = summarise_write(self.db_path, lineage, replaced_existing=self.replace and exists)
        return written, lineage

    def _write(
        self,
        plan: ImputationPlan,
        part: SourceTable,
        new: NewRows,
        imputed: pd.DataFrame,
        lineage: LineageRecord,
        exists: bool,
        version: int,
    ) -> LineageRecord:
        """The target's rows and the record of imputed cells; `lineage` with the checks."""
        con = self.con
        target = quote_table(plan.target_table)
        ensure_record_tables(con)
        if self.replace or not exists:
            con.execute(
                f"CREATE OR REPLACE TABLE {target} AS "
                f"SELECT * FROM {quote_table(plan.source_table)} LIMIT 0"
            )
        else:
            _check_same_columns(con, plan)
        offset = 0 if self.replace else new.rows_before
        filled = filled_columns(part, plan)
        observed = 0
        if len(new.frame):
            observed = insert_imputed_rows(con, plan, part, imputed, filled, target)
        self.checks = write_checks(filled, observed)
        lineage = dataclass_replace(lineage, quality=add_checks(lineage.quality, self.checks))
        record_imputed_cells(con, part, plan, lineage.run.run_id, offset=offset,
                             model_version=version)  # fmt: skip
        return lineage


def _check_same_columns(con: duckdb.DuckDBPyConnection, plan: ImputationPlan) -> None:
    """Refuse to append when the source's columns are no longer the target's."""
    source = find_table(con, plan.source_table)
    target = find_table(con, plan.target_table)
    assert source is not None and target is not None
    before = [(c.name, c.sql_type) for c in target.columns]
    now = [(c.name, c.sql_type) for c in source.columns]
    if before != now:
        raise PipelineInputError(
            f'Table "{plan.source_table}" no longer has the columns of its target '
            f'"{plan.target_table}" ({len(now)} columns now, {len(before)} then, or other '
            "names or types), so new rows cannot be appended: refit with the old imputations "
            "rewritten (TDM_REWRITE_ON_REFIT=true with --refit)."
        )
