"""Ablation behind TDM's defaults (issue "Beyond the paper"): what each change buys.

Configurations, each 3,000 steps on the standardised data, 30% MCAR masks of seeds 0 and 1 (the
selection masks; the evaluation in RESULTS.md uses other seeds):

- ``paper``: :meth:`tdm.TDMImputer.paper` (shared RMSprop rate 1e-2 for network and cells);
- ``network_lr=1e-3`` and ``network_lr=3e-3``: a separate, smaller rate for the network;
- ``network_lr=1e-3 + early_stopping``: plus the held-out-cells stopping rule (patience 500);
- ``ot_ns``: OTImputer (exact), the identity network.

Run: ``.venv/bin/python -m benchmarks.ablation [--datasets a,b] [--write]`` (``--write`` replaces
the "Ablation" section of BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import time
from collections.abc import Callable

import numpy as np
import pandas as pd

from benchmarks._report import replace_section
from tdm import OTImputer, TDMImputer, mae, simulate
from tdm.datasets import load_dataset

STEPS = 3000
CONFIGS: dict[str, Callable[[int], TDMImputer | OTImputer]] = {
    "paper": lambda s: TDMImputer.paper(max_iter=STEPS, standardize=False, random_state=s),
    "network_lr=1e-3": lambda s: TDMImputer.paper(
        max_iter=STEPS, network_lr=1e-3, standardize=False, random_state=s
    ),
    "network_lr=3e-3": lambda s: TDMImputer.paper(
        max_iter=STEPS, network_lr=3e-3, standardize=False, random_state=s
    ),
    "network_lr=1e-3 + early_stopping": lambda s: TDMImputer.paper(
        max_iter=STEPS,
        network_lr=1e-3,
        early_stopping=True,
        n_iter_no_change=500,
        standardize=False,
        random_state=s,
    ),
    "ot_ns": lambda s: OTImputer(
        solver="assignment", max_iter=STEPS, standardize=False, random_state=s
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--datasets", default="concrete_slump,parkinsons,seeds,glass,blood_transfusion"
    )
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = parser.parse_args()
    rows = []
    for name in args.datasets.split(","):
        data = load_dataset(name)
        for seed in (0, 1):
            mask = simulate(data.X, "mcar", 0.3, random_state=seed)
            X_nan = np.where(mask, np.nan, data.X)
            for label, make in CONFIGS.items():
                est = make(seed)
                start = time.perf_counter()
                score = mae(data.X, est.fit_transform(X_nan), mask)
                rows.append((name, seed, label, score, est.n_iter_, time.perf_counter() - start))
                print(rows[-1], flush=True)
    table = pd.DataFrame(rows, columns=["dataset", "seed", "config", "mae", "steps", "s"])
    summary = table.groupby(["dataset", "config"], sort=False)["mae"].mean().unstack("config")
    text = "\n".join(
        [
            "Command: `.venv/bin/python -m benchmarks.ablation --write`  ",
            f"Date: {dt.date.today().isoformat()}; machine: {platform.machine()} (shared).  ",
            f"MAE on the masked cells, 30% MCAR, seeds 0 and 1 (mean), {STEPS} steps.",
            "",
            "| dataset | " + " | ".join(summary.columns) + " |",
            "|---" * (len(summary.columns) + 1) + "|",
            *(
                f"| {name} | " + " | ".join(f"{v:.3f}" for v in row) + " |"
                for name, row in summary.iterrows()
            ),
        ]
    )
    print(text)
    if args.write:
        replace_section("Ablation (selection masks)", text)


if __name__ == "__main__":
    main()
