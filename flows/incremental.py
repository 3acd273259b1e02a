"""Incremental runs of a table: a stored model per target, new rows imputed with it.

The first run fits a model (on the whole table, or a sample of `max_fit_rows` rows), imputes every
row, creates the target and stores the model as version 1 in `tdm_models`, in one transaction. A
later run reads only the rows the target does not hold yet (`tasks.warehouse.increments`), measures
their drift against the model's fit data, and imputes them with the stored model's `transform`
(not refitted); rows imputed before are never rewritten. A model is refitted, and stored as a new
version, when asked, when it is older than `refit_every_days`, when the new rows drift past a
threshold (`on_drift="refit"`), or when the stored model cannot be used (corrupt, saved by an
unreadable library version, fitted on other columns): the reason is logged and recorded in the
lineage row. After a refit the new rows are imputed with the new model; the old ones keep their
values unless `rewrite_on_refit`, which replaces the target whole.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import duckdb
import pandas as pd
from prefect import get_run_logger

from flows.partitioned import (
    fit_on_runner,
    gpu_tags,
    impute_partitioned,
    log_unmeasured,
    partition_parameters,
    profile_request,
    scale_by_profile,
)
from flows.runners import gpu_annotation, runner_result
from flows.runs import OUTCOME, for_table
from flows.settings import PipelineSettings
from flows.steps import (
    Clock,
    ImputeOptions,
    describe_dry_run,
    describe_increment,
    dry_run_result,
    log_plan,
    model_fields,
    plan_for_rows,
    table_result,
)
from tasks.artifacts import log_quality_warnings, publish_run_report
from tasks.drift import DriftReport, measure_drift, profile_columns
from tasks.errors import PipelineInputError, setting
from tasks.impute import impute_partition
from tasks.lineage import LineageRecord, ModelUse, current_run
from tasks.partitions import TableProfile, read_partition, read_sample
from tasks.quality import QualityReport, check_quality
from tasks.results import CellDraws, FittedModel, ImputationOutcome, Imputed, ImputeTableResult
from tasks.scaling import Scaling, apply_scaling, inverse_scale, inverse_scale_draws
from tasks.targets import check_same_columns, check_target_table
from tasks.validate import TableRequest
from tasks.warehouse.access import check_folder_writable, check_writable
from tasks.warehouse.increments import NewRows, check_watermark, read_new_rows, stale_rows
from tasks.warehouse.models import (
    ModelInfo,
    NewModel,
    StoredModelError,
    latest_model,
    load_model,
    model_folder,
    next_model_version,
    pack_imputer,
)
from tasks.warehouse.tables import connect
from tasks.write import TableWriter, WriteMode
from tdm._version import __version__ as tdm_version

__all__ = ["IncrementalRequest", "impute_apart", "impute_incremental"]


@dataclass(frozen=True)
class IncrementalRequest:
    """How new rows are told apart (`watermark`, when the table has no key) and whether a refit
    is asked for."""

    watermark: str | None = None
    refit: bool = False


@dataclass(frozen=True, eq=False)
class _Model:
    """The model a run imputes with: the imputer, its scaling, its version, and, when it was
    fitted by this run, what is stored and the fit (its imputation of the fit rows)."""

    imputer: Any
    scaling: Scaling
    version: int
    stored: NewModel | None = None
    fitted: FittedModel | None = None
    fit_index: pd.Index | None = None


def impute_incremental(
    db_path: str,
    request: TableRequest,
    options: ImputeOptions,
    incremental: IncrementalRequest,
    *,
    settings: PipelineSettings,
    runner: Any,
    dry_run: bool = False,
) -> ImputeTableResult:
    """Impute the rows of `request.source_table` its target does not hold yet, with the stored
    model or a refitted one (see the module's docstring), the fit and the new rows' imputation
    (in partitions of `TDM_PARTITION_ROWS`) over `runner`; one transaction writes it all. With
    `dry_run` the file is opened read-only and the run stops after the checks: the result and
    the log say what a run would append, with which model version, and why it would refit."""
    if request.replace_source:
        raise PipelineInputError(
            f'An incremental run of table "{request.source_table}" appends to its target; it '
            "cannot update the source in place. Write to a target table."
        )
    check_writable(db_path)  # as a run would, before the fit
    folder = model_folder(db_path, settings.model_dir)
    logger = get_run_logger()
    run = current_run(options.started)
    clock = Clock()
    # Read-only, and closed for the fit: the write lock is held only by the write, as in every
    # other run; the writer checks that the target is as it was read.
    with clock.timing("load-validate-read"), connect(db_path, read_only=True) as con:
        chosen = replace(request, watermark=incremental.watermark)  # not imputed by default
        profile = profile_request(con, db_path, chosen, settings)
        plan = profile.plan
        if plan.key is None and incremental.watermark is None:
            raise PipelineInputError(
                f'An incremental run of table "{plan.source_table}" needs a key (unique, not '
                "null) or a watermark column to tell new rows from those imputed before."
            )
        if incremental.watermark is not None:
            check_watermark(con, profile, incremental.watermark)
        exists = check_target_table(con, plan, replacing=False)
        latest = latest_model(con, plan.target_table)
        reason = _refit_reason(exists, latest, incremental, settings)
        model: _Model | None = None
        # a refit the settings did not plan (a warning, not a note): a target without a model
        unplanned = exists and latest is None
        if reason is None and latest is not None:
            try:
                imputer, scaling = load_model(
                    con,
                    latest,
                    columns=plan.columns,
                    key=plan.key,
                    kinds=plan.kinds,
                    folder=folder,
                )
                model = _Model(imputer, scaling, latest.version)
                if latest.tdm_version != tdm_version:
                    logger.info(
                        "Table %r: the stored model (version %d) was fitted by tdm %s; this is "
                        "tdm %s, whose imputation of new rows may differ from what %s gave "
                        "(docs/decisions.md says what changed). --refit fits a new model.",
                        plan.source_table,
                        latest.version,
                        latest.tdm_version,
                        tdm_version,
                        latest.tdm_version,
                    )
            except StoredModelError as error:
                reason, unplanned = f"{error} A new model is fitted.", True
        new = read_new_rows(con, profile, incremental.watermark)
        drift = _drift(latest, new, plan.kinds, settings) if latest and exists else None
        if model is not None and drift is not None and drift.exceeded:
            if settings.on_drift == "refit":
                reason, model, unplanned = drift.reason(), None, True
            else:
                logger.warning(
                    "Table %r: %s; imputing with the stored model (TDM_ON_DRIFT=warn)",
                    plan.source_table,
                    drift.reason(),
                )
        rewrite = model is None and exists and settings.rewrite_on_refit
        if rewrite:
            check_target_table(con, plan)  # written anew: referenced by no foreign key
        elif exists:
            check_same_columns(con, plan)  # before the fit: the write would refuse to append
            if plan.key is not None and (stale := stale_rows(con, profile)).describe():
                logger.warning(
                    "Table %r: rows its target %r keeps from earlier runs no longer match it: "
                    "%s. An append leaves them as they are; --refit with "
                    "TDM_REWRITE_ON_REFIT=true writes the target anew from the source.",
                    plan.source_table,
                    plan.target_table,
                    stale.describe(),
                )
        if rewrite or not exists:
            new = read_new_rows(con, profile, incremental.watermark, every_row=True)
        if new.late_rows:
            logger.warning(
                "Table %r: %d source row%s at or below the target's highest %r arrived after "
                "the run that passed that value; a watermark reads only the rows above it, so "
                "%s never imputed. Give a key to find every row the target lacks (%s).",
                plan.source_table,
                new.late_rows,
                "s" * (new.late_rows != 1),
                incremental.watermark,
                "they are" if new.late_rows != 1 else "it is",
                setting("key"),
            )
        log_plan(plan_for_rows(plan, new.frame))  # the cells this run imputes
        fit_rows = None if model is not None else _fit_rows(con, profile, options, settings)
        version = next_model_version(con, plan.target_table)  # if one is fitted
    if model is None:
        assert reason is not None and fit_rows is not None
        if folder is not None:  # before the fit, as the file's own check
            check_folder_writable(
                folder.file(plan.target_table, version).parent,
                what=f"The model folder '{folder.root}' (TDM_MODEL_DIR)",
            )
        level = logging.WARNING if unplanned else logging.INFO
        logger.log(level, "Table %r: fitting a model (%s)", plan.source_table, reason)
        with clock.timing("fit"):
            model = _fit(
                fit_rows,
                profile,
                options,
                settings,
                run.run_id,
                version,
                incremental,
                runner,
            )
    imputed, draws, quality = _impute_rows(
        profile, new, model, options, clock, settings=settings, runner=runner
    )
    source = profile.source(new.frame)
    part_plan = plan_for_rows(plan, new.frame)
    outcome: ImputationOutcome | None = None
    if model.fitted is not None:  # a model fitted on a sample made no draws of its own
        fitted = model.fitted.outcome
        outcome = replace(fitted, hyperparameters={**fitted.hyperparameters, **options.filled()})
    lineage = LineageRecord(
        run=run,
        source=source,
        plan=part_plan,
        outcome=outcome,
        quality=quality,
        seed=options.seed,
        hyperparameters=options.recorded(),
        model=ModelUse(
            version=model.version,
            rows_new=len(new.frame),
            rows_reused=new.rows_before,
            refit_reason=reason,
            drift=None if drift is None else drift.to_dict(),
            appended=exists and not rewrite,
        ),
        draws=draws,
    )
    if dry_run:
        log_quality_warnings(plan.source_table, quality)  # as a run would, with its report
        result = replace(
            dry_run_result(db_path, part_plan, outcome, clock.seconds, replaces=rewrite),
            **model_fields(lineage),
        )
        logger.info("%s", describe_dry_run(result), extra={OUTCOME: True})
        return result
    with (
        clock.timing("write"),
        TableWriter(db_path, WriteMode.APPEND, replace=rewrite, folder=folder) as writer,
    ):
        written, lineage = writer.commit(lineage, imputed, model=model.stored)
    result = table_result(written, lineage, clock.seconds)
    logger.info("%s", describe_increment(result), extra={OUTCOME: True})
    publish_run_report(
        result, source=source, imputed=imputed, quality=lineage.quality, outcome=lineage.outcome
    )
    return result


def impute_apart(
    db_path: str,
    request: TableRequest,
    options: ImputeOptions,
    incremental: IncrementalRequest | None,
    *,
    settings: PipelineSettings,
    runner: Any,
    dry_run: bool = False,
) -> ImputeTableResult:
    """A table imputed by itself over `runner`: incrementally when asked, else in partitions."""
    how = {"settings": settings, "runner": runner, "dry_run": dry_run}
    if incremental is not None:
        return impute_incremental(db_path, request, options, incremental, **how)
    return impute_partitioned(db_path, request, options, **how)


def _refit_reason(
    exists: bool,
    latest: ModelInfo | None,
    incremental: IncrementalRequest,
    settings: PipelineSettings,
) -> str | None:
    """Why this run fits a model before reading new rows, or None."""
    if not exists:
        return "first run: the target does not exist yet"
    if latest is None:
        return "no model of the target is stored"
    if incremental.refit:
        return "refit asked for"
    if settings.refit_every_days is not None:
        age = (datetime.now(UTC) - latest.created_at).total_seconds() / 86400
        if age >= settings.refit_every_days:
            return (
                f"model version {latest.version} is {age:.1f} days old "
                f"(TDM_REFIT_EVERY_DAYS={settings.refit_every_days:g})"
            )
    return None


def _drift(
    latest: ModelInfo, new: NewRows, kinds: Any, settings: PipelineSettings
) -> DriftReport | None:
    profile = {c: v for c, v in latest.profile.items() if c in new.frame}
    if not profile or not len(new.frame):
        return None
    return measure_drift(
        profile,
        new.frame,
        kinds,
        threshold=settings.drift_threshold,
        label_threshold=settings.drift_label_threshold,
    )


def _fit_rows(
    con: duckdb.DuckDBPyConnection,
    profile: TableProfile,
    options: ImputeOptions,
    settings: PipelineSettings,
) -> pd.DataFrame:
    """The rows a model is fitted on: the whole table in storage order, or a sample of
    `max_fit_rows` rows."""
    if profile.fingerprint.rows <= settings.max_fit_rows:
        return read_partition(con, profile, 0, _max_rowid(con, profile) + 1)
    return read_sample(con, profile, settings.max_fit_rows, options.seed)


def _fit(
    frame: pd.DataFrame,
    profile: TableProfile,
    options: ImputeOptions,
    settings: PipelineSettings,
    run_id: str,
    version: int,
    incremental: IncrementalRequest,
    runner: Any,
) -> _Model:
    """Fit on `frame` (`_fit_rows`), scaled by the whole table's moments; the model to store
    as `version`."""
    plan = profile.plan
    table = plan.source_table
    rows = profile.fingerprint.rows
    scaled = scale_by_profile(profile, frame)
    whole = rows <= settings.max_fit_rows  # the fit's own imputation is written
    fitted = fit_on_runner(table, options, scaled, settings=settings, runner=runner, written=whole)
    blob, format_version = pack_imputer(fitted.imputer)
    stored = NewModel(
        source_table=table,
        target_table=plan.target_table,
        run_id=run_id,
        columns=tuple(plan.columns),
        key_column=plan.key,
        watermark_column=_stored_name(profile, incremental.watermark),
        settings=fitted.outcome.hyperparameters,
        seed=options.seed,
        source_hash=profile.fingerprint.content_hash,
        fit_rows=len(frame),
        scaling=scaled.scaling,
        profile=profile_columns(frame, plan.columns, plan.kinds),
        model=blob,
        created_at=datetime.now(UTC),
        format_version=format_version,
    )
    index = frame.index if whole else None
    return _Model(fitted.imputer, scaled.scaling, version, stored, fitted, index)


def _stored_name(profile: TableProfile, column: str | None) -> str | None:
    """`column` as the table spells it (a name is matched case-insensitively)."""
    found = profile.table.column(column) if column is not None else None
    return found.name if found is not None else column


def _max_rowid(con: duckdb.DuckDBPyConnection, profile: TableProfile) -> int:
    found = con.execute(f"SELECT coalesce(max(rowid), -1) FROM {profile.table.sql}").fetchall()
    return int(found[0][0])


def _impute_rows(
    profile: TableProfile,
    new: NewRows,
    model: _Model,
    options: ImputeOptions,
    clock: Clock,
    *,
    settings: PipelineSettings,
    runner: Any,
) -> tuple[pd.DataFrame, CellDraws | None, QualityReport]:
    """The new rows imputed in the data's units, what their draws show (None: no draws), and
    their checks: the fit's own imputation where the model was fitted on the whole table now
    (timed as the fit), else the model's `transform` (`_transform`, timed as `impute`)."""
    plan = profile.plan
    if model.fitted is not None and model.fit_index is not None:
        outcome = model.fitted.outcome
        rows = new.frame.index
        draws = None if outcome.draws is None else outcome.draws.at(rows)
        scaled = Imputed(outcome.frame.loc[rows], draws)
    else:
        with clock.timing("impute"):
            scaled = _transform(plan.source_table, new, model, options, settings, runner)
    imputed = clock("inverse-scale", inverse_scale.fn, scaled.frame, model.scaling, new.frame)
    draws = None if scaled.draws is None else inverse_scale_draws(scaled.draws, model.scaling)
    quality = clock(
        "check-quality",
        check_quality.fn,
        profile.source(new.frame),
        plan_for_rows(plan, new.frame),
        imputed,
        options.range_factor,
        whole=profile.observed,
        label_share_threshold=options.label_share_threshold,
        spread_threshold=options.spread_threshold,
    )
    return imputed, draws, quality


def _transform(
    table: str,
    new: NewRows,
    model: _Model,
    options: ImputeOptions,
    settings: PipelineSettings,
    runner: Any,
) -> Imputed:
    """The new rows, scaled, imputed by the model's `transform` (and drawn as `options` say):
    one task per `TDM_PARTITION_ROWS` rows over `runner` (with the `gpu` tag on a GPU)."""
    frame = apply_scaling(new.frame, model.scaling, table=table, new_rows=True)
    if not len(frame):
        return Imputed(frame)
    tags = gpu_tags(options, settings)
    futures = []
    for index, start in enumerate(range(0, len(frame), settings.partition_rows)):
        part = frame.iloc[start : start + settings.partition_rows]
        task = for_table(impute_partition, table, suffix=f"-{index}", tags=tags)
        parameters = partition_parameters(model.imputer, part, table, index, options)
        with gpu_annotation(settings):
            futures.append(runner.submit(task, parameters=parameters))
    parts: list[Imputed] = []
    unmeasured: dict[str, list[int]] = {}
    for index, future in enumerate(futures):
        where = f"partition {index + 1} of {len(futures)}"
        parts.append(runner_result(future, settings, table, f"{where} of its new rows"))
        for column in parts[-1].unmeasured:
            unmeasured.setdefault(column, []).append(index + 1)
    log_unmeasured(table, unmeasured, len(futures))
    draws = [p.draws for p in parts if p.draws is not None]
    return Imputed(
        pd.concat([p.frame for p in parts]),
        CellDraws.concat(draws) if len(draws) == len(parts) else None,
    )
