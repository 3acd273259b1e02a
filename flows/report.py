"""The benchmark report: markdown tables of mean ± std and the paper-style figures.

Pure pandas and matplotlib over the results tables (no `tdm` import, no Prefect): the flow reads
the tables, calls `write_report`, and publishes what comes back as Prefect artifacts.

- `tables.md`: one table per metric (MAE, RMSE, W2²/2, SVM accuracy): rows dataset x mechanism,
  columns methods, cells mean ± std over seeds (with the count when it is below the most seen),
  the best mean of each row in bold.
- `figures/bars_<mechanism>.png`: grouped bars of MAE per dataset for each mechanism, one bar per
  method with the std over seeds as error bar (the paper's Figure 3 layout).
- `benchmark.csv`: every trial (without its loss trace), the committed form of the results.
- `figures/mae_over_iterations.png`: MAE after k steps for TDM vs OTImputer when MAE traces were
  recorded; otherwise `figures/loss_over_iterations.png`, the recorded loss traces.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "METRICS",
    "Report",
    "label_configurations",
    "metric_table",
    "rank_table",
    "summarise",
    "versus_best",
    "write_report",
]

#: Metric column -> (heading, whether lower is better).
METRICS: dict[str, tuple[str, bool]] = {
    "mae": ("MAE", True),
    "rmse": ("RMSE", True),
    "w2sq_half": ("W2²/2 (the paper's OT)", True),
    "accuracy": ("SVM accuracy (5-fold CV)", False),
}

# Method order in tables and figures: baselines, then the OT imputers, then TDM.
_METHOD_ORDER = (
    "mean",
    "ice",
    "missforest",
    "softimpute",
    "gain",
    "miwae",
    "ot_sh",
    "ot_ns",
    "tdm",
    "tdm_fixed_cell_lr",
    "tdm_ice_init",
    "tdm_mean_init",
    "tdm_paper",
)
# The library's earlier default configurations, pinned for the before/after comparison.
_EARLIER_TDM_DEFAULTS = ("tdm_fixed_cell_lr", "tdm_ice_init", "tdm_mean_init")
_MECHANISM_ORDER = ("mcar", "mar", "mnarl", "mnarq", "mnarq_published")


@dataclass(frozen=True)
class Report:
    """Where the report went and its markdown text."""

    tables_path: Path
    figure_paths: tuple[Path, ...]
    markdown: str
    summary: pd.DataFrame


def _ordered(values: Sequence[str], order: Sequence[str]) -> list[str]:
    rank = {name: i for i, name in enumerate(order)}
    return sorted(set(values), key=lambda v: (rank.get(v, len(rank)), v))


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Mean, std and count over seeds of every metric per dataset, mechanism and method."""
    grouped = results.groupby(["dataset", "mechanism", "method"], sort=False)[list(METRICS)]
    summary = grouped.agg(["mean", "std", "count"])
    summary.columns = [f"{metric}_{stat}" for metric, stat in summary.columns]
    return summary.reset_index()


def _cell(mean: float, std: float, count: int, most: int, bold: bool) -> str:
    if count == 0 or np.isnan(mean):
        return "-"
    text = f"{mean:.3f} ± {0.0 if np.isnan(std) else std:.3f}"
    if bold:
        text = f"**{text}**"
    return text if count >= most else f"{text} (n={count})"


def metric_table(summary: pd.DataFrame, metric: str) -> str:
    """One markdown table: rows dataset/mechanism, columns methods, cells mean ± std."""
    lower_is_better = METRICS[metric][1]
    methods = _ordered(summary["method"].tolist(), _METHOD_ORDER)
    most = int(summary[f"{metric}_count"].max()) if len(summary) else 0
    if metric == "accuracy" and summary["accuracy_count"].sum() == 0:
        return "(no labelled dataset among the trials, or `svm_repeats=0`)"
    lines = [
        "| dataset | mechanism | " + " | ".join(methods) + " |",
        "|---|---|" + "---|" * len(methods),
    ]
    rows = summary.set_index(["dataset", "mechanism", "method"])
    for dataset in sorted(summary["dataset"].unique()):
        for mechanism in _ordered(
            summary.loc[summary["dataset"] == dataset, "mechanism"].tolist(), _MECHANISM_ORDER
        ):
            means = {
                m: rows[f"{metric}_mean"].get((dataset, mechanism, m), np.nan) for m in methods
            }
            finite = [v for v in means.values() if not np.isnan(v)]
            if not finite:
                continue  # e.g. accuracy on a regression dataset
            best = min(finite) if lower_is_better else max(finite)
            cells = []
            for m in methods:
                key = (dataset, mechanism, m)
                count = int(rows[f"{metric}_count"].get(key, 0))
                std = float(rows[f"{metric}_std"].get(key, np.nan))
                cells.append(_cell(means[m], std, count, most, bold=means[m] == best))
            lines.append(f"| {dataset} | {mechanism} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def versus_best(summary: pd.DataFrame, method: str = "tdm_paper") -> str:
    """Markdown: `method` against the best other method per dataset/mechanism and metric.

    The best other method is the one with the best mean over seeds among the methods that are
    not a TDM variant; the difference is `method` minus best (negative is better for errors,
    positive is better for accuracy). Only groups where `method` ran are listed.
    """
    mine = summary[summary["method"] == method]
    others = summary[~summary["method"].str.startswith("tdm")]
    lines = [
        f"| dataset | mechanism | metric | {method} | best other | best other mean | "
        f"difference | {method} wins |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in mine.sort_values(["dataset", "mechanism"]).itertuples(index=False):
        rivals = others[(others["dataset"] == row.dataset) & (others["mechanism"] == row.mechanism)]
        for metric, (heading, lower) in METRICS.items():
            ours = float(getattr(row, f"{metric}_mean"))
            scores = rivals.set_index("method")[f"{metric}_mean"].dropna()
            if np.isnan(ours) or scores.empty:
                continue
            best = scores.idxmin() if lower else scores.idxmax()
            diff = ours - float(scores[best])
            wins = diff < 0 if lower else diff > 0
            lines.append(
                f"| {row.dataset} | {row.mechanism} | {heading.split(' ')[0]} | {ours:.3f} | "
                f"{best} | {float(scores[best]):.3f} | {diff:+.3f} | {'yes' if wins else 'no'} |"
            )
    return "\n".join(lines)


def rank_table(
    summary: pd.DataFrame,
    method: str = "tdm",
    metric: str = "mae",
    *,
    leave_out: tuple[str, ...] = (),
) -> str:
    """Markdown: `method`'s rank among all methods but `leave_out` (TDM variants included) per
    dataset and mechanism, the best of the others, and per mechanism on how many datasets it is
    the best."""
    summary = summary[~summary["method"].isin(leave_out)]
    lower = METRICS[metric][1]
    column = f"{metric}_mean"
    lines = [
        f"| dataset | mechanism | {method} | rank | best other | best other mean | difference |",
        "|---|---|---|---|---|---|---|",
    ]
    firsts: dict[str, list[int]] = {}
    order = {m: i for i, m in enumerate(_MECHANISM_ORDER)}
    groups = sorted(
        summary.groupby(["dataset", "mechanism"], sort=False),
        key=lambda item: (item[0][0], order.get(item[0][1], len(order)), item[0][1]),
    )
    for (dataset, mechanism), group in groups:
        scores = group.set_index("method")[column].dropna()
        if method not in scores.index or len(scores) < 2:
            continue
        ours = float(scores[method])
        others = scores.drop(method)
        best = others.idxmin() if lower else others.idxmax()
        better = int((others < ours).sum() if lower else (others > ours).sum())
        firsts.setdefault(str(mechanism), [0, 0])[0] += int(better == 0)
        firsts[str(mechanism)][1] += 1
        lines.append(
            f"| {dataset} | {mechanism} | {ours:.3f} | {better + 1} of {len(scores)} | {best} | "
            f"{float(others[best]):.3f} | {ours - float(others[best]):+.3f} |"
        )
    counts = ", ".join(
        f"{mechanism}: {wins} of {total}"
        for mechanism, (wins, total) in sorted(
            firsts.items(), key=lambda kv: _ordered(list(firsts), _MECHANISM_ORDER).index(kv[0])
        )
    )
    return "\n".join([*lines, "", f"Datasets where {method} is the best of all: {counts}."])


def _tables_markdown(results: pd.DataFrame, summary: pd.DataFrame) -> str:
    seeds = sorted(int(s) for s in results["seed"].unique())
    parts = [
        "# Benchmark results",
        "",
        f"{len(results)} trials; mean ± std over seeds {seeds} (n = seeds counted when fewer "
        "than the most); best mean per row in bold. Data standardised per column, 30% missing "
        "(see `RESULTS.md` for the protocol).",
    ]
    for metric, (heading, lower) in METRICS.items():
        direction = "lower is better" if lower else "higher is better"
        parts += ["", f"## {heading} ({direction})", "", metric_table(summary, metric)]
    if "tdm" in set(summary["method"]):
        parts += ["", "## tdm's rank among all methods (MAE)", "", rank_table(summary, "tdm")]
        if set(_EARLIER_TDM_DEFAULTS) & set(summary["method"]):
            parts += [
                "",
                "## tdm's rank among the baselines and tdm_paper (MAE)",
                "",
                "Earlier tdm defaults (" + ", ".join(_EARLIER_TDM_DEFAULTS) + ") left out: the "
                'competitors named by the issue "Beyond the paper".',
                "",
                rank_table(summary, "tdm", leave_out=_EARLIER_TDM_DEFAULTS),
            ]
    for method in ("tdm_paper", "tdm"):
        if method in set(summary["method"]):
            parts += ["", f"## {method} against the best other method", "",
                      versus_best(summary, method)]  # fmt: skip
    return "\n".join(parts) + "\n"


def _bar_figures(summary: pd.DataFrame, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    methods = _ordered(summary["method"].tolist(), _METHOD_ORDER)
    colours = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(methods)}
    for mechanism in _ordered(summary["mechanism"].tolist(), _MECHANISM_ORDER):
        part = summary[summary["mechanism"] == mechanism]
        datasets = sorted(part["dataset"].unique())
        present = [m for m in methods if m in set(part["method"])]  # no empty slots
        width = 0.8 / max(len(present), 1)
        fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(datasets) + 2), 4.2))
        rows = part.set_index(["dataset", "method"])
        for i, method in enumerate(present):
            heights = [rows["mae_mean"].get((d, method), np.nan) for d in datasets]
            errors = [rows["mae_std"].get((d, method), np.nan) for d in datasets]
            x = np.arange(len(datasets)) + (i - (len(present) - 1) / 2) * width
            ax.bar(
                x,
                heights,
                width,
                yerr=np.nan_to_num(errors),
                label=method,
                color=colours[method],
                capsize=2,
            )
        ax.set_xticks(np.arange(len(datasets)), datasets, rotation=15)
        ax.set_ylabel("MAE (standardised units)")
        ax.set_title(f"MAE per dataset, {mechanism.upper()}, 30% missing (mean ± std over seeds)")
        # Below the axes: inside, the legend would hide the bars.
        ax.legend(
            fontsize=7,
            ncol=min(len(present), 7),
            loc="upper center",
            bbox_to_anchor=(0.5, -0.22),
            frameon=False,
        )
        fig.tight_layout()
        path = out_dir / f"bars_{mechanism}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def _trace_figure(results: pd.DataFrame, traces: pd.DataFrame, out_dir: Path) -> Path | None:
    """MAE over iterations (traces table) or, failing that, loss over iterations (trials)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not traces.empty:
        # One panel per (dataset, mechanism); one colour per method across panels.
        panels = sorted(traces.groupby(["dataset", "mechanism"]).groups)
        methods = _ordered(traces["method"].tolist(), _METHOD_ORDER)
        colours = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(methods)}
        fig, axes = plt.subplots(
            1, len(panels), figsize=(4.2 * len(panels) + 1, 3.8), squeeze=False
        )
        for ax, (dataset, mechanism) in zip(axes[0], panels, strict=True):
            part = traces[(traces["dataset"] == dataset) & (traces["mechanism"] == mechanism)]
            for method, rows in part.groupby("method"):
                mean = rows.groupby("iteration")["mae"].agg(["mean", "count"])
                steps = np.maximum(mean.index.to_numpy(), 1)  # log axis: step 0 drawn at 1
                n_seeds = int(mean["count"].max())
                ax.plot(steps, mean["mean"], marker="o", ms=3, color=colours[str(method)],
                        label=f"{method} (seeds: {n_seeds})")  # fmt: skip
            ax.set_xscale("log")
            ax.set_xlabel("iterations (0, the initialisation, at 1)")
            ax.set_title(f"{dataset}, {mechanism.upper()}", fontsize=9)
            ax.legend(fontsize=7)
        axes[0][0].set_ylabel("MAE on the masked cells")
        fig.suptitle("MAE over iterations: TDM vs OTImputer (one refit per checkpoint)")
        fig.tight_layout()
        path = out_dir / "mae_over_iterations.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        (out_dir / "loss_over_iterations.png").unlink(missing_ok=True)  # superseded
        return path
    with_trace = results[results["loss_trace"].str.len() > 2]
    if with_trace.empty:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    first = with_trace.sort_values(["dataset", "mechanism", "seed"]).iloc[0]
    chosen = with_trace[
        (with_trace["dataset"] == first["dataset"])
        & (with_trace["mechanism"] == first["mechanism"])
        & (with_trace["seed"] == first["seed"])
    ]
    for row in chosen.itertuples(index=False):
        points = np.asarray(json.loads(str(row.loss_trace)), dtype=float)
        ax.plot(points[:, 0], points[:, 1], label=str(row.method))
    ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("transport loss (window mean)")
    ax.set_title(
        f"Loss over iterations ({first['dataset']}, {first['mechanism']}, seed "
        f"{first['seed']}); losses of different methods live in different spaces"
    )
    ax.title.set_fontsize(8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = out_dir / "loss_over_iterations.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def label_configurations(results: pd.DataFrame) -> pd.DataFrame:
    """Results whose method names tell apart configurations run under one name.

    A method recorded under more than one settings hash (say, before and after a change of a
    library default) would otherwise be averaged across configurations; each of its
    configurations becomes its own column, ``<method>@<first 6 hex digits of the hash>``.
    """
    counts = results.groupby("method")["params_hash"].nunique()
    mixed = set(counts[counts > 1].index)
    if not mixed:
        return results
    out = results.copy()
    rows = out["method"].isin(mixed)
    out.loc[rows, "method"] = out.loc[rows, "method"] + "@" + out.loc[rows, "params_hash"].str[:6]
    return out


def write_report(results: pd.DataFrame, traces: pd.DataFrame, out_dir: str | Path) -> Report:
    """Write `tables.md` and `figures/*.png` under `out_dir`; returns the paths and markdown."""
    out = Path(out_dir)
    figures = out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    if results.empty:
        markdown = "# Benchmark results\n\nNo trial recorded yet.\n"
        summary = pd.DataFrame()
        paths: list[Path] = []
    else:
        labelled = label_configurations(results)
        summary = summarise(labelled)
        markdown = _tables_markdown(labelled, summary)
        paths = _bar_figures(summary, figures)
    trace_path = _trace_figure(results, traces, figures) if not results.empty else None
    if trace_path is not None:
        paths.append(trace_path)
    tables_path = out / "tables.md"
    tables_path.write_text(markdown)
    # The committed copy of the results: plain CSV, sorted, diff-friendly (the .duckdb is not).
    if not results.empty:
        ordered = results.sort_values(["dataset", "mechanism", "method", "seed"])
        ordered.drop(columns=["loss_trace"]).to_csv(out / "benchmark.csv", index=False)
    return Report(tables_path, tuple(paths), markdown, summary)
