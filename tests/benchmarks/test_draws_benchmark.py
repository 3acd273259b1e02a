"""The draws benchmark's measures: label distance, and the reference of draws from the shares."""

from __future__ import annotations

import math
import sys

import pandas as pd
import pytest

import benchmarks.draws as draws
from benchmarks.draws import MARGINAL, label_distance, label_marginal


def test_label_distance_is_the_total_variation_averaged_over_completions() -> None:
    removed = [pd.Series(["a", "a", "b", "b"]), pd.Series(["x", "y"])]
    same = [pd.Series(["b", "a", "b", "a"]), pd.Series(["y", "x"])]
    off = [pd.Series(["a", "a", "a", "a"]), pd.Series(["x", "x"])]
    mean, worst = label_distance(removed, [same, off])
    assert (mean, worst) == (0.25, 0.25)  # each column: (0 + 0.5) / 2


def test_draws_from_the_observed_shares_are_near_but_not_on_the_removed_ones() -> None:
    row = label_marginal("penguins", 0)
    assert row["method"] == MARGINAL and math.isnan(row["coverage"])
    assert 0 < row["labels"] <= row["labels_worst"] < 0.2


def test_bad_arguments_are_refused_before_any_measurement(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: no table gave a KeyError, a table of the other grid or a bad seed a traceback, and a
    --rows file in a missing folder failed only after the measurement."""
    monkeypatch.setattr(draws, "measure", lambda *a: pytest.fail("measured"))
    for argv, message in (
        ([], "name the tables to measure"),
        (["--mixed", "seeds"], "--mixed takes tables of penguins"),
        (["--datasets", "seeds", "--seeds", "a"], "--seeds takes comma-separated whole"),
        (["--datasets", "seeds", "--rows", "/nowhere/x.jsonl"], "its folder does not exist"),
    ):
        monkeypatch.setattr(sys, "argv", ["draws", *argv])
        with pytest.raises(SystemExit) as exited:
            draws.main()
        assert exited.value.code == 2 and message in capsys.readouterr().err


def test_a_section_names_the_command_that_ran_with_all_its_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bug: the Command: line kept three chosen flags, dropping --no-baselines, --write and the
    thread count, so running it again measured something else."""
    from benchmarks._timing import command

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(sys, "argv", ["draws.py", "--datasets", "seeds", "--no-baselines"])
    assert command("draws") == (
        "OMP_NUM_THREADS=1 python -m benchmarks.draws --datasets seeds --no-baselines"
    )
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert command("row_scaling", ["--label", "a b"]) == (
        "python -m benchmarks.row_scaling --label 'a b'"
    )
