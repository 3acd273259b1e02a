"""benchmarks.significance: the best other method, the paired verdict, the newest version of a
trial and refused records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.significance import cells, grid_means, load


def _rows(
    method: str, maes: dict[int, float], dataset: str = "glass", version: str = "0.10.0"
) -> list[dict]:
    return [
        {
            "dataset": dataset,
            "mechanism": "mcar",
            "seed": seed,
            "method": method,
            "p": 0.3,
            "params_hash": "44136fa355b3678a",
            "params": "{}",
            "mae": mae,
            "tdm_version": version,
        }
        for seed, mae in maes.items()
    ]


def test_grid_means_average_the_datasets_of_the_methods_that_ran_every_cell() -> None:
    trials = pd.DataFrame(
        _rows("tdm", {3: 0.40, 4: 0.40, 5: 0.40, 6: 0.10}, dataset="glass")  # seed 6 left out
        + _rows("tdm", {3: 0.20, 4: 0.20, 5: 0.20}, dataset="letter")
        + _rows("missforest", {3: 0.50, 4: 0.50, 5: 0.50}, dataset="glass")
        + _rows("missforest", {3: 0.30, 4: 0.30, 5: 0.30}, dataset="letter")
        + _rows("ice", {3: 0.45, 4: 0.45, 5: 0.45}, dataset="glass")  # not run on letter
    ).assign(fit_seconds=lambda t: t["dataset"].map({"glass": 2.0, "letter": 100.0}))
    # an MNAR trial counts for the MAE, not for the time (run apart from the grid)
    mnar = trials.assign(mechanism="mnarl", fit_seconds=1000.0)
    trials = pd.concat([trials, mnar], ignore_index=True)
    means = grid_means(trials)
    assert list(means.columns) == ["tdm", "missforest"]
    np.testing.assert_allclose(means.loc["MCAR (2 datasets)"], [0.30, 0.40])
    assert means.loc["MNARL (2 datasets)", "tdm"] == pytest.approx(0.30)
    np.testing.assert_allclose(means.loc["median fit s, small tables"], [2.0, 2.0])
    np.testing.assert_allclose(means.loc["median fit s, large tables"], [100.0, 100.0])


def test_best_other_is_chosen_on_seeds_3_to_5_and_tested_on_every_shared_seed() -> None:
    trials = pd.DataFrame(
        _rows("tdm", {3: 0.40, 4: 0.41, 5: 0.39, 6: 0.40, 7: 0.42})
        + _rows("missforest", {3: 0.45, 4: 0.46, 5: 0.44, 6: 0.47, 7: 0.45})
        + _rows("ice", {3: 0.50, 4: 0.50, 5: 0.50})
        + _rows("miwae", {3: 0.43, 4: 0.44, 5: 0.43, 6: 0.35})  # lowest mean on seeds 3-5
    )
    (cell,) = cells(trials)
    assert (cell.best, cell.candidates) == ("miwae", 3)
    assert cell.seeds == (3, 4, 5, 6)  # the seeds both ran
    np.testing.assert_allclose(cell.difference, np.mean([-0.03, -0.03, -0.04, 0.05]))
    assert cell.verdict() == "not significant (lead)"


def test_verdicts() -> None:
    lead = pd.DataFrame(
        _rows("tdm", {3: 0.40, 4: 0.41, 5: 0.39, 6: 0.40, 7: 0.42})
        + _rows("missforest", {3: 0.45, 4: 0.47, 5: 0.44, 6: 0.46, 7: 0.46})
    )
    assert cells(lead)[0].verdict() == "significant lead"
    behind = lead.assign(mae=np.where(lead["method"] == "tdm", lead["mae"] + 0.1, lead["mae"]))
    assert cells(behind)[0].verdict() == "significantly behind"
    same = lead.assign(mae=0.4)
    assert cells(same)[0].verdict() == "tie"


def test_each_trial_counts_once_in_its_newest_version(tmp_path: Path) -> None:
    path = tmp_path / "benchmark.csv"
    pd.DataFrame(
        _rows("tdm", {3: 0.40, 4: 0.41}, version="0.10.0")
        + _rows("tdm", {3: 0.50, 4: 0.50, 5: 0.50}, version="0.4.0")
        + _rows("missforest", {3: 0.45, 4: 0.46, 5: 0.44}, version="0.1.0")
    ).to_csv(path, index=False)
    trials = load([path])
    default = trials[trials["method"] == "tdm"].set_index("seed")
    assert len(default) == 3
    assert default["mae"].to_dict() == {3: 0.40, 4: 0.41, 5: 0.50}  # seed 5 not run again
    assert (trials["method"] == "missforest").sum() == 3


def test_clashing_and_incomplete_records_are_refused(tmp_path: Path) -> None:
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    pd.DataFrame(_rows("missforest", {3: 0.45, 4: 0.46, 5: 0.44})).to_csv(first, index=False)
    pd.DataFrame(_rows("missforest", {3: 0.50})).to_csv(second, index=False)
    assert len(load([first, first])) == 3  # the same trial twice counts once
    with pytest.raises(ValueError, match=r"two different results for missforest 0\.10\.0"):
        load([first, second])
    partial = pd.DataFrame(_rows("tdm", {3: 0.4, 4: 0.4, 5: 0.4}) + _rows("ice", {3: 0.5, 4: 0.5}))
    with pytest.raises(ValueError, match=r"\['ice'\] lack some of the selection seeds"):
        cells(partial)


def test_a_missing_or_foreign_results_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: a missing file or another CSV ended in a FileNotFoundError or KeyError traceback."""
    from benchmarks.significance import main

    other = tmp_path / "data.csv"
    other.write_text("a,b\n1,2\n")
    for path, message in ((tmp_path / "none.csv", "does not exist"), (other, "lacks dataset")):
        with pytest.raises(SystemExit) as exited:
            main(["--results", str(path), "--out", str(tmp_path / "out.md")])
        assert exited.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out.md").exists()


def test_another_grid_names_its_selection_seeds_or_is_refused_in_a_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: a grid of seeds 0-1 (or of the default run with --max-iter) ended in a KeyError's
    traceback. Its selection seeds can be named; a record with no cell to test is refused."""
    from benchmarks.significance import main

    path = tmp_path / "benchmark.csv"
    own = _rows("tdm", {0: 0.40, 1: 0.41}) + _rows("missforest", {0: 0.45, 1: 0.46})
    pd.DataFrame(own).assign(fit_seconds=1.0).to_csv(path, index=False)
    out = tmp_path / "significance.md"
    with pytest.raises(SystemExit) as exit_info:
        main(["--results", str(path), "--out", str(out)])
    assert exit_info.value.code == 2
    assert "lack some of the selection seeds (3, 4, 5)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--results", str(path), "--out", str(out), "--selection-seeds", ","])
    assert "--selection-seeds names no seed" in capsys.readouterr().err
    assert main(["--results", str(path), "--out", str(out), "--selection-seeds", "0,1"]) == 0
    assert "lowest mean MAE over seeds 0, 1" in out.read_text()
    capped = pd.DataFrame(own).assign(
        params=lambda t: np.where(t.method == "tdm", "{'max_iter': 50}", "{}")
    )
    capped.to_csv(path, index=False)
    with pytest.raises(SystemExit):
        main(["--results", str(path), "--out", str(out), "--selection-seeds", "0,1"])
    assert "trials run with --max-iter or other settings do not count" in capsys.readouterr().err
