"""Draws of the missing cells (:meth:`TDMImputer.sample`): the point imputation plus the
imputer's own error, measured on observed cells hidden and imputed again.

The point imputation is each cell's best guess, close to a conditional mean: its spread is
smaller than the data's, and its labels lean to the most common one. A draw adds back what the
point does not know. Rounds of probe cells (disjoint, at most :data:`PROBE_MAX_CELLS` each,
until every column has :data:`PROBE_CELLS` probed cells) are hidden and imputed again with the
rest of their rows: on the fit's own data by fits with the imputer's settings
(:data:`REFIT_SHARE` of the observed cells a round, at most :data:`MAX_REFITS` rounds), on
other rows by ``transform`` (:data:`PROBE_SHARE`, at most :data:`MAX_ROUNDS` rounds). This
gives, per column:

- numeric: a straight line through the probed cells' true values on their imputed ones (where the
  point leans too far from its column's mean, as where it knows less, the line pulls it back; where
  it leans too little, the line takes it further; its slope is drawn towards one as far as it is
  uncertain), and the residuals about that line, each left out of the line it is measured from
  (standardised units). A draw takes each missing cell's point through its column's line and adds
  one of the column's residuals, so that the draws of a cell have the spread of the imputer's
  errors, and their quantiles make its interval. The cells missing in one row are drawn together:
  each residual is its column's residual at the rank of a normal score, the scores of a row's
  missing cells correlated as those cells are given the row's observed numeric cells (a normal model
  with the columns' correlation, over the rows where both cells of a pair are observed; a pair seen
  together in fewer than :data:`MIN_PAIRS` rows counts as uncorrelated). A cell missing alone gets a
  residual at random; cells missing together get errors that go together, as their values do, so
  that the relations between them are kept. A column with fewer than :data:`MIN_RESIDUALS` probed
  cells keeps its point, its residuals taken about the point.
- label: the counts of (imputed label, true label) pairs, ``P(t | l)``: the probed cells
  imputed as ``l``, counted by their true label, plus one cell spread by the observed label
  shares (so a label never probed keeps a small chance, and a rare imputed label leans on the
  shares).

Both are calibrated where the probe is like the missing cells (missing completely at random):
the probe cells are a random share of the observed ones. A column's residuals do not depend on
the row's observed cells (a cell's spread is its column's).

A missing label is drawn from its own probabilities (:func:`label_probabilities`): those of
the trees start's model of its column (:func:`tdm._starts.label_model`, a random forest's
shares of tree votes, or the observed shares where the forest's out-of-bag Brier score does not
beat theirs) on the row's other cells, point-imputed where missing, fitted on the rows where the
column is observed. A column with fewer than :data:`MODEL_ROWS` such rows, or with one label
among them, draws from ``P(t | l)`` instead, ``l`` being the cell's point label.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import special

from tdm._early_stopping import holdout_cells
from tdm._mixed import TableEncoding
from tdm._starts import fitted_rows, label_model, label_table, model_features

__all__ = [
    "PROBE_CELLS",
    "ProbeErrors",
    "calibration",
    "draw_cells",
    "joint_scores",
    "label_probabilities",
    "observed_correlation",
    "probe_errors",
]

PROBE_SHARE = 0.1
"""Share of the observed cells hidden in a round of probe cells imputed by ``transform`` ..."""
REFIT_SHARE = 0.15
"""... or by a fit (fewer, larger rounds: a fit costs more) ..."""
PROBE_MAX_CELLS = 4_000
"""... but never more cells than this in a round ..."""
PROBE_CELLS = 200
"""... rounds repeated until every column has this many probed cells ..."""
MAX_ROUNDS = 5
"""... or this many rounds of ``transform`` ..."""
MAX_REFITS = 2
"""... or of fits are done."""
MIN_RESIDUALS = 10
"""Fewer residuals of a column than this get a warning (one alone is not used: the draws are
the point)."""
MODEL_ROWS = 20
"""Observed rows from which a label column's draws come from a classifier of its own."""
MIN_PAIRS = 10
"""Rows with both cells observed from which two numeric columns' correlation is used."""

#: Imputes ``values`` (the optimised space, NaN where missing) as the point was, seeded by
#: the int: their standardised completion.
Impute = Callable[[np.ndarray, int], np.ndarray]


@dataclass(frozen=True, eq=False)
class ProbeErrors:
    """What the probe measured: per numeric coordinate its line (intercept and slope, a row of
    ``lines``: the true value on the imputed one, :func:`calibration`) and the residuals about
    it (standardised units, empty where nothing was probed), per categorical column
    ``P(true label | imputed label)`` as a matrix whose row ``l`` sums to one; and the
    correlation of the numeric coordinates' observed values (:func:`observed_correlation`), by
    which cells missing together are drawn together."""

    residuals: list[np.ndarray]
    label_given_imputed: list[np.ndarray]
    correlation: np.ndarray
    lines: np.ndarray


def probe_errors(
    est: Any, values: np.ndarray, rng: np.random.Generator, impute: Impute, *, refits: bool
) -> ProbeErrors:
    """The errors of ``impute`` (the fitted imputer ``est``'s way to the point imputation of
    ``values``, the optimised space with NaN where missing: a fit when ``refits``, else
    ``transform``'s) on rounds of probe cells of ``values`` (module docstring)."""
    encoding: TableEncoding = est.encoding_
    mask = np.isnan(values)
    # Cells never probed: the missing ones, and labels unseen in fit (at their column's centre).
    excluded = mask | _unseen_labels(values, encoding)
    groups = encoding.groups if encoding.mixed else None
    per_column = (~encoding.column_mask(excluded)).sum(axis=0)
    observed = int(per_column.sum())
    share = min(REFIT_SHARE if refits else PROBE_SHARE, PROBE_MAX_CELLS / max(observed, 1))
    rounds = min(
        MAX_REFITS if refits else MAX_ROUNDS,
        math.ceil(PROBE_CELLS / max(share * per_column.min(), 1.0)),
    )
    Z = (values - est.mean_) / est.scale_
    p = len(encoding.numeric)
    truths: list[list[np.ndarray]] = [[] for _ in range(p)]
    guesses: list[list[np.ndarray]] = [[] for _ in range(p)]
    counts = [np.zeros((_n_labels(encoding, j),) * 2) for j in encoding.categorical]
    truth = encoding.decode_labels(np.where(mask, 0.0, Z))
    probed = np.zeros_like(mask)
    for _ in range(rounds):
        available = excluded | probed
        remaining = int((~encoding.column_mask(available)).sum())
        if remaining <= len(encoding.columns):
            break
        probe = holdout_cells(available, min(share * observed / remaining, 1.0), rng, groups)
        probed |= probe
        filled = impute(np.where(probe, np.nan, values), int(rng.integers(2**31 - 1)))
        for k in range(p):
            truths[k].append(Z[probe[:, k], k])
            guesses[k].append(filled[probe[:, k], k])
        guess = encoding.decode_labels(filled)
        for i, (a, _) in enumerate(encoding.blocks):
            cells = probe[:, a]
            np.add.at(counts[i], (guess[i][cells], truth[i][cells]), 1.0)
    lines = np.tile([0.0, 1.0], (p, 1))
    pools = []
    for k in range(p):
        true, imputed = (np.concatenate(c) if c else np.zeros(0) for c in (truths[k], guesses[k]))
        lines[k], residuals = calibration(true, imputed)
        pools.append(residuals)
    for k, pool in enumerate(pools):
        if pool.size >= MIN_RESIDUALS or not mask[:, k].any():
            continue
        name = encoding.columns[encoding.numeric[k]].name
        alone = refits and int((~mask[:, k]).sum()) == 1  # the fitted table has one
        why = (
            "it has one observed value"
            if alone
            else "the table has few observed values of it"
            if refits
            else "sample more rows at once"
        )
        if pool.size < 2:  # one residual would shift every draw alike: no spread, a bias
            pools[k] = np.zeros(0)
            what = "no observed cell" if not pool.size else "only one observed cell"
            then = "its draws are its point imputation"
        else:
            what = f"only {pool.size} observed cells"
            then = f"its draws take at most {pool.size} values around its point imputation"
        warnings.warn(
            f"{est._owner()}.sample: {what} of column {name!r} could be hidden to measure its "
            f"error, so {then} ({why}).",
            stacklevel=3,
        )
    fitted = encoding.decode_labels(est.X_fit_)
    priors = []
    for i, (a, _) in enumerate(encoding.blocks):
        known = truth[i][~excluded[:, a]]
        codes = known if known.size else fitted[i]  # none observed here: the fit's shares
        shares = np.bincount(codes, minlength=len(counts[i])).astype(np.float64)
        priors.append(shares / shares.sum())
    return ProbeErrors(
        pools,
        [_label_given_imputed(c, s) for c, s in zip(counts, priors, strict=True)],
        observed_correlation(Z[:, :p]),
        lines,
    )


def calibration(true: np.ndarray, imputed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The line of ``true`` on ``imputed`` (intercept, slope) and its residuals, each that of
    the line fitted without its cell (leave-one-out): what a new cell's error about the line is.
    The slope is the least-squares one drawn towards one as far as it is uncertain (by the
    share ``se² / (b - 1)²`` of its distance ``b - 1``, all of it where that share is one or
    more), and never below zero. Fewer than :data:`MIN_RESIDUALS` cells, or imputed values
    all alike: the line is the identity and the residuals ``true - imputed``."""
    spread = imputed - imputed.mean() if imputed.size else imputed
    sxx = float(spread @ spread)
    if true.size < MIN_RESIDUALS or sxx <= 1e-12 * true.size:
        return np.array([0.0, 1.0]), true - imputed
    least_squares = float(spread @ (true - true.mean())) / sxx
    errors = true - true.mean() - least_squares * spread
    variance = float(errors @ errors) / (true.size - 2) / sxx  # the least-squares slope's
    gap = least_squares - 1.0
    kept = max(1.0 - variance / gap**2, 0.0) if gap else 0.0
    slope = max(1.0 + kept * gap, 0.0)
    intercept = float(true.mean() - slope * imputed.mean())
    leverage = 1.0 / true.size + kept * spread**2 / sxx
    fitted = intercept + slope * imputed
    return np.array([intercept, slope]), (true - fitted) / np.maximum(1.0 - leverage, 1e-3)


def observed_correlation(Z: np.ndarray) -> np.ndarray:
    """The correlation of the columns of ``Z`` (NaN where missing), each pair over the rows
    where both are observed; 0 for a pair seen together in fewer than :data:`MIN_PAIRS` rows
    or where one of them is constant there. Made positive definite (its eigenvalues at least
    1e-3) and rescaled to a unit diagonal."""
    r = pd.DataFrame(Z).corr(min_periods=MIN_PAIRS).to_numpy(copy=True)  # pairwise; NaN: unknown
    r[~np.isfinite(r)] = 0.0
    r = np.clip((r + r.T) / 2, -1.0, 1.0)
    np.fill_diagonal(r, 1.0)
    values, vectors = np.linalg.eigh(r)
    r = (vectors * np.maximum(values, 1e-3)) @ vectors.T
    scale = np.sqrt(np.diag(r))
    return r / scale[:, None] / scale[None, :]


def joint_scores(
    mask: np.ndarray, correlation: np.ndarray, n_draws: int, rng: np.random.Generator
) -> np.ndarray:
    """Normal scores of shape ``(n_draws, mask.sum())``, one per ``mask`` cell in row-major
    order (that of ``np.nonzero``), standard normal each, those of a row's cells correlated as
    their columns are given the row's other columns, in the normal model of ``correlation``
    (the inverse of its precision matrix's block of the missing columns, rescaled to a unit
    diagonal)."""
    per_row = mask.sum(axis=1)
    scores = rng.standard_normal((n_draws, int(per_row.sum())))
    several = per_row >= 2
    if not several.any():
        return scores
    first = np.cumsum(per_row) - per_row  # each row's first score
    precision = np.linalg.inv(correlation)
    patterns, which = np.unique(mask[several], axis=0, return_inverse=True)
    rows = np.flatnonzero(several)
    for i, pattern in enumerate(patterns):
        cols = np.flatnonzero(pattern)
        at = first[rows[which.ravel() == i]][:, None] + np.arange(cols.size)
        given = np.linalg.inv(precision[np.ix_(cols, cols)])
        scale = np.sqrt(np.diag(given))
        root = np.linalg.cholesky(given / scale[:, None] / scale[None, :])
        scores[:, at] = scores[:, at] @ root.T
    return scores


def _unseen_labels(values: np.ndarray, encoding: TableEncoding) -> np.ndarray:
    """The coordinates of observed labels not seen in fit (encoded at their column's centre)."""
    unseen = np.zeros(values.shape, dtype=bool)
    for j, (a, b) in zip(encoding.categorical, encoding.blocks, strict=True):
        embedding = encoding.columns[j].embedding
        assert embedding is not None
        centre = np.all(values[:, a:b] == embedding.mean(axis=0), axis=1)
        unseen[:, a:b] = centre[:, None]
    return unseen


def _n_labels(encoding: TableEncoding, j: int) -> int:
    labels = encoding.columns[j].labels
    assert labels is not None
    return len(labels)


def _label_given_imputed(counts: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """``P(true | imputed)``: each row of ``counts`` plus one cell spread by ``shares``."""
    smoothed = counts + shares[None, :]
    return smoothed / smoothed.sum(axis=1, keepdims=True)


def label_probabilities(
    point: np.ndarray,
    mask: np.ndarray,
    encoding: TableEncoding,
    rng: np.random.Generator,
    n_jobs: int | None,
) -> list[np.ndarray | None]:
    """Per label column, the probabilities of its labels (one row per missing cell of ``mask``,
    one column per label) from a classifier of the column on the other columns of ``point``
    (the standardised completion), fitted on the rows where the column is observed (at most
    :data:`tdm._starts.MAX_MODEL_ROWS` of them, a uniform sample); ``None``
    where nothing is missing or fewer than :data:`MODEL_ROWS` observed rows hold two labels."""
    table, categorical = label_table(point, np.zeros_like(mask), encoding)[:2]
    missing = encoding.column_mask(mask)
    p = len(encoding.numeric)
    imputed = [p + i for i, j in enumerate(encoding.categorical) if missing[:, j].any()]
    columns = model_features(table, categorical, np.array(imputed, dtype=np.int64), rng)
    unseen = encoding.column_mask(_unseen_labels(point, encoding))
    probabilities: list[np.ndarray | None] = []
    for i, j in enumerate(encoding.categorical):
        k = p + i
        rows = missing[:, j]
        fitted = fitted_rows(~rows & ~unseen[:, j], rng)
        codes = table[fitted, k]
        if not rows.any() or codes.size < MODEL_ROWS or np.unique(codes).size < 2:
            probabilities.append(None)
            continue
        features = table[:, columns[k]]
        model = label_model(features[fitted], codes, rng, n_jobs, judged_by="probabilities")
        proba = np.zeros((int(rows.sum()), _n_labels(encoding, j)))
        proba[:, model.classes_.astype(np.int64)] = model.predict_proba(features[rows])
        probabilities.append(proba)
    return probabilities


def draw_cells(
    point: np.ndarray,
    mask: np.ndarray,
    errors: ProbeErrors,
    probabilities: list[np.ndarray | None],
    encoding: TableEncoding,
    n_draws: int,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """``n_draws`` copies of ``point`` (the standardised completion) whose ``mask`` cells are
    drawn: numeric cells through their column's line plus a residual of their column, at the
    rank of their :func:`joint_scores`, label cells from their ``probabilities``
    (:func:`label_probabilities`), or by ``P(t | l)`` where a column has none."""
    p = len(encoding.numeric)
    imputed = encoding.decode_labels(point)
    scores = joint_scores(mask[:, :p], errors.correlation, n_draws, rng)
    column_of_score = np.nonzero(mask[:, :p])[1]
    own_scores = [np.flatnonzero(column_of_score == k) for k in range(p)]
    pools = [np.sort(pool) for pool in errors.residuals]
    draws = []
    lined = point.copy()
    lined[:, :p] = errors.lines[:, 0] + errors.lines[:, 1] * point[:, :p]
    for m in range(n_draws):
        draw = point.copy()
        for k in range(p):
            cells = mask[:, k]
            pool = pools[k]
            if pool.size and cells.any():
                rank = (special.ndtr(scores[m, own_scores[k]]) * pool.size).astype(np.int64)
                draw[cells, k] = lined[cells, k] + pool[np.minimum(rank, pool.size - 1)]
        for i, (j, (a, b)) in enumerate(zip(encoding.categorical, encoding.blocks, strict=True)):
            cells = mask[:, a]
            if not cells.any():
                continue
            own = probabilities[i]
            chances = errors.label_given_imputed[i][imputed[i][cells]] if own is None else own
            cumulative = np.cumsum(chances, axis=1)
            u = rng.random(int(cells.sum()))[:, None]
            drawn = np.minimum((cumulative < u).sum(axis=1), cumulative.shape[1] - 1)
            embedding = encoding.columns[j].embedding
            assert embedding is not None
            draw[np.flatnonzero(cells), a:b] = embedding[drawn]
        draws.append(draw)
    return draws
