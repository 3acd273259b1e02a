"""The rows of `tdm_imputed_cells` that no longer describe any table, which `tdm records prune`
deletes.

A run's imputed cells describe its target until a later run writes that target anew (the
target's marker then names the later run) or the target is dropped. The rows an incremental
run appends keep the marker of the run that wrote the target, so their cells stay with it; the
cells of a source updated in place describe it for good, and so do those of a target whose
comment names no run (one written before markers, or replaced by hand): those are kept.
`tdm_lineage` rows are never deleted: they are the record of every run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb
import pandas as pd

from schemas.lineage import IMPUTED_CELLS_TABLE, LINEAGE_TABLE, RECORD_COLUMNS
from tasks.targets import check_record_tables, marked_run, table_comment
from tasks.warehouse.names import parse_table_name
from tasks.warehouse.tables import find_table, register_frame

__all__ = ["Superseded", "delete_cells", "superseded_cells"]


@dataclass(frozen=True)
class Superseded:
    """The imputed cells of one run on one target that describe it no more, and why: `by`, the
    run that wrote the target anew (None: the target no longer exists)."""

    run_id: str
    target_table: str
    finished_at: datetime
    cells: int
    by: str | None


def superseded_cells(con: duckdb.DuckDBPyConnection, before: datetime) -> list[Superseded]:
    """The runs (oldest first) that finished before `before` whose imputed cells no longer
    describe their target (see the module's docstring); none when the file has no record. A
    record table that is not the pipeline's is refused (`check_record_tables`)."""
    check_record_tables(con)
    if any(find_table(con, t, whole_name=False) is None for t in RECORD_COLUMNS):
        return []
    runs = con.execute(
        f"SELECT c.run_id, c.target_table, count(*), l.finished_at, l.target_marker "
        f"FROM {IMPUTED_CELLS_TABLE} c JOIN {LINEAGE_TABLE} l ON l.run_id = c.run_id AND "
        "l.target_table = c.target_table AND NOT l.replaced_source WHERE l.finished_at < ? "
        "GROUP BY ALL ORDER BY 4, 2",
        [before],
    ).fetchall()
    markers = {
        comment
        for (comment,) in con.execute(
            "SELECT comment FROM duckdb_tables() WHERE database_name = current_database()"
        ).fetchall()
    }
    writers: dict[tuple[str, str], tuple[str, datetime | None] | None] = {}
    found = []
    for run_id, target, cells, finished, marker in runs:
        key = parse_table_name(target).key
        if key not in writers:
            writers[key] = _writer(con, target)
        writer = writers[key]
        if writer is None and marker not in markers:  # dropped, not renamed
            found.append(Superseded(run_id, target, finished, int(cells), None))
        elif writer and writer[1] is not None and writer[0] != run_id and writer[1] > finished:
            found.append(Superseded(run_id, target, finished, int(cells), writer[0]))
    return found


def delete_cells(con: duckdb.DuckDBPyConnection, runs: list[Superseded]) -> int:
    """Delete the imputed cells of `runs`, in one statement; how many rows went."""
    gone = pd.DataFrame(
        {"run_id": [r.run_id for r in runs], "target_table": [r.target_table for r in runs]}
    )
    with register_frame(con, gone, "tdm_superseded") as view:
        return int(
            con.execute(
                f"DELETE FROM {IMPUTED_CELLS_TABLE} c USING {view} g WHERE c.run_id = g.run_id "
                "AND c.target_table = g.target_table"
            ).fetchall()[0][0]
        )


def _writer(con: duckdb.DuckDBPyConnection, target: str) -> tuple[str, datetime | None] | None:
    """The run that wrote the table `target` as it stands and when it finished (None: its
    comment names no run that wrote it whole, and every run's cells are kept: a target
    written before markers gets its first marker from an incremental run's append); None
    when the table no longer exists."""
    if find_table(con, target, whole_name=False) is None:
        return None
    run = marked_run(table_comment(con, target))
    rows = con.execute(
        f"SELECT target_table, finished_at FROM {LINEAGE_TABLE} WHERE run_id = ? AND "
        "status <> 'appended'",
        [run],
    ).fetchall()
    key = parse_table_name(target).key
    times = [finished for name, finished in rows if parse_table_name(name).key == key]
    return run or "", min(times, default=None)
