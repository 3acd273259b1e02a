"""The safeguard of ``init="auto"`` on large tables: the probe cells stay hidden through the
refinement, and the missing cells end at the start, the refinement or a share of the way between,
whichever imputes them best."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tdm._starts
from tdm import TDMImputer
from tdm._optimise import FitProgress
from tdm._safeguard import guard
from tests.tdm.conftest import low_rank, mcar
from tests.tdm.test_mixed import random_mixed_frame


def _mae(X: np.ndarray, X_imp: np.ndarray, mask: np.ndarray) -> float:
    return float(np.abs(X_imp[mask] - X[mask]).mean())


def _nonlinear(n: int = 600, seed: int = 0) -> np.ndarray:
    """Even functions of a latent: a linear start misses them, the refinement improves it."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2, 2, size=(n, 1))
    return np.hstack([t, t**2, np.abs(t), np.cos(2 * t)]) + 0.02 * rng.normal(size=(n, 4))


@pytest.fixture
def large(monkeypatch) -> None:
    """Every table counts as large (LARGE_CELLS observed cells), so small data exercise it."""
    monkeypatch.setattr(tdm._starts, "LARGE_CELLS", 1)


def _stages(est: TDMImputer, X_new: np.ndarray) -> list[str]:
    seen: list[str] = []

    def record(progress: FitProgress) -> None:
        seen.append(progress.stage)

    est.set_params(callback=record)
    est.transform(X_new)
    return seen


def test_a_refinement_that_loses_on_the_probe_cells_gives_back_the_start(large) -> None:
    """On rank-one data ICE's start is almost exact; a refinement with a far too large cell rate
    moves the cells away. The probe cells see it, and fit returns the anchor (bit for bit
    the no-step fit's), with the observed cells, probe cells included, unchanged; new rows then
    get their start with no step."""
    X = low_rank(n=400, d=6, rank=1)
    X_nan, mask = mcar(X, 0.2)
    params = {"init": "auto", "batch_size": 64, "random_state": 0}
    est = TDMImputer(max_iter=200, lr=1.0, network_lr=1e-3, **params)
    out = est.fit_transform(X_nan)
    assert est.refined_share_ == 0.0
    assert set(est.safeguard_scores_) == {0.0, 0.25, 0.5, 0.75, 1.0}
    assert est.safeguard_scores_[0.0] == min(est.safeguard_scores_.values())
    start = TDMImputer(max_iter=0, **params).fit_transform(X_nan)
    assert out.tobytes() == start.tobytes()
    # the start kept is the one computed with every observed cell, not the probe run's
    full = TDMImputer(max_iter=0, **{**params, "init": est.init_}).fit_transform(X_nan)
    assert out.tobytes() == full.tobytes()
    assert out[~mask].tobytes() == X_nan[~mask].tobytes()
    unguarded = TDMImputer._configured(
        max_iter=200, lr=1.0, network_lr=1e-3, safeguard=False, **params
    )
    assert _mae(X, out, mask) < _mae(X, unguarded.fit_transform(X_nan), mask)
    assert unguarded.refined_share_ == 1.0 and unguarded.safeguard_scores_ is None
    new, _ = mcar(low_rank(n=400, d=6, rank=1)[:40], 0.2, seed=5)
    assert _stages(est, new) == []


def test_a_refinement_that_wins_on_the_probe_cells_is_kept(large, monkeypatch) -> None:
    """ICE's start (the forest never taken here) misses nonlinear columns; the refinement
    improves on it, the probe cells see it, and the refined cells are kept."""
    monkeypatch.setattr(tdm._starts, "FOREST_MARGIN", 0.0)
    X = _nonlinear()
    X_nan, mask = mcar(X, 0.2)
    ice = TDMImputer(init="ice", max_iter=0, random_state=0).fit_transform(X_nan)
    est = TDMImputer(init="auto", max_iter=300, batch_size=64, random_state=0)
    out = est.fit_transform(X_nan)
    assert est.init_ == "ice" and est.forest_size_ is None
    assert est.refined_share_ > 0.0
    assert est.safeguard_scores_[est.refined_share_] == min(est.safeguard_scores_.values())
    assert est.safeguard_scores_[est.refined_share_] < est.safeguard_scores_[0.0]
    assert out[~mask].tobytes() == X_nan[~mask].tobytes()
    assert _mae(X, out, mask) < _mae(X, ice, mask)
    new, _ = mcar(_nonlinear(seed=1)[:40], 0.2, seed=5)
    assert set(_stages(est, new)) == {"transform"}


def test_large_tables_get_the_larger_forest(large, monkeypatch) -> None:
    """On a large table the forest start is 5 warm-up rounds of 20 trees, then 2 rounds of 100
    trees: the forests are fitted with those trees, in that order, over every column with a
    hole; sizes given replace them."""
    import tdm._starts

    X_nan, mask = mcar(_nonlinear(n=200), 0.2)
    trees: list[int] = []
    forest = tdm._starts._forest

    def spy(seed: int, n_trees: int, *rest: object, **options: object) -> object:
        trees.append(n_trees)
        return forest(seed, n_trees, *rest, **options)

    monkeypatch.setattr(tdm._starts, "_forest", spy)
    assert TDMImputer(init="forest", max_iter=0).fit(X_nan).forest_size_ == (100, 2, 5)
    holes = int(mask.any(axis=0).sum())
    assert trees == [20] * (5 * holes) + [100] * (2 * holes)
    trees.clear()
    cold = TDMImputer._configured(init="forest", forest_rounds=4, forest_warm_rounds=0, max_iter=0)
    assert cold.fit(X_nan).forest_size_ == (100, 4, 0)
    assert trees == [100] * (4 * holes)


def test_the_guard_scores_the_blind_start_and_moves_from_the_anchor() -> None:
    """The probe cells score shares of the way from the blind start to the refinement; the cells
    returned are the winning share of the way from the anchor, the probe cells given back; a
    label coordinate (after the numeric columns) is the refined one, or the anchor's at 0."""
    Z = np.random.default_rng(0).normal(size=(50, 3))
    probe = np.zeros(Z.shape, dtype=bool)
    probe[:10, 0] = True  # rows 10 on hold no probe cell
    initial, refined, anchor = Z + 1.0, Z - 1.0, Z + 5.0  # halfway is exact on the probe cells
    out, share, scores = guard(refined, initial, probe, Z, 2, anchor)
    assert share == 0.5 and scores[0.5] == pytest.approx(0.0, abs=1e-12)
    assert scores[0.0] == pytest.approx(1.0)
    # anchor + 0.5 * (refined - anchor) in the numeric columns, the refined label
    np.testing.assert_allclose(out[10:, :2], Z[10:, :2] + 2.0)
    assert out[:, 2].tobytes() == refined[:, 2].tobytes()
    assert out[probe].tobytes() == Z[probe].tobytes()
    without, same_share, _ = guard(refined, initial, probe, Z, 2)
    assert same_share == 0.5
    np.testing.assert_allclose(without[10:, :2], Z[10:, :2])
    kept, none, _ = guard(Z + 3.0, initial, probe, Z, 2, anchor)  # the refinement loses
    assert none == 0.0
    assert kept[10:].tobytes() == anchor[10:].tobytes()


def test_no_step_returns_the_anchor_with_labels_and_held_out_cells(large) -> None:
    """A mixed frame with early stopping's held-out cells: a no-step default fit returns the
    anchor, the chosen start run again on every cell it may see (labels at their points),
    bit for bit as that start fitted on its own; observed cells unchanged."""
    _, holes = random_mixed_frame(0, n=160)
    params = {"max_iter": 0, "early_stopping": True, "forest_trees": 10, "random_state": 0}
    est = TDMImputer._configured(**params)
    out = est.fit_transform(holes)
    assert est.safeguard_scores_ is not None and est.refined_share_ == 0.0
    pd.testing.assert_frame_equal(
        out, TDMImputer._configured(init=est.init_, **params).fit_transform(holes)
    )
    observed = holes.notna()
    pd.testing.assert_frame_equal(out.where(observed), holes.where(observed))


def test_small_tables_have_no_safeguard_and_the_light_forest() -> None:
    X_nan, _ = mcar(_nonlinear(n=200), 0.2)
    est = TDMImputer(init="auto", max_iter=5, batch_size=32, random_state=0).fit(X_nan)
    assert est.refined_share_ == 1.0 and est.safeguard_scores_ is None
    assert est.forest_size_ in (None, (20, 3, 0))
    sized = TDMImputer._configured(init="forest", forest_trees=7, forest_rounds=2, max_iter=0).fit(
        X_nan
    )
    assert sized.forest_size_ == (7, 2, 0)
    warm = TDMImputer._configured(init="forest", forest_warm_rounds=1, max_iter=0).fit(X_nan)
    assert warm.forest_size_ == (20, 3, 1)


def test_new_rows_get_the_chosen_share_of_their_refinement(large, monkeypatch) -> None:
    """With a share between 0 and 1, new rows end that share of the way from their start to
    their refined cells (numeric columns), observed cells unchanged."""
    monkeypatch.setattr(tdm._starts, "FOREST_MARGIN", 0.0)
    X = _nonlinear()
    X_nan, _ = mcar(X, 0.2)
    est = TDMImputer(max_iter=50, batch_size=64, transform_max_iter=30, random_state=0)
    est.fit(X_nan)
    new, new_mask = mcar(_nonlinear(seed=1)[:60], 0.2, seed=5)
    outputs = {}
    for share in (0.0, 0.5, 1.0):
        est.refined_share_ = share
        outputs[share] = est.transform(new)
        assert outputs[share][~new_mask].tobytes() == new[~new_mask].tobytes()
    assert not np.allclose(outputs[0.0][new_mask], outputs[1.0][new_mask])
    halfway = (outputs[0.0] + outputs[1.0]) / 2
    np.testing.assert_allclose(outputs[0.5][new_mask], halfway[new_mask], atol=1e-9)


def test_the_kept_start_survives_save_and_load(large, tmp_path: Path) -> None:
    X_nan, _ = mcar(low_rank(n=400, d=6, rank=1), 0.2)
    est = TDMImputer(max_iter=200, lr=1.0, network_lr=1e-3, batch_size=64, random_state=0)
    est.fit(X_nan)
    est.save(tmp_path / "imputer.pt")
    loaded = TDMImputer.load(tmp_path / "imputer.pt")
    assert (loaded.refined_share_, loaded.safeguard_scores_, loaded.forest_size_) == (
        est.refined_share_,
        est.safeguard_scores_,
        est.forest_size_,
    )
    assert loaded.refined_share_ == 0.0
    new = X_nan[:30].copy()
    new[:, 2] = np.nan
    assert loaded.transform(new).tobytes() == est.transform(new).tobytes()
