"""``TDMImputer.sample``: draws keep the observed cells in every draw, vary where cells are
missing, have the spread of the removed values where the point imputation has less, cover them
with their central intervals, draw the cells missing in a row together, keep a label column's
shares where the point collapses them, draw a label from its own row's probabilities, and work
on new rows; the fitted imputer is left as it was."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tdm import OTImputer, TDMImputer, simulate_mcar
from tdm._validation import InvalidParameterError

FAST = {"max_iter": 100, "batch_size": 64, "init": "ice"}  # the start: test_starts


def correlated(n: int, seed: int) -> np.ndarray:
    """Four columns, two latent factors, noise: a missing cell is half predictable."""
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, 2))
    return latent @ rng.normal(size=(2, 4)) + 0.7 * rng.normal(size=(n, 4))


@pytest.fixture(scope="module")
def fitted() -> tuple[np.ndarray, np.ndarray, np.ndarray, TDMImputer, np.ndarray]:
    X = correlated(400, 0)
    mask = simulate_mcar(X, 0.3, random_state=0)
    X_nan = np.where(mask, np.nan, X)
    imputer = TDMImputer(**FAST, random_state=0)
    point = imputer.fit_transform(X_nan)
    return X, mask, X_nan, imputer, point


def test_observed_cells_are_identical_in_every_draw_and_missing_ones_vary(fitted) -> None:
    X, mask, X_nan, imputer, _ = fitted
    draws = imputer.sample(X_nan, 5, random_state=1)
    assert draws.shape == (5, *X.shape) and draws.dtype == X_nan.dtype
    assert not np.isnan(draws).any()
    for draw in draws:
        assert np.array_equal(draw[~mask], X_nan[~mask])
    spread = draws[:, mask].std(axis=0)
    assert (spread > 0).mean() > 0.95  # each missing cell takes other values in other draws


def test_a_seed_gives_the_same_draws_another_seed_others(fitted) -> None:
    _, mask, X_nan, imputer, _ = fitted
    first = imputer.sample(X_nan, 3, random_state=7)
    assert np.array_equal(first, imputer.sample(X_nan, 3, random_state=7))
    assert not np.array_equal(first[:, mask], imputer.sample(X_nan, 3, random_state=8)[:, mask])


def test_draws_have_the_spread_the_point_lacks_and_their_intervals_cover(fitted) -> None:
    """The removed values' standard deviation per column: the point imputation's is well below
    it, the draws' close to it; the central 90% intervals of 40 draws cover about 90% of the
    removed values (binomial noise on about 480 cells: +-0.03)."""
    X, mask, X_nan, imputer, point = fitted
    draws = imputer.sample(X_nan, 40, random_state=2)
    truth_sd = np.array([X[mask[:, j], j].std() for j in range(X.shape[1])])
    point_ratio = np.array([point[mask[:, j], j].std() for j in range(X.shape[1])]) / truth_sd
    draw_ratio = (
        np.array([np.mean([d[mask[:, j], j].std() for d in draws]) for j in range(X.shape[1])])
        / truth_sd
    )
    assert np.median(point_ratio) < 0.85
    assert 0.85 <= np.median(draw_ratio) <= 1.15
    low, high = np.quantile(draws[:, mask], [0.05, 0.95], axis=0, method="weibull")
    coverage = ((X[mask] >= low) & (X[mask] <= high)).mean()
    assert 0.84 <= coverage <= 0.96, coverage


def test_cells_missing_together_are_drawn_together_with_the_removed_values_spread() -> None:
    """Three predictors correlated 0.5 and a response (600 rows, 30% missing): over the rows
    missing both the first predictor and the response, the draws' correlation of the two is
    over half the removed values' (residuals drawn apart kept 0.13-0.41 of it, drawn together
    0.63-1.10, seeds 0-7); the imputed cells' variance is within 20% of the removed values'
    (median over columns: 1.13-1.47 about the point, 0.87-1.14 about its line, seeds 0-7)."""
    rng = np.random.default_rng(0)
    X = rng.multivariate_normal(np.zeros(3), 0.5 + 0.5 * np.eye(3), size=600)
    table = np.column_stack([X, 1 + X @ [1.0, 0.5, -0.5] + rng.normal(size=600)])
    mask = simulate_mcar(table, 0.3, random_state=0)
    X_nan = np.where(mask, np.nan, table)
    draws = TDMImputer(**FAST, random_state=0).fit(X_nan).sample(X_nan, 20, random_state=0)
    both = mask[:, 0] & mask[:, 3]
    removed = np.corrcoef(table[both, 0], table[both, 3])[0, 1]
    drawn = np.corrcoef(draws[:, both, 0].ravel(), draws[:, both, 3].ravel())[0, 1]
    assert drawn > 0.5 * removed > 0.2, (drawn, removed)
    ratio = [
        draws[:, mask[:, j], j].var(axis=1).mean() / table[mask[:, j], j].var() for j in range(4)
    ]
    assert 0.8 <= np.median(ratio) <= 1.2, ratio


def test_new_rows_are_drawn_around_their_transform(fitted) -> None:
    *_, imputer, _ = fitted
    new = correlated(120, 1)
    new_mask = simulate_mcar(new, 0.3, random_state=1)
    new_nan = np.where(new_mask, np.nan, new)
    point = imputer.transform(new_nan)
    draws = imputer.sample(new_nan, 20, random_state=0)
    for draw in draws:
        assert np.array_equal(draw[~new_mask], new[~new_mask])
    # The draws scatter around the point imputation: their mean is nearer it than the truth is.
    centre = draws[:, new_mask].mean(axis=0)
    assert np.abs(centre - point[new_mask]).mean() < np.abs(new[new_mask] - point[new_mask]).mean()
    assert draws[:, new_mask].std(axis=0).mean() > 0.3 * new[new_mask].std()


def test_sampling_leaves_the_fitted_imputer_as_it_was(fitted) -> None:
    _, _, X_nan, imputer, point = fitted
    new = np.where(simulate_mcar(correlated(40, 5), 0.3, random_state=5), np.nan, correlated(40, 5))
    params, before = imputer.get_params(), imputer.transform(new)
    state = {k: v.copy() for k, v in vars(imputer).items() if isinstance(v, np.ndarray)}
    imputer.sample(X_nan, 2, random_state=0)
    imputer.sample(new, 2, random_state=0)
    assert imputer.get_params() == params
    assert all(np.array_equal(getattr(imputer, k), v) for k, v in state.items())
    assert np.array_equal(imputer.transform(X_nan), point)
    assert np.array_equal(imputer.transform(new), before)


def test_a_table_with_nothing_missing_gives_itself_n_times(fitted) -> None:
    X, _, _, imputer, _ = fitted
    draws = imputer.sample(X[:50], 3, random_state=0)
    assert np.array_equal(draws, np.stack([X[:50]] * 3))


def test_n_draws_must_be_a_positive_integer(fitted) -> None:
    _, _, X_nan, imputer, _ = fitted
    with pytest.raises(InvalidParameterError, match="n_draws"):
        imputer.sample(X_nan, 0)


@pytest.mark.parametrize("random_state", [-1, np.random.default_rng(0), "seed"])
def test_a_random_state_sample_cannot_use_is_refused_naming_it(fitted, random_state) -> None:
    """Bug: NumPy's or scikit-learn's own error ("Seed must be between 0 and 2**32 - 1")."""
    _, _, X_nan, imputer, _ = fitted
    with pytest.raises(InvalidParameterError, match="sample: random_state must be an integer"):
        imputer.sample(X_nan, 2, random_state=random_state)


def test_label_draws_keep_the_shares_the_point_collapses() -> None:
    """A label column unrelated to the numbers (its largest label 45% of the rows): the point
    imputation gives nearly every missing cell that label; the draws give each label about its
    share among the removed cells. Each draw is a DataFrame in the input's dtypes."""
    rng = np.random.default_rng(3)
    n = 600
    x = rng.normal(size=n)
    shares = np.array([0.45, 0.3, 0.25])
    labels = rng.choice(["a", "b", "c"], size=n, p=shares)
    frame = pd.DataFrame(
        {
            "x": x,
            "y": x + 0.5 * rng.normal(size=n),
            "n": pd.array(np.round(10 + 3 * x).astype(np.int64), dtype="Int64"),
            "label": pd.Categorical(labels),
        }
    )
    holes = frame.copy()
    mask = rng.random((n, 4)) < 0.3
    for j, column in enumerate(frame.columns):
        holes[column] = frame[column].mask(mask[:, j])
    imputer = TDMImputer(**FAST, random_state=0)
    point = imputer.fit_transform(holes)
    draws = imputer.sample(holes, 10, random_state=0)
    assert isinstance(draws, list) and len(draws) == 10
    removed = frame["label"][mask[:, 3]].value_counts(normalize=True)

    def distance(completed: pd.DataFrame) -> float:
        got = completed["label"][mask[:, 3]].value_counts(normalize=True)
        return 0.5 * float((got.reindex(removed.index, fill_value=0) - removed).abs().sum())

    for draw in draws:
        assert list(draw.dtypes) == list(holes.dtypes)
        observed = ~holes.isna().to_numpy()
        for j, column in enumerate(holes.columns):
            assert draw[column][observed[:, j]].equals(holes[column][observed[:, j]])
    assert distance(point) > 0.4  # nearly every cell got the largest label
    # About 200 removed cells and 130 probe cells: the shares' noise alone is a few hundredths.
    assert np.mean([distance(d) for d in draws]) < 0.15


@pytest.mark.parametrize("max_features", [50, 1], ids=["every-column", "the-strongest-column"])
def test_a_label_is_drawn_from_its_own_row_s_probabilities(monkeypatch, max_features) -> None:
    """A label whose chance rises with ``x`` (``P(hi) = 1 / (1 + exp(-3x))``): cells with
    ``x`` just above 0 share their point label with those far above it, yet their draws give
    ``hi`` far less often, close to their own chance; over all cells the draws keep the share
    of ``hi`` among the removed labels. So too where the models get one column of the others
    (a wide table's), the one that tells most of theirs."""
    import tdm._starts

    monkeypatch.setattr(tdm._starts, "MAX_MODEL_FEATURES", max_features)
    rng = np.random.default_rng(5)
    n = 1_000
    x = rng.normal(size=n)
    chance = 1 / (1 + np.exp(-3 * x))
    frame = pd.DataFrame(
        {
            "x": x,
            "y": x + 0.5 * rng.normal(size=n),
            "label": pd.Categorical(np.where(rng.random(n) < chance, "hi", "lo")),
        }
    )
    if max_features == 1:  # columns that tell nothing, which the label's model must not get
        frame = frame.assign(**{f"noise{i}": rng.normal(size=n) for i in range(3)})
    missing = rng.random(n) < 0.3
    holes = frame.assign(label=frame["label"].mask(missing))
    imputer = TDMImputer(**FAST, random_state=0).fit(holes)
    draws = imputer.sample(holes, 40, random_state=0)
    hi = np.mean([d["label"].to_numpy() == "hi" for d in draws], axis=0)
    near, far = missing & (x > 0) & (x < 0.3), missing & (x > 1.5)
    assert near.sum() >= 15 and far.sum() >= 15
    assert hi[far].mean() > 0.9
    assert abs(hi[near].mean() - chance[near].mean()) < 0.15
    removed = (frame["label"][missing] == "hi").mean()
    assert abs(hi[missing].mean() - removed) < 0.05


def test_a_label_the_row_tells_something_of_is_drawn_by_its_row_under_mar() -> None:
    """A label's chance of ``hi`` is 0.05 where ``x < 0`` and 0.45 above: no row's likeliest
    label is ``hi``, so a classifier guesses no better than the commonest label, yet it knows
    which rows are likelier to hold ``hi``. Missing at random, mostly above 0, the removed
    labels hold more ``hi`` than the observed ones: draws from the row's probabilities give
    them their chance of it, where draws from the observed shares (a model judged by its
    guesses) would give too few."""
    rng = np.random.default_rng(3)
    n = 800
    x = rng.normal(size=n)
    chance = np.where(x < 0, 0.05, 0.45)
    frame = pd.DataFrame(
        {
            "x": x,
            "y": x + 0.5 * rng.normal(size=n),
            "label": pd.Categorical(np.where(rng.random(n) < chance, "hi", "lo")),
        }
    )
    missing = rng.random(n) < np.where(x < 0, 0.1, 0.5)
    holes = frame.assign(label=frame["label"].mask(missing))
    draws = TDMImputer(**FAST, random_state=0).fit(holes).sample(holes, 20, random_state=0)
    drawn = np.mean([(d["label"][missing] == "hi").mean() for d in draws])
    observed = (holes["label"].dropna() == "hi").mean()
    assert chance[missing].mean() - observed > 0.15  # the setting: observed shares are far off
    assert abs(drawn - chance[missing].mean()) < 0.04


def test_ot_imputer_draws_too() -> None:
    X = correlated(150, 2)
    mask = simulate_mcar(X, 0.3, random_state=2)
    X_nan = np.where(mask, np.nan, X)
    imputer = OTImputer(solver="assignment", max_iter=40, random_state=0).fit(X_nan)
    draws = imputer.sample(X_nan, 4, random_state=0)
    assert draws.shape == (4, *X.shape)
    assert all(np.array_equal(d[~mask], X[~mask]) for d in draws)
    assert (draws[:, mask].std(axis=0) > 0).mean() > 0.95


def test_a_few_new_rows_warn_and_unseen_labels_stay_as_they_are() -> None:
    """One new row has no observed cell to hide: a warning names the column, its numbers are
    the point's, its label is drawn from the fit's shares (never NaN probabilities); a label
    unseen in fit is an observed cell and comes back unchanged in every draw."""
    rng = np.random.default_rng(4)
    n = 120
    x = rng.normal(size=n)
    frame = pd.DataFrame(
        {"x": x, "y": x + rng.normal(size=n), "label": rng.choice(["p", "q", "r"], size=n)}
    )
    frame.loc[rng.random(n) < 0.2, "y"] = np.nan
    frame.loc[rng.random(n) < 0.2, "label"] = None
    imputer = TDMImputer(**FAST, random_state=0).fit(frame)
    one = pd.DataFrame({"x": [0.3], "y": [np.nan], "label": [None]})
    with pytest.warns(UserWarning, match=r"column 'y'.*\(sample more rows at once\)"):
        draws = imputer.sample(one, 30, random_state=0)
    point = imputer.transform(one)
    assert all(d["y"].iloc[0] == point["y"].iloc[0] for d in draws)
    assert {d["label"].iloc[0] for d in draws} <= {"p", "q", "r"}
    assert len({d["label"].iloc[0] for d in draws}) > 1  # drawn, not one label for all
    unseen = frame.iloc[:40].copy()
    unseen.loc[0, "label"] = "never seen"
    for draw in imputer.sample(unseen, 3, random_state=0):
        assert draw.loc[0, "label"] == "never seen"
        assert draw["label"][unseen["label"].notna()].equals(unseen["label"].dropna())


def test_a_handful_of_new_rows_warns_of_each_column_measured_on_few_cells() -> None:
    """Bug: four new rows gave a column one residual, added to every draw (20 equal draws off
    the point, no warning), and others two. A column measured on fewer than ten cells is
    warned of with their number; one measured on one cell is drawn at its point."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(200, 3))
    X = np.c_[z[:, 0], 0.8 * z[:, 0] + 0.6 * z[:, 1], z[:, 2]]
    X[rng.random(X.shape) < 0.3] = np.nan
    imputer = TDMImputer(**FAST, random_state=0).fit(X)
    new = X[:4]
    with pytest.warns(UserWarning) as caught:
        draws = imputer.sample(new, 20, random_state=0)
    said = " ".join(str(w.message) for w in caught)
    assert "only one observed cell of column 0" in said
    assert "only 2 observed cells of column 1" in said and "(sample more rows at once)" in said
    missing = np.isnan(new)
    point = imputer.transform(new)
    assert np.array_equal(draws[:, missing[:, 0], 0], np.tile(point[missing[:, 0], 0], (20, 1)))
    assert draws[:, missing[:, 1], 1].std(axis=0).min() > 0


def test_a_column_of_one_observed_value_is_warned_of_as_such() -> None:
    """The warning's advice fits its case: a column observed once in the fitted table cannot
    lend a cell to hide (sampling more rows at once would not help)."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=60), "b": rng.normal(size=60)})
    frame.loc[1:, "b"] = np.nan
    frame.loc[::4, "a"] = np.nan
    imputer = TDMImputer(**FAST, random_state=0).fit(frame)
    with pytest.warns(UserWarning, match=r"column 'b'.*\(it has one observed value\)"):
        imputer.sample(frame, 2, random_state=0)


def test_a_label_column_of_one_label_is_drawn_with_it() -> None:
    """Bug: a boolean flag observed only True made `sample` fail with an IndexError (no cell of
    it could be hidden to measure the error). Its missing cells are drawn True; the numbers'
    missing cells are drawn and vary."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=100), "b": rng.normal(size=100)})
    frame["flag"] = pd.array([True] * 100, dtype="boolean")
    frame.loc[::3, "flag"] = pd.NA
    frame.loc[::5, "a"] = np.nan
    draws = TDMImputer(**FAST, random_state=0).fit(frame).sample(frame, 3, random_state=0)
    assert all(d["flag"].dtype == "boolean" and d["flag"].all() for d in draws)
    missing = frame["a"].isna()
    assert not draws[0]["a"][missing].equals(draws[1]["a"][missing])


def test_a_table_of_one_label_column_is_drawn_by_its_shares() -> None:
    """Bug: `sample` on a table of one label column failed in scikit-learn ("Found array with
    0 feature(s)"): nothing is left to classify it on. Its cells are drawn by the observed
    shares, both labels appearing."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"label": rng.choice(["x", "y"], size=200, p=[0.6, 0.4])})
    frame.loc[rng.random(200) < 0.3, "label"] = None
    missing = frame["label"].isna()
    draws = TDMImputer(**FAST, random_state=0).fit(frame).sample(frame, 5, random_state=0)
    drawn = pd.concat([d["label"][missing] for d in draws])
    assert set(drawn) == {"x", "y"}
    assert all(d["label"][~missing].equals(frame["label"][~missing]) for d in draws)
