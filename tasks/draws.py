"""Draws in a run: what the target receives (the point imputation or one draw), and what the
draws of each imputed cell show, for `tdm_imputed_cells`.

The draws are the library's (`TDMImputer.sample`), made on the rows the run imputes, in the
imputer's units; `tasks.scaling.inverse_scale_draws` maps them back to the data's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import numpy as np
import pandas as pd

from tasks.frames import holds_numbers
from tasks.results import CellDraws, Imputed

__all__ = [
    "FILLS",
    "HIGH_QUANTILE",
    "LOW_QUANTILE",
    "Fill",
    "draw_imputation",
    "summarise_draws",
    "unmeasured_note",
]

Fill = Literal["point", "draw"]
"""What a run writes into the missing cells: each cell's best guess, or one draw of the table."""
FILLS: tuple[Fill, ...] = ("point", "draw")

LOW_QUANTILE, HIGH_QUANTILE = 0.05, 0.95
"""The quantiles of a numeric cell's draws kept as its `low` and `high`: a central 90% interval."""


def draw_imputation(
    imputer: Any, frame: pd.DataFrame, filled: pd.DataFrame, *, n_draws: int, fill: Fill, seed: int
) -> Imputed:
    """`frame`'s rows as the run writes them: `filled` (the point imputation) or, with
    `fill="draw"`, a draw; and, with `n_draws` >= 2, what `n_draws` draws of each imputed cell
    show (other than the one written: an interval holds a written draw as often as a new one,
    and a label's share is that of the others). `imputer` is fitted; `frame` is the data it was
    fitted on or new rows; `seed` seeds the draws."""
    if n_draws < 2 and fill == "point":
        return Imputed(filled)
    drawn = (n_draws if n_draws >= 2 else 0) + (fill == "draw")
    completions = imputer.sample(frame, n_draws=drawn, random_state=seed)
    completions = [c.set_axis(frame.index, axis=0)[list(frame.columns)] for c in completions]
    written = completions[0] if fill == "draw" else filled
    if fill == "draw" and n_draws >= 2:  # the others measure it
        completions = completions[1:]
    unmeasured = _unmeasured(frame.isna(), filled, completions)
    if n_draws < 2:
        return Imputed(written, unmeasured=unmeasured)
    draws = summarise_draws(completions, written, frame.isna())
    for name in unmeasured:
        draws.low[name] = draws.high[name] = np.nan
    return Imputed(written, draws, unmeasured)


def _unmeasured(
    missing: pd.DataFrame, filled: pd.DataFrame, completions: list[pd.DataFrame]
) -> tuple[str, ...]:
    """The numeric columns whose draws do not vary (every draw of each imputed cell the same;
    one draw: the point imputation): the imputer measured no error of theirs, or one residual
    (too few of their cells among these rows are observed to hide some and impute them
    again), so they have no interval."""
    found = []
    for name in missing.columns:
        cells = missing[name].to_numpy()
        if not cells.any() or not holds_numbers(filled[name]):
            continue
        drawn = [c[name].to_numpy(dtype=np.float64)[cells] for c in completions]
        same = drawn[0] if len(drawn) > 1 else filled[name].to_numpy(dtype=np.float64)[cells]
        if all(np.array_equal(values, same) for values in drawn):
            found.append(name)
    return tuple(found)


def unmeasured_note(table: str, where: str, columns: Iterable[str], advice: str = "") -> str:
    """The warning naming the `columns` of `table` whose error the rows `where` ("partitions
    1, 2 of 20") could not measure (`Imputed.unmeasured`), then `advice`."""
    names = ", ".join(f'"{name}"' for name in columns)
    return (
        f'Table "{table}", {where}: the imputation\'s error of {names} could not be measured '
        "(too few of their cells are observed there, or those observed are all alike, for "
        "hiding some and imputing them again to show an error): "
        "their imputed cells' draws are their best guess, with no interval (low and high NULL "
        f"in tdm_imputed_cells). {advice}"
    ).rstrip()


def summarise_draws(
    completions: list[pd.DataFrame], written: pd.DataFrame, missing: pd.DataFrame
) -> CellDraws:
    """Per imputed cell of a numeric column, the 5% and 95% quantiles of its draws (Weibull's
    plotting positions, k / (n + 1): unbiased for any distribution); per imputed cell of a
    labelled column, the share of the draws that agree with the label `written` for it."""
    numeric = [name for name in written.columns if holds_numbers(written[name])]
    labelled = [name for name in written.columns if name not in numeric]
    low = pd.DataFrame(index=written.index, columns=numeric, dtype=float)
    high = low.copy()
    if numeric:
        stack = np.stack([c[numeric].to_numpy(dtype=np.float64) for c in completions])
        ends = np.quantile(stack, [LOW_QUANTILE, HIGH_QUANTILE], axis=0, method="weibull")
        hidden = ~missing[numeric].to_numpy()
        low[:] = np.where(hidden, np.nan, ends[0])
        high[:] = np.where(hidden, np.nan, ends[1])
    probability = pd.DataFrame(index=written.index, columns=labelled, dtype=float)
    for name in labelled:
        label = _labels(written[name])
        agree = np.mean([_labels(c[name]) == label for c in completions], axis=0)
        probability[name] = np.where(missing[name].to_numpy(), agree, np.nan)
    return CellDraws(low, high, probability, n_draws=len(completions))


def _labels(column: pd.Series) -> np.ndarray:
    """A labelled column as text, missing labels as "" (only imputed cells are compared)."""
    return column.astype(object).where(column.notna(), "").astype(str).to_numpy()
