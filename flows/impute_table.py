"""The `impute-table` flow: load, validate, standardise, impute, inverse-scale, check, write."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from flows.partitioned import count_rows_to_partition, impute_partitioned
from flows.runners import task_runner
from flows.settings import PipelineSettings
from flows.steps import ImputeOptions, TableRequest, finish_table, prepare_table
from tasks.errors import PipelineInputError
from tasks.impute import impute_task_for
from tasks.params import ImputerParams, override_params
from tasks.results import ImputeTableResult

__all__ = ["ImputeTableResult", "impute_table"]


@flow(name="impute-table")
def impute_table(
    source_table: str,
    db_path: str | Path | None = None,
    target_table: str | None = None,
    columns: list[str] | None = None,
    key: str | None = None,
    replace_source: bool = False,
    replace_target: bool | None = None,
    imputer: dict[str, Any] | ImputerParams | None = None,
    seed: int | None = None,
    range_factor: float | None = None,
) -> ImputeTableResult:
    """Impute the missing cells of a DuckDB table into a new table, with lineage.

    `replace_target`: replace an existing target the pipeline did not write (None: the
    `TDM_REPLACE_TARGET` setting); without it such a target is refused before anything runs.

    `imputer`: all the imputer settings, or a dict of some of them that overrides the `TDM_*`
    settings of the process that runs the flow (what `tdm run --max-iter` sends).

    A table of more than `TDM_MAX_FIT_ROWS` rows is fitted on a sample of that many rows and
    imputed in partitions of `TDM_PARTITION_ROWS` over the task runner (`flows.partitioned`).
    """
    started = datetime.now(UTC)
    settings = PipelineSettings()
    db = str(db_path if db_path is not None else settings.db_path)
    if isinstance(imputer, ImputerParams):
        params = imputer
    else:  # a partial override (an ad-hoc run's parameters) on top of the TDM_* settings
        params = override_params(
            settings.imputer_params(),
            imputer,
            subject=f'The imputer settings for table "{source_table}"',
        )
    options = ImputeOptions(
        params=params,
        seed=settings.seed if seed is None else seed,
        range_factor=settings.range_factor if range_factor is None else range_factor,
        started=started,
    )
    logger = get_run_logger()
    request = TableRequest(
        source_table,
        columns,
        key,
        target_table,
        replace_source,
        settings.replace_target if replace_target is None else replace_target,
    )

    rows = count_rows_to_partition(db, source_table, settings)
    if rows is not None:
        if replace_source:
            raise PipelineInputError(
                f'Table "{source_table}" has {rows} rows, more than one fit takes '
                f"(TDM_MAX_FIT_ROWS={settings.max_fit_rows}), so it is imputed in partitions, "
                "which read the source while writing the target: write to another table."
            )
        with task_runner(settings) as runner:
            return impute_partitioned(db, request, options, settings=settings, runner=runner)
    prepared = prepare_table(db, request, target_suffix=settings.target_suffix)
    plan = prepared.plan
    outcome = None
    if prepared.scaled is not None:
        logger.info(
            "Imputing %d cells in %d columns of %r (%d rows)",
            plan.n_missing, len(plan.columns), plan.source_table, plan.n_rows,
        )  # fmt: skip
        outcome = impute_task_for(params)(
            prepared.scaled.frame, params, options.seed, table=plan.source_table
        )
    else:
        logger.info("Table %r has no missing value: it is copied through", plan.source_table)
    return finish_table(prepared, outcome, options)
