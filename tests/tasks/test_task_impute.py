"""Impute step: TDM fills every missing cell and reports progress."""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import pytest
import torch

from tasks.errors import PipelineError, PipelineInputError
from tasks.impute import PrefectProgress, impute
from tdm import FitProgress
from tests.conftest import auto_device

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _standardised(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.normal(size=(40, 3)), columns=["a", "b c", 'd"e'])
    return frame.mask(rng.random(frame.shape) < 0.2)


def test_impute_fills_missing_cells_and_records_the_fit() -> None:
    """Every missing cell is filled, observed ones are kept, and the fit is described."""
    frame = _standardised()
    outcome = impute.fn(frame, {"max_iter": 12}, seed=3, table="t")
    assert not outcome.frame.isna().any().any()
    observed = frame.notna().to_numpy()
    assert np.array_equal(outcome.frame.to_numpy()[observed], frame.to_numpy()[observed])
    assert list(outcome.frame.columns) == list(frame.columns)
    assert outcome.imputer == "TDMImputer"
    assert outcome.n_iter == 12
    assert outcome.device == auto_device()
    assert outcome.loss_history.shape == outcome.cost_ratio_history.shape == (12,)
    assert ((outcome.cost_ratio_history > 0) & (outcome.cost_ratio_history <= 1)).all()
    assert outcome.hyperparameters["max_iter"] == 12
    assert outcome.hyperparameters["random_state"] == 3
    assert outcome.hyperparameters["standardize"] is False
    assert np.isfinite(outcome.final_loss)


def test_unset_settings_are_the_library_defaults_and_init_passes_through() -> None:
    """The lineage records what ran: the library's defaults unless told otherwise, and which
    start "auto" chose."""
    frame = _standardised()
    used = impute.fn(frame, {"max_iter": 3}, seed=0, table="t").hyperparameters
    assert (used["init"], used["max_iter"], used["network_lr"]) == ("auto", 3, 3e-3)
    assert used["start_used"] in ("ice", "trees")
    assert set(used["start_scores"]) == {"ice", "trees"}
    paper = impute.fn(frame, {"max_iter": 3, "init": "mean"}, seed=0, table="t")
    assert paper.hyperparameters["init"] == "mean"
    assert (paper.hyperparameters["start_used"], paper.hyperparameters["start_scores"]) == (
        "mean",
        None,
    )


def test_impute_is_reproducible_with_a_seed() -> None:
    """The same seed gives the same imputed values."""
    frame = _standardised()
    first = impute.fn(frame, {"max_iter": 8}, seed=7, table="t").frame
    second = impute.fn(frame, {"max_iter": 8}, seed=7, table="t").frame
    pd.testing.assert_frame_equal(first, second)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message without CUDA")
def test_impute_refuses_cuda_without_a_gpu() -> None:
    """Asking for CUDA on a machine without it is a clear error naming the table."""
    with pytest.raises(PipelineInputError, match=r'Imputing table "t" failed: .*CUDA is not avail'):
        impute.fn(_standardised(), {"max_iter": 2, "device": "cuda"}, seed=0, table="t")


def test_a_fit_that_diverges_is_a_foreseen_failure_naming_the_table() -> None:
    """Bug: a loss that became non-finite ended the run as "a bug" (FloatingPointError)."""
    settings = {"max_iter": 10, "lr": 1e38, "network_lr": 1e38, "init": "mean"}
    with pytest.raises(PipelineError, match=r'table "t" diverged.*non-finite.*lower lr'):
        impute.fn(_standardised(), settings, seed=0, table="t")


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tasks.impute"]


def test_progress_is_logged_every_tenth_of_the_fit(caplog: pytest.LogCaptureFixture) -> None:
    """Outside a flow, progress goes to the module logger ten times over the start's models,
    then ten times over the steps, each line with the median relative transport cost of the
    iterations since the previous line."""
    report = PrefectProgress("t")
    with caplog.at_level(logging.INFO, logger="tasks.impute"):
        for model in range(1, 21):
            report(FitProgress(model, 20, math.nan, stage="start"))
        for iteration in range(1, 101):
            report(FitProgress(iteration, 100, 1.0 / iteration, cost_ratio=iteration / 200))
    starts, lines = _messages(caplog)[:10], _messages(caplog)[10:]
    assert starts[0] == "TDM start on 't':  10% (2/20 column models of the chained-equation start)"
    assert all(line.startswith("TDM start on 't': ") for line in starts)
    assert len(lines) == 10
    # iterations 91-100: ratios 0.455 ... 0.5, median 0.4775
    assert lines[-1] == (
        "TDM fit on 't': 100% (100/100 iterations), relative transport cost 0.477 "
        "(median of the last 10 iterations)"
    )


@pytest.mark.parametrize("ratio", [0.5, math.nan], ids=["ratio", "loss-only"])
def test_a_spike_of_one_step_does_not_show_in_the_progress_log(
    caplog: pytest.LogCaptureFixture, ratio: float
) -> None:
    """A loss 2,000 times its neighbours' on a reported step: the line gives the median of the
    ten steps since the last line, not the spike; the loss where no ratio was recorded."""
    report = PrefectProgress("t")
    with caplog.at_level(logging.INFO, logger="tasks.impute"):
        for iteration in range(1, 101):
            spike = iteration == 50
            loss = 20.0 if spike else 0.01
            report(FitProgress(iteration, 100, loss, cost_ratio=ratio * (1.98 if spike else 1)))
    measure = "loss 0.01" if math.isnan(ratio) else "relative transport cost 0.5"
    assert _messages(caplog)[4] == (
        f"TDM fit on 't':  50% (50/100 iterations), {measure} (median of the last 10 iterations)"
    )


def test_the_progress_bar_starts_the_steps_from_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bug: the bar stayed at the start's 100% ("chained-equation start") while the steps ran,
    until their first tenth, and on a run cancelled before it."""
    import uuid

    import tasks.impute

    shown: list[tuple[float, str]] = []

    def update(*, artifact_id: object, progress: float, description: str) -> None:
        shown.append((progress, description.rsplit(": ", 1)[1]))

    monkeypatch.setattr(tasks.impute, "update_progress_artifact", update)
    report = PrefectProgress("t")
    report._artifact = uuid.uuid4()  # as inside a task run
    for model in (1, 2):
        report(FitProgress(model, 2, math.nan, stage="start"))
    report(FitProgress(1, 1000, 1.0, cost_ratio=0.5))
    assert shown == [
        (50.0, "chained-equation start"),
        (100.0, "chained-equation start"),
        (0.0, "optimisation steps"),
    ]
