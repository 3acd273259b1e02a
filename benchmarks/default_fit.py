"""The default fit's time against 1,000 plain steps from the mean start, and MissForest's, on
the paper's large tables (30% MCAR), with each one's MAE; with ``--wide``, on a wide table (four
of them side by side), without MissForest.

Run: ``python -m benchmarks.default_fit --datasets california,letter [--write]`` and ``python -m
benchmarks.default_fit --wide [--write]``: one torch thread, the start's models and
MissForest's forests on one thread each.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np

from benchmarks._timing import command, header, number_cell, publish
from benchmarks.datasets import load_dataset
from benchmarks.registry import make_imputer
from tdm import FitProgress, TDMImputer
from tdm._starts import MAX_MODEL_FEATURES
from tdm.simulate import simulate

PLAIN_STEPS = 1_000
#: The time target: the default fit at most this many times 1,000 plain steps.
TARGET = 3.5
WIDE_TABLES = ("anuran_calls", "wine_quality_white", "letter", "california")
"""The wide table: these tables' columns side by side on the rows all of them have (4,898 x 57),
so that most columns tell nothing of a column, as in a warehouse's wide tables."""
WIDE_TITLE = "Default fit on a wide table"


def _fit(imputer: Any, X_nan: np.ndarray) -> tuple[np.ndarray, float]:
    clock = time.perf_counter()
    filled = imputer.fit_transform(X_nan)
    return np.asarray(filled), time.perf_counter() - clock


def wide_table() -> np.ndarray:
    """:data:`WIDE_TABLES` side by side, each standardised, on their first common rows."""
    parts = [load_dataset(name).X for name in WIDE_TABLES]
    rows = min(len(X) for X in parts)
    return np.hstack([X[:rows] for X in parts])


def measure(name: str, X: np.ndarray, seed: int, missforest: bool) -> dict[str, Any]:
    """Time the three fits on ``X`` (the table ``name``) with its 30% MCAR mask of ``seed``."""
    mask = simulate(X, "mcar", 0.3, random_state=seed)
    X_nan = np.where(mask, np.nan, X)

    def mae(filled: np.ndarray) -> float:
        return float(np.abs(filled - X)[mask].mean())

    plain, plain_s = _fit(TDMImputer(init="mean", max_iter=PLAIN_STEPS, random_state=seed), X_nan)
    first_step: list[float] = []

    def stamp(progress: FitProgress) -> None:
        if progress.stage == "fit" and not first_step:
            first_step.append(time.perf_counter())

    default = TDMImputer(random_state=seed, callback=stamp)
    clock = time.perf_counter()
    filled = default.fit_transform(X_nan)
    default_s = time.perf_counter() - clock
    result = {
        "dataset": name,
        "shape": X.shape,
        "plain_s": plain_s,
        "plain_mae": mae(plain),
        "default_s": default_s,
        "start_s": first_step[0] - clock if first_step else math.nan,
        "start": default.init_,
        "default_mae": mae(filled),
        "missforest_s": math.nan,
        "missforest_mae": math.nan,
    }
    if missforest:
        forest, forest_s = _fit(make_imputer("missforest", random_state=seed), X_nan)
        result.update(missforest_s=forest_s, missforest_mae=mae(forest))
    return result


def report(args: argparse.Namespace, results: list[dict[str, Any]]) -> str:
    """The markdown body: command, machine, protocol and one row per dataset."""
    tables = (
        f"Table: {', '.join(WIDE_TABLES)} side by side (standardised columns, first common "
        "rows); no MissForest (a forest per column and round). "
        if args.wide
        else f"Target: the default at most {TARGET}x the plain steps. "
    )
    lines = [
        *header(command("default_fit")),
        "",
        f'Mask: 30% MCAR, seed {args.seed}. Plain: `TDMImputer(init="mean", '
        f"max_iter={PLAIN_STEPS:,})`; default: `TDMImputer()` (its start, ICE's or the "
        "trees' as `init=\"auto\"` chooses, then 2,000 steps); MissForest: the benchmark's "
        "baseline (100 trees, up to 10 rounds). Wall seconds of `fit_transform`; the start's "
        f"seconds are those before the first step. {tables}".rstrip(),
        "",
        "| dataset | rows x cols | 1,000 plain steps s | default fit s (start s) | default / plain "
        "| default MAE | MissForest s | MissForest MAE | plain MAE |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        n, d = r["shape"]
        lines.append(
            f"| {r['dataset']} | {n:,} x {d} | {r['plain_s']:.1f} | {r['default_s']:.1f} "
            f"({r['start_s']:.1f}) | **{r['default_s'] / r['plain_s']:.2f}x** | "
            f"{r['default_mae']:.4f} | {number_cell(r['missforest_s'], 1)} | "
            f"{number_cell(r['missforest_mae'], 4)} | "
            f"{r['plain_mae']:.4f} |"
        )
    if args.wide:
        lines += [
            "",
            f"On more than {MAX_MODEL_FEATURES} other columns, each model of the start is fitted "
            f"on the {MAX_MODEL_FEATURES} that explain most of its column (docs/decisions.md, "
            '"Wide tables"); the tables of the section above have fewer.',
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="california,letter")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-missforest", action="store_true", help="leave MissForest out")
    parser.add_argument("--wide", action="store_true", help=f"the section {WIDE_TITLE!r}")
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md too")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    if args.wide:
        results = [measure("wide", wide_table(), args.seed, missforest=False)]
        publish(WIDE_TITLE, report(args, results), write=args.write)
        return
    results = []
    for name in args.datasets.split(","):
        X = load_dataset(name).X
        results.append(measure(name, X, args.seed, missforest=not args.no_missforest))
        print(results[-1], flush=True)
    publish("Default fit: the trees start and 2,000 steps", report(args, results), write=args.write)


if __name__ == "__main__":
    main()
