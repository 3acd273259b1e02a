"""Write-back step: target table, imputed-cells record and lineage row, in one transaction.

The checks and records here are shared with `tasks.staging`, which writes a large table
partition by partition.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime

import duckdb
import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.logging import get_logger

from schemas.lineage import (
    IMPUTED_CELLS_DDL,
    IMPUTED_CELLS_TABLE,
    LINEAGE_DDL,
    LINEAGE_TABLE,
    RECORD_MIGRATIONS,
    ImputedCellsSchema,
)
from tasks.cells import (
    add_checks,
    check_alignment,
    filled_columns,
    imputed_frame,
    positional,
    target_expression,
    update_in_place,
    verify_cells,
    write_checks,
)
from tasks.errors import PipelineError, PipelineInputError
from tasks.frames import missing_mask
from tasks.lineage import LineageRecord
from tasks.load import SourceTable
from tasks.names import quote_table
from tasks.quality import CheckOutcome
from tasks.results import WriteResult
from tasks.retry import RETRIES, RETRY_DELAY_SECONDS, retry_when_busy
from tasks.targets import check_target_table
from tasks.validate import ImputationPlan
from tasks.warehouse import (
    connect,
    find_table,
    fingerprint_table,
    register_frame,
)

__all__ = [
    "check_source_unchanged",
    "ensure_record_tables",
    "insert_lineage",
    "log_type_notes",
    "record_imputed_cells",
    "summarise_write",
    "transaction",
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
    with (
        connect(source.db_path, read_only=False) as con,
        transaction(con, plan.target_table, source.db_path),
    ):
        replaced = _write(con, source, plan, imputed, lineage)
    return summarise_write(source.db_path, lineage, replaced_existing=replaced)


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection, target: str, db_path: str) -> Iterator[None]:
    """Run the block in one transaction: committed if it ends, rolled back if anything fails; a
    DuckDB error becomes a `PipelineError` saying the warehouse was left as it was."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
        con.execute("COMMIT")
    except BaseException as error:
        with contextlib.suppress(duckdb.Error):  # keep the original error if this fails too
            con.execute("ROLLBACK")
        if isinstance(error, duckdb.Error):
            raise PipelineError(
                f"Writing table \"{target}\" to '{db_path}' failed, and the warehouse was left "
                f"as it was: {str(error).splitlines()[0]}"
            ) from None
        raise


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
    ensure_record_tables(con)
    replaced = check_target_table(con, plan)
    if plan.n_missing:
        lineage = _create_imputed_target(con, plan, source, imputed, lineage)
    elif not plan.replace_source:  # nothing to impute: a copy (or, in place, nothing to do)
        con.execute(
            f"CREATE OR REPLACE TABLE {quote_table(plan.target_table)} AS "
            f"SELECT * FROM {quote_table(plan.source_table)}"
        )
    record_imputed_cells(con, source, plan, lineage.run.run_id)
    insert_lineage(con, lineage)
    return replaced


def ensure_record_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Create `tdm_lineage` and `tdm_imputed_cells` where missing, and add the columns newer
    than a file's tables (`schemas.lineage.RECORD_MIGRATIONS`)."""
    con.execute(LINEAGE_DDL)
    con.execute(IMPUTED_CELLS_DDL)
    for statement in RECORD_MIGRATIONS:
        con.execute(statement)


def check_source_unchanged(con: duckdb.DuckDBPyConnection, source: SourceTable) -> None:
    """Refuse to write if the source's columns or contents differ from what was read."""
    table = find_table(con, source.table.qualified)
    if table != source.table or fingerprint_table(con, table) != source.fingerprint:
        raise PipelineInputError(
            f'Table "{source.table.qualified}" changed while it was being imputed (its columns or '
            "contents differ from what was read), so nothing was written. Run again."
        )


def _create_imputed_target(
    con: duckdb.DuckDBPyConnection,
    plan: ImputationPlan,
    source: SourceTable,
    imputed: pd.DataFrame,
    lineage: LineageRecord,
) -> LineageRecord:
    """Fill the missing cells (`tasks.cells`), rows matched by position; returns `lineage` with
    the checks made here. A new target is the source with each imputed column's missing cells
    filled in the column's own type; in place, the source's missing cells are updated, its
    definition kept. Observed cells, and every other column, are copied by DuckDB and proved
    unchanged in their own type.
    """
    filled = filled_columns(source, plan)
    frame = imputed_frame(source, plan, imputed, filled)
    src = quote_table(plan.source_table)
    with register_frame(con, frame, "tdm_imputed") as view:
        check_alignment(con, plan, filled, f"{src} AS s POSITIONAL JOIN {view} AS i")
        if plan.replace_source:
            n_observed = update_in_place(con, plan, src, view, filled)
        else:
            target = quote_table(plan.target_table)
            replacements = ", ".join(f"{target_expression(c)} AS {c.quoted}" for c in filled)
            con.execute(
                f"CREATE OR REPLACE TABLE {target} AS "
                f"SELECT s.* REPLACE ({replacements}) FROM {src} AS s POSITIONAL JOIN {view} AS i"
            )
            rows = positional(src, target, view)
            n_observed = verify_cells(con, plan.target_table, rows, filled)
    checks = write_checks(filled, n_observed)
    log_type_notes(plan.target_table, checks)
    return replace(lineage, quality=add_checks(lineage.quality, checks))


def log_type_notes(table: str, checks: list[CheckOutcome]) -> None:
    """Log, once per write, which columns' imputed cells were rounded to their type."""
    for check in checks:
        if check.name == "imputed_cell_types":
            get_logger("tdm.write").info("%s: %s", table, check.detail)


def record_imputed_cells(
    con: duckdb.DuckDBPyConnection,
    source: SourceTable,
    plan: ImputationPlan,
    run_id: str,
    *,
    offset: int = 0,
    table: str = IMPUTED_CELLS_TABLE,
    model_version: int | None = None,
) -> None:
    """One row per imputed cell (numeric, boolean or categorical): run, target, row number
    (0-based), key value, column and the stored model version that imputed it (None: none).

    `offset` is the row number of `source.frame`'s first row in the target (a partition of the
    table, or rows appended after the target's)."""
    mask = missing_mask(source.frame, plan.columns).to_numpy()
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
            "model_version": pd.array([model_version] * len(rows), dtype="Int64"),
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
