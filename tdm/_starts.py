"""Starting points of the missing cells: ICE's and a light MissForest's imputations, and the
self-supervised choice between them (``TDMImputer(init="auto")``).

One construction of each chained-equation imputer (ICE: a Bayesian linear regression per column;
MissForest: a random forest per column) for the benchmark's ICE and MissForest baselines; the
starts write their rounds out, the same imputations bit for bit, so that a start and its baseline
are the same method, without the baselines' ``ConvergenceWarning`` (a start stops after a fixed
number of rounds by design).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from sklearn.ensemble import RandomForestRegressor
from sklearn.experimental import enable_iterative_imputer  # noqa: F401  (enables the import)
from sklearn.impute import IterativeImputer, SimpleImputer
from sklearn.linear_model import BayesianRidge

from tdm._config import Config
from tdm._early_stopping import holdout_cells
from tdm._seeds import spawn_seeds

__all__ = [
    "LARGE_CELLS",
    "LARGE_FOREST",
    "LIGHT_FOREST",
    "WARM_TREES",
    "Start",
    "choose_start",
    "context_start",
    "fit_start",
    "forest_size",
    "make_ice",
    "make_missforest",
    "round_trees",
    "start_fill",
]

#: The forest start's (trees, rounds, warm-up rounds) on a table of fewer than
#: :data:`LARGE_CELLS` observed cells (the MissForest baseline: 100 trees, up to 10 rounds) ...
LIGHT_FOREST = (20, 3, 0)
#: ... and from there.
LARGE_FOREST = (100, 2, 5)
#: Trees of a *warm-up* round: a light forest's round that brings the cells near where the
#: full rounds after it settle.
WARM_TREES = 20

PROBE_FRACTION = 0.05
"""Share of the observed cells hidden by ``init="auto"`` to score the candidate starts..."""
PROBE_MAX_CELLS = 2_000
"""... but never more cells than this."""
LARGE_CELLS = 100_000
"""Observed cells (a categorical cell counts once) from which a table is *large*: its probe hides
at most 2% of them. There the forest start is :data:`LARGE_FOREST`, and ``init="auto"`` takes
the chosen candidate's probe run as the start and keeps the probe cells hidden to guard the
refinement (the safeguard), the start computed again on every observed cell being where the
guarded cells end at share 0 (:func:`fit_start`). On smaller tables the start is computed again
on every observed cell."""
FOREST_MARGIN = 0.9
"""``init="auto"`` takes the forest's start only if its probe error is below this times ICE's."""
START_CONTEXT_ROWS = 10_000
"""Fitted rows given as context when ICE or a forest starts new rows."""


def make_ice(seed: int, *, max_iter: int = 10, tol: float = 1e-3) -> IterativeImputer:
    """scikit-learn's ``IterativeImputer`` as ICE: BayesianRidge per column, posterior means,
    columns in ascending order of missingness, started from the column means."""
    return IterativeImputer(
        estimator=BayesianRidge(),
        max_iter=max_iter,
        tol=tol,
        initial_strategy="mean",
        sample_posterior=False,
        random_state=seed,
    )


def make_missforest(
    seed: int,
    *,
    n_estimators: int = 100,
    max_features: Literal["sqrt", "log2"] | int | float | None = "sqrt",
    max_iter: int = 10,
    tol: float = 1e-3,
    n_jobs: int | None = 1,
) -> IterativeImputer:
    """scikit-learn's ``IterativeImputer`` as MissForest: a bootstrap random forest per column
    (``max_features`` candidates per split), columns in ascending order of missingness, started
    from the column means. The forests and the imputer get two seeds derived from ``seed``."""
    forest_seed, imputer_seed = _forest_seeds(seed)
    return IterativeImputer(
        estimator=_forest(forest_seed, n_estimators, max_features, n_jobs),
        max_iter=max_iter,
        tol=tol,
        initial_strategy="mean",
        random_state=imputer_seed,
    )


def _forest(
    seed: int,
    n_estimators: int,
    max_features: Literal["sqrt", "log2"] | int | float | None = "sqrt",
    n_jobs: int | None = 1,
) -> RandomForestRegressor:
    return RandomForestRegressor(
        n_estimators=n_estimators, max_features=max_features, n_jobs=n_jobs, random_state=seed
    )


def _forest_seeds(seed: int) -> tuple[int, int]:
    """The seeds of the forests and of the imputer, derived from ``seed``."""
    forest, imputer = (s % (2**31 - 1) for s in spawn_seeds(seed, 2))
    return forest, imputer


def observed_cells(mask: np.ndarray, groups: np.ndarray | None = None) -> int:
    """Observed cells of ``mask``, a categorical cell (``groups``) counted once."""
    return int((~(mask if groups is None else mask[:, _firsts(groups)])).sum())


def forest_size(
    observed: int,
    trees: int | None = None,
    rounds: int | None = None,
    warm_rounds: int | None = None,
) -> tuple[int, int, int]:
    """The forest start's trees, rounds and warm-up rounds: those given, else by the table's
    ``observed`` cells (:data:`LIGHT_FOREST` below :data:`LARGE_CELLS`, :data:`LARGE_FOREST`
    from there)."""
    default = LARGE_FOREST if observed >= LARGE_CELLS else LIGHT_FOREST
    given = (trees, rounds, warm_rounds)
    trees, rounds, warm = (d if g is None else g for d, g in zip(default, given, strict=True))
    return trees, rounds, warm


def round_trees(size: tuple[int, int, int]) -> list[int]:
    """The trees of each round of a forest start of ``size`` = (trees, rounds, warm-up rounds):
    :data:`WARM_TREES` for each warm-up round, then ``trees`` for each round."""
    trees, rounds, warm = size
    return [WARM_TREES] * warm + [trees] * rounds


def _label_directions(targets: list[np.ndarray], seed: int) -> list[np.ndarray | None]:
    """A fixed unit direction per block of several coordinates (``None`` for one coordinate)."""
    rng = np.random.default_rng(seed)
    directions: list[np.ndarray | None] = []
    for cols in targets:
        if cols.size == 1:
            directions.append(None)
            continue
        u = rng.standard_normal(cols.size)
        directions.append(u / np.linalg.norm(u))
    return directions


def _column_features(
    filled: np.ndarray,
    targets: list[np.ndarray],
    directions: list[np.ndarray | None],
    skip: int,
) -> np.ndarray:
    """One feature per column but ``targets[skip]``: a numeric column's values, a categorical
    block's projection on its direction."""
    if all(u is None for u in directions):  # a numeric table: its columns, as they are
        return np.delete(filled, targets[skip], axis=1)
    return np.column_stack(
        [
            filled[:, cols[0]] if u is None else filled[:, cols] @ u
            for j, (cols, u) in enumerate(zip(targets, directions, strict=True))
            if j != skip
        ]
    )


def start_fill(
    init: str,
    values: np.ndarray,
    mask: np.ndarray,
    seed: int,
    groups: np.ndarray | None = None,
    size: tuple[int, int, int] = LIGHT_FOREST,
    n_jobs: int | None = None,
) -> np.ndarray:
    """``values`` with its ``mask`` cells replaced by the ``"ice"`` or ``"forest"`` start.

    ICE: the rounds of ``make_ice(seed).fit_transform`` written out (:func:`_ice_rounds`), every
    coordinate regressed on its own, without scikit-learn's ``ConvergenceWarning``. Forest: a light
    MissForest's, ``size`` = (trees, rounds, warm-up rounds: :func:`round_trees`), each
    forest fitted on ``n_jobs`` threads (scikit-learn's meaning; ``None``: 1): the rounds of
    ``make_missforest(seed, n_estimators=trees, max_iter=rounds).fit_transform`` written out,
    the same imputations bit for bit, without scikit-learn's ``ConvergenceWarning`` (stopping
    after a few rounds is the design) and without forests for columns with nothing to impute.
    With ``groups`` (the original column of every column, :attr:`tdm._mixed.TableEncoding.groups`),
    the coordinates of a categorical column are one multi-output forest's targets, and as a
    feature the column is one number, its coordinates' projection on a fixed direction: one
    forest per original column, one feature per other column.
    """
    if init != "forest":
        return np.where(mask, _ice_rounds(np.where(mask, np.nan, values)), values)
    forest_seed = _forest_seeds(seed)[0]
    filled = SimpleImputer(strategy="mean").fit_transform(np.where(mask, np.nan, values))
    n_features = values.shape[1]
    if groups is None:
        groups = np.arange(n_features)
    targets = [np.flatnonzero(groups == g) for g in np.unique(groups)]
    if len(targets) == 1:  # no other column to regress on: the mean, as IterativeImputer gives
        return np.where(mask, filled, values)
    directions = _label_directions(targets, forest_seed)
    missingness = [mask[:, cols[0]].mean() for cols in targets]
    for trees in round_trees(size):
        for k in np.argsort(missingness, kind="mergesort"):  # ascending missingness
            cols = targets[k]
            rows = mask[:, cols[0]]
            if not rows.any():
                continue
            features = _column_features(filled, targets, directions, skip=k)
            forest = _forest(forest_seed, trees, n_jobs=n_jobs)
            target = filled[~rows][:, cols[0]] if cols.size == 1 else filled[~rows][:, cols]
            forest.fit(features[~rows], target)
            predicted = forest.predict(features[rows])
            filled[np.ix_(np.flatnonzero(rows), cols)] = predicted.reshape(-1, cols.size)
    return np.where(mask, filled, values)


def _ice_rounds(X: np.ndarray, max_iter: int = 10, tol: float = 1e-3) -> np.ndarray:
    """``X`` (NaN: missing; every column with an observed value) with its missing cells imputed
    by ICE: ``make_ice(seed, max_iter=max_iter, tol=tol).fit_transform(X)``, bit for bit, its
    rounds written out.

    The cells start at their column's mean; each round regresses every column with a missing
    cell on all the others (a fresh ``BayesianRidge``, fitted on the rows where the column is
    observed) in ascending order of missingness, and replaces its missing cells by the posterior
    means. The rounds stop after ``max_iter``, or earlier once a round changes the cells by less
    than ``tol`` times the largest observed absolute value (the matrix infinity norm of the
    change, scikit-learn's rule). Stopping at ``max_iter`` is the design, not a failure: nothing
    is warned. The order and the Fortran memory layout are scikit-learn's, so that every sum is
    taken in the same order.
    """
    X = np.asfortranarray(X)
    missing = np.isnan(X)
    filled = SimpleImputer(strategy="mean").fit_transform(X)
    n_features = X.shape[1]
    if n_features == 1 or missing.all():
        return filled
    tolerance = tol * np.max(np.abs(X[~missing]))
    order = np.argsort(missing.mean(axis=0), kind="mergesort")
    previous = filled.copy()
    for _ in range(max_iter):
        for j in order:
            rows = missing[:, j]
            if not rows.any():
                continue  # scikit-learn fits a model here too, and uses none of it
            others = filled[:, np.concatenate((np.arange(j), np.arange(j + 1, n_features)))]
            model = BayesianRidge().fit(others[~rows], filled[:, j][~rows])
            filled[rows, j] = model.predict(others[rows])
        if np.linalg.norm(filled - previous, ord=np.inf) < tolerance:
            break
        previous = filled.copy()
    return filled


def choose_start(
    Z: np.ndarray,
    mask: np.ndarray,
    rng: np.random.Generator,
    seed: int,
    groups: np.ndarray | None = None,
    size: tuple[int, int, int] = LIGHT_FOREST,
    n_jobs: int | None = None,
) -> tuple[str, dict[str, float], np.ndarray, np.ndarray | None]:
    """``init="auto"``: ICE's start, or the forest's where it imputes probe cells clearly better.

    A share (:data:`PROBE_FRACTION`, at most :data:`PROBE_MAX_CELLS` cells) of the observed
    cells is hidden, both candidates impute them along with the missing cells, and their mean
    absolute errors (standardised units) on the probe cells are compared. The forest (``size``:
    trees, rounds) is chosen when its error is below :data:`FOREST_MARGIN` times ICE's, ICE being
    the cheaper of the two. No ground truth of the missing cells is used. ``groups``
    (:func:`tdm._early_stopping.holdout_cells`) hides the coordinates of a categorical cell
    together.

    Returns the choice, both scores, the start and the probe. On a large table
    (:data:`LARGE_CELLS`) the start is ``Z`` with its ``mask`` *and probe* cells imputed by the
    chosen candidate in that same run, and the probe is returned, for the caller to keep hidden
    or give back: the probe cells then score the start against the refinement, neither having
    seen them. On a smaller table the start imputes the ``mask`` cells in a run of its own on
    every observed cell, and the probe is ``None``.
    """
    observed = observed_cells(mask, groups)
    fraction = min(PROBE_FRACTION, PROBE_MAX_CELLS / max(observed, 1))
    probe = holdout_cells(mask, fraction, rng, groups)
    hidden = mask | probe
    filled = {
        name: start_fill(name, Z, hidden, seed, groups, size, n_jobs) for name in ("ice", "forest")
    }
    scores = {name: float(np.abs(f[probe] - Z[probe]).mean()) for name, f in filled.items()}
    choice = "forest" if scores["forest"] < FOREST_MARGIN * scores["ice"] else "ice"
    if observed >= LARGE_CELLS:
        return choice, scores, np.where(hidden, filled[choice], Z), probe
    return choice, scores, start_fill(choice, Z, mask, seed, groups, size, n_jobs), None


@dataclass(frozen=True, eq=False)
class Start:
    """The start of a fit (:func:`fit_start`).

    Attributes
    ----------
    init : str
        The start used: ``init``, or what ``"auto"`` chose.
    scores : dict or None
        With ``"auto"``: each candidate's mean absolute error on the probe cells.
    forest_size : tuple of int or None
        The forest's (trees, rounds, warm-up rounds) where a forest started the fit.
    values : ndarray or None
        ``Z`` with its missing cells started (``None``: the mean start).
    probe : ndarray or None
        The probe cells to keep hidden through the fit (the safeguard), else ``None``.
    anchor : ndarray or None
        With the probe: the chosen start computed again with every observed cell, where the
        safeguard's share 0 leaves the missing cells (:func:`tdm._safeguard.guard`).
    """

    init: str
    scores: dict[str, float] | None = None
    forest_size: tuple[int, int, int] | None = None
    values: np.ndarray | None = None
    probe: np.ndarray | None = None
    anchor: np.ndarray | None = None


def fit_start(
    init: str,
    Z: np.ndarray,
    mask: np.ndarray,
    rng: np.random.Generator,
    groups: np.ndarray | None,
    config: Config,
) -> Start:
    """The ``init`` start of the ``mask`` cells of ``Z``; the forest's size, the safeguard and
    the forests' threads come from ``config``. The mean start draws nothing from ``rng``.

    With ``"auto"`` on a large table and the safeguard, the started values are the probe run's
    (blind to the probe cells, which the safeguard scores them on), and the anchor is the
    chosen start computed again with every observed cell (the same seed). Without the
    safeguard, the probe run's start is kept with its probe cells observed again.
    """
    if init == "mean":
        return Start(init)
    seed = int(rng.integers(2**31 - 1))
    size = forest_size(
        observed_cells(mask, groups),
        config.forest_trees,
        config.forest_rounds,
        config.forest_warm_rounds,
    )
    n_jobs = config.n_jobs
    scores = probe = anchor = None
    if init == "auto":
        init, scores, start, probe = choose_start(Z, mask, rng, seed, groups, size, n_jobs)
    else:
        start = start_fill(init, Z, mask, seed, groups, size, n_jobs)
    if probe is not None and not config.safeguard:
        start, probe = np.where(mask, start, Z), None
    if probe is not None:
        anchor = start_fill(init, Z, mask, seed, groups, size, n_jobs)
    return Start(init, scores, size if init == "forest" else None, start, probe, anchor)


def _firsts(groups: np.ndarray) -> np.ndarray:
    """The first coordinate of every original column."""
    return np.unique(groups, return_index=True)[1]


def context_start(
    init: str,
    X_fit: np.ndarray,
    Z: np.ndarray,
    mask: np.ndarray,
    rng: np.random.Generator,
    groups: np.ndarray | None = None,
    size: tuple[int, int, int] = LIGHT_FOREST,
    n_jobs: int | None = None,
) -> np.ndarray:
    """The ``init`` start of new rows ``Z``, imputed beside (at most
    :data:`START_CONTEXT_ROWS`) complete fitted rows ``X_fit`` as context (``size``, ``n_jobs``:
    the forest's trees and rounds, and its threads)."""
    n_fit = X_fit.shape[0]
    context = X_fit
    if n_fit > START_CONTEXT_ROWS:
        context = X_fit[np.sort(rng.choice(n_fit, START_CONTEXT_ROWS, replace=False))]
    stacked = np.vstack([np.asarray(context, dtype=np.float64), Z])
    known = np.zeros(context.shape, dtype=bool)
    seed = int(rng.integers(2**31 - 1))
    filled = start_fill(init, stacked, np.vstack([known, mask]), seed, groups, size, n_jobs)
    return filled[context.shape[0] :]
