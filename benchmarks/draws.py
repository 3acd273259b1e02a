"""Draws against the truth: ``TDMImputer.sample``'s interval coverage, spread and label shares on
the removed cells (30% MCAR), beside the point imputation, miceforest's mean-matching draws and
MissForest's point imputation.

- coverage: the share of removed numeric values inside their central 90% interval (the 5% and
  95% quantiles of the draws, Weibull's plotting positions: unbiased for exchangeable draws);
- spread ratio: per numeric column, the standard deviation of the imputed cells against that of
  the removed values (a draw's, averaged over draws), the median over columns;
- label distance: per label column, the total variation between the shares of the imputed
  labels and of the removed ones (averaged over draws), the mean over label columns and the
  worst column.

Run: ``python -m benchmarks.draws [--datasets ...] [--mixed ...] [--write]``: one torch thread,
every model on one thread.
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks._timing import command, header, number_cell, publish
from benchmarks.datasets import (
    apply_mask,
    load_dataset,
    load_mixed_dataset,
    simulate_mixed,
)
from benchmarks.registry import make_imputer
from tdm import TDMImputer
from tdm.simulate import simulate

DRAWS = 20
LEVEL = 0.9
#: Below this many rows the baselines run (miceforest's 20 draws with mean matching take minutes
#: from a few hundred rows).
BASELINE_ROWS = 1_000


def interval_coverage(truth: np.ndarray, draws: np.ndarray) -> float:
    """Share of ``truth`` (cells) inside the central :data:`LEVEL` interval of ``draws``
    (draws x cells)."""
    tail = (1 - LEVEL) / 2
    low, high = np.quantile(draws, [tail, 1 - tail], axis=0, method="weibull")
    return float(((truth >= low) & (truth <= high)).mean())


def spread_ratio(truth: list[np.ndarray], imputed: list[list[np.ndarray]]) -> float:
    """Median over columns of the imputed cells' standard deviation (averaged over the
    completions in ``imputed``) against the removed values'."""
    ratios = []
    for j, removed in enumerate(truth):
        if removed.size < 2 or removed.std() == 0:
            continue
        ratios.append(np.mean([c[j].std() for c in imputed]) / removed.std())
    return float(np.median(ratios)) if ratios else math.nan


def label_distance(truth: list[pd.Series], imputed: list[list[pd.Series]]) -> tuple[float, float]:
    """Mean over label columns, and the worst column, of the total variation between imputed
    and removed label shares (averaged over the completions)."""
    per_column = []
    for j, removed in enumerate(truth):
        if removed.empty:
            continue
        shares = removed.value_counts(normalize=True)
        distances = []
        for completion in imputed:
            got = completion[j].value_counts(normalize=True)
            labels = shares.index.union(got.index)
            diff = shares.reindex(labels, fill_value=0) - got.reindex(labels, fill_value=0)
            distances.append(0.5 * float(diff.abs().sum()))
        per_column.append(float(np.mean(distances)))
    if not per_column:
        return math.nan, math.nan
    return float(np.mean(per_column)), float(np.max(per_column))


def _mice_draws(frame: pd.DataFrame, n_draws: int, seed: int) -> list[pd.DataFrame]:
    """miceforest's completions: ``n_draws`` datasets, 3 rounds, mean matching on the models'
    SHAP values (its other strategies call a LightGBM method that LightGBM 4.7 changed);
    integer and boolean columns as floats and categories for it."""
    from miceforest import ImputationKernel

    coded = pd.DataFrame(index=frame.index)
    for name in frame.columns:
        series = frame[name]
        if isinstance(series.dtype, pd.CategoricalDtype):
            coded[name] = series
        elif pd.api.types.is_bool_dtype(series.dtype):
            coded[name] = series.astype(object).astype("category")
        else:
            coded[name] = series.astype("float64")
    kernel = ImputationKernel(
        coded, num_datasets=n_draws, mean_match_strategy="shap", random_state=seed
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kernel.mice(3, verbose=False, num_threads=1)
    return [kernel.complete_data(dataset=d) for d in range(n_draws)]


def _numeric_cells(frames: list[Any], mask: np.ndarray, columns: list[int]) -> list[list[Any]]:
    """Per completion, per column in ``columns``, its imputed cells."""
    out = []
    for f in frames:
        values = f if isinstance(f, np.ndarray) else None
        cells = []
        for j in columns:
            column = values[:, j] if values is not None else f.iloc[:, j]
            cells.append(np.asarray(column, dtype=np.float64)[mask[:, j]])
        out.append(cells)
    return out


def _scores(
    truth: Any, completions: list[Any], mask: np.ndarray, numeric: list[int], labels: list[int]
) -> dict[str, float]:
    """Coverage (several completions only), spread ratio and label distances."""
    removed = _numeric_cells([truth], mask, numeric)[0]
    imputed = _numeric_cells(completions, mask, numeric)
    result = {"spread": spread_ratio(removed, imputed), "coverage": math.nan}
    if len(completions) > 1 and numeric:
        stacked = np.stack([np.concatenate(c) for c in imputed])
        result["coverage"] = interval_coverage(np.concatenate(removed), stacked)
    result["labels"], result["labels_worst"] = math.nan, math.nan
    if labels:
        removed_labels = [truth.iloc[:, j][mask[:, j]].astype(str) for j in labels]
        imputed_labels = [
            [f.iloc[:, j][mask[:, j]].astype(str) for j in labels] for f in completions
        ]
        result["labels"], result["labels_worst"] = label_distance(removed_labels, imputed_labels)
    return result


MARGINAL = "observed shares resampled"
"""The label distance of draws that know the shares and nothing of the cells: each removed
label cell drawn from the observed labels' shares (the right marginal where cells are missing
completely at random). Draws that use what a row's other cells say can do better."""


def _mixed_mask(name: str, seed: int) -> tuple[pd.DataFrame, Any, list[bool]]:
    """A mixed table, its 30% MCAR mask of ``seed``, and which columns are numeric."""
    truth = load_mixed_dataset(name).frame
    mask = simulate_mixed(truth, "mcar", 0.3, random_state=seed)
    kinds = [
        pd.api.types.is_numeric_dtype(truth[c]) and not pd.api.types.is_bool_dtype(truth[c])
        for c in truth.columns
    ]
    return truth, mask, kinds


def label_marginal(name: str, seed: int) -> dict[str, Any]:
    """The :data:`MARGINAL` row of a mixed table's mask: its label distance, mean and worst."""
    truth, mask, kinds = _mixed_mask(name, seed)
    rng = np.random.default_rng(seed)
    labels = [j for j, numeric in enumerate(kinds) if not numeric]
    hidden = np.asarray(mask)
    removed = [truth.iloc[:, j][hidden[:, j]] for j in labels]
    observed = [truth.iloc[:, j][~hidden[:, j]].to_numpy() for j in labels]
    resampled = [
        [pd.Series(rng.choice(o, size=len(r))) for o, r in zip(observed, removed, strict=True)]
        for _ in range(DRAWS)
    ]
    mean, worst = label_distance(removed, resampled)
    nan = math.nan
    return {"dataset": name, "seed": seed, "method": MARGINAL, "s": 0.0, "spread": nan,
            "coverage": nan, "labels": mean, "labels_worst": worst}  # fmt: skip


def measure(name: str, seed: int, mixed: bool, baselines: bool) -> list[dict[str, Any]]:
    """Every method's scores on ``name``'s 30% MCAR mask of ``seed``."""
    if mixed:
        truth, mask, kinds = _mixed_mask(name, seed)
        data: Any = apply_mask(truth, mask)
    else:
        truth = load_dataset(name).X
        mask = simulate(truth, "mcar", 0.3, random_state=seed)
        data = np.where(mask, np.nan, truth)
        kinds = [True] * truth.shape[1]
    numeric = [j for j, k in enumerate(kinds) if k]
    labels = [j for j, k in enumerate(kinds) if not k]
    rows: list[dict[str, Any]] = []

    def record(method: str, completions: list[Any], seconds: float) -> None:
        scores = _scores(truth, completions, mask, numeric, labels)
        rows.append({"dataset": name, "seed": seed, "method": method, "s": seconds, **scores})
        print(rows[-1], flush=True)

    clock = time.perf_counter()
    imputer = TDMImputer(random_state=seed)
    point = imputer.fit_transform(data)
    fit_s = time.perf_counter() - clock
    record("tdm point", [point], fit_s)
    clock = time.perf_counter()
    draws = imputer.sample(data, DRAWS, random_state=seed)
    record(f"tdm {DRAWS} draws", list(draws), time.perf_counter() - clock)
    if baselines and len(mask) < BASELINE_ROWS:
        frame = (
            data if mixed else pd.DataFrame(data, columns=[f"c{j}" for j in range(data.shape[1])])
        )
        clock = time.perf_counter()
        try:
            mice = _mice_draws(frame, DRAWS, seed)
        except ValueError as error:  # its SHAP mean matching meets NaN on some tables
            print(f"miceforest failed on {name} seed {seed}: {error}", flush=True)
        else:
            if not mixed:
                mice = [m.to_numpy(dtype=np.float64) for m in mice]
            record(f"miceforest {DRAWS} draws", mice, time.perf_counter() - clock)
        method = "missforest_mixed" if mixed else "missforest"
        clock = time.perf_counter()
        forest = make_imputer(method, random_state=seed).fit_transform(data)
        record("missforest point", [forest], time.perf_counter() - clock)
    return rows + ([label_marginal(name, seed)] if mixed else [])


def report(args: argparse.Namespace, rows: list[dict[str, Any]]) -> str:
    """The markdown body: command, machine, protocol, one row per dataset and method (seeds
    averaged)."""
    table = pd.DataFrame(rows)
    grouped = table.groupby(["dataset", "method"], sort=False)[
        ["coverage", "spread", "labels", "labels_worst", "s"]
    ].mean()
    lines = [
        *header(command("draws")),
        "",
        f"Masks: 30% MCAR, seeds {args.seeds}, averaged. Coverage: share of removed numeric "
        f"values inside the central 90% interval of {DRAWS} draws; spread: imputed against "
        "removed values' standard deviation, median over numeric columns; labels: total "
        "variation between imputed and removed label shares, mean over label columns (worst "
        "column in brackets). `tdm point`'s seconds are the default fit's, `tdm draws`' those "
        "of `sample` after it. miceforest (20 datasets, 3 rounds, mean matching on SHAP values) "
        f"and MissForest ran on the tables under {BASELINE_ROWS:,} rows, where they finished. "
        "Targets: coverage 0.85 to 0.95, spread 0.85 to 1.15, labels at most 0.04 (0.08 "
        f"worst). `{MARGINAL}`: each removed label drawn from the observed labels' shares, "
        "the distance of draws that know the shares but nothing of the cells.",
        "",
        "| dataset | method | coverage | spread | labels (worst) | s |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for (dataset, method), r in grouped.iterrows():
        labels = (
            "-" if math.isnan(r["labels"]) else (f"{r['labels']:.3f} ({r['labels_worst']:.3f})")
        )
        lines.append(
            f"| {dataset} | {method} | {number_cell(r['coverage'])} | "
            f"{number_cell(r['spread'], 2)} | {labels} | {r['s']:.1f} |"
        )
    return "\n".join(lines)


def _check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before any measurement, tables of neither grid (or of the other one), seeds
    that are not whole numbers, and a --rows file whose folder does not exist."""
    from benchmarks.datasets import DATASETS, MIXED_DATASETS

    for flag, names, known in (
        ("--datasets", args.datasets, DATASETS),
        ("--mixed", args.mixed, MIXED_DATASETS),
    ):
        for name in filter(None, names.split(",")):
            if name not in known:
                parser.error(f"{flag} takes tables of {', '.join(known)}; got {name!r}")
    if not (args.datasets or args.mixed):
        parser.error("name the tables to measure: --datasets (numeric) or --mixed (mixed-type)")
    if not all(part.strip().isdigit() for part in args.seeds.split(",")):
        parser.error(f"--seeds takes comma-separated whole numbers; got {args.seeds!r}")
    if args.rows and not Path(args.rows).resolve().parent.is_dir():
        parser.error(f"--rows {args.rows}: its folder does not exist")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="")
    parser.add_argument("--mixed", default="")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--no-baselines", action="store_true")
    parser.add_argument(
        "--rows",
        help="JSON-lines file: each table's rows are appended; a table found there is not rerun",
    )
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md too")
    args = parser.parse_args()
    _check_args(parser, args)
    import torch

    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    kept = Path(args.rows) if args.rows else None
    done = (
        [json.loads(line) for line in kept.read_text().splitlines()]
        if kept and kept.exists()
        else []
    )
    rows = []
    for mixed, names in ((False, args.datasets), (True, args.mixed)):
        for name in filter(None, names.split(",")):
            for seed in seeds:
                earlier = [r for r in done if (r["dataset"], r["seed"]) == (name, seed)]
                new = [] if earlier else measure(name, seed, mixed, not args.no_baselines)
                if earlier and mixed and all(r["method"] != MARGINAL for r in earlier):
                    new = [label_marginal(name, seed)]  # a run from before this row was kept
                rows += earlier + new
                if kept and new:
                    with kept.open("a") as out:
                        out.writelines(json.dumps(r) + "\n" for r in new)
    publish("Draws: coverage, spread and label shares", report(args, rows), write=args.write)


if __name__ == "__main__":
    main()
