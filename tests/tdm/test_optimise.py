"""The optimisation's pieces: the batches' draw, the cells' RMSprop step per visit, the batch-size
rule and the step loop's records, stopping and finiteness checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from tdm._optimise import (
    FitProgress,
    StepHistory,
    cell_rate,
    draw_batch_rows,
    run_steps,
    visit_step_factor,
)
from tdm.imputer import TDMImputer
from tdm.transport import TransportTerms


def _terms(loss: float, mean_cost: float = 1.0) -> TransportTerms:
    return TransportTerms(torch.tensor(loss), torch.tensor(mean_cost))


def _run(step: Callable[[int], TransportTerms], n_iter: int = 20, **kwargs: Any) -> StepHistory:
    return run_steps(
        step,
        None,
        n_iter,
        device=torch.device("cpu"),
        dtype=torch.float32,
        stage="fit",
        owner="X",
        lr=0.5,
        **kwargs,
    )


def test_disjoint_batches_share_no_row_and_independent_ones_may() -> None:
    """Each batch has distinct rows; only the independent draw puts a row in both, about as
    often as two independent draws of 4 of 10 rows would (expected overlap 1.6 rows)."""
    rng = np.random.default_rng(0)
    overlaps = {}
    for draw in ("disjoint", "independent"):
        shared = []
        for _ in range(2000):
            rows = draw_batch_rows(rng, 10, 4, draw)
            first, second = rows[:4], rows[4:]
            assert rows.shape == (8,) and len(set(first)) == len(set(second)) == 4
            shared.append(len(set(first) & set(second)))
        overlaps[draw] = np.mean(shared)
    assert overlaps["disjoint"] == 0.0
    assert overlaps["independent"] == pytest.approx(1.6, abs=0.1)


def test_the_disjoint_draw_is_the_one_draw_of_earlier_versions() -> None:
    """The default's batches, and the generator's state after them, are those of one
    ``rng.choice`` of ``2 * batch_size`` rows (tdm <= 0.10), so the default fits as before."""
    ours, earlier = np.random.default_rng(5), np.random.default_rng(5)
    for _ in range(3):
        rows = draw_batch_rows(ours, 100, 16, "disjoint")
        np.testing.assert_array_equal(rows, earlier.choice(100, size=32, replace=False))
    assert ours.bit_generator.state == earlier.bit_generator.state
    with pytest.raises(ValueError, match="draw must be one of"):
        draw_batch_rows(ours, 100, 16, "overlapping")


def test_independent_batches_leave_rows_out_where_disjoint_ones_take_every_row(data) -> None:
    """With 2 * batch_size = n_samples, one step of disjoint batches moves every missing cell;
    one step of independent batches (the published code's, paper mode's) leaves about half of
    them at their start: those of the rows drawn into neither batch (a quarter) and of most rows
    drawn into both (a quarter), which the exact transport pairs with themselves at no cost."""
    _, X_nan, mask = data
    one = {"random_state": 0, "batch_size": X_nan.shape[0] // 2, "init": "mean"}
    start = TDMImputer(**one, max_iter=0).fit(X_nan).X_fit_
    unmoved = {}
    for draw in ("disjoint", "independent"):
        fitted = TDMImputer._configured(**one, max_iter=1, batch_draw=draw).fit(X_nan).X_fit_
        unmoved[draw] = np.mean(fitted[mask] == start[mask])
    assert unmoved["disjoint"] == 0.0
    assert 0.35 < unmoved["independent"] < 0.6
    assert TDMImputer.paper()._config.batch_draw == "independent"


@pytest.mark.parametrize("share", [1.0, 0.5, 0.1])
def test_visit_step_factor_is_rmsprop_s_step_per_visit(share: float) -> None:
    """RMSprop on cells that get a gradient only in a share of the steps: each visit's step is
    visit_step_factor(share) times the rate (within 5%)."""
    generator = torch.Generator().manual_seed(0)
    cells = nn.Parameter(torch.zeros(4000, dtype=torch.float64))
    optimizer = torch.optim.RMSprop([cells], lr=1e-3)
    steps = []
    for it in range(1500):
        visited = torch.rand(cells.shape, generator=generator, dtype=torch.float64) < share
        before = cells.detach().clone()
        cells.grad = visited.to(torch.float64)
        optimizer.step()
        if it >= 700:  # the running mean has settled
            steps.append((before - cells.detach())[visited].abs().mean().item() / 1e-3)
    assert np.mean(steps) == pytest.approx(visit_step_factor(share), rel=0.05)


def test_cell_rate_is_lr_at_half_the_rows_or_more_and_lower_below() -> None:
    """The corrected rate equals lr when at least half the rows are drawn, and is lr divided by
    the factor's growth beyond a share of 0.5 otherwise; uncorrected it is always lr."""
    assert cell_rate(0.01, 600, 1000, correct=True) == 0.01
    expected = 0.01 * visit_step_factor(0.5) / visit_step_factor(0.05)
    assert cell_rate(0.01, 50, 1000, correct=True) == pytest.approx(expected, rel=1e-12)
    assert cell_rate(0.01, 50, 1000, correct=False) == 0.01


def test_run_steps_records_each_loss_and_its_ratio_to_the_mean_pair_cost() -> None:
    """Step k has loss k + 1 over a mean pair cost of 2 (k + 1) + 2: both histories hold it, the
    callback sees the same ratio, and a mean cost of 0 gives NaN, not a division error."""

    def step(it: int) -> TransportTerms:
        return _terms(it + 1.0, 0.0 if it == 4 else 2.0 * (it + 1) + 2)

    seen: list[FitProgress] = []
    history = _run(step, 6, callback=seen.append)
    np.testing.assert_array_equal(history.loss, [1, 2, 3, 4, 5, 6])
    expected = [1 / 4, 2 / 6, 3 / 8, 4 / 10, np.nan, 6 / 14]
    np.testing.assert_allclose(history.cost_ratio, expected, rtol=1e-6)
    assert history.loss.dtype == history.cost_ratio.dtype == np.float64
    assert [p.iteration for p in seen] == [1, 2, 3, 4, 5, 6]
    np.testing.assert_allclose([p.cost_ratio for p in seen], expected, rtol=1e-6)
    assert [p.loss for p in seen] == [1, 2, 3, 4, 5, 6]


def test_run_steps_keeps_only_the_steps_run_when_the_callback_stops_it() -> None:
    """A callback returning True at step 3 leaves three records in each history."""
    history = _run(lambda it: _terms(1.0, 4.0), callback=lambda p: p.iteration == 3)
    assert history.loss.shape == history.cost_ratio.shape == (3,)
    np.testing.assert_allclose(history.cost_ratio, [0.25] * 3)


def test_run_steps_names_the_first_non_finite_step() -> None:
    """A loss that becomes NaN at step 7 stops the fit with an error naming step 7 and lr."""
    expected = r"non-finite at iteration 7; lower lr \(now 0.5\)"
    with pytest.raises(FloatingPointError, match=expected):
        _run(lambda it: _terms(float("nan") if it >= 6 else 1.0))


def test_run_steps_names_the_step_whose_transport_costs_are_non_finite() -> None:
    """Non-finite costs found by the solver at step 3 stop the fit naming step 3 and lr."""

    def step(it: int) -> TransportTerms:
        if it == 2:
            raise FloatingPointError("the transport costs became non-finite (NaN or inf)")
        return _terms(1.0)

    with pytest.raises(FloatingPointError, match=r"iteration 3; lower lr \(now 0.5\)"):
        _run(step)
