"""The benchmark report: markdown tables of mean ± std and the paper-style figures.

Pure pandas and matplotlib over the results tables (no `tdm` import, no Prefect): the flow reads
the tables, calls `write_report` with the method registry's display order and fixtures, and
publishes what comes back as Prefect artifacts.

- `tables.md`: one table per metric (MAE, RMSE, W2²/2, SVM accuracy): rows dataset x mechanism,
  columns methods, cells mean ± std over seeds (with the count when it is below the most seen),
  the best mean of each row in bold.
- `figures/bars_<mechanism>.png`: grouped bars of MAE per dataset for each mechanism, one bar per
  method with the std over seeds as error bar (the paper's Figure 3 layout).
- `benchmark.csv`: every trial (without its loss trace), the committed form of the results.
- `figures/mae_over_iterations.png`: MAE after k steps for TDM vs OTImputer when MAE traces were
  recorded; otherwise `figures/loss_over_iterations.png`, the recorded loss traces.

Mixed-type tables (trials with a categorical error rate, `cat_error`) get their own section:
numeric MAE in column standard deviations and categorical error rate per dataset and mechanism,
a line per dataset on whether `tdm` is no worse than the best baseline, and
`figures/mixed.png`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.figures import MECHANISM_ORDER, bar_figures, mixed_figure, ordered, trace_figure

__all__ = [
    "METRICS",
    "MIXED_METRICS",
    "MethodLayout",
    "Report",
    "label_configurations",
    "latest_per_trial",
    "metric_table",
    "mixed_verdicts",
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
#: The mixed-type tables' metrics: `mae` there is in column standard deviations (numeric cells).
MIXED_METRICS: dict[str, tuple[str, bool]] = {
    "mae": ("numeric MAE (column SDs)", True),
    "cat_error": ("categorical error rate", True),
}


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
    metrics = list(METRICS) + (["cat_error"] if "cat_error" in results else [])
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
    lower_is_better = {**METRICS, **MIXED_METRICS}[metric][1]
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
    order = {m: i for i, m in enumerate(MECHANISM_ORDER)}
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
            firsts.items(), key=lambda kv: ordered(list(firsts), MECHANISM_ORDER).index(kv[0])
        )
    )
    return "\n".join([*lines, "", f"Datasets where {method} is the best of all: {counts}."])


def _tables_markdown(results: pd.DataFrame, summary: pd.DataFrame, layout: MethodLayout) -> str:
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
        parts += [
            "",
            f"## {heading} ({direction})",
            "",
            metric_table(summary, metric, layout.order),
        ]
    if "tdm" in set(summary["method"]):
        parts += ["", "## tdm's rank among all methods (MAE)", "", rank_table(summary, "tdm")]
        if set(layout.fixtures) & set(summary["method"]):
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
        if method in set(summary["method"]):
            parts += ["", f"## {method} against the best other method", "",
                      versus_best(summary, method)]  # fmt: skip
    return "\n".join(parts) + "\n"


def mixed_verdicts(summary: pd.DataFrame, method: str = "tdm") -> str:
    """Markdown lines, one per dataset: per mechanism and metric, `method` against the best
    baseline (the best mean among methods that are not TDM variants), and per mechanism and
    metric on how many datasets `method` is no worse (its mean at most the best baseline's)."""
    lines: list[str] = []
    no_worse: dict[tuple[str, str], list[int]] = {}
    for dataset in sorted(summary["dataset"].unique()):
        part = summary[summary["dataset"] == dataset]
        notes = []
        for mechanism in ordered(part["mechanism"].tolist(), MECHANISM_ORDER):
            group = part[part["mechanism"] == mechanism].set_index("method")
            baselines = group[~group.index.str.startswith("tdm")]
            if method not in group.index or baselines.empty:
                continue
            for metric, (heading, _) in MIXED_METRICS.items():
                scores = baselines[f"{metric}_mean"].dropna()
                ours = float(group.loc[method, f"{metric}_mean"])
                if scores.empty or np.isnan(ours):
                    continue
                best = str(scores.idxmin())
                ok = ours <= float(scores[best])
                tally = no_worse.setdefault((mechanism, heading), [0, 0])
                tally[0] += int(ok)
                tally[1] += 1
                notes.append(
                    f"{mechanism.upper()} {heading} {ours:.3f} vs {best} {scores[best]:.3f} "
                    f"({'no worse' if ok else f'worse by {ours - scores[best]:.3f}'})"
                )
        if notes:
            lines.append(f"- **{dataset}**: " + "; ".join(notes) + ".")
    if not lines:
        return f"(no dataset where {method} and a baseline both ran)"
    counts = ", ".join(
        f"{heading}, {mechanism.upper()}: {k} of {n}"
        for (mechanism, heading), (k, n) in no_worse.items()
    )
    return "\n".join([*lines, "", f"Datasets where {method} is no worse than the best baseline: "
                       f"{counts}."])  # fmt: skip


def _mixed_markdown(results: pd.DataFrame, summary: pd.DataFrame, layout: MethodLayout) -> str:
    seeds = sorted(int(s) for s in results["seed"].unique())
    parts = [
        "# Mixed-type tables",
        "",
        f"{len(results)} trials; mean ± std over seeds {seeds}; best mean per row in bold. "
        "Numeric MAE: absolute error of each masked float or integer cell over its column's "
        "standard deviation, averaged over the cells; categorical error rate: share of masked "
        "categorical and boolean cells with the wrong label. 30% missing.",
    ]
    for metric, (heading, _) in MIXED_METRICS.items():
        parts += ["", f"## {heading} (lower is better)", "",
                  metric_table(summary, metric, layout.order)]  # fmt: skip
    parts += ["", "## tdm against the best baseline", "", mixed_verdicts(summary)]
    return "\n".join(parts) + "\n"


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


def latest_per_trial(results: pd.DataFrame) -> pd.DataFrame:
    """One row per trial asked for: where a trial was run under several library versions (a new
    version runs its trials anew), the row of the newest version."""
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
    """Write `tables.md` and `figures/*.png` under `out_dir`; returns the paths and markdown.

    The tables and figures use the newest result of each trial (:func:`latest_per_trial`);
    `benchmark.csv` keeps every recorded row.
    """
    out = Path(out_dir)
    figures = out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    mixed_rows = _mixed_rows(results)
    paper, mixed = results[~mixed_rows], results[mixed_rows]
    markdown, summaries, paths = "", [], []
    if not paper.empty:
        labelled = label_configurations(latest_per_trial(paper))
        summaries.append(summarise(labelled))
        markdown = _tables_markdown(labelled, summaries[-1], layout)
        paths = bar_figures(summaries[-1], figures, layout.order)
        trace_path = trace_figure(paper, traces, figures, layout.order)
        if trace_path is not None:
            paths.append(trace_path)
    if not mixed.empty:
        labelled = label_configurations(latest_per_trial(mixed))
        summaries.append(summarise(labelled))
        markdown += ("\n" if markdown else "") + _mixed_markdown(labelled, summaries[-1], layout)
        paths.append(mixed_figure(summaries[-1], figures, layout.order))
    if results.empty:
        markdown = "# Benchmark results\n\nNo trial recorded yet.\n"
    summary = pd.concat(summaries, ignore_index=True) if summaries else pd.DataFrame()
    tables_path = out / "tables.md"
    tables_path.write_text(markdown)
    # The committed copy of the results: plain CSV, sorted, diff-friendly (the .duckdb is not).
    if not results.empty:
        ordered = results.sort_values(["dataset", "mechanism", "method", "seed"])
        ordered.drop(columns=["loss_trace"]).to_csv(out / "benchmark.csv", index=False)
    return Report(tables_path, tuple(paths), markdown, summary)
