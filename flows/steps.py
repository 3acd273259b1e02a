"""The steps one table goes through, shared by the `impute-table` and `impute-warehouse` flows.

`prepare_table` (load, validate, standardise) and `finish_table` (inverse scale, quality checks,
write-back with lineage, run report) run in the flow's own process: DuckDB allows one writing
process per file, so only the imputation between them is ever sent to a task runner. Each task
run is named after its task and table (`flows.runs.for_table`). A dry run stops before the
write: the file is only ever opened read-only, and the result says what a run would have
written. Before any of it, `leave_unchanged` finds a whole table whose target a run would write
again as it is (`tasks.unchanged`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import pandas as pd
from prefect import get_run_logger
from pydantic import ValidationError

from flows.runs import for_table
from flows.settings import PipelineSettings
from schemas.expectations import LABEL_SHARE_THRESHOLD, SPREAD_THRESHOLD
from tasks.artifacts import log_quality_warnings, publish_run_report
from tasks.draws import Fill
from tasks.errors import PipelineInputError, problem, setting
from tasks.frames import as_value_frame
from tasks.lineage import LineageRecord, current_run, package_versions
from tasks.load import SourceTable, load_table
from tasks.quality import check_quality
from tasks.results import ImputationOutcome, ImputeTableResult, WriteResult
from tasks.scaling import Standardised, inverse_scale, inverse_scale_draws, standardise
from tasks.targets import check_target_writable
from tasks.unchanged import UNCHANGED, record_unchanged, unchanged_target
from tasks.validate import (
    ImputationPlan,
    TableRequest,
    not_imputed_notes,
    plan_notes,
    validate_input,
)
from tasks.warehouse.access import check_writable
from tasks.write import check_write, write_back

__all__ = [
    "DRY_RUN",
    "NAMED_COLUMNS",
    "Clock",
    "ImputeOptions",
    "PreparedTable",
    "cells_per_column",
    "describe_dry_run",
    "describe_increment",
    "describe_result",
    "dry_run_result",
    "finish_table",
    "leave_unchanged",
    "log_plan",
    "plan_for_rows",
    "prepare_table",
    "table_result",
]

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class ImputeOptions:
    """How a table is imputed and checked, and when its run started (for the lineage row);
    `imputer`: the imputer's settings, validated (`tasks.imputer_settings`); `fill` and
    `draws`: what the target receives and how many draws measure each cell's uncertainty
    (`tasks.draws`)."""

    imputer: dict[str, Any]
    seed: int
    range_factor: float
    started: datetime
    label_share_threshold: float = LABEL_SHARE_THRESHOLD
    spread_threshold: float = SPREAD_THRESHOLD
    fill: Fill = "point"
    draws: int = 0
    recipe: str | None = None

    @classmethod
    def from_settings(
        cls,
        settings: PipelineSettings,
        imputer: dict[str, Any],
        started: datetime,
        table: str,
        **given: Any,
    ) -> ImputeOptions:
        """The options of `settings`, with the values `given` (None: the setting's) over them,
        checked as the settings are (a bad value raises `PipelineInputError` naming `table`,
        the setting and the value)."""
        names = ("seed", "range_factor", "label_share_threshold", "spread_threshold")
        chosen = {name: getattr(settings, name) for name in (*names, "fill", "draws")}
        chosen |= {name: value for name, value in given.items() if value is not None}
        try:
            checked = PipelineSettings.model_validate(chosen)
        except ValidationError as error:
            problems = "; ".join(
                f"{e['loc'][0]}: {problem(e)} (given: {e['input']!r})" for e in error.errors()
            )
            raise PipelineInputError(
                f'Invalid run settings for table "{table}": {problems}.'
            ) from None
        return cls(
            imputer=imputer,
            started=started,
            **{name: getattr(checked, name) for name in chosen},
        )

    def for_request(self, request: TableRequest, settings: PipelineSettings) -> ImputeOptions:
        """These options with the recipe of a whole-table run of `request` (`run_recipe`;
        none for a source updated in place, which is never left unchanged)."""
        if request.replace_source:
            return self
        return replace(self, recipe=run_recipe(request, self, settings))

    def filled(self) -> dict[str, Any]:
        """What the target receives (`fill`) and how many draws measure each cell (`draws`),
        as a lineage row records them."""
        return {"fill": self.fill, "draws": self.draws}

    def recorded(self) -> dict[str, Any]:
        """The settings a lineage row records: the imputer's and :meth:`filled`."""
        return {**self.imputer, **self.filled()}


@dataclass(frozen=True, eq=False)
class PreparedTable:
    """A loaded, validated table and, when it has missing cells, its standardised columns;
    `target_exists`: whether writing it replaces an existing table."""

    source: SourceTable
    plan: ImputationPlan
    scaled: Standardised | None
    seconds: dict[str, float]
    target_exists: bool = False


def run_recipe(request: TableRequest, options: ImputeOptions, settings: PipelineSettings) -> str:
    """A hash of all that shapes the target a whole-table run of `request` writes but the
    source's contents, definition and row order (which the lineage row adds, `table_recipe`):
    the request (but `replace_target`), the options (the imputer's settings, seed, fill, draws,
    quality thresholds), the settings that split or place the work (the target suffix,
    TDM_MAX_FIT_ROWS, TDM_PARTITION_ROWS, the task runner and Dask scheduler, the torch threads
    set and in use, whether CUDA is there), the packages' versions and a digest of this
    project's own code."""
    import torch

    split = ("target_suffix", "max_fit_rows", "partition_rows", "torch_threads")
    placed = ("task_runner", "dask_address", "dask_gpu")
    shaping = {
        "request": {**asdict(request), "replace_target": None},
        "options": {**asdict(options), "started": None, "recipe": None},
        "settings": {name: getattr(settings, name) for name in (*split, *placed)},
        "threads": torch.get_num_threads(),
        "cuda": torch.cuda.is_available(),
        "versions": package_versions(),
        "code": _code_digest(),
    }
    text = json.dumps(shaping, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@functools.cache
def _code_digest() -> str:
    """A hash of the library's and the pipeline's own source files: code installed between
    two releases changes it without changing the version."""
    import flows
    import schemas
    import tasks
    import tdm

    digest = hashlib.sha256()
    for package in (tdm, tasks, schemas, flows):
        root = Path(str(package.__file__)).parent
        for path in sorted(root.rglob("*.py")):
            digest.update(f"{path.relative_to(root)}\x1f".encode() + path.read_bytes())
    return digest.hexdigest()[:32]


def leave_unchanged(
    db_path: str,
    request: TableRequest,
    options: ImputeOptions,
    settings: PipelineSettings,
    *,
    dry_run: bool = False,
) -> ImputeTableResult | None:
    """The result of a run of `request` that leaves its target as an earlier run with the same
    recipe wrote it (`tasks.unchanged`), its lineage row recorded (a dry run writes nothing;
    its result, status "dry-run", names that run); None
    when the table is to be imputed: TDM_SKIP_UNCHANGED is off, the source is to be updated in
    place, the options have no recipe (an incremental run) or no earlier run's target stands."""
    if not settings.skip_unchanged or request.replace_source or options.recipe is None:
        return None
    table = request.source_table
    found = for_table(unchanged_target, table)(db_path, table, options.recipe)
    run = current_run(options.started)
    if found is not None and not dry_run:
        found = for_table(record_unchanged, table)(db_path, table, options.recipe, run)
    if found is None:
        return None
    return ImputeTableResult(
        run_id=run.run_id,
        db_path=db_path,
        source_table=table,
        target_table=found.target_table,
        replaced_existing=False,
        status=DRY_RUN if dry_run else UNCHANGED,
        rows=found.rows,
        cells_imputed=found.cells_imputed,
        device=None,
        n_iter=None,
        final_loss=None,
        fit_seconds=0.0,
        unchanged_since=found.written_by,
    )


def prepare_table(db_path: str, request: TableRequest, *, target_suffix: str) -> PreparedTable:
    """Check the file can be written (before any fit), load (read-only), validate and
    standardise one table."""
    check_writable(db_path)
    clock = Clock()
    table = request.source_table
    source = clock(
        "load",
        for_table(load_table, table),
        db_path,
        table,
        request.key,
        request.pass_through or (),
    )
    plan = clock(
        "validate",
        for_table(validate_input, table),
        source,
        request.columns,
        request.key,
        request.target_table,
        request.replace_source,
        target_suffix,
        request.replace_target,
        request.pass_through,
        request.bounds,
        request.nan_as_missing,
    )
    exists = clock(
        "validate", for_table(check_target_writable, table), db_path, plan
    )  # refused before any fit
    log_plan(plan)
    scaled = (
        clock(
            "standardise",
            for_table(standardise, table),
            source.frame,
            plan.columns,
            kinds=plan.kinds,
            bounds={name: b.for_imputer() for name, b in plan.bounds.items()},
            table=table,
        )
        if plan.n_missing
        else None
    )
    return PreparedTable(
        source=source, plan=plan, scaled=scaled, seconds=clock.seconds, target_exists=exists
    )


def finish_table(
    prepared: PreparedTable,
    outcome: ImputationOutcome | None,
    options: ImputeOptions,
    *,
    dry_run: bool = False,
) -> ImputeTableResult:
    """Map back to the original units, check, write target + record + lineage, report; with
    `dry_run`, stop after the checks and say what would have been written."""
    source, plan = prepared.source, prepared.plan
    table, db_path = plan.source_table, source.db_path
    clock = Clock(prepared.seconds)
    draws = None
    if outcome is not None and prepared.scaled is not None:
        clock.seconds["impute"] = outcome.fit_seconds
        if outcome.draw_seconds:
            clock.seconds["draws"] = outcome.draw_seconds
        imputed = clock(
            "inverse-scale",
            for_table(inverse_scale, table),
            outcome.frame,
            prepared.scaled.scaling,
            source.frame,
        )
        if outcome.draws is not None:
            draws = inverse_scale_draws(outcome.draws, prepared.scaled.scaling)
    else:
        imputed = as_value_frame(source.frame, plan.columns, plan.kinds)
    quality = clock(
        "check-quality",
        for_table(check_quality, table),
        source,
        plan,
        imputed,
        options.range_factor,
        label_share_threshold=options.label_share_threshold,
        spread_threshold=options.spread_threshold,
    )
    if dry_run:  # what the write checks before it writes, on the file opened read-only
        log_quality_warnings(table, quality)  # as a run would, with its report
        clock("check-write", check_write, source, plan, imputed)
        return dry_run_result(
            db_path, plan, outcome, clock.seconds, replaces=prepared.target_exists
        )
    lineage = LineageRecord(
        run=current_run(options.started),
        source=source,
        plan=plan,
        outcome=outcome,
        quality=quality,
        seed=options.seed,
        hyperparameters=options.recorded(),
        draws=draws,
        recipe=options.recipe,
    )
    written = clock("write-back", for_table(write_back, table), source, plan, imputed, lineage)
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
        could_be_not_null=written.could_be_not_null,
        not_imputed=tuple(not_imputed_notes(plan)),
        **_fit_fields(outcome, seconds),
        **model_fields(lineage),
    )


def model_fields(lineage: LineageRecord) -> dict[str, Any]:
    """An incremental run's model version, new and kept rows, refit reason, drift and whether
    it appended (else none)."""
    use = lineage.model
    if use is None:
        return {}
    return {
        "model_version": use.version,
        "rows_new": use.rows_new,
        "rows_reused": use.rows_reused,
        "refit_reason": use.refit_reason,
        "drift": use.drift,
        "appended": use.appended,
    }


def _fit_fields(outcome: ImputationOutcome | None, seconds: dict[str, float]) -> dict[str, Any]:
    """The fit's part of a table's result (none when nothing was fitted)."""
    return {
        "device": outcome.device if outcome else None,
        "n_iter": outcome.n_iter if outcome else None,
        "final_loss": outcome.final_loss if outcome else None,
        "fit_seconds": outcome.fit_seconds if outcome else 0.0,
        "seconds": dict(seconds),
    }


DRY_RUN = "dry-run"
"""The `status` of a dry run's result: checked, nothing written."""
NAMED_COLUMNS = 12
"""Columns a one-line summary names with their imputed cells; the others are counted (the run
report and the run's plan in its log give every one)."""


def cells_per_column(cells_imputed: Mapping[str, int]) -> str:
    """`a 12, b 3` for the columns with imputed cells: at most `NAMED_COLUMNS` named, then how
    many more columns hold how many cells."""
    imputed = [(column, n) for column, n in cells_imputed.items() if n]
    named = ", ".join(f"{column} {n}" for column, n in imputed[:NAMED_COLUMNS])
    rest = imputed[NAMED_COLUMNS:]
    if not rest:
        return named
    more = f"{len(rest)} more column{'s' * (len(rest) != 1)}"
    return f"{named} and {sum(n for _, n in rest)} in {more}"


def dry_run_result(
    db_path: str,
    plan: ImputationPlan,
    outcome: ImputationOutcome | None,
    seconds: dict[str, float],
    *,
    replaces: bool,
) -> ImputeTableResult:
    """What a run would have written (`status` "dry-run"; `replaced_existing`: whether it would
    replace an existing table); the run id is the flow run's, which has no lineage row."""
    return ImputeTableResult(
        run_id=current_run().run_id,
        db_path=db_path,
        source_table=plan.source_table,
        target_table=plan.target_table,
        replaced_existing=replaces,
        status=DRY_RUN,
        rows=plan.n_rows,
        cells_imputed=dict(plan.missing),
        not_imputed=tuple(not_imputed_notes(plan)),
        **_fit_fields(outcome, seconds),
    )


def describe_increment(result: ImputeTableResult) -> str:
    """What an incremental run wrote: new rows, the model version, why it was fitted, and the
    rows kept."""
    cells = sum(result.cells_imputed.values())
    how = f"fitted now: {result.refit_reason}" if result.refit_reason else "the stored one"
    rows = f"{result.rows_new} {'new ' if result.appended else ''}row{'s' * (result.rows_new != 1)}"
    kept = (
        f"{result.rows_reused} rows imputed before kept as they were"
        if result.appended
        else "the target written from every source row"
    )
    return (
        f"Wrote {result.target_table!r} to {result.db_path}: {rows} ({cells} "
        f"cell{'s' * (cells != 1)}) imputed with model version {result.model_version} ({how}); "
        f"{kept}."
    )


def describe_result(result: ImputeTableResult) -> str:
    """One paragraph: what a table's run wrote (`describe_dry_run` for a dry run's,
    `describe_increment` for an incremental run's)."""
    if result.status == DRY_RUN:
        return describe_dry_run(result)
    if result.status == UNCHANGED:
        return (
            f"Left {result.target_table!r} as run {result.unchanged_since} wrote it: "
            f"{result.source_table!r} holds what that run read and the settings are the same "
            f"({result.rows} rows, {sum(result.cells_imputed.values())} cells imputed then), so "
            f"nothing was fitted ({setting('refit')} fits it now; TDM_SKIP_UNCHANGED=false, "
            "every time)."
        )
    if result.model_version is not None:
        return describe_increment(result)
    replaced = " (it replaced the existing table of that name)" if result.replaced_existing else ""
    if result.target_table == result.source_table:  # replace_source: an UPDATE in place
        replaced = " in place (only its missing cells were updated; its definition was kept)"
    if result.status == "copied" and result.target_table == result.source_table:
        return (
            f"Table {result.source_table!r} has no missing value in the columns to impute: "
            "left it unchanged."
        )
    if result.status == "copied":
        return (
            f"Table {result.source_table!r} has no missing value in the columns to impute: copied "
            f"it unchanged to {result.target_table!r}{replaced}."
        )
    cells = sum(result.cells_imputed.values())
    return (
        f"Wrote {result.target_table!r} to {result.db_path}{replaced}: {result.rows} rows, "
        f"{cells} cells imputed ({cells_per_column(result.cells_imputed)}); fit "
        f"{result.fit_seconds:.1f} s on {result.device}, {result.n_iter} iterations, final loss "
        f"{result.final_loss:.4g}."
    )


def describe_dry_run(result: ImputeTableResult) -> str:
    """One paragraph: what the dry run `result` checked and what a run would write."""
    if result.unchanged_since is not None:
        return (
            f"Dry run of {result.source_table!r}, nothing written to {result.db_path}: a run "
            f"would leave {result.target_table!r} as run {result.unchanged_since} wrote it "
            "(the source holds what that run read and the settings are the same) and add its "
            "tdm_lineage row; nothing would be fitted."
        )
    cells = sum(result.cells_imputed.values())
    per_column = cells_per_column(result.cells_imputed)
    if result.target_table == result.source_table:
        where = f"update {result.target_table!r} in place"
    elif result.replaced_existing:
        where = f"replace the existing table {result.target_table!r}"
    else:
        where = f"create the table {result.target_table!r}"
    what = (
        f"{cells} cell{'s' * (cells != 1)} imputed ({per_column})"
        if cells
        else "no missing value in the columns to impute, a copy"
    )
    if result.appended and not cells:
        what = "no cell to impute"
    fit = (
        f"; fit {result.fit_seconds:.1f} s on {result.device}, {result.n_iter} iterations"
        if result.n_iter is not None
        else ""
    )
    rows = f"with {result.rows} rows, {what}"
    if result.model_version is not None:
        model = (
            f"a model fitted now (version {result.model_version}: {result.refit_reason})"
            if result.refit_reason
            else f"the stored model (version {result.model_version})"
        )
        if result.appended:
            new = f"{result.rows_new} new row{'s' * (result.rows_new != 1)}"
            where = f"append {new} to {result.target_table!r}"
            rows = f"({what}) imputed with {model}, keep the {result.rows_reused} rows before"
        else:
            rows += f", imputed with {model}"
    return (
        f"Dry run of {result.source_table!r}, nothing written to {result.db_path}: a run would "
        f"{where} {rows}, and add its tdm_lineage row; the quality checks passed{fit}."
    )


def plan_for_rows(plan: ImputationPlan, frame: pd.DataFrame) -> ImputationPlan:
    """`plan` for the rows of `frame` only (a partition, a sample, the new rows): their count
    and missing cells (the NULLs of the columns not imputed are counted for the whole table
    only: kept when `frame` holds all its rows)."""
    missing = {c: int(frame[c].isna().sum()) for c in plan.columns}
    untyped = plan.untyped_nulls if len(frame) == plan.n_rows else {}
    return replace(plan, n_rows=len(frame), missing=missing, untyped_nulls=untyped)


def log_plan(plan: ImputationPlan) -> None:
    """Log what will be imputed: each column's kind and bounds or labels, the columns passed
    through, and the CHECK constraints not used for bounds (`tasks.validate.plan_notes`)."""
    logger = get_run_logger()
    for line in plan_notes(plan):
        logger.info("%s", line)


class Clock:
    """The wall time of a run's steps, in seconds, added up by step name (`seconds`)."""

    def __init__(self, seconds: dict[str, float] | None = None) -> None:
        self.seconds = dict(seconds or {})

    def __call__(self, name: str, step: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Call `step` and add its time under `name`."""
        with self.timing(name):
            return step(*args, **kwargs)

    @contextlib.contextmanager
    def timing(self, name: str) -> Iterator[None]:
        """Add the time spent within it under `name`."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
