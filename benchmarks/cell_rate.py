"""The missing cells' rate on large tables: ``cell_lr_correction`` off (tdm 0.3) and on (0.4).

On the selection masks of the four large shipped datasets (seeds 0 and 1, 30% MCAR; RESULTS.md
evaluates on seeds 3-5), where a step draws 1,024 of 4,898 to 20,640 rows. Per mask:

- ``start``: the start ``init="auto"`` takes, alone (``max_iter=0``);
- ``off``: ``TDMImputer(cell_lr_correction=False)``, every missing cell at ``lr`` (tdm 0.3);
- ``on``: ``TDMImputer()``, the default: the cells' rate divided by the growth of RMSprop's step
  per visit since a share of 0.5 (:func:`tdm._base.visit_step_factor`).

Tables of up to 2,048 rows are fitted identically either way (tested), so the small datasets are
left out.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.cell_rate [--jobs 2] [--write]``
(``--write`` replaces the "Cell rate on large tables (selection masks)" section of BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd
import torch

from benchmarks._report import replace_section
from benchmarks.start_choice import LARGE
from tdm import TDMImputer, mae, simulate
from tdm._base import visit_step_factor
from tdm.datasets import load_dataset

SECTION = "Cell rate on large tables (selection masks)"


def _one(job: tuple[str, int]) -> dict[str, object]:
    torch.set_num_threads(1)
    name, seed = job
    X = load_dataset(name).X
    mask = simulate(X, "mcar", 0.3, random_state=seed)
    X_nan = np.where(mask, np.nan, X)
    row: dict[str, object] = {"dataset": name, "seed": seed}
    start = TDMImputer(max_iter=0, random_state=seed)
    row["start"] = mae(X, start.fit_transform(X_nan), mask)
    row["init"] = start.init_
    for label, correction in (("off", False), ("on", True)):
        fitted = TDMImputer(cell_lr_correction=correction, random_state=seed)
        row[label] = mae(X, fitted.fit_transform(X_nan), mask)
    share = 2 * fitted.batch_size_ / X.shape[0]  # rows drawn per step
    row["rate factor"] = min(1.0, visit_step_factor(0.5) / visit_step_factor(share))
    print(row, flush=True)
    return row


def summarise(table: pd.DataFrame) -> str:
    """The BENCHMARKS.md section from one row per mask (as :func:`_one` returns them)."""
    summary = table.groupby("dataset", sort=False)[["rate factor", "start", "off", "on"]].mean()
    lines = [
        "| dataset | cells' rate / lr | start | off (tdm 0.3) | on (default) |",
        "|---|---|---|---|---|",
    ]
    for name, r in summary.iterrows():
        lines.append(
            f"| {name} | {r['rate factor']:.2f} | {r['start']:.3f} | {r['off']:.3f} | "
            f"{r['on']:.3f} |"
        )
    means = summary[["start", "off", "on"]].mean()
    lines.append(f"| **mean** | | {means['start']:.3f} | {means['off']:.3f} | {means['on']:.3f} |")
    return "\n".join(
        [
            "Command: `OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.cell_rate --jobs 2 "
            "--write`  ",
            f"Date: {dt.date.today().isoformat()}; machine: {platform.machine()} (shared).  ",
            "MAE on the masked cells, 30% MCAR, mean over the masks of seeds 0 and 1; "
            'the start `init="auto"` took was the forest\'s on all of them '
            f"({(table['init'] == 'forest').sum()} of {len(table)}).",
            "",
            *lines,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1, help="processes (one mask each)")
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = parser.parse_args()
    jobs = [(name, seed) for name in LARGE for seed in (0, 1)]
    with ProcessPoolExecutor(args.jobs) as pool:
        table = pd.DataFrame(list(pool.map(_one, jobs)))
    text = summarise(table)
    print(text)
    if args.write:
        replace_section(SECTION, text)


if __name__ == "__main__":
    main()
