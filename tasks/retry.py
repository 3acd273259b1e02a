"""Retry policy for the tasks that touch the DuckDB file: retry only when it is locked."""

from __future__ import annotations

from typing import Any

from tasks.errors import WarehouseBusyError

__all__ = ["RETRIES", "RETRY_DELAY_SECONDS", "retry_when_busy"]

RETRIES = 2
RETRY_DELAY_SECONDS = 5.0


def retry_when_busy(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect `retry_condition_fn`: retry a failed run only if another process held the lock."""
    return isinstance(getattr(state, "data", None), WarehouseBusyError)
