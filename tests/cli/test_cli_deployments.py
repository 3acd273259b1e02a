"""`tdm serve` and `tdm run`: the errors a user meets before any server runs."""

from __future__ import annotations

import socket
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


@pytest.mark.parametrize("flags", [["--max-iter", "0"], ["--max-iter", "x"]], ids=["zero", "text"])
def test_run_refuses_a_max_iter_that_is_not_a_positive_number(
    flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`tdm run TABLE --max-iter 0` is a usage error (exit 2) naming the flag and the value."""
    with pytest.raises(SystemExit) as stopped:
        main(["run", "readings", *flags])
    assert stopped.value.code == 2
    assert f"argument --max-iter: expected a positive whole number; got '{flags[1]}'" in (
        capsys.readouterr().err
    )


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
    import deployments.trigger as trigger

    sent: list[dict] = []

    def fake_trigger(name: str, parameters: dict, **kwargs: object) -> trigger.TriggeredRun:
        sent.append(parameters)
        return trigger.TriggeredRun(
            id=uuid4(), name="r", deployment=name, state="Scheduled", message=None,
            final=False, succeeded=False, url="u", reports=(),
        )  # fmt: skip

    monkeypatch.setattr(trigger, "trigger_deployment", fake_trigger)
    assert main(["run", "readings", "--no-wait", *flags]) == 0
    assert sent[0].get("replace_target") == expected
    assert ("replace_target" in sent[0]) == (expected is not None)
