"""Wall time of the impute-table flow: the model fit against the rest, per task.

Run: ``python -m benchmarks.flow_overhead --rows 20000 --max-iter 10000 --torch-threads 1``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from benchmarks._timing import command, events, header, publish, start_prefect, write_events


def step_seconds(flow_run_id: str) -> dict[str, float]:
    """Seconds each task run of the flow run took, from the Prefect API."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[UUID(flow_run_id)]))
        )
    ordered = sorted(runs, key=lambda r: r.start_time or datetime.max.replace(tzinfo=UTC))
    return {r.name.rsplit("-", 1)[0]: r.total_run_time.total_seconds() for r in ordered}


def main() -> None:
    """Build the table, run the flow, print the markdown section."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--numeric-columns", type=int, default=10)
    parser.add_argument("--missing-rate", type=float, default=0.2)
    parser.add_argument("--max-iter", type=int, default=10_000)
    parser.add_argument("--torch-threads", type=int, default=None)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md too")
    args = parser.parse_args()
    start_prefect(args.torch_threads)
    from flows.impute_table import impute_table

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        table = events(
            0,
            args.rows,
            n_numeric=args.numeric_columns,
            seed=args.seed,
            missing_rate=args.missing_rate,
            dates_and_flags=True,
        )
        write_events(db, table)
        params = {"max_iter": args.max_iter, "device": args.device}
        started = time.perf_counter()
        result = impute_table("events", db_path=db, key="event_id", imputer=params, seed=0)
        total = time.perf_counter() - started
    body = report(args, result, total, step_seconds(result.run_id))
    publish(f"Pipeline timing: impute-table on a {args.rows:,}-row table", body, write=args.write)


def report(args: argparse.Namespace, result: Any, total: float, steps: dict[str, float]) -> str:
    """The markdown body: command, machine, table, and seconds per step, fit against the rest."""
    fit = result.fit_seconds
    rest = total - fit
    cells = sum(result.cells_imputed.values())
    lines = [
        *header(command("flow_overhead"), result.device),
        "",
        f"Table: {args.rows:,} rows, {args.numeric_columns} numeric columns with {cells:,} cells "
        "missing, a key, and text, date and boolean columns. One fresh process; Prefect's server "
        f"already up; {result.n_iter:,} iterations at batch size 512.",
        "",
        "| step | seconds |",
        "|---|---:|",
        *(f"| {name} | {seconds:.2f} |" for name, seconds in steps.items()),
        f"| **flow wall time** | **{total:.2f}** |",
        f"| model fit (`TDMImputer.fit_transform`) | {fit:.2f} ({fit / total:.1%}) |",
        f"| everything else | {rest:.2f} ({rest / total:.1%}) |",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
