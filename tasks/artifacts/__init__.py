"""What a run shows in the Prefect UI: a report, per-column statistics and the training plot.

Three keyed markdown artifacts per table and run (the impute task adds a fourth, the fit's
progress): `tdm-report-<table>` (built here: the verdict first, then failures, checks collapsed
by kind, the bounds of the sane-range check and each column's bounds or labels, the lineage and
the time split), `tdm-statistics-<table>` (`statistics`: one row per column, before and after
side by side) and `tdm-loss-<table>` (`loss_plot`: the relative transport cost per iteration as
an embedded PNG, which both Prefect UIs render, while the V2 UI drops inline SVG). They are
published from the flow's process after the write-back; outside a Prefect run nothing is
published. The functions that build their content are pure.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.context import FlowRunContext

from tasks.artifacts.loss_plot import loss_plot_markdown
from tasks.artifacts.markdown import code_span, format_number, format_value, png_image, table_cell
from tasks.artifacts.statistics import column_statistics, statistics_markdown

if TYPE_CHECKING:
    from tasks.load import SourceTable
    from tasks.quality import CheckOutcome, QualityReport
    from tasks.results import ImputationOutcome, ImputeTableResult

__all__ = [
    "CHECK_KINDS",
    "artifact_key",
    "figure_markdown",
    "log_quality_warnings",
    "publish_run_report",
    "publish_warehouse_report",
    "run_report_markdown",
    "warehouse_report_markdown",
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
    "within_bounds": "within bounds",
    "expect_column_values_to_be_in_set": "observed labels",
    "integral_values": "integral",
    "observed_labels_identical": "observed labels unchanged",
    "label_shares": "imputed label shares",
    "imputed_spread": "imputed spread",
    "observed_share": "observed share",
}
_RANGE_KIND = "sane range"
_CHECK_NAME = re.compile(r'(?P<kind>[^\[]+)(?:\["(?P<column>.*)"\])?', re.DOTALL)


def artifact_key(kind: str, table: str) -> str:
    """A Prefect artifact key (ASCII lowercase letters, digits and dashes) for `kind` of
    `table`; a name with other characters also gets a digest of itself, so that two such names
    keep two keys."""
    slug = "".join(c if c.isascii() and c.isalnum() else "-" for c in table.lower()).strip("-")
    key = f"tdm-{kind}-{slug or 'table'}"
    if table.isascii():
        return key[:100]
    return f"{key[:91]}-{hashlib.blake2b(table.encode(), digest_size=4).hexdigest()}"


def run_report_markdown(
    result: ImputeTableResult,
    *,
    quality: QualityReport,
    outcome: ImputationOutcome | None,
) -> str:
    """The markdown report: the verdict, any failed check and warning, the checks by kind, each
    column's cells and sane range, the columns left as they are (NULLs included), the columns
    that could be declared NOT NULL, the fit, the lineage and the time split."""
    failed, warned = quality.failures, quality.warnings
    verdict = "passed" if not failed else "FAILED"
    source, target = code_span(result.source_table), code_span(result.target_table)
    lines = [
        f"# Imputation of {source} → {target}: {verdict}",
        "",
        f"**{'Passed' if not failed else 'FAILED'}**: {_what_was_done(result, passed=not failed)}; "
        + _checks_summary(len(quality.checks), len(failed), len(warned)),
    ]
    if failed:
        lines += ["", "## Failed checks", ""]
        lines += [f"- {_failure(check, quality)}" for check in failed]
    if warned:
        lines += ["", "## Warnings", ""]
        lines += [f"- {_failure(check, quality)}" for check in warned]
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
    if quality.value_bounds or quality.labels:
        lines += [
            "",
            "Bounds: the range a numeric column's imputed values were held to, and where each "
            "end comes from: `observed` (the observed [min, max]), `config` (the table's "
            "`bounds`), `CHECK` (a CHECK constraint), `type` (the column type's range) or "
            "`open`; integers are imputed as integers. A text, enum or boolean column's "
            "imputed cells take labels observed in it.",
        ]
    lines += ["", *_columns_table(result, quality)]
    if result.not_imputed:
        lines += ["", "## Not imputed", ""]
        lines += [f"- {note}" for note in result.not_imputed]
    if result.could_be_not_null:
        lines += ["", _not_null_note(result)]
    lines += [*_model_section(result), "", "## Run", ""]
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
        lines += _draws_lines(outcome)
    elif result.model_version is not None:
        lines.append(
            f"- imputer: the stored model, version {result.model_version} in `tdm_models`, "
            "imputed the new rows with its `transform` (no fit in this run)"
        )
    else:
        lines.append(
            "- imputer: none (no missing value in the columns to impute: the table was copied "
            "through)"
        )
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


def _draws_lines(outcome: ImputationOutcome) -> list[str]:
    """What the missing cells received, and the draws made for `tdm_imputed_cells`."""
    fill, draws = outcome.hyperparameters.get("fill"), outcome.hyperparameters.get("draws")
    lines = []
    if fill == "draw":
        lines.append(
            "- fill: one draw of the missing cells (their spread and label shares near "
            "the data's), not each cell's best guess"
        )
    if draws:
        # Partitions draw as they are imputed: their time is the partitions' step.
        took = f" in {outcome.draw_seconds:.2f} s" if outcome.draw_seconds else ""
        lines.append(
            f"- draws: {draws} per imputed cell{took}; "
            "`tdm_imputed_cells` holds each numeric cell's `low` and `high` (5% and 95% "
            "quantiles of its draws) and each label cell's `probability` (the share of its "
            "draws that agree with the label written)"
        )
    return lines


def _not_null_note(result: ImputeTableResult) -> str:
    """The sentence saying which imputed columns could now be declared NOT NULL."""
    listed = ", ".join(f'"{name}"' for name in result.could_be_not_null)
    return (
        f"NOT NULL: {listed} hold no NULL now that their gaps are imputed; nullable in the source, "
        f"they are nullable in {result.target_table!r} too, and could be declared NOT NULL."
    )


def _checks_summary(n_checks: int, n_failed: int, n_warned: int) -> str:
    if n_failed:
        summary = f"{n_failed} of {n_checks} quality checks failed"
    elif n_warned:
        summary = f"{n_checks - n_warned} of {n_checks} quality checks passed"
    else:
        summary = f"all {n_checks} quality checks passed"
    return summary + (f", {n_warned} warned (not a failure)." if n_warned else ".")


def _model_section(result: ImputeTableResult) -> list[str]:
    """An incremental run's model: the version that imputed, rows new and kept, why a model was
    fitted (or that the stored one was used), and each column's drift against the fit data,
    below its threshold too. Empty for other runs."""
    if result.model_version is None:
        return []
    if result.refit_reason is None:
        why = "the stored model imputed the new rows (no refit)"
    else:
        why = f"a new model was fitted: {result.refit_reason}"
    kept = (
        f"{result.rows_reused} rows imputed before were kept as they were"
        if result.appended
        else "the target was written anew"
    )
    lines = [
        "",
        "## Model",
        "",
        f"- version {result.model_version} in `tdm_models` imputed {result.rows_new} new rows; "
        f"{kept}",
        f"- {why}",
    ]
    if result.drift:
        lines += [
            "",
            "Drift of the new rows against the model's fit data (numeric: mean shift in fit "
            "standard deviations; text, enum, boolean: total variation distance of the label "
            "shares); a drift counts past its threshold and past what chance alone shows on "
            "as many values drawn from the fit data (in 0.1% of draws):",
            "",
            "| column | measure | drift | threshold | chance alone up to | new values | past |",
            "|---|---|---:|---:|---:|---:|---|",
        ]
        for column, d in result.drift.items():
            unseen = d.get("unseen_labels")
            past = ("yes" if d["exceeded"] else "no") + (
                f" (unseen labels: {', '.join(map(str, unseen))})" if unseen else ""
            )
            lines.append(
                f"| {code_span(column)} | {d['measure']} | {format_number(d['value'], 3)} | "
                f"{format_number(d['threshold'], 3)} | {format_number(d['chance'], 3)} | "
                f"{d['observed']} | {past} |"
            )
    return lines


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
        return (
            f"{source} ({result.rows} rows) has no missing value in the columns to impute: "
            f"copied, {where}"
        )
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
    with_limits = bool(quality.value_bounds or quality.labels)
    header = (
        "| column | cells imputed | share of rows |"
        + (" sane range [low, high] |" if with_bounds else "")
        + (" bounds or labels |" if with_limits else "")
    )
    lines = [
        header,
        "|---|---:|---:|" + ("---:|" if with_bounds else "") + ("---|" if with_limits else ""),
    ]
    for column, n in result.cells_imputed.items():
        share = f"{n / result.rows:.1%}" if result.rows else ""
        row = f"| {table_cell(code_span(column))} | {n} | {share} |"
        if with_bounds:
            bounds = quality.bounds.get(column)
            row += (
                f" [{format_number(bounds[0])}, {format_number(bounds[1])}] |" if bounds else " |"
            )
        if with_limits:
            row += f" {table_cell(_limits(column, quality))} |"
        lines.append(row)
    return lines


def _limits(column: str, quality: QualityReport) -> str:
    """A column's bounds (and where each end comes from) or its number of observed labels."""
    if column in quality.value_bounds:
        found = quality.value_bounds[column]
        ends = f"[{format_value(found.low)}, {format_value(found.high)}]"
        where = (
            found.low_from
            if found.low_from == found.high_from
            else (f"{found.low_from} / {found.high_from}")
        )
        return f"{ends} ({where})"
    if column in quality.labels:
        n_labels = quality.labels[column]
        return f"{n_labels} observed label{'s' * (n_labels != 1)}"
    return ""


def figure_markdown(png: bytes, title: str, caption: str = "") -> str:
    """Markdown showing a PNG figure inline (a data address: the UI renders it as an image)."""
    text = f"# {title}\n\n{png_image(png, title)}"
    return text + (f"\n\n{caption}" if caption else "")


def warehouse_report_markdown(
    name: str,
    db_path: str,
    results: Mapping[str, ImputeTableResult],
    failures: Mapping[str, str],
) -> str:
    """The markdown summary of a warehouse run `name`: a row per table of the config (written,
    left unchanged, or failed with its reason), its target, rows, cells imputed and seconds."""
    left = [table for table, result in results.items() if result.unchanged_since is not None]
    done, total = len(results) - len(left), len(results) + len(failures)
    verdict = f"{done} of {total} tables written"
    if left:
        verdict += f", {len(left)} unchanged"
    if failures:
        verdict += f", {len(failures)} failed"
    lines = [
        f"# Warehouse run {code_span(name)}: {verdict}",
        "",
        f"Database {code_span(db_path)}; each table's own report is its `tdm-report-<table>` "
        "artifact.",
        "",
        "| table | outcome | target | rows | cells imputed | seconds |",
        "|---|---|---|---:|---:|---:|",
    ]
    for table, result in results.items():
        outcome = "copied (nothing missing)" if result.status == "copied" else "written"
        if result.unchanged_since is not None:
            outcome = f"unchanged (as run {code_span(result.unchanged_since)} wrote it)"
        cells = sum(result.cells_imputed.values())
        lines.append(
            f"| {code_span(table)} | {outcome} | {code_span(result.target_table)} | "
            f"{result.rows:,} | {cells:,} | {sum(result.seconds.values()):.1f} |"
        )
    lines += [f"| {code_span(table)} | **failed** | | | | |" for table in failures]
    if failures:
        lines += ["", "## Failed", ""]
        lines += [f"- {code_span(table)}: {reason}" for table, reason in failures.items()]
    return "\n".join(lines)


def publish_warehouse_report(name: str, markdown: Callable[[], str], description: str) -> None:
    """Publish what `markdown` makes (`warehouse_report_markdown`) as the artifact
    `tdm-warehouse-<name>` (a no-op outside a flow run; a failure to make or publish it is a
    warning: the tables are committed by then)."""
    if FlowRunContext.get() is None:
        return
    try:
        create_markdown_artifact(
            key=artifact_key("warehouse", name), markdown=markdown(), description=description
        )
    except Exception as error:  # the tables are committed: monitoring must not fail the run
        get_run_logger().warning(
            "Publishing the warehouse report failed: %s: %s", type(error).__name__, error
        )


def log_quality_warnings(table: str, quality: QualityReport) -> None:
    """Log each check of `quality` that warned, naming `table`, the check and its column."""
    for check in quality.warnings:
        kind, column = _kind(check)
        where = f" of column {column!r}" if column is not None else ""
        get_run_logger().warning("Table %r: %s%s: %s", table, kind, where, check.detail)


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
    log_quality_warnings(table, quality)
    try:
        create_markdown_artifact(
            key=artifact_key("report", table),
            markdown=run_report_markdown(result, quality=quality, outcome=outcome),
            description=f"TDM imputation of {table}: {sum(result.cells_imputed.values())} "
            f"cells imputed, checks {'passed' if quality.passed else 'failed'}"
            + (f", {len(quality.warnings)} warned" if quality.warnings else ""),
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
