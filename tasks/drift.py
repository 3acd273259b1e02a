"""Drift of new rows against a stored model's fit data, per column.

A numeric column's drift is the shift of its observed mean on the new rows from the fit data's,
in the fit data's standard deviations; a boolean or categorical column's is the total variation
distance between the shares of its labels (0: the same shares, 1: no label in common), and any
label the model never saw counts as past the threshold, since the model cannot impute with it.
A drift counts only past its threshold and past what as many values drawn from the fit data
pass in 0.1% of draws (`chance_distance`, `chance_shift`): a few new rows do not call for a
refit by their number alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tasks.frames import as_float_frame, as_labels, moments
from tasks.warehouse.tables import BOOLEAN, LABELLED

__all__ = [
    "ColumnDrift",
    "DriftReport",
    "average_distance",
    "chance_distance",
    "chance_shift",
    "label_shares",
    "largest_departure",
    "measure_drift",
    "profile_columns",
    "share_distance",
]


def label_shares(labels: pd.Series) -> dict[str, float]:
    """The share of each label (as text) among the non-NULL cells of `labels`, in order of
    first appearance; empty when every cell is NULL."""
    shares = labels.dropna().astype(str).value_counts(normalize=True, sort=False)
    return {str(label): float(share) for label, share in shares.items()}


def largest_departure(before: Mapping[str, float], after: Mapping[str, float]) -> str | None:
    """The label whose share differs most between `before` and `after` (on a tie, the one more
    common in `after`, then the first in sorted order); None when both are empty."""

    def departure(label: str) -> tuple[float, float]:
        return abs(after.get(label, 0.0) - before.get(label, 0.0)), after.get(label, 0.0)

    return max(sorted(set(before) | set(after)), key=departure, default=None)


def share_distance(before: Mapping[str, float], after: Mapping[str, float]) -> float:
    """The total variation distance between two label shares: half the sum of their absolute
    differences over every label (0: the same shares, 1: no label in common)."""
    labels = set(before) | set(after)
    return 0.5 * sum(abs(before.get(k, 0.0) - after.get(k, 0.0)) for k in labels)


def average_distance(shares: Mapping[Any, float], n: int) -> float:
    """The total variation distance from `shares` that `n` values drawn at random with those
    shares show on average (0 without values or shares)."""
    if n <= 0 or not shares:
        return 0.0
    p = np.fromiter(shares.values(), dtype=np.float64)
    p = p / p.sum()
    # n cells drawn with share p show |share - p| of sqrt(2 p (1 - p) / (pi n)) on average
    return float(np.sqrt(2 * p * (1 - p) / (math.pi * n)).sum()) / 2


def chance_distance(shares: Mapping[Any, float], n: int) -> float:
    """The total variation distance from `shares` that `n` values drawn at random with those
    shares pass in 0.1% of draws (2,000 seeded draws: the same answer every run; 0 without
    values or shares). Many labels make chance alone show a large distance (61 cells of 239
    labels: 0.77 on average)."""
    if n <= 0 or not shares:
        return 0.0
    p = np.fromiter(shares.values(), dtype=np.float64)
    p = p / p.sum()
    counts = np.random.default_rng(0).multinomial(n, p, size=2_000)
    distances = np.abs(counts / n - p).sum(axis=1) / 2
    return float(np.quantile(distances, 0.999))


def chance_shift(n: int) -> float:
    """The shift of the mean of `n` values drawn from the fit data, in its standard deviations,
    that chance passes in 0.1% of draws (two-sided, normal approximation)."""
    return 3.29 / math.sqrt(n) if n > 0 else 0.0


def profile_columns(
    frame: pd.DataFrame, columns: Sequence[str], kinds: Mapping[str, str]
) -> dict[str, Any]:
    """Per column, what drift is measured against: mean and standard deviation (ddof 0) of a
    numeric column's observed values, the shares of a labelled column's observed labels (as
    text), and the count of observed values."""
    profile: dict[str, Any] = {}
    for name in columns:
        if kinds.get(name) in LABELLED:
            labels = as_labels(frame[name], boolean=kinds[name] == BOOLEAN)
            profile[name] = {
                "observed": int(labels.notna().sum()),
                "shares": label_shares(labels),
            }
        else:
            values = as_float_frame(frame, [name])[name].to_numpy(dtype=float)
            values = values[~np.isnan(values)]
            mean, std = moments(values, ddof=0) if values.size else (0.0, 0.0)
            profile[name] = {"observed": int(values.size), "mean": mean, "std": std}
    return profile


@dataclass(frozen=True)
class ColumnDrift:
    """One column's drift: `value` (SDs of mean shift, or label share distance), the new rows'
    observed values it rests on, labels the model never saw, its `threshold`, and the drift
    `chance` alone may show on that many values."""

    column: str
    measure: str
    value: float
    observed: int
    unseen_labels: tuple[str, ...]
    threshold: float
    chance: float = 0.0

    @property
    def exceeded(self) -> bool:
        """Past the threshold and past chance, or a label the model never saw."""
        return bool(self.unseen_labels) or self.value > max(self.threshold, self.chance)

    def describe(self) -> str:
        """One phrase, e.g. `x: mean shifted 3.02 SDs (threshold 1)`; the bar chance sets on
        few new values is named where it is the higher."""
        if self.unseen_labels:
            return f"{self.column}: labels the model never saw {list(self.unseen_labels)}"
        bar = f"threshold {self.threshold:g}"
        if self.chance > self.threshold:
            bar += f"; chance alone up to {self.chance:.3g} on {self.observed} values"
        if self.measure == "mean_shift_sd":
            return f"{self.column}: mean shifted {self.value:.3g} SDs ({bar})"
        return f"{self.column}: label shares moved {self.value:.3g} in total variation ({bar})"


@dataclass(frozen=True)
class DriftReport:
    """Every column's drift on one run's new rows."""

    columns: tuple[ColumnDrift, ...]

    @property
    def exceeded(self) -> tuple[ColumnDrift, ...]:
        """The columns past their threshold."""
        return tuple(c for c in self.columns if c.exceeded)

    def reason(self) -> str:
        """Why a refit is due, or an empty string."""
        past = self.exceeded
        return "drift: " + "; ".join(c.describe() for c in past) if past else ""

    def to_dict(self) -> dict[str, Any]:
        """Per column: measure, value, observed new values, threshold, chance, unseen labels."""
        return {
            c.column: {
                "measure": c.measure,
                "value": c.value,
                "observed": c.observed,
                "threshold": c.threshold,
                "chance": c.chance,
                "exceeded": c.exceeded,
                **({"unseen_labels": list(c.unseen_labels)} if c.unseen_labels else {}),
            }
            for c in self.columns
        }


def measure_drift(
    profile: Mapping[str, Any],
    frame: pd.DataFrame,
    kinds: Mapping[str, str],
    *,
    threshold: float,
    label_threshold: float,
) -> DriftReport:
    """The drift of `frame`'s columns (the new rows) against `profile` (`profile_columns` of the
    fit data); a column with no observed new value has drift 0. A column whose kind changed
    since the fit (numeric against labelled) is not measured: a stored model refuses it."""
    profile = {
        name: fitted
        for name, fitted in profile.items()
        if ("shares" in fitted) == (kinds.get(name) in LABELLED)
    }
    new = profile_columns(frame, list(profile), kinds)
    out = []
    for name, fitted in profile.items():
        now = new[name]
        if "shares" in fitted:
            before, after = fitted["shares"], now["shares"]
            value = share_distance(before, after)
            unseen = tuple(sorted(set(after) - set(before)))
            out.append(
                ColumnDrift(
                    name,
                    "label_share_distance",
                    float(value) if now["observed"] else 0.0,
                    now["observed"],
                    unseen,
                    label_threshold,
                    chance_distance(before, now["observed"]),
                )
            )
        else:
            scale = fitted["std"] if fitted["std"] > 0 else 1.0
            value = abs(now["mean"] - fitted["mean"]) / scale if now["observed"] else 0.0
            out.append(
                ColumnDrift(
                    name,
                    "mean_shift_sd",
                    float(value),
                    now["observed"],
                    (),
                    threshold,
                    chance_shift(now["observed"]),
                )
            )
    return DriftReport(tuple(out))
