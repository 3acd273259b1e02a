"""The starts of the missing cells: ICE, the trees, the probe-cell choice of init="auto",
and the start of unseen rows in transform."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from benchmarks.registry import make_imputer
from tdm import TDMImputer
from tdm._optimise import FitProgress
from tdm._starts import ICE_ROUNDS, TREE_ROUNDS, LabelShares, label_model
from tests.tdm.conftest import low_rank, mcar

FAST = {"max_iter": 30, "batch_size": 32, "random_state": 0}


def mae(X: np.ndarray, X_imp: np.ndarray, mask: np.ndarray) -> float:
    return float(np.abs(X_imp - X)[mask].mean())


def mean_imputation_mae(X: np.ndarray, X_nan: np.ndarray, mask: np.ndarray) -> float:
    return mae(X, np.where(mask, np.nanmean(X_nan, axis=0), X), mask)


# ---------------------------------------------------------------------------- initialisation
def test_ice_start_is_the_ice_imputation(data) -> None:
    """With no step, no noise and no bounds, init="ice" returns ICE's imputation of the
    standardised data."""

    _, X_nan, mask = data
    est = TDMImputer(init="ice", max_iter=0, bounds=None, random_state=0)
    start = est.fit_transform(X_nan)
    Z = (X_nan - est.mean_) / est.scale_
    ice = make_imputer("ice", random_state=0).fit_transform(Z) * est.scale_ + est.mean_
    np.testing.assert_allclose(start[mask], ice[mask], rtol=0, atol=1e-5)
    assert start[~mask].tobytes() == X_nan[~mask].tobytes()
    mean_start = TDMImputer(init="mean", max_iter=0, bounds=None).fit_transform(X_nan)
    np.testing.assert_allclose(
        mean_start, np.where(mask, np.nanmean(X_nan, axis=0), X_nan), rtol=0, atol=1e-5
    )


def test_ice_start_needs_fewer_steps_than_the_mean_start(data) -> None:
    """ICE's start (the default's choice on linear data): after the same 60 steps, clearly closer
    to the truth than the paper's."""
    X, X_nan, mask = data
    default = TDMImputer(**{**FAST, "max_iter": 60}).fit(X_nan)
    assert default.init_ == "ice"
    ice = default.transform(X_nan)
    paper_start = TDMImputer(**{**FAST, "max_iter": 60, "init": "mean"}).fit_transform(X_nan)
    assert TDMImputer().init == "auto"
    assert mae(X, ice, mask) < 0.7 * mae(X, paper_start, mask)
    assert mae(X, ice, mask) < 0.5 * mean_imputation_mae(X, X_nan, mask)


def _spy_on_start_fill(monkeypatch, record: Callable[[str, np.ndarray, int], object]) -> None:
    """``tdm._starts.start_fill`` as it is, calling ``record(kind, values, seed)`` first."""
    import tdm._starts

    original = tdm._starts.start_fill

    def spy(kind: str, values: np.ndarray, mask: np.ndarray, seed: int, *rest: Any) -> np.ndarray:
        record(kind, values, seed)
        return original(kind, values, mask, seed, *rest)

    monkeypatch.setattr(tdm._starts, "start_fill", spy)


@pytest.mark.parametrize("init", ["ice", "trees"])
def test_start_of_unseen_rows_uses_a_bounded_context(monkeypatch, init: str) -> None:
    """New rows start as the fit did (ICE or the trees), given at most START_CONTEXT_ROWS fitted
    rows as context; observed cells kept."""
    import tdm._starts

    X = low_rank(n=400, seed=2)
    train_nan, _ = mcar(X[:300], 0.2, seed=3)
    test_nan, test_mask = mcar(X[300:], 0.2, seed=4)
    est = TDMImputer(init=init, max_iter=40, batch_size=64, random_state=0).fit(train_nan)
    est.set_params(transform_max_iter=1)
    seen: list[tuple[str, int]] = []
    _spy_on_start_fill(monkeypatch, lambda kind, values, seed: seen.append((kind, len(values))))
    monkeypatch.setattr(tdm._starts, "START_CONTEXT_ROWS", 50)
    out = est.transform(test_nan)
    rows_missing = int(test_mask.any(axis=1).sum())
    assert seen == [(init, 50 + rows_missing)]
    assert out[~test_mask].tobytes() == test_nan[~test_mask].tobytes()
    fitted_mean = np.where(test_mask, np.nanmean(train_nan, axis=0), X[300:])
    assert mae(X[300:], out, test_mask) < 0.6 * mae(X[300:], fitted_mean, test_mask)


@pytest.mark.parametrize("init", ["ice", "trees", "mean"])
def test_new_rows_keep_a_model_start_and_are_optimised_after_the_mean(init: str) -> None:
    """By default transform runs no step after a model start (ICE or the trees): new rows get
    their start, as transform_max_iter=0 gives them, within the bounds; after the mean start it
    optimises them. Steps asked for run after any start and move the cells."""
    X = low_rank(n=400, seed=2)
    train_nan, _ = mcar(X[:300], 0.2, seed=3)
    test_nan, test_mask = mcar(X[300:], 0.2, seed=4)
    stages: list[str] = []
    est = TDMImputer(init=init, max_iter=40, batch_size=64, random_state=0)
    est.fit(train_nan)
    est.set_params(callback=lambda progress: stages.append(progress.stage))
    default = est.transform(test_nan)
    steps_run = stages.count("transform")
    assert steps_run == (40 if init == "mean" else 0)  # max_iter caps the ~200 updates a row
    start = est.set_params(transform_max_iter=0).transform(test_nan)
    assert (default.tobytes() == start.tobytes()) == (init != "mean")
    stepped = est.set_params(transform_max_iter=5).transform(test_nan)
    assert stages.count("transform") == steps_run + 5
    assert not np.array_equal(stepped[test_mask], start[test_mask])
    if init != "mean":  # the start itself, not the columns' means
        fitted_mean = np.where(test_mask, np.nanmean(train_nan, axis=0), X[300:])
        assert mae(X[300:], start, test_mask) < 0.6 * mae(X[300:], fitted_mean, test_mask)


def test_new_rows_get_their_start_itself_even_with_start_noise(monkeypatch) -> None:
    """With start noise (paper mode's setting, here after ICE) and no step to take it away, new
    rows get their start itself, in the data's units (to float32 rounding)."""
    import tdm._inductive

    X = low_rank(n=400, seed=2)
    train_nan, _ = mcar(X[:300], 0.2, seed=3)
    test_nan, test_mask = mcar(X[300:], 0.2, seed=4)
    est = TDMImputer._configured(
        init="ice", max_iter=20, batch_size=64, random_state=0, init_noise=0.5
    ).fit(train_nan)
    starts: list[np.ndarray] = []
    original = tdm._inductive.context_start

    def spy(*args: Any) -> np.ndarray:
        starts.append(original(*args))
        return starts[-1]

    monkeypatch.setattr(tdm._inductive, "context_start", spy)
    out = est.transform(test_nan)
    rows = test_mask.any(axis=1)
    expected = starts[0] * est.scale_ + est.mean_
    np.testing.assert_allclose(out[rows][test_mask[rows]], expected[test_mask[rows]], rtol=1e-5)


def test_trees_start_reports_its_models_and_beats_ice_on_nonlinear_data(data) -> None:
    """init="trees" fits one model per column with a missing cell and round, reporting each to
    the callback (stage "start") before the steps; on columns that are even functions of a
    latent, where no linear model can predict, it imputes far better than ICE."""
    X = _nonlinear()
    X_nan, mask = mcar(X, 0.2)
    seen: list[FitProgress] = []
    est = TDMImputer(init="trees", max_iter=3, batch_size=64, random_state=0, callback=seen.append)
    trees = est.fit_transform(X_nan)
    starts = [p for p in seen if p.stage == "start"]
    planned = TREE_ROUNDS * X.shape[1]
    assert [(p.iteration, p.max_iter) for p in starts] == [
        (i, planned) for i in range(1, planned + 1)
    ]
    assert seen[: len(starts)] == starts and [p.stage for p in seen[len(starts) :]] == ["fit"] * 3
    assert est.init_ == "trees" and est.start_scores_ is None
    ice = TDMImputer(init="ice", max_iter=3, batch_size=64, random_state=0).fit_transform(X_nan)
    assert mae(X, trees, mask) < 0.8 * mae(X, ice, mask)
    assert trees[~mask].tobytes() == X_nan[~mask].tobytes()


@pytest.mark.parametrize("init", ["ice", "auto"])
def test_ice_and_auto_starts_report_their_models_up_to_the_whole(init: str) -> None:
    """Bug: the ICE start, and the ICE half of the auto start, reported nothing. Every model is
    reported in order, never beyond the plan, and the start ends at its whole plan, also where
    ICE stops early (a column the sum of the others: it converges before ICE_ROUNDS rounds)."""
    rng = np.random.default_rng(0)
    A = rng.normal(size=(200, 3))
    X = np.column_stack([A, A @ [1.0, 2.0, 3.0]])
    mask = rng.random(X.shape) < 0.1
    X_nan = np.where(mask, np.nan, X)
    seen: list[FitProgress] = []
    TDMImputer(init=init, max_iter=1, random_state=0, callback=seen.append).fit(X_nan)
    starts = [(p.iteration, p.max_iter) for p in seen if p.stage == "start"]
    assert [done for done, _ in starts] == list(range(1, len(starts) + 1))
    assert all(done <= planned for done, planned in starts) and starts[-1][0] == starts[-1][1]
    if init == "ice":
        assert starts[-1][1] == ICE_ROUNDS * int(mask.any(axis=0).sum())


def test_trees_start_is_seeded_and_sized_by_the_rows(monkeypatch) -> None:
    """A seed gives the same start bit for bit; each model gets n_jobs threads; a column fitted
    on fewer than BOOSTING_ROWS rows gets a random forest, from there early-stopped gradient
    boosting, which imputes at least as well on many rows."""
    import tdm._starts

    asked: list[tuple[int, int | None, str]] = []
    params = tdm._starts._model_params

    def spy(n_rows: int, seed: int, n_jobs: int | None) -> dict[str, Any]:
        chosen = params(n_rows, seed, n_jobs)
        asked.append((n_rows, chosen["n_jobs"], chosen["boosting_type"]))
        return chosen

    monkeypatch.setattr(tdm._starts, "_model_params", spy)
    X = _nonlinear(n=1_500)
    X_nan, mask = mcar(X, 0.3)
    few = TDMImputer(init="trees", max_iter=0, random_state=0).fit_transform(X_nan[:600])
    assert {(n_jobs, kind) for _, n_jobs, kind in asked} == {(1, "rf")}
    asked.clear()
    many = TDMImputer._configured(init="trees", max_iter=0, n_jobs=1, random_state=0)
    out = many.fit_transform(X_nan)
    assert {(n_jobs, kind) for _, n_jobs, kind in asked} == {(1, "gbdt")}
    again = TDMImputer(init="trees", max_iter=0, random_state=0).fit_transform(X_nan)
    assert again.tobytes() == out.tobytes()
    assert mae(X, out, mask) < 0.5 * mean_imputation_mae(X, X_nan, mask)
    assert mae(X, out, mask) < 1.05 * mae(X[:600], few, mask[:600])
    with pytest.raises(ValueError, match="n_jobs"):
        TDMImputer._configured(n_jobs="all").fit(X_nan)  # type: ignore[arg-type]


def test_a_column_observed_in_more_rows_than_the_cap_is_fitted_on_a_sample(monkeypatch) -> None:
    """Above MAX_MODEL_ROWS observed rows, a column's model is fitted on a uniform sample of
    that many (its time stops growing with the table), drawn from the start's generator only
    then; below, on every observed row, the generator untouched (the fits of tables below the
    cap stay bit for bit). Every missing cell is still imputed, well."""
    import tdm._starts

    observed = np.arange(100) % 3 != 0  # 66 rows
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    monkeypatch.setattr(tdm._starts, "MAX_MODEL_ROWS", 66)
    assert tdm._starts.fitted_rows(observed, rng) is observed
    assert rng.bit_generator.state == state
    monkeypatch.setattr(tdm._starts, "MAX_MODEL_ROWS", 40)
    sample = tdm._starts.fitted_rows(observed, rng)
    assert sample.sum() == 40 and not (sample & ~observed).any()

    fitted_on: list[int] = []
    params = tdm._starts._model_params

    def spy(n_rows: int, seed: int, n_jobs: int | None) -> dict[str, Any]:
        fitted_on.append(n_rows)
        return params(n_rows, seed, n_jobs)

    monkeypatch.setattr(tdm._starts, "_model_params", spy)
    monkeypatch.setattr(tdm._starts, "MAX_MODEL_ROWS", 1_000)
    X = _nonlinear(n=3_000)
    X_nan, mask = mcar(X, 0.3)
    out = TDMImputer(init="trees", max_iter=0, random_state=0).fit_transform(X_nan)
    assert fitted_on and max(fitted_on) == 1_000
    assert not np.isnan(out).any()
    assert mae(X, out, mask) < 0.5 * mean_imputation_mae(X, X_nan, mask)


def test_a_wide_tables_models_are_fitted_on_the_columns_that_explain_them(monkeypatch) -> None:
    """Beyond MAX_MODEL_FEATURES other columns, a column's model gets that many, those that
    explain most of it (a label among them), and imputes as well as on every column; up to
    there, every other column, the generator untouched (narrower fits stay bit for bit)."""
    import tdm._starts
    from tdm._mixed import TableEncoding

    rng = np.random.default_rng(3)
    n = 1_500
    t = rng.uniform(-2, 2, n)
    side = rng.integers(0, 2, n)
    frame = pd.DataFrame(
        {
            "y": np.cos(2 * t) + 2.0 * side + 0.05 * rng.normal(size=n),
            **{f"noise{i}": rng.normal(size=n) for i in range(4)},
            "t": t,
            "side": pd.Categorical(np.where(side == 1, "right", "left")),
        }
    )
    holes = pd.DataFrame(rng.random(frame.shape) < 0.2, columns=frame.columns)
    data = frame.mask(holes)
    encoding = TableEncoding.from_frame(data, "test")
    table, categorical, missing = tdm._starts.label_table(
        encoding.encode(data), np.isnan(encoding.encode(data)), encoding
    )
    targets = np.flatnonzero(missing.any(axis=0))
    state = np.random.default_rng(0).bit_generator.state
    every = tdm._starts.model_features(
        table, categorical, targets, generator := np.random.default_rng(0)
    )
    assert generator.bit_generator.state == state
    assert every[0].tolist() == [1, 2, 3, 4, 5, 6]

    monkeypatch.setattr(tdm._starts, "MAX_MODEL_FEATURES", 2)
    chosen = tdm._starts.model_features(table, categorical, targets, np.random.default_rng(0))
    assert chosen[0].tolist() == [5, 6]  # y: t, side (the label, last in the table)
    widths: list[int] = []
    regressor = tdm._starts._regressor

    def spy(features: np.ndarray, *args: Any) -> Any:
        widths.append(features.shape[1])
        return regressor(features, *args)

    monkeypatch.setattr(tdm._starts, "_regressor", spy)
    on_two = TDMImputer(init="trees", max_iter=0, random_state=0).fit_transform(data)
    assert set(widths) == {2}
    monkeypatch.setattr(tdm._starts, "MAX_MODEL_FEATURES", 50)
    on_all = TDMImputer(init="trees", max_iter=0, random_state=0).fit_transform(data)
    rows = holes["y"]
    error = np.abs(on_two["y"][rows] - frame["y"][rows]).mean()
    assert error < 1.1 * np.abs(on_all["y"][rows] - frame["y"][rows]).mean()
    assert error < 0.5 * np.abs(frame["y"][rows] - frame["y"][~rows].mean()).mean()


def test_trees_start_classifies_label_columns() -> None:
    """A label column is imputed by a classifier (its most probable label, a label point of
    the optimised space) and is a categorical feature of the other columns' models: labels set
    by the numbers come back right, and numbers set by the label too."""
    rng = np.random.default_rng(0)
    n = 1_200
    t = rng.uniform(-2, 2, n)
    kind = np.where(t < -0.7, "low", np.where(t < 0.7, "mid", "high"))
    level = rng.choice(["a", "b", "c", "d"], n)
    offset = pd.Series(level).map({"a": 0.0, "b": 3.0, "c": 6.0, "d": 9.0}).to_numpy()
    frame = pd.DataFrame(  # label columns first: the start's table puts numbers first
        {
            "kind": pd.Categorical(kind),
            "level": pd.Categorical(level),
            "t": t,
            "t2": t**2 + 0.05 * rng.normal(size=n),
            "y": offset + 0.1 * rng.normal(size=n),
        }
    )
    holes = pd.DataFrame(rng.random(frame.shape) < 0.2, columns=frame.columns)
    holes["level"] = False  # level stays complete: only its role as a feature is tested
    holes.loc[holes["kind"], "t"] = False  # the sign of t is then there to set kind
    out = TDMImputer(init="trees", max_iter=0, random_state=0).fit_transform(frame.mask(holes))
    kind_missing = holes["kind"]
    right = (out["kind"][kind_missing] == frame["kind"][kind_missing]).mean()
    commonest = (frame["kind"][kind_missing] == frame["kind"].mode()[0]).mean()
    assert right > 0.95 and commonest < 0.5
    y_missing = holes["y"]
    assert np.abs(out["y"][y_missing] - frame["y"][y_missing]).mean() < 0.3  # 3.0 apart
    assert out["kind"].dtype == frame["kind"].dtype


def test_a_label_column_the_row_does_not_predict_starts_at_its_mode() -> None:
    """A label column drawn apart from everything (its commonest label 60% of the rows): the
    forest's out-of-bag accuracy does not beat that share, so every missing cell starts at the
    mode, and the draws' probabilities are the observed shares; a label column set by a number
    keeps its forest, whose probabilities follow the row."""
    rng = np.random.default_rng(1)
    n = 400
    x = rng.normal(size=n)
    noise = rng.choice(["p", "q", "r"], size=n, p=[0.6, 0.25, 0.15])
    X = np.column_stack([x, x + 0.3 * rng.normal(size=n)])
    codes = pd.Categorical(noise).codes.astype(np.float64)
    rows = rng.random(n) < 0.3
    model = label_model(X[~rows], codes[~rows], np.random.default_rng(0), None)
    assert isinstance(model, LabelShares)
    assert set(model.predict(X[rows])) == {0.0}  # "p"
    shares = np.bincount(codes[~rows].astype(int)) / (~rows).sum()
    np.testing.assert_allclose(model.predict_proba(X[rows][:3]), np.tile(shares, (3, 1)))
    sign = (x > 0).astype(np.float64)
    forest = label_model(X[~rows], sign[~rows], np.random.default_rng(0), None)
    assert not isinstance(forest, LabelShares)
    chances = forest.predict_proba(X[rows])[:, 1]
    assert chances[x[rows] > 1].min() > 0.8 and chances[x[rows] < -1].max() < 0.2
    frame = pd.DataFrame({"x": x, "y": X[:, 1], "noise": pd.Categorical(noise)})
    out = TDMImputer(init="trees", max_iter=0, random_state=0).fit_transform(
        frame.assign(noise=frame["noise"].mask(rows))
    )
    assert set(out["noise"][rows]) == {"p"}


def test_a_trees_start_of_one_column_is_its_mean() -> None:
    from tdm._mixed import TableEncoding
    from tdm._starts import start_fill

    X = _nonlinear(n=200)[:, :1]
    X_nan, mask = mcar(X, 0.3)
    one_column = start_fill("trees", X, mask, 7, TableEncoding.from_array(1))
    assert np.allclose(one_column[mask[:, 0], 0], X_nan[~mask[:, 0], 0].mean())


@pytest.mark.parametrize(
    ("seed", "n_features", "rate"),
    [(0, 6, 0.2), (1, 5, 0.4), (8, 3, 0.3), (11, 2, 0.5), (3, 1, 0.3)],
    ids=["all-rounds", "all-rounds-more-missing", "early-stop", "two-columns", "one-column"],
)
def test_the_ice_start_is_iterative_imputer_bit_for_bit_without_its_warning(
    seed: int, n_features: int, rate: float
) -> None:
    """The written-out ICE rounds equal scikit-learn's IterativeImputer (`make_ice`) bit for
    bit, whether its rounds stop early or run out, and running out (the design: ten rounds at
    most) is not reported as a failure to converge."""
    from sklearn.exceptions import ConvergenceWarning

    from tdm._mixed import TableEncoding
    from tdm._starts import make_ice, start_fill

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(120, n_features)) @ rng.normal(size=(n_features, n_features)) * 30
    X_nan, mask = mcar(X, rate, seed=seed)
    if n_features > 2:
        mask[:, 0], X_nan[:, 0] = False, X[:, 0]  # a complete column: a feature, never a target
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = start_fill("ice", X, mask, seed, TableEncoding.from_array(n_features))
    assert not [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reference = make_ice(seed).fit_transform(X_nan)
    assert ours.tobytes() == np.where(mask, reference, X).tobytes()


def _nonlinear(n: int = 400, seed: int = 0) -> np.ndarray:
    """Columns that are even functions of a latent: no linear regression can predict them."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2, 2, size=(n, 1))
    return np.hstack([t, t**2, np.abs(t), np.cos(2 * t)]) + 0.02 * rng.normal(size=(n, 4))


@pytest.mark.parametrize(
    ("X", "winner"),
    [(low_rank(n=400, d=8, rank=1), "ice"), (_nonlinear(n=800), "trees")],
    ids=["linear-data", "nonlinear-data"],
)
def test_auto_start_picks_the_start_with_the_lower_probe_error(X, winner: str) -> None:
    """init="auto" hides a few observed cells, imputes them with ICE and with the trees, and
    starts from the trees only where they got them clearly (10%) better; the probe cells end
    up observed as before."""
    X_nan, mask = mcar(X, 0.2)
    est = TDMImputer(init="auto", max_iter=0, random_state=0)
    out = est.fit_transform(X_nan)
    assert est.init_ == winner
    assert set(est.start_scores_) == {"ice", "trees"}
    loser = next(k for k in est.start_scores_ if k != winner)
    assert est.start_scores_[winner] < est.start_scores_[loser]
    if winner == "trees":
        assert est.start_scores_["trees"] < 0.9 * est.start_scores_["ice"]
    assert out[~mask].tobytes() == X_nan[~mask].tobytes()
    fixed = TDMImputer(init=winner, max_iter=0, random_state=0).fit_transform(X_nan)
    other = TDMImputer(init=loser, max_iter=0, random_state=0).fit_transform(X_nan)
    assert mae(X, fixed, mask) < mae(X, other, mask)  # the probe's choice holds on the truth


@pytest.mark.parametrize(("trees_error", "choice"), [(0.95, "ice"), (0.85, "trees")])
def test_auto_start_needs_the_trees_clearly_better(monkeypatch, trees_error, choice) -> None:
    """The trees' start is taken only when their probe error is below 0.9 times ICE's; the
    chosen start is then computed again with only the missing cells hidden."""
    import tdm._starts
    from tdm._mixed import TableEncoding

    hidden_sets: list[np.ndarray] = []

    def fake_fill(kind: str, values: np.ndarray, hidden: np.ndarray, *_: Any) -> np.ndarray:
        hidden_sets.append(hidden)
        error = 1.0 if kind == "ice" else trees_error
        return np.where(hidden, np.nan_to_num(values) + error, values)

    monkeypatch.setattr(tdm._starts, "start_fill", fake_fill)
    X = low_rank()
    mask = np.zeros(X.shape, dtype=bool)
    mask[::5, 2] = True
    rng = np.random.default_rng(0)
    encoding = TableEncoding.from_array(X.shape[1])
    picked, scores, start = tdm._starts.choose_start(X, mask, rng, 0, encoding)
    assert picked == choice
    assert scores == pytest.approx({"ice": 1.0, "trees": trees_error})
    probe = hidden_sets[0] & ~mask
    assert probe.sum() == round(0.05 * (~mask).sum())
    assert len(hidden_sets) == 3
    np.testing.assert_array_equal(hidden_sets[2], mask)
    error = 1.0 if choice == "ice" else trees_error
    np.testing.assert_array_equal(start, np.where(mask, X + error, X))


def test_auto_start_takes_the_trees_on_a_large_table_without_a_probe(monkeypatch) -> None:
    """From LARGE_CELLS observed cells, "auto" is the trees start, fitted once, no probe."""
    import tdm._starts

    seen: list[tuple[str, np.ndarray]] = []
    _spy_on_start_fill(monkeypatch, lambda kind, values, seed: seen.append((kind, values)))
    monkeypatch.setattr(tdm._starts, "LARGE_CELLS", 1)
    X_nan, _ = mcar(_nonlinear(), 0.2)
    est = TDMImputer(init="auto", max_iter=0, random_state=0).fit(X_nan)
    assert (est.init_, est.start_scores_) == ("trees", None)
    assert [kind for kind, _ in seen] == ["trees"]


def test_auto_start_survives_save_and_load(tmp_path: Path) -> None:
    X_nan, _ = mcar(_nonlinear(), 0.2)
    est = TDMImputer(init="auto", max_iter=5, batch_size=64, random_state=0).fit(X_nan)
    est.save(tmp_path / "imputer.pt")
    loaded = TDMImputer.load(tmp_path / "imputer.pt")
    assert (loaded.init_, loaded.start_scores_) == (est.init_, est.start_scores_)
    new = X_nan[:30].copy()
    new[:, 2] = np.nan
    assert loaded.transform(new).tobytes() == est.transform(new).tobytes()


@pytest.mark.parametrize("init", ["trees", "auto"])
def test_a_column_with_one_observed_value_is_started_at_it(init: str) -> None:
    """Bug: a numeric column with one observed value made the trees start fail in LightGBM
    ("1 sample(s)"), without naming the column. Its missing cells start at that value, and the
    fit runs."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=100), "b": np.nan, "c": rng.normal(size=100)})
    frame.loc[5, "b"] = 2.5
    frame.loc[::7, "a"] = np.nan
    out = TDMImputer(init=init, **{**FAST, "max_iter": 0}).fit_transform(frame)
    assert (out["b"] == 2.5).all() and not out.isna().any().any()


@pytest.mark.parametrize("n_rows", [4, 6])
def test_a_trees_start_of_a_handful_of_rows_is_finite(n_rows: int) -> None:
    """Bug: LightGBM's forest fitted on a handful of rows can predict NaN, and the fit then
    stopped with "the loss became non-finite at iteration 1" (4 rows: the smallest table TDM
    fits). Such a column starts at its observed mean, and the fit runs."""
    failing = {4: 0, 6: 2}  # seeds whose forest predicted NaN
    rng = np.random.default_rng(failing[n_rows])
    X = rng.normal(size=(n_rows, 3))
    X[rng.random(X.shape) < 0.2] = np.nan
    X[0, 0] = np.nan
    out = TDMImputer(init="trees", max_iter=5, random_state=failing[n_rows]).fit_transform(X)
    assert np.isfinite(out).all()


def test_a_label_column_of_mostly_distinct_labels_starts_at_its_mode_with_one_warning() -> None:
    """A text column most of whose labels are held by one row (names, say): no forest is
    fitted for it (scikit-learn warned hundreds of times per fit that it looked like a
    regression target); its cells take the commonest label, and the fit runs, with the
    imputer's one warning that the column looks like an identifier."""
    rng = np.random.default_rng(0)
    n = 300
    names = [f"person {i}" for i in range(n - 20)] + ["person 0"] * 20
    frame = pd.DataFrame({"name": names, "x": rng.normal(size=n), "y": rng.normal(size=n)})
    frame.loc[rng.random(n) < 0.1, "name"] = None
    frame.loc[rng.random(n) < 0.2, "x"] = np.nan
    codes = pd.Categorical(frame["name"].dropna()).codes.astype(np.float64)
    features = frame[["y"]].to_numpy()[frame["name"].notna().to_numpy()]
    assert isinstance(label_model(features, codes, np.random.default_rng(0), None), LabelShares)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = TDMImputer(init="trees", max_iter=0, random_state=0).fit_transform(frame)
    assert [str(w.message).split(" (")[0] for w in caught] == [
        "TDMImputer: column 'name' looks like an identifier or free text"
    ]  # the imputer's own warning, once
    assert set(out["name"][frame["name"].isna()]) == {"person 0"}
