"""Impute step: fit TDM on the standardised columns, reporting progress to Prefect."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from uuid import UUID

import numpy as np
import pandas as pd
from prefect import task
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext

from tasks.artifacts import artifact_key
from tasks.draws import Fill, draw_imputation, unmeasured_note
from tasks.errors import PipelineError, PipelineInputError
from tasks.imputer_settings import imputer_device
from tasks.logs import step_logger
from tasks.results import FittedModel, ImputationOutcome, Imputed

if TYPE_CHECKING:
    from tdm import FitProgress

__all__ = [
    "GPU_TAG",
    "PrefectProgress",
    "fit_model",
    "impute",
    "impute_partition",
    "impute_task_for",
    "uses_gpu",
]

#: Tag of impute runs on a GPU: a Prefect concurrency limit on it keeps runs sharing one GPU
#: from overcommitting it (`prefect concurrency-limit create gpu 1`).
GPU_TAG = "gpu"


class PrefectProgress:
    """Imputer callback: logs every `every` of the iterations and updates a progress artifact.

    Each log line gives the median, over the iterations since the previous line, of the relative
    transport cost (a step's transport cost over the mean cost of all pairs across its two
    batches; 1 = no better than random pairs), or of the loss where that is not recorded: a
    median, so that a spike of one or two steps, which the fit recovers from, shows in the loss
    plot but does not alarm in the log. The start's column models are logged likewise before the
    steps. Inside a task run, the artifact `tdm-progress-<table>` shows the share of the start's
    models done, then of `max_iter`, its description naming which; `finish` sets it to 100%
    when the fit stops early.
    """

    def __init__(self, table: str, *, every: float = 0.1) -> None:
        self.table = table
        self.every = every
        self._ratios: list[float] = []
        self._losses: list[float] = []
        self._artifact: UUID | None = None
        self._stepping = False
        self._logger = step_logger(__name__)
        if TaskRunContext.get() is not None:
            artifact = create_progress_artifact(
                progress=0.0,
                key=artifact_key("progress", table),
                description=f'TDM fit on table "{table}"',
            )
            self._artifact = artifact if isinstance(artifact, UUID) else None

    def __call__(self, progress: FitProgress) -> None:
        """Record the step; report every `every` of `max_iter` iterations, and at the last one
        (the start's models likewise, before the steps)."""
        step = max(1, math.ceil(progress.max_iter * self.every))
        if progress.stage == "start":
            if progress.iteration % step == 0 or progress.iteration == progress.max_iter:
                self._report_start(progress)
            return
        if not self._stepping:  # the start's bar, at 100%, gives way to the steps' from 0
            self._stepping = True
            self._show(0.0, f'TDM fit on table "{self.table}": optimisation steps')
        self._ratios.append(progress.cost_ratio)
        self._losses.append(progress.loss)
        if progress.iteration % step and progress.iteration != progress.max_iter:
            return
        done = progress.iteration / progress.max_iter
        ratios, losses = np.asarray(self._ratios), np.asarray(self._losses)
        self._ratios, self._losses = [], []
        measure, values = "relative transport cost", ratios[np.isfinite(ratios)]
        if not values.size:
            measure, values = "loss", losses[np.isfinite(losses)]
        summary = f"{measure} {np.median(values):.3g}" if values.size else "no finite loss"
        self._logger.info(
            "TDM fit on %r: %3.0f%% (%d/%d iterations), %s (median of the last %d iterations)",
            self.table,
            100 * done,
            progress.iteration,
            progress.max_iter,
            summary,
            len(losses),
        )
        self._show(done, f'TDM fit on table "{self.table}": optimisation steps')

    def _report_start(self, progress: FitProgress) -> None:
        done = progress.iteration / progress.max_iter
        self._logger.info(
            "TDM start on %r: %3.0f%% (%d/%d column models of the chained-equation start)",
            self.table,
            100 * done,
            progress.iteration,
            progress.max_iter,
        )
        self._show(done, f'TDM fit on table "{self.table}": chained-equation start')

    def _show(self, done: float, description: str) -> None:
        if self._artifact is not None:
            update_progress_artifact(
                artifact_id=self._artifact, progress=100.0 * done, description=description
            )

    def finish(self) -> None:
        """Show the fit as done (it may have stopped before `max_iter`, e.g. early stopping)."""
        if self._artifact is not None:
            update_progress_artifact(artifact_id=self._artifact, progress=100.0)


Bounds = Mapping[str, tuple[float | None, float | None]]
"""Per numeric column, the (low, high) of its imputed values in the frame's units (None: open)."""


@task(name="impute", cache_policy=NO_CACHE)
def impute(
    frame: pd.DataFrame,
    settings: Mapping[str, Any],
    seed: int,
    table: str = "table",
    bounds: Bounds | None = None,
    draws: int = 0,
    fill: Fill = "point",
) -> ImputationOutcome:
    """Fit TDM on the standardised columns (NaN = missing; boolean and categorical columns as
    labels) and fill the missing cells, numeric ones within `bounds` (None: the observed
    range): with each cell's best guess, or with `fill="draw"` one draw; `draws` >= 2 also
    measures what that many draws of each cell show (`tasks.draws`)."""
    _, outcome = _fit(frame, settings, seed, table, bounds, draws, fill)
    return outcome


@task(name="fit-model", cache_policy=NO_CACHE)
def fit_model(
    frame: pd.DataFrame,
    settings: Mapping[str, Any],
    seed: int,
    table: str = "table",
    bounds: Bounds | None = None,
    draws: int = 0,
    fill: Fill = "point",
) -> FittedModel:
    """Fit TDM on a standardised sample of a table, keeping the model for `impute_partition`
    (`draws` and `fill` as for `impute`, for the sample's own imputation)."""
    imputer, outcome = _fit(frame, settings, seed, table, bounds, draws, fill)
    imputer.callback = None  # the model travels to task-runner workers; the Prefect hook stays
    return FittedModel(imputer=imputer, outcome=outcome)


@task(name="impute-partition", cache_policy=NO_CACHE)
def impute_partition(
    imputer: Any,
    frame: pd.DataFrame,
    table: str = "table",
    partition: int = 0,
    draws: int = 0,
    fill: Fill = "point",
    seed: int = 0,
) -> Imputed:
    """Impute one standardised partition with a fitted model (`transform`, not refitted); `draws`
    and `fill` as for `impute`, the draws seeded by `seed` and the partition's number."""
    try:
        filled = _as_frame(imputer.transform(frame), frame)
        return draw_imputation(
            imputer, frame, filled, n_draws=draws, fill=fill, seed=_part_seed(seed, partition)
        )
    except ValueError as error:
        raise PipelineInputError(
            f'Imputing partition {partition} of table "{table}" failed: {error}'
        ) from None


def _part_seed(seed: int, partition: int) -> int:
    """A seed of its own for each partition's draws."""
    return int(np.random.SeedSequence([seed, partition]).generate_state(1)[0])


def _as_frame(filled: Any, frame: pd.DataFrame) -> pd.DataFrame:
    """The imputer's output with `frame`'s index and columns (a DataFrame keeps its dtypes)."""
    if isinstance(filled, pd.DataFrame):
        return filled.set_axis(frame.index, axis=0)[list(frame.columns)]
    return pd.DataFrame(np.asarray(filled, dtype=float), index=frame.index, columns=frame.columns)


def _fit(
    frame: pd.DataFrame,
    settings: Mapping[str, Any],
    seed: int,
    table: str,
    bounds: Bounds | None,
    draws: int = 0,
    fill: Fill = "point",
) -> tuple[Any, ImputationOutcome]:
    from tdm import TDMImputer  # torch is imported on first use, not when the CLI starts

    progress = PrefectProgress(table)
    imputer = TDMImputer(
        **settings,
        **({} if bounds is None else {"bounds": dict(bounds)}),
        standardize=False,  # the standardise task has done it
        random_state=seed,
        callback=progress,
    )
    started = time.perf_counter()
    try:  # the draws refit too
        filled = imputer.fit_transform(frame)
        fit_seconds = time.perf_counter() - started
        if imputer.n_iter_ < imputer.max_iter:
            progress.finish()
        made = _draw(imputer, frame, _as_frame(filled, frame), draws, fill, seed, table)
    except ValueError as error:
        raise PipelineInputError(f'Imputing table "{table}" failed: {error}') from None
    except FloatingPointError as error:  # the fit diverged: its message says where and why
        raise PipelineError(
            f'The fit of table "{table}" diverged, so nothing was written: {error}'
        ) from None
    drew = draws > 0 or fill == "draw"
    draw_seconds = time.perf_counter() - started - fit_seconds if drew else 0.0
    used = {k: v for k, v in imputer.get_params().items() if k not in ("callback", "verbose")}
    used["device"] = str(used["device"])
    # What the fit chose (with init="auto": ICE's or the trees' start, and the probe errors).
    used["start_used"] = imputer.init_
    used["start_scores"] = imputer.start_scores_
    used["fill"], used["draws"] = fill, draws
    losses = np.asarray(imputer.loss_history_, dtype=float)
    outcome = ImputationOutcome(
        frame=made.frame,
        imputer=type(imputer).__name__,
        hyperparameters=used,
        device=str(imputer.device_),
        n_iter=int(imputer.n_iter_),
        final_loss=float(losses[-1]) if losses.size else float("nan"),
        fit_seconds=fit_seconds,
        loss_history=losses,
        cost_ratio_history=np.asarray(imputer.cost_ratio_history_, dtype=float),
        draws=made.draws,
        draw_seconds=draw_seconds,
    )
    return imputer, outcome


def _draw(
    imputer: Any,
    frame: pd.DataFrame,
    filled: pd.DataFrame,
    draws: int,
    fill: Fill,
    seed: int,
    table: str,
) -> Imputed:
    """The fit's imputation as the run writes it, and its draws (`tasks.draws`), said in the
    log first: the draws refit the model to measure its errors, which takes about a fit."""
    if draws >= 2 or fill == "draw":
        made = f"{draws} draws" if draws >= 2 else "one draw"
        step_logger(__name__).info(
            "Drawing %s of the imputed cells of %r: refitting on hidden observed cells to "
            "measure the imputation's errors",
            made,
            table,
        )
    made = draw_imputation(imputer, frame, filled, n_draws=draws, fill=fill, seed=seed)
    if made.unmeasured:
        step_logger(__name__).warning(
            "%s", unmeasured_note(table, "its fitted rows", made.unmeasured)
        )
    return made


def uses_gpu(device: str) -> bool:
    """Whether an imputer asked for `device` will run on a CUDA GPU from this process."""
    if device.startswith("cuda"):
        return True
    if device != "auto":
        return False
    import torch

    return bool(torch.cuda.is_available())


def impute_task_for(settings: Mapping[str, Any], *, gpu: bool | None = None) -> Any:
    """The impute task, tagged `gpu` when it will hold a GPU (`gpu=None`: decide from the device
    setting and this process's CUDA), so that a concurrency limit on the tag applies to GPU runs
    only and CPU runs are never queued behind them."""
    on_gpu = uses_gpu(imputer_device(settings)) if gpu is None else gpu
    return impute.with_options(tags=[GPU_TAG]) if on_gpu else impute
