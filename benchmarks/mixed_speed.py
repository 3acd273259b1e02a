"""The cost of categorical columns: a TDM step and a default fit on a table with categorical
columns, against the numeric table of the same shape, in the same run.

Run: ``python -m benchmarks.mixed_speed [--rows 20000] [--write]``. Tables: ``rows`` x 20,
correlated through 4 latent factors, 30% MCAR; the mixed one has 10 float columns and 10
categorical ones of 2 to 50 labels (quantile bins of a latent combination), the numeric one 20
float columns. Step: median wall time of a step at batch 512 over 200 steps after 20 warm-up
steps, from the mean start, also on a numeric table as wide as the mixed one's optimised space
(whose network, K times its coordinates wide, is wider than the mixed table's, K times its
columns). Fit: a default ``TDMImputer`` (2,000 steps, start included), end to end. Target:
the mixed fit under 2x the numeric one.
"""

from __future__ import annotations

import argparse
import platform
import time
from datetime import date

import numpy as np
import pandas as pd
import torch

from benchmarks._report import replace_section
from tdm import FitProgress, TDMImputer

SECTION = "Categorical columns: step and fit cost"
LABELS = (2, 3, 5, 8, 10, 15, 20, 30, 40, 50)


def wide(rows: int, width: int, seed: int = 1) -> pd.DataFrame:
    """A numeric table of ``width`` columns, 30% missing."""
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(rows, 4)) @ rng.normal(size=(4, width))
    values[rng.random(values.shape) < 0.3] = np.nan
    values[0] = 0.0
    return pd.DataFrame(values, columns=[f"x{j}" for j in range(width)])


def tables(rows: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The numeric and the mixed table, both with 30% of their cells missing."""
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(rows, 4))
    numeric = latent @ rng.normal(size=(4, 20)) + 0.3 * rng.normal(size=(rows, 20))
    frame = pd.DataFrame(numeric, columns=[f"x{j}" for j in range(20)])
    mixed = frame.iloc[:, :10].copy()
    for k, n_labels in enumerate(LABELS):
        score = numeric[:, 10 + k]
        edges = np.quantile(score, np.linspace(0, 1, n_labels + 1)[1:-1])
        mixed[f"c{k}"] = np.array([f"l{i}" for i in range(n_labels)], dtype=object)[
            np.digitize(score, edges)
        ]
    mask = rng.random(frame.shape) < 0.3
    mask[0] = False
    return frame.mask(mask), mixed.mask(mask)


class StepTimer:
    """Callback: the wall time of every step."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.last = time.perf_counter()

    def __call__(self, progress: FitProgress) -> None:
        now = time.perf_counter()
        self.times.append(now - self.last)
        self.last = now


def step_ms(frame: pd.DataFrame) -> tuple[float, int]:
    """Median ms per step, and the width of the optimised space."""
    timer = StepTimer()
    imputer = TDMImputer(init="mean", max_iter=220, callback=timer, random_state=0).fit(frame)
    return float(np.median(timer.times[20:]) * 1e3), int(imputer.X_fit_.shape[1])


def fit_seconds(frame: pd.DataFrame) -> float:
    started = time.perf_counter()
    TDMImputer(random_state=0).fit(frame)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--write", action="store_true", help="write the table to BENCHMARKS.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    numeric, mixed = tables(args.rows)
    step, width = {}, {}
    for name, frame in (("numeric", numeric), ("mixed", mixed)):
        step[name], width[name] = step_ms(frame)
    step["wide"], width["wide"] = step_ms(wide(args.rows, width["mixed"]))
    fit = {"numeric": fit_seconds(numeric), "mixed": fit_seconds(mixed)}
    text = "\n".join(
        [
            f"Command: `python -m benchmarks.mixed_speed --rows {args.rows} --write`  ",
            f"Date: {date.today().isoformat()}; machine: {platform.machine()}, 1 torch thread, "
            f"torch {torch.__version__}; device: cpu.  ",
            f"Tables: {args.rows} x 20, 30% MCAR; mixed: 10 float + 10 categorical columns of "
            f"{', '.join(map(str, LABELS))} labels ({width['mixed']} coordinates in all); "
            f"numeric: 20 float columns; wide: {width['wide']} float columns.",
            "",
            "| table | coordinates | ms / step (B = 512) | default fit, s | fit ratio |",
            "|---|---|---|---|---|",
            f"| numeric, 20 columns | 20 | {step['numeric']:.2f} | {fit['numeric']:.1f} | 1.00 |",
            f"| 10 float + 10 categorical | {width['mixed']} | {step['mixed']:.2f} | "
            f"{fit['mixed']:.1f} | **{fit['mixed'] / fit['numeric']:.2f}** |",
            f"| numeric, as wide | {width['wide']} | {step['wide']:.2f} | - | - |",
            "",
            f"Step ratio to the numeric table of the same columns (20): "
            f"{step['mixed'] / step['numeric']:.2f}; to the numeric table of as many "
            f"coordinates ({width['wide']}, a network as wide as its coordinates): "
            f"{step['mixed'] / step['wide']:.2f}. Target: fit ratio under 2.",
        ]
    )
    print(text)
    if args.write:
        replace_section(SECTION, text + "\n")


if __name__ == "__main__":
    main()
