"""The `impute-table` flow: load, validate, standardise, impute, inverse-scale, check, write."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from flows.incremental import IncrementalRequest, impute_apart
from flows.notify import notify_failure
from flows.partitioned import count_rows_to_partition
from flows.runners import started_runner
from flows.runs import (
    DRY_RUN_TAG,
    OUTCOME,
    for_table,
    run_guarded,
    run_tags,
    table_run_name,
    tag_flow_run,
)
from flows.settings import PipelineSettings, check_served_database
from flows.steps import (
    ImputeOptions,
    describe_dry_run,
    describe_result,
    finish_table,
    leave_unchanged,
    prepare_table,
)
from tasks.draws import Fill
from tasks.errors import PipelineInputError
from tasks.impute import impute_task_for
from tasks.imputer_settings import environment_settings, imputer_settings
from tasks.results import ImputeTableResult
from tasks.validate import TableRequest

__all__ = ["impute_table"]


@flow(
    name="impute-table",
    flow_run_name=table_run_name,
    on_failure=[notify_failure],
    on_crashed=[notify_failure],
)
def impute_table(
    source_table: str,
    db_path: str | Path | None = None,
    target_table: str | None = None,
    columns: list[str] | None = None,
    key: str | None = None,
    replace_source: bool = False,
    replace_target: bool | None = None,
    imputer: dict[str, Any] | None = None,
    seed: int | None = None,
    range_factor: float | None = None,
    dry_run: bool = False,
    pass_through: list[str] | None = None,
    bounds: dict[str, list[float | None]] | None = None,
    incremental: bool = False,
    watermark: str | None = None,
    refit: bool = False,
    nan_as_missing: bool | None = None,
    fill: Fill | None = None,
    draws: int | None = None,
) -> ImputeTableResult:
    """Impute the missing cells of a DuckDB table into a new table, with lineage.

    A table of more than `TDM_MAX_FIT_ROWS` rows is fitted on a sample of that many rows and
    imputed in partitions of `TDM_PARTITION_ROWS` over the task runner (`flows.partitioned`).
    A foreseen failure ends the run Failed with its one-paragraph reason as the state message.

    Args:
        source_table: The table to impute: `table` (schema main) or `schema.table`.
        db_path: The DuckDB file. Empty: the TDM_DB_PATH setting of the process that runs the
            flow (default warehouse.duckdb); a relative path is taken from its directory.
        target_table: The table to write. Empty: the source's name plus `_imputed`
            (TDM_TARGET_SUFFIX), in the source's schema.
        columns: The columns to impute. Empty: every numeric column, and every text (VARCHAR),
            ENUM or BOOLEAN column with a NULL, but the key and the pass_through columns; other
            columns pass through unchanged.
        key: A column that identifies each row (unique, not null); the record of imputed cells
            names rows by it. Empty: rows are named by their position.
        replace_source: Update the source table's missing cells in place instead of writing a
            new table.
        replace_target: Replace an existing target table the pipeline did not write; without
            it such a target is refused before anything runs. Empty: TDM_REPLACE_TARGET.
        imputer: Imputer settings (TDMImputer's parameters, with the library's meaning) that
            override the TDM_* settings of the process that runs the flow, e.g.
            {"max_iter": 2000}; the others are kept, unset ones are the library's defaults.
        seed: Random seed: the same table, settings and seed give the same imputed table.
            Empty: TDM_SEED (default 0).
        range_factor: Quality check: each imputed value must lie within this many observed
            ranges of the column's observed minimum and maximum. Empty: TDM_RANGE_FACTOR.
        dry_run: Fit and check as a run would, then stop: nothing is written (the file is
            opened read-only) and the result says what a run would write.
        pass_through: Columns left as they are, NULLs included, when the columns to impute
            are chosen by default (e.g. a free-text column).
        bounds: Bounds of numeric columns' imputed values, {"column": [low, high]} (null: an
            open end), replacing the observed range; CHECK constraints still apply.
        incremental: Keep a model per target in `tdm_models` and impute only the rows the target
            does not hold yet with it; rows imputed before keep their values (`flows.incremental`:
            when a model is refitted, and the TDM_DRIFT_*, TDM_ON_DRIFT, TDM_REFIT_EVERY_DAYS and
            TDM_REWRITE_ON_REFIT settings). Needs a key or a watermark.
        watermark: Incremental runs without a key: a column that grows with each load (a time
            stamp, a batch number); rows above the target's highest value are new. Never
            imputed: left out of the default columns, like the key.
        refit: Fit now: an incremental run fits a new model version, a whole-table run fits
            and writes even when its table is unchanged since the last run (see
            TDM_SKIP_UNCHANGED).
        nan_as_missing: Impute the NaN values of FLOAT and DOUBLE columns as missing cells;
            without it a column to impute that holds NaN (a value in DuckDB, not NULL) is
            refused. Empty: TDM_NAN_AS_MISSING.
        fill: What the missing cells receive: "point" (each cell's best guess) or "draw"
            (one draw of the missing cells: the table's spread and label shares come near
            the data's). Empty: TDM_FILL (default "point").
        draws: With K >= 2, K draws of each imputed cell measure its uncertainty:
            tdm_imputed_cells gets low and high (the 5% and 95% quantiles of a numeric cell's
            draws) and probability (the share of a label cell's draws that agree with the
            label written). Draws take one to two more fits. Empty: TDM_DRAWS (default 0,
            none).
    """
    increment = IncrementalRequest(watermark, refit) if incremental else None

    def body() -> ImputeTableResult:
        if increment is None and watermark is not None:
            raise PipelineInputError(
                "The watermark parameter (--watermark) is for incremental runs, and table "
                f'"{source_table}" was not asked to be imputed incrementally, so nothing was '
                "written: add the incremental parameter (--incremental), or leave it out."
            )
        # inside: an invalid TDM_* value fails the run, with its message, as any input error
        settings = PipelineSettings.from_env()
        db = str(db_path if db_path is not None else settings.db_path)
        check_served_database(db, f'The run of table "{source_table}"')
        tag_flow_run([*run_tags([source_table], db), *[DRY_RUN_TAG] * dry_run])
        params = imputer_settings(  # the given settings on top of the TDM_* ones, checked first
            environment_settings(),
            imputer,
            subject=f'The imputer settings for table "{source_table}"',
        )
        options = ImputeOptions.from_settings(
            settings,
            params,
            datetime.now(UTC),
            source_table,
            seed=seed,
            range_factor=range_factor,
            fill=fill,
            draws=draws,
        )
        request = TableRequest(
            source_table,
            columns,
            key,
            target_table,
            replace_source,
            settings.replace_target if replace_target is None else replace_target,
            pass_through,
            bounds,
            settings.nan_as_missing if nan_as_missing is None else nan_as_missing,
        )
        if increment is None:
            options = options.for_request(request, settings)
            unchanged = None
            if not refit:
                unchanged = leave_unchanged(db, request, options, settings, dry_run=dry_run)
            if unchanged is not None:
                get_run_logger().info("%s", describe_result(unchanged), extra={OUTCOME: True})
                return unchanged
        return _impute_table(db, request, options, increment, settings, dry_run)

    return run_guarded(body, f'Table "{source_table}"')


def _impute_table(
    db: str,
    request: TableRequest,
    options: ImputeOptions,
    incremental: IncrementalRequest | None,
    settings: PipelineSettings,
    dry_run: bool,
) -> ImputeTableResult:
    source_table = request.source_table
    logger = get_run_logger()

    rows = None if incremental else count_rows_to_partition(db, source_table, settings)
    if rows is not None and request.replace_source:
        raise PipelineInputError(
            f'Table "{source_table}" has {rows} rows, more than one fit takes '
            f"(TDM_MAX_FIT_ROWS={settings.max_fit_rows}), so it is imputed in partitions, "
            "which read the source while writing the target: write to another table."
        )
    if incremental is not None or rows is not None:
        with started_runner(settings) as runner:
            result = impute_apart(
                db, request, options, incremental, settings=settings, runner=runner, dry_run=dry_run
            )
        if dry_run and incremental is None:  # an incremental run says it itself
            logger.info("%s", describe_dry_run(result), extra={OUTCOME: True})
        return result
    prepared = prepare_table(db, request, target_suffix=settings.target_suffix)
    plan = prepared.plan
    outcome = None
    if prepared.scaled is not None:
        columns = sum(1 for n in plan.missing.values() if n)
        logger.info(
            "Imputing %d cell%s in %d column%s of %r (%d row%s)",
            plan.n_missing,
            "s" * (plan.n_missing != 1),
            columns,
            "s" * (columns != 1),
            plan.source_table,
            plan.n_rows,
            "s" * (plan.n_rows != 1),
        )
        task = for_table(impute_task_for(options.imputer), plan.source_table)
        outcome = task(
            prepared.scaled.frame,
            options.imputer,
            options.seed,
            table=plan.source_table,
            bounds=prepared.scaled.bounds,
            draws=options.draws,
            fill=options.fill,
        )
    else:
        logger.info(
            "Table %r has no missing value in the columns to impute: it is copied through",
            plan.source_table,
        )
    result = finish_table(prepared, outcome, options, dry_run=dry_run)
    if dry_run:
        logger.info("%s", describe_dry_run(result), extra={OUTCOME: True})
    return result
