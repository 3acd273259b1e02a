"""Which start TDM refines: ICE's or a light MissForest's, and the rule of ``init="auto"``.

On the selection masks (seeds 0 and 1; RESULTS.md evaluates on seeds 3-5), 30% missing: MCAR and
MAR on the five small shipped datasets, MCAR on the four large ones. Per mask:

- ``ice`` / ``forest``: the start alone (ICE; MissForest with 20 trees and 3 rounds);
- ``tdm<-ice`` / ``tdm<-forest``: TDM's default steps from that start;
- ``probe ratio``: the forest's error on the probe cells of ``init="auto"`` over ICE's (below 0.9:
  the forest's start is taken);
- ``auto``: ``TDMImputer()``, the default (``init="auto"``).

The margin 0.9 was chosen on these masks: the "margin" table gives the mean MAE of taking
``tdm<-forest`` when the probe ratio is below each candidate margin, else ``tdm<-ice``.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.start_choice [--jobs 2] [--write]``
(``--write`` replaces the "Start choice (selection masks)" section of BENCHMARKS.md).
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
from tdm import TDMImputer, mae, simulate
from tdm._iterative import start_fill
from tdm.datasets import load_dataset

SMALL = ("concrete_slump", "parkinsons", "seeds", "glass", "blood_transfusion")
LARGE = ("wine_quality_white", "anuran_calls", "california", "letter")
MARGINS = (1.0, 0.95, 0.9, 0.85, 0.8)


def _masks() -> list[tuple[str, str, int]]:
    small = [(d, m, s) for d in SMALL for m in ("mcar", "mar") for s in (0, 1)]
    return [*small, *((d, "mcar", s) for d in LARGE for s in (0, 1))]


def _one(job: tuple[str, str, int]) -> dict[str, object]:
    torch.set_num_threads(1)
    name, mechanism, seed = job
    X = load_dataset(name).X
    mask = simulate(X, mechanism, 0.3, random_state=seed)  # type: ignore[arg-type]
    X_nan = np.where(mask, np.nan, X)
    row: dict[str, object] = {"dataset": name, "mechanism": mechanism, "seed": seed}
    for init in ("ice", "forest"):
        row[init] = mae(X, start_fill(init, X, mask, seed), mask)
        row[f"tdm<-{init}"] = mae(
            X, TDMImputer(init=init, random_state=seed).fit_transform(X_nan), mask
        )
    auto = TDMImputer(random_state=seed)
    row["auto"] = mae(X, auto.fit_transform(X_nan), mask)
    scores = auto.start_scores_
    assert scores is not None  # init="auto" records both candidates' probe errors
    row["probe ratio"] = scores["forest"] / scores["ice"]
    row["picked"] = auto.init_
    print(row, flush=True)
    return row


def _markdown(frame: pd.DataFrame) -> list[str]:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(map(str, frame.index.names)) + " | " + " | ".join(cols) + " |"]
    lines.append("|---" * (len(cols) + frame.index.nlevels) + "|")
    for key, row in frame.iterrows():
        keys = key if isinstance(key, tuple) else (key,)
        cells = [str(int(v)) if c == "forest picked" else f"{v:.3f}" for c, v in row.items()]
        lines.append("| " + " | ".join(map(str, keys)) + " | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1, help="processes (one mask each)")
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = parser.parse_args()
    with ProcessPoolExecutor(args.jobs) as pool:
        table = pd.DataFrame(list(pool.map(_one, _masks())))
    text = summarise(table)
    print(text)
    if args.write:
        replace_section("Start choice (selection masks)", text)


def summarise(table: pd.DataFrame) -> str:
    """The BENCHMARKS.md section from one row per mask (as :func:`_one` returns them)."""
    table = table.copy()
    table["forest picked"] = (table["picked"] == "forest").astype(int)
    keys = ["dataset", "mechanism"]
    numbers = ["ice", "forest", "tdm<-ice", "tdm<-forest", "auto", "probe ratio", "forest picked"]
    summary = table.groupby(keys, sort=False)[numbers].agg(
        {**{c: "mean" for c in numbers[:-1]}, "forest picked": "sum"}
    )
    means = summary[numbers[:-2]].mean()
    margins = {}
    for margin in MARGINS:
        pick = np.where(table["probe ratio"] < margin, table["tdm<-forest"], table["tdm<-ice"])
        margins[margin] = table.assign(pick=pick).groupby(keys)["pick"].mean().mean()
    return "\n".join(
        [
            "Command: `OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.start_choice --jobs 2 "
            "--write`  ",
            f"Date: {dt.date.today().isoformat()}; machine: {platform.machine()} (shared).  ",
            "MAE on the masked cells, 30% missing, mean over the masks of seeds 0 and 1; "
            "'forest picked': masks (of 2) where `init=\"auto\"` took the forest's start.",
            "",
            *_markdown(summary),
            "| **mean** | | " + " | ".join(f"{v:.3f}" for v in means) + " | | |",
            "",
            "Margin of the rule (mean MAE over the rows above when the forest's start is taken "
            "below each probe ratio):",
            "",
            "| margin | " + " | ".join(f"{m:g}" for m in margins) + " |",
            "|---" * (len(margins) + 1) + "|",
            "| mean MAE | " + " | ".join(f"{v:.4f}" for v in margins.values()) + " |",
        ]
    )


if __name__ == "__main__":
    main()
