"""Staged writing of a large table: partitions staged beside the warehouse, published at once."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from schemas.lineage import IMPUTED_CELLS_DDL, IMPUTED_CELLS_TABLE
from tasks.access import check_writable
from tasks.cells import (
    FilledColumn,
    check_alignment,
    filled_columns,
    imputed_frame,
    target_expression,
    verify_cells,
    write_checks,
)
from tasks.errors import PipelineError, QualityCheckError
from tasks.lineage import LineageRecord
from tasks.load import SourceTable
from tasks.names import quote_table
from tasks.quality import CheckOutcome
from tasks.results import WriteResult
from tasks.scratch import make_stage_dir
from tasks.targets import check_target_table
from tasks.validate import ImputationPlan
from tasks.warehouse import connect, register_frame
from tasks.write import (
    check_source_unchanged,
    ensure_record_tables,
    insert_lineage,
    record_imputed_cells,
    summarise_write,
)

__all__ = ["PartitionedWrite", "insert_imputed_rows"]


def insert_imputed_rows(
    con: duckdb.DuckDBPyConnection,
    plan: ImputationPlan,
    part: SourceTable,
    imputed: pd.DataFrame,
    filled: list[FilledColumn],
    into: str,
) -> int:
    """Insert the rows of `part` (indexed by the source's rowid) into the table `into`, their
    missing cells filled from `imputed`; returns the observed cells proved unchanged.

    Rows are matched to the source by rowid and inserted in rowid order; observed cells are
    copied by DuckDB and proved unchanged in their own type before the insert."""
    rowids = part.frame.index.to_numpy(dtype=np.int64)
    frame = imputed_frame(part, plan, imputed, filled)
    frame["r"] = rowids
    src = quote_table(plan.source_table)
    out = "temp.tdm_part_out"
    with register_frame(con, frame, "tdm_part") as view:
        rows = f"{src} AS s JOIN {view} AS i ON s.rowid = i.r"
        check_alignment(con, plan, filled, rows)
        replacements = ", ".join(f"{target_expression(c)} AS {c.quoted}" for c in filled)
        replace = f" REPLACE ({replacements})" if replacements else ""
        con.execute(
            "CREATE OR REPLACE TEMP TABLE tdm_part_out AS "
            f"SELECT s.rowid AS tdm_row, s.*{replace} FROM {rows} ORDER BY s.rowid"
        )
        try:
            written = con.execute(f"SELECT count(*) FROM {out}").fetchall()[0][0]
            if written != len(frame):
                raise QualityCheckError(
                    f'Rows {rowids[0]}-{rowids[-1]} of "{plan.source_table}" matched '
                    f"{written} of their {len(frame)} rows when written, so nothing was written."
                )
            observed = verify_cells(
                con, plan.target_table, f"{rows} JOIN {out} AS t ON t.tdm_row = s.rowid", filled
            )
            con.execute(
                f"INSERT INTO {into} SELECT * EXCLUDE (tdm_row) FROM {out} ORDER BY tdm_row"
            )
        finally:
            con.execute(f"DROP TABLE IF EXISTS {out}")
    return observed


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
        self._filled: list[FilledColumn] = []
        self._observed_checked = 0

    def __enter__(self) -> PartitionedWrite:
        check_writable(self.db_path)  # before the staging folder and the fit
        where = Path(self.db_path).resolve().parent
        try:
            self._stage_dir = make_stage_dir(where)  # removes stale ones left by killed runs
            self._open()
        except BaseException:
            self._close()
            raise
        return self

    def _open(self) -> None:
        assert self._stage_dir is not None
        connection = connect(self.db_path, read_only=False)
        self.con = connection.__enter__()  # if opening fails, there is nothing to close
        self._connection = connection
        if self.memory_limit:
            self.con.execute("SET memory_limit = ?", [self.memory_limit])
        stage = Path(self._stage_dir) / "stage.duckdb"
        self.con.execute(f"ATTACH {_sql_string(str(stage))} AS {self.STAGE}")

    def _reopen(self) -> None:
        """Close and reopen the database: DuckDB keeps the pages it read and wrote cached in
        the process until the last connection closes, so without this the memory of a run
        would grow with every partition; with it, it stays bounded by one partition."""
        self._close_connection()
        self._open()

    def create_target(self, source: SourceTable, plan: ImputationPlan) -> None:
        """Check the target name, then create the empty staged target and imputed-cells record.

        The target has the source's columns and types, as a single fit writes them
        (`tasks.cells`). `source` is any part of the table (its column types)."""
        self.replaced_existing = check_target_table(self.con, plan)
        self._filled = filled_columns(source, plan)
        self.con.execute(
            f"CREATE TABLE {self.STAGE}.target AS SELECT * "
            f"FROM {quote_table(plan.source_table)} LIMIT 0"
        )
        self.con.execute(IMPUTED_CELLS_DDL.replace(IMPUTED_CELLS_TABLE, f"{self.STAGE}.cells", 1))

    @property
    def checks(self) -> list[CheckOutcome]:
        """The checks the staged partitions passed, for the lineage row."""
        return write_checks(self._filled, self._observed_checked)

    def append(
        self, plan: ImputationPlan, part: SourceTable, imputed: pd.DataFrame, run_id: str
    ) -> None:
        """Stage one partition: `part.frame` and `imputed` are indexed by the source's rowid.

        Its rows are matched to the source by rowid; observed cells are copied by DuckDB and
        proved unchanged in their own type before the partition is staged."""
        self._observed_checked += insert_imputed_rows(
            self.con, plan, part, imputed, self._filled, f"{self.STAGE}.target"
        )
        rows = len(part.frame)
        offset = self._rows_before
        self._rows_before += rows
        record_imputed_cells(
            self.con, part, plan, run_id, offset=offset, table=f"{self.STAGE}.cells"
        )
        self._reopen()

    def commit(self, source: SourceTable, lineage: LineageRecord) -> WriteResult:
        """Publish the staged target and record, check the source, add lineage: one transaction."""
        plan = lineage.plan
        self.con.execute("BEGIN TRANSACTION")
        try:
            check_source_unchanged(self.con, source)
            ensure_record_tables(self.con)
            self.replaced_existing = check_target_table(self.con, plan)
            self.con.execute(
                f"CREATE OR REPLACE TABLE {quote_table(plan.target_table)} AS "
                f"SELECT * FROM {self.STAGE}.target"
            )
            self.con.execute(
                f"INSERT INTO {IMPUTED_CELLS_TABLE} BY NAME SELECT * FROM {self.STAGE}.cells"
            )
            insert_lineage(self.con, lineage)
            self.con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                self.con.execute("ROLLBACK")
            raise
        return summarise_write(self.db_path, lineage, replaced_existing=self.replaced_existing)

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
