"""Starting points of the missing cells: chained equations on LightGBM tree ensembles or on
Bayesian linear regressions (ICE), and the self-supervised choice between them
(``TDMImputer(init="auto")``).

A *trees* start imputes one column at a time in ascending order of missingness, for
:data:`TREE_ROUNDS` rounds, each column on every other one (in a table of more than
:data:`MAX_MODEL_FEATURES` others, on that many, those that explain most of it), missing values
left missing in the first round. A column's model is fitted on at most :data:`MAX_MODEL_ROWS`
of its observed rows. A numeric column's model is LightGBM's, label columns as native categorical
features, sized by its fitted rows: gradient-boosted trees whose number early stopping chooses
on a held-out share of the rows, or, below :data:`BOOSTING_ROWS` rows, a random forest of
:data:`FOREST_TREES` trees, which overfits less on few rows (on a handful of rows, where such a
forest can predict NaN, the column's observed mean). A label column's model is a random
forest classifier (:data:`LABEL_TREES` trees, leaves of at least :data:`LABEL_LEAF_ROWS` rows;
its most probable label) where its out-of-bag accuracy beats the share of the column's commonest
label, and that label otherwise: a column the other cells do not predict gets its mode, as a
classifier's guesses there are worse than the mode. So does a column whose labels outnumber half
its observed rows (names, identifiers), with no classifier fitted.

The ICE start writes out the rounds of scikit-learn's ``IterativeImputer`` with a
``BayesianRidge`` per coordinate, the same imputation bit for bit, without its
``ConvergenceWarning`` (a start stops after a fixed number of rounds by design). The benchmark's
ICE and MissForest baselines are built here too (:func:`make_ice`, :func:`make_missforest`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import lightgbm
import numpy as np
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.experimental import enable_iterative_imputer  # noqa: F401  (enables the import)
from sklearn.impute import IterativeImputer, SimpleImputer
from sklearn.linear_model import BayesianRidge

from tdm._association import explained_shares, strongest
from tdm._config import Config
from tdm._early_stopping import holdout_cells
from tdm._mixed import TableEncoding
from tdm._seeds import spawn_seeds

__all__ = [
    "LARGE_CELLS",
    "TREE_ROUNDS",
    "Start",
    "choose_start",
    "context_start",
    "fit_start",
    "fitted_rows",
    "ice_models",
    "label_model",
    "label_table",
    "make_ice",
    "make_missforest",
    "model_features",
    "settle_many_labels",
    "start_fill",
]

TREE_ROUNDS = 2
"""Rounds of the trees start: every column with a missing cell is imputed once per round."""
ICE_ROUNDS = 10
"""Most rounds of the ICE start (scikit-learn's ``IterativeImputer`` default)."""
BOOSTING_ROWS = 1_000
"""Fitted rows from which a column's model is gradient boosted; below, a random forest."""
FOREST_TREES = 50
"""Trees of a random-forest model, each grown on 63% of the rows (bagging) among all features: a
column set by one other column is found by every tree."""
LABEL_TREES = 100
"""Trees of a label column's random forest ..."""
LABEL_LEAF_ROWS = 5
"""... whose leaves hold at least this many rows."""
MAX_BOOSTED_TREES = 1_000
"""Most trees of a gradient-boosted model; early stopping usually stops far sooner ..."""
EARLY_STOPPING_SHARE = 0.1
"""... on this share of its fitted rows, held out ..."""
EARLY_STOPPING_PATIENCE = 20
"""... once this many trees in a row have not lowered their loss."""
MAX_CATEGORICAL_LABELS = 255
"""Labels from which a label column is an ordinal feature (its codes) rather than a categorical
one (LightGBM's bins of categories)."""

PROBE_FRACTION = 0.05
"""Share of the observed cells hidden by ``init="auto"`` to score the candidate starts..."""
PROBE_MAX_CELLS = 2_000
"""... but never more cells than this."""
LARGE_CELLS = 100_000
"""Observed cells (a categorical cell counts once) from which a table is *large*: there
``init="auto"`` takes the trees start without a probe, ICE's linear models being no match for the
trees' on that many cells and a second trees run the larger cost."""
TREES_MARGIN = 0.9
"""``init="auto"`` takes the trees start only if its probe error is below this times ICE's."""
MAX_MODEL_ROWS = 50_000
"""Most rows a column's model of the trees start is fitted on: a column observed in more rows
is fitted on a uniform sample of this many of them (a larger sample costs time in proportion
and gains the model little), and predicts every missing cell."""
MAX_MODEL_FEATURES = 25
"""Most other columns a column's model of the trees start is fitted on: in a wider table, the
ones that explain most of its variation (:func:`tdm._association.explained_shares`), as chained
equations choose predictors on many columns; a model's time grows with its columns, and more
columns than this seldom predict a column better."""
START_CONTEXT_ROWS = 10_000
"""Fitted rows given as context when ICE or the trees start new rows."""

#: Reports one more column model fitted by a start (:func:`fit_start`'s ``progress``).
Progress = Callable[[], None]


def make_ice(seed: int, *, max_iter: int = ICE_ROUNDS, tol: float = 1e-3) -> IterativeImputer:
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


def observed_cells(mask: np.ndarray, encoding: TableEncoding) -> int:
    """Observed cells of ``mask``, a categorical cell counted once."""
    return int((~encoding.column_mask(mask)).sum())


def start_fill(
    init: str,
    values: np.ndarray,
    mask: np.ndarray,
    seed: int,
    encoding: TableEncoding,
    n_jobs: int | None = None,
    progress: Progress | None = None,
) -> np.ndarray:
    """``values`` (the optimised space of ``encoding``) with its ``mask`` cells replaced by the
    ``"ice"`` or ``"trees"`` start.

    ICE: the rounds of ``make_ice(seed).fit_transform`` written out (:func:`_ice_rounds`), every
    coordinate regressed on its own. Trees: :func:`_tree_rounds`, each model on ``n_jobs``
    threads (LightGBM's meaning; ``None``: 1). ``progress`` is called after each model, and
    :func:`ice_models` or :func:`tree_models` times in all.
    """
    if init == "trees":
        return _tree_rounds(values, mask, seed, encoding, n_jobs, progress)
    return np.where(mask, _ice_rounds(np.where(mask, np.nan, values), progress=progress), values)


def ice_models(mask: np.ndarray) -> int:
    """The models an ICE start of the ``mask`` cells plans: one per coordinate with a missing
    cell and round (none where only one coordinate exists or nothing is observed)."""
    if mask.shape[1] == 1 or mask.all():
        return 0
    return ICE_ROUNDS * int(mask.any(axis=0).sum())


def tree_models(mask: np.ndarray, encoding: TableEncoding) -> int:
    """The models a trees start of the ``mask`` cells fits: one per column with a missing cell
    and round (none where only one column exists)."""
    missing = encoding.column_mask(mask).any(axis=0)
    return 0 if len(encoding.columns) == 1 else TREE_ROUNDS * int(missing.sum())


def _tree_rounds(
    values: np.ndarray,
    mask: np.ndarray,
    seed: int,
    encoding: TableEncoding,
    n_jobs: int | None,
    progress: Progress | None,
) -> np.ndarray:
    """The trees start (module docstring): ``values`` with its ``mask`` cells imputed.

    The table is seen one column per original column (:func:`label_table`): a numeric column's
    value or a label column's code, NaN where missing. A table of one column gets its mean (or
    most frequent label), as chained equations have nothing to regress on.
    """
    table, categorical, missing = label_table(values, mask, encoding)
    rng = np.random.default_rng(seed)
    columns = model_features(table, categorical, np.flatnonzero(missing.any(axis=0)), rng)
    order = np.argsort(missing.mean(axis=0), kind="mergesort")
    if table.shape[1] == 1:
        observed = table[~missing[:, 0], 0]
        table[missing[:, 0], 0] = _most_frequent(observed) if categorical[0] else observed.mean()
    for _ in range(TREE_ROUNDS if table.shape[1] > 1 else 0):
        for k in order:
            rows = missing[:, k]
            if not rows.any():
                continue
            features, target = table[:, columns[k]], table[:, k]
            fitted = fitted_rows(~rows, rng)
            model: Any
            if not categorical[k] and np.count_nonzero(~rows) < 2:
                model = LabelShares(target[~rows])  # one value observed: nothing to regress on
            elif not categorical[k]:
                labels = categorical[columns[k]]
                model = _regressor(features, target, fitted, labels, rng, n_jobs)
            elif np.unique(target[fitted]).size > 1:
                model = label_model(features[fitted], target[fitted], rng, n_jobs)
            else:
                model = LabelShares(target[~rows])  # one label observed: it is every guess
            guesses = model.predict(features[rows])
            if not np.isfinite(guesses).all():  # LightGBM's forest of a few rows can be NaN
                guesses = np.full(guesses.shape, target[~rows].mean())
            table[rows, k] = guesses
            if progress is not None:
                progress()
    return np.where(mask, _from_label_table(table, encoding), values)


def model_features(
    table: np.ndarray, categorical: np.ndarray, targets: np.ndarray, rng: np.random.Generator
) -> dict[int, np.ndarray]:
    """Per column of ``targets`` in a label ``table`` (:func:`label_table`, NaN where missing),
    the other columns its model is fitted on, in ascending order: all of them, or in a table of
    more than :data:`MAX_MODEL_FEATURES` others, that many, those that explain most of its
    variation (drawing from ``rng`` only then)."""
    n_columns = table.shape[1]
    if n_columns - 1 <= MAX_MODEL_FEATURES:
        return {int(k): np.delete(np.arange(n_columns), k) for k in targets}
    shares = explained_shares(table, categorical, rng, targets)
    return {int(k): strongest(shares, k, MAX_MODEL_FEATURES) for k in targets}


def fitted_rows(observed: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The rows a column's model is fitted on: its ``observed`` rows or, where they are more
    than :data:`MAX_MODEL_ROWS`, a uniform sample of that many of them (drawn from ``rng``,
    which is left untouched otherwise)."""
    count = np.count_nonzero(observed)
    if count <= MAX_MODEL_ROWS:
        return observed
    sample = np.zeros_like(observed)
    sample[rng.choice(np.flatnonzero(observed), MAX_MODEL_ROWS, replace=False)] = True
    return sample


def label_table(
    values: np.ndarray, mask: np.ndarray, encoding: TableEncoding
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One column per original column, the numeric ones first as in the optimised space:
    numeric values, then each label column's codes (the index of its point), NaN where
    missing; which columns are label columns; and the missing cells, in that order."""
    p = len(encoding.numeric)
    missing = encoding.column_mask(mask)[:, [*encoding.numeric, *encoding.categorical]]
    codes = [c.astype(np.float64) for c in encoding.decode_labels(np.where(mask, 0.0, values))]
    table = np.column_stack([values[:, :p], *codes]) if codes else values[:, :p].copy()
    table[missing] = np.nan
    categorical = np.arange(table.shape[1]) >= p
    return table, categorical, missing


def _from_label_table(table: np.ndarray, encoding: TableEncoding) -> np.ndarray:
    """The optimised space's values of a complete label table: each code as its label's point."""
    p = len(encoding.numeric)
    points = [
        encoding.columns[j].embedding[table[:, p + i].astype(np.int64)]  # type: ignore[index]
        for i, j in enumerate(encoding.categorical)
    ]
    return np.column_stack([table[:, :p], *points]) if points else table[:, :p].copy()


def settle_many_labels(
    init: str,
    values: np.ndarray,
    mask: np.ndarray,
    encoding: TableEncoding,
    rng: np.random.Generator,
    n_jobs: int | None,
) -> np.ndarray:
    """``values`` (the ``init`` start's completion of the ``mask`` cells, or NaN there for the
    mean start) with each missing cell of a column of many labels at its label's point: the
    label of the column's model (:func:`label_model`) on the other columns as started, or, after
    the mean start, the column's commonest label. The trees start's own guesses are such labels
    already. Such cells are not optimised: among more labels than coordinates, the label of
    largest weight of a cell's mix follows the geometry of the projected points (the labels
    nearest their centre) more than the row."""
    many = encoding.many_label_cells(mask)
    if init == "trees" or not many.any():
        return values
    known = np.where(mask & ~many, np.nan if init == "mean" else values, values)
    table, _, missing = label_table(np.where(many, 0.0, known), many, encoding)
    for k in range(len(encoding.numeric), table.shape[1]):
        rows = missing[:, k]
        if not rows.any():
            continue
        target = table[:, k]
        if init == "mean" or np.unique(target[~rows]).size < 2:
            guesses = np.full(rows.sum(), _most_frequent(target[~rows]))
        else:
            others = np.delete(table, k, axis=1)
            fitted = fitted_rows(~rows, rng)
            guesses = label_model(others[fitted], target[fitted], rng, n_jobs).predict(others[rows])
        table[rows, k] = guesses
    return np.where(many, _from_label_table(np.nan_to_num(table), encoding), values)


def _most_frequent(codes: np.ndarray) -> float:
    labels, counts = np.unique(codes, return_counts=True)
    return float(labels[np.argmax(counts)])


def _regressor(
    features: np.ndarray,
    target: np.ndarray,
    fitted: np.ndarray,
    feature_labels: np.ndarray,
    rng: np.random.Generator,
    n_jobs: int | None,
) -> lightgbm.LGBMRegressor:
    """A numeric column's model (module docstring) of ``target`` on ``features``, fitted on the
    ``fitted`` rows, sized by them, seeded by ``rng``, on ``n_jobs`` threads. Label features
    (``feature_labels``) with at most :data:`MAX_CATEGORICAL_LABELS` codes are categorical."""
    X, y = features[fitted], target[fitted]
    categorical = [
        int(i)
        for i in np.flatnonzero(feature_labels)
        if np.nanmax(features[:, i], initial=0) < MAX_CATEGORICAL_LABELS
    ]
    params = _model_params(y.size, int(rng.integers(2**31 - 1)), n_jobs)
    model = lightgbm.LGBMRegressor(**params)
    fit: dict[str, Any] = {"categorical_feature": categorical or "auto"}
    if params["boosting_type"] == "gbdt":
        held = rng.random(y.size) < EARLY_STOPPING_SHARE
        fit.update(
            eval_X=X[held],
            eval_y=y[held],
            callbacks=[lightgbm.early_stopping(EARLY_STOPPING_PATIENCE, verbose=False)],
        )
        X, y = X[~held], y[~held]
    return model.fit(X, y, **fit)


class LabelShares:
    """A label column's model that knows nothing of the row: it predicts the commonest label of
    the codes it is fitted on, and their shares as every row's probabilities."""

    def __init__(self, codes: np.ndarray) -> None:
        self.classes_, counts = np.unique(codes, return_counts=True)
        self.shares = counts / counts.sum()

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.full(len(X), self.classes_[np.argmax(self.shares)])

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return np.tile(self.shares, (len(X), 1))


def label_model(
    X: np.ndarray,
    y: np.ndarray,
    rng: np.random.Generator,
    n_jobs: int | None,
    *,
    judged_by: Literal["accuracy", "probabilities"] = "accuracy",
) -> RandomForestClassifier | LabelShares:
    """A label column's model of the codes ``y`` (at least two labels) on ``X`` (NaN allowed):
    a random forest classifier where it beats :class:`LabelShares` out of bag, else the shares
    (module docstring), as where ``X`` has no column or the labels outnumber half the rows (most
    labels then held by one row, nothing to learn). ``judged_by="accuracy"``, for a guess: the
    forest's out-of-bag accuracy against the share of the commonest code; ``"probabilities"``,
    for draws: its out-of-bag Brier score against the shares' (a forest that never changes the
    commonest guess may still know which rows are likelier to hold a rare label)."""
    shares = LabelShares(y)
    if X.shape[1] == 0 or 2 * shares.classes_.size > y.size:
        return shares
    forest = RandomForestClassifier(
        LABEL_TREES,
        min_samples_leaf=LABEL_LEAF_ROWS,
        oob_score=True,
        n_jobs=1 if n_jobs is None else n_jobs,
        random_state=int(rng.integers(2**31 - 1)),
    ).fit(X, y)
    if judged_by == "accuracy":
        return forest if forest.oob_score_ > shares.shares.max() else shares
    truth = (y[:, None] == forest.classes_[None, :]).astype(np.float64)
    votes = forest.oob_decision_function_.sum(axis=1)
    scored = np.isfinite(votes) & (votes > 0)  # rows some tree left out (others have no vote)
    forest_brier = np.mean(((forest.oob_decision_function_ - truth)[scored] ** 2).sum(axis=1))
    shares_brier = np.mean(((shares.shares[None, :] - truth) ** 2).sum(axis=1))
    return forest if forest_brier < shares_brier else shares


def _model_params(n_rows: int, seed: int, n_jobs: int | None) -> dict[str, Any]:
    """LightGBM's settings of a column's model fitted on ``n_rows`` rows (module docstring);
    deterministic for a seed, whatever the threads."""
    common = {
        "random_state": seed,
        "n_jobs": 1 if n_jobs is None else n_jobs,
        "deterministic": True,
        "force_col_wise": True,
        "verbose": -1,
    }
    if n_rows >= BOOSTING_ROWS:
        return {
            **common,
            "boosting_type": "gbdt",
            "n_estimators": MAX_BOOSTED_TREES,
            "learning_rate": 0.1,
            "num_leaves": 63,
        }
    return {
        **common,
        "boosting_type": "rf",
        "n_estimators": FOREST_TREES,
        "num_leaves": 31,
        "min_child_samples": int(np.clip(n_rows // 50, 2, 20)),
        "subsample": 0.632,
        "subsample_freq": 1,
    }


def _ice_rounds(
    X: np.ndarray,
    max_iter: int = ICE_ROUNDS,
    tol: float = 1e-3,
    progress: Progress | None = None,
) -> np.ndarray:
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
    taken in the same order. ``progress`` is called after each model, and for each model of the
    rounds an early stop leaves out.
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
    rounds = 0
    while rounds < max_iter:
        rounds += 1
        for j in order:
            rows = missing[:, j]
            if not rows.any():
                continue  # scikit-learn fits a model here too, and uses none of it
            others = filled[:, np.concatenate((np.arange(j), np.arange(j + 1, n_features)))]
            model = BayesianRidge().fit(others[~rows], filled[:, j][~rows])
            filled[rows, j] = model.predict(others[rows])
            if progress is not None:
                progress()
        if np.linalg.norm(filled - previous, ord=np.inf) < tolerance:
            break
        previous = filled.copy()
    if progress is not None:
        for _ in range((max_iter - rounds) * int(missing.any(axis=0).sum())):
            progress()
    return filled


class _Models:
    """Counts a start's fitted models, reporting ``(done, planned)`` after each."""

    def __init__(self, planned: int, report: Callable[[int, int], None] | None) -> None:
        self.planned, self.done, self.report = planned, 0, report

    def __call__(self) -> None:
        self.done += 1
        if self.report is not None:
            self.report(self.done, max(self.done, self.planned))


def choose_start(
    Z: np.ndarray,
    mask: np.ndarray,
    rng: np.random.Generator,
    seed: int,
    encoding: TableEncoding,
    n_jobs: int | None = None,
    report: Callable[[int, int], None] | None = None,
) -> tuple[str, dict[str, float], np.ndarray]:
    """``init="auto"``: ICE's start, or the trees' where they impute probe cells clearly better.

    A share (:data:`PROBE_FRACTION`, at most :data:`PROBE_MAX_CELLS` cells) of the observed
    cells is hidden (a categorical cell's coordinates together), both candidates impute them
    along with the missing cells, and their mean absolute errors (standardised units) on the
    probe cells are compared. The trees are chosen when their error is below
    :data:`TREES_MARGIN` times ICE's, ICE being the cheaper. No ground truth of the missing
    cells is used. Returns the choice, both scores, and the chosen start of the ``mask`` cells,
    computed again on every observed cell.
    """
    groups = encoding.groups if encoding.mixed else None
    observed = observed_cells(mask, encoding)
    probe = holdout_cells(
        mask, min(PROBE_FRACTION, PROBE_MAX_CELLS / max(observed, 1)), rng, groups
    )
    hidden = mask | probe
    chosen = {"ice": ice_models(mask), "trees": tree_models(mask, encoding)}
    probed = ice_models(hidden) + tree_models(hidden, encoding)
    models = _Models(probed + max(chosen.values()), report)
    filled = {
        name: start_fill(name, Z, hidden, seed, encoding, n_jobs, models)
        for name in ("ice", "trees")
    }
    # Scored as each start is used: a column of many labels keeps a classifier's labels.
    filled["ice"] = settle_many_labels("ice", filled["ice"], hidden, encoding, rng, n_jobs)
    # No probe cell (each column's few observed cells all kept): no score, ICE the cheaper.
    scores = {
        name: float(np.abs(f[probe] - Z[probe]).mean()) if probe.any() else math.nan
        for name, f in filled.items()
    }
    choice = "trees" if scores["trees"] < TREES_MARGIN * scores["ice"] else "ice"
    models.planned = models.done + chosen[choice]
    return choice, scores, start_fill(choice, Z, mask, seed, encoding, n_jobs, models)


@dataclass(frozen=True, eq=False)
class Start:
    """The start of a fit (:func:`fit_start`).

    Attributes
    ----------
    init : str
        The start used: ``init``, or what ``"auto"`` chose.
    scores : dict or None
        Where ``"auto"`` probed: each candidate's mean absolute error on the probe cells.
    values : ndarray or None
        ``Z`` with its missing cells started (``None``: the mean start).
    """

    init: str
    scores: dict[str, float] | None = None
    values: np.ndarray | None = None


def fit_start(
    init: str,
    Z: np.ndarray,
    mask: np.ndarray,
    rng: np.random.Generator,
    encoding: TableEncoding,
    config: Config,
    report: Callable[[int, int], None] | None = None,
) -> Start:
    """The ``init`` start of the ``mask`` cells of ``Z``, its models on ``config.n_jobs``
    threads, ``report(done, planned)`` called after each trees model. ``"auto"`` probes ICE
    against the trees (:func:`choose_start`) on a table of fewer than :data:`LARGE_CELLS`
    observed cells, and takes the trees from there. The mean start draws nothing from ``rng``.
    """
    if init == "mean":
        return Start(init)
    seed = int(rng.integers(2**31 - 1))
    if init == "auto" and observed_cells(mask, encoding) < LARGE_CELLS:
        init, scores, start = choose_start(Z, mask, rng, seed, encoding, config.n_jobs, report)
        return Start(init, scores, start)
    init = "trees" if init == "auto" else init
    models = _Models(tree_models(mask, encoding) if init == "trees" else ice_models(mask), report)
    return Start(init, None, start_fill(init, Z, mask, seed, encoding, config.n_jobs, models))


def context_start(
    init: str,
    X_fit: np.ndarray,
    Z: np.ndarray,
    mask: np.ndarray,
    rng: np.random.Generator,
    encoding: TableEncoding,
    n_jobs: int | None = None,
) -> np.ndarray:
    """The ``init`` start of new rows ``Z``, imputed beside (at most
    :data:`START_CONTEXT_ROWS`) complete fitted rows ``X_fit`` as context, the models on
    ``n_jobs`` threads."""
    n_fit = X_fit.shape[0]
    context = X_fit
    if n_fit > START_CONTEXT_ROWS:
        context = X_fit[np.sort(rng.choice(n_fit, START_CONTEXT_ROWS, replace=False))]
    stacked = np.vstack([np.asarray(context, dtype=np.float64), Z])
    known = np.zeros(context.shape, dtype=bool)
    seed = int(rng.integers(2**31 - 1))
    stacked_mask = np.vstack([known, mask])
    filled = start_fill(init, stacked, stacked_mask, seed, encoding, n_jobs)
    filled = settle_many_labels(init, filled, stacked_mask, encoding, rng, n_jobs)
    return filled[context.shape[0] :]
