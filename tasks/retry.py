"""Tasks that touch the DuckDB file: retried only when another process holds its lock."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.errors import ChangedMeanwhileError, WarehouseBusyError

__all__ = ["RETRIES", "RETRY_DELAY_SECONDS", "retry_when_busy", "warehouse_task"]

RETRIES = 2
RETRY_DELAY_SECONDS = 5.0


def retry_when_busy(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect `retry_condition_fn`: retry a failed run only if another process held the lock
    (not if it changed what the task read: the same arguments would fail the same way)."""
    error = getattr(state, "data", None)
    return isinstance(error, WarehouseBusyError) and not isinstance(error, ChangedMeanwhileError)


def warehouse_task(name: str) -> Any:
    """The decorator of a task named `name` that reads or writes the DuckDB file: uncached,
    retried `RETRIES` times, `RETRY_DELAY_SECONDS` apart, when the file is locked."""
    return task(
        name=name,
        cache_policy=NO_CACHE,
        retries=RETRIES,
        retry_delay_seconds=RETRY_DELAY_SECONDS,
        retry_condition_fn=retry_when_busy,
    )
