"""The `impute-table` flow: load, validate, standardise, impute, inverse-scale, check, write."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger

from flows.settings import PipelineSettings
from tasks.frames import as_float_frame
from tasks.impute import impute
from tasks.lineage import LineageRecord, current_run
from tasks.load import load_table
from tasks.params import ImputerParams
from tasks.quality import check_quality
from tasks.scaling import inverse_scale, standardise
from tasks.validate import validate_input
from tasks.write import write_back

__all__ = ["ImputeTableResult", "impute_table"]


@dataclass(frozen=True)
class ImputeTableResult:
    """What one run of `impute-table` did."""

    run_id: str
    db_path: str
    source_table: str
    target_table: str
    replaced_existing: bool
    status: str
    rows: int
    cells_imputed: dict[str, int]
    device: str | None
    n_iter: int | None
    final_loss: float | None
    fit_seconds: float


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

    source = load_table(db, source_table, key)
    plan = validate_input(
        source, columns, key, target_table, replace_source, settings.target_suffix
    )
    if plan.n_missing:
        logger.info(
            "Imputing %d cells in %d columns of %r (%d rows)",
            plan.n_missing, len(plan.columns), plan.source_table, plan.n_rows,
        )  # fmt: skip
        scaled = standardise(source.frame, plan.columns)
        outcome = impute(scaled.frame, params, seed, table=plan.source_table)
        imputed = inverse_scale(outcome.frame, scaled.scaling, source.frame)
    else:
        logger.info("Table %r has no missing value: it is copied through", plan.source_table)
        outcome = None
        imputed = as_float_frame(source.frame, plan.columns)
    report = check_quality(source, plan, imputed, range_factor)
    lineage = LineageRecord(
        run=current_run(started),
        source=source,
        plan=plan,
        outcome=outcome,
        quality=report,
        seed=seed,
        hyperparameters=params.model_dump(),
    )
    written = write_back(source, plan, imputed, lineage)
    return ImputeTableResult(
        run_id=written.run_id,
        db_path=db,
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
    )
