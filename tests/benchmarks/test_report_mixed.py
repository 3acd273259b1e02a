"""The benchmark report's mixed-type section: its own tables (numeric MAE in column SDs,
categorical error rate), tdm against the best baseline per dataset with the count of datasets
where it is no worse, its figure, and the paper tables left to the paper's datasets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.report import MIXED, MethodLayout, summarise, versus_best, write_report


def _rows(dataset: str, method: str, maes: list[float], errors: list[float] | None) -> pd.DataFrame:
    n = len(maes)
    return pd.DataFrame(
        {
            "dataset": [dataset] * n,
            "mechanism": ["mcar"] * n,
            "seed": list(range(n)),
            "method": [method] * n,
            "p": [0.3] * n,
            "params_hash": ["a" * 16] * n,
            "tdm_version": ["0.5.0"] * n,
            "finished_at": pd.Timestamp("2026-11-01"),
            "mae": maes,
            "rmse": maes,
            "w2sq_half": [np.nan if errors is not None else 0.1] * n,
            "accuracy": [np.nan] * n,
            "loss_trace": ["[]"] * n,
            "cat_error": errors if errors is not None else [np.nan] * n,
        }
    )


def _results() -> pd.DataFrame:
    return pd.concat(
        [
            _rows("penguins", "mode", [0.9, 0.9], [0.5, 0.5]),
            _rows("penguins", "miceforest", [0.5, 0.5], [0.2, 0.2]),
            _rows("penguins", "tdm", [0.4, 0.6], [0.3, 0.3]),
            _rows("credit", "mode", [0.8, 0.8], [0.4, 0.4]),
            _rows("credit", "tdm", [0.9, 0.9], [0.4, 0.4]),
            _rows("seeds", "mean", [0.7, 0.7], None),  # a paper dataset: no categorical cells
        ],
        ignore_index=True,
    )


def test_tdm_is_compared_with_the_best_baseline_per_dataset() -> None:
    summary = summarise(_results())
    text = versus_best(summary[summary["dataset"] != "seeds"], "tdm", MIXED.metrics)
    assert "| penguins | mcar | numeric MAE | 0.500 | miceforest | 0.500 | +0.000 | yes |" in text
    assert (
        "| penguins | mcar | categorical error | 0.300 | miceforest | 0.200 | +0.100 | no |" in text
    )
    assert "| credit | mcar | numeric MAE | 0.900 | mode | 0.800 | +0.100 | no |" in text
    assert "numeric MAE, MCAR: 1 of 2" in text
    assert "categorical error, MCAR: 1 of 2" in text  # credit: a tie counts as no worse


def test_report_puts_mixed_tables_in_their_own_section(tmp_path: Path) -> None:
    traces = pd.DataFrame(columns=["dataset", "method", "iteration", "mae"])
    layout = MethodLayout(order=("mean", "mode", "miceforest", "tdm"))
    report = write_report(_results(), traces, tmp_path, layout)
    paper, mixed = report.markdown.split("# Mixed-type tables")
    assert "| seeds | mcar |" in paper and "penguins" not in paper
    assert "| penguins | mcar | 0.900 ± 0.000 | **0.500 ± 0.000** | **0.500 ± 0.141** |" in mixed
    assert "| credit | mcar | **0.400 ± 0.000** | - | **0.400 ± 0.000** |" in mixed
    assert "| seeds |" not in mixed
    assert "## tdm against the best other method" in mixed
    names = {path.name for path in report.figure_paths}
    assert "mixed.png" in names and (tmp_path / "figures" / "mixed.png").stat().st_size > 0
    assert set(report.summary["dataset"]) == {"penguins", "credit", "seeds"}
