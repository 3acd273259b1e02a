"""Impute step: fit TDM on the standardised columns, reporting progress to Prefect."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

import numpy as np
import pandas as pd
from prefect import get_run_logger, task
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext
from prefect.exceptions import MissingContextError

from tasks.errors import PipelineInputError
from tasks.params import ImputerParams

if TYPE_CHECKING:
    from tdm import FitProgress

__all__ = ["ImputationOutcome", "PrefectProgress", "impute"]


@dataclass(frozen=True, eq=False)
class ImputationOutcome:
    """The standardised columns with missing cells filled, and how the fit went."""

    frame: pd.DataFrame
    imputer: str
    hyperparameters: dict[str, Any]
    device: str
    n_iter: int
    final_loss: float
    fit_seconds: float


class PrefectProgress:
    """Imputer callback: logs every `every` of the iterations and updates a progress artifact."""

    def __init__(self, table: str, *, every: float = 0.1) -> None:
        self.table = table
        self.every = every
        self._artifact: UUID | None = None
        self._logger: logging.Logger | logging.LoggerAdapter[logging.Logger]
        try:
            self._logger = get_run_logger()
        except MissingContextError:
            self._logger = logging.getLogger(__name__)
        if TaskRunContext.get() is not None:
            artifact = create_progress_artifact(
                progress=0.0, description=f'TDM fit on table "{table}"'
            )
            self._artifact = artifact if isinstance(artifact, UUID) else None

    def __call__(self, progress: FitProgress) -> None:
        """Report every `every` of `max_iter` iterations, and at the last one."""
        step = max(1, math.ceil(progress.max_iter * self.every))
        if progress.iteration % step and progress.iteration != progress.max_iter:
            return
        done = progress.iteration / progress.max_iter
        self._logger.info(
            "TDM fit on %r: %3.0f%% (%d/%d iterations), loss %.4g",
            self.table,
            100 * done,
            progress.iteration,
            progress.max_iter,
            progress.loss,
        )
        if self._artifact is not None:
            update_progress_artifact(artifact_id=self._artifact, progress=100.0 * done)


@task(name="impute", cache_policy=NO_CACHE, tags=["gpu"])
def impute(
    frame: pd.DataFrame, params: ImputerParams, seed: int, table: str = "table"
) -> ImputationOutcome:
    """Fit TDM on the standardised columns (NaN = missing) and fill the missing cells."""
    from tdm import TDMImputer  # torch is imported on first use, not when the CLI starts

    settings = {k: v for k, v in params.model_dump().items() if v is not None}
    imputer = TDMImputer(
        **settings,
        standardize=False,  # the standardise task has done it
        random_state=seed,
        callback=PrefectProgress(table),
    )
    started = time.perf_counter()
    try:
        filled = imputer.fit_transform(frame)
    except ValueError as error:
        raise PipelineInputError(f'Imputing table "{table}" failed: {error}') from None
    fit_seconds = time.perf_counter() - started
    used = {k: v for k, v in imputer.get_params().items() if k not in ("callback", "verbose")}
    used["device"] = str(used["device"])
    losses = np.asarray(imputer.loss_history_, dtype=float)
    return ImputationOutcome(
        frame=pd.DataFrame(
            np.asarray(filled, dtype=float), index=frame.index, columns=frame.columns
        ),
        imputer=type(imputer).__name__,
        hyperparameters=used,
        device=str(imputer.device_),
        n_iter=int(imputer.n_iter_),
        final_loss=float(losses[-1]) if losses.size else float("nan"),
        fit_seconds=fit_seconds,
    )
