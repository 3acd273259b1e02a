"""The impute-warehouse flow: every table of a config, on threads or a local Dask cluster."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest

import flows.runners as runners
from cli.console import QUIET, quiet_children
from flows.impute_warehouse import WarehouseRunError, impute_warehouse
from flows.runners import gpu_annotation, runner_result, started_runner, task_runner
from flows.settings import PipelineSettings
from tasks.errors import PipelineError, PipelineInputError, WarehouseBusyError
from tests.failures import refused

pytestmark = pytest.mark.usefixtures("prefect_harness", "one_torch_thread")

TABLES = ("north", "south", "east")
NUMERIC = ["temperature", "pressure", "humidity", "visits"]


@pytest.fixture
def three_tables(tmp_path: Path, make_readings: Callable[..., pd.DataFrame]) -> Path:
    db = tmp_path / "warehouse.duckdb"
    for seed, table in enumerate(TABLES):
        make_readings(db, table=table, n_rows=40 + 10 * seed, seed=seed)
    return db


def write_config(path: Path, db: Path, entries: str) -> Path:
    path.write_text(f"db_path: {db}\ntables:\n{entries}", encoding="utf-8")
    return path


def read(db: Path, sql: str) -> pd.DataFrame:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).df()


def all_tables_config(tmp_path: Path, db: Path) -> Path:
    entries = "".join(f"  - table: {t}\n    key: id\n" for t in TABLES)
    entries += "    imputer: {max_iter: 9}\n"  # an override on the last table only
    return write_config(tmp_path / "warehouse.yaml", db, entries)


def test_a_config_entry_s_pass_through_and_bounds_apply_to_its_table(
    tmp_path: Path,
    make_readings: Callable[..., pd.DataFrame],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`pass_through` keeps a text column's NULLs while a boolean column with NULLs is imputed;
    `bounds` replace the observed range (here below the observed maximum) and are recorded; the
    log counts one table as one."""
    db = tmp_path / "warehouse.duckdb"
    make_readings(db, table="north")
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE north SET site = NULL WHERE id % 5 = 0")
        con.execute("UPDATE north SET ok = NULL WHERE id % 7 = 0")
    entry = "  - table: north\n    key: id\n    pass_through: [site]\n"
    entry += "    bounds: {humidity: [0, 55]}\n"
    monkeypatch.setenv("TDM_MAX_ITER", "10")
    impute_warehouse(str(write_config(tmp_path / "w.yaml", db, entry)))
    source = read(db, "SELECT * FROM north ORDER BY id")
    target = read(db, "SELECT * FROM north_imputed ORDER BY id")
    assert target["site"].isna().equals(source["site"].isna()) and source["site"].isna().any()
    assert not target["ok"].isna().any()
    filled = target["humidity"][source["humidity"].isna()]
    assert filled.max() <= 55 < source["humidity"].max() and filled.min() >= 0
    report = read(db, "SELECT quality_report FROM tdm_lineage")["quality_report"][0]
    assert '"humidity": [0.0, 55.0, "config", "config"]' in report
    logged = [record.getMessage() for record in caplog.records]
    assert any(line.startswith("1 table to impute on ") for line in logged), logged


def test_a_failing_table_is_named_and_the_others_are_still_written(
    tmp_path: Path,
    three_tables: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each failure is logged as it happens (bug: a night's failures came only at its end),
    then listed, a line each, when the run fails."""
    monkeypatch.setenv("TDM_MAX_ITER", "5")
    with duckdb.connect(str(three_tables)) as con:
        con.execute("UPDATE south SET pressure = 'inf'::DOUBLE WHERE id = 3")
    entries = "".join(f"  - table: {t}\n    key: id\n" for t in (*TABLES, "missing_table"))
    config = write_config(tmp_path / "w.yaml", three_tables, entries)

    with refused(WarehouseRunError) as failed:
        impute_warehouse(str(config))

    message = str(failed.value)
    assert message.startswith("2 of 4 tables failed")
    assert '[south] Table "south"' in message and "pressure" in message and "inf" in message
    # bug: "Nothing was written." read as the whole run's, beside "the others were written"
    assert 'Nothing of "south" was written.' in message and "Nothing was written" not in message
    assert '\n  [missing_table] Table "missing_table" does not exist' in message
    assert 'Table "missing_table" failed; the run goes on: Table "missing_table"' in caplog.text
    assert 'Table "south" failed; the run goes on: ' in caplog.text
    written = set(read(three_tables, "SELECT source_table FROM tdm_lineage")["source_table"])
    assert written == {"north", "east"}
    tables = set(read(three_tables, "SELECT table_name FROM duckdb_tables()")["table_name"])
    assert "south_imputed" not in tables and {"north_imputed", "east_imputed"} <= tables


def test_threads_then_a_local_dask_cluster_give_every_table_with_its_own_settings(
    tmp_path: Path,
    three_tables: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Each table is imputed with its own settings on the thread pool; then in two Dask worker
    processes, reads and writes staying in the flow. Same seed and CPU: the same numbers, bit
    for bit. Run as under `tdm warehouse -q`, the workers print no log line."""
    monkeypatch.setenv("TDM_MAX_ITER", "12")
    config = all_tables_config(tmp_path, three_tables)
    result = impute_warehouse(str(config))
    assert result.runner.startswith("thread pool")
    assert set(result.tables) == set(TABLES)
    assert [result.tables[t].n_iter for t in TABLES] == [12, 12, 9]
    by_threads = {t: read(three_tables, f"SELECT * FROM {t}_imputed ORDER BY id") for t in TABLES}
    for table in TABLES:
        assert not by_threads[table][NUMERIC].isna().any().any()
    lineage = read(three_tables, "SELECT source_table, flow_name, status FROM tdm_lineage")
    assert sorted(lineage["source_table"]) == sorted(TABLES)
    assert set(lineage["flow_name"]) == {"impute-warehouse"}
    assert set(lineage["status"]) == {"imputed"}

    monkeypatch.setenv("TDM_TASK_RUNNER", "dask")
    monkeypatch.setenv("TDM_DASK_WORKERS", "2")
    capfd.readouterr()
    restore = quiet_children(QUIET)
    try:
        result = impute_warehouse(str(config))
    finally:
        restore()

    assert "Task run 'impute-" not in capfd.readouterr().err  # the tasks run on the workers
    assert result.runner == "local Dask cluster (2 workers)"
    for table in TABLES:
        by_dask = read(three_tables, f"SELECT * FROM {table}_imputed ORDER BY id")
        pd.testing.assert_frame_equal(by_dask, by_threads[table])
    assert len(read(three_tables, "SELECT * FROM tdm_lineage")) == 2 * len(TABLES)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (None, "does not exist"),
        ("tables: []\n", "tables: List should have at least 1 item"),
        ("tables:\n  - table: a\n  - table: a\n", "top level: tables listed more than once: a"),
        ("tables:\n  - key: id\n", "tables entry 1: table: Field required"),
        ("tables:\n  - table: a\n  - table: b\n    bogus: 1\n", "entry 2 (b): bogus: Extra"),
        ("tables: !!set {a: null}\n", "tables entry 1: Input should be a valid dictionary"),
        ("tables:\n  - table: a\x00\n", "not valid YAML: character 21 of the file: special"),
        ("tables: !!int abc\n", "cannot be read: invalid literal for int()"),
        (
            "tables:\n  - [a\n",
            "not valid YAML: line 3, column 1: expected ',' or ']', but got"
            " '<stream end>' (while parsing a flow sequence that starts at line 2, column 5).",
        ),
    ],
)
def test_a_bad_config_is_a_clear_error_naming_the_file(
    tmp_path: Path, text: str | None, problem: str
) -> None:
    """The file, the entry (counted from 1, with its table) or YAML's line; no pydantic prefix."""
    config = tmp_path / "bad.yaml"
    if text is not None:
        config.write_text(text, encoding="utf-8")
    with refused(PipelineInputError, match="Warehouse config") as failed:
        impute_warehouse(str(config))
    assert str(config) in str(failed.value) and problem in str(failed.value)
    assert "Value error" not in str(failed.value)


def test_bad_imputer_settings_refuse_the_config_before_any_table(
    tmp_path: Path, three_tables: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: an entry's imputer override the library refuses failed that table only, after the
    others were written, while `tdm serve` refused the same file at start; and a bad TDM_*
    imputer variable was blamed on every entry of the config. Both are refused before any
    table is read, naming the file, table and setting, or the variable; nothing is written."""
    monkeypatch.setenv("TDM_MAX_ITER", "5")
    entries = "  - table: east\n  - table: north\n    imputer: {max_iter: -1}\n"
    config = write_config(tmp_path / "w.yaml", three_tables, entries)
    with refused(
        PipelineInputError, match=rf'{config}: imputer settings of table "north".*max_iter'
    ):
        impute_warehouse(str(config))
    monkeypatch.setenv("TDM_MAX_ITER", "abc")
    config = write_config(tmp_path / "ok.yaml", three_tables, "  - table: east\n")
    with refused(
        PipelineInputError, match=r"settings of TDM_MAX_ITER are invalid.*got max_iter='abc'"
    ):
        impute_warehouse(str(config))
    with duckdb.connect(str(three_tables), read_only=True) as con:
        assert {row[0] for row in con.execute("SHOW TABLES").fetchall()} == set(TABLES)


def test_gpu_annotation_asks_dask_for_a_gpu_resource_only_when_set() -> None:
    import dask

    with gpu_annotation(PipelineSettings(task_runner="dask", dask_gpu=True)):
        assert dask.get_annotations() == {"resources": {"GPU": 1}}
    with gpu_annotation(PipelineSettings(task_runner="dask")):
        assert dask.get_annotations() == {}
    with gpu_annotation(PipelineSettings(task_runner="threads", dask_gpu=True)):
        assert dask.get_annotations() == {}


def test_runner_choice_follows_the_settings() -> None:
    from prefect.task_runners import ThreadPoolTaskRunner
    from prefect_dask import DaskTaskRunner

    threads = task_runner(PipelineSettings(max_workers=3))
    assert isinstance(threads, ThreadPoolTaskRunner) and threads._max_workers == 3
    remote = task_runner(PipelineSettings(task_runner="dask", dask_address="tcp://10.0.0.9:8786"))
    assert isinstance(remote, DaskTaskRunner) and remote.address == "tcp://10.0.0.9:8786"
    assert np.isfinite(PipelineSettings().max_fit_rows)


def test_a_dask_scheduler_that_cannot_be_reached_is_refused_by_name() -> None:
    """Bug: an unreachable --dask-address ended `tdm warehouse` in "unexpected error: OSError:
    Timed out trying to connect ... This is a bug" (exit 1); it is a foreseen input, refused
    naming the address and what to do."""
    import dask
    import distributed  # noqa: F401 - its defaults are in dask's config before `set` (which,
    # on leaving, would otherwise drop the whole "distributed" section for later tests)

    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{closed.getsockname()[1]}"
    settings = PipelineSettings(task_runner="dask", dask_address=address)
    with (
        dask.config.set({"distributed.comm.timeouts.connect": "1s"}),
        pytest.raises(PipelineInputError, match=rf"The Dask scheduler at {address} .* reached"),
        started_runner(settings),
    ):
        pass


def test_a_dask_address_that_is_not_an_address_is_refused_with_its_form() -> None:
    """A malformed --dask-address is named as not an address, with the form expected."""
    settings = PipelineSettings(task_runner="dask", dask_address="localhost:notaport")
    with (
        pytest.raises(
            PipelineInputError,
            match=r"localhost:notaport .* is not an address .*"
            r"tcp://HOST:PORT",
        ),
        started_runner(settings),
    ):
        pass


def test_a_run_where_only_locks_failed_raises_the_lock_error_for_the_run_retries(
    tmp_path: Path, three_tables: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tables that found the warehouse locked (and nothing else failing) fail the run with the
    lock error itself, which the deployment's run-level retries retry; a mix stays one report."""
    import flows.impute_warehouse as warehouse_flow

    monkeypatch.setenv("TDM_MAX_ITER", "5")
    prepare = warehouse_flow.prepare_table

    def locked(db: str, request: object, **kwargs: object) -> object:
        if getattr(request, "source_table", "") in ("north", "south"):
            raise WarehouseBusyError(f"'{db}' is locked by another process (test)")
        return prepare(db, request, **kwargs)

    monkeypatch.setattr(warehouse_flow, "prepare_table", locked)
    with pytest.raises(WarehouseBusyError, match="locked by another process"):
        impute_warehouse(str(all_tables_config(tmp_path, three_tables)))

    with duckdb.connect(str(three_tables)) as con:
        con.execute("UPDATE east SET pressure = 'inf'::DOUBLE WHERE id = 3")
    with refused(WarehouseRunError, match="3 of 3 tables failed"):
        impute_warehouse(str(all_tables_config(tmp_path, three_tables)))


def test_dask_workers_take_the_pipeline_s_thread_setting() -> None:
    """Local Dask workers get TDM_TORCH_THREADS threads; with it 0 or unset, a share of the
    cores."""
    from flows.runners import _worker_env

    assert _worker_env(2, 3)["OMP_NUM_THREADS"] == "3"
    share = str(max(1, (os.cpu_count() or 1) // 2))
    assert _worker_env(2, 0)["OMP_NUM_THREADS"] == share == _worker_env(2)["OMP_NUM_THREADS"]


def _raise(error: Exception) -> None:
    raise error


class _Future:
    """A Prefect future of a Dask task, around its `wrapped_future`."""

    def __init__(self, wrapped: object) -> None:
        self.wrapped_future = wrapped

    def result(self) -> object:
        return self.wrapped_future.result(timeout=None)  # type: ignore[attr-defined]


def test_a_dask_worker_that_died_fails_the_table_by_name_not_as_a_bug() -> None:
    """Bug: a worker killed running a partition (most often out of memory) ended `tdm impute`
    in "unexpected error: KilledWorker ... This is a bug in tdm" (exit 1), without the table."""
    from distributed.scheduler import KilledWorker

    error = KilledWorker("impute_partition-2f3d", None, 3)
    killed = _Future(type("Killed", (), {"result": lambda self, timeout: _raise(error)})())
    settings = PipelineSettings(task_runner="dask")
    with pytest.raises(PipelineError) as raised:
        runner_result(killed, settings, "sales", "partition 3 of 20")
    assert str(raised.value).startswith(
        'Table "sales": partition 3 of 20 failed on the local Dask cluster (2 workers): the '
        "workers that ran it died (most often out of memory: lower TDM_PARTITION_ROWS"
    )
    assert str(raised.value).endswith('Nothing of "sales" was written.')


def _cluster_without_workers() -> Any:
    """An in-process Dask cluster with no worker. distributed gives its IO-loop thread 10 s to
    start (an `AssertionError` otherwise), which a starved CI machine once missed: one more try."""
    import distributed

    try:
        return distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None)
    except AssertionError:
        return distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None)


def test_a_dask_cluster_without_workers_fails_the_table_after_a_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bug: a scheduler with no worker (none started, or all killed mid-run) made the run wait
    for ever, saying nothing; it fails once the cluster has had none for NO_WORKER_SECONDS."""
    import distributed

    monkeypatch.setattr(runners, "NO_WORKER_SECONDS", 2.0)
    monkeypatch.setattr(runners, "_POLL_SECONDS", 0.2)
    settings = PipelineSettings(task_runner="dask", dask_address="tcp://127.0.0.1:1")
    with _cluster_without_workers() as cluster, distributed.Client(cluster) as client:
        for number, table in enumerate(("sales", "stock")):  # the next one does not wait again
            started = time.monotonic()
            waiting = _Future(client.submit(sum, [1, number]))
            with pytest.raises(PipelineError, match=r"no worker for 2 s \(none started"):
                runner_result(waiting, settings, table, "the fit")
            took = time.monotonic() - started
            assert took >= 2.0 if table == "sales" else took < 1.0, (table, took)


def test_a_local_dask_cluster_asked_for_a_gpu_on_a_machine_without_one_is_refused() -> None:
    """Bug: TDM_DASK_GPU on the local cluster (whose workers offered no GPU) left the fit
    unscheduled for ever; without CUDA it is refused, with CUDA each worker offers it."""
    import torch

    settings = PipelineSettings(task_runner="dask", dask_gpu=True)
    if torch.cuda.is_available():
        assert task_runner(settings).cluster_kwargs["resources"] == {"GPU": 1}
        return
    with pytest.raises(PipelineInputError, match="this machine has no CUDA GPU"):
        task_runner(settings)


def test_a_dask_task_that_ended_in_a_timeout_of_its_own_raises_it_not_a_wait() -> None:
    """Review: a finished task whose own error was a TimeoutError read as "not done yet", and
    the wait went on for ever."""

    class TimedOut:
        def result(self, timeout: float | None) -> None:
            raise TimeoutError("the task's own")

        def done(self) -> bool:
            return True

    settings = PipelineSettings(task_runner="dask")
    with pytest.raises(TimeoutError, match="the task's own"):
        runner_result(_Future(TimedOut()), settings, "sales", "the fit")
