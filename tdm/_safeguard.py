"""The safeguard of ``init="auto"`` on large tables: where between the start and the refinement
the missing cells end, chosen by the probe cells kept hidden through the fit."""

from __future__ import annotations

import numpy as np

__all__ = ["SAFEGUARD_SHARES", "guard", "share_of"]

#: Where the safeguard may leave the missing cells: the start plus this share of the way to the
#: refined cells (0: the start; 1: the refinement), whichever the probe cells favour.
SAFEGUARD_SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)


def share_of(initial: np.ndarray, refined: np.ndarray, share: float, n_numeric: int) -> np.ndarray:
    """``initial`` moved ``share`` of the way to ``refined`` in the first ``n_numeric`` (numeric)
    columns; a label (the categorical coordinates after them) is the refined one, or the
    initial one at share 0."""
    if share == 1.0:
        return refined
    if share == 0.0:
        return initial
    p = n_numeric
    out = refined.copy()
    out[:, :p] = initial[:, :p] + share * (refined[:, :p] - initial[:, :p])
    return out


def guard(
    refined: np.ndarray,
    initial: np.ndarray,
    probe: np.ndarray,
    Z: np.ndarray,
    n_numeric: int,
    anchor: np.ndarray | None = None,
) -> tuple[np.ndarray, float, dict[float, float]]:
    """The share of :data:`SAFEGUARD_SHARES` whose cells, ``initial`` moved that share of the way
    to ``refined``, impute the ``probe`` cells of ``Z`` with the lowest mean absolute error (the
    first such); ``anchor`` (else ``initial``) moved that share of the way to ``refined``, with
    the probe cells given back their values; the share; and every share's error.

    ``initial`` and ``refined`` must both have been blind to the probe cells for the scores to
    be fair; ``anchor`` is the same start computed with the probe cells observed, a better start
    that cannot be scored on them (it has seen them)."""
    scores = {
        s: float(np.abs(share_of(initial, refined, s, n_numeric)[probe] - Z[probe]).mean())
        for s in SAFEGUARD_SHARES
    }
    best = min(scores, key=scores.__getitem__)
    base = initial if anchor is None else anchor
    return np.where(probe, Z, share_of(base, refined, best, n_numeric)), best, scores
