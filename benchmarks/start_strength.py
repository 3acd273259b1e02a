"""How strong the forest start should be: the light forest's trees and rounds against the
default TDM's accuracy and cost, on the large tables where MissForest leads (issue 17).

Run: ``python -m benchmarks.start_strength --datasets letter --seeds 0,1`` (one process per
dataset may run beside another: each writes ``results/start_strength/<dataset>.csv``), then
``python -m benchmarks.start_strength --write`` to put every recorded row in BENCHMARKS.md.
Selection masks only (30% MCAR, seeds 0-1). For each forest size (trees, rounds), the start
alone (``init="forest"``, ``max_iter=0``), TDM from it (``init="forest"``, so no safeguard) and
the default with that forest (``init="auto"``, safeguard on: ``--fits start,auto``), and the
probe run's start (``blind``: ``init="auto"``, ``max_iter=0``, ``safeguard=False``; on a large
table the run that chose it, blind to its probe cells: tdm 0.9's default start), with the
wall time of each, one torch thread. ``--sizes 100x6,100x2w5`` picks the forests: trees x
rounds, and ``wN``: N warm-up rounds of 20 trees before them (``forest_warm_rounds``).
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

SECTION = "Forest start size (selection masks)"
OUT = Path(__file__).resolve().parent.parent / "results" / "start_strength"
SIZES = ((20, 3, 0), (60, 3, 0), (20, 8, 0), (100, 4, 0))


FITS: dict[str, dict[str, object]] = {
    "start": {"init": "forest", "max_iter": 0},
    "tdm": {"init": "forest"},
    "auto": {"init": "auto"},
    "blind": {"init": "auto", "max_iter": 0, "safeguard": False},
}


def run(
    name: str,
    seeds: list[int],
    sizes: tuple[tuple[int, int, int], ...] = SIZES,
    fits: tuple[str, ...] = ("start", "tdm"),
) -> pd.DataFrame:
    X = load_dataset(name).X
    rows = []
    for seed in seeds:
        mask = simulate_mcar(X, 0.3, random_state=seed)
        holes = np.where(mask, np.nan, X)
        for trees, rounds, warm in sizes:
            for label in fits:
                params = {
                    **FITS[label],
                    "forest_trees": trees,
                    "forest_rounds": rounds,
                    "forest_warm_rounds": warm,
                }
                started = time.perf_counter()
                out = TDMImputer(random_state=seed, **params).fit_transform(holes)
                seconds = time.perf_counter() - started
                rows.append((name, seed, trees, rounds, warm, label, mae(X, out, mask), seconds))
                print(rows[-1], file=sys.stderr, flush=True)
    return pd.DataFrame(
        rows, columns=["dataset", "seed", "trees", "rounds", "warm", "fit", "mae", "seconds"]
    )


def report() -> str:
    frames = [pd.read_csv(p) for p in sorted(OUT.glob("*.csv"))]
    results = pd.concat(frames, ignore_index=True)
    results["warm"] = results.get("warm", pd.Series(0, index=results.index)).fillna(0).astype(int)
    keys = ["dataset", "trees", "rounds", "warm", "fit"]
    means = results.groupby(keys)[["mae", "seconds"]].mean()
    seeds = sorted(results.seed.unique())
    lines = [
        "Command: `python -m benchmarks.start_strength --datasets NAME --seeds 0,1` per dataset, "
        "then `python -m benchmarks.start_strength --write`  ",
        f"Date: {date.today().isoformat()}; machine: {platform.machine()}, 1 torch thread "
        "(two datasets' processes at once on 2 cores).  ",
        f"30% MCAR, seeds {', '.join(map(str, seeds))}; MAE and seconds per fit, mean over "
        'seeds; the start alone (`init="forest"`, `max_iter=0`), TDM from it (2,000 steps, no '
        'safeguard), the default with that forest (`init="auto"`, safeguard on), and the '
        "probe run's start (`max_iter=0`, `safeguard=False`; on a large table blind to its 2,000 "
        "probe cells: tdm 0.9's default start, tdm 0.10's being the anchor); \"-\": not run.",
        "",
        "| dataset | warm-up rounds (20 trees) | trees | rounds | start MAE | start s | TDM MAE "
        "| TDM s | default MAE | default s | default's start MAE | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (name, trees, rounds, warm), group in means.groupby(level=[0, 1, 2, 3]):
        cells = []
        for fit in ("start", "tdm", "auto", "blind"):
            if fit in group.index.get_level_values("fit"):
                row = group.xs(fit, level="fit").iloc[0]
                cells += [f"{row.mae:.4f}", f"{row.seconds:.0f}"]
            else:
                cells += ["-", "-"]
        lines.append(f"| {name} | {warm} | {trees} | {rounds} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _size(spec: str) -> tuple[int, int, int]:
    """``"100x2w5"`` -> (100, 2, 5); ``"100x8"`` -> (100, 8, 0)."""
    trees, rest = spec.split("x")
    rounds, _, warm = rest.partition("w")
    return int(trees), int(rounds), int(warm or 0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="", help="comma-separated; runs and records them")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--sizes", default="", help="trees x rounds [w warm-up], e.g. 100x2w5")
    parser.add_argument("--fits", default="start,tdm", help="of start, tdm, auto")
    parser.add_argument("--write", action="store_true", help="write the table to BENCHMARKS.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    sizes = tuple(_size(spec) for spec in filter(None, args.sizes.split(",")))
    fits = tuple(filter(None, args.fits.split(",")))
    for name in filter(None, args.datasets.split(",")):
        results = run(name, [int(s) for s in args.seeds.split(",")], sizes or SIZES, fits)
        path = OUT / f"{name}.csv"
        if path.exists():  # rows of other sizes or fits are kept; these replace their own
            old = pd.read_csv(path)
            if "warm" not in old:
                old.insert(4, "warm", 0)
            keys = ["seed", "trees", "rounds", "warm", "fit"]
            old = old[~old.set_index(keys).index.isin(results.set_index(keys).index)]
            results = pd.concat([old, results], ignore_index=True)
        results.to_csv(path, index=False)
    text = report()
    print(text)
    if args.write:
        replace_section(SECTION, text)


if __name__ == "__main__":
    main()
