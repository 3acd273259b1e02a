"""Design choices of the mixed-type TDM, measured: how bounds are enforced (a transform of the
cell parameter, projection after each step, clipping of the result, no bounds), whether the
transport refinement improves on the start's labels, and how many coordinates a categorical
column takes (a full regular simplex up to 8, or 3).

Run: ``python -m benchmarks.mixed_design [--seeds 2] [--write]``. Data: the six tables of
``../shared/datasets/mixed/`` (diamonds: a 3,000-row sample, seed 0), 30% MCAR, the default
``TDMImputer``. Metrics: numeric MAE in standard deviations of the complete column, categorical
error rate (share of masked labels imputed wrong), each averaged over datasets and seeds.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

import tdm._mixed
from benchmarks._report import replace_section
from tdm import TDMImputer
from tdm.datasets import default_data_dir

DATA = (default_data_dir() or Path("datasets")) / "mixed"  # $TDM_DATASETS_DIR or ../shared
NAMES = ("cps1985", "credit", "diamonds", "houseprices", "penguins", "wage")
SECTION = "Mixed-type design choices"


def load(name: str) -> pd.DataFrame:
    """The table, integer columns as Int64, text as object (diamonds: 3,000 rows, seed 0)."""
    frame = pd.read_csv(DATA / f"{name}.csv")
    if name == "diamonds":
        frame = frame.sample(3000, random_state=0).reset_index(drop=True)
    for col in frame.columns:
        if pd.api.types.is_integer_dtype(frame[col]):
            frame[col] = frame[col].astype("Int64")
        elif not pd.api.types.is_numeric_dtype(frame[col]):
            frame[col] = frame[col].astype(object)
    return frame


def mask_mcar(frame: pd.DataFrame, seed: int, p: float = 0.3) -> pd.DataFrame:
    """A 30% MCAR mask over the cells (each column keeps its first row)."""
    mask = np.random.default_rng(seed).random(frame.shape) < p
    mask[0] = False
    return pd.DataFrame(mask, columns=frame.columns)


def errors(full: pd.DataFrame, out: pd.DataFrame, mask: pd.DataFrame) -> tuple[float, float]:
    """Numeric MAE / SD over masked numeric cells, and the categorical error rate."""
    num_err, cat_err = [], []
    for col in full.columns:
        m = mask[col].to_numpy()
        if pd.api.types.is_numeric_dtype(full[col]):
            truth = full[col].to_numpy(dtype=float)
            num_err.extend(np.abs(out[col].to_numpy(dtype=float)[m] - truth[m]) / truth.std())
        else:
            cat_err.extend(out[col].to_numpy()[m] != full[col].to_numpy()[m])
    return float(np.mean(num_err)), float(np.mean(cat_err))


def variants() -> dict[str, tuple[dict[str, Any], int]]:
    """Name -> (TDMImputer params, MAX_EMBEDDING_DIM)."""
    return {
        "default (bounds: project; up to 8 coordinates)": ({}, 8),
        "bounds: transform": ({"bounds_method": "transform"}, 8),
        "bounds: clip": ({"bounds_method": "clip"}, 8),
        "no bounds": ({"bounds": None}, 8),
        "start only (max_iter=0)": ({"max_iter": 0}, 8),
        "3 coordinates per categorical column": ({}, 3),
    }


def run(seeds: int, log: Callable[[str], None]) -> pd.DataFrame:
    rows = []
    for name in NAMES:
        full = load(name)
        for seed in range(seeds):
            mask = mask_mcar(full, seed)
            holes = full.mask(mask)
            for variant, (params, dim) in variants().items():
                tdm._mixed.MAX_EMBEDDING_DIM = dim  # the benchmark's own process only
                started = time.perf_counter()
                out = TDMImputer(random_state=seed, **params).fit_transform(holes)
                seconds = time.perf_counter() - started
                num, cat = errors(full, out, mask)
                rows.append((name, seed, variant, num, cat, seconds))
                log(f"{name} seed {seed} {variant}: num {num:.4f} cat {cat:.4f} {seconds:.1f}s")
    return pd.DataFrame(rows, columns=["dataset", "seed", "variant", "num", "cat", "seconds"])


def report(results: pd.DataFrame, command: str) -> str:
    means = results.groupby(["variant", "dataset"], sort=False)[["num", "cat"]].mean()
    lines = [
        f"Command: `{command}`  ",
        f"Date: {date.today().isoformat()}; machine: {platform.machine()}, "
        f"{torch.get_num_threads()} torch threads, torch {torch.__version__}.  ",
        "Data: the six mixed tables (diamonds: 3,000 rows), 30% MCAR, seeds "
        f"0-{results.seed.max()}; default TDMImputer. Cells: numeric MAE in SDs / categorical "
        "error rate, mean over seeds.",
        "",
        "| variant | " + " | ".join(NAMES) + " | mean | s / fit |",
        "|---|" + "---|" * (len(NAMES) + 2),
    ]
    for variant in variants():
        cells = [
            f"{means.loc[(variant, n), 'num']:.3f} / {means.loc[(variant, n), 'cat']:.3f}"
            for n in NAMES
        ]
        sub = results[results.variant == variant]
        mean = f"{sub.num.mean():.3f} / {sub.cat.mean():.3f}"
        lines.append(
            f"| {variant} | " + " | ".join(cells) + f" | {mean} | {sub.seconds.mean():.1f} |"
        )
    return "\n".join(lines) + "\n"


UCI_NAMES = ("concrete_slump", "seeds", "glass", "blood_transfusion")
UCI_SECTION = "Bounds on numeric tables"


def run_uci(seeds: int, log: Callable[[str], None]) -> str:
    """The bounds methods on four small UCI tables of the paper (NumPy input, 30% MCAR):
    standardised MAE, mean over datasets and seeds."""
    from tdm.datasets import load_dataset
    from tdm.metrics import mae
    from tdm.simulate import simulate_mcar

    settings = {
        "observed range, project (default)": {},
        "observed range, transform": {"bounds_method": "transform"},
        "observed range, clip": {"bounds_method": "clip"},
        "no bounds": {"bounds": None},
    }
    scores: dict[str, list[float]] = {name: [] for name in settings}
    for name in UCI_NAMES:
        X = load_dataset(name).X
        for seed in range(seeds):
            mask = simulate_mcar(X, 0.3, random_state=seed)
            holes = np.where(mask, np.nan, X)
            for label, params in settings.items():
                out = TDMImputer(random_state=seed, **params).fit_transform(holes)
                scores[label].append(mae(X, out, mask))
                log(f"{name} seed {seed} {label}: {scores[label][-1]:.4f}")
    lines = [
        f"Command: `python -m benchmarks.mixed_design --uci --seeds {seeds} --write`  ",
        f"Date: {date.today().isoformat()}; machine: {platform.machine()}, 1 torch thread.  ",
        f"Data: {', '.join(UCI_NAMES)} (standardised), 30% MCAR, seeds 0-{seeds - 1}; default "
        "TDMImputer. Cells: MAE, mean over datasets and seeds.",
        "",
        "| bounds | MAE |",
        "|---|---|",
    ]
    lines += [f"| {label} | {np.mean(values):.4f} |" for label, values in scores.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--write", action="store_true", help="write the table to BENCHMARKS.md")
    parser.add_argument("--uci", action="store_true", help="the bounds on numeric UCI tables")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.uci:
        text = run_uci(args.seeds, lambda line: print(line, file=sys.stderr, flush=True))
        print(text)
        if args.write:
            replace_section(UCI_SECTION, text)
        return
    results = run(args.seeds, lambda line: print(line, file=sys.stderr, flush=True))
    command = "python -m benchmarks.mixed_design --seeds " + str(args.seeds) + " --write"
    text = report(results, command)
    print(text)
    if args.write:
        replace_section(SECTION, text)


if __name__ == "__main__":
    main()
