"""Following a triggered run (`deployments.trigger`) when its server goes away."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from types import SimpleNamespace
from uuid import uuid4

import httpx
import pytest

import deployments.trigger as trigger
from deployments.trigger import CreatedRun, _Watch
from tasks.errors import PipelineError


class _GoneServer:
    """A Prefect client whose server stopped answering (its serving process was killed)."""

    def read_flow_run(self, run_id: object) -> object:
        raise httpx.ConnectError("[Errno 111] Connection refused")


def test_a_server_that_stops_answering_leaves_the_run_s_outcome_unknown_not_a_bug() -> None:
    """Bug: `tdm run` whose `tdm serve` was killed mid-run said "unexpected error:
    ConnectError ... This is a bug in tdm" (exit 1). It says the run's outcome is unknown and
    where to find it (exit 2: a `PipelineError`)."""
    run = CreatedRun(uuid4(), "impute-sales", "impute-table/impute-table", "http://ui/runs/1")
    watch = _Watch(_GoneServer(), run, uuid4(), None, None)  # type: ignore[arg-type]
    with pytest.raises(PipelineError) as raised:
        watch.follow(wait=True, timeout=None, pickup_timeout=30, poll=0.01)
    message = str(raised.value)
    assert "stopped answering (ConnectError) while run 'impute-sales' was going" in message
    assert "http://ui/runs/1" in message and f"run_id '{run.id}'" in message


class _EndedRun:
    """A Prefect client whose run has failed, and whose failure hook's record reaches the API
    a second after the final state (as a notification's warning does)."""

    def __init__(self) -> None:
        from prefect.states import Failed

        self.ended = time.monotonic()
        self.run = SimpleNamespace(state=Failed(message='Table "sales" has no key "id".'))
        self.late = SimpleNamespace(
            id=uuid4(), timestamp=datetime.now(UTC), message="The failure notification ..."
        )

    def read_flow_run(self, run_id: object) -> object:
        return self.run

    def read_logs(self, **kwargs: object) -> list[object]:
        return [self.late] if time.monotonic() - self.ended > 1.0 else []


def test_records_logged_after_the_final_state_are_passed_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bug: `tdm run` read the run's log once when the run ended, and missed what came after
    (the failure notification's warning, the last batch): it reads until the log is quiet."""
    monkeypatch.setattr(trigger, "LOG_QUIET_FAILED", 2.0)
    run = CreatedRun(uuid4(), "impute-sales", "impute-table/impute-table", "http://ui/runs/1")
    shown: list[object] = []
    client = _EndedRun()
    watch = _Watch(client, run, uuid4(), None, None, shown.append)  # type: ignore[arg-type]
    watch.follow(wait=True, timeout=None, pickup_timeout=30, poll=0.05)
    assert shown == [client.late]
