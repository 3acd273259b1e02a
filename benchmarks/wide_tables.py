"""Whether TDM's steps hurt as the table widens (issue 17): the default's start alone against the
default, and fewer steps, on synthetic tables of known structure with D = 8 to 100 columns and on
parkinsons (23 columns; anuran_calls, 22 columns and a large table, is in ``benchmarks.safeguard``).

Run: ``python -m benchmarks.wide_tables [--seeds 0,1] [--write]`` (one torch thread). Selection
masks only: 30% MCAR, seeds 0-1. The synthetic table: 2,000 rows driven by 4 latent factors,
each column a random smooth nonlinear function of them (``tanh`` of a random projection, plus a
random quadratic term) with noise of 0.1 standard deviation, then standardised.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from benchmarks._report import replace_section
from tdm import TDMImputer
from tdm.datasets import load_dataset
from tdm.metrics import mae
from tdm.simulate import simulate_mcar

SECTION = "Wide tables (selection masks)"
OUT = Path(__file__).resolve().parent.parent / "results" / "wide_tables"
WIDTHS = (8, 20, 40, 100)
#: Fits compared: the start alone, the default (2,000 steps) and 500 steps.
FITS = {"start alone": {"max_iter": 0}, "default": {}, "500 steps": {"max_iter": 500}}


def synthetic(width: int, seed: int, n: int = 2_000, factors: int = 4) -> np.ndarray:
    """A standardised ``n`` x ``width`` table of smooth nonlinear functions of latent factors."""
    rng = np.random.default_rng([width, seed])
    latent = rng.standard_normal((n, factors))
    linear = latent @ rng.standard_normal((factors, width)) / np.sqrt(factors)
    quadratic = (latent @ rng.standard_normal((factors, width)) / np.sqrt(factors)) ** 2
    X = np.tanh(linear) + 0.3 * quadratic + 0.1 * rng.standard_normal((n, width))
    return (X - X.mean(axis=0)) / X.std(axis=0)


def tables(seed: int) -> dict[str, np.ndarray]:
    out = {f"synthetic D={d}": synthetic(d, seed) for d in WIDTHS}
    out["parkinsons"] = load_dataset("parkinsons").X
    return out


def run(seeds: list[int]) -> pd.DataFrame:
    rows = []
    for seed in seeds:
        for name, X in tables(seed).items():
            mask = simulate_mcar(X, 0.3, random_state=seed)
            holes = np.where(mask, np.nan, X)
            for fit, params in FITS.items():
                started = time.perf_counter()
                out = TDMImputer(random_state=seed, **params).fit_transform(holes)
                seconds = time.perf_counter() - started
                rows.append((name, X.shape[1], seed, fit, mae(X, out, mask), seconds))
                print(rows[-1], file=sys.stderr, flush=True)
    return pd.DataFrame(rows, columns=["table", "columns", "seed", "fit", "mae", "seconds"])


def report(results: pd.DataFrame) -> str:
    means = results.groupby(["columns", "table", "fit"], sort=True)[["mae", "seconds"]].mean()
    seeds = sorted(results.seed.unique())
    lines = [
        "Command: `python -m benchmarks.wide_tables --seeds 0,1 --write`  ",
        f"Date: {date.today().isoformat()}; machine: {platform.machine()}, 1 torch thread, "
        "beside another single-threaded process on 2 cores.  ",
        f"30% MCAR, seeds {', '.join(map(str, seeds))}; MAE (standardised units) and seconds "
        "per fit, mean over seeds. The default's own start (`max_iter=0`), the default "
        "(2,000 steps), and 500 steps.",
        "",
        "| table | columns | " + " | ".join(f"{f} MAE" for f in FITS) + " | default s |",
        "|---|---|" + "---|" * (len(FITS) + 1),
    ]
    for (columns, table), group in means.groupby(level=[0, 1], sort=True):
        values = group.droplevel([0, 1])
        cells = " | ".join(f"{values.loc[f, 'mae']:.4f}" for f in FITS)
        lines.append(f"| {table} | {columns} | {cells} | {values.loc['default', 'seconds']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--write", action="store_true", help="write the table to BENCHMARKS.md")
    parser.add_argument(
        "--report-only", action="store_true", help="run nothing; report the recorded rows"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        results = pd.read_csv(OUT / "wide_tables.csv")
    else:
        results = run([int(s) for s in args.seeds.split(",")])
        results.to_csv(OUT / "wide_tables.csv", index=False)
    text = report(results)
    print(text)
    if args.write:
        replace_section(SECTION, text)


if __name__ == "__main__":
    main()
