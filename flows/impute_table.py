"""The `impute-table` flow: load, validate, standardise, impute, inverse-scale, check, write."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger

from flows.settings import PipelineSettings
from flows.steps import ImputeTableResult, finish_table, prepare_table
from tasks.impute import impute_task_for
from tasks.params import ImputerParams

__all__ = ["ImputeTableResult", "impute_table"]


@flow(name="impute-table")
def impute_table(
    source_table: str,
    db_path: str | Path | None = None,
    target_table: str | None = None,
    columns: list[str] | None = None,
    key: str | None = None,
    replace_source: bool = False,
    imputer: ImputerParams | None = None,
    seed: int | None = None,
    range_factor: float | None = None,
) -> ImputeTableResult:
    """Impute the missing cells of a DuckDB table into a new table, with lineage."""
    started = datetime.now(UTC)
    settings = PipelineSettings()
    db = str(db_path if db_path is not None else settings.db_path)
    params = imputer if imputer is not None else settings.imputer_params()
    seed = settings.seed if seed is None else seed
    range_factor = settings.range_factor if range_factor is None else range_factor
    logger = get_run_logger()

    prepared = prepare_table(
        db,
        source_table,
        columns=columns,
        key=key,
        target_table=target_table,
        replace_source=replace_source,
        target_suffix=settings.target_suffix,
    )
    plan = prepared.plan
    outcome = None
    if prepared.scaled is not None:
        logger.info(
            "Imputing %d cells in %d columns of %r (%d rows)",
            plan.n_missing, len(plan.columns), plan.source_table, plan.n_rows,
        )  # fmt: skip
        outcome = impute_task_for(params)(
            prepared.scaled.frame, params, seed, table=plan.source_table
        )
    else:
        logger.info("Table %r has no missing value: it is copied through", plan.source_table)
    return finish_table(
        prepared, outcome, params=params, seed=seed, range_factor=range_factor, started=started
    )
