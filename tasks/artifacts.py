"""What a run shows in the Prefect UI: a report, per-column statistics and the training plot.

Three keyed markdown artifacts per table and run (the impute task adds a fourth, the fit's
progress): `tdm-report-<table>` (the verdict first, then failures, checks collapsed by kind, the
bounds of the sane-range check, the lineage and the time split), `tdm-statistics-<table>` (one row
per column, before and after side by side) and `tdm-loss-<table>` (the relative transport cost
per iteration as an embedded PNG: both Prefect UIs render a markdown image with a
`data:image/png;base64` address, while the V2 UI drops inline SVG; see `tasks.loss_plot`). The
statistics are a markdown table, not a Prefect table artifact: a table artifact cannot align or
format numbers, and the UIs clip its columns and page its rows. They are published from the
flow's process after the write-back; outside a Prefect run (unit tests calling steps directly)
nothing is published. The functions that build their content are pure, for tests.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.context import FlowRunContext

from tasks.frames import as_float_frame
from tasks.loss_plot import loss_plot_markdown
from tasks.markdown import code_span, format_number, table_cell

if TYPE_CHECKING:
    from tasks.load import SourceTable
    from tasks.quality import CheckOutcome, QualityReport
    from tasks.results import ImputationOutcome, ImputeTableResult

__all__ = [
    "CHECK_KINDS",
    "artifact_key",
    "column_statistics",
    "figure_markdown",
    "publish_run_report",
    "run_report_markdown",
    "statistics_markdown",
]

#: Short names of the checks a run makes, by the name of the check (before any `["column"]`).
CHECK_KINDS: Mapping[str, str] = {
    "expect_table_row_count_to_equal": "row count",
    "expect_column_values_to_not_be_null": "not null",
    "expect_column_values_to_be_between": "sane range",
    "expect_column_values_to_be_unique": "unique key",
    "output_schema": "output schema",
    "observed_cells_identical": "observed cells unchanged",
    "observed_cells_exact": "observed cells exact in their types",
    "imputed_cell_types": "imputed cell types",
}
_RANGE_KIND = "sane range"
_CHECK_NAME = re.compile(r'(?P<kind>[^\[]+)(?:\["(?P<column>.*)"\])?', re.DOTALL)


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
    """The markdown report: the verdict, any failed check, the checks by kind, each column's
    cells and sane range, the fit, the lineage and the time split."""
    failed = [c for c in quality.checks if not c.passed]
    verdict = "passed" if not failed else "FAILED"
    source, target = code_span(result.source_table), code_span(result.target_table)
    lines = [
        f"# Imputation of {source} → {target}: {verdict}",
        "",
        f"**{'Passed' if not failed else 'FAILED'}**: {_what_was_done(result, passed=not failed)}; "
        + (
            f"all {len(quality.checks)} quality checks passed."
            if not failed
            else f"{len(failed)} of {len(quality.checks)} quality checks failed."
        ),
    ]
    if failed:
        lines += ["", "## Failed checks", ""]
        lines += [f"- {_failure(check, quality)}" for check in failed]
    lines += ["", "## Checks", ""]
    lines += [f"- {line}" for line in _passed_by_kind(quality.checks)]
    if quality.bounds:
        k = f"{quality.range_factor:g}"
        lines += [
            "",
            f"Sane range: each value of an imputed column must lie within its observed [min, "
            f"max] widened on both sides by {k} times the observed range (max - min; for a "
            "constant column, its absolute value, at least 1); the factor is the "
            "`range_factor` setting, and each column's [low, high] is in the table below.",
        ]
    lines += ["", *_columns_table(result, quality), "", "## Run", ""]
    if outcome is not None:
        ratios = outcome.cost_ratio_history[np.isfinite(outcome.cost_ratio_history)]
        tail = (
            f"; relative transport cost {format_number(float(np.median(ratios[-100:])), 3)} "
            f"(median of the last {ratios[-100:].size} iterations; 1 = random pairs)"
            if ratios.size
            else ""
        )
        lines.append(
            f"- imputer: {outcome.imputer} on `{outcome.device}`, {outcome.n_iter} iterations in "
            f"{outcome.fit_seconds:.2f} s, final loss {outcome.final_loss:.4g}{tail}"
        )
    else:
        lines.append("- imputer: none (the table has no missing value: it was copied through)")
    lines.append(
        f"- lineage: run {code_span(result.run_id)} in `tdm_lineage` (database "
        f"{code_span(result.db_path)}): "
        f"`SELECT * FROM tdm_lineage WHERE run_id = '{result.run_id}'`"
    )
    total = sum(result.seconds.values())
    lines += ["", "| step | seconds | share |", "|---|---:|---:|"]
    lines += [
        f"| {step} | {sec:.2f} | {sec / total:.0%} |" if total else f"| {step} | {sec:.2f} | |"
        for step, sec in result.seconds.items()
    ]
    lines.append(f"| **total** | **{total:.2f}** | |")
    return "\n".join(lines)


def _what_was_done(result: ImputeTableResult, *, passed: bool) -> str:
    n_cells = sum(result.cells_imputed.values())
    n_columns = sum(1 for n in result.cells_imputed.values() if n)
    source, target = code_span(result.source_table), code_span(result.target_table)
    if not passed:
        where = f"target {target}"
    elif result.target_table == result.source_table:
        where = f"{source} updated in place"
    else:
        where = f"written to {target}"
    if result.status == "copied":
        return f"{source} ({result.rows} rows) has no missing value: copied, {where}"
    return (
        f"{n_cells} cells imputed in {n_columns} of {len(result.cells_imputed)} columns of "
        f"{source} ({result.rows} rows), {where}"
    )


def _kind(check: CheckOutcome) -> tuple[str, str | None]:
    """A check's short kind and its column (None for a check of the whole table)."""
    match = _CHECK_NAME.fullmatch(check.name)
    name, column = (match["kind"], match["column"]) if match else (check.name, None)
    return CHECK_KINDS.get(name, name), column


def _failure(check: CheckOutcome, quality: QualityReport) -> str:
    kind, column = _kind(check)
    line = f"{kind}" + (f" of {code_span(column)}" if column is not None else "")
    line += f": {check.detail}"
    if kind == _RANGE_KIND and column is not None and column in quality.bounds:
        low, high = quality.bounds[column]
        line += f" (allowed [{format_number(low)}, {format_number(high)}])"
    return line


def _passed_by_kind(checks: tuple[CheckOutcome, ...]) -> list[str]:
    """One line per kind of passed check, in the order the kinds first appear."""
    by_kind: dict[str, list[CheckOutcome]] = {}
    for check in checks:
        if check.passed:
            by_kind.setdefault(_kind(check)[0], []).append(check)
    lines = []
    for kind, passed in by_kind.items():
        if len(passed) == 1 and _kind(passed[0])[1] is None:
            lines.append(f"{kind}: passed ({passed[0].detail})")
        else:
            noun = "column" if len(passed) == 1 else "columns"
            lines.append(f"{kind}: {len(passed)} {noun} passed")
    return lines


def _columns_table(result: ImputeTableResult, quality: QualityReport) -> list[str]:
    with_bounds = bool(quality.bounds)
    header = "| column | cells imputed | share of rows |" + (
        " sane range [low, high] |" if with_bounds else ""
    )
    lines = [header, "|---|---:|---:|" + ("---:|" if with_bounds else "")]
    for column, n in result.cells_imputed.items():
        share = f"{n / result.rows:.1%}" if result.rows else ""
        row = f"| {table_cell(code_span(column))} | {n} | {share} |"
        if with_bounds:
            bounds = quality.bounds.get(column)
            row += (
                f" [{format_number(bounds[0])}, {format_number(bounds[1])}] |" if bounds else " |"
            )
        lines.append(row)
    return lines


def column_statistics(
    source: pd.DataFrame, imputed: pd.DataFrame, cells_imputed: Mapping[str, int]
) -> list[dict[str, Any]]:
    """One row per imputed column: counts; mean, std, min and max before and after imputation;
    the mean's shift in observed standard deviations and the std's relative change.

    "Before" describes the observed values of the source column (NULL left out), "after" the
    whole imputed column. `std` is the sample standard deviation (n - 1). A statistic that is
    not defined (the std of one value; a shift relative to a std of 0) is None.
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
            row[f"mean {when}"] = _number(values.mean())
            row[f"std {when}"] = _number(values.std())
            row[f"min {when}"] = _number(values.min())
            row[f"max {when}"] = _number(values.max())
        std, mean_before, mean_after = row["std before"], row["mean before"], row["mean after"]
        row["mean shift"] = (
            (mean_after - mean_before) / std
            if std and mean_before is not None and mean_after is not None
            else None
        )
        row["std change"] = (
            row["std after"] / std - 1 if std and row["std after"] is not None else None
        )
        rows.append(row)
    return rows


def statistics_markdown(rows: list[dict[str, Any]], table: str) -> str:
    """The rows of :func:`column_statistics` as one markdown table, numbers right-aligned."""
    lines = [
        f"# Column statistics of {code_span(table)}",
        "",
        "Before: the observed values of each column (NULL left out); after: the whole column "
        "once imputed. Numbers have 4 significant digits; the mean's shift is in standard "
        "deviations of the observed values, the std's change in percent.",
        "",
        "| column | observed | imputed | mean before | mean after | mean shift (sd) "
        "| std before | std after | std change | range before | range after |",
        "|---|" + "---:|" * 10,
    ]
    for row in rows:
        cells = [
            table_cell(code_span(row["column"])),
            str(row["observed"]),
            str(row["imputed"]),
            _shown(row["mean before"]),
            _shown(row["mean after"]),
            _signed(row["mean shift"], "{:+.3f}"),
            _shown(row["std before"]),
            _shown(row["std after"]),
            _signed(row["std change"], "{:+.1%}"),
            f"{_shown(row['min before'])} … {_shown(row['max before'])}",
            f"{_shown(row['min after'])} … {_shown(row['max after'])}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _number(value: float) -> float | None:
    """`value` as a float; None for NaN (a statistic that is not defined)."""
    number = float(value)
    return number if math.isfinite(number) else None


def _shown(value: float | None) -> str:
    return format_number(value) if value is not None else "n/a"


def _signed(value: float | None, template: str) -> str:
    return template.format(value) if value is not None else "n/a"


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
        create_markdown_artifact(
            key=artifact_key("statistics", table),
            markdown=statistics_markdown(
                column_statistics(source.frame, imputed, result.cells_imputed), table
            ),
            description=f"Per-column statistics of {table} before and after imputation",
        )
        empty = np.empty(0)
        create_markdown_artifact(
            key=artifact_key("loss", table),
            markdown=loss_plot_markdown(
                outcome.loss_history if outcome is not None else empty,
                table,
                outcome.cost_ratio_history if outcome is not None else empty,
            ),
            description=f"TDM training loss on {table}: relative transport cost per iteration",
        )
    except Exception as error:
        # The table and its lineage are committed by now: a monitoring hiccup must not fail
        # (and so misreport) a run whose data was written.
        get_run_logger().warning(
            "Publishing the artifacts of %r failed: %s: %s", table, type(error).__name__, error
        )
