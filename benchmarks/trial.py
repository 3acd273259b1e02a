"""One trial of the paper's protocol: mask a complete table, impute it with a method, score it.

Numeric tables are scored by MAE, RMSE, ``W2²/2`` and the SVM accuracy; mixed-type tables by the
numeric errors in column standard deviations and the categorical error rate. The mask, the
imputer and the SVM folds are all seeded with the trial's seed.
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
    "check_imputed_array",
    "check_imputed_frame",
    "log_spaced_checkpoints",
    "masked_input",
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

    ``mae`` and ``rmse`` are in standardised units on the numeric tables and in column standard
    deviations on the mixed-type tables, which also set ``cat_error`` (and leave ``w2sq_half``
    NaN, ``accuracy`` None). ``w2sq_half`` is NaN above :data:`W2_MAX_ROWS` rows; ``accuracy``
    is None without labels or SVM repeats; ``n_iter`` and ``loss_trace`` (iteration, window
    mean loss) are set for the batch-OT methods only.
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
    """A short stable hash of the hyperparameters asked for (canonical JSON)."""
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
    """The fields naming a trial, in :class:`TrialCell`'s order."""
    return dataset.name, mechanism, seed, method, p, params


def masked_input(
    dataset: Dataset | MixedDataset, mechanism: str, seed: int, p: float
) -> tuple[NDArray[np.bool_], Any]:
    """The seeded mask (``True`` = missing) and what the imputer is given: the standardised
    matrix with NaN, or the DataFrame with its missing cells in every dtype."""
    if isinstance(dataset, MixedDataset):
        mask = simulate_mixed(dataset.frame, mechanism, p, random_state=seed)
        return mask, apply_mask(dataset.frame, mask)
    mask = simulate(dataset.X, mechanism, p, random_state=seed)  # type: ignore[arg-type]
    return mask, np.where(mask, np.nan, dataset.X)


def check_imputed_array(
    method: str, masked: NDArray[np.float64], imputed: Any, mask: NDArray[np.bool_]
) -> NDArray[np.float64]:
    """``imputed`` as floats if it has the shape of ``masked``, finite cells only and the
    observed cells unchanged bit for bit (else W2 and the SVM accuracy would score altered
    data); else ``ValueError`` naming ``method`` and the first column at fault."""
    values = np.asarray(imputed, dtype=np.float64)
    if values.shape != masked.shape:
        raise ValueError(f"{method}: returned shape {values.shape}, not {masked.shape}")
    for j in range(masked.shape[1]):
        if not np.isfinite(values[:, j]).all():
            raise ValueError(f"{method}: column {j} still has missing or infinite cells")
        observed = ~mask[:, j]
        if not np.array_equal(values[observed, j], masked[observed, j]):
            raise ValueError(f"{method}: column {j} changed observed cells")
    return values


def check_imputed_frame(
    method: str, masked: pd.DataFrame, imputed: Any, mask: NDArray[np.bool_]
) -> pd.DataFrame:
    """``imputed`` if it is a DataFrame with the columns, index and dtypes of ``masked``, no
    missing cell, the observed cells unchanged and only observed labels; else ``ValueError``
    naming ``method`` and the first column at fault."""
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
    """MAE, RMSE, W2²/2 and (:attr:`Dataset.svm_scored` datasets) the SVM accuracy of an
    imputed numeric table."""
    X_imputed = np.asarray(imputed, dtype=np.float64)
    accuracy: float | None = None
    if dataset.y is not None and dataset.svm_scored and svm_repeats > 0:
        columns = list(dataset.classifier_features) or list(range(dataset.X.shape[1]))
        accuracy = svm_accuracy(
            X_imputed[:, columns], dataset.y, n_repeats=svm_repeats, random_state=seed
        )
    compared = int(np.asarray(mask, dtype=bool).any(axis=1).sum())  # rows with a missing cell
    return {
        "mae": mae(dataset.X, X_imputed, mask),
        "rmse": rmse(dataset.X, X_imputed, mask),
        "w2sq_half": (  # NaN above the limit, by design: no warning in every large trial
            wasserstein2(dataset.X, X_imputed, mask, half=True, max_rows=None)
            if compared <= W2_MAX_ROWS
            else float("nan")
        ),
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
        A complete table.
    mechanism : str
        Missing-data mechanism (mixed-type tables: ``"mcar"`` or ``"mar"``).
    seed : int
        Seed of the mask, the imputer and the SVM fold shuffles.
    method : str
        A registered method, fixtures included.
    p : float, default=0.3
        Missing rate.
    params : mapping or None, default=None
        Hyperparameters of the method on top of its own.
    svm_repeats : int, default=3
        Repeats of the shuffled 5-fold SVM cross-validation; 0 skips the accuracy.
    record_every : int, default=100
        Window of the batch-OT methods' loss trace, in steps.

    Returns
    -------
    TrialResult

    Raises
    ------
    ValueError
        If ``method`` or ``mechanism`` is unknown, a parameter is invalid, or an imputation of a
        mixed-type table breaks the contract of :func:`check_imputed_frame`.
    """
    spec = get_method(method)
    if isinstance(svm_repeats, bool) or not isinstance(svm_repeats, int) or svm_repeats < 0:
        raise ValueError(f"svm_repeats must be an int >= 0; got {svm_repeats!r}")
    extra = dict(params or {})
    mask, given = masked_input(dataset, mechanism, seed, p)

    recorder = LossRecorder(record_every) if spec.batch_ot else None
    extra_fit = {**extra, "callback": recorder} if recorder is not None else extra
    imputer = spec.build(random_state=seed, **extra_fit)
    started = time.perf_counter()
    imputed = imputer.fit_transform(given)
    fit_seconds = time.perf_counter() - started

    if isinstance(dataset, MixedDataset):
        scores = _mixed_scores(dataset, check_imputed_frame(method, given, imputed, mask), mask)
    else:
        checked = check_imputed_array(method, given, imputed, mask)
        scores = _numeric_scores(dataset, checked, mask, seed, svm_repeats)
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
    """MAE after ``k`` optimisation steps for every ``k`` in ``checkpoints``, one refit each.

    A fit stopped at ``k`` steps with the same seed is the longer fit's state at step ``k``;
    ``k = 0`` scores the start. ``method`` must be batch-OT and ``params`` must not hold
    ``max_iter``; the other arguments are as in :func:`run_trial`.
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
    mask, X_nan = masked_input(dataset, mechanism, seed, p)
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
