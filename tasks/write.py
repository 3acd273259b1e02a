"""Write-back step: target table, imputed-cells record and lineage row, in one transaction."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

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
from tasks.retry import RETRIES, RETRY_DELAY_SECONDS, retry_when_busy
from tasks.validate import ImputationPlan
from tasks.warehouse import (
    connect,
    find_table,
    find_view,
    fingerprint_table,
    quote_identifier,
)

__all__ = ["PartitionedWrite", "WriteResult", "write_back"]


@dataclass(frozen=True)
class WriteResult:
    """What was written, and where."""

    db_path: str
    target_table: str
    replaced_existing: bool
    rows: int
    cells_imputed: int
    run_id: str


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
    return WriteResult(
        db_path=source.db_path,
        target_table=plan.target_table,
        replaced_existing=replaced,
        rows=plan.n_rows,
        cells_imputed=plan.n_missing,
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
    _check_source_unchanged(con, source)
    con.execute(LINEAGE_DDL)
    con.execute(IMPUTED_CELLS_DDL)
    replaced = _check_target(con, plan)
    if plan.n_missing:
        _create_imputed_target(con, plan, source, imputed)
    elif not plan.replace_source:  # nothing to impute: a copy (or, in place, nothing to do)
        con.execute(
            f"CREATE OR REPLACE TABLE {quote_identifier(plan.target_table)} AS "
            f"SELECT * FROM {quote_identifier(plan.source_table)}"
        )
    _record_imputed_cells(con, source, plan, lineage.run.run_id)
    _insert_lineage(con, lineage)
    return replaced


def _check_source_unchanged(con: duckdb.DuckDBPyConnection, source: SourceTable) -> None:
    table = find_table(con, source.table.name)
    if table != source.table or fingerprint_table(con, table) != source.fingerprint:
        raise PipelineInputError(
            f'Table "{source.table.name}" changed while it was being imputed (its columns or '
            "contents differ from what was read), so nothing was written. Run again."
        )


def _check_target(con: duckdb.DuckDBPyConnection, plan: ImputationPlan) -> bool:
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
    view = f"tdm_imputed_{uuid.uuid4().hex}"
    src = quote_identifier(plan.source_table)
    con.register(view, frame)
    try:
        _check_alignment(con, plan, filled, src, view)
        replacements = ", ".join(
            f"i.c{j} AS {quote_identifier(name)}" for j, name in enumerate(filled)
        )
        con.execute(
            f"CREATE OR REPLACE TABLE {quote_identifier(plan.target_table)} AS "
            f"SELECT s.* REPLACE ({replacements}) FROM {src} AS s POSITIONAL JOIN {view} AS i"
        )
    finally:
        con.unregister(view)


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


def _record_imputed_cells(
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
    view = f"tdm_cells_{uuid.uuid4().hex}"
    con.register(view, cells)
    try:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {view}")
    finally:
        con.unregister(view)


def _insert_lineage(con: duckdb.DuckDBPyConnection, lineage: LineageRecord) -> None:
    row = lineage.to_frame(finished_at=datetime.now(UTC))
    view = f"tdm_lineage_{uuid.uuid4().hex}"
    con.register(view, row)
    try:
        con.execute(f"INSERT INTO {LINEAGE_TABLE} BY NAME SELECT * FROM {view}")
    finally:
        con.unregister(view)


class PartitionedWrite:
    """Writes a target table partition by partition, then publishes it in one transaction.

    Partitions are appended, each committed on its own, to a staging DuckDB file beside the
    warehouse (attached as `tdm_stage`), so the memory a run holds is bounded by a partition,
    not by the table, and the warehouse itself is not touched. `commit` then copies the staged
    target and imputed-cells record into the warehouse, checks the source is unchanged and adds
    the lineage row, all in one transaction. A failure anywhere leaves the warehouse as it was;
    the staging file is always deleted. Reads of the source go through `con`.
    """

    STAGE = "tdm_stage"

    def __init__(self, db_path: str, *, memory_limit: str | None = None) -> None:
        self.db_path = db_path
        self.memory_limit = memory_limit
        self._connection: contextlib.AbstractContextManager[duckdb.DuckDBPyConnection] | None
        self._connection = None
        self.con: duckdb.DuckDBPyConnection
        self.replaced_existing = False
        self._rows_before = 0
        self._stage_dir: str | None = None
        self._plan: ImputationPlan | None = None

    def __enter__(self) -> PartitionedWrite:
        where = Path(self.db_path).resolve().parent
        try:
            self._stage_dir = tempfile.mkdtemp(prefix=".tdm-staging-", dir=where)
            self._open()
        except BaseException:
            self._close()
            raise
        return self

    def _open(self) -> None:
        assert self._stage_dir is not None
        self._connection = connect(self.db_path, read_only=False)
        self.con = self._connection.__enter__()
        if self.memory_limit:
            self.con.execute("SET memory_limit = ?", [self.memory_limit])
        stage = Path(self._stage_dir) / "stage.duckdb"
        self.con.execute(f"ATTACH {_sql_string(str(stage))} AS {self.STAGE}")

    def _reopen(self) -> None:
        """Close and reopen the database: DuckDB keeps the pages it read and wrote cached in
        the process until the last connection closes (measured: +4 MB per 20,000-row partition
        without this, flat with it), so a run's memory stays bounded by one partition."""
        self._close_connection()
        self._open()

    def create_target(self, plan: ImputationPlan) -> None:
        """Check the target name, then create the empty staged target (the source's columns,
        imputed ones as DOUBLE) and the staged imputed-cells record."""
        self.replaced_existing = _check_target(self.con, plan)
        doubles = ", ".join(f"NULL::DOUBLE AS {quote_identifier(c)}" for c in plan.columns)
        self.con.execute(
            f"CREATE TABLE {self.STAGE}.target AS SELECT * REPLACE ({doubles}) "
            f"FROM {quote_identifier(plan.source_table)} LIMIT 0"
        )
        self.con.execute(IMPUTED_CELLS_DDL.replace(IMPUTED_CELLS_TABLE, f"{self.STAGE}.cells", 1))
        self._plan = plan

    def append(
        self, plan: ImputationPlan, part: SourceTable, imputed: pd.DataFrame, run_id: str
    ) -> None:
        """Stage one partition: `part.frame` and `imputed` are indexed by the source's rowid."""
        rowids = part.frame.index.to_numpy(dtype=np.int64)
        frame = pd.DataFrame(
            {
                f"c{j}": imputed[name].to_numpy(dtype=np.float64)
                for j, name in enumerate(plan.columns)
            }
        )
        frame["r"] = rowids
        view = f"tdm_part_{uuid.uuid4().hex}"
        src = quote_identifier(plan.source_table)
        replacements = ", ".join(
            f"i.c{j} AS {quote_identifier(name)}" for j, name in enumerate(plan.columns)
        )
        self.con.register(view, frame)
        try:
            written = self.con.execute(
                f"INSERT INTO {self.STAGE}.target SELECT s.* REPLACE ({replacements}) "
                f"FROM {src} AS s JOIN {view} AS i ON s.rowid = i.r ORDER BY s.rowid"
            ).fetchall()[0][0]
        finally:
            self.con.unregister(view)
        if written != len(frame):
            raise QualityCheckError(
                f'Partition of "{plan.source_table}" at rows {rowids[0]}-{rowids[-1]} matched '
                f"{written} of its {len(frame)} rows when written, so nothing was written."
            )
        offset = self._rows_before
        self._rows_before += len(frame)
        _record_imputed_cells(
            self.con, part, plan, run_id, offset=offset, table=f"{self.STAGE}.cells"
        )
        self._reopen()

    def commit(self, source: SourceTable, lineage: LineageRecord) -> WriteResult:
        """Publish the staged target and record, check the source, add lineage: one transaction."""
        plan = lineage.plan
        self.con.execute("BEGIN TRANSACTION")
        try:
            _check_source_unchanged(self.con, source)
            self.con.execute(LINEAGE_DDL)
            self.con.execute(IMPUTED_CELLS_DDL)
            self.replaced_existing = _check_target(self.con, plan)
            self.con.execute(
                f"CREATE OR REPLACE TABLE {quote_identifier(plan.target_table)} AS "
                f"SELECT * FROM {self.STAGE}.target"
            )
            self.con.execute(
                f"INSERT INTO {IMPUTED_CELLS_TABLE} BY NAME SELECT * FROM {self.STAGE}.cells"
            )
            _insert_lineage(self.con, lineage)
            self.con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                self.con.execute("ROLLBACK")
            raise
        return WriteResult(
            db_path=self.db_path,
            target_table=plan.target_table,
            replaced_existing=self.replaced_existing,
            rows=plan.n_rows,
            cells_imputed=plan.n_missing,
            run_id=lineage.run.run_id,
        )

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        self._close()
        if isinstance(error, duckdb.Error):
            raise PipelineError(
                f"Writing to '{self.db_path}' failed, and the warehouse was left as it was: "
                f"{str(error).splitlines()[0]}"
            ) from None

    def _close_connection(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            with contextlib.suppress(duckdb.Error):
                self.con.execute(f"DETACH {self.STAGE}")
            connection.__exit__(None, None, None)

    def _close(self) -> None:
        try:
            self._close_connection()
        finally:
            if self._stage_dir is not None:
                shutil.rmtree(self._stage_dir, ignore_errors=True)


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
