"""`tdm serve` and `tdm run`: the errors a user meets before any server runs, and what the
commands pass on and print (with the trigger replaced)."""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from uuid import uuid4

import pytest

from cli.main import main


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_run_without_a_server_says_to_start_tdm_serve(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`tdm run` never falls back to an ephemeral API: no server, exit 2 and what to do."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: f"http://127.0.0.1:{_free_port()}/api"}):
        assert main(["run", "readings"]) == 2
    err = capsys.readouterr().err
    assert "No Prefect server answers" in err and "tdm serve" in err


def test_serve_on_a_busy_port_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    """`tdm serve --port P` with P taken: exit 2, naming the port and the way out."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with socket.socket() as taken, temporary_settings(restore_defaults={PREFECT_API_URL}):
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"Port {port}" in err and "--port" in err and "PREFECT_API_URL" in err


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--max-iter", "-3"], "--max-iter: expected a whole number, 0 or more; got '-3'"),
        (["--max-iter", "x"], "--max-iter: expected a whole number, 0 or more; got 'x'"),
        (["--draws", "1"], "--draws: expected 0 (no draws) or at least 2 (one draw gives no"),
        (["--draws", "-2"], "--draws: expected 0 (no draws) or at least 2"),
    ],
    ids=["negative", "text", "one-draw", "negative-draws"],
)
def test_run_refuses_a_setting_out_of_range_before_any_run(
    flags: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tdm run TABLE --max-iter -3` is a usage error (exit 2) naming the flag and the value
    (0, the start alone, is the library's and `tdm impute`'s too);
    so is `--draws 1` (bug: it started a flow run that failed, and notified of the failure)."""
    with pytest.raises(SystemExit) as stopped:
        main(["run", "readings", *flags])
    assert stopped.value.code == 2
    assert f"argument {expected}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "expected"),
    [([], None), (["--replace-target"], True), (["--no-replace-target"], False)],
    ids=["unset", "replace", "no-replace"],
)
def test_run_passes_replace_target_only_when_given(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], expected: bool | None
) -> None:
    """`tdm run --replace-target` reaches the deployment's `replace_target` parameter; left out,
    the parameter is not sent, so the serving process's TDM_REPLACE_TARGET applies."""
    sent = _record_triggers(monkeypatch)
    assert main(["run", "readings", "--no-wait", *flags]) == 0
    assert sent[0].get("replace_target") == expected
    assert ("replace_target" in sent[0]) == (expected is not None)
    assert "pass_through" not in sent[0]
    assert main(["run", "readings", "--no-wait", "--pass-through", "site,note"]) == 0
    assert sent[1]["pass_through"] == ["site", "note"]


def _refused_serve(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run `tdm serve ...` with no PREFECT_API_URL; it must be refused (exit 2) before any
    server starts. Returns stderr."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        assert main(["serve", "--port", str(_free_port()), *argv]) == 2
    return capsys.readouterr().err


def test_serve_refuses_a_missing_config_before_starting_a_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tdm serve --config FILE` with no such file: one paragraph naming it, exit 2."""
    err = _refused_serve(["--config", str(tmp_path / "tables.yaml")], capsys)
    assert f"'{tmp_path / 'tables.yaml'}' does not exist" in err
    assert "Starting a Prefect server" not in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--schedule-timezone", "Mars/Olympus"], "'Mars/Olympus' (--schedule-timezone"),
        (["--schedule-cron", "every night"], "invalid schedule"),
        (["--torch-threads", "-1"], "invalid setting: torch_threads"),
    ],
    ids=["timezone", "cron", "threads"],
)
def test_serve_refuses_bad_settings(
    flags: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad time zone, cron or thread count: exit 2 naming it, no server started."""
    assert expected in _refused_serve(flags, capsys)


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:8765/hook/secret", "hooks.example/secret"])
def test_serve_refuses_a_notification_url_it_could_not_post_to(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: a TDM_NOTIFY_URL that is not http(s) was found only when the first run failed, at
    night. Refused at start, without naming the URL's path (it may hold a token)."""
    monkeypatch.setenv("TDM_NOTIFY_URL", url)
    err = _refused_serve([], capsys)
    assert "TDM_NOTIFY_URL must be an http:// or https:// URL" in err and "secret" not in err
    assert "Starting a Prefect server" not in err


def test_serve_refuses_a_database_file_that_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: `tdm serve --db nope.duckdb` served, and every run would have failed at night."""
    err = _refused_serve(["--db", str(tmp_path / "nope.duckdb")], capsys)
    assert "nope.duckdb' (--db or TDM_DB_PATH) does not exist" in err
    assert not (tmp_path / "nope.duckdb").exists()


def test_serve_settings_flag_beats_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Flags beat TDM_* variables, which beat prefect.yaml; --db is made absolute; the torch
    threads come from TDM_TORCH_THREADS when no flag is given."""
    import deployments.serve as serve

    seen: list[dict] = []
    monkeypatch.setattr(serve, "serve_here", lambda **kwargs: seen.append(kwargs))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TDM_SCHEDULE_CRON", "0 1 * * *")
    monkeypatch.setenv("TDM_SCHEDULE_TIMEZONE", "Asia/Tokyo")
    monkeypatch.setenv("TDM_TORCH_THREADS", "3")
    assert main(["serve", "--schedule-cron", "0 4 * * *", "--db", "shop.duckdb"]) == 0
    (kwargs,) = seen
    settings = kwargs["settings"]
    assert (settings.schedule_cron, settings.schedule_timezone) == ("0 4 * * *", "Asia/Tokyo")
    assert kwargs["db_path"] == tmp_path / "shop.duckdb"
    assert kwargs["torch_threads"] == 3
    assert main(["serve", "--torch-threads", "0"]) == 0
    assert seen[1]["torch_threads"] == 0


@pytest.mark.parametrize("value", ["0", "-5", "soon"])
def test_run_refuses_a_timeout_that_is_not_positive(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tdm run --timeout 0` is a usage error naming the flag."""
    with pytest.raises(SystemExit) as stopped:
        main(["run", "readings", "--timeout", value])
    assert stopped.value.code == 2
    assert "argument --timeout: expected a positive number of seconds" in capsys.readouterr().err


REPORTS = ("# Imputation of `readings`\n\n| column | cells imputed |\n|---|---:|\n\n## Run",)


LOGGED = datetime(2026, 1, 1, 10, 0, 2, tzinfo=UTC)
LOGS = ((20, "TDM fit on 'readings': 10%"), (20, "Finished in state Completed()"))


def _fake_trigger(
    monkeypatch: pytest.MonkeyPatch, *, timed_out: bool, state: str, final: bool
) -> list[dict]:
    """Replace the trigger: it announces the run, reports two states, returns as told."""
    import deployments.trigger as trigger

    calls: list[dict] = []

    def fake(name: str, parameters: dict, **kwargs: Any) -> trigger.TriggeredRun:
        calls.append(kwargs)
        run_id = uuid4()
        kwargs["on_created"](trigger.CreatedRun(run_id, "r", name, f"http://ui/runs/{run_id}"))
        kwargs["progress"]("10:00:00 Scheduled")
        kwargs["progress"]("10:00:01 Running")
        for level, message in LOGS:
            kwargs["on_log"](SimpleNamespace(timestamp=LOGGED, level=level, message=message))
        return trigger.TriggeredRun(
            id=run_id, name="r", deployment=name, state=state, message=None, final=final,
            succeeded=final, url=f"http://ui/runs/{run_id}", reports=REPORTS if final else (),
            timed_out=timed_out,
        )  # fmt: skip

    monkeypatch.setattr(trigger, "trigger_deployment", fake)
    return calls


def test_run_prints_the_address_first_then_each_state(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run's UI page comes before any wait; each state change follows as it happens; then
    the whole report (bug: it stopped before its first table). The run is named as the flow
    names it (bug: a random name)."""
    calls = _fake_trigger(monkeypatch, timed_out=False, state="Completed", final=True)
    assert main(["run", "readings"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("Flow run 'r' of impute-table/impute-table: http://ui/runs/")
    fitting = f"  {LOGGED.astimezone():%H:%M:%S} TDM fit on 'readings': 10%"  # not Prefect's
    assert lines[1:4] == ["  10:00:00 Scheduled", "  10:00:01 Running", fitting]
    assert lines[4].startswith("Flow run 'r' of impute-table/impute-table: Completed.")
    assert out.endswith(f"\n\n{REPORTS[0]}\n")
    assert calls[0]["timeout"] is None and calls[0]["wait"] is True
    assert calls[0]["run_name"] == "impute-readings"


def test_run_quiet_prints_the_address_and_the_result_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tdm run -q`: neither the states nor the run's log lines, still its page and report."""
    _fake_trigger(monkeypatch, timed_out=False, state="Completed", final=True)
    assert main(["run", "readings", "-q"]) == 0
    out = capsys.readouterr().out
    first, second = out.splitlines()[:2]
    assert first.startswith("Flow run 'r' of impute-table/impute-table: http://ui/runs/")
    assert second.startswith("Flow run 'r' of impute-table/impute-table: Completed.")
    assert out.endswith(f"\n\n{REPORTS[0]}\n")


def test_run_past_its_timeout_exits_124_saying_it_cancelled(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--timeout reaches the trigger; a timed-out run: exit 124, and says it was cancelled."""
    calls = _fake_trigger(monkeypatch, timed_out=True, state="Cancelling", final=False)
    assert main(["run", "readings", "--timeout", "2.5"]) == 124
    assert calls[0]["timeout"] == 2.5
    err = capsys.readouterr().err
    assert "stopped waiting after 2.5 s (--timeout) and cancelled the run (now Cancelling)" in err


def test_torch_threads_setting_flag_then_environment_then_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One setting for every entry point: the flag, else TDM_TORCH_THREADS, else the default;
    0 leaves torch's own thread count."""
    import torch

    from cli.arguments import limit_torch_threads, torch_threads_setting
    from flows.settings import PipelineSettings

    assert torch_threads_setting(None) == PipelineSettings.model_fields["torch_threads"].default
    monkeypatch.setenv("TDM_TORCH_THREADS", "2")
    assert (torch_threads_setting(None), torch_threads_setting(1)) == (2, 1)
    before = torch.get_num_threads()
    limit_torch_threads(0)
    assert torch.get_num_threads() == before


def test_run_passes_incremental_settings_only_when_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """`tdm run --incremental --watermark COL --refit` reaches the deployment's incremental,
    watermark and refit parameters; left out, none of them is sent."""
    sent = _record_triggers(monkeypatch)
    assert main(["run", "readings", "--no-wait"]) == 0
    assert not {"incremental", "watermark", "refit"} & set(sent[0])
    flags = ["--incremental", "--watermark", "loaded_at", "--refit"]
    assert main(["run", "readings", "--no-wait", *flags]) == 0
    assert sent[1] | {"source_table": "readings"} == {
        "source_table": "readings",
        "incremental": True,
        "watermark": "loaded_at",
        "refit": True,
    }


def _record_triggers(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Replace `trigger_deployment` by a stub that records each run's parameters (returned)."""
    import deployments.trigger as trigger

    sent: list[dict] = []

    def fake_trigger(name: str, parameters: dict, **kwargs: object) -> trigger.TriggeredRun:
        sent.append(parameters)
        return trigger.TriggeredRun(
            id=uuid4(), name="r", deployment=name, state="Scheduled", message=None,
            final=False, succeeded=False, url="u", reports=(),
        )  # fmt: skip

    monkeypatch.setattr(trigger, "trigger_deployment", fake_trigger)
    return sent


def test_a_state_message_shows_a_foreseen_error_in_its_own_words() -> None:
    """`tdm run` prints a raised foreseen error (a locked warehouse, raised for the run's
    retries) without Prefect's preamble and the class name; an unforeseen error keeps both, as
    its kind is news; any other message is printed as it is."""
    from deployments.trigger import state_message

    raised = "Flow run encountered an exception: "
    locked = "Database file 'w.duckdb' is locked by another process (PID 7), which is writing."
    assert state_message(f"{raised}WarehouseBusyError: {locked}") == locked
    assert state_message(f"{raised}ZeroDivisionError: division by zero") == (
        f"{raised}ZeroDivisionError: division by zero"
    )
    assert state_message("All states completed.") == "All states completed."
