"""What `tdm` prints with -q, by default and with -v: the result always; the pipeline's own log
lines by default; Prefect's bookkeeping only with -v; nothing else with -q."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cli.console import DEFAULT, QUIET, VERBOSE, _Verbosity, quiet_children, served_log_line
from flows.runs import OUTCOME

REPO = Path(__file__).resolve().parents[2]
PREFECT = Path(logging.__file__).parent  # any file outside the repository


def record(
    name: str, level: int, where: Path, msg: str = "text", outcome: bool = False
) -> logging.LogRecord:
    made = logging.LogRecord(name, level, str(where), 1, msg, (), None)
    if outcome:
        setattr(made, OUTCOME, True)
    return made


OURS_INFO = record("prefect.flow_runs", logging.INFO, REPO / "flows" / "impute_table.py")
ENGINE_INFO = record("prefect.task_runs", logging.INFO, PREFECT / "x.py", "Finished in state %s")
RETRY = record(
    "prefect.task_runs",
    logging.INFO,
    PREFECT / "x.py",
    "Task run failed with %s: %r - Retry %s/%s will start %s",
)
ENGINE_ERROR = record("prefect.task_runs", logging.ERROR, PREFECT / "x.py", "Task run failed")
FORESEEN_ERROR = record(
    "prefect.flow_runs", logging.ERROR, REPO / "flows" / "runs.py", outcome=True
)
DRY_RUN_SUMMARY = record(
    "prefect.flow_runs", logging.INFO, REPO / "flows" / "impute_table.py", outcome=True
)
WARNING = record("py.warnings", logging.WARNING, PREFECT / "x.py")
SERVER_INFO = record("prefect", logging.INFO, PREFECT / "x.py", "Starting temporary server")

SHOWN = {  # record: (quiet, default, verbose)
    "pipeline-info": (OURS_INFO, (False, True, True)),
    "prefect-bookkeeping": (ENGINE_INFO, (False, False, True)),
    "retry-notice": (RETRY, (False, True, True)),
    "prefect-failure-report": (ENGINE_ERROR, (False, False, True)),
    "foreseen-error": (FORESEEN_ERROR, (False, False, True)),
    "dry-run-summary": (DRY_RUN_SUMMARY, (False, False, True)),
    "warning": (WARNING, (False, True, True)),
    "server-start": (SERVER_INFO, (False, False, True)),
}


@pytest.mark.parametrize(("made", "expected"), SHOWN.values(), ids=SHOWN)
def test_each_level_shows_what_it_promises(
    made: logging.LogRecord, expected: tuple[bool, bool, bool]
) -> None:
    shown = tuple(_Verbosity(level).filter(made) for level in (QUIET, DEFAULT, VERBOSE))
    assert shown == expected


SERVED = {  # a served run's record, as `tdm run` reads it from the API: (quiet, default, verbose)
    "pipeline-info": ((logging.INFO, "TDM fit on 't':  10% (30/300 iterations)"), (0, 1, 1)),
    "prefect-bookkeeping": ((logging.INFO, "Finished in state Completed()"), (0, 0, 1)),
    "prefect-hook": ((logging.INFO, "Running hook 'notify_failure' in response to"), (0, 0, 1)),
    "retry-notice": (
        (logging.INFO, "Task run failed with exception: E('x') - Retry 1/3"),
        (0, 1, 1),
    ),
    "failure-report": ((logging.ERROR, 'Table "t" cannot be imputed: ...'), (0, 0, 1)),
    "warning": ((logging.WARNING, "Table 't': imputed spread of column 'c'"), (0, 1, 1)),
}


@pytest.mark.parametrize(("made", "expected"), SERVED.values(), ids=SERVED)
def test_tdm_run_shows_a_served_runs_records_by_the_same_rules(
    made: tuple[int, str], expected: tuple[int, int, int]
) -> None:
    level, message = made
    shown = [served_log_line(level, message, "10:00:00", v) for v in (QUIET, DEFAULT, VERBOSE)]
    assert tuple(int(line is not None) for line in shown) == expected
    for line in filter(None, shown):
        label = "WARNING: " if level == logging.WARNING else "ERROR: " if level > 30 else ""
        assert line == f"10:00:00 {label}{message}"


def test_a_served_record_is_shown_without_its_traceback_its_lines_indented() -> None:
    """Prefect's failure reports carry the traceback in their text: `-v` shows the report, not
    the traceback; a record of several lines keeps them, indented under its time."""
    report = 'Encountered exception: E("x")\nTraceback (most recent call last):\n  File "f.py"'
    assert served_log_line(logging.ERROR, report, "10:00:00", VERBOSE) == (
        '10:00:00 ERROR: Encountered exception: E("x")'
    )
    assert (
        served_log_line(logging.ERROR, "Traceback (most recent call last):\n", "t", VERBOSE) is None
    )
    columns = 'Columns of "t" to impute:\n  "a": 5 cells'
    assert served_log_line(logging.INFO, columns, "10:00:00", DEFAULT) == (
        '10:00:00 Columns of "t" to impute:\n      "a": 5 cells'
    )


def test_quiet_silences_the_consoles_of_child_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """-q sets Prefect's console level and Python's warnings off for the processes a run starts
    (Dask workers; bug: a library warning printed on a worker passed -q, with its source line)
    and puts the environment back; other levels, and a setting the user made, are left
    alone."""
    name, warned = "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "PYTHONWARNINGS"
    monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(warned, raising=False)
    for verbosity in (DEFAULT, VERBOSE):
        quiet_children(verbosity)()
        assert name not in os.environ and warned not in os.environ
    restore = quiet_children(QUIET)
    assert os.environ[name] == "CRITICAL" and os.environ[warned] == "ignore"
    restore()
    assert name not in os.environ and warned not in os.environ
    monkeypatch.setenv(name, "DEBUG")
    monkeypatch.setenv(warned, "default")
    quiet_children(QUIET)()
    assert os.environ[name] == "DEBUG" and os.environ[warned] == "default"


@pytest.mark.usefixtures("prefect_harness")
def test_default_and_verbose_terminal_output(warehouse: Path, tmp_path: Path) -> None:
    """Run as a user would (a process of its own, on the harness's server); -q is run below, on
    the temporary server."""
    from prefect.settings import PREFECT_API_URL

    env = {
        **os.environ,
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "OMP_NUM_THREADS": "1",
        "TDM_MAX_ITER": "20",
        "TDM_TORCH_THREADS": "1",
    }
    args = [sys.executable, "-m", "cli.main", "impute", "--db", str(warehouse)]

    def tdm(*flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*args, "--table", "readings", *flags],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    default = tdm()
    assert default.returncode == 0, default.stderr
    assert default.stdout.startswith("Wrote 'readings_imputed'")
    assert "Flow run 'impute-readings' - Imputing 62 cells in " in default.stderr
    assert "TDM fit on 'readings': 100% (20/20 iterations)" in default.stderr
    assert "Finished in state" not in default.stderr and "Beginning flow run" not in default.stderr

    verbose = tdm("-v", "--seed", "1")  # the same seed would leave the target unchanged
    assert verbose.returncode == 0, verbose.stderr
    assert "Task run 'load-table-readings' - Finished in state Completed()" in verbose.stderr
    assert "Flow run 'impute-readings' - Finished in state Completed()" in verbose.stderr


@pytest.mark.e2e
def test_quiet_hides_the_temporary_server_too(warehouse: Path, prefect_home: Path) -> None:
    """Without PREFECT_API_URL, `tdm` starts a temporary Prefect server and stops it as it
    exits, after the command has returned: -q must hide that line too."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PREFECT_API_")}
    env.update(PREFECT_HOME=str(prefect_home), OMP_NUM_THREADS="1")
    run = subprocess.run(
        [sys.executable, "-m", "cli.main", "impute", "--db", str(warehouse), "--table",
         "readings", "--max-iter", "5", "--torch-threads", "1", "-q", "--dry-run"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("Dry run of 'readings', nothing written")
    assert run.stderr == ""


@pytest.mark.e2e
def test_ctrl_c_in_a_terminal_ends_the_run_at_once_with_exit_130(
    warehouse: Path, prefect_home: Path
) -> None:
    """Bug: a terminal's Ctrl-C (SIGINT to the whole process group) during the fit also
    stopped the temporary Prefect server, so `tdm impute` waited minutes on the dead API and
    ended with "unexpected error: ConnectError" (exit 1). The server now runs in a session of
    its own: the command stops at once, with its one line and exit status 130."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PREFECT_API_")}
    env.update(PREFECT_HOME=str(prefect_home), OMP_NUM_THREADS="1")
    run = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "impute", "--db", str(warehouse), "--table",
         "readings", "--max-iter", "30000", "--torch-threads", "1"],
        cwd=REPO, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a shell's job
    )  # fmt: skip
    assert run.stderr is not None
    for line in run.stderr:  # the fit has started: its first progress line, at 10%
        if "TDM fit on 'readings'" in line:
            break
    started = time.monotonic()
    os.killpg(run.pid, signal.SIGINT)
    err = run.stderr.read()
    assert run.wait(timeout=120) == 130, err
    assert time.monotonic() - started < 60
    assert err.endswith(f"tdm impute: interrupted before writing anything to '{warehouse}'.\n")


def _interrupted_when_it_says(
    handler: str, line: str, grace: float, tmp_path: Path, sig: int = signal.SIGINT
) -> tuple[int, str, float]:
    """`tdm impute` run in a process of its own with ``handler`` (Python source defining
    `handler(args)`) in place of the command's work, sent ``sig`` (a Ctrl-C) once it prints
    ``line``: its exit status, its stderr and the seconds it took to end after the signal."""
    code = textwrap.dedent(handler) + textwrap.dedent(
        f"""
        import sys
        import cli.main

        cli.main._run_handler = handler
        cli.main.INTERRUPT_GRACE_SECONDS = {grace}
        sys.exit(cli.main.main(["impute", "--db", "w.duckdb", "--table", "t", "-q"]))
        """
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("PREFECT_API_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PYTHONPATH=str(REPO))
    run = subprocess.Popen(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert run.stdout is not None and run.stdout.readline().strip() == line
    run.send_signal(sig)
    started = time.monotonic()
    _, err = run.communicate(timeout=120)
    return run.returncode, err, time.monotonic() - started


def test_a_command_that_does_not_stop_after_ctrl_c_is_ended_with_exit_130(tmp_path: Path) -> None:
    """Bug: a Ctrl-C that landed inside an HTTP call to Prefect's API left the connection
    pool's lock held, and the crash report Prefect then sent waited on it for ever (`tdm
    impute` idle 30 minutes after the interrupt). A command that has not stopped a grace
    period after a Ctrl-C is ended, saying so, with exit status 130."""
    handler = """
        import time

        def handler(args):  # as a run stuck after its interrupt
            announced = False
            while True:
                try:  # "running" is said inside: the Ctrl-C that follows it is always caught
                    if not announced:
                        announced = True
                        print("running", flush=True)
                    time.sleep(60)
                except KeyboardInterrupt:
                    pass
        """
    returncode, err, seconds = _interrupted_when_it_says(handler, "running", 1.0, tmp_path)
    assert returncode == 130, err
    assert seconds < 30
    assert "tdm impute: interrupted, and not stopped 1 s later: ended." in err


def test_a_ctrl_c_that_lands_in_a_finaliser_still_ends_the_command_at_once(
    tmp_path: Path,
) -> None:
    """Bug: a Ctrl-C whose KeyboardInterrupt was raised inside a finaliser (`__del__`, a weakref
    callback: Python prints "Exception ignored in" and goes on) was lost, and the command ran on
    until the grace period ended it. Such an interrupt is raised again in the command."""
    handler = """
        import time

        class Slow:
            def __del__(self):
                print("finalising", flush=True)
                time.sleep(60)

        def handler(args):
            Slow()  # collected at once: the Ctrl-C lands in its finaliser
            time.sleep(60)
            return 0
        """
    returncode, err, seconds = _interrupted_when_it_says(handler, "finalising", 40.0, tmp_path)
    assert returncode == 130, err
    assert seconds < 20
    assert err.startswith("tdm impute: interrupted before writing anything"), err
    assert err.count("\n") == 1, err  # not Python's "Exception ignored in" report


def test_a_sigterm_stops_the_command_saying_so_with_exit_143(tmp_path: Path) -> None:
    """Failure injection: a SIGTERM (systemd, `docker stop`, Kubernetes) ended `tdm impute`
    with exit status 143 and not a word, even after it had written a table. It stops as a
    Ctrl-C does, naming what was written."""
    handler = """
        import time

        def handler(args):
            print("running", flush=True)
            time.sleep(60)
            return 0
        """
    returncode, err, seconds = _interrupted_when_it_says(
        handler, "running", 40.0, tmp_path, signal.SIGTERM
    )
    assert returncode == 143, err
    assert seconds < 20
    assert err.startswith("tdm impute: terminated (SIGTERM) before writing anything"), err


def test_a_traceback_log_that_cannot_go_to_prefect_home_goes_to_a_private_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Security review: where $PREFECT_HOME/logs could not be made, the traceback log went to
    a predictable name in the shared temporary directory, which a link planted there under that
    name would have redirected. It goes to a new folder of this user's alone."""
    import tempfile

    from prefect.settings import PREFECT_HOME, temporary_settings

    from cli.errors import ErrorLog

    home = tmp_path / "home"
    home.write_text("a file where the folder should be")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with temporary_settings({PREFECT_HOME: home}):
        log = ErrorLog("impute")
        log.attach(ValueError)
    try:
        assert list(tmp_path.iterdir()) == [home]  # nothing made before a traceback is written
        log.write("impute", KeyError("boom"))
        logging.getLogger("tdm-test").error("failed", exc_info=KeyError("again"))
        assert log.path.parent.parent == tmp_path
        assert log.path.parent.name.startswith("tdm-logs-")
        assert log.path.parent.stat().st_mode & 0o777 == 0o700
        assert "boom" in log.path.read_text() and "again" in log.path.read_text()
        assert len(list(tmp_path.glob("tdm-logs-*"))) == 1
    finally:
        log.detach()
