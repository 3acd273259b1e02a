"""The benchmark flow on a tiny grid: results persisted and valid, resume, interruption, report.

Two real small datasets when the shared CSVs are present (seeds, concrete_slump), else synthetic
stand-ins of the same names; methods mean, ot_ns and tdm with 20 iterations.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import benchmarks.trial
from benchmarks.cli import add_bench_command, grid_settings, parse_seeds
from benchmarks.datasets import default_data_dir
from benchmarks.flow import benchmark
from benchmarks.schemas import BenchmarkResultsSchema
from benchmarks.tasks import read_results, read_traces

pytestmark = pytest.mark.usefixtures("prefect_harness", "one_torch_thread")

DATASETS = ["seeds", "concrete_slump"]
METHODS = ["mean", "ot_ns", "tdm"]


def bench_main(argv: list[str]) -> int:
    """`tdm bench ARGV` through its own parser and handler; returns the exit status."""
    parser = argparse.ArgumentParser(prog="tdm")
    add_bench_command(parser.add_subparsers())
    args = parser.parse_args(["bench", *argv])
    return int(args.handler(args))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The shared CSV folder, or a folder of small synthetic CSVs with the same names."""
    shared = default_data_dir()
    if shared is not None and all((shared / f"{n}.csv").is_file() for n in DATASETS):
        return str(shared)
    folder = tmp_path_factory.mktemp("datasets")
    rng = np.random.default_rng(0)
    for name, last in (("seeds", "label"), ("concrete_slump", "target")):
        X = rng.normal(size=(80, 2)) @ rng.normal(size=(2, 5)) + 0.3 * rng.normal(size=(80, 5))
        frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(5)])
        frame[last] = (X[:, 0] > 0).astype(int) if last == "label" else X[:, 1]
        frame.to_csv(folder / f"{name}.csv", index=False)
    return str(folder)


def _grid(db: Path, data_dir: str, **overrides: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "datasets": DATASETS,
        "mechanisms": ["mcar"],
        "seeds": [0],
        "methods": METHODS,
        "max_iter": 20,
        "db_path": str(db),
        "svm_repeats": 1,
        "data_dir": data_dir,
    }
    return {**settings, **overrides}


def test_grid_is_persisted_reported_and_resumed(
    tmp_path: Path, data_dir: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Every trial lands in the results table, its log line counting it; a second run skips
    them all."""
    db = tmp_path / "results" / "bench.duckdb"
    outcome = benchmark(**_grid(db, data_dir), trace_dataset="seeds", trace_checkpoints=[0, 5, 20])
    assert (outcome.planned, outcome.skipped, outcome.ran, outcome.failed) == (6, 0, 6, ())
    counted = [r.getMessage() for r in caplog.records if ": MAE " in r.getMessage()]
    assert [line.rsplit("(", 1)[1] for line in counted] == [f"trial {k} of 6)" for k in range(1, 7)]

    results = read_results(db)
    BenchmarkResultsSchema.validate(results)
    assert len(results) == 6
    assert set(results["method"]) == set(METHODS)
    assert results.loc[results["dataset"] == "concrete_slump", "accuracy"].isna().all()
    assert results.loc[results["dataset"] == "seeds", "accuracy"].notna().all()
    assert (results.loc[results["method"] == "tdm", "n_iter"] == 20).all()

    traces = read_traces(db)
    assert set(traces["method"]) == {"ot_ns", "tdm"}  # the batch-OT methods of the grid
    assert sorted(traces["iteration"]) == [0, 0, 5, 5, 20, 20]

    tables = Path(outcome.tables_path).read_text()
    for heading in ("MAE", "RMSE", "W2²/2", "SVM accuracy"):
        assert heading in tables
    for method in METHODS:
        assert f" {method} |" in tables
    figures = {Path(p).name for p in outcome.figure_paths}
    assert figures == {"bars_mcar.png", "mae_over_iterations.png"}
    assert all(Path(p).stat().st_size > 1000 for p in outcome.figure_paths)
    assert (db.parent / "benchmark.csv").is_file()
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        shown = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=["benchmark-figure-mae-over-iterations"])
            )
        )
    assert shown and "data:image/png;base64," in str(shown[0].data)  # the figure, not its path

    again = benchmark(**_grid(db, data_dir))
    assert (again.planned, again.skipped, again.ran) == (6, 6, 0)
    after = read_results(db)
    pd.testing.assert_series_equal(
        after.sort_values("method")["finished_at"].reset_index(drop=True),
        results.sort_values("method")["finished_at"].reset_index(drop=True),
    )


def test_interrupted_run_keeps_finished_trials_and_resumes(
    tmp_path: Path, data_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trial that raises fails the run but not its neighbours; a re-run runs only it."""
    db = tmp_path / "bench.duckdb"
    real = benchmarks.trial.run_trial
    calls: list[str] = []

    def flaky(dataset: Any, mechanism: str, seed: int, method: str, **kwargs: Any) -> Any:
        calls.append(f"{dataset.name}/{method}")
        if dataset.name == "seeds" and method == "ot_ns":
            raise RuntimeError("simulated crash in the middle of the grid")
        return real(dataset, mechanism, seed, method, **kwargs)

    monkeypatch.setattr(benchmarks.trial, "run_trial", flaky)
    state = benchmark(**_grid(db, data_dir), return_state=True)
    assert state.is_failed()
    assert "seeds/mcar/seed0/ot_ns" in str(state.message)
    assert len(calls) == 6  # the trials after the crash still ran
    kept = read_results(db)
    assert len(kept) == 5
    assert "ot_ns" not in set(kept.loc[kept["dataset"] == "seeds", "method"])

    monkeypatch.setattr(benchmarks.trial, "run_trial", real)
    resumed = benchmark(**_grid(db, data_dir))
    assert (resumed.skipped, resumed.ran) == (5, 1)
    assert len(read_results(db)) == 6


def test_failed_trials_are_named_with_their_reasons_not_called_a_bug(
    tmp_path: Path, data_dir: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Bug: a trial's failure ended `tdm bench` with "unexpected error ... a bug in tdm"; it
    names each failed trial and its reason (exit 1), the others recorded."""
    real = benchmarks.trial.run_trial

    def failing(dataset: Any, mechanism: str, seed: int, method: str, **kwargs: Any) -> Any:
        if method == "ot_ns":
            raise ValueError("ot_ns cannot fit this table")
        return real(dataset, mechanism, seed, method, **kwargs)

    monkeypatch.setattr(benchmarks.trial, "run_trial", failing)
    db = tmp_path / "bench.duckdb"
    flags = ["--db", str(db), "--data-dir", data_dir, "--datasets", "seeds", "--seeds", "0,"]
    flags += ["--methods", "mean,ot_ns", "--mechanisms", "mcar", "--svm-repeats", "0"]
    assert bench_main(flags) == 1
    err = capsys.readouterr().err
    assert err.startswith("tdm bench: error: 1 of 2 trials failed") and "bug" not in err
    assert "seeds/mcar/seed0/ot_ns" in err and "ot_ns cannot fit this table" in err
    assert list(read_results(db)["method"]) == ["mean"]


def test_ctrl_c_says_the_finished_trials_are_recorded(
    tmp_path: Path, data_dir: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Bug: Ctrl-C in `tdm bench` said each table is written in one transaction at the end
    of its run (the warehouse's words); trials are recorded one by one."""
    import benchmarks.flow
    from cli.main import main

    class Interrupted:
        fn = benchmarks.flow.benchmark.fn

        def __call__(self, **grid: Any) -> Any:
            raise KeyboardInterrupt

    monkeypatch.setattr(benchmarks.flow, "benchmark", Interrupted())
    db = tmp_path / "bench.duckdb"
    argv = ["bench", "--db", str(db), "--data-dir", data_dir, "--datasets", "seeds"]
    argv += ["--seeds", "0,", "--methods", "mean", "--mechanisms", "mcar"]
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert err.endswith(
        f"tdm bench: interrupted. Each finished trial is recorded in '{db}'; the same command "
        "runs only the others.\n"
    )


def test_other_settings_are_other_trials(tmp_path: Path, data_dir: str) -> None:
    """Changing max_iter changes the params hash: those trials run; the mean ones are reused.

    The second run uses two workers (bounded submission), which records the same way.
    """
    db = tmp_path / "bench.duckdb"
    grid = _grid(db, data_dir, datasets=["seeds"], methods=["mean", "ot_ns"], svm_repeats=0)
    benchmark(**grid)
    outcome = benchmark(**{**grid, "max_iter": 10, "seeds": [0, 1], "workers": 2})
    assert (outcome.planned, outcome.skipped, outcome.ran) == (4, 1, 3)
    results = read_results(db)
    assert len(results) == 5
    assert sorted(results.loc[results["method"] == "ot_ns", "n_iter"]) == [10, 10, 20]


def test_a_new_library_version_runs_its_trials_anew(
    tmp_path: Path, data_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trial is keyed on what was asked for and the library version: the same grid under
    another version runs again, and both versions' rows are kept apart."""
    import tdm

    db = tmp_path / "bench.duckdb"
    grid = _grid(db, data_dir, datasets=["seeds"], methods=["mean"], svm_repeats=0)
    benchmark(**grid)
    monkeypatch.setattr(tdm, "__version__", "99.0.0")
    outcome = benchmark(**grid)
    assert (outcome.planned, outcome.skipped, outcome.ran) == (1, 0, 1)
    results = read_results(db)
    assert sorted(results["tdm_version"]) == sorted([tdm._version.__version__, "99.0.0"])
    assert results["params_hash"].nunique() == 1  # the same overrides: the same hash


def test_cli_runs_a_grid_then_the_report_only(tmp_path: Path, data_dir: str) -> None:
    """`tdm bench` exits 0 and writes the report; --report-only runs no trial."""
    db = tmp_path / "cli" / "bench.duckdb"
    flags = ["--db", str(db), "--data-dir", data_dir, "--svm-repeats", "0"]
    grid = ["--datasets", "seeds", "--mechanisms", "mar", "--seeds", "1", "--methods", "mean"]
    code = bench_main([*grid, *flags])
    assert code == 0
    assert len(read_results(db)) == 1
    (db.parent / "tables.md").unlink()
    assert bench_main(["--report-only", *flags]) == 0
    assert "| seeds | mar |" in (db.parent / "tables.md").read_text()
    assert len(read_results(db)) == 1


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--datasets", "nosuch"], "unknown dataset 'nosuch'; known: concrete_slump"),
        (["--datasets", "penguins"], "'penguins' belongs to the other grid: run it with --mixed"),
        (["--methods", "mean,nosuch"], "unknown method 'nosuch'; known: "),
        (["--mechanisms", "mnar"], "unknown mechanism 'mnar'; this grid's: mcar, mar, mnarl"),
        (["--p", "1.5"], "--p must be a missing rate in (0, 1); got 1.5"),
        (["--max-iter", "-5"], "--max-iter must be at least 0"),
        (["--svm-repeats", "-1"], "--svm-repeats must be at least 0"),
        (["--workers", "0"], "--workers must be at least 1"),
        (["--seeds", "3,3"], "--seeds lists seed 3 more than once"),
        (["--trace-dataset", "nosuch"], "unknown dataset 'nosuch'"),
        (["--data-dir", "{tmp}/nowhere"], "nowhere/seeds.csv does not exist: give the datasets'"),
        (["--db", "{tmp}"], "is a folder; give a DuckDB file"),
        (["--report-only"], "--report-only: results file {tmp}/bench.duckdb does not exist"),
        (
            ["--p", "0.8", "--mechanisms", "mar"],
            "--p 0.8 is out of reach of mar on seeds: p=0.8 over the whole table needs a rate",
        ),
    ],
    ids=lambda value: value[0] if isinstance(value, list) else None,
)
def test_a_bad_grid_is_refused_before_any_trial(
    tmp_path: Path,
    data_dir: str,
    flags: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Bug: each of these ran the flow, failed in every trial (or after the whole grid) and
    was called "a bug in tdm"; now exit 2 with one line, nothing written."""
    flags = [flag.replace("{tmp}", str(tmp_path)) for flag in flags]
    base = ["--db", str(tmp_path / "bench.duckdb"), "--data-dir", data_dir, "--datasets", "seeds"]
    base += ["--methods", "mean", "--seeds", "1", "--mechanisms", "mcar"]
    assert bench_main([*base, *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tdm bench: error: ") and message.replace("{tmp}", str(tmp_path)) in err
    assert list(tmp_path.iterdir()) == []


def test_a_report_is_not_written_over_a_record_the_results_file_lacks(
    tmp_path: Path, data_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: a grid run (or --report-only) into a fresh results file beside a committed
    benchmark.csv replaced it with the new run's few rows; so did --merge of another run, and
    --report-only of a results file of as many rows but other trials. Trials are compared by
    key, not counted."""
    record = tmp_path / "record" / "bench.duckdb"
    flags = ["--data-dir", data_dir, "--svm-repeats", "0", "--mechanisms", "mcar"]
    grid = ["--datasets", "seeds", "--methods", "mean", *flags]
    assert bench_main(["--db", str(record), *grid, "--seeds", "2"]) == 0
    other = tmp_path / "other" / "bench.duckdb"  # seeds 1 and 2: one trial of the record's
    assert bench_main(["--db", str(other), *grid, "--seeds", "1,2"]) == 0
    csv = record.parent / "benchmark.csv"
    kept = csv.read_text()
    fresh = record.parent / "fresh.duckdb"
    for flags_here, lost in (([*grid, "--seeds", "1,"], 2), (["--merge", str(other)], 1)):
        assert bench_main(["--db", str(fresh), *flags_here]) == 2
        err = capsys.readouterr().err
        assert f"holds {lost} of its 2 trials that results file" in err
        assert f"--merge {csv}" in err
        assert csv.read_text() == kept and not fresh.exists()
    only = ["--db", str(other), "--report-only", "--report-dir", str(record.parent)]
    assert bench_main(only) == 2 and "holds 1 of its 2 trials" in capsys.readouterr().err
    assert csv.read_text() == kept
    assert bench_main(["--db", str(fresh), "--merge", str(csv)]) == 0  # the way out it names
    assert csv.read_text() == kept


def test_a_results_file_holds_one_missing_rate_and_its_report_says_which(
    tmp_path: Path, data_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: a grid at --p 0.1 and one at 0.5 in one results file were averaged into one cell
    and reported as "30% missing". A second rate is refused, run or merged; the report and its
    figures name the rate."""
    grid = ["--data-dir", data_dir, "--svm-repeats", "0", "--mechanisms", "mcar"]
    grid += ["--datasets", "seeds", "--methods", "mean", "--seeds", "1,"]
    tenth, half = tmp_path / "a" / "bench.duckdb", tmp_path / "b" / "bench.duckdb"
    assert bench_main(["--db", str(tenth), *grid, "--p", "0.1"]) == 0
    assert "10% missing" in (tenth.parent / "tables.md").read_text()
    assert bench_main(["--db", str(half), *grid, "--p", "0.5"]) == 0
    capsys.readouterr()
    kept = tenth.read_bytes()
    assert bench_main(["--db", str(tenth), *grid, "--p", "0.5"]) == 2
    assert "holds trials at --p 0.1; a grid at --p 0.5 needs a results file of its own" in (
        capsys.readouterr().err
    )
    assert bench_main(["--db", str(tenth), "--merge", str(half)]) == 2
    assert "would hold 2 missing rates (0.1, 0.5)" in capsys.readouterr().err
    assert tenth.read_bytes() == kept
    # A file of both rates (the flow called from Python records before its report refuses):
    # a grid at one of them is told so, not that its rate is another.
    both = _grid(tenth, data_dir, datasets=["seeds"], methods=["mean"], svm_repeats=0, p=0.5)
    with pytest.raises(ValueError, match="a report covers one"):
        benchmark(**both)
    assert bench_main(["--db", str(tenth), *grid, "--p", "0.1"]) == 2
    assert "holds trials at --p 0.1, 0.5, recorded before a results file held one rate" in (
        capsys.readouterr().err
    )


def test_a_grid_asking_other_svm_repeats_than_its_recorded_trials_is_refused(
    tmp_path: Path, data_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: a re-run with --svm-repeats 3 after 0 said "1 already recorded, 0 run" and the
    accuracy stayed empty. It is refused, naming the recorded setting; asked as recorded, the
    grid runs."""
    db = tmp_path / "bench.duckdb"
    grid = ["--db", str(db), "--data-dir", data_dir, "--datasets", "seeds", "--seeds", "0,"]
    grid += ["--methods", "mean", "--mechanisms", "mcar"]
    assert bench_main([*grid, "--svm-repeats", "0"]) == 0
    capsys.readouterr()
    assert bench_main([*grid, "--svm-repeats", "3"]) == 2
    assert "measured with --svm-repeats 0, which are not run again" in capsys.readouterr().err
    assert bench_main([*grid, "--svm-repeats", "0"]) == 0


def test_files_it_cannot_read_are_refused_in_a_line(
    tmp_path: Path, data_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review: a report folder's benchmark.csv of another format, or a results file that is no
    DuckDB file, ended a grid run in "unexpected error ... a bug in tdm"; each is named, exit 2,
    and left as it was."""
    grid = ["--data-dir", data_dir, "--datasets", "seeds", "--seeds", "0,", "--methods", "mean"]
    grid += ["--mechanisms", "mcar", "--svm-repeats", "0"]
    foreign = tmp_path / "benchmark.csv"
    foreign.write_text("a,b\n1,2\n")
    assert bench_main(["--db", str(tmp_path / "bench.duckdb"), *grid]) == 2
    err = capsys.readouterr().err
    assert f"the report folder's {foreign} lacks the report column(s)" in err
    assert "move it away, or give another --report-dir" in err and "bug" not in err
    assert foreign.read_text() == "a,b\n1,2\n"
    broken = tmp_path / "other" / "bench.duckdb"
    broken.parent.mkdir()
    broken.write_text("not a database")
    assert bench_main(["--db", str(broken), *grid]) == 2
    assert f"results file {broken} cannot be read: IO Error" in capsys.readouterr().err


def test_seeds_flag_takes_a_count_or_a_list() -> None:
    assert parse_seeds("3") == [0, 1, 2]
    assert parse_seeds("4,7") == [4, 7]
    assert parse_seeds("5,") == [5]
    with pytest.raises(argparse.ArgumentTypeError, match="no seed at all"):
        parse_seeds("0")  # regression: `--trace-seeds 0` silently traced no seed


def test_merge_adds_other_runs_and_keeps_what_is_here(tmp_path: Path, data_dir: str) -> None:
    """Two machines' results files add up to one grid; the sources are left unchanged."""
    first, second = tmp_path / "a" / "bench.duckdb", tmp_path / "b" / "bench.duckdb"
    benchmark(**_grid(first, data_dir, datasets=["seeds"], methods=["mean", "ot_ns"]))
    benchmark(
        **_grid(second, data_dir, datasets=["seeds"], methods=["ot_ns", "tdm"]),
        trace_dataset="seeds",
        trace_checkpoints=[0, 5],
    )
    kept = read_results(first).set_index("method").loc["ot_ns", "finished_at"]
    source_bytes = second.read_bytes()

    code = bench_main(["--db", str(first), "--merge", str(second)])
    assert code == 0
    merged = read_results(first)
    assert sorted(merged["method"]) == ["mean", "ot_ns", "tdm"]
    assert merged.set_index("method").loc["ot_ns", "finished_at"] == kept  # ours kept
    assert len(read_traces(first)) == 4  # ot_ns and tdm at 0 and 5
    assert second.read_bytes() == source_bytes
    assert (first.parent / "tables.md").is_file()

    again = bench_main(["--db", str(first), "--merge", str(second)])
    assert again == 0 and len(read_results(first)) == 3  # idempotent

    # The report's committed benchmark.csv alone rebuilds the results file (no loss traces).
    rebuilt = tmp_path / "c" / "bench.duckdb"
    assert bench_main(["--db", str(rebuilt), "--merge", str(first.parent / "benchmark.csv")]) == 0
    original, copy = read_results(first), read_results(rebuilt)
    columns = [c for c in original.columns if c != "loss_trace"]
    pd.testing.assert_frame_equal(
        copy[columns].sort_values("method").reset_index(drop=True),
        original[columns].sort_values("method").reset_index(drop=True),
        check_dtype=False,
    )
    assert set(copy["loss_trace"]) == {"[]"}


def test_merge_rejects_a_bad_source_and_changes_nothing(
    tmp_path: Path, data_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "bench.duckdb"
    benchmark(**_grid(db, data_dir, datasets=["seeds"], methods=["mean"]))
    before = read_results(db)

    assert bench_main(["--db", str(db), "--merge", str(tmp_path / "nope.duckdb")]) == 2
    assert "nope.duckdb does not exist" in capsys.readouterr().err

    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database")
    assert bench_main(["--db", str(db), "--merge", str(junk)]) == 2
    assert "junk.duckdb is not a readable DuckDB results file" in capsys.readouterr().err

    assert bench_main(["--db", str(db), "--merge", str(db)]) == 2
    assert "is the results file itself" in capsys.readouterr().err

    broken = tmp_path / "broken.csv"
    broken.write_text("dataset,method\nseeds,mean\n")
    assert bench_main(["--db", str(db), "--merge", str(broken)]) == 2
    assert "lacks the report column(s)" in capsys.readouterr().err
    pd.testing.assert_frame_equal(read_results(db), before)


def test_a_mixed_type_grid_runs_and_reports(tmp_path: Path) -> None:
    """A mixed table's trials carry the categorical error rate and get the mixed section."""
    rng = np.random.default_rng(0)
    (tmp_path / "data" / "mixed").mkdir(parents=True)
    z = rng.standard_normal(60)
    pd.DataFrame(
        {"species": np.where(z > 0, "a", "b"), "mass": 3 * z + 10, "year": rng.integers(0, 3, 60)}
    ).to_csv(tmp_path / "data" / "mixed" / "penguins.csv", index=False)
    db = tmp_path / "mixed" / "bench.duckdb"
    outcome = benchmark(
        datasets=["penguins"],
        mechanisms=["mcar", "mar"],
        seeds=[0],
        methods=["mode", "missforest_mixed"],
        db_path=str(db),
        data_dir=str(tmp_path / "data"),
    )
    assert outcome.ran == 4 and not outcome.failed
    results = read_results(db)
    assert results["cat_error"].between(0, 1).all() and results["accuracy"].isna().all()
    text = (db.parent / "tables.md").read_text()
    assert text.startswith("# Mixed-type tables") and "| penguins | mar |" in text
    assert (db.parent / "figures" / "mixed.png").is_file()


def test_the_mixed_flag_fills_only_what_was_not_given() -> None:
    from benchmarks.datasets import MIXED_DATASETS
    from benchmarks.flow import MIXED_DB_PATH, MIXED_METHODS

    unset = {"datasets": None, "methods": None, "seeds": None, "db": None}
    mixed = grid_settings(argparse.Namespace(mixed=True, **unset))
    assert mixed.datasets == list(MIXED_DATASETS) and mixed.methods == list(MIXED_METHODS)
    assert mixed.seeds == [0, 1, 2, 3, 4] and mixed.db == MIXED_DB_PATH
    given = grid_settings(argparse.Namespace(mixed=True, **{**unset, "seeds": [0], "db": "x.db"}))
    assert given.seeds == [0] and given.db == "x.db" and given.datasets == list(MIXED_DATASETS)
    paper = grid_settings(argparse.Namespace(mixed=False, **unset))
    assert paper.seeds == [0, 1, 2] and paper.db == "results/benchmark.duckdb"
    assert "penguins" not in paper.datasets
