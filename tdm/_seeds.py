"""Seed derivation shared by the imputers (no global random state)."""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

__all__ = ["seed_of", "spawn_seeds"]


def seed_of(random_state: int | np.random.RandomState | None) -> int:
    """A seed below ``2**31 - 1`` from a ``random_state``: an int's first draw (the same int,
    the same seed), a RandomState's next draw (it advances it), fresh entropy for None, never
    NumPy's global random state."""
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] % (2**31 - 1))
    return int(check_random_state(random_state).randint(2**31 - 1))


def spawn_seeds(seed: int, n: int) -> list[int]:
    """``n`` independent 63-bit seeds derived from ``seed``."""
    return [int(s) for s in np.random.default_rng(seed).integers(2**63 - 1, size=n)]
