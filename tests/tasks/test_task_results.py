"""The result types the steps return: frozen, and importable without any other task module."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tasks.results import FittedModel, ImputationOutcome, ImputeTableResult, WriteResult

REPO = Path(__file__).resolve().parents[2]


def _outcome() -> ImputationOutcome:
    return ImputationOutcome(pd.DataFrame({"a": [1.0]}), "TDMImputer", {}, "cpu", 1, 0.5, 0.1)


def test_results_cannot_be_changed_by_a_later_step() -> None:
    """Every result type is a frozen dataclass: assigning a field raises."""
    write = WriteResult("w.duckdb", "t_imputed", False, rows=3, cells_imputed=1, run_id="r")
    table = ImputeTableResult(
        "r", "w.duckdb", "t", "t_imputed", False, "imputed", 3, {"a": 1}, "cpu", 1, 0.5, 0.1
    )
    for result in (write, table, _outcome(), FittedModel(imputer=None, outcome=_outcome())):
        first = dataclasses.fields(result)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(result, first, "other")
    assert table.seconds == {}


def test_each_outcome_gets_its_own_empty_loss_history() -> None:
    """Without a recorded loss the history is empty, and not one array shared by outcomes."""
    first, second = _outcome(), _outcome()
    assert first.loss_history.shape == (0,) and first.loss_history.dtype == np.float64
    assert first.loss_history is not second.loss_history


def test_results_import_no_other_task_module() -> None:
    """`tasks.results` loads alone (so every task module can import it without a cycle)."""
    code = (
        "import sys, tasks.results; "
        "print(sorted(m for m in sys.modules if m.startswith(('tasks.', 'flows', 'prefect'))))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert run.stdout.strip() == "['tasks.results']"
