"""The benchmark report: configurations kept apart, the newest version of each trial, the
registry's order and fixtures, and the rank tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.report import MethodLayout, latest_per_trial, write_report


def test_report_keeps_configurations_of_one_method_apart() -> None:
    """Rows of one method under two settings hashes are not averaged together."""
    from benchmarks.report import label_configurations, summarise

    frame = pd.DataFrame(
        {
            "dataset": ["seeds"] * 4,
            "mechanism": ["mcar"] * 4,
            "seed": [0, 1, 0, 0],
            "method": ["tdm", "tdm", "tdm", "mean"],
            "params_hash": ["aaaaaa1111111111", "aaaaaa1111111111", "bbbbbb2222222222", "c" * 16],
            "mae": [0.2, 0.4, 0.9, 0.8],
            "rmse": [0.3, 0.5, 1.0, 0.9],
            "w2sq_half": [0.1] * 4,
            "accuracy": [0.9] * 4,
        }
    )
    labelled = label_configurations(frame)
    assert sorted(labelled["method"].unique()) == ["mean", "tdm@aaaaaa", "tdm@bbbbbb"]
    summary = summarise(labelled).set_index("method")
    assert summary.loc["tdm@aaaaaa", "mae_mean"] == pytest.approx(0.3)
    assert summary.loc["tdm@bbbbbb", "mae_mean"] == pytest.approx(0.9)
    single = label_configurations(frame.iloc[[0, 1, 3]])
    assert sorted(single["method"].unique()) == ["mean", "tdm"]


def test_rank_table_counts_ties_and_wins_against_every_method() -> None:
    from benchmarks.report import rank_table, summarise

    scores = {"a": {"tdm": 0.2, "ice": 0.3, "tdm_paper": 0.25},
              "b": {"tdm": 0.5, "ice": 0.4, "tdm_paper": 0.6}}  # fmt: skip
    rows = [
        {
            "dataset": d,
            "mechanism": "mcar",
            "method": m,
            "mae": v,
            "rmse": v,
            "w2sq_half": v,
            "accuracy": np.nan,
        }
        for d, by_method in scores.items()
        for m, v in by_method.items()
    ]
    text = rank_table(summarise(pd.DataFrame(rows)), "tdm")
    assert "| a | mcar | 0.200 | 1 of 3 | tdm_paper | 0.250 | -0.050 |" in text
    assert "| b | mcar | 0.500 | 2 of 3 | ice | 0.400 | +0.100 |" in text
    assert "Datasets where tdm is the best of all: mcar: 1 of 2." in text
    without_ice = rank_table(summarise(pd.DataFrame(rows)), "tdm", leave_out=("ice",))
    assert "| b | mcar | 0.500 | 1 of 2 | tdm_paper | 0.600 | -0.100 |" in without_ice
    assert "Datasets where tdm is the best of all: mcar: 2 of 2." in without_ice


def _trial_rows(versions: list[str], maes: list[float]) -> pd.DataFrame:
    n = len(versions)
    return pd.DataFrame(
        {
            "dataset": ["seeds"] * n,
            "mechanism": ["mcar"] * n,
            "seed": [0] * n,
            "method": ["tdm"] * n,
            "p": [0.3] * n,
            "params_hash": ["a" * 16] * n,
            "tdm_version": versions,
            "finished_at": pd.Timestamp("2026-11-01"),
            "mae": maes,
            "rmse": maes,
            "w2sq_half": maes,
            "accuracy": [np.nan] * n,
            "loss_trace": ["[]"] * n,
        }
    )


def test_a_trial_run_under_several_versions_counts_once_with_the_newest() -> None:
    """Versions compare as numbers (0.10 is newer than 0.9); other trials are untouched."""
    frame = _trial_rows(["0.10.0", "0.9.1", "0.4.0"], [0.1, 0.9, 0.4])
    latest = latest_per_trial(frame)
    assert latest["tdm_version"].tolist() == ["0.10.0"]
    other = frame.assign(seed=[0, 1, 2])
    assert len(latest_per_trial(other)) == 3


def test_the_committed_csv_does_not_depend_on_the_order_rows_come_in(tmp_path: Path) -> None:
    """Bug: the rows of one trial under several versions came out in any order, so rebuilding
    the results file from the committed record rewrote it. Now: each trial's rows as finished."""
    frame = _trial_rows(["0.10.0", "0.9.1", "0.4.0"], [0.1, 0.9, 0.4]).assign(
        finished_at=pd.to_datetime(["2026-11-03", "2026-11-02", "2026-11-01"])
    )
    traces = pd.DataFrame(columns=["dataset", "method", "iteration", "mae"])
    written = []
    for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0]):
        write_report(frame.iloc[order], traces, tmp_path)
        written.append((tmp_path / "benchmark.csv").read_text())
    assert written[0] == written[1] == written[2]
    assert pd.read_csv(tmp_path / "benchmark.csv")["tdm_version"].tolist() == [
        "0.4.0", "0.9.1", "0.10.0"
    ]  # fmt: skip


def test_report_uses_the_layout_s_order_and_leaves_fixtures_out_of_the_ranking(
    tmp_path: Path,
) -> None:
    rows = pd.concat(
        [
            _trial_rows(["0.5.0"], [0.3]).assign(method=m, mae=v, rmse=v, w2sq_half=v)
            for m, v in (("tdm", 0.3), ("mean", 0.8), ("old_default", 0.2))
        ],
        ignore_index=True,
    )
    traces = pd.DataFrame(columns=["dataset", "method", "iteration", "mae"])
    layout = MethodLayout(order=("mean", "tdm", "old_default"), fixtures=("old_default",))
    report = write_report(rows, traces, tmp_path, layout)
    header = next(line for line in report.markdown.splitlines() if line.startswith("| dataset"))
    assert header.index("mean") < header.index("tdm") < header.index("old_default")
    assert "Benchmark fixtures (old_default" in report.markdown
    assert "| seeds | mcar | 0.300 | 1 of 2 |" in report.markdown
    assert (tmp_path / "benchmark.csv").is_file()


def test_a_report_removes_its_own_figures_it_no_longer_draws(tmp_path: Path) -> None:
    """Bug: an earlier report's bars of a mechanism no longer in the results stayed beside the
    new ones; figures the report does not own stay."""
    figures = tmp_path / "figures"
    figures.mkdir()
    for name in ("bars_mnarl.png", "mae_over_iterations.png", "mine.png"):
        (figures / name).write_bytes(b"old")
    rows = _trial_rows(["0.5.0"], [0.3]).assign(method="mean", rmse=0.3, w2sq_half=0.3)
    traces = pd.DataFrame(columns=["dataset", "method", "iteration", "mae"])
    report = write_report(rows, traces, tmp_path)
    assert sorted(p.name for p in figures.iterdir()) == ["bars_mcar.png", "mine.png"]
    assert [p.name for p in report.figure_paths] == ["bars_mcar.png"]


@pytest.mark.parametrize("n_methods", [4, 13, 25])
def test_every_method_of_a_figure_has_a_colour_of_its_own(n_methods: int) -> None:
    """Bug: past ten methods the colours repeated (tdm and ice one orange in the held-out
    grid's bars)."""
    from benchmarks.figures import _colours, _pyplot

    colours = _colours(_pyplot(), [f"method{i}" for i in range(n_methods)])
    assert len(set(colours.values())) == n_methods
