"""Whole-table runs that would write what their target holds already: found, and recorded
instead of fitted again.

A run that writes a whole target records its recipe (`LineageRecord.recipe` with the source's
definition: all that shapes the target but the source's contents) and the target's
fingerprint. A later run with the same recipe leaves the target as it is when the source's
fingerprint is the one that run read, no run has written the target since, and the target
still carries that run's marker and fingerprint (nobody changed it). Such a run adds a lineage
row, status "unchanged", that repeats that run's record, and no imputed cells: the ones listed
under the run that wrote the target describe it still.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

import duckdb

from schemas.lineage import LINEAGE_TABLE
from tasks.lineage import RunInfo, table_recipe
from tasks.retry import warehouse_task
from tasks.targets import marked_run, table_comment
from tasks.warehouse.names import same_table
from tasks.warehouse.tables import (
    column_comments,
    connect,
    find_table,
    fingerprint_table,
    written_state,
)
from tasks.write import transaction

__all__ = ["UNCHANGED", "Unchanged", "find_unchanged", "record_unchanged", "unchanged_target"]

UNCHANGED = "unchanged"
"""The `status` of a run that left its target as an earlier run wrote it."""


@dataclass(frozen=True)
class Unchanged:
    """The earlier run whose target stands: the lineage row found (`run_id`), the run that
    wrote the target (`written_by`, named by its marker), and the target's name, rows and
    imputed cells per column as that row records them."""

    run_id: str
    written_by: str
    target_table: str
    rows: int
    cells_imputed: dict[str, int]


def find_unchanged(
    con: duckdb.DuckDBPyConnection, source_table: str, recipe: str
) -> Unchanged | None:
    """The latest run with `recipe` whose target a run with it would write again as it is
    (see the module's docstring); None when there is none, the file's lineage predates
    recipes, or the source has a column named rowid (which hides its rows' order)."""
    lineage = find_table(con, LINEAGE_TABLE, whole_name=False)
    source = find_table(con, source_table)
    if lineage is None or lineage.column("recipe_hash") is None or source is None:
        return None
    if source.column("rowid") is not None:  # it hides the row order (`fingerprint_table`)
        return None
    now = fingerprint_table(con, source)
    found = con.execute(
        f"SELECT run_id, finished_at, target_table, source_rows, source_hash, target_marker, "
        f'target_hash, "rows", cells_imputed FROM {LINEAGE_TABLE} WHERE recipe_hash = ? '
        "ORDER BY finished_at DESC LIMIT 1",
        [table_recipe(recipe, source, now)],
    ).fetchall()
    if not found:
        return None
    run_id, finished, target, source_rows, source_hash, marker, target_hash, rows, cells = found[0]
    later = con.execute(
        f"SELECT target_table FROM {LINEAGE_TABLE} WHERE finished_at > ? OR "
        "(finished_at = ? AND run_id <> ?)",
        [finished, finished, run_id],
    ).fetchall()
    written = find_table(con, target, whole_name=False)
    if (
        any(same_table(name, target) for (name,) in later)
        or written is None
        or (now.rows, now.content_hash) != (source_rows, source_hash)
        or table_comment(con, target) != marker
        or column_comments(con, written) != column_comments(con, source)
        or written_state(con, written) != target_hash
    ):
        return None
    return Unchanged(
        run_id=run_id,
        written_by=marked_run(marker) or run_id,
        target_table=target,
        rows=int(rows),
        cells_imputed={str(k): int(v) for k, v in json.loads(cells).items()},
    )


@warehouse_task("check-unchanged")
def unchanged_target(db_path: str, source_table: str, recipe: str) -> Unchanged | None:
    """`find_unchanged` on a read-only connection."""
    with connect(db_path, read_only=True) as con:
        return find_unchanged(con, source_table, recipe)


@warehouse_task("record-unchanged")
def record_unchanged(
    db_path: str, source_table: str, recipe: str, run: RunInfo
) -> Unchanged | None:
    """In one transaction: `find_unchanged` again and, if it still finds a run, the lineage row
    of `run` leaving its target unchanged (a copy of that run's row with `run`'s id, flow,
    deployment and times, status "unchanged" and no fit; none when the row found is `run`'s
    own, written by an earlier attempt of it); that run, or None (then nothing was written:
    the target changed meanwhile)."""
    with connect(db_path, read_only=False) as con:
        found: Unchanged | None = None
        with transaction(con, LINEAGE_TABLE, db_path):
            found = find_unchanged(con, source_table, recipe)
            if found is not None and found.run_id != run.run_id:
                con.execute(
                    f"INSERT INTO {LINEAGE_TABLE} BY NAME SELECT * REPLACE (? AS run_id, "
                    "? AS flow_name, ? AS deployment_name, ? AS started_at, ? AS finished_at, "
                    "? AS status, NULL AS device, NULL AS n_iter, NULL AS final_loss, "
                    f"NULL AS fit_seconds) FROM {LINEAGE_TABLE} WHERE run_id = ? AND "
                    "target_table = ? LIMIT 1",
                    [
                        run.run_id,
                        run.flow_name,
                        run.deployment_name,
                        run.started_at,
                        datetime.now(UTC),
                        UNCHANGED,
                        found.run_id,
                        found.target_table,
                    ],
                )
        return found
