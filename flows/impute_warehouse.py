"""The `impute-warehouse` flow: impute every table a config lists, imputations spread over a
task runner (threads, or a Dask cluster), reads and writes in this process, one table's failure
never stopping the others."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger
from pydantic import ValidationError

from flows.partitioned import impute_partitioned
from flows.runners import describe_runner, gpu_annotation, runner_width, task_runner
from flows.settings import PipelineSettings
from flows.steps import ImputeTableResult, PreparedTable, finish_table, prepare_table
from schemas.warehouse import TableEntry, WarehouseConfigError, load_warehouse_config
from tasks.errors import PipelineError, PipelineInputError, validation_problems
from tasks.impute import impute_task_for
from tasks.params import ImputerParams
from tasks.partitions import count_rows

__all__ = ["WarehouseResult", "WarehouseRunError", "impute_warehouse"]

DEFAULT_CONFIG = "deployments/warehouse.yaml"


class WarehouseRunError(PipelineError):
    """Some tables failed; the others were written (each table is its own transaction)."""


@dataclass(frozen=True)
class WarehouseResult:
    """Per table, what was written."""

    db_path: str
    runner: str
    tables: dict[str, ImputeTableResult]


@flow(name="impute-warehouse")
def impute_warehouse(config: str = DEFAULT_CONFIG, db_path: str | None = None) -> WarehouseResult:
    """Impute every table listed in the YAML file `config` (see `schemas.warehouse`).

    Fails, after finishing every other table, with a message naming each failed table and why.
    """
    started = datetime.now(UTC)
    settings = PipelineSettings()
    logger = get_run_logger()
    try:
        spec = load_warehouse_config(config)
    except WarehouseConfigError as error:
        raise PipelineInputError(str(error)) from None
    db = str(db_path or spec.db_path or settings.db_path)
    failures: dict[str, str] = {}
    params: dict[str, ImputerParams] = {}
    prepared: dict[str, PreparedTable] = {}
    large: list[TableEntry] = []  # imputed in partitions, one table at a time, after the rest
    for entry in spec.tables:
        try:
            params[entry.table] = _params_for(entry, settings)
            rows = count_rows(db, entry.table)
            if rows is not None and rows > settings.max_fit_rows:
                large.append(entry)
                continue
            prepared[entry.table] = prepare_table(
                db,
                entry.table,
                columns=entry.columns,
                key=entry.key,
                target_table=entry.target,
                target_suffix=settings.target_suffix,
            )
        except PipelineError as error:
            failures[entry.table] = str(error)

    runner_name = describe_runner(settings)
    results: dict[str, ImputeTableResult] = {}
    with task_runner(settings) as runner:
        futures: dict[str, Any] = {}
        for table, ready in prepared.items():
            if ready.scaled is None:
                continue
            task = impute_task_for(params[table], gpu=settings.dask_gpu or None)
            with gpu_annotation(settings):
                futures[table] = runner.submit(
                    task,
                    parameters={
                        "frame": ready.scaled.frame,
                        "params": params[table],
                        "seed": settings.seed,
                        "table": table,
                    },
                )
        logger.info("%d tables to impute on %s", len(futures), runner_name)
        for table, ready in prepared.items():  # written one at a time, in config order
            try:
                outcome = futures[table].result() if table in futures else None
                results[table] = finish_table(
                    ready,
                    outcome,
                    params=params[table],
                    seed=settings.seed,
                    range_factor=settings.range_factor,
                    started=started,
                )
            except PipelineError as error:
                failures[table] = str(error)
        for entry in large:
            try:
                results[entry.table] = impute_partitioned(
                    db,
                    entry.table,
                    columns=entry.columns,
                    key=entry.key,
                    target_table=entry.target,
                    params=params[entry.table],
                    seed=settings.seed,
                    range_factor=settings.range_factor,
                    settings=settings,
                    started=started,
                    runner=runner,
                    in_flight=runner_width(settings) + 1,
                )
            except PipelineError as error:
                failures[entry.table] = str(error)
    if failures:
        listed = " ".join(f"[{table}] {reason}" for table, reason in failures.items())
        raise WarehouseRunError(
            f"{len(failures)} of {len(spec.tables)} tables failed (the others were written): "
            f"{listed}"
        )
    return WarehouseResult(db_path=db, runner=runner_name, tables=results)


def _params_for(entry: TableEntry, settings: PipelineSettings) -> ImputerParams:
    """The run's imputer settings with the entry's overrides; a bad override names the table."""
    try:
        return ImputerParams.model_validate(
            {**settings.imputer_params().model_dump(), **entry.imputer}
        )
    except ValidationError as error:
        problems = validation_problems(error)
        raise PipelineInputError(
            f'Warehouse config: imputer settings of table "{entry.table}" are invalid: {problems}.'
        ) from None
