"""Nightly cost against table size: a full refit (today's non-incremental run) against an
incremental run, when 1% new rows arrive on a table of 10^5 to 10^6 rows.

Run from the repository root; prints a markdown section (`--write` also puts it in BENCHMARKS.md):

    python -m benchmarks.nightly --rows 100000,1000000 --torch-threads 1

For each size, in a fresh DuckDB file: a seeded table `events` (a key, `--numeric-columns`
correlated numeric columns with 20% of cells missing at random, and a text column that passes
through); a first incremental run (it fits and stores model version 1); then 1% new rows from the
same distribution are appended and the night is timed both ways: the incremental run (stored
model, new rows only) and a full run into a second target (fit and impute every row, as a
non-incremental schedule does each night). Each run's wall time is taken from the call to the
flow to its return, with Prefect's server already up. `--init` picks the start of the fits (ICE by
default here: the default's forest start on 10^5 rows costs minutes per fit on one core, and is
the same in both columns).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from benchmarks._prefect import start_prefect

LATENT = 3
NEW_SHARE = 0.01


def make_rows(start: int, count: int, n_numeric: int, seed: int) -> pd.DataFrame:
    """Rows ``start .. start + count - 1`` of the seeded table: the column loadings come from
    ``seed`` alone, so later batches follow the same distribution as the first."""
    loadings = np.random.default_rng(seed).normal(size=(LATENT, n_numeric))
    rng = np.random.default_rng([seed, start])
    numeric = rng.normal(size=(count, LATENT)) @ loadings
    numeric += 0.3 * rng.normal(size=(count, n_numeric))
    numeric[rng.random(numeric.shape) < 0.2] = np.nan
    frame = pd.DataFrame(numeric * 10 + 100, columns=[f"x{j}" for j in range(n_numeric)])
    frame.insert(0, "event_id", np.arange(start, start + count, dtype=np.int64))
    frame["region"] = rng.choice(["north", "south", "east", "west"], count)
    return frame


def load(path: Path, frame: pd.DataFrame, *, create: bool) -> None:
    with duckdb.connect(str(path)) as con:
        con.register("frame", frame)
        if create:
            con.execute("CREATE TABLE events AS SELECT * FROM frame")
        else:
            con.execute("INSERT INTO events SELECT * FROM frame")


def night(rows: int, args: argparse.Namespace, params: Any) -> dict[str, Any]:
    """Time the first run and both kinds of night on a table of ``rows`` rows."""
    from flows.impute_table import impute_table

    new = max(1, int(rows * NEW_SHARE))
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "nightly.duckdb"
        load(db, make_rows(0, rows, args.numeric_columns, args.seed), create=True)
        common = {"db_path": db, "key": "event_id", "imputer": params, "seed": 0}
        clock = time.perf_counter()
        first = impute_table("events", incremental=True, **common)
        first_s = time.perf_counter() - clock
        load(db, make_rows(rows, new, args.numeric_columns, args.seed), create=False)
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


def report(args: argparse.Namespace, results: list[dict[str, Any]], threads: int) -> str:
    import torch

    command = f"python -m benchmarks.nightly --rows {args.rows} --init {args.init}"
    if args.torch_threads is not None:
        command += f" --torch-threads {args.torch_threads}"
    lines = [
        f"Command: `{command}`; {datetime.now(UTC):%Y-%m-%d}.",
        f"Machine: {os.cpu_count()} CPU cores ({platform.machine()}), torch {torch.__version__} "
        f"on {threads} thread(s).",
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="100000,1000000", help="comma-separated table sizes")
    parser.add_argument("--numeric-columns", type=int, default=8)
    parser.add_argument("--init", default="ice", choices=["auto", "ice", "forest", "mean"])
    parser.add_argument("--torch-threads", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md too")
    args = parser.parse_args()
    start_prefect(args.torch_threads)
    import torch

    params = {"init": args.init}
    results = []
    for rows in (int(r) for r in args.rows.split(",")):
        results.append(night(rows, args, params))
        print(results[-1], flush=True)
    title = "Nightly cost: full refit against incremental runs"
    body = report(args, results, torch.get_num_threads())
    if args.write:
        from benchmarks._report import replace_section

        replace_section(title, body)
    print(f"## {title}\n\n{body}")


if __name__ == "__main__":
    main()
