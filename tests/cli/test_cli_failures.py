"""What a user of `tdm` sees when something fails: one paragraph, no traceback, no noise after it;
other tables still written; locks waited for; nothing left running after a SIGKILL.

Where the terminal output is the promise, `tdm` runs as a separate process, as a user would,
against the harness's Prefect server (unless it tests the temporary server itself); the rest call
`cli.main.main` in this process.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from cli.main import main

REPO = Path(__file__).resolve().parents[2]
TDM = [sys.executable, "-m", "cli.main"]


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tdm_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a `tdm` process: the harness's server, its own PREFECT_HOME."""
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"), "OMP_NUM_THREADS": "1"}
    env["PREFECT_API_URL"] = str(PREFECT_API_URL.value())
    env["TDM_MAX_ITER"] = "20"
    env["TDM_TORCH_THREADS"] = "1"
    return {**env, **extra}


def add_blob_keyed_table(db: Path) -> None:
    """A table keyed by a BLOB column (refused clearly since issue 14; `unforeseen_tdm` makes its
    key check fail as an unforeseen error would)."""
    with duckdb.connect(str(db)) as con:
        con.execute(
            "CREATE TABLE blobs AS SELECT ('k' || i)::BLOB AS id, "
            "CASE WHEN i % 5 = 0 THEN NULL ELSE i * 1.0 END AS x, i * 2.0 + i % 3 AS y "
            "FROM range(40) t(i)"
        )


UNFORESEEN = """
import sys
import tasks.validate

checked = tasks.validate._resolve_key

def resolve_key(table, key):
    if table.qualified == "blobs":
        raise TypeError("unhashable type: 'bytearray'")  # as before issue 14
    return checked(table, key)

tasks.validate._resolve_key = resolve_key
from cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def unforeseen_tdm(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`tdm` in which reading the key of table `blobs` raises an error no code foresees."""
    return subprocess.run(
        [sys.executable, "-c", UNFORESEEN, *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def tables_of(db: Path) -> set[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


@pytest.mark.usefixtures("prefect_harness")
def test_an_unexpected_error_is_one_paragraph_with_the_log_path(
    warehouse: Path, tmp_path: Path, take_snapshot: Callable[[Path], dict]
) -> None:
    """Bug: a table keyed by a BLOB column ended `tdm impute` with a 300-line traceback."""
    add_blob_keyed_table(warehouse)
    before, before_hash = take_snapshot(warehouse), file_hash(warehouse)

    run = unforeseen_tdm(
        ["impute", "--db", str(warehouse), "--table", "blobs", "--key", "id"], tdm_env(tmp_path)
    )

    output = run.stdout + run.stderr
    assert run.returncode == 1
    assert "Traceback" not in output and "nanobind" not in output
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("tdm impute: unexpected error: TypeError")
    log = Path(re.search(r"the traceback is in (\S+) \(", last).group(1))
    assert "Traceback" in log.read_text(encoding="utf-8")
    assert take_snapshot(warehouse) == before and file_hash(warehouse) == before_hash


@pytest.mark.usefixtures("prefect_harness")
def test_one_table_s_unexpected_error_does_not_stop_the_others(
    warehouse: Path, tmp_path: Path
) -> None:
    """Bug: one table's unexpected error stopped `tdm warehouse`: no table was written."""
    add_blob_keyed_table(warehouse)
    config = tmp_path / "w.yaml"
    config.write_text(
        "tables:\n  - table: blobs\n    key: id\n  - table: readings\n    key: id\n",
        encoding="utf-8",
    )

    run = unforeseen_tdm(
        ["warehouse", "--config", str(config), "--db", str(warehouse)], tdm_env(tmp_path)
    )

    output = run.stdout + run.stderr
    assert run.returncode == 1
    assert "Traceback" not in output and "nanobind" not in output
    assert "1 of 2 tables failed (the others were written):\n  [blobs] unexpected error" in (
        run.stderr
    )
    log = Path(re.search(r"The tracebacks are in (\S+)\.$", run.stderr.strip()).group(1))
    assert "Traceback" in log.read_text(encoding="utf-8")
    assert "readings_imputed" in tables_of(warehouse) and "blobs_imputed" not in tables_of(
        warehouse
    )


def test_each_warning_is_shown_once_per_command(capsys: pytest.CaptureFixture[str]) -> None:
    """The command's warning display (`configure_warnings`): a warning repeated with the same
    text is shown once, as one line without Python's file, line and code; another text is shown
    too, and `quiet` shows none; the display it replaced is put back after."""
    import warnings

    from cli.errors import configure_warnings

    display = warnings.showwarning
    for quiet, expected in ((False, "warning: drift 1\nwarning: drift 2\n"), (True, "")):
        restore = configure_warnings(quiet=quiet)
        for text in ("drift 1", "drift 1", "drift 2"):
            warnings.showwarning(UserWarning(text), UserWarning, "/somewhere/x.py", 1)
        restore()
        assert capsys.readouterr().err == expected
        assert warnings.showwarning is display


@pytest.mark.usefixtures("prefect_harness")
def test_the_first_step_waits_for_a_lock_released_seconds_later(
    warehouse: Path, tmp_path: Path
) -> None:
    """Bug: count-rows, the first step then, had no retry: a lock released seconds after it
    first failed ended the run at once. (The first step is check-unchanged now.)"""
    code = textwrap.dedent(
        f"""
        import duckdb, time
        con = duckdb.connect({str(warehouse)!r})
        print("locked", flush=True)
        time.sleep(120)
        """
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    log = tmp_path / "tdm.log"
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with log.open("w") as out:
            tdm = subprocess.Popen(
                [*TDM, "impute", "--db", str(warehouse), "--table", "readings"],
                cwd=REPO,
                env=tdm_env(tmp_path),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 90
        while "check-unchanged" not in log.read_text() and time.monotonic() < deadline:
            assert tdm.poll() is None, log.read_text()
            time.sleep(0.2)
        assert "locked by another process" in log.read_text()  # the first try met the lock
        time.sleep(1.0)
    finally:
        holder.kill()  # the lock is released a second after the first try failed
        holder.wait()
    assert tdm.wait(timeout=120) == 0, log.read_text()
    assert "readings_imputed" in tables_of(warehouse)


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("TDM_FILL", "bogus", "variable: TDM_FILL='bogus': Input should be 'point' or 'draw'"),
        ("TDM_DRAWS", "1", "variable: TDM_DRAWS='1': draws is 0 (none) or at least 2"),
        # Bug: accepted, it failed the first night a table was large enough for partitions.
        (
            "TDM_DUCKDB_MEMORY_LIMIT",
            "lots",
            "variable: TDM_DUCKDB_MEMORY_LIMIT='lots': 'lots' is not a DuckDB memory limit",
        ),
        # Bug: named as "imputer settings for table ..." as if the table's fault.
        ("TDM_MAX_ITER", "abc", "The imputer settings of TDM_MAX_ITER are invalid"),
    ],
)
def test_a_bad_environment_variable_is_named_with_its_value(
    warehouse: Path,
    variable: str,
    value: str,
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Bug: the message named the setting (`fill`), not the variable a user never typed as a
    flag, and showed pydantic's "Value error," prefix."""
    monkeypatch.setenv(variable, value)
    digest = hashlib.sha256(warehouse.read_bytes()).hexdigest()
    assert main(["impute", "--db", str(warehouse), "--table", "readings"]) == 2
    err = capsys.readouterr().err
    assert f"error: {'Invalid environment ' * expected.startswith('variable')}{expected}" in err
    assert "Value error" not in err and "Traceback" not in err
    assert hashlib.sha256(warehouse.read_bytes()).hexdigest() == digest


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize(
    "flags",
    [[], ["--dry-run"], ["--incremental", "--key", "id", "--dry-run"]],
    ids=["run", "dry-run", "incremental-dry-run"],
)
def test_a_read_only_file_system_is_refused_before_the_fit(
    read_only_warehouse: Path,
    flags: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Bug: a warehouse on a read-only file system was found only after the whole fit. A dry run
    says so too, as a run would fail there (bug: an incremental dry run did not)."""
    import flows.incremental
    import tasks.impute

    def no_fit(*args: object, **kwargs: object) -> None:
        raise AssertionError("the fit started")  # would end in exit status 1

    monkeypatch.setattr(tasks.impute, "_fit", no_fit)
    monkeypatch.setattr(flows.incremental, "fit_on_runner", no_fit)
    command = ["impute", "--db", str(read_only_warehouse), "--table", "readings", *flags]
    assert main(command) == 2
    assert "cannot be written: it is on a read-only file system" in capsys.readouterr().err


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        status = Path(f"/proc/{pid}/status")
        if status.exists() and "\nState:\tZ" in status.read_text():
            return True  # a zombie: dead, waiting for its new parent to reap it
        time.sleep(0.2)
    return False


@pytest.mark.e2e
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_temporary_prefect_server_dies_with_a_killed_tdm(
    tmp_path: Path, prefect_home: Path, make_readings: Callable[..., pd.DataFrame]
) -> None:
    """Bug: after `kill -9` of `tdm impute`, its temporary Prefect server (uvicorn) ran on."""
    db = tmp_path / "w.duckdb"
    make_readings(db)
    env = tdm_env(tmp_path, TDM_MAX_ITER="100000", PREFECT_HOME=str(prefect_home))
    del env["PREFECT_API_URL"]  # the temporary server of this process
    log = tmp_path / "tdm.log"
    with log.open("w") as out:
        tdm = subprocess.Popen(
            [*TDM, "impute", "--db", str(db), "--table", "readings", "-v"],  # -v: Prefect's lines
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    servers: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while "Beginning flow run" not in log.read_text() and time.monotonic() < deadline:
            assert tdm.poll() is None, log.read_text()
            time.sleep(0.5)
        servers = [
            pid
            for pid in _children(tdm.pid)
            if b"uvicorn" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        assert servers, "no temporary server found"
        os.kill(tdm.pid, signal.SIGKILL)
        tdm.wait()
        assert all(_gone(pid, within=10) for pid in servers)
    finally:
        tdm.kill()
        tdm.wait()
        for pid in servers:  # left running only if the test failed
            if not _gone(pid, within=0.1):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_server_started_by_tdm_serve_dies_with_it() -> None:
    """Bug: `tdm serve`'s Prefect server outlived a `kill -9` of `tdm serve`; the child it starts
    now gets SIGKILL from the kernel when its parent dies."""
    code = textwrap.dedent(
        """
        import subprocess, sys, time
        from deployments.lifeline import die_with_parent
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"],
            start_new_session=True, preexec_fn=die_with_parent(),
        )
        print(child.pid, flush=True)
        time.sleep(60)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    try:
        assert _gone(child, within=10)
    finally:
        if not _gone(child, within=0.1):
            os.kill(child, signal.SIGKILL)


@pytest.mark.usefixtures("prefect_harness")
def test_a_failed_run_whose_state_came_back_without_its_error_is_still_a_clean_failure(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug (seen in CI): when the client re-sent a run's Failed state after losing the server's
    answer, the server's copy came back without the error, Prefect raised FailedRun and `tdm`
    called it an unexpected error (exit status 1)."""
    from prefect.client.orchestration import SyncPrefectClient

    request = SyncPrefectClient.request

    def answer_lost_once(self: SyncPrefectClient, method: Any, path: Any, **kwargs: Any) -> Any:
        state = (kwargs.get("json") or {}).get("state") or {}
        if path.endswith("/set_state") and state.get("type") == "FAILED":
            request(self, method, path, **kwargs)  # accepted; its answer "lost"
        return request(self, method, path, **kwargs)

    monkeypatch.setattr(SyncPrefectClient, "request", answer_lost_once)
    assert main(["impute", "--db", str(warehouse), "--table", "no_such_table"]) == 2
    err = capsys.readouterr().err
    assert "unexpected" not in err
    assert "tdm impute: error: " in err and "no_such_table" in err


def test_a_temporary_server_that_starts_too_late_is_said_so_not_called_a_bug(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: under load, Prefect's temporary server missed its start-up timeout and `tdm` said
    "This is a bug". It is tried once more (the slow one stopped first); failing again, `tdm`
    names the timeout's setting and what to do, and the file is as it was."""
    from prefect.server.api import server
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from tests.tables import file_hash

    starts: list[object] = []

    def late(self: object, *args: object, **kwargs: object) -> None:
        starts.append(self)
        raise RuntimeError(
            "Timed out while attempting to connect to ephemeral Prefect API server. stdout: ..."
        )

    monkeypatch.setattr(server.SubprocessASGIServer, "start", late)
    before = file_hash(warehouse)
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        assert main(["impute", "--db", str(warehouse), "--table", "readings"]) == 1
    err = capsys.readouterr().err
    assert len(starts) == 2 and starts[0] is not starts[1]  # the first stopped, a new one tried
    assert "trying once more" in err and "did not start within" in err and "twice" in err
    assert "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS" in err
    assert "bug" not in err.lower() and "Traceback" not in err
    assert file_hash(warehouse) == before


def test_a_temporary_server_that_starts_on_the_second_try_runs_the_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A busy night: the temporary server misses its start-up time once, and the command runs
    all the same, saying it tried again."""
    import cli.main

    calls: list[str] = []

    def impute(args: object) -> int:
        calls.append("impute")
        if len(calls) == 1:
            raise RuntimeError(
                "Timed out while attempting to connect to ephemeral Prefect API server."
            )
        return 0

    monkeypatch.setattr(cli.main, "_run_impute", impute)
    assert main(["impute", "--table", "readings"]) == 0
    assert calls == ["impute", "impute"]
    assert "trying once more" in capsys.readouterr().err


def test_output_to_a_reader_that_has_gone_ends_the_command_as_its_run_does(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: `tdm impute ... | head -1` wrote the table, then exited 1 calling BrokenPipeError a
    bug. Output after the reader exits is dropped; the run goes on and its status is the
    command's; stdout is put back after."""
    import io

    import cli.main

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has exited
    pipe = io.TextIOWrapper(os.fdopen(write_end, "wb"), line_buffering=True)
    ran: list[str] = []

    def impute(args: object) -> int:
        print("first line")
        print("second line")
        ran.append("to its end")
        return 0

    monkeypatch.setattr(cli.main, "_run_impute", impute)
    monkeypatch.setattr(sys, "stdout", pipe)
    assert main(["impute", "--table", "readings"]) == 0
    assert ran == ["to its end"] and sys.stdout is pipe
    assert capsys.readouterr().err == ""
    pipe.close()  # what it still held went to /dev/null: no BrokenPipeError


def test_ctrl_c_is_one_line_and_exit_status_130(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C during a run: one line saying what it left, exit status 130, no traceback. Bug:
    stopped after the write's commit (while the result was being reported), it said the table
    was as it was; it now reads the lineage and names what was written."""
    import cli.main

    def stop(*args: object) -> None:
        raise KeyboardInterrupt

    impute = ["impute", "-q", "--db", str(warehouse), "--table", "readings", "--key", "id"]
    with monkeypatch.context() as patch:
        patch.setattr(cli.main, "_run_impute", stop)
        digest = file_hash(warehouse)
        assert main(impute) == 130
        err = capsys.readouterr().err
        said = f"tdm impute: interrupted before writing anything to '{warehouse}'."
        assert err == said + "\n"
        assert file_hash(warehouse) == digest
        monkeypatch.chdir(warehouse.parent)
        assert main(["impute", "--table", "readings", "--db", "absent.duckdb"]) == 130
        assert "'absent.duckdb' does not exist" in capsys.readouterr().err

    monkeypatch.setattr(cli.main, "_print_result", stop)
    assert main(impute) == 130
    err = capsys.readouterr().err
    with duckdb.connect(str(warehouse), read_only=True) as con:
        ((run_id,),) = con.execute("SELECT run_id FROM tdm_lineage").fetchall()
    said = f"tdm impute: interrupted. Since it began, tdm_lineage of '{warehouse}' records "
    assert err.startswith(f'{said}"readings_imputed" (run {run_id}) as written;')
    assert err.count("\n") == 1 and "Traceback" not in err
