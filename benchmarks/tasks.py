"""Benchmark tasks: run one trial, read which trials are done, and record results in DuckDB.

Only the flow's own process writes the results file (DuckDB allows one writing process): the
trial task computes and returns, `record_result` inserts. Each insert is its own transaction, so
an interrupted run loses at most the trials still running.
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
]

TrialKey = tuple[str, str, int, str, float, str, str]


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
        return (
            self.dataset,
            self.mechanism,
            self.seed,
            self.method,
            self.p,
            self.params_hash,
            self.tdm_version,
        )

    @property
    def label(self) -> str:
        """A short readable name for logs and task-run names."""
        return f"{self.dataset}/{self.mechanism}/seed{self.seed}/{self.method}"


def _ensure_tables(con: duckdb.DuckDBPyConnection, source: str | Path) -> None:
    con.execute(RESULTS_DDL)
    con.execute(TRACES_DDL)
    _check_layout(con, source)
    # Files written before the mixed-type benchmark lack its column; it is NULL for their rows.
    con.execute(
        f"ALTER TABLE {quote_identifier(RESULTS_TABLE)} ADD COLUMN IF NOT EXISTS cat_error DOUBLE"
    )


def _check_layout(con: duckdb.DuckDBPyConnection, source: str | Path) -> None:
    """Refuse a results file whose trial key lacks the library version (written by tdm < 0.5)."""
    for table in (RESULTS_TABLE, TRACES_TABLE):
        keys = con.execute(
            "SELECT constraint_column_names FROM duckdb_constraints() "
            "WHERE table_name = ? AND constraint_type = 'PRIMARY KEY'",
            [table],
        ).fetchall()
        if keys and "tdm_version" not in keys[0][0]:
            raise ValueError(
                f"{source}: table {table} was written by tdm < 0.5, whose trials are keyed "
                "without the library version; write new results to another file (--db)."
            )


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
        _check_layout(con, db_path)
        return con.execute(f"SELECT * FROM {quote_identifier(table)}").df()


def read_results(db_path: str | Path) -> pd.DataFrame:
    """Every recorded trial, validated by `BenchmarkResultsSchema` (empty when none)."""
    frame = _read_table(db_path, RESULTS_TABLE)
    if frame is None:
        return pd.DataFrame(columns=list(BenchmarkResultsSchema.to_schema().columns))
    if "cat_error" not in frame:  # a file written before the mixed-type benchmark
        frame["cat_error"] = float("nan")
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
    frame = _read_table(db_path, RESULTS_TABLE)
    if frame is None or frame.empty:
        return set()
    return {
        (
            str(r.dataset),
            str(r.mechanism),
            int(r.seed),
            str(r.method),
            float(r.p),
            str(r.params_hash),
            str(r.tdm_version),
        )
        for r in frame[list(TRIAL_KEY)].itertuples(index=False)
    }


@task(name="run-trial", cache_policy=NO_CACHE, task_run_name="trial-{spec.label}")
def run_trial_task(spec: TrialSpec, svm_repeats: int, data_dir: str | None = None) -> Any:
    """Load the dataset and run one trial (`benchmarks.trial.run_trial`); returns its result."""
    from benchmarks.trial import run_trial

    return run_trial(
        *_cell(spec, data_dir), p=spec.p, params=dict(spec.params), svm_repeats=svm_repeats
    )


def _cell(spec: TrialSpec, data_dir: str | None) -> tuple[Any, str, int, str]:
    """(dataset, mechanism, seed, method) of ``spec``, the dataset loaded from ``data_dir``."""
    from benchmarks.datasets import is_mixed_dataset, load_dataset, load_mixed_dataset

    load = load_mixed_dataset if is_mixed_dataset(spec.dataset) else load_dataset
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
        _ensure_tables(con, db_path)
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
        _ensure_tables(con, db_path)
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


def _source_columns(con: duckdb.DuckDBPyConnection, table: str) -> set[str]:
    """Columns of `table` in the attached merge source (older files lack newer columns)."""
    rows = con.execute(
        "SELECT column_name FROM duckdb_columns() "
        "WHERE database_name = 'merge_source' AND table_name = ?",
        [table],
    ).fetchall()
    return {str(row[0]) for row in rows}


def _read_report_csv(path: Path) -> pd.DataFrame:
    """The trials of a report's ``benchmark.csv``; it has no loss traces, so they become ``[]``."""
    try:
        text = ("dataset", "mechanism", "method", "params_hash", "params", "tdm_version")
        frame = pd.read_csv(path, dtype=dict.fromkeys(text, str))
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as error:
        raise ValueError(f"merge: {path} is not a readable report CSV: {error}") from None
    if "loss_trace" not in frame:
        frame["loss_trace"] = "[]"
    if "cat_error" not in frame:
        frame["cat_error"] = float("nan")
    columns = list(BenchmarkResultsSchema.to_schema().columns)
    missing = [c for c in columns if c not in frame]
    if missing:
        raise ValueError(f"merge: {path} lacks the report column(s) {missing}")
    return BenchmarkResultsSchema.validate(frame[columns])


@task(name="merge-results", cache_policy=NO_CACHE)
def merge_results(db_path: str, source: str) -> MergeCount:
    """Add the trials and MAE traces of another results file (another run, another machine).

    The source is a DuckDB results file or a report's ``benchmark.csv`` (the committed record
    of a grid: its trials, without loss traces or MAE traces). It is validated by the same
    schemas first. A trial whose key is already in `db_path` keeps the row already there.
    Everything is copied in one transaction: a failure leaves `db_path` as it was. The source
    file is opened read-only and never changed.
    """
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
        _ensure_tables(con, db_path)
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
                there_columns = set(frame.columns) if from_csv else _source_columns(con, table)
                columns = ", ".join(
                    quote_identifier(c) for c in frame.columns if c in there_columns
                )
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
