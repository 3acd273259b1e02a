"""How much one column of a table tells of another, for any mix of numeric and label columns.

Column ``j`` splits the rows into groups: its labels, or for a numeric column the
:data:`ASSOCIATION_BINS` bins between its quantiles; its missing cells are one group more, as
a tree model can split on them too. What column ``k`` shares with ``j`` is the part of ``k``'s
variation that the groups' means explain, among the rows where ``k`` is observed: the
correlation ratio ``eta**2`` of a numeric ``k`` (variation: its sum of squares), Goodman and
Kruskal's ``tau`` of a label ``k`` (variation: its Gini impurity, the sum of squares of its
labels' indicators). Both are adjusted for chance as the adjusted ``R**2`` of a one-way
analysis of variance: ``g`` groups of ``n`` rows explain about ``(g - 1) / (n - 1)`` of any
column's variation by chance alone, so a column of many labels (an identifier) is not taken
for an informative one. Binning sees a relation of any shape, not only a linear one.

Used to give each model of a wide table's trees start the columns it is best predicted from, as
predictors are chosen for chained equations on many columns (van Buuren, *Flexible Imputation
of Missing Data*, 2018, section 6.3.2).
"""

from __future__ import annotations

import numpy as np

__all__ = ["ASSOCIATION_BINS", "ASSOCIATION_ROWS", "explained_shares", "strongest"]

ASSOCIATION_BINS = 16
"""Groups of a numeric column: the bins between its quantiles (fewer where values repeat)."""
ASSOCIATION_ROWS = 10_000
"""Most rows the shares are measured on: a larger table's are a uniform sample of this many."""


def explained_shares(
    table: np.ndarray,
    categorical: np.ndarray,
    rng: np.random.Generator,
    targets: np.ndarray | None = None,
) -> np.ndarray:
    """The share of each column's variation explained by each other column (module docstring).

    Parameters
    ----------
    table : ndarray of shape (n_samples, n_features)
        Numeric values and label columns' codes (non-negative integers), NaN where missing.
    categorical : ndarray of shape (n_features,)
        Which columns hold labels.
    rng : Generator
        Draws the rows measured where they are more than :data:`ASSOCIATION_ROWS`; untouched
        otherwise.
    targets : ndarray of int, optional
        The columns whose shares are measured (default: all); the others' rows are 0.

    Returns
    -------
    shares : ndarray of shape (n_features, n_features)
        ``shares[k, j]``: the share of column ``k``'s variation explained by column ``j``'s
        groups, adjusted for chance, in ``[0, 1]``; 0 on the diagonal and where ``k`` is
        constant or observed in fewer than two rows.
    """
    if table.shape[0] > ASSOCIATION_ROWS:
        table = table[np.sort(rng.choice(table.shape[0], ASSOCIATION_ROWS, replace=False))]
    groups = [_groups(table[:, j], bool(categorical[j])) for j in range(table.shape[1])]
    shares = np.zeros((table.shape[1], table.shape[1]))
    for k in range(table.shape[1]) if targets is None else targets:
        rows = ~np.isnan(table[:, k])
        if np.count_nonzero(rows) < 2:
            continue
        target = table[rows, k]
        explained = _label_explained if categorical[k] else _numeric_explained
        for j in range(table.shape[1]):
            if j != k:
                shares[k, j] = explained(target, groups[j][rows])
    return shares


def strongest(shares: np.ndarray, k: int, count: int) -> np.ndarray:
    """The ``count`` columns other than ``k`` that explain most of column ``k``'s variation
    (``shares`` from :func:`explained_shares`), in ascending order; ties go to the first."""
    order = np.argsort(-shares[k], kind="stable")
    return np.sort(order[order != k][:count])


def _groups(column: np.ndarray, categorical: bool) -> np.ndarray:
    """Each row's group: its label's code, or its numeric value's bin; missing rows one more."""
    missing = np.isnan(column)
    observed = column[~missing]
    if categorical:
        codes = np.zeros(column.shape, dtype=np.int64)
        codes[~missing] = observed.astype(np.int64)
        top = int(observed.max(initial=-1)) + 1
    else:
        cuts = np.linspace(0.0, 1.0, ASSOCIATION_BINS + 1)[1:-1]
        edges = np.unique(np.quantile(observed, cuts)) if observed.size else np.empty(0)
        codes = np.searchsorted(edges, np.where(missing, 0.0, column), side="right")
        top = edges.size + 1
    codes[missing] = top
    return codes


def _numeric_explained(target: np.ndarray, groups: np.ndarray) -> float:
    """``eta**2`` of ``target`` by ``groups``, adjusted for chance (0 for a constant, whose
    sum of squares would be rounding error)."""
    if target.min() == target.max():
        return 0.0
    centred = target - target.mean()
    total = float(centred @ centred)
    counts = np.bincount(groups)
    sums = np.bincount(groups, weights=centred)
    seen = counts > 0
    return _adjusted(float((sums[seen] ** 2 / counts[seen]).sum()), total, groups.size, seen)


def _label_explained(target: np.ndarray, groups: np.ndarray) -> float:
    """Goodman and Kruskal's ``tau`` of the codes ``target`` by ``groups``, adjusted for
    chance: the Gini impurity's share that the groups remove."""
    labels, codes = np.unique(target, return_inverse=True)
    n = target.size
    total = n - float((np.bincount(codes).astype(np.float64) ** 2).sum()) / n
    pairs, together = np.unique(groups * labels.size + codes, return_counts=True)
    counts = np.bincount(groups)
    within = together.astype(np.float64) ** 2 / counts[pairs // labels.size]
    between = float(within.sum()) - (n - total)
    return _adjusted(between, total, n, counts > 0)


def _adjusted(between: float, total: float, n: int, seen: np.ndarray) -> float:
    """The share ``between / total`` of ``n`` rows in ``seen.sum()`` groups, less what that many
    groups explain by chance, scaled back to ``[0, 1]``."""
    chance = (np.count_nonzero(seen) - 1) / (n - 1)
    if total <= 0.0 or chance >= 1.0:
        return 0.0
    return float(np.clip((between / total - chance) / (1.0 - chance), 0.0, 1.0))
