"""The report's figures: MAE bars per mechanism, MAE over iterations, and the mixed-type
tables' bars."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "MECHANISM_ORDER",
    "TRACE_FIGURE",
    "bar_figures",
    "mixed_figure",
    "ordered",
    "trace_figure",
]

MECHANISM_ORDER = ("mcar", "mar", "mnarl", "mnarq", "mnarq_published")
TRACE_FIGURE = "mae_over_iterations.png"
"""The file name of :func:`trace_figure`'s figure."""


def ordered(values: Sequence[str], order: Sequence[str]) -> list[str]:
    """The distinct ``values``, those named in ``order`` first in its order, others sorted."""
    rank = {name: i for i, name in enumerate(order)}
    return sorted(set(values), key=lambda v: (rank.get(v, len(rank)), v))


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files only, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, path: Path, rect: tuple[float, ...] = (0, 0, 1, 1)) -> Path:
    """Lay out ``fig``, write it to ``path`` at 120 dpi and close it."""
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _colours(plt: Any, methods: Sequence[str]) -> dict[str, Any]:
    """One colour per method, the same in every panel, no two alike up to 20 methods (a
    dark and a light shade of ten hues), then evenly spaced hues."""
    if len(methods) <= 10:
        return {m: plt.get_cmap("tab10")(i) for i, m in enumerate(methods)}
    if len(methods) <= 20:
        return {m: plt.get_cmap("tab20")(i) for i, m in enumerate(methods)}
    hues = plt.get_cmap("hsv")
    return {m: hues(i / len(methods)) for i, m in enumerate(methods)}


def _bars(
    ax: Any,
    summary: pd.DataFrame,
    metric: str,
    datasets: Sequence[str],
    methods: Sequence[str],
    colours: dict[str, Any],
) -> None:
    """Grouped bars of ``metric``'s mean per dataset, one bar per method, std as error bar."""
    rows = summary.set_index(["dataset", "method"])
    width = 0.8 / max(len(methods), 1)
    for i, method in enumerate(methods):
        heights = [rows[f"{metric}_mean"].get((d, method), np.nan) for d in datasets]
        errors = [rows[f"{metric}_std"].get((d, method), np.nan) for d in datasets]
        x = np.arange(len(datasets)) + (i - (len(methods) - 1) / 2) * width
        ax.bar(
            x,
            heights,
            width,
            yerr=np.nan_to_num(errors),
            label=method,
            color=colours[method],
            capsize=2,
        )


def bar_figures(
    summary: pd.DataFrame, out_dir: Path, order: Sequence[str], rate: str
) -> list[Path]:
    """``bars_<mechanism>.png``: MAE per dataset, one bar per method (the paper's Figure 3), at
    the missing ``rate`` ("30%")."""
    plt = _pyplot()
    paths = []
    methods = ordered(summary["method"].tolist(), order)
    colours = _colours(plt, methods)
    for mechanism in ordered(summary["mechanism"].tolist(), MECHANISM_ORDER):
        part = summary[summary["mechanism"] == mechanism]
        datasets = sorted(part["dataset"].unique())
        present = [m for m in methods if m in set(part["method"])]  # no empty slots
        fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(datasets) + 2), 4.2))
        _bars(ax, part, "mae", datasets, present, colours)
        ax.set_xticks(np.arange(len(datasets)), datasets, rotation=15)
        ax.set_ylabel("MAE (standardised units)")
        ax.set_title(
            f"MAE per dataset, {mechanism.upper()}, {rate} missing (mean ± std over seeds)"
        )
        # Below the axes: inside, the legend would hide the bars.
        ax.legend(
            fontsize=7,
            ncol=min(len(present), 7),
            loc="upper center",
            bbox_to_anchor=(0.5, -0.22),
            frameon=False,
        )
        paths.append(_save(plt, fig, out_dir / f"bars_{mechanism}.png"))
    return paths


def trace_figure(traces: pd.DataFrame, out_dir: Path, order: Sequence[str]) -> Path | None:
    """``mae_over_iterations.png`` from the MAE traces; None when there are none."""
    if traces.empty:
        return None
    plt = _pyplot()
    panels = sorted(traces.groupby(["dataset", "mechanism"]).groups)
    colours = _colours(plt, ordered(traces["method"].tolist(), order))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 1, 3.8), squeeze=False)
    for ax, (dataset, mechanism) in zip(axes[0], panels, strict=True):
        part = traces[(traces["dataset"] == dataset) & (traces["mechanism"] == mechanism)]
        for method, rows in part.groupby("method"):
            mean = rows.groupby("iteration")["mae"].agg(["mean", "count"])
            steps = np.maximum(mean.index.to_numpy(), 1)  # log axis: step 0 drawn at 1
            n_seeds = int(mean["count"].max())
            ax.plot(
                steps,
                mean["mean"],
                marker="o",
                ms=3,
                color=colours[str(method)],
                label=f"{method} (seeds: {n_seeds})",
            )
        ax.set_xscale("log")
        ax.set_xlabel("iterations (0, the initialisation, at 1)")
        ax.set_title(f"{dataset}, {mechanism.upper()}", fontsize=9)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("MAE on the masked cells")
    fig.suptitle("MAE over iterations: TDM vs OTImputer (one refit per checkpoint)")
    return _save(plt, fig, out_dir / TRACE_FIGURE)


def mixed_figure(summary: pd.DataFrame, out_dir: Path, order: Sequence[str], rate: str) -> Path:
    """`mixed.png`: grouped bars per dataset, one panel per metric (numeric MAE in column SDs,
    categorical error rate) and mechanism, std over seeds as error bars, at the missing
    ``rate``."""
    plt = _pyplot()
    metrics = (("mae", "numeric MAE (column SDs)"), ("cat_error", "categorical error rate"))
    mechanisms = ordered(summary["mechanism"].tolist(), MECHANISM_ORDER)
    methods = ordered(summary["method"].tolist(), order)
    colours = _colours(plt, methods)
    datasets = sorted(summary["dataset"].unique())
    fig, axes = plt.subplots(
        len(metrics),
        len(mechanisms),
        figsize=(max(6.0, 1.3 * len(datasets) + 2) * len(mechanisms), 3.4 * len(metrics) + 0.8),
        squeeze=False,
    )
    for col, mechanism in enumerate(mechanisms):
        part = summary[summary["mechanism"] == mechanism]
        for row, (metric, label) in enumerate(metrics):
            ax = axes[row][col]
            _bars(ax, part, metric, datasets, methods, colours)
            ax.set_xticks(np.arange(len(datasets)), datasets, rotation=15, fontsize=8)
            ax.set_ylabel(label)
            ax.set_title(f"{label}, {mechanism.upper()}", fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(methods), frameon=False, fontsize=8)
    fig.suptitle(f"Mixed-type tables, {rate} missing (mean ± std over seeds)")
    return _save(plt, fig, out_dir / "mixed.png", rect=(0, 0.05, 1, 1))
