"""Standardise and inverse-scale steps: per-column centring and scaling around the imputer.

The means and scales are `tdm.scaling`'s, the ones the imputers standardise with themselves.
Numeric columns are scaled; boolean and categorical columns go to the imputer as labels
("boolean" dtype, or object labels), which it encodes itself. On the way back, integer columns
are rounded and every numeric column is held within its bounds (`tasks.bounds`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.errors import PipelineInputError, setting
from tasks.frames import as_float_frame, as_labels
from tasks.logs import step_logger
from tasks.results import CellDraws
from tasks.warehouse.tables import BOOLEAN, FLOAT, INTEGER

if TYPE_CHECKING:
    from tdm.scaling import ColumnScaling

__all__ = [
    "BOUNDS_TOLERANCE",
    "Scaling",
    "Standardised",
    "apply_scaling",
    "inverse_scale",
    "inverse_scale_draws",
    "standardise",
]

BOUNDS_TOLERANCE = 1e-6
"""How far outside its bounds (relative to the column's scale and the bound's distance from
its mean) an imputed value may come back and still be taken as on the bound: the imputer works
in single precision and standardised units. A value further out is left as it is, and the
quality checks refuse it."""


@dataclass(frozen=True, eq=False)
class Scaling:
    """The scaled (numeric) columns and, in the same order, their mean and scale; and how the
    imputer's frame is mapped back: its columns in order (`order`; empty: `columns`), each
    column's kind (missing: "float"), and each numeric column's bounds in the data's units."""

    columns: tuple[str, ...]
    statistics: ColumnScaling
    order: tuple[str, ...] = ()
    kinds: Mapping[str, str] = field(default_factory=dict)
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def all_columns(self) -> tuple[str, ...]:
        """Every column of the imputer's frame, numeric and labelled, in order."""
        return self.order or self.columns


@dataclass(frozen=True, eq=False)
class Standardised:
    """The chosen columns as the imputer takes them (numeric ones standardised, NaN = missing;
    the others as labels), the scaling that undoes it, and each numeric column's bounds in
    standardised units (None: open), for the imputer's `bounds`."""

    frame: pd.DataFrame
    scaling: Scaling
    bounds: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)


@task(name="standardise", cache_policy=NO_CACHE)
def standardise(
    frame: pd.DataFrame,
    columns: Sequence[str],
    moments: tuple[np.ndarray, np.ndarray] | None = None,
    *,
    kinds: Mapping[str, str] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    table: str,
) -> Standardised:
    """Centre and scale each numeric column by the mean and std of its observed values, or by
    `moments` (mean, std per numeric column) where given: a whole table's, when `frame` is a
    sample. `kinds` (None: from the dtypes, `tdm.columns.column_kinds`) tells numeric columns
    from labelled ones; `bounds` (None: each numeric column's observed [min, max]) are in the
    data's units. `table` names the table in errors."""
    # imported here: `tdm --help` needs no torch
    from tdm.columns import column_kinds
    from tdm.scaling import ColumnScaling, fit_column_scaling

    kinds = dict(kinds) if kinds is not None else column_kinds(frame[list(columns)])
    numeric = [name for name in columns if kinds.get(name, FLOAT) in (FLOAT, INTEGER)]
    values = as_float_frame(frame, numeric)
    _warn_far_values(values, table)
    if moments is None:
        statistics = fit_column_scaling(values.to_numpy())
    else:
        statistics = ColumnScaling(mean=moments[0], scale=moments[1])
    if bounds is None:
        bounds = {name: (float(values[name].min()), float(values[name].max())) for name in numeric}
    scaling = Scaling(
        columns=tuple(numeric),
        statistics=statistics,
        order=tuple(columns),
        kinds=kinds,
        bounds={name: bounds[name] for name in numeric},
    )
    return Standardised(
        frame=apply_scaling(frame, scaling, table=table),
        scaling=scaling,
        bounds=_standardised(scaling),
    )


def _warn_far_values(values: pd.DataFrame, table: str) -> None:
    """Log a warning for each column with a few values far beyond all the others
    (`tdm.scaling.far_values`), naming them: likely codes for "unknown"."""
    from tdm.scaling import FAR_RATIO, far_values

    for name in values.columns:
        far = far_values(values[name].dropna().to_numpy())
        if far.size:
            shown = ", ".join(f"{v:.10g}" for v in np.unique(far)[:3])
            step_logger(__name__).warning(
                'Table "%s": column "%s" has %d observed value(s) (%s) over %s times farther '
                "from its median than any other; if they are codes (for unknown, say), replace "
                "them with NULL: they set the column's scale, so its imputed cells may land "
                "between them and the rest.",
                table, name, far.size, shown, f"{FAR_RATIO:,.0f}",
            )  # fmt: skip


def _standardised(scaling: Scaling) -> dict[str, tuple[float | None, float | None]]:
    """Each numeric column's bounds in standardised units; an infinite end is open (None)."""
    result = {}
    mean, scale = scaling.statistics.mean, scaling.statistics.scale
    for j, name in enumerate(scaling.columns):
        low, high = ((b - mean[j]) / scale[j] for b in scaling.bounds[name])
        result[name] = (
            float(low) if math.isfinite(low) else None,
            float(high) if math.isfinite(high) else None,
        )
    return result


@task(name="inverse-scale", cache_policy=NO_CACHE)
def inverse_scale(imputed: pd.DataFrame, scaling: Scaling, original: pd.DataFrame) -> pd.DataFrame:
    """Map imputed cells back to the original units; observed cells are taken from `original`.

    Taking observed cells from the source, rather than un-scaling them, keeps them bit-identical.
    Integer columns are rounded to the nearest integer; a value within `BOUNDS_TOLERANCE` of its
    bounds is set on them. Labelled columns keep the imputer's labels in their missing cells.
    """
    source = as_float_frame(original, scaling.columns)
    restored = _restore(imputed[list(scaling.columns)].to_numpy(dtype=np.float64), scaling)
    values = np.where(source.isna().to_numpy(), restored, source.to_numpy())
    numbers = pd.DataFrame(values, index=source.index, columns=list(scaling.columns))
    result = {}
    for name in scaling.all_columns:
        if name in numbers:
            result[name] = numbers[name]
            continue
        boolean = scaling.kinds.get(name) == BOOLEAN
        given = as_labels(original[name], boolean=boolean)
        filled = as_labels(imputed[name].set_axis(given.index), boolean=boolean)
        result[name] = given.where(given.notna(), filled)
    return pd.DataFrame(result, index=source.index)


def inverse_scale_draws(draws: CellDraws, scaling: Scaling) -> CellDraws:
    """What the draws show, in the data's units: `low` and `high` mapped back as imputed
    values are (rounded for integer columns, set on a bound within the tolerance); the label
    probabilities as they are."""
    ends = {
        name: pd.DataFrame(
            _restore(getattr(draws, name)[list(scaling.columns)].to_numpy(np.float64), scaling),
            index=draws.low.index,
            columns=list(scaling.columns),
        )
        for name in ("low", "high")
    }
    return replace(draws, **ends)


def _restore(values: np.ndarray, scaling: Scaling) -> np.ndarray:
    """Standardised values of the numeric columns (`scaling.columns`, in order) in the data's
    units, each column held within its bounds and integer columns rounded (`_within_bounds`)."""
    statistics = scaling.statistics
    restored = values * statistics.scale + statistics.mean
    for j, name in enumerate(scaling.columns):
        restored[:, j] = _within_bounds(
            restored[:, j],
            scaling.bounds.get(name, (-math.inf, math.inf)),
            float(statistics.mean[j]),
            float(statistics.scale[j]),
            integer=scaling.kinds.get(name) == INTEGER,
        )
    return restored


def _within_bounds(
    values: np.ndarray, bounds: tuple[float, float], mean: float, scale: float, *, integer: bool
) -> np.ndarray:
    """`values` set on the nearest bound where no further out than the tolerance, then, for an
    integer column, rounded to the nearest integer within the bounds (ceil of the low end,
    floor of the high end). Values further out are left out of bounds, for the checks."""
    low, high = bounds
    result = values.copy()
    for end, below in ((low, True), (high, False)):
        if math.isfinite(end):
            tolerance = BOUNDS_TOLERANCE * (scale + abs(end - mean))
            out = (result < end) if below else (result > end)
            result[out & (np.abs(result - end) <= tolerance)] = end
    if integer:
        inside = (result >= low) & (result <= high)
        result = np.round(result)
        edges = (
            math.ceil(low) if math.isfinite(low) else low,
            math.floor(high) if math.isfinite(high) else high,
        )
        result[inside] = np.clip(result[inside], *edges)
    return result


def apply_scaling(
    frame: pd.DataFrame, scaling: Scaling, *, table: str, new_rows: bool = False
) -> pd.DataFrame:
    """The columns of `frame` as the imputer takes them, scaled with a scaling fitted elsewhere
    (e.g. on a sample): numeric ones standardised, labelled ones as labels. Refused, naming
    `table`, the column and the row (its rowid where `frame` is indexed by rowid): a value too
    far from its column's mean to standardise in float64, and for `new_rows` (rows a stored
    model's scaling was not fitted on) one more than `tdm.scaling.MAX_STANDARDISED` standard
    deviations from it."""
    # imported here: `tdm --help` needs no torch
    from tdm.scaling import MAX_STANDARDISED, first_too_far

    values = as_float_frame(frame, scaling.columns)
    mean, scale = scaling.statistics.mean, scaling.statistics.scale
    with np.errstate(over="ignore"):
        scaled = (values - mean) / scale
    found = first_too_far(scaled.to_numpy(), MAX_STANDARDISED if new_rows else np.inf)
    if found is not None:
        row, j = found
        name, z = scaling.columns[j], float(scaled.iloc[row, j])
        where = f"rowid {frame.index[row]}" if frame.index.name == "rowid" else f"0-based row {row}"
        value = f"{values.iloc[row, j]:.6g} ({where})"
        held = f'Table "{table}" cannot be imputed: column "{name}" holds {value}'
        moments = f"mean {mean[j]:.6g}, standard deviation {scale[j]:.6g}"
        if math.isinf(z):
            raise PipelineInputError(
                f"{held}, too far from the column's mean to standardise in float64 ({moments}): "
                "if such values are codes (for unknown, say), replace them with NULL; "
                "otherwise store the column in larger units"
            )
        raise PipelineInputError(
            f"{held}, {abs(z):.3g} standard deviations from the mean of the values its model "
            f"was fitted on ({moments}): too far to impute with that model; refit it "
            f"({setting('refit')}), or replace such values with NULL if they are codes"
        )
    return pd.DataFrame(
        {
            name: scaled[name]
            if name in scaled
            else as_labels(frame[name], boolean=scaling.kinds.get(name) == BOOLEAN)
            for name in scaling.all_columns
        },
        index=frame.index,
    )
