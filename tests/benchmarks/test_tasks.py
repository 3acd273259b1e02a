"""The benchmark's storage tasks: a recorded trial is found again under its full key (overrides'
hash and library version), and a results file keyed the old way is refused."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import duckdb
import numpy as np
import pytest

from benchmarks.schemas import RESULTS_DDL
from benchmarks.tasks import TrialSpec, load_done_trials, merge_results, read_results, record_result


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


def test_a_results_file_keyed_without_the_version_is_refused(tmp_path: Path) -> None:
    """A results file from tdm < 0.5 (key without tdm_version) is refused with a clear error,
    for reading and for writing, instead of mixing keys."""
    db = tmp_path / "old.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(
            'CREATE TABLE bench_results ("dataset" VARCHAR, "mechanism" VARCHAR, "seed" BIGINT, '
            '"method" VARCHAR, "p" DOUBLE, "params_hash" VARCHAR, "tdm_version" VARCHAR, '
            'PRIMARY KEY ("dataset", "mechanism", "seed", "method", "p", "params_hash"))'
        )
    with pytest.raises(ValueError, match=r"written by tdm < 0\.5.*another file"):
        read_results(db)
    with pytest.raises(ValueError, match=r"written by tdm < 0\.5"):
        record_result.fn(str(db), _spec("0.5.0"), _result(), svm_repeats=0)


def test_a_mixed_trial_records_its_categorical_error_rate(tmp_path: Path) -> None:
    db = str(tmp_path / "results.duckdb")
    record_result.fn(db, _spec("0.5.0"), SimpleNamespace(**vars(_result()), cat_error=0.25), 0)
    record_result.fn(db, _spec("0.6.0"), _result(), svm_repeats=0)  # a paper trial: none
    results = read_results(db).sort_values("tdm_version")
    assert results["cat_error"].iloc[0] == 0.25
    assert np.isnan(results["cat_error"].iloc[1])


def test_a_file_from_before_the_mixed_benchmark_is_read_and_extended(tmp_path: Path) -> None:
    """A results file whose table has no cat_error column reads as NaN there, takes new trials
    (the column is added) and merges into a new file."""
    old = tmp_path / "old.duckdb"
    with duckdb.connect(str(old)) as con:
        con.execute(RESULTS_DDL.replace('    "cat_error" DOUBLE,\n', ""))
    record_result.fn(str(old), _spec("0.5.0"), _result(), svm_repeats=0)
    with duckdb.connect(str(old)) as con:
        con.execute("ALTER TABLE bench_results DROP COLUMN cat_error")  # as written before
    assert read_results(old)["cat_error"].isna().all()
    merged = tmp_path / "new.duckdb"
    record_result.fn(str(merged), _spec("0.6.0"), _result(), svm_repeats=0)
    count = merge_results.fn(str(merged), str(old))
    assert count.trials_added == 1
    record_result.fn(str(old), _spec("0.7.0"), _result(), svm_repeats=0)
    assert len(read_results(old)) == 2
