"""Drift of new rows against a stored model's fit data, per column.

A numeric column's drift is the shift of its observed mean on the new rows from the fit data's,
in the fit data's standard deviations; a boolean or categorical column's is the total variation
distance between the shares of its labels (0: the same shares, 1: no label in common), and any
label the model never saw counts as past the threshold, since the model cannot impute with it.
"""

from __future__ import annotations

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
    observed values it rests on, labels the model never saw, and whether it passed `threshold`."""

    column: str
    measure: str
    value: float
    observed: int
    unseen_labels: tuple[str, ...]
    threshold: float

    @property
    def exceeded(self) -> bool:
        """Past the threshold, or a label the model never saw."""
        return bool(self.unseen_labels) or self.value > self.threshold

    def describe(self) -> str:
        """One phrase, e.g. `x: mean shifted 3.02 SDs (threshold 1)`."""
        if self.unseen_labels:
            return f"{self.column}: labels the model never saw {list(self.unseen_labels)}"
        if self.measure == "mean_shift_sd":
            return (
                f"{self.column}: mean shifted {self.value:.3g} SDs (threshold {self.threshold:g})"
            )
        return (
            f"{self.column}: label shares moved {self.value:.3g} in total variation "
            f"(threshold {self.threshold:g})"
        )


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
        """Per column: measure, value, observed new values, threshold, unseen labels."""
        return {
            c.column: {
                "measure": c.measure,
                "value": c.value,
                "observed": c.observed,
                "threshold": c.threshold,
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
                )
            )
        else:
            scale = fitted["std"] if fitted["std"] > 0 else 1.0
            value = abs(now["mean"] - fitted["mean"]) / scale if now["observed"] else 0.0
            out.append(
                ColumnDrift(name, "mean_shift_sd", float(value), now["observed"], (), threshold)
            )
    return DriftReport(tuple(out))
