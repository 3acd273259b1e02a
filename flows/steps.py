"""The steps one table goes through, shared by the `impute-table` and `impute-warehouse` flows.

`prepare_table` (load, validate, standardise) and `finish_table` (inverse scale, quality checks,
write-back with lineage, run report) run in the flow's own process: DuckDB allows one writing
process per file, so only the imputation between them is ever sent to a task runner.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import ParamSpec, TypeVar

from tasks.access import check_writable
from tasks.artifacts import publish_run_report
from tasks.frames import as_float_frame
from tasks.lineage import LineageRecord, current_run
from tasks.load import SourceTable, load_table
from tasks.params import ImputerParams
from tasks.quality import check_quality
from tasks.results import ImputationOutcome, ImputeTableResult, WriteResult
from tasks.scaling import Standardised, inverse_scale, standardise
from tasks.targets import check_target_writable
from tasks.validate import ImputationPlan, validate_input
from tasks.write import write_back

__all__ = [
    "ImputeOptions",
    "PreparedTable",
    "TableRequest",
    "finish_table",
    "prepare_table",
    "table_result",
]

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class TableRequest:
    """Which table to impute: its columns (None: every numeric one but the key), its key, and
    the target (None: the source name plus the target suffix, or the source itself)."""

    source_table: str
    columns: Sequence[str] | None = None
    key: str | None = None
    target_table: str | None = None
    replace_source: bool = False
    replace_target: bool = False


@dataclass(frozen=True)
class ImputeOptions:
    """How a table is imputed and checked, and when its run started (for the lineage row)."""

    params: ImputerParams
    seed: int
    range_factor: float
    started: datetime


@dataclass(frozen=True, eq=False)
class PreparedTable:
    """A loaded, validated table and, when it has missing cells, its standardised columns."""

    source: SourceTable
    plan: ImputationPlan
    scaled: Standardised | None
    seconds: dict[str, float]


def prepare_table(db_path: str, request: TableRequest, *, target_suffix: str) -> PreparedTable:
    """Check the file can be written (before any fit), load (read-only), validate and
    standardise one table."""
    check_writable(db_path)
    clock = _Clock()
    source = clock("load", load_table, db_path, request.source_table, request.key)
    plan = clock(
        "validate",
        validate_input,
        source,
        request.columns,
        request.key,
        request.target_table,
        request.replace_source,
        target_suffix,
        request.replace_target,
    )
    clock("validate", check_target_writable, db_path, plan)  # refused before any fit
    scaled = (
        clock("standardise", standardise, source.frame, plan.columns) if plan.n_missing else None
    )
    return PreparedTable(source=source, plan=plan, scaled=scaled, seconds=clock.seconds)


def finish_table(
    prepared: PreparedTable,
    outcome: ImputationOutcome | None,
    options: ImputeOptions,
) -> ImputeTableResult:
    """Map back to the original units, check, write target + record + lineage, report."""
    source, plan = prepared.source, prepared.plan
    clock = _Clock(prepared.seconds)
    if outcome is not None and prepared.scaled is not None:
        clock.seconds["impute"] = outcome.fit_seconds
        imputed = clock(
            "inverse-scale", inverse_scale, outcome.frame, prepared.scaled.scaling, source.frame
        )
    else:
        imputed = as_float_frame(source.frame, plan.columns)
    quality = clock("check-quality", check_quality, source, plan, imputed, options.range_factor)
    lineage = LineageRecord(
        run=current_run(options.started),
        source=source,
        plan=plan,
        outcome=outcome,
        quality=quality,
        seed=options.seed,
        hyperparameters=options.params.model_dump(),
    )
    written = clock("write-back", write_back, source, plan, imputed, lineage)
    result = table_result(written, lineage, clock.seconds)
    publish_run_report(result, source=source, imputed=imputed, quality=quality, outcome=outcome)
    return result


def table_result(
    written: WriteResult, lineage: LineageRecord, seconds: dict[str, float]
) -> ImputeTableResult:
    """What a table's run did, from what was written and its lineage record."""
    outcome, plan = lineage.outcome, lineage.plan
    return ImputeTableResult(
        run_id=written.run_id,
        db_path=written.db_path,
        source_table=plan.source_table,
        target_table=written.target_table,
        replaced_existing=written.replaced_existing,
        status=lineage.status,
        rows=written.rows,
        cells_imputed=dict(plan.missing),
        device=outcome.device if outcome else None,
        n_iter=outcome.n_iter if outcome else None,
        final_loss=outcome.final_loss if outcome else None,
        fit_seconds=outcome.fit_seconds if outcome else 0.0,
        seconds=dict(seconds),
    )


class _Clock:
    """Calls a step and adds its wall time, in seconds, under a name."""

    def __init__(self, seconds: dict[str, float] | None = None) -> None:
        self.seconds = dict(seconds or {})

    def __call__(self, name: str, step: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        started = time.perf_counter()
        try:
            return step(*args, **kwargs)
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
