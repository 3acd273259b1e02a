"""The benchmark report: ``tables.md`` (mean ± std per metric, tdm's rank, the TDM variants
against the best other method), ``benchmark.csv`` and the figures, one section per grid (the
paper's numeric tables and the mixed-type tables)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.figures import (
    MECHANISM_ORDER,
    TRACE_FIGURE,
    bar_figures,
    mixed_figure,
    ordered,
    trace_figure,
)

__all__ = [
    "MIXED",
    "PAPER",
    "Grid",
    "MethodLayout",
    "Metric",
    "Report",
    "label_configurations",
    "latest_per_trial",
    "metric_table",
    "missing_rate",
    "rank_table",
    "summarise",
    "versus_best",
    "write_report",
]


@dataclass(frozen=True)
class Metric:
    """A metric column of the results, its heading, its short name and its direction."""

    column: str
    heading: str
    short: str
    lower_is_better: bool = True


@dataclass(frozen=True)
class Grid:
    """One grid's section of the report: its title, what its numbers are (``{rate}``: the
    missing rate), its metrics."""

    title: str
    note: str
    metrics: tuple[Metric, ...]


PAPER = Grid(
    "Benchmark results",
    "Data standardised per column, {rate} missing (see `RESULTS.md` for the protocol).",
    (
        Metric("mae", "MAE", "MAE"),
        Metric("rmse", "RMSE", "RMSE"),
        Metric("w2sq_half", "W2²/2 (the paper's OT)", "W2²/2"),
        Metric("accuracy", "SVM accuracy (5-fold CV)", "SVM", lower_is_better=False),
    ),
)
MIXED = Grid(
    "Mixed-type tables",
    "Numeric MAE: absolute error of each masked float or integer cell over its column's "
    "standard deviation, averaged over the cells; categorical error rate: share of masked "
    "categorical and boolean cells with the wrong label. {rate} missing.",
    (
        Metric("mae", "numeric MAE (column SDs)", "numeric MAE"),
        Metric("cat_error", "categorical error rate", "categorical error"),
    ),
)
_LOWER_IS_BETTER = {m.column: m.lower_is_better for g in (PAPER, MIXED) for m in g.metrics}


@dataclass(frozen=True)
class MethodLayout:
    """How methods appear: ``order`` of columns and bars (others follow alphabetically), and the
    benchmark ``fixtures`` (earlier default configurations) left out of the competitor ranking."""

    order: tuple[str, ...] = ()
    fixtures: tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    """Where the report went and its markdown text."""

    tables_path: Path
    figure_paths: tuple[Path, ...]
    markdown: str
    summary: pd.DataFrame


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Mean, std and count over seeds of every metric per dataset, mechanism and method."""
    metrics = [column for column in _LOWER_IS_BETTER if column in results]
    values = results.astype({metric: float for metric in metrics})
    grouped = values.groupby(["dataset", "mechanism", "method"], sort=False)[metrics]
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


def metric_table(summary: pd.DataFrame, metric: str, order: Sequence[str] = ()) -> str:
    """One markdown table: rows dataset/mechanism, columns methods, cells mean ± std."""
    lower_is_better = _LOWER_IS_BETTER[metric]
    methods = ordered(summary["method"].tolist(), order)
    most = int(summary[f"{metric}_count"].max()) if len(summary) else 0
    if metric == "accuracy" and summary["accuracy_count"].sum() == 0:
        return "(no labelled dataset among the trials, or `svm_repeats=0`)"
    lines = [
        "| dataset | mechanism | " + " | ".join(methods) + " |",
        "|---|---|" + "---|" * len(methods),
    ]
    rows = summary.set_index(["dataset", "mechanism", "method"])
    for dataset in sorted(summary["dataset"].unique()):
        for mechanism in ordered(
            summary.loc[summary["dataset"] == dataset, "mechanism"].tolist(), MECHANISM_ORDER
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


def versus_best(
    summary: pd.DataFrame, method: str = "tdm_paper", metrics: Sequence[Metric] = PAPER.metrics
) -> str:
    """Markdown: ``method`` against the best non-TDM method per dataset, mechanism and metric,
    and per metric and mechanism the count of datasets where it is no worse."""
    mine = summary[summary["method"] == method]
    others = summary[~summary["method"].str.startswith("tdm")]
    lines = [
        f"| dataset | mechanism | metric | {method} | best other | best other mean | "
        f"difference | {method} no worse |",
        "|---|---|---|---|---|---|---|---|",
    ]
    no_worse: dict[tuple[str, str], list[int]] = {}
    for row in mine.sort_values(["dataset", "mechanism"]).itertuples(index=False):
        rivals = others[(others["dataset"] == row.dataset) & (others["mechanism"] == row.mechanism)]
        for metric in metrics:
            ours = float(getattr(row, f"{metric.column}_mean"))
            scores = rivals.set_index("method")[f"{metric.column}_mean"].dropna()
            if np.isnan(ours) or scores.empty:
                continue
            best = scores.idxmin() if metric.lower_is_better else scores.idxmax()
            diff = ours - float(scores[best])
            ok = diff <= 0 if metric.lower_is_better else diff >= 0
            tally = no_worse.setdefault((metric.short, str(row.mechanism)), [0, 0])
            tally[0] += int(ok)
            tally[1] += 1
            lines.append(
                f"| {row.dataset} | {row.mechanism} | {metric.short} | {ours:.3f} | {best} | "
                f"{float(scores[best]):.3f} | {diff:+.3f} | {'yes' if ok else 'no'} |"
            )
    shorts = [metric.short for metric in metrics]
    mechanisms = ordered([mechanism for _, mechanism in no_worse], MECHANISM_ORDER)
    counts = "; ".join(
        f"{short}, {mechanism.upper()}: {no_worse[short, mechanism][0]} of "
        f"{no_worse[short, mechanism][1]}"
        for short in shorts
        for mechanism in mechanisms
        if (short, mechanism) in no_worse
    )
    return "\n".join([*lines, "", f"Datasets where {method} is no worse: {counts or 'none'}."])


def rank_table(
    summary: pd.DataFrame,
    method: str = "tdm",
    *,
    leave_out: tuple[str, ...] = (),
) -> str:
    """Markdown: ``method``'s rank by MAE (lower is better) among all methods but
    ``leave_out`` per dataset and mechanism, and on how many datasets per mechanism it is the
    best."""
    summary = summary[~summary["method"].isin(leave_out)]
    lines = [
        f"| dataset | mechanism | {method} | rank | best other | best other mean | difference |",
        "|---|---|---|---|---|---|---|",
    ]
    firsts: dict[str, list[int]] = {}
    order = {m: i for i, m in enumerate(MECHANISM_ORDER)}
    groups = sorted(
        summary.groupby(["dataset", "mechanism"], sort=False),
        key=lambda item: (item[0][0], order.get(item[0][1], len(order)), item[0][1]),
    )
    for (dataset, mechanism), group in groups:
        scores = group.set_index("method")["mae_mean"].dropna()
        if method not in scores.index or len(scores) < 2:
            continue
        ours = float(scores[method])
        others = scores.drop(method)
        best = others.idxmin()
        better = int((others < ours).sum())
        firsts.setdefault(str(mechanism), [0, 0])[0] += int(better == 0)
        firsts[str(mechanism)][1] += 1
        lines.append(
            f"| {dataset} | {mechanism} | {ours:.3f} | {better + 1} of {len(scores)} | {best} | "
            f"{float(others[best]):.3f} | {ours - float(others[best]):+.3f} |"
        )
    counts = ", ".join(
        f"{mechanism}: {firsts[mechanism][0]} of {firsts[mechanism][1]}"
        for mechanism in ordered(list(firsts), MECHANISM_ORDER)
    )
    return "\n".join([*lines, "", f"Datasets where {method} is the best of all: {counts}."])


def missing_rate(results: pd.DataFrame) -> str:
    """The one missing rate of ``results``' trials, as a percentage ("30%"); a ValueError
    where they hold several (a report's means would mix them)."""
    rates = sorted({float(p) for p in results["p"]})
    shown = [f"{rate:.0%}" if round(rate, 2) == rate else f"{rate:.1%}" for rate in rates]
    if len(rates) > 1:
        raise ValueError(
            f"the results hold trials at {len(rates)} missing rates ({', '.join(shown)}): a "
            "report covers one; give each rate a results file of its own (--db)"
        )
    return shown[0]


def _section(
    results: pd.DataFrame, summary: pd.DataFrame, layout: MethodLayout, grid: Grid, rate: str
) -> str:
    """One grid's part of `tables.md`."""
    seeds = sorted(int(s) for s in results["seed"].unique())
    parts = [
        f"# {grid.title}",
        "",
        f"{len(results)} trials; mean ± std over seeds {seeds} (n = seeds counted when fewer "
        f"than the most); best mean per row in bold. {grid.note.format(rate=rate)}",
    ]
    for metric in grid.metrics:
        direction = "lower is better" if metric.lower_is_better else "higher is better"
        table = metric_table(summary, metric.column, layout.order)
        parts += ["", f"## {metric.heading} ({direction})", "", table]
    methods = set(summary["method"])
    if "tdm" in methods:
        parts += ["", "## tdm's rank among all methods (MAE)", "", rank_table(summary, "tdm")]
        if set(layout.fixtures) & methods:
            parts += [
                "",
                "## tdm's rank among the baselines and tdm_paper (MAE)",
                "",
                "Benchmark fixtures (" + ", ".join(layout.fixtures) + ", earlier default "
                "configurations) left out.",
                "",
                rank_table(summary, "tdm", leave_out=layout.fixtures),
            ]
    for method in ("tdm_paper", "tdm"):
        if method in methods:
            table = versus_best(summary, method, grid.metrics)
            parts += ["", f"## {method} against the best other method", "", table]
    return "\n".join(parts) + "\n"


def label_configurations(results: pd.DataFrame) -> pd.DataFrame:
    """``results`` with a method recorded under several settings hashes split into
    ``<method>@<first 6 hex digits of the hash>``, one column per configuration."""
    counts = results.groupby("method")["params_hash"].nunique()
    mixed = set(counts[counts > 1].index)
    if not mixed:
        return results
    out = results.copy()
    rows = out["method"].isin(mixed)
    out.loc[rows, "method"] = out.loc[rows, "method"] + "@" + out.loc[rows, "params_hash"].str[:6]
    return out


def latest_per_trial(results: pd.DataFrame) -> pd.DataFrame:
    """One row per trial asked for: the row of its newest library version."""
    if results.empty or "tdm_version" not in results:
        return results
    version = results["tdm_version"].map(lambda v: tuple(int(x) for x in str(v).split(".")))
    newest_last = results.assign(_version=version).sort_values("_version", kind="mergesort")
    key = ["dataset", "mechanism", "seed", "method", "p", "params_hash"]
    latest = newest_last.drop_duplicates(key, keep="last").drop(columns="_version")
    return latest.sort_index()


def _mixed_rows(results: pd.DataFrame) -> pd.Series:
    """Rows of the mixed-type tables: every trial of a dataset where one has `cat_error`."""
    if results.empty or "cat_error" not in results:
        return pd.Series(False, index=results.index)
    mixed = set(results.loc[results["cat_error"].notna(), "dataset"])
    return results["dataset"].isin(mixed)


def write_report(
    results: pd.DataFrame,
    traces: pd.DataFrame,
    out_dir: str | Path,
    layout: MethodLayout = MethodLayout(),
) -> Report:
    """Write ``tables.md`` (newest row of each trial) and the figures under ``out_dir`` (removing
    the figures of an earlier report that this one does not draw), and ``benchmark.csv`` with
    every recorded row but the loss traces; a ValueError where the
    results hold several missing rates (:func:`missing_rate`)."""
    rate = missing_rate(results) if not results.empty else ""
    out = Path(out_dir)
    figures = out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    mixed_rows = _mixed_rows(results)
    sections, summaries, paths = [], [], []
    for grid, rows in ((PAPER, results[~mixed_rows]), (MIXED, results[mixed_rows])):
        if rows.empty:
            continue
        labelled = label_configurations(latest_per_trial(rows))
        summary = summarise(labelled)
        sections.append(_section(labelled, summary, layout, grid, rate))
        summaries.append(summary)
        if grid is MIXED:
            paths.append(mixed_figure(summary, figures, layout.order, rate))
            continue
        paths += bar_figures(summary, figures, layout.order, rate)
        trace_path = trace_figure(traces, figures, layout.order)
        if trace_path is not None:
            paths.append(trace_path)
    for stale in figures.glob("*.png"):  # this report's figures of an earlier one (a grid gone)
        own = stale.name.startswith("bars_") or stale.name in {"mixed.png", TRACE_FIGURE}
        if own and stale not in paths:
            stale.unlink()
    markdown = "\n".join(sections)
    if results.empty:
        markdown = "# Benchmark results\n\nNo trial recorded yet.\n"
    summary = pd.concat(summaries, ignore_index=True) if summaries else pd.DataFrame()
    tables_path = out / "tables.md"
    tables_path.write_text(markdown)
    # The committed copy of the results: plain CSV, sorted, diff-friendly (the .duckdb is not).
    if not results.empty:
        # Each trial of a cell in the order it finished: a rebuild writes the same bytes.
        key = ["dataset", "mechanism", "method", "seed", "finished_at"]
        ordered = results.sort_values(key, kind="mergesort")
        ordered.drop(columns=["loss_trace"]).to_csv(out / "benchmark.csv", index=False)
    return Report(tables_path, tuple(paths), markdown, summary)
