"""A table larger than one model fit should take: fit on a sample, impute in partitions.

The model is fitted on a uniform sample of `max_fit_rows` rows; then the table is read one
partition of about `partition_rows` rows at a time, each imputed with the fitted model's
`transform` (network fixed) on the task runner, checked, and staged; one transaction then
publishes the staged table, its imputed-cells record and the lineage row (`PartitionedWrite`).
At most one more partition than the runner runs at once is read and not yet written, so memory
is bounded by the partition size, not by the table. The per-partition inverse scaling and
checks run as plain functions (one merged report), so a table of hundreds of partitions does
not flood the UI with task runs; the partition imputations are the tasks.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import replace
from typing import Any

from prefect import get_run_logger

from flows.runners import gpu_annotation, runner_width
from flows.settings import PipelineSettings
from flows.steps import ImputeOptions, TableRequest, table_result
from tasks.artifacts import publish_run_report
from tasks.cells import add_checks
from tasks.impute import GPU_TAG, fit_model, impute_partition, uses_gpu
from tasks.lineage import LineageRecord, current_run
from tasks.partitions import count_rows, profile_table, read_partition, read_sample
from tasks.quality import check_quality, merge_reports
from tasks.results import ImputationOutcome, ImputeTableResult
from tasks.scaling import apply_scaling, inverse_scale, standardise
from tasks.staging import PartitionedWrite
from tasks.targets import check_target_table
from tasks.validate import validate_input
from tasks.write import log_type_notes

__all__ = ["count_rows_to_partition", "impute_partitioned"]

# Per partition, plain functions rather than task runs (see the module's docstring).
unscale = inverse_scale.fn
check_partition = check_quality.fn


def count_rows_to_partition(db_path: str, table: str, settings: PipelineSettings) -> int | None:
    """The rows of `table` when one fit does not take them all (`settings.max_fit_rows`), so
    that it is imputed in partitions; None when it does, or when there is no such table."""
    rows = count_rows(db_path, table)
    return rows if rows is not None and rows > settings.max_fit_rows else None


def impute_partitioned(
    db_path: str,
    request: TableRequest,
    options: ImputeOptions,
    *,
    settings: PipelineSettings,
    runner: Any,
) -> ImputeTableResult:
    """Fit on a sample, impute partition by partition over `runner`, write in one transaction."""
    logger = get_run_logger()
    params, seed = options.params, options.seed
    in_flight = runner_width(settings) + 1
    seconds: dict[str, float] = {}
    run = current_run(options.started)
    clock = time.perf_counter()
    with PartitionedWrite(db_path, memory_limit=settings.duckdb_memory_limit) as write:
        profile = profile_table(
            write.con,
            db_path,
            request.source_table,
            columns=request.columns,
            key=request.key,
            target=request.target_table,
            target_suffix=settings.target_suffix,
            partition_rows=settings.partition_rows,
            replace_target=request.replace_target,
        )
        plan = profile.plan
        check_target_table(write.con, plan)  # refused before the fit; checked again at commit
        sample = profile.source(read_sample(write.con, profile, settings.max_fit_rows, seed))
        validate_input(sample, list(plan.columns), plan.key, plan.target_table)
        scaled = standardise(sample.frame, plan.columns, profile.moments)
        seconds["load-and-validate"] = time.perf_counter() - clock
        logger.info(
            "Table %r has %d rows: fitting on a sample of %d, then imputing %d partitions",
            plan.source_table, plan.n_rows, len(sample.frame), len(profile.bounds),
        )  # fmt: skip
        tags = [GPU_TAG] if settings.dask_gpu or uses_gpu(params.device) else []
        with gpu_annotation(settings):
            fitted = runner.submit(
                fit_model.with_options(tags=tags),
                parameters={
                    "frame": scaled.frame,
                    "params": params,
                    "seed": seed,
                    "table": request.source_table,
                },
            ).result()
        seconds["fit"] = fitted.outcome.fit_seconds
        write.create_target(sample, plan)

        clock = time.perf_counter()
        pending: deque[tuple[Any, Any]] = deque()
        reports = []
        transform = impute_partition.with_options(tags=tags)
        for index, (start, stop) in enumerate(profile.bounds):
            part = profile.source(read_partition(write.con, profile, start, stop))
            frame = apply_scaling(part.frame, scaled.scaling)
            parameters = {"imputer": fitted.imputer, "frame": frame, "table": request.source_table}
            with gpu_annotation(settings):
                future = runner.submit(transform, parameters={**parameters, "partition": index})
            pending.append((part, future))
            while len(pending) >= in_flight or (pending and index == len(profile.bounds) - 1):
                done, future = pending.popleft()
                imputed = unscale(future.result(), scaled.scaling, done.frame)
                counts = {c: int(done.frame[c].isna().sum()) for c in plan.columns}
                part_plan = replace(plan, n_rows=len(done.frame), missing=counts)
                reports.append(
                    check_partition(
                        done,
                        part_plan,
                        imputed,
                        options.range_factor,
                        observed_range=profile.observed_range,
                    )
                )
                write.append(part_plan, done, imputed, run.run_id)
        seconds["impute-check-write"] = time.perf_counter() - clock
        outcome = _with_partitioning(
            fitted.outcome, settings, len(sample.frame), len(profile.bounds)
        )
        lineage = LineageRecord(
            run=run,
            source=sample,
            plan=plan,
            outcome=outcome,
            quality=add_checks(merge_reports(reports), write.checks),
            seed=seed,
            hyperparameters=params.model_dump(),
        )
        log_type_notes(plan.target_table, write.checks)
        written = write.commit(sample, lineage)
    result = table_result(written, lineage, seconds)
    # The run's statistics artifact describes the fit sample, before and after its imputation.
    sample_imputed = inverse_scale(fitted.outcome.frame, scaled.scaling, sample.frame)
    publish_run_report(
        result, source=sample, imputed=sample_imputed, quality=lineage.quality, outcome=outcome
    )
    return result


def _with_partitioning(
    outcome: ImputationOutcome, settings: PipelineSettings, sample_rows: int, partitions: int
) -> ImputationOutcome:
    """The fit's outcome, its hyperparameters completed by how the table was split."""
    extra = {
        "fit_sample_rows": sample_rows,
        "partition_rows": settings.partition_rows,
        "partitions": partitions,
    }
    return replace(outcome, hyperparameters={**outcome.hyperparameters, **extra})
