"""`tdm records prune`: delete the imputed-cell records that no longer describe any table."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = ["add_records_command"]

KEEP_DAYS = 30
"""How many days `prune` keeps every run's cells, superseded or not."""


def add_records_command(subparsers: argparse._SubParsersAction) -> None:
    """Register `records` and its `prune` action on the `tdm` parser."""
    records = subparsers.add_parser(
        "records",
        help="prune tdm_imputed_cells: delete the cells of runs whose targets were written "
        "anew or dropped since",
        description="Every run lists the cells it imputed in tdm_imputed_cells; a nightly run "
        "that writes a table anew leaves the cells of the run before describing a table that "
        "is gone. `prune` deletes those (tdm_lineage keeps every run's row).",
    )
    actions = records.add_subparsers(dest="action", metavar="ACTION", required=True)
    prune = actions.add_parser(
        "prune",
        help="delete the imputed cells of runs whose target a later run wrote anew or that "
        "was dropped; the cells of incremental appends to the standing target, of sources "
        "updated in place and of recent runs are kept",
    )
    prune.add_argument("--db", type=Path, help="DuckDB file [env TDM_DB_PATH; warehouse.duckdb]")
    prune.add_argument(
        "--keep-days",
        type=float,
        default=KEEP_DAYS,
        help=f"keep the cells of runs that finished in the last N days [{KEEP_DAYS}]",
    )
    prune.add_argument(
        "--dry-run", action="store_true", help="say what would be deleted; delete nothing"
    )
    records.set_defaults(handler=_prune)


def _prune(args: argparse.Namespace) -> int:
    from flows.settings import PipelineSettings
    from tasks.errors import PipelineInputError
    from tasks.records import delete_cells, superseded_cells
    from tasks.warehouse.access import check_writable
    from tasks.warehouse.tables import connect
    from tasks.write import transaction

    if not args.keep_days >= 0:
        raise PipelineInputError(f"--keep-days must be 0 or more; got {args.keep_days:g}.")
    db = args.db if args.db is not None else PipelineSettings.from_env().db_path
    try:
        before = datetime.now(UTC) - timedelta(days=args.keep_days)
    except OverflowError:  # more days than dates: every run is kept
        before = datetime.min.replace(tzinfo=UTC)
    if not args.dry_run:
        check_writable(db, refused="No record was deleted")
    with connect(db, read_only=args.dry_run) as con:
        runs = superseded_cells(con, before)
        cells = sum(run.cells for run in runs)
        if runs and not args.dry_run:
            with transaction(con, "tdm_imputed_cells", str(db)):
                cells = delete_cells(con, runs)
    by_target: dict[str, list[Any]] = {}
    for run in runs:  # a line per target, its runs oldest first
        by_target.setdefault(run.target_table, []).append(run)
    for target, its in by_target.items():
        last = its[-1]
        why = f"written anew by run {last.by}" if last.by else "the table no longer exists"
        which = (
            f"run {last.run_id} ({last.finished_at:%Y-%m-%d %H:%M})"
            if len(its) == 1
            else f"{len(its):,} runs ({its[0].finished_at:%Y-%m-%d} to {last.finished_at:%Y-%m-%d})"
        )
        print(f"  {target}: {sum(r.cells for r in its):,} cells of {which}; {why}")
    kept = f"runs of the last {args.keep_days:g} days and cells still describing a table kept"
    what = f"{cells:,} tdm_imputed_cells rows of {len(runs):,} run{'s' * (len(runs) != 1)}"
    if args.dry_run:
        print(f"Dry run: would delete {what} from {db} ({kept}); nothing was deleted.")
    else:
        print(f"Deleted {what} from {db} ({kept}; tdm_lineage keeps every run's row).")
    return 0
