"""What a run shows in the Prefect UI: a report, per-column statistics and the training loss.

Three keyed artifacts per table and run (the impute task adds a fourth, the fit's progress):
`tdm-report-<table>` (markdown), `tdm-statistics-<table>` (table) and `tdm-loss-<table>`
(markdown with the loss curve as an embedded PNG: both Prefect UIs render a markdown image with a
`data:image/png;base64` address, while the V2 UI drops inline SVG). They are published from the
flow's process after the write-back; outside a Prefect run (unit tests calling steps directly)
nothing is published. The functions that build their content are pure, for tests.
"""

from __future__ import annotations

import base64
import io
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.context import FlowRunContext

from tasks.frames import as_float_frame

if TYPE_CHECKING:
    from tasks.load import SourceTable
    from tasks.quality import QualityReport
    from tasks.results import ImputationOutcome, ImputeTableResult

__all__ = [
    "LossCurve",
    "artifact_key",
    "column_statistics",
    "downsample_loss",
    "figure_markdown",
    "loss_plot_markdown",
    "loss_plot_png",
    "publish_run_report",
    "run_report_markdown",
]

#: Points drawn of a loss curve: longer histories are averaged in this many bins.
MAX_LOSS_POINTS = 300
#: Significant digits of the numbers in the statistics table.
STAT_DIGITS = 6


def artifact_key(kind: str, table: str) -> str:
    """A Prefect artifact key (lowercase letters, digits and dashes) for `kind` of `table`."""
    slug = "".join(c if c.isalnum() else "-" for c in table.lower()).strip("-") or "table"
    return f"tdm-{kind}-{slug}"[:100]


def run_report_markdown(
    result: ImputeTableResult,
    *,
    quality: QualityReport,
    outcome: ImputationOutcome | None,
) -> str:
    """The markdown report: table, rows, cells per column, checks, lineage id, time split."""
    n_cells = sum(result.cells_imputed.values())
    lines = [
        f"# Imputation of {_code(result.source_table)} → {_code(result.target_table)}",
        "",
        f"- status: **{result.status}**; rows: {result.rows}; cells imputed: {n_cells} "
        f"in {sum(1 for n in result.cells_imputed.values() if n)} of "
        f"{len(result.cells_imputed)} columns",
        f"- quality checks: **{'passed' if quality.passed else 'FAILED'}** "
        f"(range factor {quality.range_factor:g})",
        f"- lineage: run {_code(result.run_id)} in `tdm_lineage` (database "
        f"{_code(result.db_path)}): `SELECT * FROM tdm_lineage WHERE run_id = '{result.run_id}'`",
    ]
    if outcome is not None:
        lines.append(
            f"- imputer: {outcome.imputer} on `{outcome.device}`, {outcome.n_iter} iterations in "
            f"{outcome.fit_seconds:.2f} s, final loss {outcome.final_loss:.4g}"
        )
    else:
        lines.append("- imputer: none (the table has no missing value: it was copied through)")
    lines += ["", "| column | cells imputed | share of rows |", "|---|---:|---:|"]
    lines += [
        f"| {_cell(_code(c))} | {n} | {n / result.rows:.1%} |"
        if result.rows
        else f"| {_cell(_code(c))} | {n} | |"
        for c, n in result.cells_imputed.items()
    ]
    lines += ["", "| quality check | passed | detail |", "|---|---|---|"]
    lines += [
        f"| {_cell(c.name)} | {'yes' if c.passed else '**no**'} | {_cell(c.detail)} |"
        for c in quality.checks
    ]
    total = sum(result.seconds.values())
    lines += ["", "| step | seconds | share |", "|---|---:|---:|"]
    lines += [
        f"| {step} | {sec:.2f} | {sec / total:.0%} |" if total else f"| {step} | {sec:.2f} | |"
        for step, sec in result.seconds.items()
    ]
    lines.append(f"| **total** | **{total:.2f}** | |")
    return "\n".join(lines)


def column_statistics(
    source: pd.DataFrame, imputed: pd.DataFrame, cells_imputed: Mapping[str, int]
) -> list[dict[str, Any]]:
    """One row per imputed column: counts, and mean, std, min, max before and after imputation.

    "Before" describes the observed values of the source column (NULL left out), "after" the
    whole imputed column. `std` is the sample standard deviation (n - 1); a statistic without
    enough values (the std of one value) is None. Numbers keep `STAT_DIGITS` significant digits.
    """
    columns = list(cells_imputed)
    before, after = as_float_frame(source, columns), as_float_frame(imputed, columns)
    rows: list[dict[str, Any]] = []
    for name in columns:
        observed, filled = before[name].dropna(), after[name]
        row: dict[str, Any] = {
            "column": name,
            "observed": len(observed),
            "missing": int(before[name].isna().sum()),
            "imputed": int(cells_imputed[name]),
        }
        for when, values in (("before", observed), ("after", filled)):
            row[f"mean {when}"] = _rounded(values.mean())
            row[f"std {when}"] = _rounded(values.std())
            row[f"min {when}"] = _rounded(values.min())
            row[f"max {when}"] = _rounded(values.max())
        rows.append(row)
    return rows


@dataclass(frozen=True, eq=False)
class LossCurve:
    """A loss history cut to at most `MAX_LOSS_POINTS` bins of consecutive iterations.

    `iteration` is each bin's middle iteration (1-based), `mean`, `low` and `high` the mean,
    minimum and maximum loss in it; non-finite losses are left out.
    """

    iteration: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_iter: int


def downsample_loss(loss: np.ndarray, max_points: int = MAX_LOSS_POINTS) -> LossCurve:
    """Average a loss history of shape (n_iter,) in at most `max_points` equal bins."""
    if max_points < 1:
        raise ValueError(f"max_points must be at least 1, got {max_points}")
    values = np.asarray(loss, dtype=float).ravel()
    iterations = np.arange(1, values.size + 1, dtype=float)
    finite = np.isfinite(values)
    values, iterations = values[finite], iterations[finite]
    n_bins = min(max_points, values.size)
    bins = np.array_split(np.arange(values.size), n_bins) if n_bins else []
    return LossCurve(
        iteration=np.array([iterations[b].mean() for b in bins]),
        mean=np.array([values[b].mean() for b in bins]),
        low=np.array([values[b].min() for b in bins]),
        high=np.array([values[b].max() for b in bins]),
        n_iter=int(finite.size),
    )


def loss_plot_png(curve: LossCurve, *, title: str = "TDM training loss") -> bytes:
    """A small PNG (480 x 200 pixels) of the loss curve, its min-max band shaded."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.0, 2.5), dpi=80, layout="constrained")
    FigureCanvasAgg(figure)  # no pyplot: nothing global is touched
    axes = figure.add_subplot()
    if curve.iteration.size:
        axes.fill_between(curve.iteration, curve.low, curve.high, alpha=0.25, linewidth=0)
        axes.plot(curve.iteration, curve.mean, linewidth=1.5)
    axes.set(title=title, xlabel="iteration", ylabel="loss")
    axes.grid(alpha=0.3)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})  # reproducible bytes
    return buffer.getvalue()


def loss_plot_markdown(loss: np.ndarray, table: str) -> str:
    """Markdown with the loss curve of `table` as an embedded PNG and a one-line summary."""
    curve = downsample_loss(loss)
    lines = [f"# Training loss of {_code(table)}", ""]
    if not curve.iteration.size:
        lines.append("No loss was recorded in this run (no fit, or no finite loss).")
        return "\n".join(lines)
    png = base64.b64encode(loss_plot_png(curve, title=f"TDM training loss: {table}")).decode()
    values = np.asarray(loss, dtype=float)
    best = int(np.nanargmin(np.where(np.isfinite(values), values, np.nan)))
    finite = values[np.isfinite(values)]
    per_bin = math.ceil(finite.size / curve.iteration.size)
    lines += [
        f"![TDM training loss over {curve.n_iter} iterations](data:image/png;base64,{png})",
        "",
        f"{curve.n_iter} iterations: loss {finite[0]:.4g} at the first, {finite[-1]:.4g} at the "
        f"last, lowest {values[best]:.4g} (iteration {best + 1}).",
    ]
    if per_bin > 1:
        lines.append(
            f"Drawn: the mean of each of {curve.iteration.size} bins of up to {per_bin} "
            "iterations; the band spans their minimum and maximum."
        )
    if finite.size < values.size:
        lines.append(f"{values.size - finite.size} non-finite losses are left out.")
    return "\n".join(lines)


def figure_markdown(png: bytes, title: str, caption: str = "") -> str:
    """Markdown showing a PNG figure inline (a data address: the UI renders it as an image)."""
    data = base64.b64encode(png).decode()
    text = f"# {title}\n\n![{title}](data:image/png;base64,{data})"
    return text + (f"\n\n{caption}" if caption else "")


def publish_run_report(
    result: ImputeTableResult,
    *,
    source: SourceTable,
    imputed: pd.DataFrame,
    quality: QualityReport,
    outcome: ImputationOutcome | None,
) -> None:
    """Publish the run's artifacts to the Prefect API (a no-op outside a flow run)."""
    if FlowRunContext.get() is None:
        return
    table = result.source_table
    try:
        create_markdown_artifact(
            key=artifact_key("report", table),
            markdown=run_report_markdown(result, quality=quality, outcome=outcome),
            description=f"TDM imputation of {table}: {sum(result.cells_imputed.values())} "
            f"cells imputed, checks {'passed' if quality.passed else 'failed'}",
        )
        create_table_artifact(
            key=artifact_key("statistics", table),
            table=column_statistics(source.frame, imputed, result.cells_imputed),
            description=f"Per-column statistics of {table} before and after imputation",
        )
        losses = outcome.loss_history if outcome is not None else np.empty(0)
        create_markdown_artifact(
            key=artifact_key("loss", table),
            markdown=loss_plot_markdown(losses, table),
            description=f"TDM training loss on {table}",
        )
    except Exception as error:
        # The table and its lineage are committed by now: a monitoring hiccup must not fail
        # (and so misreport) a run whose data was written.
        get_run_logger().warning(
            "Publishing the artifacts of %r failed: %s: %s", table, type(error).__name__, error
        )


def _rounded(value: float) -> float | None:
    """`value` to `STAT_DIGITS` significant digits; None for NaN (JSON has no NaN)."""
    number = float(value)
    return float(f"{number:.{STAT_DIGITS}g}") if math.isfinite(number) else None


def _code(text: str) -> str:
    """`text` as a markdown code span, whatever backticks or line breaks it holds."""
    flat = " ".join(str(text).splitlines())
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    if not longest:
        return f"`{flat}`"
    fence = "`" * (longest + 1)
    return f"{fence} {flat} {fence}"  # the spaces let the text start or end with a backtick


def _cell(text: str) -> str:
    """`text` safe in a markdown table cell (pipes escaped, one line)."""
    return " ".join(str(text).splitlines()).replace("|", "\\|")
