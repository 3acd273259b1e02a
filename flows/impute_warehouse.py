"""The `impute-warehouse` flow: impute every table a config lists, imputations spread over a
task runner (threads, or a Dask cluster), reads and writes in this process, one table's failure
never stopping the others."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from flows.incremental import IncrementalRequest, impute_apart
from flows.notify import notify_failure
from flows.partitioned import count_rows_to_partition
from flows.runners import describe_runner, gpu_annotation, runner_result, started_runner
from flows.runs import (
    DRY_RUN_TAG,
    OUTCOME,
    for_table,
    run_guarded,
    run_tags,
    tag_flow_run,
    warehouse_run_name,
)
from flows.settings import PipelineSettings, check_served_database
from flows.steps import (
    ImputeOptions,
    PreparedTable,
    describe_result,
    finish_table,
    leave_unchanged,
    prepare_table,
)
from schemas.warehouse import WarehouseConfig, WarehouseConfigError, load_warehouse_config
from tasks.artifacts import publish_warehouse_report, warehouse_report_markdown
from tasks.errors import PipelineError, PipelineInputError, WarehouseBusyError, setting
from tasks.impute import impute_task_for
from tasks.imputer_settings import environment_settings, imputer_settings
from tasks.results import ImputeTableResult
from tasks.targets import check_warehouse_targets
from tasks.validate import TableRequest

__all__ = ["WarehouseResult", "WarehouseRunError", "impute_warehouse", "warehouse_db"]


@dataclass(frozen=True)
class WarehouseResult:
    """Per table, what was written (with `dry_run`: what would have been); `failed`: the
    tables that were not (a `WarehouseRunError` carries this result)."""

    db_path: str
    runner: str
    tables: dict[str, ImputeTableResult]
    dry_run: bool = False
    failed: tuple[str, ...] = ()


class WarehouseRunError(PipelineError):
    """Some tables failed; the others were written (each table is its own transaction), or,
    in a dry run, nothing was. `result`: what the other tables did.

    `unexpected`: whether a table failed with an error other than a `PipelineError` (a bug, or
    an input nobody foresaw); its traceback was logged.
    """

    def __init__(
        self, message: str, *, result: WarehouseResult | None = None, unexpected: bool = False
    ) -> None:
        super().__init__(message)
        self.result = result
        self.unexpected = unexpected


@flow(
    name="impute-warehouse",
    flow_run_name=warehouse_run_name,
    on_failure=[notify_failure],
    on_crashed=[notify_failure],
)
def impute_warehouse(
    config: str,
    db_path: str | None = None,
    replace_target: bool | None = None,
    dry_run: bool = False,
    tables: list[str] | None = None,
    refit: bool = False,
) -> WarehouseResult:
    """Impute every table listed in the YAML file `config` (see `schemas.warehouse`).

    Fails, after finishing every other table, with a message naming each failed table and why.
    A config whose targets clash (`tasks.targets.check_warehouse_targets`) is refused before any
    table is read.

    Args:
        config: The YAML file that lists the tables to impute (table, and optionally key,
            columns, pass_through, bounds, target, imputer settings) and optionally the DuckDB
            file (db_path); a relative path is taken from the directory of the process that
            runs the flow.
        db_path: The DuckDB file. Empty: the TDM_DB_PATH setting when set, else the config's
            db_path, else warehouse.duckdb (a setting beats the file, as for every setting).
        replace_target: Replace existing target tables the pipeline did not write; without it
            such a target is refused. Empty: TDM_REPLACE_TARGET.
        dry_run: Fit and check every table as a run would, then stop: nothing is written (the
            file is opened read-only) and the result says what a run would write.
        tables: Only these tables of the config (its `table` names), as after a run where
            they failed. Empty: every table it lists.
        refit: Fit every table now: a whole table even when it is unchanged since its last
            run (see TDM_SKIP_UNCHANGED), an incremental one a new model version.
    """
    return run_guarded(
        lambda: _impute_warehouse(config, db_path, replace_target, dry_run, tables, refit),
        f'The warehouse run of "{config}"',
    )


def warehouse_db(db_path: str | None, spec: WarehouseConfig, settings: PipelineSettings) -> str:
    """The DuckDB file of a warehouse run: `db_path`, else the TDM_DB_PATH setting, else the
    config's, else the default."""
    from_env = settings.db_path if "db_path" in settings.model_fields_set else None
    return str(db_path or from_env or spec.db_path or settings.db_path)


def _impute_warehouse(
    config: str,
    db_path: str | None,
    replace_target: bool | None,
    dry_run: bool,
    only: list[str] | None,
    refit: bool = False,
) -> WarehouseResult:
    started = datetime.now(UTC)
    settings = PipelineSettings.from_env()
    logger = get_run_logger()
    try:
        spec = load_warehouse_config(config)
    except WarehouseConfigError as error:
        raise PipelineInputError(str(error)) from None
    db = warehouse_db(db_path, spec, settings)
    check_served_database(db, f"The warehouse run of '{config}'")
    if only:
        try:
            spec = spec.only(only)
        except ValueError as error:
            raise PipelineInputError(
                f'The warehouse run of "{config}" was asked for tables ({setting("tables")}) '
                f"that its config does not list: {error}. Nothing was read or written."
            ) from None
    tables = [entry.table for entry in spec.tables]
    tag_flow_run([*run_tags(tables, db), *[DRY_RUN_TAG] * dry_run])
    check_targets = check_warehouse_targets.with_options(task_run_name="check-warehouse-targets")
    check_targets(db, spec, settings.target_suffix)
    replace = settings.replace_target if replace_target is None else replace_target
    failures: dict[str, str] = {}
    unexpected: set[str] = set()  # tables that failed with an error not foreseen
    busy: dict[str, WarehouseBusyError] = {}  # tables that found the warehouse locked
    options: dict[str, ImputeOptions] = {}
    left: dict[str, ImputeTableResult] = {}  # tables whose targets stand (`leave_unchanged`)
    prepared: dict[str, PreparedTable] = {}
    large: list[TableRequest] = []  # imputed in partitions, one at a time, after the rest
    increments: dict[str, IncrementalRequest] = {}  # incremental runs, one at a time, last
    # Every entry's imputer settings are checked before any table, as `tdm serve` checks them:
    # a config refused as a whole writes nothing.
    env = environment_settings()
    params = {
        entry.table: imputer_settings(
            env,
            entry.imputer,
            subject=f'Warehouse config {config}: imputer settings of table "{entry.table}"',
        )
        for entry in spec.tables
    }
    for entry in spec.tables:
        request = TableRequest(
            entry.table,
            entry.columns,
            entry.key,
            entry.target,
            replace_target=replace,
            pass_through=entry.pass_through,
            bounds=entry.bounds,
            nan_as_missing=(
                settings.nan_as_missing if entry.nan_as_missing is None else entry.nan_as_missing
            ),
        )
        try:
            options[entry.table] = ImputeOptions.from_settings(
                settings,
                params[entry.table],
                started,
                entry.table,
                fill=entry.fill,
                draws=entry.draws,
            )
            if entry.incremental:
                increments[entry.table] = IncrementalRequest(entry.watermark, refit)
                large.append(request)
                continue
            chosen = options[entry.table] = options[entry.table].for_request(request, settings)
            unchanged = None
            if not refit:
                unchanged = leave_unchanged(db, request, chosen, settings, dry_run=dry_run)
            if unchanged is not None:
                left[entry.table] = unchanged
                continue
            if count_rows_to_partition(db, entry.table, settings) is not None:
                large.append(request)
                continue
            prepared[entry.table] = prepare_table(db, request, target_suffix=settings.target_suffix)
        except Exception as error:  # any table's failure, foreseen or not, spares the others
            failures[entry.table] = _reason(error, entry.table, unexpected, busy)

    runner_name = describe_runner(settings)
    results: dict[str, ImputeTableResult] = {}
    idle = not large and all(ready.scaled is None for ready in prepared.values())
    with contextlib.nullcontext() if idle else started_runner(settings) as runner:
        futures: dict[str, Any] = {}
        for table, ready in prepared.items():
            if ready.scaled is None:
                continue
            task = for_table(
                impute_task_for(options[table].imputer, gpu=settings.dask_gpu or None), table
            )
            with gpu_annotation(settings):
                futures[table] = runner.submit(
                    task,
                    parameters={
                        "frame": ready.scaled.frame,
                        "settings": options[table].imputer,
                        "seed": settings.seed,
                        "table": table,
                        "bounds": ready.scaled.bounds,
                        "draws": options[table].draws,
                        "fill": options[table].fill,
                    },
                )
        count = len(futures) + len(large)
        apart = f" ({len(large)} of them one at a time: incremental or in partitions)"
        logger.info(
            "%d table%s to impute on %s%s",
            count,
            "s" * (count != 1),
            runner_name,
            apart if large else "",
        )
        # written one at a time, in config order: the whole tables, then those imputed apart
        for table, ready in prepared.items():
            try:
                outcome = (
                    runner_result(futures[table], settings, table, "the fit")
                    if table in futures
                    else None
                )
                results[table] = finish_table(ready, outcome, options[table], dry_run=dry_run)
            except Exception as error:
                failures[table] = _reason(error, table, unexpected, busy)
        for request in large:
            table = request.source_table
            try:
                results[table] = impute_apart(
                    db,
                    request,
                    options[table],
                    increments.get(table),
                    settings=settings,
                    runner=runner,
                    dry_run=dry_run,
                )
            except Exception as error:
                failures[table] = _reason(error, table, unexpected, busy)
    if busy and len(busy) == len(failures):  # only locks: the run-level retries may succeed
        raise next(iter(busy.values()))
    finished = results | left
    results = {e.table: finished[e.table] for e in spec.tables if e.table in finished}
    done = WarehouseResult(db, runner_name, results, dry_run, failed=tuple(failures))
    for table in results.values():
        if table.model_version is None:  # an incremental run logged its own
            logger.info("%s", describe_result(table), extra={OUTCOME: True})
    if not dry_run:
        name = Path(config).stem
        publish_warehouse_report(
            name,
            lambda: warehouse_report_markdown(name, db, results, failures),
            f"Warehouse run {name}: {len(results) - len(left)} tables written, "
            f"{len(left)} unchanged, {len(failures)} failed",
        )
    if failures:
        listed = "".join(f"\n  [{table}] {reason}" for table, reason in failures.items())
        if dry_run:
            others = "a dry run: nothing written"
        elif len(failures) < len(spec.tables):
            others = "the others were written" + " or left as they were" * bool(left)
        else:
            others = "none written"
        again = ""
        if len(failures) < len(spec.tables):
            again = (
                f"\n  To run the failed tables alone once their causes are fixed: "
                f"{','.join(failures)} as {setting('tables')}."
            )
        raise WarehouseRunError(
            f"{len(failures)} of {len(spec.tables)} tables failed ({others}):{listed}{again}",
            result=done,
            unexpected=bool(unexpected),
        )
    return done


_NOTHING_WRITTEN = re.compile(r"\b([Nn])othing was written\b")


def _reason(
    error: Exception, table: str, unexpected: set[str], busy: dict[str, WarehouseBusyError]
) -> str:
    """Why `table` failed, in one line, logged as it fails (the run's end lists every failure
    again); an unforeseen error is logged with its traceback, a locked warehouse
    (`WarehouseBusyError`) is kept in `busy`."""
    if isinstance(error, WarehouseBusyError):
        busy[table] = error
    if isinstance(error, PipelineError):  # its "nothing was written" is of this table only
        reason = _NOTHING_WRITTEN.sub(
            lambda m: f'{m[1]}othing of "{table}" was written', str(error)
        )
        get_run_logger().warning('Table "%s" failed; the run goes on: %s', table, reason)
        return reason
    unexpected.add(table)
    get_run_logger().error("Table %r failed with an unexpected error", table, exc_info=error)
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"unexpected error {type(error).__name__}: {first}".rstrip(": ")
