"""Where TDM's missing cells start, and how many steps it then needs (issue "Beyond the paper").

Configurations, on 30% MCAR and MAR masks of seeds 0 and 1 (the selection masks; the evaluation
in RESULTS.md uses seeds 3-5) of the five small shipped datasets:

- ``ice``: the ICE baseline alone (the starting point of ``init="ice"``);
- ``mean@N``: the 0.1 default (``init="mean"``, ``network_lr=3e-3``), N steps;
- ``ice@N``: ``init="ice"`` with the default noise (0.1), N steps;
- ``ice,noise=0@N``: ``init="ice"`` with no noise added to the starting values.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.init_choice [--datasets a,b] [--write]``
(``--write`` replaces the "Initialisation (selection masks)" section of BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import time
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from benchmarks._report import replace_section
from tdm import TDMImputer, mae, simulate
from tdm.baselines import make_imputer
from tdm.datasets import load_dataset

CONFIGS: dict[str, Callable[[int], object]] = {
    "ice": lambda s: make_imputer("ice", random_state=s),
    "mean@2000": lambda s: TDMImputer(init="mean", max_iter=2000, random_state=s),
    "ice@500": lambda s: TDMImputer(init="ice", max_iter=500, random_state=s),
    "ice@1000": lambda s: TDMImputer(init="ice", max_iter=1000, random_state=s),
    "ice@2000": lambda s: TDMImputer(init="ice", max_iter=2000, random_state=s),
    "ice,noise=0@1000": lambda s: TDMImputer(
        init="ice", init_noise=0.0, max_iter=1000, random_state=s
    ),
    "ice,noise=0@2000": lambda s: TDMImputer(
        init="ice", init_noise=0.0, max_iter=2000, random_state=s
    ),
}
DATASETS = "concrete_slump,parkinsons,seeds,glass,blood_transfusion"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--datasets", default=DATASETS)
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for name in args.datasets.split(","):
        data = load_dataset(name)
        for mechanism in ("mcar", "mar"):
            for seed in (0, 1):
                mask = simulate(data.X, mechanism, 0.3, random_state=seed)
                X_nan = np.where(mask, np.nan, data.X)
                for label, make in CONFIGS.items():
                    start = time.perf_counter()
                    score = mae(data.X, make(seed).fit_transform(X_nan), mask)  # type: ignore[attr-defined]
                    seconds = time.perf_counter() - start
                    rows.append((name, mechanism, seed, label, score, seconds))
                    print(rows[-1], flush=True)
    table = pd.DataFrame(rows, columns=["dataset", "mechanism", "seed", "config", "mae", "s"])
    summary = (
        table.groupby(["dataset", "mechanism", "config"], sort=False)["mae"]
        .mean()
        .unstack("config")
    )
    wins = (summary.values == summary.min(axis=1).values[:, None]).sum(axis=0)
    text = "\n".join(
        [
            "Command: `OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.init_choice --write`  ",
            f"Date: {dt.date.today().isoformat()}; machine: {platform.machine()} (shared).  ",
            "MAE on the masked cells, 30% missing, mean over the masks of seeds 0 and 1.",
            "",
            "| dataset | mechanism | " + " | ".join(summary.columns) + " |",
            "|---" * (len(summary.columns) + 2) + "|",
            *(
                f"| {name} | {mech} | " + " | ".join(f"{v:.3f}" for v in row) + " |"
                for (name, mech), row in summary.iterrows()
            ),
            "| **mean** | | " + " | ".join(f"{v:.3f}" for v in summary.mean(axis=0)) + " |",
            "| **lowest in** | | " + " | ".join(str(int(w)) for w in wins) + " |",
        ]
    )
    print(text)
    if args.write:
        replace_section("Initialisation (selection masks)", text)


if __name__ == "__main__":
    main()
