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

- numeric: the residuals, true minus imputed value (standardised units). A draw adds to each
  missing cell a residual drawn at random from its column's residuals, so that the draws of a
  cell have the spread of the imputer's errors, and their quantiles make its interval.
- label: the counts of (imputed label, true label) pairs, ``P(t | l)``: the probed cells
  imputed as ``l``, counted by their true label, plus one cell spread by the observed label
  shares (so a label never probed keeps a small chance, and a rare imputed label leans on the
  shares).

Both are calibrated where the probe is like the missing cells (missing completely at random):
the probe cells are a random share of the observed ones. The residuals of a column are drawn
independently of the row's other cells.

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

from tdm._early_stopping import holdout_cells
from tdm._mixed import TableEncoding
from tdm._starts import fitted_rows, label_model, label_table, model_features

__all__ = ["PROBE_CELLS", "ProbeErrors", "draw_cells", "label_probabilities", "probe_errors"]

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

#: Imputes ``values`` (the optimised space, NaN where missing) as the point was, seeded by
#: the int: their standardised completion.
Impute = Callable[[np.ndarray, int], np.ndarray]


@dataclass(frozen=True, eq=False)
class ProbeErrors:
    """What the probe measured: per numeric coordinate its residuals (standardised units, empty
    where nothing was probed), per categorical column ``P(true label | imputed label)`` as a
    matrix whose row ``l`` sums to one."""

    residuals: list[np.ndarray]
    label_given_imputed: list[np.ndarray]


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
    residuals: list[list[np.ndarray]] = [[] for _ in range(p)]
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
            residuals[k].append(Z[probe[:, k], k] - filled[probe[:, k], k])
        guess = encoding.decode_labels(filled)
        for i, (a, _) in enumerate(encoding.blocks):
            cells = probe[:, a]
            np.add.at(counts[i], (guess[i][cells], truth[i][cells]), 1.0)
    pools = [np.concatenate(r) if r else np.zeros(0) for r in residuals]
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
        pools, [_label_given_imputed(c, s) for c, s in zip(counts, priors, strict=True)]
    )


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
    drawn: numeric cells plus a residual of their column, label cells from their
    ``probabilities`` (:func:`label_probabilities`), or by ``P(t | l)`` where a column has
    none."""
    p = len(encoding.numeric)
    imputed = encoding.decode_labels(point)
    draws = []
    for _ in range(n_draws):
        draw = point.copy()
        for k in range(p):
            cells = mask[:, k]
            pool = errors.residuals[k]
            if pool.size and cells.any():
                draw[cells, k] += rng.choice(pool, size=int(cells.sum()))
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
