"""Design choices of the mixed-type TDM, measured: how bounds are enforced (a transform of the
cell parameter, projection after each step, clipping of the result, no bounds), whether the
transport refinement improves on the start's labels, and how many coordinates a categorical
column takes (a full regular simplex up to 8, or 3).

The speed choices (``--speed``) are measured the same way, each against the default: the
network's width set by the table's columns rather than its coordinates, the forest start's
one feature per categorical column rather than one per coordinate, and ``init="auto"``'s start
taken from its probe run on every table rather than only on large ones (tdm 0.7: where the probe
hid at most 1% of the observed cells); ``--uci --speed`` measures the last on numeric UCI tables.

Run: ``python -m benchmarks.mixed_design [--seeds 2] [--speed] [--write]``. Data: the six tables of
``../shared/datasets/mixed/`` (diamonds: a 3,000-row sample, seed 0), 30% MCAR, the default
``TDMImputer``. Metrics: numeric MAE in standard deviations of the complete column, categorical
error rate (share of masked labels imputed wrong), each averaged over datasets and seeds.
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import sys
import time
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

import tdm._mixed
import tdm._starts
from benchmarks._report import replace_section
from tdm import TDMImputer
from tdm.coupling import InvertibleNetwork
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


class _CoordinateWidth(TDMImputer):
    """Conditioners ``width_factor`` times as wide as the coordinates (tdm 0.6)."""

    def _make_network(self, n_features: int, generator: torch.Generator | None) -> torch.nn.Module:
        return InvertibleNetwork(
            n_features,
            n_blocks=self.n_blocks,
            width_factor=self.width_factor,
            clamp=self.clamp,
            generator=generator,
        )


@contextlib.contextmanager
def _patched(module: object, name: str, value: object) -> Iterator[None]:
    """``module.name`` replaced for the block (this benchmark's own process only)."""
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, saved)


def _coordinate_features(
    filled: np.ndarray, targets: list[np.ndarray], directions: list[Any], skip: int
) -> np.ndarray:
    """The forest start's features as in tdm 0.6: every coordinate of the other columns."""
    return np.delete(filled, targets[skip], axis=1)


SPEED_SECTION = "Mixed-type speed choices"
# The start taken from init="auto"'s probe run whatever share of the cells the probe hid (every
# table counted large, with the small tables' forest and no safeguard: tdm 0.7's reuse rule
# stretched to every table).
_REUSE_ALWAYS = [
    (tdm._starts, "LARGE_CELLS", 0),
    (tdm._starts, "FOREST_LARGE", tdm._starts.FOREST_START),
]


class _NoSafeguard(TDMImputer):
    """The default TDM with the safeguard off (for the start reused on every table)."""

    def _start_options(self) -> tuple[int | None, int | None, int | None, bool, int | None]:
        return self.forest_trees, self.forest_rounds, self.forest_warm_rounds, False, self.n_jobs


def speed_variants() -> dict[str, tuple[type[TDMImputer], list[tuple[object, str, object]]]]:
    """Name -> (imputer class, module attributes replaced)."""
    features = (tdm._starts, "_column_features", _coordinate_features)
    return {
        "default": (TDMImputer, []),
        "network width: K x coordinates": (_CoordinateWidth, []),
        "forest start: a feature per coordinate": (TDMImputer, [features]),
        "auto start: from its probe run, always": (_NoSafeguard, _REUSE_ALWAYS),
    }


def run(seeds: int, log: Callable[[str], None], *, speed: bool = False) -> pd.DataFrame:
    rows = []
    chosen: dict[str, tuple[type[TDMImputer], dict[str, Any], int, list[Any]]] = (
        {name: (cls, {}, 8, patches) for name, (cls, patches) in speed_variants().items()}
        if speed
        else {name: (TDMImputer, params, dim, []) for name, (params, dim) in variants().items()}
    )
    for name in NAMES:
        full = load(name)
        for seed in range(seeds):
            mask = mask_mcar(full, seed)
            holes = full.mask(mask)
            for variant, (cls, params, dim, patches) in chosen.items():
                tdm._mixed.MAX_EMBEDDING_DIM = dim  # the benchmark's own process only
                started = time.perf_counter()
                with contextlib.ExitStack() as stack:
                    for patch in patches:
                        stack.enter_context(_patched(*patch))
                    out = cls(random_state=seed, **params).fit_transform(holes)
                seconds = time.perf_counter() - started
                num, cat = errors(full, out, mask)
                rows.append((name, seed, variant, num, cat, seconds))
                log(f"{name} seed {seed} {variant}: num {num:.4f} cat {cat:.4f} {seconds:.1f}s")
    return pd.DataFrame(rows, columns=["dataset", "seed", "variant", "num", "cat", "seconds"])


def report(results: pd.DataFrame, command: str, names: list[str]) -> str:
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
    for variant in names:
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
UCI_SPEED_NAMES = (*UCI_NAMES, "parkinsons", "wine_quality_white", "california")
UCI_SPEED_SECTION = "Start from the probe run on numeric tables"


def run_uci(seeds: int, log: Callable[[str], None], *, speed: bool = False) -> str:
    """The bounds methods on four small UCI tables of the paper (NumPy input, 30% MCAR), or
    (``speed``) the start taken from the probe run against one computed again on seven:
    standardised MAE, mean over datasets and seeds, and seconds per fit."""
    from tdm.datasets import load_dataset
    from tdm.metrics import mae
    from tdm.simulate import simulate_mcar

    settings: dict[str, tuple[dict[str, Any], list[Any]]] = (
        {
            "default": ({}, []),
            "start from the probe run, always": ({"safeguard": False}, _REUSE_ALWAYS),
        }
        if speed
        else {
            "observed range, project (default)": ({}, []),
            "observed range, transform": ({"bounds_method": "transform"}, []),
            "observed range, clip": ({"bounds_method": "clip"}, []),
            "no bounds": ({"bounds": None}, []),
        }
    )
    names = UCI_SPEED_NAMES if speed else UCI_NAMES
    scores: dict[tuple[str, str], list[float]] = {}
    seconds: dict[str, list[float]] = {label: [] for label in settings}
    for name in names:
        X = load_dataset(name).X
        for seed in range(seeds):
            mask = simulate_mcar(X, 0.3, random_state=seed)
            holes = np.where(mask, np.nan, X)
            for label, (params, patches) in settings.items():
                started = time.perf_counter()
                with contextlib.ExitStack() as stack:
                    for patch in patches:
                        stack.enter_context(_patched(*patch))
                    out = TDMImputer(random_state=seed, **params).fit_transform(holes)
                seconds[label].append(time.perf_counter() - started)
                scores.setdefault((label, name), []).append(mae(X, out, mask))
                log(f"{name} seed {seed} {label}: {scores[label, name][-1]:.4f}")
    flag = " --speed" if speed else ""
    lines = [
        f"Command: `python -m benchmarks.mixed_design --uci{flag} --seeds {seeds} --write`  ",
        f"Date: {date.today().isoformat()}; machine: {platform.machine()}, 1 torch thread.  ",
        f"Data: {', '.join(names)} (standardised), 30% MCAR, seeds 0-{seeds - 1}; default "
        "TDMImputer. Cells: MAE, mean over seeds; mean over datasets; seconds per fit.",
        "",
        "| setting | " + " | ".join(names) + " | mean | s / fit |",
        "|---|" + "---|" * (len(names) + 2),
    ]
    for label in settings:
        per = [float(np.mean(scores[label, name])) for name in names]
        lines.append(
            f"| {label} | "
            + " | ".join(f"{v:.4f}" for v in per)
            + f" | {np.mean(per):.4f} | {np.mean(seconds[label]):.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--write", action="store_true", help="write the table to BENCHMARKS.md")
    parser.add_argument("--uci", action="store_true", help="numeric UCI tables")
    parser.add_argument("--speed", action="store_true", help="the speed choices")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if args.uci:
        text = run_uci(args.seeds, log, speed=args.speed)
        print(text)
        if args.write:
            replace_section(UCI_SPEED_SECTION if args.speed else UCI_SECTION, text)
        return
    results = run(args.seeds, log, speed=args.speed)
    flag = " --speed" if args.speed else ""
    command = f"python -m benchmarks.mixed_design{flag} --seeds {args.seeds} --write"
    names = list(speed_variants() if args.speed else variants())
    text = report(results, command, names)
    print(text)
    if args.write:
        replace_section(SPEED_SECTION if args.speed else SECTION, text)


if __name__ == "__main__":
    main()
