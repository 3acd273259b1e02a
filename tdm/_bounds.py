"""Bounds of the numeric columns: which bounds (``bounds``, ``bounds_margin``), and how they hold
during the optimisation (``bounds_method``).

``"transform"`` writes a bounded cell as a smooth clamp of a free parameter ``u``:
``low + softplus(u - low) - softplus(u - high)`` between two bounds, ``low + softplus(u - low)``
above one, ``high - softplus(high - u)`` below one (standardised units). Every iterate is
strictly inside, and away from the bounds the value is ``u`` itself (slope 1), however wide the
interval (a sigmoid over a wide interval would turn a small step of ``u`` into a huge one).
``"project"`` lets the cell move freely and clamps it back after every step (projected
gradient). ``"clip"`` clamps only the result. Whatever the method, the imputed values are
clamped to the bounds once more in the data's own units, so that rounding on the way back
cannot leave them.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from functools import cached_property
from numbers import Real
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional

__all__ = ["BOUNDS_METHODS", "BoundedCells", "bound_pair", "column_bounds"]

BOUNDS_METHODS = ("project", "transform", "clip")

# Inside margin of a start at or beyond a bound, for the transform (a share of the range, or in
# standardised units for a one-sided bound): the sigmoid's gradient must not vanish there.
_INSIDE = 1e-3


def column_bounds(
    bounds: Any,
    margin: float,
    names: list[Hashable],
    values: np.ndarray,
    owner: str,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``(low, high)`` bounds of numeric columns ``names`` (``-inf``/``inf`` for none).

    ``values`` (shape ``(n_samples, len(names))``, NaN where missing) gives the observed ranges:
    ``"observed"`` bounds every column by its observed range widened by ``margin`` times that
    range on each side; ``None`` bounds nothing; a mapping gives the bounds of the columns it
    names (``None`` for an open end) and the observed range to the others.
    """
    n = len(names)
    low, high = np.full(n, -np.inf), np.full(n, np.inf)
    if bounds is None:
        return low, high
    values = values.astype(np.float64)  # a given bound is kept as given, not in single precision
    with np.errstate(all="ignore"):
        observed_low = np.nanmin(np.where(np.isnan(values), np.inf, values), axis=0, initial=np.inf)
        observed_high = np.nanmax(
            np.where(np.isnan(values), -np.inf, values), axis=0, initial=-np.inf
        )
    span = np.where(np.isfinite(observed_high - observed_low), observed_high - observed_low, 0.0)
    low, high = observed_low - margin * span, observed_high + margin * span
    if isinstance(bounds, str):
        return low, high
    index = {name: k for k, name in enumerate(names)}
    for name, pair in bounds.items():
        if name not in index:
            raise ValueError(
                f"{owner}: bounds names column {name!r}, which is not a numeric column of the "
                f"data; numeric columns: {names}"
            )
        k = index[name]
        low[k], high[k] = bound_pair(pair, name, owner)
    return low, high


def bound_pair(pair: Any, name: Hashable, owner: str) -> tuple[float, float]:
    """The ``(low, high)`` of ``bounds[name]``, refused with a ``ValueError`` naming the column
    unless a pair of numbers or None (an open end) with ``low <= high``."""
    ok = isinstance(pair, tuple | list) and len(pair) == 2
    ok = ok and all(v is None or (isinstance(v, Real) and not isinstance(v, bool)) for v in pair)
    if not ok:
        raise ValueError(
            f"{owner}: bounds[{name!r}] must be a pair (low, high) of numbers or None; got {pair!r}"
        )
    low = -np.inf if pair[0] is None else float(pair[0])
    high = np.inf if pair[1] is None else float(pair[1])
    if np.isnan(low) or np.isnan(high) or low > high:
        raise ValueError(f"{owner}: bounds[{name!r}] = {pair!r} is not an interval (low <= high)")
    if low == np.inf or high == -np.inf:
        raise ValueError(
            f"{owner}: bounds[{name!r}] = {pair!r} holds no number; an open end is None "
            "(or -inf for low, inf for high)"
        )
    return low, high


@dataclass(frozen=True, eq=False)
class BoundedCells:
    """The bounds of the numeric columns in the optimised (standardised) units, as tensors of
    shape ``(n_numeric,)``, and the map between a cell's free parameter and its value."""

    method: str
    low: Tensor
    high: Tensor

    @classmethod
    def build(
        cls,
        method: str,
        low: np.ndarray,
        high: np.ndarray,
        device: torch.device,
        dtype: torch.dtype,
    ) -> BoundedCells:
        """``low``/``high`` in standardised units (``-inf``/``inf``: open)."""
        return cls(
            method,
            torch.as_tensor(low, device=device, dtype=dtype),
            torch.as_tensor(high, device=device, dtype=dtype),
        )

    @cached_property
    def active(self) -> bool:
        """Whether any column has a finite bound (read from the device once, not every step)."""
        return bool(torch.isfinite(self.low).any() or torch.isfinite(self.high).any())

    def value(self, u: Tensor) -> Tensor:
        """Values of parameters ``u`` (shape ``(..., n_numeric)``, a column per numeric column)."""
        if self.method != "transform" or not self.active:
            return u
        has_low, has_high = torch.isfinite(self.low), torch.isfinite(self.high)
        # Open ends are set to 0 in the branches that do not use them: a where() whose unused
        # branch is inf would still give NaN gradients.
        low = torch.where(has_low, self.low, torch.zeros_like(self.low))
        high = torch.where(has_high, self.high, torch.zeros_like(self.high))
        above = low + functional.softplus(u - low)
        below = high - functional.softplus(high - u)
        both = above - functional.softplus(u - high)
        one_sided = torch.where(has_low, above, torch.where(has_high, below, u))
        return torch.where(has_low & has_high, both, one_sided)

    def parameter(self, values: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """The free parameters whose values are ``values`` (one per cell, of numeric column
        ``columns``); values on or beyond a bound are moved just inside it first."""
        if self.method != "transform":
            return values
        low = self.low.double().cpu().numpy()[columns]
        high = self.high.double().cpu().numpy()[columns]
        has_low, has_high = np.isfinite(low), np.isfinite(high)
        lo, hi = np.where(has_low, low, 0.0), np.where(has_high, high, 0.0)
        span = np.where(has_low & has_high, hi - lo, 1.0)
        inside = _INSIDE * np.minimum(span, 1.0)
        target = values.astype(np.float64)
        target = np.where(has_low, np.maximum(target, lo + inside), target)
        target = np.where(has_high, np.minimum(target, hi - inside), target)
        target = np.where(has_low & has_high & (span <= 0), lo, target)
        # The clamp is increasing in u: bisect for the u whose value is the target.
        a = np.where(has_low, lo, target) - 50.0
        b = np.where(has_high, hi, target) + 50.0
        a, b = np.minimum(a, target - 50.0), np.maximum(b, target + 50.0)
        for _ in range(80):
            middle = (a + b) / 2
            below = _clamp(middle, lo, hi, has_low, has_high) < target
            a, b = np.where(below, middle, a), np.where(below, b, middle)
        return (a + b) / 2

    def project_(self, theta: Tensor, columns: Tensor) -> None:
        """Clamp parameters ``theta`` (of numeric columns ``columns``) into their bounds."""
        theta.data = torch.maximum(torch.minimum(theta, self.high[columns]), self.low[columns])


def _clamp(
    u: np.ndarray, low: np.ndarray, high: np.ndarray, has_low: np.ndarray, has_high: np.ndarray
) -> np.ndarray:
    """:meth:`BoundedCells.value` in NumPy (float64)."""
    above = low + np.logaddexp(0.0, u - low)
    below = high - np.logaddexp(0.0, high - u)
    both = above - np.logaddexp(0.0, u - high)
    return np.where(
        has_low & has_high, both, np.where(has_low, above, np.where(has_high, below, u))
    )
