"""How a run of the imputation flows shows itself: its name, its tags, and how it fails.

Flow runs are named after what they impute (`impute-<table>`, `warehouse-<config name>`) and
carry the tags `table:<table>` and `warehouse:<file name>`, so that the runs list says which
table failed; task runs are named after their task and table (`load-table-<table>`) and carry no
such tag: Prefect takes a concurrency slot for every tag of every task run, one call to the
server each, which made each table of a warehouse run slower the more tables it listed. A
foreseen failure (a `PipelineError`) ends the run in a Failed state whose message is the error's
one paragraph, and its traceback is left out of the run's logs, Prefect's own closing record
included; any other error keeps Prefect's full report, traceback included.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from prefect import Task, get_run_logger
from prefect.states import Failed

from tasks.errors import PipelineError, WarehouseBusyError, release_error, release_frames

__all__ = [
    "DRY_RUN_TAG",
    "OUTCOME",
    "TABLE_TAG",
    "WAREHOUSE_TAG",
    "end_retries",
    "fail_run",
    "for_table",
    "leave_out_foreseen_tracebacks",
    "retried_when_busy",
    "run_guarded",
    "run_tags",
    "table_run_name",
    "tag_flow_run",
    "warehouse_run_name",
]

TABLE_TAG = "table:"
WAREHOUSE_TAG = "warehouse:"
OUTCOME = "tdm_outcome"
"""Attribute set on a log record that states a run's outcome, which the `tdm` command prints
itself: a foreseen error's reason (its traceback left out), a dry run's summary."""

_RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")

P = ParamSpec("P")
R = TypeVar("R")


def run_tags(tables: Iterable[str], db_path: str | Path) -> list[str]:
    """The tags of a run imputing `tables` of the DuckDB file `db_path`."""
    return [*(f"{TABLE_TAG}{table}" for table in tables), f"{WAREHOUSE_TAG}{Path(db_path).name}"]


def for_table(
    task: Task[P, R],
    table: str,
    *,
    suffix: str = "",
    tags: Iterable[str] = (),
) -> Task[P, R]:
    """`task` with its runs named `<task name>-<table><suffix>` and tagged with `tags` (on top
    of the task's own; not with the table or the warehouse: the module docstring)."""
    name = f"{task.name}-{table}{suffix}"
    return task.with_options(
        task_run_name=name.replace("{", "{{").replace("}", "}}"),  # a template: keep braces
        tags={*task.tags, *tags},
    )


DRY_RUN_TAG = "dry-run"
"""The tag of a dry run, whose name ends in `-dry-run` too: it writes nothing."""


def table_run_name() -> str:
    """The name of an `impute-table` run: `impute-<table>`, `-dry-run` added for a dry run."""
    from prefect.runtime import flow_run

    parameters = flow_run.parameters
    return f"impute-{parameters.get('source_table')}" + _dry_run_suffix(parameters)


def warehouse_run_name() -> str:
    """The name of an `impute-warehouse` run: `warehouse-<its config's file name, no suffix>`,
    `-dry-run` added for a dry run."""
    from prefect.runtime import flow_run

    parameters = flow_run.parameters
    config = parameters.get("config") or "config"
    return f"warehouse-{Path(str(config)).stem}" + _dry_run_suffix(parameters)


def _dry_run_suffix(parameters: dict[str, Any]) -> str:
    return "-dry-run" if parameters.get("dry_run") else ""


def tag_flow_run(tags: Iterable[str]) -> None:
    """Add `tags` to the current flow run, on the server and in this process (nothing outside
    a flow run). A run's tags are fixed when it is created; these are known only once it runs."""
    from prefect.client.orchestration import get_client
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    run = context.flow_run if context is not None else None
    if run is None:
        return
    merged = list(dict.fromkeys([*run.tags, *tags]))
    with get_client(sync_client=True) as client:
        client.update_flow_run(run.id, tags=merged)
    run.tags = merged


def fail_run(error: PipelineError) -> Any:
    """The Failed state a flow returns for a foreseen `error`: its message is the error's
    paragraph (calling the flow still raises `error`; or, when Prefect's client re-sent the state
    after losing the server's answer, Prefect's `FailedRun` with the same message, as the server's
    copy of the state does not hold the error). The reason is logged as an error, without a
    traceback.

    A warehouse locked by another process (`WarehouseBusyError`) may be free later: that error is
    raised again instead, so that the deployment's run-level retries run the flow again. Any other
    foreseen error would fail the same way, so the run ends now, retries or not.
    """
    if isinstance(error, WarehouseBusyError):
        raise retried_when_busy(error) from None
    reason = str(error)
    get_run_logger().error("%s", reason, extra={OUTCOME: True})
    end_retries()
    release_error(error)  # its frames' DuckDB connections: freed now, no leak report at exit
    return Failed(message=reason, data=error)


def retried_when_busy(error: WarehouseBusyError) -> WarehouseBusyError:
    """`error`, its message followed by when the run's own retries run the flow again, where one
    is left (the server retries a failed run while its attempts do not exceed its retries);
    `error` itself on the last attempt and outside a flow run, where the advice to retry stands
    alone."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    run = context.flow_run if context is not None else None
    if run is None or run.run_count > (retries := run.empirical_policy.retries or 0):
        return error
    delay = run.empirical_policy.retry_delay or 0
    return WarehouseBusyError(
        f"{error} This run tries again by itself {delay:g} s from now (attempt "
        f"{run.run_count + 1} of {retries + 1})."
    )


def end_retries() -> None:
    """Set the current flow run's retries to none left, for a failure another attempt would
    repeat. (With retries left, the server also turns a returned Failed state into
    AwaitingRetry, which a flow that returned cannot follow: Prefect reports it as crashed.)"""
    from prefect.client.orchestration import get_client
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    run = context.flow_run if context is not None else None
    if run is None or not run.empirical_policy.retries:
        return
    policy = run.empirical_policy.model_copy(update={"retries": 0})
    with get_client(sync_client=True) as client:
        client.update_flow_run(run.id, empirical_policy=policy)
    run.empirical_policy = policy


_ENGINE_EXIT = "Engine execution"
"""How the record begins that Prefect's engine logs, with the traceback, when a flow run it
executes (a served or deployed run) ends in a raised error: for a Failed state too."""


_REPORTED = "_tdm_reported"
"""Set on an unforeseen error `run_guarded` has logged with its traceback."""


_TASK_FAILED = "Task run failed with"
"""How the record begins that Prefect's task engine logs when a task run fails: with " - Retry"
when it is retried."""


_HOOK_RECORDS = ("Running hook", "Hook ")
"""How Prefect's records of a state hook's call begin (running it, and how it ended)."""


class _LeaveOutForeseenTracebacks(logging.Filter):
    """Drops the traceback of a foreseen error from a run's log record, and marks the record;
    drops the engine's closing record of a foreseen error, which repeats the Failed state, and
    of an unforeseen one `run_guarded` logged with its traceback; drops a task's failure record
    of a foreseen error that is not retried (the flow's own error line says it, without
    Prefect's repr of the error), and Prefect's records of calling the failure-notification
    hook, which read as a notification sent when none is set up."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        foreseen = isinstance(error, PipelineError)
        message = str(record.msg)
        if message.startswith(_ENGINE_EXIT) and (foreseen or getattr(error, _REPORTED, False)):
            return False
        if foreseen and message.startswith(_TASK_FAILED) and " - Retry " not in message:
            return False
        if message.startswith(_HOOK_RECORDS) and "'notify_failure'" in record.getMessage():
            return False  # it logs what it did itself (nothing, with no TDM_NOTIFY_URL)
        if not foreseen:
            return True
        record.exc_info, record.exc_text = None, None
        setattr(record, OUTCOME, True)
        return True


_FILTER = _LeaveOutForeseenTracebacks()


def leave_out_foreseen_tracebacks() -> None:
    """Make Prefect's flow- and task-run loggers log foreseen errors without their traceback (the
    message says it all), for the rest of the process: the engine that runs a flow logs its
    error after the flow has returned. Records of other errors pass unchanged."""
    for name in _RUN_LOGGERS:
        logging.getLogger(name).addFilter(_FILTER)  # once: a filter already there is not added


def run_guarded(body: Callable[[], R], subject: str) -> R | Any:
    """Run a flow's `body` as the imputation flows fail: a foreseen error (`PipelineError`)
    becomes the Failed state `fail_run` gives, without its traceback in the logs; any other
    error ends the run's retries (another attempt would fail the same way) and becomes a Failed
    state whose message names `subject` (`Table "sales"`) and the error, logged once with its
    traceback (calling the flow raises it)."""
    leave_out_foreseen_tracebacks()
    try:
        return body()
    except PipelineError as error:
        return fail_run(error)
    except Exception as error:
        end_retries()
        release_frames(error)
        reason = (
            f"{subject} failed with an unexpected error, {type(error).__name__}: {error}. "
            "Its traceback is in this run's log."
        )
        get_run_logger().error("%s", reason, exc_info=error, extra={OUTCOME: True})
        setattr(error, _REPORTED, True)
        return Failed(message=reason, data=error)
