"""Paper mode with the published step's arithmetic swapped in: what is swapped, that it is swapped
back, and that the swapped loss is the same transport cost with the same gradient."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest
import torch

import tdm.coupling
from benchmarks import published_arithmetic as arithmetic
from benchmarks.paper_trajectory import CHECKPOINTS, PUBLISHED_KEY, fit_key
from tdm import TDMImputer
from tdm.transport import transport_terms


def test_the_swap_holds_inside_the_block_and_is_undone_after_an_error() -> None:
    log_scale, loss = tdm.coupling.bounded_log_scale, TDMImputer._loss
    with pytest.raises(RuntimeError, match="inside"), arithmetic.published_arithmetic():
        assert tdm.coupling.bounded_log_scale is arithmetic.freia_log_scale
        assert TDMImputer._loss is arithmetic.emd2_on_cdist
        raise RuntimeError("inside")
    assert tdm.coupling.bounded_log_scale is log_scale and TDMImputer._loss is loss


def test_a_paper_mode_coupling_takes_freia_s_constant_inside_the_block() -> None:
    generator = torch.Generator().manual_seed(0)
    conditioner = tdm.coupling.Conditioner(3, 2, 8, 2.0, generator, True, "unscaled")
    h = torch.randn(5, 3, generator=generator)
    raw = conditioner.net(h)
    with torch.no_grad(), arithmetic.published_arithmetic():
        inside, _ = conditioner(h)
    outside, _ = conditioner(h)
    torch.testing.assert_close(inside, 2.0 * 0.636 * torch.atan(raw))
    torch.testing.assert_close(outside, 2.0 * (2 / math.pi) * torch.atan(raw))
    with pytest.raises(ValueError, match="unscaled"):
        arithmetic.freia_log_scale(raw, 2.0, "scaled")


def test_the_published_loss_is_paper_mode_s_transport_cost_with_its_gradient() -> None:
    generator = torch.Generator().manual_seed(1)
    z1 = torch.randn(64, 30, generator=generator, dtype=torch.float64, requires_grad=True)
    z2 = torch.randn(64, 30, generator=generator, dtype=torch.float64)
    published = arithmetic.emd2_on_cdist(TDMImputer.paper(), z1, z2).loss
    (grad_published,) = torch.autograd.grad(published, z1)
    ours = transport_terms(z1, z2, cost="euclidean", solver="assignment").loss
    (grad_ours,) = torch.autograd.grad(ours, z1)
    assert published.item() == pytest.approx(ours.item(), rel=1e-12)
    torch.testing.assert_close(grad_published, grad_ours, rtol=1e-9, atol=1e-12)


def _row(state: int, params: str, base: float) -> dict[Any, Any]:
    row: dict[Any, Any] = {"dataset": "breast_cancer", "seed": 1, "random_state": state}
    row.update({"params": params, "seconds": 1.0})
    row.update({at: base for at in CHECKPOINTS})
    return row


def test_the_comparison_sets_the_three_arms_side_by_side_on_the_masks_asked_for() -> None:
    rows = pd.DataFrame(
        [
            _row(1001, arithmetic.KEY, 0.35),
            _row(2001, arithmetic.KEY, 0.37),
            _row(1001, fit_key({}), 0.31),
            _row(1001, PUBLISHED_KEY, 0.41),
            {**_row(1002, PUBLISHED_KEY, 0.9), "seed": 2},  # another mask: left out
        ]
    )
    text = arithmetic.compare(rows, ["breast_cancer"], [1])
    lines = text.splitlines()
    assert lines[2].startswith("| breast_cancer | published arithmetic (2) | 0.360 (± 0.014) |")
    assert lines[3].startswith("| breast_cancer | paper mode (1) | 0.310 (± nan) |")
    assert lines[4].startswith("| breast_cancer | published code (1) | 0.410 (± nan) |")
    assert len(lines) == 5
