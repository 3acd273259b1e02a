"""One benchmark trial of the paper's protocol: mask, impute, score. Pure maths, no orchestration.

A *trial* is one (dataset, mechanism, seed, method) cell of the paper's grid (Zhao et al., 2023,
Section 5): draw a mask with ``p = 0.3`` missing, impute it with the method, and score the
imputation on the masked cells.

- On the paper's numeric tables (:class:`benchmarks.datasets.Dataset`, standardised): MAE and
  RMSE, ``W2²/2`` over the rows with a missing cell (the published "OT" number) and, for
  labelled datasets, the 5-fold accuracy of an RBF SVM on the imputed features.
- On the mixed-type tables (:class:`benchmarks.datasets.MixedDataset`): the imputer gets the
  masked DataFrame (integer columns ``Int64``, labels ``category``); ``mae`` and ``rmse`` are the
  numeric errors in column standard deviations, ``cat_error`` the categorical error rate
  (categorical and boolean cells); W2 and the SVM accuracy are not computed (NaN and ``None``).
  The imputer must return a DataFrame with the same columns, index and dtypes, no missing cell,
  the observed cells unchanged and, in label columns, only labels observed in its input; a
  result that breaks this contract is refused with a ``ValueError`` naming the method and the
  column (:func:`check_imputed_frame`).

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
``k`` steps is bit for bit the longer fit's state at step ``k`` (``tests/benchmarks/test_trial.py``
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
import pandas as pd
from numpy.typing import NDArray

from benchmarks.datasets import Dataset, MixedDataset, apply_mask, simulate_mixed
from benchmarks.registry import get_method
from tdm._optimise import FitProgress
from tdm.metrics import (
    categorical_error_rate,
    mae,
    numeric_mae_sd,
    numeric_rmse_sd,
    rmse,
    svm_accuracy,
    wasserstein2,
)
from tdm.simulate import simulate

__all__ = [
    "LossRecorder",
    "MaeTrace",
    "TrialCell",
    "TrialResult",
    "check_imputed_frame",
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
        Errors on the masked cells: in standardised units on the paper's tables, in column
        standard deviations over the numeric cells on the mixed-type tables.
    w2sq_half : float
        ``W2² / 2`` between the true and imputed rows that had a missing cell (the paper's "OT"
        column; :func:`tdm.metrics.wasserstein2` with ``half=True``); NaN above
        :data:`W2_MAX_ROWS` rows and on the mixed-type tables.
    accuracy : float or None
        Mean 5-fold accuracy of an RBF SVM on the imputed features (classification datasets;
        ``None`` for regression datasets, mixed-type tables or when ``svm_repeats=0``).
    fit_seconds : float
        Wall time of ``fit_transform``.
    n_iter : int or None
        Optimisation steps run (batch-OT methods only).
    loss_trace : tuple of (int, float)
        ``(iteration, mean loss over the last record_every steps)``; empty for other methods.
    cat_error : float or None
        Share of the masked categorical cells imputed with the wrong label (mixed-type tables);
        ``None`` for the paper's tables.
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
    dataset: Dataset | MixedDataset,
    mechanism: str,
    seed: int,
    method: str,
    p: float,
    params: dict[str, Any],
) -> tuple[str, str, int, str, float, dict[str, Any]]:
    """The fields naming a trial, in the order :class:`TrialResult` and :class:`MaeTrace` start
    with: dataset, mechanism, seed, method, p, params."""
    return dataset.name, mechanism, seed, method, p, params


def _masked(
    dataset: Dataset | MixedDataset, mechanism: str, seed: int, p: float
) -> tuple[NDArray[np.bool_], Any]:
    """The seeded mask (``True`` = missing) and what the imputer is given: the standardised
    matrix with NaN, or the DataFrame with its missing cells in every dtype."""
    if isinstance(dataset, MixedDataset):
        mask = simulate_mixed(dataset.frame, mechanism, p, random_state=seed)
        return mask, apply_mask(dataset.frame, mask)
    mask = simulate(dataset.X, mechanism, p, random_state=seed)  # type: ignore[arg-type]
    return mask, np.where(mask, np.nan, dataset.X)


def check_imputed_frame(
    method: str, masked: pd.DataFrame, imputed: Any, mask: NDArray[np.bool_]
) -> pd.DataFrame:
    """Refuse an imputation of a mixed-type table that breaks the contract (module notes).

    Returns ``imputed`` when it holds; otherwise raises ``ValueError`` naming ``method`` and the
    first column at fault.
    """
    if not isinstance(imputed, pd.DataFrame):
        raise ValueError(f"{method}: returned {type(imputed).__name__}, not a DataFrame")
    if list(imputed.columns) != list(masked.columns) or not imputed.index.equals(masked.index):
        raise ValueError(f"{method}: returned other columns or rows than it was given")
    for j, column in enumerate(masked.columns):
        given, got = masked[column], imputed[column]
        if got.dtype != given.dtype:
            raise ValueError(
                f"{method}: column {column!r} came back as {got.dtype}, not {given.dtype}"
            )
        if got.isna().any():
            raise ValueError(f"{method}: column {column!r} still has missing cells")
        observed = ~mask[:, j]
        if not got[observed].equals(given[observed]):
            raise ValueError(f"{method}: column {column!r} changed observed cells")
        if isinstance(given.dtype, pd.CategoricalDtype) or not pd.api.types.is_numeric_dtype(
            given.dtype
        ):
            seen = set(given[observed].astype(object))
            new = set(got[~observed].astype(object)) - seen
            if new:
                labels = sorted(map(str, new))
                raise ValueError(f"{method}: column {column!r} got labels never observed: {labels}")
    return imputed


def _numeric_scores(
    dataset: Dataset,
    imputed: Any,
    mask: NDArray[np.bool_],
    seed: int,
    svm_repeats: int,
) -> dict[str, Any]:
    """MAE, RMSE, W2²/2 and (labelled datasets) the SVM accuracy of an imputed numeric table."""
    X_imputed = np.asarray(imputed, dtype=np.float64)
    accuracy: float | None = None
    if dataset.y is not None and svm_repeats > 0:
        columns = list(dataset.classifier_features) or list(range(dataset.X.shape[1]))
        accuracy = svm_accuracy(
            X_imputed[:, columns], dataset.y, n_repeats=svm_repeats, random_state=seed
        )
    return {
        "mae": mae(dataset.X, X_imputed, mask),
        "rmse": rmse(dataset.X, X_imputed, mask),
        "w2sq_half": wasserstein2(dataset.X, X_imputed, mask, half=True, max_rows=W2_MAX_ROWS),
        "accuracy": accuracy,
    }


def _mixed_scores(
    dataset: MixedDataset, imputed: pd.DataFrame, mask: NDArray[np.bool_]
) -> dict[str, Any]:
    """Numeric MAE and RMSE in column standard deviations and the categorical error rate."""
    return {
        "mae": numeric_mae_sd(dataset.frame, imputed, mask),
        "rmse": numeric_rmse_sd(dataset.frame, imputed, mask),
        "w2sq_half": float("nan"),
        "accuracy": None,
        "cat_error": categorical_error_rate(dataset.frame, imputed, mask),
    }


def run_trial(
    dataset: Dataset | MixedDataset,
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
    dataset : Dataset or MixedDataset
        A complete table (:func:`benchmarks.datasets.load_dataset`, standardised, or
        :func:`benchmarks.datasets.load_mixed_dataset`).
    mechanism : {"mcar", "mar", "mnarl", "mnarq", "mnarq_published"}
        Missing-data mechanism (:func:`tdm.simulate.simulate`; mixed-type tables:
        :func:`benchmarks.datasets.simulate_mixed`, MCAR or MAR).
    seed : int
        Seed of the mask, the imputer and the SVM fold shuffles.
    method : str
        A registered method (:data:`benchmarks.registry.REGISTRY`, benchmark fixtures included);
        for a mixed-type table, one that takes mixed-type DataFrames.
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
        On a mixed-type table with ``cat_error`` set, ``w2sq_half`` NaN and ``accuracy`` None.

    Raises
    ------
    ValueError
        If ``method`` or ``mechanism`` is unknown, a parameter is invalid, or an imputation of a
        mixed-type table breaks the contract.
    """
    spec = get_method(method)
    if isinstance(svm_repeats, bool) or not isinstance(svm_repeats, int) or svm_repeats < 0:
        raise ValueError(f"svm_repeats must be an int >= 0; got {svm_repeats!r}")
    extra = dict(params or {})
    mask, given = _masked(dataset, mechanism, seed, p)

    recorder = LossRecorder(record_every) if spec.batch_ot else None
    extra_fit = {**extra, "callback": recorder} if recorder is not None else extra
    imputer = spec.build(random_state=seed, **extra_fit)
    started = time.perf_counter()
    imputed = imputer.fit_transform(given)
    fit_seconds = time.perf_counter() - started

    if isinstance(dataset, MixedDataset):
        scores = _mixed_scores(dataset, check_imputed_frame(method, given, imputed, mask), mask)
    else:
        scores = _numeric_scores(dataset, imputed, mask, seed, svm_repeats)
    n_iter = getattr(imputer, "n_iter_", None) if spec.batch_ot else None
    return TrialResult(
        *_cell(dataset, mechanism, seed, method, p, extra),
        missing_rate=float(mask.mean()),
        fit_seconds=fit_seconds,
        n_iter=None if n_iter is None else int(n_iter),
        loss_trace=tuple(recorder.trace) if recorder is not None else (),
        **scores,
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
    mask, X_nan = _masked(dataset, mechanism, seed, p)
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
