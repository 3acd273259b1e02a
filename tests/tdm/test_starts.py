"""The starts of the missing cells: ICE, the light forest, the probe-cell choice of init="auto",
and the start of unseen rows in transform."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.registry import make_imputer
from tdm import TDMImputer
from tdm._starts import LIGHT_FOREST
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


@pytest.mark.parametrize("init", ["ice", "forest"])
def test_start_of_unseen_rows_uses_a_bounded_context(monkeypatch, init: str) -> None:
    """New rows start as the fit did (ICE or forest), given at most START_CONTEXT_ROWS fitted
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


def test_forest_start_is_the_light_missforest_baseline(data, monkeypatch) -> None:
    """With no step, init="forest" returns the MissForest baseline's imputation of the
    standardised data, with 20 trees and 3 rounds (LIGHT_FOREST)."""

    _, X_nan, mask = data
    seeds: list[int] = []
    _spy_on_start_fill(monkeypatch, lambda kind, values, seed: seeds.append(seed))
    est = TDMImputer(init="forest", max_iter=0, random_state=0)
    start = est.fit_transform(X_nan)
    assert est.init_ == "forest" and est.start_scores_ is None
    assert LIGHT_FOREST == (20, 3, 0) and est.forest_size_ == LIGHT_FOREST
    Z = (X_nan - est.mean_) / est.scale_
    forest = make_imputer(
        "missforest", random_state=seeds[0], n_estimators=20, max_iter=3
    ).fit_transform(Z)
    np.testing.assert_allclose(start[mask], (forest * est.scale_ + est.mean_)[mask], atol=1e-5)
    assert start[~mask].tobytes() == X_nan[~mask].tobytes()


def test_forest_start_on_several_threads_is_the_same_start(data, monkeypatch) -> None:
    """n_jobs only spreads each forest over threads: the forests get n_jobs, and the start they
    give is the single-threaded one up to the order of summing the trees' predictions."""
    import tdm._starts

    _, X_nan, mask = data
    asked: list[int | None] = []
    forest = tdm._starts._forest

    def spy(seed: int, trees: int, max_features: Any = "sqrt", n_jobs: int | None = 1) -> Any:
        asked.append(n_jobs)
        return forest(seed, trees, max_features, n_jobs)

    monkeypatch.setattr(tdm._starts, "_forest", spy)
    one = TDMImputer(init="forest", max_iter=0, random_state=0).fit_transform(X_nan)
    assert set(asked) == {None}
    asked.clear()
    two = TDMImputer._configured(init="forest", max_iter=0, n_jobs=2, random_state=0).fit_transform(
        X_nan
    )
    assert asked and set(asked) == {2}
    np.testing.assert_allclose(two[mask], one[mask], rtol=0, atol=1e-9)
    assert two[~mask].tobytes() == X_nan[~mask].tobytes()
    with pytest.raises(ValueError, match="n_jobs"):
        TDMImputer._configured(n_jobs="all").fit(X_nan)  # type: ignore[arg-type]


def test_the_forest_start_is_missforest_bit_for_bit_without_its_warning() -> None:
    """The written-out rounds equal scikit-learn's IterativeImputer with the same forest, and
    stopping after the planned three rounds is not reported as a failure to converge."""
    from sklearn.exceptions import ConvergenceWarning

    from tdm._starts import make_missforest, start_fill

    X = _nonlinear(n=200)
    X_nan, mask = mcar(X, 0.3)
    mask[:, 3] = False  # a complete column: nothing to impute there
    X_nan[:, 3] = X[:, 3]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = start_fill("forest", X, mask, seed=7)
    assert not [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reference = make_missforest(7, n_estimators=20, max_iter=3).fit_transform(X_nan)
    assert ours.tobytes() == np.where(mask, reference, X).tobytes()
    one_column = start_fill("forest", X[:, :1], mask[:, :1], seed=7)
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

    from tdm._starts import make_ice, start_fill

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(120, n_features)) @ rng.normal(size=(n_features, n_features)) * 30
    X_nan, mask = mcar(X, rate, seed=seed)
    if n_features > 2:
        mask[:, 0], X_nan[:, 0] = False, X[:, 0]  # a complete column: a feature, never a target
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = start_fill("ice", X, mask, seed=seed)
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
    [(low_rank(n=400, d=8, rank=1), "ice"), (_nonlinear(), "forest")],
    ids=["linear-data", "nonlinear-data"],
)
def test_auto_start_picks_the_start_with_the_lower_probe_error(X, winner: str) -> None:
    """init="auto" hides a few observed cells, imputes them with ICE and with a forest, and
    starts from the forest only where it got them clearly (10%) better; the probe cells end up
    observed as before."""
    X_nan, mask = mcar(X, 0.2)
    est = TDMImputer(init="auto", max_iter=0, random_state=0)
    out = est.fit_transform(X_nan)
    assert est.init_ == winner
    assert set(est.start_scores_) == {"ice", "forest"}
    loser = next(k for k in est.start_scores_ if k != winner)
    assert est.start_scores_[winner] < est.start_scores_[loser]
    if winner == "forest":
        assert est.start_scores_["forest"] < 0.9 * est.start_scores_["ice"]
    assert out[~mask].tobytes() == X_nan[~mask].tobytes()
    fixed = TDMImputer(init=winner, max_iter=0, random_state=0).fit_transform(X_nan)
    other = TDMImputer(init=loser, max_iter=0, random_state=0).fit_transform(X_nan)
    assert mae(X, fixed, mask) < mae(X, other, mask)  # the probe's choice holds on the truth


@pytest.mark.parametrize("large_cells", [100_000, 1], ids=["small-table", "large-table"])
@pytest.mark.parametrize(("forest_error", "choice"), [(0.95, "ice"), (0.85, "forest")])
def test_auto_start_needs_the_forest_clearly_better(
    monkeypatch, forest_error, choice, large_cells
) -> None:
    """The forest's start is taken only when its probe error is below 0.9 times ICE's. On a
    small table the chosen start is computed again on every observed cell and no probe is
    returned; on a large one (LARGE_CELLS observed cells) the start is the chosen candidate's
    imputation in the probe run, probe cells included, and the probe is returned."""
    import tdm._starts

    hidden_sets: list[np.ndarray] = []

    def fake_fill(
        kind: str,
        values: np.ndarray,
        hidden: np.ndarray,
        seed: int,
        groups: np.ndarray | None,
        size: tuple[int, int],
        n_jobs: int | None = None,
    ) -> np.ndarray:
        hidden_sets.append(hidden)
        error = 1.0 if kind == "ice" else forest_error
        return np.where(hidden, np.nan_to_num(values) + error, values)

    monkeypatch.setattr(tdm._starts, "start_fill", fake_fill)
    monkeypatch.setattr(tdm._starts, "LARGE_CELLS", large_cells)
    X = low_rank()
    mask = np.zeros(X.shape, dtype=bool)
    mask[::5, 2] = True
    rng = np.random.default_rng(0)
    picked, scores, start, returned = tdm._starts.choose_start(X, mask, rng, seed=0)
    assert picked == choice
    assert scores == pytest.approx({"ice": 1.0, "forest": forest_error})
    error = 1.0 if choice == "ice" else forest_error
    probe = hidden_sets[0] & ~mask
    assert probe.sum() == round(0.05 * (~mask).sum())
    if large_cells == 1:  # large: two runs, the start (probe cells too) from the probe run
        assert len(hidden_sets) == 2 and returned is not None
        np.testing.assert_array_equal(returned, probe)
        np.testing.assert_array_equal(start, np.where(mask | probe, X + error, X))
    else:  # small: a third run with only the missing cells hidden
        assert len(hidden_sets) == 3 and returned is None
        np.testing.assert_array_equal(hidden_sets[2], mask)
        np.testing.assert_array_equal(start, np.where(mask, X + error, X))


def test_auto_start_survives_save_and_load(tmp_path: Path) -> None:
    X_nan, _ = mcar(_nonlinear(), 0.2)
    est = TDMImputer(init="auto", max_iter=5, batch_size=64, random_state=0).fit(X_nan)
    est.save(tmp_path / "imputer.pt")
    loaded = TDMImputer.load(tmp_path / "imputer.pt")
    assert (loaded.init_, loaded.start_scores_) == (est.init_, est.start_scores_)
    new = X_nan[:30].copy()
    new[:, 2] = np.nan
    assert loaded.transform(new).tobytes() == est.transform(new).tobytes()
