"""Write-back step: target table, imputed-cells record and lineage row, in one transaction.

The checks and records here are shared with `tasks.staging`, which writes a large table
partition by partition.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

import duckdb
import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from schemas.lineage import (
    IMPUTED_CELLS_DDL,
    IMPUTED_CELLS_TABLE,
    LINEAGE_DDL,
    LINEAGE_TABLE,
    ImputedCellsSchema,
)
from tasks.errors import PipelineError, PipelineInputError, QualityCheckError
from tasks.frames import as_float_frame
from tasks.lineage import LineageRecord
from tasks.load import SourceTable
from tasks.results import WriteResult
from tasks.retry import RETRIES, RETRY_DELAY_SECONDS, retry_when_busy
from tasks.validate import ImputationPlan
from tasks.warehouse import (
    connect,
    find_table,
    find_view,
    fingerprint_table,
    quote_identifier,
    register_frame,
)

__all__ = [
    "check_source_unchanged",
    "check_target",
    "insert_lineage",
    "record_imputed_cells",
    "summarise_write",
    "write_back",
]


@task(
    name="write-back",
    cache_policy=NO_CACHE,
    retries=RETRIES,
    retry_delay_seconds=RETRY_DELAY_SECONDS,
    retry_condition_fn=retry_when_busy,
)
def write_back(
    source: SourceTable, plan: ImputationPlan, imputed: pd.DataFrame, lineage: LineageRecord
) -> WriteResult:
    """Write the target table, the imputed cells and the lineage row; all or nothing."""
    with connect(source.db_path, read_only=False) as con:
        con.execute("BEGIN TRANSACTION")
        try:
            replaced = _write(con, source, plan, imputed, lineage)
            con.execute("COMMIT")
        except BaseException as error:
            with contextlib.suppress(duckdb.Error):  # keep the original error if this fails too
                con.execute("ROLLBACK")
            if isinstance(error, duckdb.Error):
                raise PipelineError(
                    f"Writing table \"{plan.target_table}\" to '{source.db_path}' failed, and the "
                    f"warehouse was left as it was: {str(error).splitlines()[0]}"
                ) from None
            raise
    return summarise_write(source.db_path, lineage, replaced_existing=replaced)


def summarise_write(
    db_path: str, lineage: LineageRecord, *, replaced_existing: bool
) -> WriteResult:
    """What a committed write of `lineage`'s plan to `db_path` did."""
    return WriteResult(
        db_path=db_path,
        target_table=lineage.plan.target_table,
        replaced_existing=replaced_existing,
        rows=lineage.plan.n_rows,
        cells_imputed=lineage.plan.n_missing,
        run_id=lineage.run.run_id,
    )


def _write(
    con: duckdb.DuckDBPyConnection,
    source: SourceTable,
    plan: ImputationPlan,
    imputed: pd.DataFrame,
    lineage: LineageRecord,
) -> bool:
    """The statements of the transaction; returns whether an existing target was replaced."""
    check_source_unchanged(con, source)
    con.execute(LINEAGE_DDL)
    con.execute(IMPUTED_CELLS_DDL)
    replaced = check_target(con, plan)
    if plan.n_missing:
        _create_imputed_target(con, plan, source, imputed)
    elif not plan.replace_source:  # nothing to impute: a copy (or, in place, nothing to do)
        con.execute(
            f"CREATE OR REPLACE TABLE {quote_identifier(plan.target_table)} AS "
            f"SELECT * FROM {quote_identifier(plan.source_table)}"
        )
    record_imputed_cells(con, source, plan, lineage.run.run_id)
    insert_lineage(con, lineage)
    return replaced


def check_source_unchanged(con: duckdb.DuckDBPyConnection, source: SourceTable) -> None:
    """Refuse to write if the source's columns or contents differ from what was read."""
    table = find_table(con, source.table.name)
    if table != source.table or fingerprint_table(con, table) != source.fingerprint:
        raise PipelineInputError(
            f'Table "{source.table.name}" changed while it was being imputed (its columns or '
            "contents differ from what was read), so nothing was written. Run again."
        )


def check_target(con: duckdb.DuckDBPyConnection, plan: ImputationPlan) -> bool:
    """Whether the target table exists already; refuse a target that is a view."""
    view = find_view(con, plan.target_table)
    if view is not None:
        raise PipelineInputError(
            f'The target "{plan.target_table}" is an existing view; the pipeline writes tables '
            "only. Choose another --target."
        )
    return find_table(con, plan.target_table) is not None


def _create_imputed_target(
    con: duckdb.DuckDBPyConnection, plan: ImputationPlan, source: SourceTable, imputed: pd.DataFrame
) -> None:
    """Target = source with its imputed columns replaced (as DOUBLE), rows matched by position.

    Columns without a missing cell, and every other column, are copied by DuckDB unchanged.
    """
    filled = [name for name in plan.columns if plan.missing.get(name, 0)]
    # Positional names in the registered frame: user column names never reach SQL unquoted.
    frame = pd.DataFrame(
        {f"c{j}": imputed[name].to_numpy(dtype=np.float64) for j, name in enumerate(filled)}
    )
    if plan.key is not None:
        frame["k"] = source.frame[plan.key].to_numpy()
    src = quote_identifier(plan.source_table)
    with register_frame(con, frame, "tdm_imputed") as view:
        _check_alignment(con, plan, filled, src, view)
        replacements = ", ".join(
            f"i.c{j} AS {quote_identifier(name)}" for j, name in enumerate(filled)
        )
        con.execute(
            f"CREATE OR REPLACE TABLE {quote_identifier(plan.target_table)} AS "
            f"SELECT s.* REPLACE ({replacements}) FROM {src} AS s POSITIONAL JOIN {view} AS i"
        )


def _check_alignment(
    con: duckdb.DuckDBPyConnection, plan: ImputationPlan, filled: list[str], src: str, view: str
) -> None:
    """Refuse to write if the imputed rows do not line up with the source rows, cell for cell."""
    conditions = []
    for j, name in enumerate(filled):
        cell = f"s.{quote_identifier(name)}::DOUBLE"
        conditions.append(f"({cell} IS NOT NULL AND NOT isnan({cell}) AND {cell} <> i.c{j})")
    if plan.key is not None:
        conditions.append(f"(s.{quote_identifier(plan.key)} IS DISTINCT FROM i.k)")
    sql = (
        f"SELECT count(*) FROM {src} AS s POSITIONAL JOIN {view} AS i "
        f"WHERE {' OR '.join(conditions)}"
    )
    mismatched = con.execute(sql).fetchall()[0][0]
    if mismatched:
        raise QualityCheckError(
            f'The imputed rows of "{plan.source_table}" do not line up with the table '
            f"({mismatched} rows differ in observed cells or keys), so nothing was written."
        )


def record_imputed_cells(
    con: duckdb.DuckDBPyConnection,
    source: SourceTable,
    plan: ImputationPlan,
    run_id: str,
    *,
    offset: int = 0,
    table: str = IMPUTED_CELLS_TABLE,
) -> None:
    """One row per imputed cell: run, target, row number (0-based), key value and column.

    `offset` is the row number of `source.frame`'s first row (a partition of the table)."""
    mask = as_float_frame(source.frame, plan.columns).isna().to_numpy()
    rows, cols = np.nonzero(mask)
    keys = (
        source.frame[plan.key].to_numpy()[rows].astype(str)
        if plan.key is not None
        else np.full(len(rows), None, dtype=object)
    )
    cells = pd.DataFrame(
        {
            "run_id": run_id,
            "target_table": plan.target_table,
            "row_number": rows.astype(np.int64) + offset,
            "row_key": keys,
            "column_name": np.asarray(plan.columns, dtype=object)[cols],
        }
    )
    cells = ImputedCellsSchema.validate(cells)
    with register_frame(con, cells, "tdm_cells") as view:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {view}")


def insert_lineage(con: duckdb.DuckDBPyConnection, lineage: LineageRecord) -> None:
    """Add the lineage row of `lineage`, stamped with the time now as its finish."""
    row = lineage.to_frame(finished_at=datetime.now(UTC))
    with register_frame(con, row, "tdm_lineage") as view:
        con.execute(f"INSERT INTO {LINEAGE_TABLE} BY NAME SELECT * FROM {view}")
