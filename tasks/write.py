"""The one writer of the pipeline: a target table, its imputed-cells record, the lineage row and,
for incremental runs, the model, in one DuckDB transaction (`TableWriter`).

Its modes:

- `NEW`: the target is the source with its missing cells filled (a copy when none is missing);
- `IN_PLACE`: the source's missing cells are updated, its definition kept;
- `APPEND`: rows are added to the target (created, or replaced with `replace=True`) and the new
  model version stored with them;
- `PARTITIONED`: partitions are staged, each committed on its own, in a scratch DuckDB file
  beside the warehouse (a `.tdm-staging-*` folder), and published by the one transaction. Until
  then the warehouse is opened read-only, and not at all within `released()` (the fit, the
  waits for partitions), so other processes can read it meanwhile and write it between reads.

Every mode checks the source is unchanged and the target may be written inside the transaction,
proves the observed cells unchanged in their own type (`tasks.warehouse.cells`), and leaves the
warehouse as it was when anything fails. A target the writer creates has the source's definition
(`tasks.warehouse.constraints.target_definition`: its constraints but foreign keys), and the
rows are checked against every constraint an imputed column is part of before they are written.
Staging folders: `tasks.warehouse.staging`.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from enum import StrEnum
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
    RECORD_MIGRATIONS,
    ImputedCellsSchema,
)
from tasks.errors import (
    ChangedMeanwhileError,
    PipelineError,
    QualityCheckError,
    WarehouseBusyError,
)
from tasks.frames import missing_mask
from tasks.lineage import LineageRecord
from tasks.load import SourceTable
from tasks.logs import step_logger
from tasks.quality import CheckOutcome
from tasks.results import CellDraws, WriteResult
from tasks.targets import check_same_columns, check_target_table, table_comment, target_marker
from tasks.validate import ImputationPlan
from tasks.warehouse.access import check_writable
from tasks.warehouse.cells import (
    FilledColumn,
    add_checks,
    check_alignment,
    check_constraints,
    filled_columns,
    imputed_frame,
    positional,
    target_expression,
    update_in_place,
    verify_cells,
    write_checks,
)
from tasks.warehouse.constraints import target_definition
from tasks.warehouse.models import ModelFolder, NewModel, insert_model
from tasks.warehouse.names import quote_identifier, quote_table
from tasks.warehouse.staging import StageDir, make_stage_dir
from tasks.warehouse.tables import (
    DECIMAL_TYPE,
    TableInfo,
    column_comments,
    columns_sql,
    connect,
    find_table,
    fingerprint_table,
    register_frame,
    written_state,
)

__all__ = ["TableWriter", "WriteMode", "check_write", "insert_lineage", "write_back"]

_STAGE = "tdm_stage"

REOPEN_WAIT_SECONDS = 120.0
"""How long a run that has fitted waits for another process's lock to pass when it opens the
warehouse to write (or, partitioned, to read the next partition; each try `REOPEN_POLL_SECONDS`
apart), rather than lose its work."""
REOPEN_POLL_SECONDS = 5.0


class WriteMode(StrEnum):
    """Where a run's rows go (see the module's docstring)."""

    NEW = "new"
    IN_PLACE = "in-place"
    APPEND = "append"
    PARTITIONED = "partitioned"


@task(name="write-back", cache_policy=NO_CACHE)  # waits for a lock itself (TableWriter)
def write_back(
    source: SourceTable, plan: ImputationPlan, imputed: pd.DataFrame, lineage: LineageRecord
) -> WriteResult:
    """Write the target table (or the source in place), the imputed cells and the lineage row;
    all or nothing."""
    mode = WriteMode.IN_PLACE if plan.replace_source else WriteMode.NEW
    with TableWriter(source.db_path, mode) as writer:
        written, _ = writer.commit(replace(lineage, source=source, plan=plan), imputed)
    return written


class TableWriter:
    """Writes one table in `mode`, committing it all in one transaction (`commit`).

    A context manager: it checks the file can be written, opens it (waiting up to
    `REOPEN_WAIT_SECONDS` while another process holds it, but for `PARTITIONED`'s first read)
    and, for `PARTITIONED`, creates the staging file, which it always removes; `PARTITIONED`
    opens the warehouse read-only until `commit`, and `released()` closes it for a while.
    `folder` is where an `APPEND` stores model files (None: in `tdm_models`); `replace` makes an
    `APPEND` write the target anew; `memory_limit` is DuckDB's while a partitioned table is
    written.
    """

    def __init__(
        self,
        db_path: str,
        mode: WriteMode,
        *,
        replace: bool = False,
        folder: ModelFolder | None = None,
        memory_limit: str | None = None,
    ) -> None:
        self.db_path = db_path
        self.mode = mode
        self.replace = replace
        self.folder = folder
        self.memory_limit = memory_limit
        self.con: duckdb.DuckDBPyConnection  # set when the writer is entered
        self._connection: contextlib.AbstractContextManager[duckdb.DuckDBPyConnection] | None
        self._connection = None
        self._stage_dir: StageDir | None = None
        self._stage = _STAGE  # the staging file's name in SQL (`_stage_name`)
        self._filled: list[FilledColumn] = []
        self._staged_rows = 0
        self._observed_checked = 0
        self._writing = mode != WriteMode.PARTITIONED  # PARTITIONED: read-only until commit
        self._target: str | None = None  # the table being written, once known

    def __enter__(self) -> TableWriter:
        if self.mode == WriteMode.PARTITIONED:  # before the staging folder and the fit
            check_writable(self.db_path)
        else:  # the file became unwritable during the fit (checked before it too)
            check_writable(
                self.db_path,
                refused="The imputed table could not be written, so nothing was written",
            )
        try:
            if self.mode == WriteMode.PARTITIONED:
                # stale folders of killed runs are removed first
                self._stage_dir = make_stage_dir(Path(self.db_path).resolve().parent)
                self._open()
            else:  # a fit is done: wait for another process's lock rather than lose it
                self._open_waiting()
        except BaseException:
            self._close()
            raise
        return self

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        self._close()
        if isinstance(error, duckdb.Error):
            what = "" if self._target is None else f'table "{self._target}" '
            raise PipelineError(
                f"Writing {what}to '{self.db_path}' failed, and the warehouse was left as it was: "
                f"{str(error).splitlines()[0]}{_disk_hint(error, self.db_path)}"
            ) from None

    @contextlib.contextmanager
    def released(self) -> Iterator[None]:
        """Within it, the warehouse is not open (the staging file is kept); on leaving, it is
        opened again as before, waiting up to `REOPEN_WAIT_SECONDS` for another process's lock."""
        self._close_connection()
        yield
        self._open_waiting()

    @property
    def checks(self) -> list[CheckOutcome]:
        """The checks the rows written so far passed, for the lineage row."""
        return write_checks(self._filled, self._observed_checked)

    def create_stage(self, source: SourceTable, plan: ImputationPlan) -> None:
        """`PARTITIONED`: check the target name, then create the empty staged target (the
        source's columns and types) and imputed-cells record."""
        self._target = plan.target_table
        check_target_table(self.con, plan)
        self._filled = filled_columns(source, plan)
        self.con.execute(
            f"CREATE TABLE {self._stage}.target AS SELECT * "
            f"FROM {quote_table(plan.source_table)} LIMIT 0"
        )
        self.con.execute(IMPUTED_CELLS_DDL.replace(IMPUTED_CELLS_TABLE, f"{self._stage}.cells", 1))

    def stage(
        self,
        plan: ImputationPlan,
        part: SourceTable,
        imputed: pd.DataFrame,
        run_id: str,
        draws: CellDraws | None = None,
    ) -> None:
        """`PARTITIONED`: stage one partition (`part.frame`, `imputed` and its `draws` indexed
        by the source's rowid), its observed cells proved unchanged first."""
        self._observed_checked += _insert_rows(
            self.con, plan, part, imputed, self._filled, f"{self._stage}.target", target=None
        )
        offset, self._staged_rows = self._staged_rows, self._staged_rows + len(part.frame)
        _record_cells(
            self.con, part, plan, run_id, offset=offset, table=f"{self._stage}.cells", draws=draws
        )
        self._reopen()

    def commit(
        self,
        lineage: LineageRecord,
        imputed: pd.DataFrame | None = None,
        *,
        model: NewModel | None = None,
    ) -> tuple[WriteResult, LineageRecord]:
        """Write the rows of `lineage.source` (`imputed` fills their missing cells; staged ones
        for `PARTITIONED`), the imputed cells, the `model` (`APPEND`) and the lineage row, in
        one transaction. Returns what was written and `lineage` with the write's checks."""
        source, plan = lineage.source, lineage.plan
        self._target = plan.target_table
        files: list[Path] = []
        if not self._writing:
            self._writing = True
            self._close_connection()
            self._open_waiting()
        try:
            with transaction(self.con, plan.target_table, self.db_path):
                _check_source_unchanged(self.con, source)
                _ensure_record_tables(self.con)
                exists = find_table(self.con, plan.target_table, whole_name=False) is not None
                appends = self.mode == WriteMode.APPEND and not self.replace
                replaced = check_target_table(self.con, plan, replacing=not appends)
                if self.mode == WriteMode.PARTITIONED:
                    self._publish_stage(source.table, plan)
                elif self.mode == WriteMode.APPEND:
                    self._append(lineage, imputed, exists)
                else:
                    self._write_whole(source, plan, imputed, lineage)
                if self._filled or self.mode in (WriteMode.APPEND, WriteMode.PARTITIONED):
                    lineage = replace(lineage, quality=add_checks(lineage.quality, self.checks))
                could_be_not_null = _no_null_left(self.con, source.table, plan)
                if model is not None:
                    files += self._store_model(model, lineage)
                created = self.mode != WriteMode.APPEND or self.replace or not exists
                marker = self._mark(plan, lineage.run.run_id, created=created)
                lineage = replace(lineage, target_marker=marker)
                insert_lineage(self.con, lineage)
        except BaseException:
            for file in files:  # the transaction is undone: so is its model file
                file.unlink(missing_ok=True)
            raise
        lineage = self._record_target_state(plan, lineage)
        _log_type_notes(plan.target_table, self.checks)  # after the commit: once per write
        if self.mode == WriteMode.APPEND:
            replaced = self.replace and exists
        written = WriteResult(
            db_path=self.db_path,
            target_table=plan.target_table,
            replaced_existing=replaced,
            rows=plan.n_rows,
            cells_imputed=plan.n_missing,
            run_id=lineage.run.run_id,
            could_be_not_null=could_be_not_null,
        )
        return written, lineage

    def _write_whole(
        self,
        source: SourceTable,
        plan: ImputationPlan,
        imputed: pd.DataFrame | None,
        lineage: LineageRecord,
    ) -> None:
        """`NEW` and `IN_PLACE`: the missing cells filled, rows matched by position; a new
        target is the source with each imputed column's missing cells filled in the column's
        own type, in place only the source's missing cells are updated."""
        con, src = self.con, quote_table(plan.source_table)
        if plan.n_missing and imputed is not None:
            self._filled = filled_columns(source, plan)
            frame = imputed_frame(source, plan, imputed, self._filled)
            with register_frame(con, frame, "tdm_imputed") as view:
                after = _aligned_rows(con, source, plan, self._filled, view)
                if plan.replace_source:
                    check_constraints(con, source.table, plan.target_table, self._filled, after)
                    self._observed_checked = update_in_place(con, plan, src, view, self._filled)
                else:
                    self._create_target(source.table, plan, after)
                    target = quote_table(plan.target_table)
                    self._observed_checked = verify_cells(
                        con, plan.target_table, positional(src, target, view), self._filled
                    )
        elif not plan.replace_source:  # nothing to impute: a copy (in place, nothing to do)
            self._create_target(source.table, plan, src)
        _record_cells(con, source, plan, lineage.run.run_id, offset=0, draws=lineage.draws)

    def _create_target(self, source: TableInfo, plan: ImputationPlan, rows: str) -> None:
        """Create the target with the definition of `source` and insert `rows` (a FROM item
        with its columns), checked first against its constraints (`check_constraints`)."""
        check_constraints(self.con, source, plan.target_table, self._filled, rows)
        target = quote_table(plan.target_table)
        _create_like(self.con, source, target)
        columns = _insertable(source)
        self.con.execute(f"INSERT INTO {target} ({columns}) SELECT {columns} FROM {rows}")

    def _append(self, lineage: LineageRecord, imputed: pd.DataFrame | None, exists: bool) -> None:
        """`APPEND`: the rows of `lineage.source` into the target, after its `rows_reused` rows
        (or into a target written anew), each cell recorded with the model version."""
        con, plan, part = self.con, lineage.plan, lineage.source
        assert lineage.model is not None
        target = quote_table(plan.target_table)
        if lineage.model.appended:  # the target as it was read, to append after its rows
            rows = con.execute(f"SELECT count(*) FROM {target}").fetchall() if exists else None
            changed = rows != [(lineage.model.rows_reused,)]
        else:  # no target was read (a first run), or it is written anew
            changed = exists and not self.replace
        if changed:
            raise WarehouseBusyError(
                f'Another run or process wrote to table "{plan.target_table}" while this one '
                "imputed its new rows, so nothing was written. Run again: it reads the target as "
                "it is now."
            )
        if self.replace or not exists:
            _create_like(con, part.table, target)
        else:
            check_same_columns(con, plan)
        self._filled = filled_columns(part, plan)
        if len(part.frame) and imputed is not None:
            self._observed_checked = _insert_rows(
                con,
                plan,
                part,
                imputed,
                self._filled,
                target,
                target=find_table(con, plan.target_table, whole_name=False),
            )
        _record_cells(
            con,
            part,
            plan,
            lineage.run.run_id,
            offset=0 if self.replace else lineage.model.rows_reused,
            model_version=lineage.model.version,
            draws=lineage.draws,
        )

    def _mark(self, plan: ImputationPlan, run_id: str, *, created: bool) -> str | None:
        """The target's marker (`target_marker`): set on a table this write created, kept on
        one it appended to (set there too if it has none: a target written before markers);
        a source updated in place is left without."""
        if plan.replace_source:
            return None
        kept = None if created else table_comment(self.con, plan.target_table)
        if kept is not None:
            return kept
        marker = target_marker(run_id)
        quoted = marker.replace("'", "''")
        self.con.execute(f"COMMENT ON TABLE {quote_table(plan.target_table)} IS '{quoted}'")
        return marker

    def _record_target_state(self, plan: ImputationPlan, lineage: LineageRecord) -> LineageRecord:
        """After the commit, record in the lineage row the state of a target this write made
        whole (`NEW`, `PARTITIONED`; `written_state`, its rows' order included, which rowids
        give only once committed), which a later run with the same recipe compares to leave it
        as it is. Until then (or if this fails: a warning) the row has none, and the next run
        fits the table again."""
        if self.mode not in (WriteMode.NEW, WriteMode.PARTITIONED):
            return lineage
        target = find_table(self.con, plan.target_table, whole_name=False)
        assert target is not None
        try:
            with transaction(self.con, LINEAGE_TABLE, self.db_path):
                state = written_state(self.con, target)
                self.con.execute(
                    f"UPDATE {LINEAGE_TABLE} SET target_hash = ? WHERE run_id = ? AND "
                    "target_table = ?",
                    [state, lineage.run.run_id, plan.target_table],
                )
        except PipelineError as error:
            step_logger(__name__).warning(
                'Table "%s" was written, but its state could not be recorded, so the next run '
                "fits it again even if nothing changes: %s",
                plan.target_table,
                error,
            )
            return lineage
        return replace(lineage, target_hash=state)

    def _store_model(self, model: NewModel, lineage: LineageRecord) -> list[Path]:
        """Store the fitted model as the version the lineage names; the file written (if any)."""
        assert lineage.model is not None
        stored, file = insert_model(self.con, model, self.folder)
        files = [file] if file is not None else []
        if stored != lineage.model.version:
            for written in files:
                written.unlink(missing_ok=True)
            raise ChangedMeanwhileError(  # another run's work: a later run may succeed
                f'Another run stored a model of table "{lineage.plan.target_table}" meanwhile; '
                "nothing was written. Run again."
            )
        return files

    def _publish_stage(self, source: TableInfo, plan: ImputationPlan) -> None:
        """`PARTITIONED`: the staged target (into a table with the source's definition) and
        imputed-cells record into the warehouse."""
        self._create_target(source, plan, f"{self._stage}.target")
        cells = f"{self._stage}.cells"
        self.con.execute(f"INSERT INTO {IMPUTED_CELLS_TABLE} BY NAME SELECT * FROM {cells}")

    def _open(self) -> None:
        connection = connect(self.db_path, read_only=not self._writing)
        self.con = connection.__enter__()  # if opening fails, there is nothing to close
        self._connection = connection
        if self._stage_dir is None:
            return
        if self.memory_limit:
            self.con.execute("SET memory_limit = ?", [self.memory_limit])
        stage = str(Path(self._stage_dir.path) / "stage.duckdb").replace("'", "''")
        self._stage = _stage_name(self.con)
        self.con.execute(f"ATTACH '{stage}' AS {self._stage} (READ_WRITE)")

    def _reopen(self) -> None:
        """Close and reopen the database: DuckDB keeps the pages it read and wrote cached in
        the process until the last connection closes, so without this the memory of a run
        would grow with every partition; with it, it stays bounded by one partition."""
        self._close_connection()
        self._open_waiting()

    def _open_waiting(self) -> None:
        """`_open`, trying again while another process holds the file, for at most
        `REOPEN_WAIT_SECONDS`; then its `WarehouseBusyError`."""
        deadline = time.monotonic() + REOPEN_WAIT_SECONDS
        while True:
            try:
                return self._open()
            except WarehouseBusyError as busy:
                if time.monotonic() + REOPEN_POLL_SECONDS > deadline:
                    raise
                step_logger(__name__).warning("%s Waiting %g s.", busy, REOPEN_POLL_SECONDS)
                time.sleep(REOPEN_POLL_SECONDS)

    def _close_connection(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            if self._stage_dir is not None:
                with contextlib.suppress(duckdb.Error):
                    self.con.execute(f"DETACH {self._stage}")
            connection.__exit__(None, None, None)

    def _close(self) -> None:
        try:
            self._close_connection()
        finally:
            if self._stage_dir is not None:
                self._stage_dir.remove()


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection, target: str, db_path: str) -> Iterator[None]:
    """Run the block in one transaction: committed if it ends, rolled back if anything fails; a
    DuckDB error becomes a `PipelineError` saying the warehouse was left as it was. Once
    committed, the write-ahead log is folded into the file (`_checkpoint`)."""
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
                f"as it was: {str(error).splitlines()[0]}{_disk_hint(error, db_path)}"
            ) from None
        raise
    _checkpoint(con, target, db_path)


def _checkpoint(con: duckdb.DuckDBPyConnection, target: str, db_path: str) -> None:
    """Fold the committed write into the database file now rather than when it is closed, where
    a full disk fails without a word: then the table is safe in the write-ahead log, and a
    warning says so and where to free space. Any other failure is left to the close."""
    try:
        con.execute("CHECKPOINT")
    except duckdb.Error as error:
        if not _disk_hint(error, db_path):
            return
        step_logger(__name__).warning(
            "Table \"%s\" was written to '%s' and is safe in its write-ahead log (%s.wal), but "
            "DuckDB could not fold it into the file: %s. Free space in '%s': the next "
            "connection to the file folds it in.",
            target,
            db_path,
            Path(db_path).name,
            str(error).splitlines()[0],
            Path(db_path).resolve().parent,
        )


def _disk_hint(error: BaseException, db_path: str) -> str:
    """What to do about a full disk, when `error` says the disk is full; else nothing."""
    if "no space left" not in str(error).lower():
        return ""
    folder = Path(db_path).resolve().parent
    return (
        f". Free space in '{folder}' (the file grows there, with its .wal and a partitioned "
        "run's .tdm-staging-* folder) and run again"
    )


def _insert_rows(
    con: duckdb.DuckDBPyConnection,
    plan: ImputationPlan,
    part: SourceTable,
    imputed: pd.DataFrame,
    filled: list[FilledColumn],
    into: str,
    *,
    target: TableInfo | None,
) -> int:
    """Insert the rows of `part` (indexed by the source's rowid) into the table `into`, their
    missing cells filled from `imputed`, in rowid order; returns the observed cells proved
    unchanged (copied by DuckDB and checked in their own type before the insert). `target`:
    `into` is the target, so described, and its rows with the new ones must keep the source's
    constraints (`check_constraints`); None: a staging table, checked when published."""
    rowids = part.frame.index.to_numpy(dtype=np.int64)
    frame = imputed_frame(part, plan, imputed, filled)
    frame["r"] = rowids
    src = quote_table(plan.source_table)
    out = "temp.tdm_part_out"
    with register_frame(con, frame, "tdm_part") as view:
        rows = f"{src} AS s JOIN {view} AS i ON s.rowid = i.r"
        _check_aligned(con, part, plan, filled, rows, rowids=f"SELECT r FROM {view}")
        replacements = ", ".join(f"{target_expression(c)} AS {c.quoted}" for c in filled)
        replaced = f" REPLACE ({replacements})" if replacements else ""
        select = f"SELECT s.rowid AS tdm_row, s.*{replaced} FROM {rows} ORDER BY s.rowid"
        con.execute(f"CREATE OR REPLACE TEMP TABLE tdm_part_out AS {_computed(select, part)}")
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
            if target is None:  # a staging table: every column
                insert = f"INSERT INTO {into} SELECT * EXCLUDE (tdm_row) FROM {out}"
            else:
                after = f"(SELECT * EXCLUDE (tdm_row) FROM {out} UNION ALL BY NAME FROM {into})"
                check_constraints(con, part.table, plan.target_table, filled, after)
                columns = _insertable(target)
                insert = f"INSERT INTO {into} ({columns}) SELECT {columns} FROM {out}"
            con.execute(f"{insert} ORDER BY tdm_row")
        finally:
            con.execute(f"DROP TABLE IF EXISTS {out}")
    return observed


def _check_aligned(
    con: duckdb.DuckDBPyConnection,
    part: SourceTable,
    plan: ImputationPlan,
    filled: Sequence[FilledColumn],
    rows: str,
    rowids: str | None = None,
) -> None:
    """`check_alignment`; where the rows do not line up because another process moved them
    (an UPDATE or an INSERT OR REPLACE rewrites a row elsewhere, even with the values it had),
    `ChangedMeanwhileError`: the rows of `part`, read again as they were read, differ. `rowids`:
    a query of the rowids `part.frame` is indexed by (None: it is the whole table, in storage
    order)."""
    try:
        check_alignment(con, plan, filled, rows)
    except QualityCheckError:
        read = columns_sql(list(part.frame.columns), part.table, plan.key)
        sql = f"SELECT {read} FROM {part.table.sql}"
        read_before = part.frame
        if rowids is not None:
            sql += f" WHERE rowid IN ({rowids}) ORDER BY rowid"
            read_before = read_before.sort_index()
        again = con.execute(sql).df()
        if again.equals(read_before.reset_index(drop=True)):
            raise
        raise ChangedMeanwhileError(
            f'Table "{part.table.qualified}" changed while it was being imputed: another process '
            "rewrote rows of it (an UPDATE or an INSERT OR REPLACE moves a row, even one that "
            "keeps its values), so its rows no longer line up with the imputed ones and nothing "
            "was written. Run again."
        ) from None


def _insertable(table: TableInfo) -> str:
    """The quoted columns of `table` an INSERT gives values to: all but the generated ones."""
    return ", ".join(quote_identifier(c.name) for c in table.columns if c.generated is None)


def _no_null_left(
    con: duckdb.DuckDBPyConnection, source: TableInfo, plan: ImputationPlan
) -> tuple[str, ...]:
    """The columns imputed in this write that `source` declares nullable and that hold no NULL
    in the written table now: nullable only for their gaps, they could be declared NOT NULL."""
    columns = [source.column(name) for name in plan.columns if plan.missing.get(name)]
    names = [c.name for c in columns if c is not None and c.nullable]
    if not names:
        return ()
    nulls = ", ".join(f"count(*) FILTER ({quote_identifier(n)} IS NULL)" for n in names)
    counts = con.execute(f"SELECT {nulls} FROM {quote_table(plan.target_table)}").fetchall()[0]
    return tuple(name for name, n in zip(names, counts, strict=True) if n == 0)


def _aligned_rows(
    con: duckdb.DuckDBPyConnection,
    source: SourceTable,
    plan: ImputationPlan,
    filled: Sequence[FilledColumn],
    view: str,
) -> str:
    """The source's rows with the registered frame `view`'s imputed cells filled in, as a FROM
    item, once `_check_aligned` has found that they line up."""
    rows = f"{quote_table(plan.source_table)} AS s POSITIONAL JOIN {view} AS i"
    _check_aligned(con, source, plan, filled, rows)
    values = ", ".join(f"{target_expression(c)} AS {c.quoted}" for c in filled)
    return f"({_computed(f'SELECT s.* REPLACE ({values}) FROM {rows}', source)})"


def check_write(source: SourceTable, plan: ImputationPlan, imputed: pd.DataFrame) -> None:
    """A dry run's share of a whole table's write, on the file opened read-only: the checks
    made before anything is written (rows that line up, imputed cells that fit their column's
    type, the source's constraints on the imputed columns), raising as the write would."""
    if not plan.n_missing:
        return
    filled = filled_columns(source, plan)
    frame = imputed_frame(source, plan, imputed, filled)
    with (
        connect(source.db_path, read_only=True) as con,
        register_frame(con, frame, "tdm_imputed") as view,
    ):
        after = _aligned_rows(con, source, plan, filled, view)
        check_constraints(con, source.table, plan.target_table, filled, after)
        rows = positional(quote_table(plan.source_table), after, view)
        verify_cells(con, plan.target_table, rows, filled)


def _computed(select: str, source: SourceTable) -> str:
    """`select` with each generated column of the source computed again from the columns
    `select` gives (the imputed ones), as the source computes it: never imputed, never stale."""
    generated = [c for c in source.table.columns if c.generated is not None]
    if not generated:
        return select
    computed = ", ".join(f"{c.generated} AS {quote_identifier(c.name)}" for c in generated)
    return f"SELECT * REPLACE ({computed}) FROM ({select})"


def _ensure_record_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Create `tdm_lineage` and `tdm_imputed_cells` where missing, and add the columns newer
    than a file's tables (`schemas.lineage.RECORD_MIGRATIONS`)."""
    con.execute(LINEAGE_DDL)
    con.execute(IMPUTED_CELLS_DDL)
    for statement in RECORD_MIGRATIONS:
        con.execute(statement)


def _check_source_unchanged(con: duckdb.DuckDBPyConnection, source: SourceTable) -> None:
    """Refuse to write if the source's columns or contents differ from what was read."""
    table = find_table(con, source.table.qualified)
    if table != source.table or fingerprint_table(con, table) != source.fingerprint:
        raise ChangedMeanwhileError(  # another process's write: a later run may succeed
            f'Table "{source.table.qualified}" changed while it was being imputed (its columns or '
            "contents differ from what was read), so nothing was written. Run again."
        )


def _log_type_notes(table: str, checks: list[CheckOutcome]) -> None:
    """Log, once per write, which columns' imputed cells were rounded to their type."""
    for check in checks:
        if check.name == "imputed_cell_types":
            step_logger(__name__).info("%s: %s", table, check.detail)


def _record_cells(
    con: duckdb.DuckDBPyConnection,
    source: SourceTable,
    plan: ImputationPlan,
    run_id: str,
    *,
    offset: int,
    table: str = IMPUTED_CELLS_TABLE,
    model_version: int | None = None,
    draws: CellDraws | None = None,
) -> None:
    """One row per imputed cell (numeric, boolean or categorical): run, target, row number
    (0-based: `offset` is that of `source.frame`'s first row), key value, column, the stored
    model version that imputed it (None: none), and what its `draws` show (on `source.frame`'s
    index; None: no draws made), a DECIMAL column's `low` and `high` rounded to its scale as
    its imputed cells are."""
    mask = missing_mask(source.frame, plan.columns).to_numpy()
    rows, cols = np.nonzero(mask)
    shown = {name: np.full(len(rows), np.nan) for name in ("low", "high", "probability")}
    if draws is not None:
        for name in shown:
            at = _at_cells(getattr(draws, name), source.frame.index, plan.columns, rows, cols)
            shown[name] = at
        for j, name in enumerate(plan.columns):
            column = source.table.column(name)
            decimal = DECIMAL_TYPE.fullmatch(column.sql_type) if column is not None else None
            if decimal is not None:
                for end in ("low", "high"):
                    shown[end][cols == j] = np.round(shown[end][cols == j], int(decimal[2]))
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
            **shown,
        }
    )
    cells = ImputedCellsSchema.validate(cells)
    with register_frame(con, cells, "tdm_cells") as view:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {view}")


def _at_cells(
    frame: pd.DataFrame,
    index: pd.Index,
    columns: Sequence[str],
    rows: np.ndarray,
    cols: np.ndarray,
) -> np.ndarray:
    """`frame`'s values at the cells (`rows`, `cols`) of a frame with `index` and `columns`
    (NaN in a column `frame` lacks)."""
    aligned = frame.reindex(index=index, columns=list(columns)).to_numpy(dtype=np.float64)
    return aligned[rows, cols]


def _stage_name(con: duckdb.DuckDBPyConnection) -> str:
    """The name the staging file is attached under: `tdm_stage`, or `tdm_stage_<n>` where the
    warehouse (named after its file) or one of its schemas is called so."""
    taken = {
        str(name).lower()
        for (name,) in con.execute(
            "SELECT database_name FROM duckdb_databases() UNION ALL "
            "SELECT schema_name FROM duckdb_schemas()"
        ).fetchall()
    }
    return next(
        name for n in itertools.count() if (name := f"{_STAGE}_{n}" if n else _STAGE) not in taken
    )


def _create_like(con: duckdb.DuckDBPyConnection, source: TableInfo, target: str) -> None:
    """Create (or replace) the table `target` (quoted) with the definition of `source`
    (`target_definition`) and its columns' comments."""
    con.execute(target_definition(source.definition, target))
    for column, comment in column_comments(con, source):
        text = str(comment).replace("'", "''")
        con.execute(f"COMMENT ON COLUMN {target}.{quote_identifier(column)} IS '{text}'")


def insert_lineage(con: duckdb.DuckDBPyConnection, lineage: LineageRecord) -> None:
    """Add the lineage row of `lineage`, stamped with the time now as its finish."""
    row = lineage.to_frame(finished_at=datetime.now(UTC))
    with register_frame(con, row, "tdm_lineage") as view:
        con.execute(f"INSERT INTO {LINEAGE_TABLE} BY NAME SELECT * FROM {view}")
