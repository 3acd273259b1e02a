"""Seed derivation shared by the imputers (no global random state)."""

from __future__ import annotations

import numpy as np

__all__ = ["spawn_seeds"]


def spawn_seeds(seed: int, n: int) -> list[int]:
    """``n`` independent 63-bit seeds derived from ``seed``."""
    return [int(s) for s in np.random.default_rng(seed).integers(2**63 - 1, size=n)]
