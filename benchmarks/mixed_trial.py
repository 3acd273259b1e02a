"""One trial of the mixed-type benchmark: mask a mixed table, impute the DataFrame, score it.

The mixed-type counterpart of :func:`benchmarks.trial.run_trial`, returning the same
:class:`~benchmarks.trial.TrialResult`: ``mae`` and ``rmse`` are the numeric errors in column
standard deviations (:func:`tdm.metrics.numeric_mae_sd`), ``cat_error`` the categorical
error rate (categorical and boolean cells); W2 and the SVM accuracy are not computed (NaN and
``None``).

The imputer gets the masked DataFrame (integer columns ``Int64``, labels ``category``) and must
return a DataFrame with the same columns, index and dtypes, no missing cell, the observed cells
unchanged and, in label columns, only labels observed in its input; a result that breaks this
contract is refused with a ``ValueError`` naming the method and the column.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from benchmarks.mixed_data import MixedDataset, apply_mask, simulate_mixed
from benchmarks.registry import get_method
from benchmarks.trial import LossRecorder, TrialResult
from tdm.metrics import categorical_error_rate, numeric_mae_sd, numeric_rmse_sd

__all__ = ["check_imputed_frame", "run_mixed_trial"]


def check_imputed_frame(
    method: str, masked: pd.DataFrame, imputed: Any, mask: NDArray[np.bool_]
) -> pd.DataFrame:
    """Refuse an imputation that breaks the mixed-type contract (see the module notes).

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


def run_mixed_trial(
    dataset: MixedDataset,
    mechanism: str,
    seed: int,
    method: str,
    *,
    p: float = 0.3,
    params: Mapping[str, Any] | None = None,
    record_every: int = 100,
) -> TrialResult:
    """Mask ``dataset`` with ``mechanism``, impute it with ``method`` and score the imputation.

    Parameters
    ----------
    dataset : MixedDataset
        A complete mixed-type table (:func:`benchmarks.mixed_data.load_mixed_dataset`).
    mechanism : {"mcar", "mar"}
        :func:`benchmarks.mixed_data.simulate_mixed`.
    seed : int
        Seed of the mask and of the imputer.
    method : str
        A registered method that takes mixed-type DataFrames.
    p : float, default=0.3
        Missing rate over the whole table.
    params : mapping or None, default=None
        Extra hyperparameters of the method.
    record_every : int, default=100
        Window of the loss trace of the batch-OT methods, in steps.

    Returns
    -------
    TrialResult
        With ``cat_error`` set; ``w2sq_half`` NaN and ``accuracy`` ``None``.
    """
    spec = get_method(method)
    extra = dict(params or {})
    mask = simulate_mixed(dataset.frame, mechanism, p, random_state=seed)
    masked = apply_mask(dataset.frame, mask)
    recorder = LossRecorder(record_every) if spec.batch_ot else None
    extra_fit = {**extra, "callback": recorder} if recorder is not None else extra
    imputer = spec.build(random_state=seed, **extra_fit)
    started = time.perf_counter()
    imputed = imputer.fit_transform(masked)
    fit_seconds = time.perf_counter() - started
    imputed = check_imputed_frame(method, masked, imputed, mask)
    n_iter = getattr(imputer, "n_iter_", None) if spec.batch_ot else None
    return TrialResult(
        dataset.name,
        mechanism,
        seed,
        method,
        p,
        extra,
        missing_rate=float(mask.mean()),
        mae=numeric_mae_sd(dataset.frame, imputed, mask),
        rmse=numeric_rmse_sd(dataset.frame, imputed, mask),
        w2sq_half=float("nan"),
        accuracy=None,
        fit_seconds=fit_seconds,
        n_iter=None if n_iter is None else int(n_iter),
        loss_trace=tuple(recorder.trace) if recorder is not None else (),
        cat_error=categorical_error_rate(dataset.frame, imputed, mask),
    )
