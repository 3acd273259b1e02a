"""Which OT ground cost should TDM default to? Euclidean (published code) vs squared (paper text).

Imputes four small shipped datasets (standardised, 30% MCAR, seeds 0 and 1) with TDM at 1,000 and
3,000 iterations under both costs and reports the mean MAE next to mean imputation's.

Run: ``.venv/bin/python -m benchmarks.cost_choice [--write]`` (needs ``../shared/datasets`` or
``TDM_DATASETS_DIR``); ``--write`` replaces the "Cost choice" section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.preprocessing import scale

from benchmarks._report import replace_section
from tdm import TDMImputer, mae, simulate_mcar

DATASETS = ("seeds", "glass", "blood_transfusion", "concrete_slump")
SEEDS = (0, 1)
ITERATIONS = (1000, 3000)


def datasets_dir() -> Path:
    default = Path(__file__).resolve().parents[2] / "shared" / "datasets"
    return Path(os.environ.get("TDM_DATASETS_DIR", default))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = parser.parse_args()
    rows = []
    for name in DATASETS:
        frame = pd.read_csv(datasets_dir() / f"{name}.csv")
        X = scale(frame.iloc[:, :-1].to_numpy(dtype=np.float64))
        for seed in SEEDS:
            mask = simulate_mcar(X, 0.3, random_state=seed)
            X_nan = np.where(mask, np.nan, X)
            mean_mae = mae(X, np.where(mask, np.nanmean(X_nan, axis=0), X), mask)
            for cost in ("euclidean", "sqeuclidean"):
                for n_iter in ITERATIONS:
                    start = time.perf_counter()
                    est = TDMImputer(
                        cost=cost, max_iter=n_iter, standardize=False, random_state=seed
                    )
                    score = mae(X, est.fit_transform(X_nan), mask)
                    rows.append(
                        (name, seed, cost, n_iter, score, mean_mae, time.perf_counter() - start)
                    )
                    print(rows[-1], flush=True)
    table = pd.DataFrame(
        rows, columns=["dataset", "seed", "cost", "iterations", "mae", "mean", "s"]
    )
    summary = table.groupby(["dataset", "cost", "iterations"])[["mae", "mean", "s"]].mean()
    lines = [
        "Command: `.venv/bin/python -m benchmarks.cost_choice --write`  ",
        f"Date: {dt.date.today().isoformat()}; machine: {platform.machine()}, "
        f"{os.cpu_count()} cores (shared).  ",
        f"TDM (library defaults otherwise), 30% MCAR, seeds {list(SEEDS)}; MAE on the masked cells "
        "of the standardised data, mean over seeds; `mean` is mean imputation on the same masks.",
        "",
        "| dataset | cost | iterations | TDM MAE | mean-imputation MAE | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for (name, cost, n_iter), row in summary.iterrows():
        scores = f"{row['mae']:.3f} | {row['mean']:.3f} | {row['s']:.1f}"
        lines.append(f"| {name} | {cost} | {n_iter} | {scores} |")
    text = "\n".join(lines)
    print(text)
    if args.write:
        replace_section("Cost choice (accuracy)", text)


if __name__ == "__main__":
    main()
