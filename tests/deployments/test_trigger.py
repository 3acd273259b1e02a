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


class _LoginServer:
    """A Prefect client of a server that asks for a login (PREFECT_SERVER_API_AUTH_STRING)."""

    def __enter__(self) -> _LoginServer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def read_deployment_by_name(self, name: str) -> object:
        from prefect.exceptions import PrefectHTTPStatusError

        request = httpx.Request("GET", "http://127.0.0.1:4200/api/deployments/name/x")
        response = httpx.Response(401, request=request, json={"exception_message": "no"})
        raise PrefectHTTPStatusError("401 Unauthorized", request=request, response=response)


@pytest.mark.parametrize("login", ["", "u:wrong"], ids=["none", "refused"])
def test_a_server_that_asks_for_a_login_is_named_with_the_setting_to_give(
    monkeypatch: pytest.MonkeyPatch, login: str
) -> None:
    """Bug: `tdm run` against a server with basic auth said "unexpected error:
    PrefectHTTPStatusError ... 401 ... This is a bug in tdm"."""
    import prefect

    monkeypatch.setenv("PREFECT_API_AUTH_STRING", login)
    monkeypatch.setattr(trigger, "server_answers", lambda url: True)
    monkeypatch.setattr(prefect, "get_client", lambda **kwargs: _LoginServer())
    with pytest.raises(PipelineError) as raised:
        trigger.trigger_deployment("impute-table/impute-table", {}, api_url="http://x:1/api")
    said = "none is set" if not login else "PREFECT_API_AUTH_STRING is refused"
    assert f"asks for a login, and {said}: set PREFECT_API_AUTH_STRING=user:password" in str(
        raised.value
    )
