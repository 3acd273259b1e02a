"""Runs you can tell apart (named and tagged after their table and warehouse) and failures you can
read (the state message is the reason; a foreseen error logs no traceback), read back from the
Prefect API as the UI shows them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pandas as pd
import pytest

import tasks.write
from flows.impute_table import impute_table
from flows.impute_warehouse import impute_warehouse
from tasks.warehouse.staging import STAGE_PREFIX

pytestmark = pytest.mark.usefixtures("prefect_harness", "one_torch_thread")

REPO = Path(__file__).resolve().parents[2]

FAST = {"max_iter": 5}
TABLE_STEPS = (
    "check-unchanged", "count-rows", "load-table", "validate-input", "check-target",
    "standardise", "impute", "inverse-scale", "check-quality", "write-back",
)  # fmt: skip


def flow_run(run_id: UUID) -> Any:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(run_id)


def task_runs(run_id: UUID) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        return client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run_id]))
        )


def run_logs(run_id: UUID) -> list[Any]:
    """The run's log records as the API has them (its task runs' included), oldest first."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)  # the handler sends in batches, in the background
    with get_client(sync_client=True) as client:
        return client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])))


def test_table_runs_are_named_and_tagged_after_the_table_and_warehouse(warehouse: Path) -> None:
    """Bug: every run was named at random (`banana-tuna`) and every task run `impute-6eb`. Task
    runs are named after the table but carry no tag: Prefect takes a concurrency slot for each
    tag of each task run (bug: a warehouse run of 80 tables spent most of its time in that)."""
    state = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, return_state=True)
    run_id = state.state_details.flow_run_id

    run = flow_run(run_id)
    assert run.name == "impute-readings"
    assert {"table:readings", "warehouse:warehouse.duckdb"} <= set(run.tags)
    tasks = task_runs(run_id)
    assert sorted(t.name for t in tasks) == sorted(f"{step}-readings" for step in TABLE_STEPS)
    for task in tasks:
        assert task.tags == [], task.name


def test_warehouse_runs_are_named_after_the_config_and_tagged_with_each_table(
    tmp_path: Path, make_readings: Callable[..., pd.DataFrame], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "sales.duckdb"
    for seed, table in enumerate(("north", "south")):
        make_readings(db, table=table, n_rows=40, seed=seed)
    config = tmp_path / "nightly.yaml"
    config.write_text(f"db_path: {db}\ntables:\n  - table: north\n  - table: south\n")
    monkeypatch.setenv("TDM_MAX_ITER", "5")

    state = impute_warehouse(str(config), return_state=True)
    run_id = state.state_details.flow_run_id

    run = flow_run(run_id)
    assert run.name == "warehouse-nightly"
    assert {"table:north", "table:south", "warehouse:sales.duckdb"} <= set(run.tags)
    names = {t.name: t.tags for t in task_runs(run_id)}
    for table in ("north", "south"):
        for step in ("load-table", "impute", "write-back"):
            assert names[f"{step}-{table}"] == []


def test_every_line_a_step_writes_reaches_the_run_s_log(
    tmp_path: Path, make_readings: Callable[..., pd.DataFrame], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: the write's note of a column that kept its type and the warning that a killed
    run's staging folder was removed went to the terminal only, not to the run's log (the UI,
    `tdm run`)."""
    db = tmp_path / "warehouse.duckdb"
    make_readings(db, table="readings", n_rows=120, seed=1)
    stale = tmp_path / f"{STAGE_PREFIX}killed"
    stale.mkdir()
    (stale / "owner").write_text(f"{2**22 + 1}\n{socket.gethostname()}\n")  # no such PID
    monkeypatch.setenv("TDM_MAX_FIT_ROWS", "60")  # partitioned: the stale folder is removed
    monkeypatch.setenv("TDM_PARTITION_ROWS", "60")

    state = impute_table("readings", db_path=str(db), key="id", imputer=FAST, return_state=True)

    assert state.is_completed() and not stale.exists()
    messages = [log.message for log in run_logs(state.state_details.flow_run_id)]
    assert [m for m in messages if '"visits" kept its type INTEGER' in m], messages
    assert [m for m in messages if "staging folder" in m and "killed" in m], messages


def test_a_dry_run_is_named_and_tagged_as_one_and_warns_as_the_run_would(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: a dry run was named and tagged as the run that writes, and logged none of the
    quality warnings the run gives."""
    monkeypatch.setenv("TDM_SPREAD_THRESHOLD", "0.01")  # every imputed column's spread warns

    def warnings(dry_run: bool) -> tuple[Any, list[str]]:
        state = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, seed=0,
                             dry_run=dry_run, return_state=True)  # fmt: skip
        assert state.is_completed(), state.message
        run_id = state.state_details.flow_run_id
        found = [log.message for log in run_logs(run_id) if log.level == 30]
        return flow_run(run_id), sorted(m for m in found if m.startswith("Table 'readings': "))

    dry, warned = warnings(dry_run=True)
    assert dry.name == "impute-readings-dry-run" and "dry-run" in dry.tags
    real, warned_by_run = warnings(dry_run=False)
    assert real.name == "impute-readings" and "dry-run" not in real.tags
    assert warned == warned_by_run and [w for w in warned if "spread" in w], warned


def test_a_warehouse_run_logs_and_reports_what_each_table_did(
    tmp_path: Path, make_readings: Callable[..., pd.DataFrame], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: a warehouse run's log never said what each table wrote, and its artifacts were the
    tables' own in no order: a `tdm-warehouse-<config>` report lists each table's outcome."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterKey,
        FlowRunFilter,
        FlowRunFilterId,
    )

    db = tmp_path / "sales.duckdb"
    for seed, table in enumerate(("north", "south")):
        make_readings(db, table=table, n_rows=40, seed=seed)
    config = tmp_path / "nightly.yaml"
    config.write_text(f"db_path: {db}\ntables:\n  - table: north\n  - table: gone\n"
                      "  - table: south\n")  # fmt: skip
    monkeypatch.setenv("TDM_MAX_ITER", "5")

    state = impute_warehouse(str(config), return_state=True)

    assert state.is_failed() and state.message.startswith("1 of 3 tables failed")
    run_id = state.state_details.flow_run_id
    messages = [log.message for log in run_logs(run_id)]
    for table in ("north", "south"):
        assert [m for m in messages if m.startswith(f"Wrote '{table}_imputed' to ")], messages
    with get_client(sync_client=True) as client:
        (report,) = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["tdm-warehouse-nightly"])),
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run_id])),
        )
    report = report.data
    assert report.startswith("# Warehouse run `nightly`: 2 of 3 tables written, 1 failed")
    assert "| `north` | written | `north_imputed` | 40 |" in report
    assert "| `gone` | **failed** |" in report and '- `gone`: Table "gone" does not exist' in report


def test_a_foreseen_failure_is_the_state_message_and_logs_no_traceback(warehouse: Path) -> None:
    """Bug: the one-line reason was buried under ~120 lines of tracebacks in the run's logs."""
    state = impute_table(
        "readings", db_path=warehouse, columns=["day"], imputer=FAST, return_state=True
    )

    assert state.is_failed()
    reason = str(state.result(raise_on_failure=False))
    assert state.message == reason
    assert reason.startswith("Only numeric, text (VARCHAR), ENUM and BOOLEAN columns can be")
    assert "the columns parameter, --columns flag" in reason  # the UI's and the CLI's way
    logs = run_logs(state.state_details.flow_run_id)
    assert not [log.message for log in logs if "Traceback" in log.message]
    errors = [log.message for log in logs if log.level >= 40]
    assert reason in errors  # the flow run's own error line: the reason, once, as it is
    assert not [m for m in errors if m.startswith("Task run failed")]  # nor Prefect's repr
    assert not [log for log in logs if "'notify_failure'" in log.message]  # nor "Running hook"
    assert flow_run(state.state_details.flow_run_id).state.message == reason


def _run_in_a_process(script: str) -> subprocess.CompletedProcess[str]:
    """`script` run by a Python process of its own, against the suite's Prefect server."""
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    return subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def test_a_failed_run_leaves_no_duckdb_object_to_its_process_exit(warehouse: Path) -> None:
    """A served run's process, after a foreseen failure, exits without nanobind's report of
    leaked DuckDB objects (bug: 60 lines after each failed run, the connection being held by
    the error's frames in the run's state)."""
    run = _run_in_a_process(
        "from flows.impute_table import impute_table\n"
        f"state = impute_table('nope', db_path={str(warehouse)!r}, return_state=True)\n"
        "assert state.is_failed()\n"
    )
    assert run.returncode == 0, run.stderr
    assert 'Table "nope" does not exist' in run.stderr and "leaked" not in run.stderr


def test_an_unforeseen_failure_keeps_its_traceback_and_leaves_no_duckdb_object(
    warehouse: Path,
) -> None:
    """Bug: after an unforeseen failure (here injected in write-back), the run's process ended
    with 40 lines of nanobind's report of leaked DuckDB objects, which the traceback's frames
    held. The traceback is logged with its lines, and nothing is reported leaked."""
    run = _run_in_a_process(
        "import tasks.write\n"
        "from flows.impute_table import impute_table\n"
        "def fail(*args):\n"
        "    raise RuntimeError('injected failure after imputation')\n"
        "tasks.write.insert_lineage = fail\n"
        f"state = impute_table('readings', db_path={str(warehouse)!r}, imputer={FAST!r},"
        " return_state=True)\n"
        "assert state.is_failed()\n"
    )
    assert run.returncode == 0, run.stderr
    output = run.stdout + run.stderr
    assert "Traceback" in output and "insert_lineage(self.con," in output  # with its lines
    assert "leaked" not in output


def test_an_unforeseen_failure_keeps_its_traceback_and_rolls_everything_back(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch, take_snapshot: Callable[[Path], dict]
) -> None:
    """A failure injected in write-back, after the target is created: the run's logs keep the
    traceback, and no target, imputed-cells record or lineage is left."""
    before = take_snapshot(warehouse)

    def fail(*args: object) -> None:
        raise RuntimeError("injected failure after imputation")

    monkeypatch.setattr(tasks.write, "insert_lineage", fail)
    state = impute_table("readings", db_path=warehouse, imputer=FAST, return_state=True)

    assert state.is_failed()
    assert state.message == (  # bug: "Flow run encountered an exception: RuntimeError: ..."
        'Table "readings" failed with an unexpected error, RuntimeError: injected failure after '
        "imputation. Its traceback is in this run's log."
    )
    logs = run_logs(state.state_details.flow_run_id)
    tracebacks = [log.message for log in logs if "Traceback" in log.message]
    assert [m for m in tracebacks if m.startswith(state.message)]  # the run's own error line
    assert len(tracebacks) == 2, tracebacks  # and the task's (bug: the engine's, the flow's too)
    assert take_snapshot(warehouse) == before and set(before) == {"readings"}


def test_a_locked_warehouse_s_message_says_when_the_run_tries_again() -> None:
    """A run with a retry left adds when its retries run it again and which attempt that is;
    the last attempt, and a call outside a flow, keep the message as it was (its advice to
    retry)."""
    from prefect import flow

    from flows.runs import retried_when_busy
    from tasks.errors import WarehouseBusyError

    busy = WarehouseBusyError("Database file 'w.duckdb' is locked. Retry when it is free.")
    assert retried_when_busy(busy) is busy
    messages: list[str] = []

    @flow(retries=1, retry_delay_seconds=0, persist_result=False)
    def locked() -> None:
        messages.append(str(retried_when_busy(busy)))
        raise busy

    with pytest.raises(WarehouseBusyError):
        locked()
    assert messages == [
        f"{busy} This run tries again by itself 0 s from now (attempt 2 of 2).",
        str(busy),
    ]
