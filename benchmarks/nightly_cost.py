"""Nightly cost against table size: a full refit against an incremental run, when 1% new rows
arrive.

Run: ``python -m benchmarks.nightly_cost --rows 100000,1000000 --torch-threads 1 [--write]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._timing import command, events, header, publish, start_prefect, write_events
from tdm.imputer import INITS

NEW_SHARE = 0.01


def night(rows: int, args: argparse.Namespace, params: Any) -> dict[str, Any]:
    """Time the first run and both kinds of night on a table of ``rows`` rows."""
    from flows.impute_table import impute_table

    new = max(1, int(rows * NEW_SHARE))
    columns = {"n_numeric": args.numeric_columns, "seed": args.seed}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "nightly.duckdb"
        write_events(db, events(0, rows, **columns))
        common = {"db_path": db, "key": "event_id", "imputer": params, "seed": 0}
        clock = time.perf_counter()
        first = impute_table("events", incremental=True, **common)
        first_s = time.perf_counter() - clock
        write_events(db, events(rows, new, **columns), create=False)
        clock = time.perf_counter()
        increment = impute_table("events", incremental=True, **common)
        increment_s = time.perf_counter() - clock
        clock = time.perf_counter()
        full = impute_table("events", target_table="events_full", **common)
        full_s = time.perf_counter() - clock
    if increment.model_version != first.model_version or increment.rows_new != new:
        raise SystemExit(
            f"the incremental night did not reuse model {first.model_version} for {new} new rows: "
            f"model {increment.model_version}, {increment.rows_new} new rows"
        )
    return {
        "rows": rows,
        "new": new,
        "first_s": first_s,
        "incremental_s": increment_s,
        "full_s": full_s,
        "full_rows": full.rows,
    }


def report(args: argparse.Namespace, results: list[dict[str, Any]]) -> str:
    """The markdown body: command, machine, table, and the seconds of each kind of night."""
    lines = [
        *header(command("nightly_cost")),
        "",
        f"Table: a key, {args.numeric_columns} numeric columns (20% missing) and a text column; "
        f"each night adds {NEW_SHARE:.0%} new rows. Imputer: the defaults with `init="
        f'"{args.init}"` (2,000 steps). Wall seconds of each flow run.',
        "",
        "| existing rows | new rows | first run (fit + store) s | full refit night s "
        "| incremental night s | full / incremental |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['rows']:,} | {r['new']:,} | {r['first_s']:.1f} | {r['full_s']:.1f} | "
            f"{r['incremental_s']:.1f} | **{r['full_s'] / r['incremental_s']:.1f}x** |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="100000,1000000", help="comma-separated table sizes")
    parser.add_argument("--numeric-columns", type=int, default=8)
    parser.add_argument("--init", default="auto", choices=INITS)
    parser.add_argument("--torch-threads", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md too")
    args = parser.parse_args()
    start_prefect(args.torch_threads)
    params = {"init": args.init}
    results = []
    for rows in (int(r) for r in args.rows.split(",")):
        results.append(night(rows, args, params))
        print(results[-1], flush=True)
    title = "Nightly cost: full refit against incremental runs"
    publish(title, report(args, results), write=args.write)


if __name__ == "__main__":
    main()
