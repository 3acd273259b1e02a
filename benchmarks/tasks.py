"""Benchmark tasks: run one trial, read which trials are done, record results in DuckDB.

Only the flow's own thread writes the results file; each insert is its own transaction.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from benchmarks.schemas import (
    RESULTS_DDL,
    RESULTS_TABLE,
    TRACES_DDL,
    TRACES_TABLE,
    TRIAL_KEY,
    BenchmarkResultsSchema,
    MaeTraceSchema,
)
from tasks.warehouse.names import quote_identifier

__all__ = [
    "MergeCount",
    "TrialSpec",
    "load_done_trials",
    "merge_results",
    "read_results",
    "read_traces",
    "record_result",
    "record_trace",
    "run_trace_task",
    "run_trial_task",
    "trial_keys",
]

TrialKey = tuple[str, str, int, str, float, str, str]


def _key(
    dataset: Any, mechanism: Any, seed: Any, method: Any, p: Any, params_hash: Any, version: Any
) -> TrialKey:
    """A trial's key (the columns of :data:`benchmarks.schemas.TRIAL_KEY`) with Python types."""
    return (
        str(dataset),
        str(mechanism),
        int(seed),
        str(method),
        float(p),
        str(params_hash),
        str(version),
    )


@dataclass(frozen=True)
class TrialSpec:
    """One cell of the grid, with the overrides asked for, their hash and the library version
    (both part of the key)."""

    dataset: str
    mechanism: str
    seed: int
    method: str
    p: float
    params: Mapping[str, Any]
    params_hash: str
    tdm_version: str

    @property
    def key(self) -> TrialKey:
        """The trial's key (:data:`benchmarks.schemas.TRIAL_KEY`), as stored in the table."""
        return _key(*(getattr(self, name) for name in TRIAL_KEY))

    @property
    def label(self) -> str:
        """A short readable name for logs and task-run names."""
        return f"{self.dataset}/{self.mechanism}/seed{self.seed}/{self.method}"


def _ensure_tables(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(RESULTS_DDL)
    con.execute(TRACES_DDL)


def _read_table(db_path: str | Path, table: str) -> pd.DataFrame | None:
    """The whole table as a DataFrame, or None when the file or the table does not exist."""
    if not Path(db_path).is_file():
        return None
    with duckdb.connect(str(db_path), read_only=True) as con:
        found = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [table]
        ).fetchall()[0][0]
        if not found:
            return None
        return con.execute(f"SELECT * FROM {quote_identifier(table)}").df()


def read_results(db_path: str | Path) -> pd.DataFrame:
    """Every recorded trial, validated by `BenchmarkResultsSchema` (empty when none)."""
    frame = _read_table(db_path, RESULTS_TABLE)
    if frame is None:
        return pd.DataFrame(columns=list(BenchmarkResultsSchema.to_schema().columns))
    return BenchmarkResultsSchema.validate(frame)


def read_traces(db_path: str | Path) -> pd.DataFrame:
    """Every recorded MAE-trace checkpoint, validated by `MaeTraceSchema` (empty when none)."""
    frame = _read_table(db_path, TRACES_TABLE)
    if frame is None:
        return pd.DataFrame(columns=list(MaeTraceSchema.to_schema().columns))
    return MaeTraceSchema.validate(frame)


@task(name="load-done-trials", cache_policy=NO_CACHE)
def load_done_trials(db_path: str) -> set[TrialKey]:
    """Keys of the trials already in the results table (none when the file is new)."""
    return trial_keys(db_path)


@task(name="run-trial", cache_policy=NO_CACHE, task_run_name="trial-{spec.label}")
def run_trial_task(spec: TrialSpec, svm_repeats: int, data_dir: str | None = None) -> Any:
    """Load the dataset and run one trial (`benchmarks.trial.run_trial`); returns its result."""
    from benchmarks.trial import run_trial

    return run_trial(
        *_cell(spec, data_dir), p=spec.p, params=dict(spec.params), svm_repeats=svm_repeats
    )


def _cell(spec: TrialSpec, data_dir: str | None) -> tuple[Any, str, int, str]:
    """(dataset, mechanism, seed, method) of ``spec``, the dataset loaded from ``data_dir``."""
    from benchmarks.datasets import MIXED_DATASETS, load_dataset, load_mixed_dataset

    load = load_mixed_dataset if spec.dataset in MIXED_DATASETS else load_dataset
    return load(spec.dataset, data_dir=data_dir), spec.mechanism, spec.seed, spec.method


def _null_if_nan(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


@task(name="record-result", cache_policy=NO_CACHE)
def record_result(db_path: str, spec: TrialSpec, result: Any, svm_repeats: int) -> None:
    """Insert one finished trial into the results table (created when missing)."""
    row = {
        "dataset": spec.dataset,
        "mechanism": spec.mechanism,
        "seed": spec.seed,
        "method": spec.method,
        "p": spec.p,
        "params_hash": spec.params_hash,
        "params": json.dumps(dict(spec.params), sort_keys=True, default=str),
        "missing_rate": result.missing_rate,
        "mae": result.mae,
        "rmse": result.rmse,
        "w2sq_half": _null_if_nan(result.w2sq_half),
        "accuracy": _null_if_nan(result.accuracy),
        "svm_repeats": svm_repeats,
        "fit_seconds": result.fit_seconds,
        "n_iter": result.n_iter,
        "loss_trace": json.dumps([[int(i), float(v)] for i, v in result.loss_trace]),
        "tdm_version": spec.tdm_version,
        "finished_at": datetime.now(UTC).replace(tzinfo=None),
        "cat_error": _null_if_nan(getattr(result, "cat_error", None)),
    }
    Path(db_path).parent.mkdir(parents=True, exist_ok=True)
    columns = ", ".join(quote_identifier(name) for name in row)
    marks = ", ".join("?" for _ in row)
    with duckdb.connect(db_path) as con:
        _ensure_tables(con)
        con.execute(
            f"INSERT INTO {quote_identifier(RESULTS_TABLE)} ({columns}) VALUES ({marks})",
            list(row.values()),
        )


@task(name="run-mae-trace", cache_policy=NO_CACHE, task_run_name="trace-{spec.label}")
def run_trace_task(spec: TrialSpec, checkpoints: list[int], data_dir: str | None = None) -> Any:
    """MAE after each checkpoint's number of steps (`benchmarks.trial.trace_mae`, a refit each)."""
    from benchmarks.trial import trace_mae

    return trace_mae(*_cell(spec, data_dir), checkpoints, p=spec.p, params=dict(spec.params))


@task(name="record-mae-trace", cache_policy=NO_CACHE)
def record_trace(db_path: str, spec: TrialSpec, trace: Any) -> None:
    """Insert (or replace) the checkpoints of one MAE trace, in one transaction."""
    rows = [[*spec.key, k, v] for k, v in zip(trace.iterations, trace.mae, strict=True)]
    Path(db_path).parent.mkdir(parents=True, exist_ok=True)
    table = quote_identifier(TRACES_TABLE)
    with duckdb.connect(db_path) as con:
        _ensure_tables(con)
        con.execute("BEGIN TRANSACTION")
        con.executemany(f"INSERT OR REPLACE INTO {table} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        con.execute("COMMIT")


@dataclass(frozen=True)
class MergeCount:
    """What `merge_results` did with one source file."""

    source: str
    trials_added: int
    trials_already_here: int
    trace_points_added: int


def _count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    return int(con.execute(f"SELECT count(*) FROM {quote_identifier(table)}").fetchall()[0][0])


def _read_report_csv(path: Path) -> pd.DataFrame:
    """The trials of a report's ``benchmark.csv``; it has no loss traces, so they become ``[]``."""
    try:
        text = ("dataset", "mechanism", "method", "params_hash", "params", "tdm_version")
        frame = pd.read_csv(path, dtype=dict.fromkeys(text, str))
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as error:
        raise ValueError(f"merge: {path} is not a readable report CSV: {error}") from None
    if "loss_trace" not in frame:
        frame["loss_trace"] = "[]"
    columns = list(BenchmarkResultsSchema.to_schema().columns)
    missing = [c for c in columns if c not in frame]
    if missing:
        raise ValueError(f"merge: {path} lacks the report column(s) {missing}")
    return BenchmarkResultsSchema.validate(frame[columns])


def trial_keys(path: str | Path) -> set[TrialKey]:
    """The keys of the trials a DuckDB results file or a report's ``benchmark.csv`` holds (none
    where the file does not exist)."""
    there = Path(path)
    if not there.is_file():
        return set()
    if there.suffix.lower() == ".csv":
        frame = _read_report_csv(there)
    else:
        try:
            frame = _read_table(there, RESULTS_TABLE)
        except duckdb.Error as error:
            raise ValueError(f"{there} is not a readable DuckDB results file: {error}") from None
        if frame is None:
            return set()
    return {_key(*row) for row in frame[list(TRIAL_KEY)].itertuples(index=False)}


@task(name="merge-results", cache_policy=NO_CACHE)
def merge_results(db_path: str, source: str) -> MergeCount:
    """Add the trials and MAE traces of another DuckDB results file or a report's
    ``benchmark.csv``, validated by the same schemas, in one transaction; trials already in
    ``db_path`` keep their row and the source is never changed."""
    here, there = Path(db_path), Path(source)
    if not there.is_file():
        raise FileNotFoundError(f"merge: results file {source} does not exist")
    if here.exists() and here.resolve() == there.resolve():
        raise ValueError(f"merge: {source} is the results file itself")
    from_csv = there.suffix.lower() == ".csv"
    try:
        if from_csv:
            incoming, traces = _read_report_csv(there), pd.DataFrame()
        else:
            incoming, traces = read_results(there), read_traces(there)  # schema errors propagate
    except duckdb.Error as error:
        problem = f"merge: {source} is not a readable DuckDB results file: {error}"
        raise ValueError(problem) from None
    if incoming.empty and traces.empty:
        raise ValueError(f"merge: {source} has no rows in {RESULTS_TABLE} or {TRACES_TABLE}")
    here.parent.mkdir(parents=True, exist_ok=True)
    literal = str(there).replace("'", "''")
    with duckdb.connect(str(here)) as con:
        _ensure_tables(con)
        if from_csv:
            con.register("merge_rows", incoming)
        else:
            con.execute(f"ATTACH '{literal}' AS merge_source (READ_ONLY)")
        try:
            con.execute("BEGIN TRANSACTION")
            before = (_count(con, RESULTS_TABLE), _count(con, TRACES_TABLE))
            for table, frame in ((RESULTS_TABLE, incoming), (TRACES_TABLE, traces)):
                if frame.empty:
                    continue
                columns = ", ".join(quote_identifier(c) for c in frame.columns)
                name = quote_identifier(table)
                origin = "merge_rows" if from_csv else f"merge_source.{name}"
                con.execute(
                    f"INSERT OR IGNORE INTO {name} ({columns}) SELECT {columns} FROM {origin}"
                )
            after = (_count(con, RESULTS_TABLE), _count(con, TRACES_TABLE))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        finally:
            if from_csv:
                con.unregister("merge_rows")
            else:
                con.execute("DETACH merge_source")
    added = after[0] - before[0]
    return MergeCount(str(source), added, len(incoming) - added, after[1] - before[1])
