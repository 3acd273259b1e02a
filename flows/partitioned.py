"""A table larger than one model fit should take: fit on a sample, impute in partitions.

The model is fitted on a uniform sample of `max_fit_rows` rows; then the table is read one
partition of about `partition_rows` rows at a time, each imputed with the fitted model's
`transform` (not refitted) on the task runner, checked, and staged; one transaction then
publishes the staged table, its imputed-cells record and the lineage row (`tasks.write`).
At most one more partition than the runner runs at once is read and not yet written, so memory
is bounded by the partition size, not by the table. The per-partition inverse scaling and
checks run as plain functions (one merged report), so a table of hundreds of partitions does
not flood the UI with task runs; the partition imputations are the tasks.

The warehouse is opened read-only to read partitions and not at all during the fit or while a
partition is imputed (`TableWriter.released`), for writing only by the final transaction.

A dry run opens the file read-only: it fits on the sample and checks the sample's imputation
(against the whole table's observed range), and imputes no partition.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from prefect import get_run_logger

from flows.runners import gpu_annotation, runner_result, runner_width
from flows.runs import for_table
from flows.settings import PipelineSettings
from flows.steps import ImputeOptions, dry_run_result, log_plan, plan_for_rows, table_result
from tasks.artifacts import log_quality_warnings, publish_run_report
from tasks.draws import unmeasured_note
from tasks.impute import GPU_TAG, fit_model, impute_partition, uses_gpu
from tasks.imputer_settings import imputer_device
from tasks.lineage import LineageRecord, current_run
from tasks.load import SourceTable
from tasks.partitions import (
    TableProfile,
    count_rows,
    profile_table,
    read_partition,
    read_sample,
)
from tasks.quality import QualityReport, check_quality, merge_reports
from tasks.results import FittedModel, ImputationOutcome, Imputed, ImputeTableResult
from tasks.scaling import (
    Standardised,
    apply_scaling,
    inverse_scale,
    inverse_scale_draws,
    standardise,
)
from tasks.targets import check_target_table
from tasks.validate import ImputationPlan, TableRequest, validate_input
from tasks.warehouse.access import check_writable
from tasks.warehouse.tables import connect
from tasks.write import TableWriter, WriteMode

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "count_rows_to_partition",
    "fit_on_runner",
    "gpu_tags",
    "impute_partitioned",
    "log_unmeasured",
    "partition_parameters",
    "profile_request",
    "scale_by_profile",
]

# Per partition, plain functions rather than task runs (see the module's docstring).
unscale = inverse_scale.fn
check_partition = check_quality.fn


def count_rows_to_partition(db_path: str, table: str, settings: PipelineSettings) -> int | None:
    """The rows of `table` when one fit does not take them all (`settings.max_fit_rows`), so
    that it is imputed in partitions; None when it does, or when there is no such table."""
    rows = for_table(count_rows, table)(db_path, table)
    return rows if rows is not None and rows > settings.max_fit_rows else None


def impute_partitioned(
    db_path: str,
    request: TableRequest,
    options: ImputeOptions,
    *,
    settings: PipelineSettings,
    runner: Any,
    dry_run: bool = False,
) -> ImputeTableResult:
    """Fit on a sample, impute partition by partition over `runner`, write in one transaction;
    with `dry_run`, check the sample's imputation only and write nothing."""
    if dry_run:
        return _dry_run(db_path, request, options, settings=settings, runner=runner)
    logger = get_run_logger()
    table = request.source_table
    in_flight = runner_width(settings) + 1
    seconds: dict[str, float] = {}
    run = current_run(options.started)
    clock = time.perf_counter()
    with TableWriter(
        db_path, WriteMode.PARTITIONED, memory_limit=settings.duckdb_memory_limit
    ) as write:
        profile = profile_request(write.con, db_path, request, settings)
        plan = profile.plan
        check_target_table(write.con, plan)  # refused before the fit; checked again at commit
        sample, scaled = _sample(write.con, profile, options.seed, settings)
        seconds["load-and-validate"] = time.perf_counter() - clock
        logger.info(
            "Table %r has %d rows: fitting on a sample of %d, then imputing %d partitions",
            plan.source_table,
            plan.n_rows,
            len(sample.frame),
            len(profile.bounds),
        )
        log_plan(plan)
        with write.released():  # other processes may write the warehouse during the fit
            fitted = fit_on_runner(
                request.source_table, options, scaled, settings=settings, runner=runner
            )
        seconds["fit"] = fitted.outcome.fit_seconds
        write.create_stage(sample, plan)

        clock = time.perf_counter()
        pending: deque[tuple[Any, Any, int]] = deque()
        reports = []
        staged = 0
        unmeasured: dict[str, list[int]] = {}  # column: the partitions that measured no error
        tags = gpu_tags(options, settings)
        for index, (start, stop) in enumerate(profile.bounds):
            part = profile.source(read_partition(write.con, profile, start, stop))
            frame = apply_scaling(part.frame, scaled.scaling, table=table)
            parameters = partition_parameters(fitted.imputer, frame, table, index, options)
            transform = for_table(impute_partition, table, suffix=f"-{index}", tags=tags)
            with gpu_annotation(settings):
                future = runner.submit(transform, parameters=parameters)
            pending.append((part, future, index))
            while len(pending) >= in_flight or (pending and index == len(profile.bounds) - 1):
                done, future, number = pending.popleft()
                with write.released():
                    where = f"partition {number + 1} of {len(profile.bounds)}"
                    made: Imputed = runner_result(future, settings, table, where)
                for column in made.unmeasured:
                    unmeasured.setdefault(column, []).append(number + 1)
                imputed = unscale(made.frame, scaled.scaling, done.frame)
                part_plan = plan_for_rows(plan, done.frame)
                reports.append(_check(done, part_plan, imputed, options, profile))
                draws = (
                    None if made.draws is None else inverse_scale_draws(made.draws, scaled.scaling)
                )
                write.stage(part_plan, done, imputed, run.run_id, draws)
                staged += 1
                if _progress_line(staged, len(profile.bounds)):
                    cells = part_plan.n_missing
                    logger.info(
                        "Table %r: partition %d of %d imputed, checked and staged (%d row%s, "
                        "%d cell%s)",
                        plan.source_table,
                        staged,
                        len(profile.bounds),
                        len(done.frame),
                        "s" * (len(done.frame) != 1),
                        cells,
                        "s" * (cells != 1),
                    )
        seconds["impute-check-write"] = time.perf_counter() - clock
        log_unmeasured(table, unmeasured, len(profile.bounds))
        outcome = _with_partitioning(
            fitted.outcome, options, settings, len(sample.frame), len(profile.bounds)
        )
        lineage = LineageRecord(
            run=run,
            source=sample,
            plan=plan,
            outcome=outcome,
            quality=merge_reports(reports),
            seed=options.seed,
            hyperparameters=options.recorded(),
            recipe=options.recipe,
        )
        written, lineage = write.commit(lineage)
    result = table_result(written, lineage, seconds)
    # The run's statistics artifact describes the fit sample, before and after its imputation.
    unscale_sample = for_table(inverse_scale, table)
    sample_imputed = unscale_sample(fitted.outcome.frame, scaled.scaling, sample.frame)
    publish_run_report(
        result, source=sample, imputed=sample_imputed, quality=lineage.quality, outcome=outcome
    )
    return result


def log_unmeasured(table: str, unmeasured: dict[str, list[int]], total: int) -> None:
    """Warn, once per set of partitions, of the columns whose error these partitions could not
    measure (`Imputed.unmeasured`), naming at most 10 of the partitions."""
    by_parts: dict[tuple[int, ...], list[str]] = {}
    for column, parts in unmeasured.items():
        by_parts.setdefault(tuple(parts), []).append(column)
    for parts, columns in by_parts.items():
        listed = ", ".join(map(str, parts[:10])) + (", ..." if len(parts) > 10 else "")
        where = f"partition{'s' * (len(parts) != 1)} {listed} of {total}"
        advice = "Larger partitions (TDM_PARTITION_ROWS) hold more observed cells."
        get_run_logger().warning("%s", unmeasured_note(table, where, columns, advice))


def _progress_line(done: int, total: int) -> bool:
    """Whether the `done`th of `total` partitions gets its log line: each of up to 20, else
    the first, the last and one at every tenth."""
    return total <= 20 or done in (1, total) or done * 10 // total != (done - 1) * 10 // total


def _dry_run(
    db_path: str,
    request: TableRequest,
    options: ImputeOptions,
    *,
    settings: PipelineSettings,
    runner: Any,
) -> ImputeTableResult:
    """Profile, fit on the sample and check its imputation, all read-only: what a run would do
    short of imputing the partitions and writing."""
    started = time.perf_counter()
    check_writable(db_path)  # as a run would, before the fit
    with connect(db_path, read_only=True) as con:
        profile = profile_request(con, db_path, request, settings)
        replaces = check_target_table(con, profile.plan)
        sample, scaled = _sample(con, profile, options.seed, settings)
    seconds = {"load-and-validate": time.perf_counter() - started}
    fitted = fit_on_runner(request.source_table, options, scaled, settings=settings, runner=runner)
    seconds["fit"] = fitted.outcome.fit_seconds
    plan = profile.plan
    sample_plan = plan_for_rows(plan, sample.frame)
    imputed = unscale(fitted.outcome.frame, scaled.scaling, sample.frame)
    log_quality_warnings(plan.source_table, _check(sample, sample_plan, imputed, options, profile))
    outcome = _with_partitioning(
        fitted.outcome, options, settings, len(sample.frame), len(profile.bounds)
    )
    return dry_run_result(db_path, plan, outcome, seconds, replaces=replaces)


def _check(
    source: SourceTable,
    plan: ImputationPlan,
    imputed: pd.DataFrame,
    options: ImputeOptions,
    profile: TableProfile,
) -> QualityReport:
    """The quality checks of one partition's (or the sample's) imputation, on the whole
    table's observed range."""
    return check_partition(
        source,
        plan,
        imputed,
        options.range_factor,
        whole=profile.observed,
        label_share_threshold=options.label_share_threshold,
        spread_threshold=options.spread_threshold,
    )


def profile_request(
    con: Any, db_path: str, request: TableRequest, settings: PipelineSettings
) -> TableProfile:
    """The requested table's profile: resolved columns, key and target, value checks in SQL,
    observed ranges and moments, partitions (`tasks.partitions.profile_table`)."""
    return profile_table(
        con,
        db_path,
        request,
        target_suffix=settings.target_suffix,
        partition_rows=settings.partition_rows,
    )


def scale_by_profile(profile: TableProfile, frame: Any) -> Standardised:
    """`frame` standardised by the whole table's moments, within the plan's bounds."""
    plan = profile.plan
    scale = for_table(standardise, plan.source_table)
    bounds = {name: b.for_imputer() for name, b in plan.bounds.items()}
    return scale(
        frame,
        plan.columns,
        profile.moments,
        kinds=plan.kinds,
        bounds=bounds,
        table=plan.source_table,
    )


def _sample(
    con: Any, profile: TableProfile, seed: int, settings: PipelineSettings
) -> tuple[SourceTable, Standardised]:
    """The fit sample, validated, and its columns scaled by the whole table's moments."""
    plan = profile.plan
    table = plan.source_table
    sample = profile.source(read_sample(con, profile, settings.max_fit_rows, seed))
    validate = for_table(validate_input, table)
    validate(sample, list(plan.columns), plan.key, plan.target_table)
    return sample, scale_by_profile(profile, sample.frame)


def gpu_tags(options: ImputeOptions, settings: PipelineSettings) -> list[str]:
    """The `gpu` concurrency tag, for a run on a GPU (asked for, or Dask `GPU` resources)."""
    return [GPU_TAG] if settings.dask_gpu or uses_gpu(imputer_device(options.imputer)) else []


def partition_parameters(
    imputer: Any, frame: Any, table: str, partition: int, options: ImputeOptions
) -> dict[str, Any]:
    """The parameters of `impute_partition` for one partition (scaled rows) of `table`."""
    return {
        "imputer": imputer,
        "frame": frame,
        "table": table,
        "partition": partition,
        "draws": options.draws,
        "fill": options.fill,
        "seed": options.seed,
    }


def fit_on_runner(
    table: str,
    options: ImputeOptions,
    scaled: Standardised,
    *,
    settings: PipelineSettings,
    runner: Any,
    written: bool = False,
) -> FittedModel:
    """Fit the model of `table` on its scaled rows, within their bounds, over `runner` (with the
    `gpu` tag and Dask `GPU` resources on a GPU); `written`: the fit's own imputation is what
    the run writes, so it is filled and drawn as `options` say (else: the point, no draws)."""
    task = for_table(fit_model, table, tags=gpu_tags(options, settings))
    parameters = {
        "frame": scaled.frame,
        "settings": options.imputer,
        "seed": options.seed,
        "table": table,
        "bounds": scaled.bounds,
    }
    if written:
        parameters |= {"draws": options.draws, "fill": options.fill}
    with gpu_annotation(settings):
        future = runner.submit(task, parameters=parameters)
    return runner_result(future, settings, table, "the fit")  # type: ignore[no-any-return]


def _with_partitioning(
    outcome: ImputationOutcome,
    options: ImputeOptions,
    settings: PipelineSettings,
    sample_rows: int,
    partitions: int,
) -> ImputationOutcome:
    """The fit's outcome, its hyperparameters completed by how the table was split and what
    its partitions received (the sample's fit made no draws of its own)."""
    extra = {
        **options.filled(),
        "fit_sample_rows": sample_rows,
        "partition_rows": settings.partition_rows,
        "partitions": partitions,
    }
    return replace(outcome, hyperparameters={**outcome.hyperparameters, **extra})
