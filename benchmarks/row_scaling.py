"""Wall time and peak memory of the impute-table flow against the table's rows, with threads
and with a local Dask cluster, each run in a fresh process.

Run: ``OMP_NUM_THREADS=1 python -m benchmarks.row_scaling --write``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._timing import command, events, header, publish, start_prefect, write_events

N_NUMERIC = 8


def child(db: str, runner: str) -> None:
    """One timed flow run in this process; prints a JSON line."""
    from flows.impute_table import impute_table

    start_prefect(None)
    started = time.perf_counter()
    result = impute_table("events", db_path=db, key="event_id")
    wall = time.perf_counter() - started
    mine = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        "RESULT "
        + json.dumps(
            {
                "runner": runner,
                "wall": wall,
                "flow_mb": mine,
                "child_mb": children,
                "cells": sum(result.cells_imputed.values()),
                "seconds": result.seconds,
            }
        ),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", default="10000,100000,1000000,3000000")
    parser.add_argument("--runners", default="threads,dask")
    parser.add_argument("--max-fit-rows", type=int, default=20_000)
    parser.add_argument("--partition-rows", type=int, default=50_000)
    parser.add_argument("--max-iter", type=int, default=500)
    parser.add_argument(
        "--transform-max-iter", type=int, help="steps per partition (default: the library's)"
    )
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    parser.add_argument("--child", nargs=2, metavar=("DB", "RUNNER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    wrong = [name for name in args.runners.split(",") if name not in ("threads", "dask")]
    if wrong:
        parser.error(f"--runners takes threads,dask; got {wrong[0]!r}")
    if not all(part.strip().isdigit() for part in args.rows.split(",")):
        parser.error(f"--rows takes comma-separated row counts; got {args.rows!r}")

    env = {
        **os.environ,
        "TDM_MAX_FIT_ROWS": str(args.max_fit_rows),
        "TDM_PARTITION_ROWS": str(args.partition_rows),
        "TDM_MAX_ITER": str(args.max_iter),
        "TDM_MAX_WORKERS": "2",
        "TDM_DASK_WORKERS": "2",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    if args.transform_max_iter is not None:
        env["TDM_TRANSFORM_MAX_ITER"] = str(args.transform_max_iter)
    steps = (
        "transform's default steps: none after the trees start"
        if args.transform_max_iter is None
        else f"{args.transform_max_iter} steps each"
    )
    rows_out = []
    with tempfile.TemporaryDirectory(prefix="tdm-scaling-") as tmp:
        env["PREFECT_HOME"] = tmp
        for rows in [int(r) for r in args.rows.split(",")]:
            runners = args.runners.split(",")
            if rows <= args.max_fit_rows:  # one fit in the flow's process: no runner involved
                runners = runners[:1]
            for runner in runners:
                db = Path(tmp) / f"events_{rows}_{runner}.duckdb"
                write_events(db, events(0, rows, n_numeric=N_NUMERIC, seed=0, dates_and_flags=True))
                done = subprocess.run(
                    [sys.executable, "-m", "benchmarks.row_scaling", "--child", str(db), runner],
                    env={**env, "TDM_TASK_RUNNER": runner},
                    capture_output=True,
                    text=True,
                    check=False,
                )
                line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
                if done.returncode or not line:
                    sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
                    raise SystemExit(f"run failed: {rows} rows on {runner}")
                measured = json.loads(line[0][len("RESULT ") :])
                db_mb = db.stat().st_size / 2**20
                db.unlink()
                rows_out.append((rows, measured, db_mb))
                print(rows, measured, flush=True)

    lines = [
        *header(command("row_scaling")),
        f"Table: {N_NUMERIC} numeric columns (20% missing) + key + 3 pass-through columns. "
        f"Tables over {args.max_fit_rows:,} rows: fit on a sample of {args.max_fit_rows:,} rows "
        f"({args.max_iter} steps), then partitions of {args.partition_rows:,} rows "
        f"({steps}), 2 at a time (+1 being read or written); "
        f"smaller tables: one fit of {args.max_iter} steps. Threads: 2 in the flow's process; "
        "Dask: a local cluster of 2 worker processes, 1 thread each. Peak memory: resident set "
        "of the flow's process, and of its largest child process (Prefect's temporary server "
        "or a Dask worker). DuckDB's memory limit: the default of "
        "`TDM_DUCKDB_MEMORY_LIMIT` (256MB).",
        "",
        "| rows | runner | wall s | rows / s | flow peak MB | worker peak MB | fit s | "
        "partitions: impute + check + write s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rows, m, _ in rows_out:
        sec = m["seconds"]
        fit = sec.get("fit", sec.get("impute", 0.0))
        rest = sec.get("impute-check-write")
        runner = m["runner"] if rest is not None else "none (one fit)"
        lines.append(
            f"| {rows:,} | {runner} | {m['wall']:.1f} | {rows / m['wall']:,.0f} | "
            f"{m['flow_mb']:.0f} | {m['child_mb']:.0f} | {fit:.1f} | "
            f"{'' if rest is None else f'{rest:.1f}'} |"
        )
    publish(
        "Scaling: rows, threads against a local Dask cluster", "\n".join(lines), write=args.write
    )


if __name__ == "__main__":
    main()
