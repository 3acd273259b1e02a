"""The optimisation's pieces: the cells' RMSprop step per visit, the batch-size rule and the step
loop's stopping and finiteness checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from tdm._optimise import cell_rate, run_steps, visit_step_factor


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


def test_run_steps_names_the_first_non_finite_step() -> None:
    """A loss that becomes NaN at step 7 stops the fit with an error naming step 7 and lr."""

    def step(it: int) -> torch.Tensor:
        return torch.tensor(float("nan") if it >= 6 else 1.0)

    expected = r"non-finite at iteration 7; lower lr \(now 0.5\)"
    with pytest.raises(FloatingPointError, match=expected):
        run_steps(
            step,
            None,
            20,
            device=torch.device("cpu"),
            dtype=torch.float32,
            stage="fit",
            owner="X",
            lr=0.5,
        )


def test_run_steps_names_the_step_whose_transport_costs_are_non_finite() -> None:
    """Non-finite costs found by the solver at step 3 stop the fit naming step 3 and lr."""

    def step(it: int) -> torch.Tensor:
        if it == 2:
            raise FloatingPointError("the transport costs became non-finite (NaN or inf)")
        return torch.tensor(1.0)

    with pytest.raises(FloatingPointError, match=r"iteration 3; lower lr \(now 0.5\)"):
        run_steps(
            step,
            None,
            20,
            device=torch.device("cpu"),
            dtype=torch.float32,
            stage="fit",
            owner="X",
            lr=0.5,
        )
