"""Standardise and inverse-scale steps: per-column centring and scaling around the imputer.

The means and scales are `tdm.scaling`'s, the ones the imputers standardise with themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.frames import as_float_frame

if TYPE_CHECKING:
    from tdm.scaling import ColumnScaling

__all__ = ["Scaling", "Standardised", "apply_scaling", "inverse_scale", "standardise"]


@dataclass(frozen=True, eq=False)
class Scaling:
    """The scaled columns and, in the same order, their mean and scale."""

    columns: tuple[str, ...]
    statistics: ColumnScaling


@dataclass(frozen=True, eq=False)
class Standardised:
    """The chosen columns standardised (NaN = missing), and the scaling that undoes it."""

    frame: pd.DataFrame
    scaling: Scaling


@task(name="standardise", cache_policy=NO_CACHE)
def standardise(
    frame: pd.DataFrame,
    columns: Sequence[str],
    moments: tuple[np.ndarray, np.ndarray] | None = None,
) -> Standardised:
    """Centre and scale each chosen column by the mean and std of its observed values, or by
    `moments` (mean, std per column) where given: a whole table's, when `frame` is a sample."""
    # imported here: `tdm --help` needs no torch
    from tdm.scaling import ColumnScaling, fit_column_scaling

    if moments is None:
        statistics = fit_column_scaling(as_float_frame(frame, columns).to_numpy())
    else:
        statistics = ColumnScaling(mean=moments[0], scale=moments[1])
    scaling = Scaling(columns=tuple(columns), statistics=statistics)
    return Standardised(frame=apply_scaling(frame, scaling), scaling=scaling)


@task(name="inverse-scale", cache_policy=NO_CACHE)
def inverse_scale(imputed: pd.DataFrame, scaling: Scaling, original: pd.DataFrame) -> pd.DataFrame:
    """Map imputed cells back to the original units; observed cells are taken from `original`.

    Taking observed cells from the source, rather than un-scaling them, keeps them bit-identical.
    """
    source = as_float_frame(original, scaling.columns)
    statistics = scaling.statistics
    restored = imputed[list(scaling.columns)].to_numpy() * statistics.scale + statistics.mean
    values = np.where(source.isna().to_numpy(), restored, source.to_numpy())
    return pd.DataFrame(values, index=source.index, columns=list(scaling.columns))


def apply_scaling(frame: pd.DataFrame, scaling: Scaling) -> pd.DataFrame:
    """Standardise `frame`'s columns with a scaling fitted elsewhere (e.g. on a sample)."""
    values = as_float_frame(frame, scaling.columns)
    return (values - scaling.statistics.mean) / scaling.statistics.scale
