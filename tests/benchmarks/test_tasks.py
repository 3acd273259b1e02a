"""The benchmark's storage tasks: a recorded trial is found again under its full key (overrides'
hash and library version), and a results file keyed the old way is refused."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np

from benchmarks.tasks import TrialSpec, load_done_trials, read_results, record_result


def _spec(version: str, params: dict[str, int] | None = None) -> TrialSpec:
    return TrialSpec("seeds", "mcar", 3, "tdm", 0.3, params or {}, "0" * 16, version)


def _result() -> SimpleNamespace:
    return SimpleNamespace(
        missing_rate=0.3,
        mae=0.2,
        rmse=0.3,
        w2sq_half=float("nan"),
        accuracy=None,
        fit_seconds=1.5,
        n_iter=20,
        loss_trace=((10, 0.5), (20, 0.4)),
    )


def test_a_recorded_trial_is_done_under_its_version_only(tmp_path: Path) -> None:
    db = str(tmp_path / "results.duckdb")
    assert load_done_trials.fn(db) == set()
    record_result.fn(db, _spec("0.5.0"), _result(), svm_repeats=0)
    done = load_done_trials.fn(db)
    assert done == {_spec("0.5.0").key}
    assert _spec("0.6.0").key not in done  # a new version runs the trial anew
    record_result.fn(db, _spec("0.6.0"), _result(), svm_repeats=0)
    results = read_results(db)
    assert sorted(results["tdm_version"]) == ["0.5.0", "0.6.0"]
    assert results["w2sq_half"].isna().all()  # NaN is stored as NULL


def test_a_mixed_trial_records_its_categorical_error_rate(tmp_path: Path) -> None:
    db = str(tmp_path / "results.duckdb")
    record_result.fn(db, _spec("0.5.0"), SimpleNamespace(**vars(_result()), cat_error=0.25), 0)
    record_result.fn(db, _spec("0.6.0"), _result(), svm_repeats=0)  # a paper trial: none
    results = read_results(db).sort_values("tdm_version")
    assert results["cat_error"].iloc[0] == 0.25
    assert np.isnan(results["cat_error"].iloc[1])
