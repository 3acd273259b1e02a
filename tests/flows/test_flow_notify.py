"""Failure notifications: one setting (TDM_NOTIFY_URL), a JSON POST to a webhook on loopback."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from uuid import uuid4

import pytest
from prefect.client.schemas.objects import FlowRun
from prefect.states import Crashed

from flows.impute_table import impute_table
from flows.impute_warehouse import impute_warehouse
from flows.notify import failure_summary, notify_failure

pytestmark = pytest.mark.usefixtures("prefect_harness")

FAST = {"max_iter": 5}


class Receiver(HTTPServer):
    """A webhook on 127.0.0.1 that keeps each JSON body it is sent."""

    def __init__(self, status: int = 200) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: list[dict[str, Any]] = []
        self.status = status
        self.location = ""  # where a 3xx status sends the client

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        self.server.bodies.append(json.loads(self.rfile.read(length)))
        self.send_response(self.server.status)
        if self.server.location:
            self.send_header("Location", self.server.location)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep the test's output clean


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"  # nothing listens there any more


@pytest.mark.usefixtures("one_torch_thread")
def test_a_failed_run_posts_its_summary_to_the_webhook(
    warehouse: Path,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The summary names flow, run, table, warehouse, reason and link, with no absolute path;
    the run's log names the webhook's host, not its path (webhook paths hold tokens, run logs are
    shown in the UI)."""
    monkeypatch.setenv("TDM_NOTIFY_URL", receiver.url + "/T000/B000/secret-token")
    state = impute_table("nowhere", db_path=warehouse, return_state=True)

    assert state.is_failed()
    assert len(receiver.bodies) == 1
    body = receiver.bodies[0]
    assert body["flow"] == "impute-table" and body["flow_run"] == "impute-nowhere"
    assert body["flow_run_id"] == str(state.state_details.flow_run_id)
    assert body["state"] == "Failed" and str(warehouse) in state.message
    assert body["reason"] == state.message.replace(f"{warehouse.parent}/", ".../")
    assert body["reason"].startswith('Table "nowhere" does not exist')
    assert str(warehouse.parent) not in json.dumps(body)
    assert body["tables"] == ["nowhere"] and body["warehouse"] == "warehouse.duckdb"
    assert body["url"].endswith(f"/runs/flow-run/{body['flow_run_id']}")
    assert body["text"].startswith("impute-table run 'impute-nowhere' failed: Table \"nowhere\"")
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "notification sent to http://127.0.0.1:" in logged.lower()
    assert "secret-token" not in logged

    impute_table("readings", db_path=warehouse, imputer=FAST)  # a run that succeeds: no POST
    assert len(receiver.bodies) == 1


@pytest.mark.usefixtures("one_torch_thread")
def test_a_warehouse_run_names_every_table_it_was_given(
    warehouse: Path, tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TDM_NOTIFY_URL", receiver.url)
    monkeypatch.setenv("TDM_MAX_ITER", "5")
    config = tmp_path / "nightly.yaml"
    config.write_text(f"db_path: {warehouse}\ntables:\n  - table: readings\n  - table: gone\n")

    state = impute_warehouse(str(config), return_state=True)

    assert state.is_failed()
    (body,) = receiver.bodies
    assert body["flow_run"] == "warehouse-nightly" and body["tables"] == ["readings", "gone"]
    assert body["reason"].startswith("1 of 2 tables failed") and "[gone]" in body["reason"]


def test_a_webhook_that_fails_is_a_warning_never_an_error(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A webhook nobody answers: the hook logs a warning and returns, so the run's state stands."""
    monkeypatch.setenv("TDM_NOTIFY_URL", closed_port_url())
    run = FlowRun(id=uuid4(), flow_id=uuid4(), name="impute-sales", tags=["table:sales"])
    notify_failure(SimpleNamespace(name="impute-table"), run, Crashed(message="x"))
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("failure notification to http://127.0.0.1" in m for m in warned), warned


def test_a_crash_is_notified_and_an_error_status_is_a_warning(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The on_crashed hook (a killed process, an out-of-memory worker) sends the same summary;
    a webhook answering an error status is not counted as delivered."""
    flow = SimpleNamespace(name="impute-table")
    run = FlowRun(  # a run the server does not know: the hook uses the tags it was given
        id=uuid4(), flow_id=uuid4(), name="impute-sales", tags=["table:sales", "warehouse:w.duckdb"]
    )
    crashed = Crashed(message="Execution was cancelled by the runtime environment.")
    monkeypatch.setenv("TDM_NOTIFY_URL", receiver.url)

    notify_failure(flow, run, crashed)

    (body,) = receiver.bodies
    assert body == failure_summary(flow, run, crashed)
    assert body["state"] == "Crashed" and body["tables"] == ["sales"]
    assert body["reason"] == "Execution was cancelled by the runtime environment."

    receiver.status = 500
    notify_failure(flow, run, crashed)
    assert any("was not delivered" in r.getMessage() for r in caplog.records)


def test_a_run_refused_for_an_unknown_variable_is_notified(
    warehouse: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An environment left with a setting of an earlier release fails the run, and its
    webhook is told (bug: the hook read the settings with the same check, and posted nothing)."""
    monkeypatch.setenv("TDM_NOTIFY_URL", receiver.url + "/hook")
    monkeypatch.setenv("TDM_EPSILON", "0.1")
    state = impute_table("readings", db_path=warehouse, return_state=True)
    assert state.is_failed() and "Unknown environment variable TDM_EPSILON" in state.message
    assert len(receiver.bodies) == 1
    assert receiver.bodies[0]["reason"].startswith("Unknown environment variable TDM_EPSILON")


def test_no_setting_no_request(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TDM_NOTIFY_URL", raising=False)
    run = FlowRun(id=uuid4(), flow_id=uuid4(), name="impute-sales")
    notify_failure(SimpleNamespace(name="impute-table"), run, Crashed(message="x"))
    assert receiver.bodies == []


def test_a_mistyped_scheme_or_a_redirect_sends_nothing_and_logs_no_token(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Bug: `htps://.../TOKEN` put the whole URL in a warning (kept in Prefect's database), and
    a 302 from the webhook was followed."""
    flow = SimpleNamespace(name="impute-table")
    run = FlowRun(id=uuid4(), flow_id=uuid4(), name="impute-sales", tags=["table:sales"])
    monkeypatch.setenv("TDM_NOTIFY_URL", "htps://hooks.example.com/T000/secret-token")
    notify_failure(flow, run, Crashed(message="x"))

    elsewhere = Receiver()
    thread = threading.Thread(target=elsewhere.serve_forever, daemon=True)
    thread.start()
    try:
        receiver.status, receiver.location = 302, elsewhere.url
        monkeypatch.setenv("TDM_NOTIFY_URL", f"{receiver.url}/T000/secret-token")
        notify_failure(flow, run, Crashed(message="x"))
    finally:
        elsewhere.shutdown()
        elsewhere.server_close()
        thread.join()
    assert len(receiver.bodies) == 1 and elsewhere.bodies == []  # asked once, not followed
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 2 and all("not delivered" in m for m in warned), warned
    assert "htps://" in warned[0] and "302" in warned[1]
    assert not any("secret-token" in m for m in warned)
