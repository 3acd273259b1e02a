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
    RowSampler,
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


_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, _CUDA])]


def _sampler(kind: str, seed: int) -> RowSampler:
    """The CPU's NumPy sampler, the device sampler on the CPU, or the one a CUDA fit builds."""
    rng = np.random.default_rng(seed)
    if kind == "numpy":
        return RowSampler.on(torch.device("cpu"), rng)
    if kind == "torch-cpu":
        return RowSampler(rng, torch.device("cpu"), torch.Generator().manual_seed(seed))
    return RowSampler.on(torch.device("cuda"), rng)


SAMPLERS = ["numpy", "torch-cpu", pytest.param("cuda", marks=[pytest.mark.gpu, _CUDA])]


@pytest.mark.parametrize("kind", SAMPLERS)
def test_disjoint_batches_share_no_row_and_independent_ones_may(kind: str) -> None:
    """Each batch has distinct rows; only the independent draw puts a row in both, about as
    often as two independent draws of 4 of 10 rows would (expected overlap 1.6 rows)."""
    sampler = _sampler(kind, 0)
    overlaps = {}
    for draw in ("disjoint", "independent"):
        shared = []
        for _ in range(2000):
            rows = draw_batch_rows(sampler, 10, 4, draw)
            assert rows.device.type == sampler.device.type and rows.dtype == torch.int64
            first, second = set(rows[:4].tolist()), set(rows[4:].tolist())
            assert rows.shape == (8,) and len(first) == len(second) == 4
            shared.append(len(first & second))
        overlaps[draw] = np.mean(shared)
    assert overlaps["disjoint"] == 0.0
    assert overlaps["independent"] == pytest.approx(1.6, abs=0.1)
    with pytest.raises(ValueError, match="draw must be one of"):
        draw_batch_rows(sampler, 100, 16, "overlapping")


def test_on_a_cpu_the_disjoint_draw_is_one_numpy_draw() -> None:
    """A CPU fit's batches, and its generator's state after them, are those of one
    ``rng.choice`` of ``2 * batch_size`` rows (NumPy's draw touches only the rows it draws,
    where ``torch.randperm`` shuffles them all)."""
    ours, reference = np.random.default_rng(5), np.random.default_rng(5)
    sampler = RowSampler.on(torch.device("cpu"), ours)
    assert sampler.generator is None
    for _ in range(3):
        rows = draw_batch_rows(sampler, 100, 16, "disjoint")
        np.testing.assert_array_equal(rows.numpy(), reference.choice(100, size=32, replace=False))
    assert ours.bit_generator.state == reference.bit_generator.state


@pytest.mark.parametrize(
    "kind", ["torch-cpu", pytest.param("cuda", marks=[pytest.mark.gpu, _CUDA])]
)
def test_a_device_sampler_repeats_its_draws_for_a_seed_and_differs_for_another(kind: str) -> None:
    """Two device samplers seeded alike draw the same rows, step after step; another seed
    draws others; off a CPU the sampler takes its seed from the fit's rng (one draw)."""
    draws = [
        torch.stack([draw_batch_rows(_sampler(kind, seed), 1000, 64, "disjoint") for _ in range(5)])
        for seed in (3, 3, 4)
    ]
    torch.testing.assert_close(draws[0], draws[1], rtol=0, atol=0)
    assert not torch.equal(draws[0], draws[2])
    if kind == "cuda":
        ours, reference = np.random.default_rng(7), np.random.default_rng(7)
        RowSampler.on(torch.device("cuda"), ours)
        reference.integers(2**62)
        assert ours.bit_generator.state == reference.bit_generator.state


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


def test_rmsprop_is_torch_s_update_bit_for_bit() -> None:
    """The fit's own RMSprop (no TorchDynamo import) gives torch.optim.RMSprop's parameters
    exactly: two groups with their own rates, and a parameter without a gradient left alone."""
    from tdm._optimise import RMSprop

    generator = torch.Generator().manual_seed(0)
    start = [torch.randn(7, 3, generator=generator, dtype=torch.float64) for _ in range(3)]
    targets = [torch.randn(7, 3, generator=generator, dtype=torch.float64) for _ in range(3)]
    ours = [p.clone().requires_grad_() for p in start]
    theirs = [p.clone().requires_grad_() for p in start]
    mine = RMSprop([{"params": ours[:2], "lr": 3e-3}, {"params": ours[2:]}], lr=1e-2)
    reference = torch.optim.RMSprop(
        [{"params": theirs[:2], "lr": 3e-3}, {"params": theirs[2:]}], lr=1e-2
    )
    for step in range(25):
        for params, optimizer in ((ours, mine), (theirs, reference)):
            optimizer.zero_grad(set_to_none=True)
            used = params if step % 5 else params[:2]  # the third one sometimes has no gradient
            sum(((p - t) ** 4).sum() for p, t in zip(used, targets, strict=False)).backward()
            optimizer.step()
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a, b)
