"""One benchmark trial of the paper's protocol: mask, impute, score. Pure maths, no orchestration.

A *trial* is one (dataset, mechanism, seed, method) cell of the paper's grid (Zhao et al., 2023,
Section 5): draw a mask with ``p = 0.3`` missing on the standardised data, impute it with the
method, and score the imputation on the masked cells (MAE, RMSE), over the rows with a missing
cell (W2²/2, the published "OT" number) and, for labelled datasets, by the 5-fold accuracy of an
RBF SVM on the imputed features.

Seeds: the mask is drawn with ``random_state=seed`` and the imputer gets ``random_state=seed`` as
well; the SVM's fold shuffles use ``seed`` too. No global random state is read or written.

Iteration traces
----------------
For the batch-OT methods (:attr:`benchmarks.registry.Method.batch_ot`) :func:`run_trial` records
the *loss* trace through the imputer's ``callback``: the mean transport loss over each window of
``record_every`` steps. The callback sees only the step's loss, not the current imputation, so
MAE cannot be recorded during the fit without reaching into private state. :func:`trace_mae`
computes the MAE trace instead by refitting with ``max_iter = k`` for each checkpoint ``k``. With a
fixed ``random_state`` the imputers draw their initialisation and batches from one seeded stream
whose first ``k`` draws do not depend on ``max_iter``, so within one process a fit stopped at
``k`` steps is bit for bit the longer fit's state at step ``k`` (``tests/tdm/test_trial.py``
checks the loss histories agree; a fresh process with the same library reproduces it too). The
trace costs the sum of the checkpoints, so it is run for one dataset and seed at a time.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from benchmarks.datasets import Dataset
from benchmarks.registry import get_method
from tdm._optimise import FitProgress
from tdm.metrics import mae, rmse, svm_accuracy, wasserstein2
from tdm.simulate import simulate

__all__ = [
    "LossRecorder",
    "MaeTrace",
    "TrialCell",
    "TrialResult",
    "log_spaced_checkpoints",
    "params_hash",
    "run_trial",
    "trace_mae",
]

#: Largest number of rows with a missing cell for which W2 is computed (else NaN).
W2_MAX_ROWS = 5000


@dataclass(frozen=True)
class TrialCell:
    """The trial a result belongs to: the grid cell, the missing rate and the overrides."""

    dataset: str
    mechanism: str
    seed: int
    method: str
    p: float
    params: dict[str, Any]


@dataclass(frozen=True)
class TrialResult(TrialCell):
    """What one trial measured.

    Attributes
    ----------
    dataset, mechanism, method : str
        The grid cell.
    seed : int
        Seed of the mask, the imputer and the SVM folds.
    p : float
        Requested missing rate.
    params : dict
        Hyperparameters passed to the method's factory on top of its own settings.
    missing_rate : float
        Share of cells actually masked.
    mae, rmse : float
        Errors on the masked cells (standardised units).
    w2sq_half : float
        ``W2² / 2`` between the true and imputed rows that had a missing cell (the paper's "OT"
        column; :func:`tdm.metrics.wasserstein2` with ``half=True``); NaN above
        :data:`W2_MAX_ROWS` rows.
    accuracy : float or None
        Mean 5-fold accuracy of an RBF SVM on the imputed features (classification datasets;
        ``None`` for regression datasets or when ``svm_repeats=0``).
    fit_seconds : float
        Wall time of ``fit_transform``.
    n_iter : int or None
        Optimisation steps run (batch-OT methods only).
    loss_trace : tuple of (int, float)
        ``(iteration, mean loss over the last record_every steps)``; empty for other methods.
    cat_error : float or None
        Share of the masked categorical cells imputed with the wrong label (mixed-type tables,
        :func:`benchmarks.mixed_trial.run_mixed_trial`, where ``mae`` and ``rmse`` are in column
        standard deviations over the numeric cells); ``None`` for the paper's datasets.
    """

    missing_rate: float
    mae: float
    rmse: float
    w2sq_half: float
    accuracy: float | None
    fit_seconds: float
    n_iter: int | None
    loss_trace: tuple[tuple[int, float], ...] = field(default=())
    cat_error: float | None = None


@dataclass(frozen=True)
class MaeTrace(TrialCell):
    """MAE on the masked cells after each checkpoint's number of steps (see :func:`trace_mae`)."""

    iterations: tuple[int, ...]
    mae: tuple[float, ...]


class LossRecorder:
    """Imputer callback keeping the mean loss of every window of ``every`` fit steps."""

    def __init__(self, every: int) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"record_every must be an int >= 1; got {every!r}")
        self.every = every
        self.trace: list[tuple[int, float]] = []
        self._total = 0.0
        self._count = 0

    def __call__(self, progress: FitProgress) -> None:
        """Add this step's loss; close the window every ``every`` steps and at the last step."""
        if progress.stage != "fit":
            return
        self._total += progress.loss
        self._count += 1
        if progress.iteration % self.every == 0 or progress.iteration == progress.max_iter:
            self.trace.append((progress.iteration, self._total / self._count))
            self._total, self._count = 0.0, 0


def params_hash(params: Mapping[str, Any] | None) -> str:
    """A short stable hash of the hyperparameters asked for (canonical JSON).

    A trial is keyed on its method, the hash of its explicit overrides and the library version:
    what was asked for, not every effective setting, so that adding a hyperparameter does not
    orphan stored results, while a new library version runs its trials anew.
    """
    canonical = json.dumps(dict(params or {}), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _cell(
    dataset: Dataset, mechanism: str, seed: int, method: str, p: float, params: dict[str, Any]
) -> tuple[str, str, int, str, float, dict[str, Any]]:
    """The fields naming a trial, in the order :class:`TrialResult` and :class:`MaeTrace` start
    with: dataset, mechanism, seed, method, p, params."""
    return dataset.name, mechanism, seed, method, p, params


def _mask(dataset: Dataset, mechanism: str, seed: int, p: float) -> NDArray[np.bool_]:
    return simulate(dataset.X, mechanism, p, random_state=seed)  # type: ignore[arg-type]


def run_trial(
    dataset: Dataset,
    mechanism: str,
    seed: int,
    method: str,
    *,
    p: float = 0.3,
    params: Mapping[str, Any] | None = None,
    svm_repeats: int = 3,
    record_every: int = 100,
) -> TrialResult:
    """Mask ``dataset`` with ``mechanism``, impute it with ``method`` and score the imputation.

    Parameters
    ----------
    dataset : Dataset
        Standardised complete data (:func:`benchmarks.datasets.load_dataset`).
    mechanism : {"mcar", "mar", "mnarl", "mnarq", "mnarq_published"}
        Missing-data mechanism (:func:`tdm.simulate.simulate`).
    seed : int
        Seed of the mask, the imputer and the SVM fold shuffles.
    method : str
        A registered method (:data:`benchmarks.registry.REGISTRY`, benchmark fixtures included).
    p : float, default=0.3
        Missing rate (paper: 30%).
    params : mapping or None, default=None
        Extra hyperparameters of the method (e.g. ``{"max_iter": 20}``).
    svm_repeats : int, default=3
        Repeats of the shuffled 5-fold SVM cross-validation (paper: 10); 0 skips accuracy.
    record_every : int, default=100
        Window of the loss trace of the batch-OT methods, in steps.

    Returns
    -------
    TrialResult

    Raises
    ------
    ValueError
        If ``method`` or ``mechanism`` is unknown, or a parameter is invalid.
    """
    spec = get_method(method)
    if isinstance(svm_repeats, bool) or not isinstance(svm_repeats, int) or svm_repeats < 0:
        raise ValueError(f"svm_repeats must be an int >= 0; got {svm_repeats!r}")
    extra = dict(params or {})
    mask = _mask(dataset, mechanism, seed, p)
    X_nan = np.where(mask, np.nan, dataset.X)

    recorder = LossRecorder(record_every) if spec.batch_ot else None
    extra_fit = {**extra, "callback": recorder} if recorder is not None else extra
    imputer = spec.build(random_state=seed, **extra_fit)
    started = time.perf_counter()
    X_imputed = np.asarray(imputer.fit_transform(X_nan), dtype=np.float64)
    fit_seconds = time.perf_counter() - started

    accuracy: float | None = None
    if dataset.y is not None and svm_repeats > 0:
        columns = list(dataset.classifier_features) or list(range(dataset.X.shape[1]))
        accuracy = svm_accuracy(
            X_imputed[:, columns], dataset.y, n_repeats=svm_repeats, random_state=seed
        )
    n_iter = getattr(imputer, "n_iter_", None) if spec.batch_ot else None
    return TrialResult(
        *_cell(dataset, mechanism, seed, method, p, extra),
        missing_rate=float(mask.mean()),
        mae=mae(dataset.X, X_imputed, mask),
        rmse=rmse(dataset.X, X_imputed, mask),
        w2sq_half=wasserstein2(dataset.X, X_imputed, mask, half=True, max_rows=W2_MAX_ROWS),
        accuracy=accuracy,
        fit_seconds=fit_seconds,
        n_iter=None if n_iter is None else int(n_iter),
        loss_trace=tuple(recorder.trace) if recorder is not None else (),
    )


def trace_mae(
    dataset: Dataset,
    mechanism: str,
    seed: int,
    method: str,
    checkpoints: Sequence[int],
    *,
    p: float = 0.3,
    params: Mapping[str, Any] | None = None,
) -> MaeTrace:
    """MAE after ``k`` optimisation steps, for every ``k`` in ``checkpoints``, by refitting.

    Each checkpoint is a fresh fit with ``max_iter=k`` and the same seed, which equals the state
    of one long fit after ``k`` steps (see the module notes); ``k = 0`` scores the
    initialisation (column means plus noise). Cost: the sum of the checkpoints in steps.

    Parameters
    ----------
    dataset, mechanism, seed, p, params
        As in :func:`run_trial` (``params`` must not hold ``max_iter``).
    method : str
        A batch-OT method (:attr:`benchmarks.registry.Method.batch_ot`).
    checkpoints : sequence of int
        Step counts, each ``>= 0``; sorted and deduplicated.

    Returns
    -------
    MaeTrace
    """
    spec = get_method(method)
    if not spec.batch_ot:
        raise ValueError(f"trace_mae needs a batch-OT method; got {method!r}")
    extra = dict(params or {})
    if "max_iter" in extra:
        raise ValueError("trace_mae sets max_iter itself (the checkpoints); drop it from params")
    steps = sorted({int(k) for k in checkpoints})
    if not steps or steps[0] < 0:
        raise ValueError(f"checkpoints must be non-empty step counts >= 0; got {checkpoints!r}")
    mask = _mask(dataset, mechanism, seed, p)
    X_nan = np.where(mask, np.nan, dataset.X)
    errors: list[float] = []
    for k in steps:
        imputer = spec.build(random_state=seed, **{**extra, "max_iter": k})
        errors.append(mae(dataset.X, np.asarray(imputer.fit_transform(X_nan)), mask))
    return MaeTrace(
        *_cell(dataset, mechanism, seed, method, p, extra),
        iterations=tuple(steps),
        mae=tuple(errors),
    )


def log_spaced_checkpoints(max_iter: int, n: int = 8) -> tuple[int, ...]:
    """``0`` and about ``n`` roughly log-spaced step counts up to ``max_iter`` (inclusive)."""
    if max_iter < 1:
        return (0,)
    points = {0, max_iter}
    for i in range(n):
        points.add(round(10 ** (math.log10(max_iter) * (i + 1) / n)))
    return tuple(sorted(k for k in points if k <= max_iter))
