"""What the `tdm` command's logs show on the terminal: how much (`-q`, default, `-v`), and never
a traceback.

- `-q/--quiet`: no log line and no warning, from the command's process or the local Dask
  workers it starts; only the command's result (stdout) and its error paragraph (stderr).
- default: the pipeline's own log lines (what it imputes, the fit's progress, a table that
  failed unexpectedly), Prefect's retry notices (a locked file is waited for) and warnings;
  not Prefect's reports of a failed run or task, nor a foreseen error's records: the command's
  last line says why it failed, once.
- `-v/--verbose`: every log line at Prefect's level (INFO), Prefect's bookkeeping included
  (each task run's state, the temporary server starting).

The filters sit on Prefect's console handler only: the Prefect API, and so the UI, gets every
record whatever the switch. `tdm run` shows a served run's records, read from the API, by the
same rules (`served_log_line`).
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "QUIET",
    "VERBOSE",
    "add_verbosity_flags",
    "quiet_children",
    "served_log_line",
    "show_logs",
]

QUIET, DEFAULT, VERBOSE = -1, 0, 1

_ROOT = Path(__file__).resolve().parents[1]
_OURS = tuple(
    str(_ROOT / package) + os.sep
    for package in ("benchmarks", "cli", "deployments", "flows", "tasks", "tdm", "schemas")
)
_RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")


def add_verbosity_flags(parser: argparse.ArgumentParser) -> None:
    """`-q/--quiet` and `-v/--verbose` (exclusive), as `args.verbosity` (-1, 0 or 1)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-q",
        "--quiet",
        dest="verbosity",
        action="store_const",
        const=QUIET,
        default=DEFAULT,
        help="print only the result and errors (no log lines, no warnings)",
    )
    group.add_argument(
        "-v",
        "--verbose",
        dest="verbosity",
        action="store_const",
        const=VERBOSE,
        help="print every log line, Prefect's own INFO lines too (each task run's state)",
    )


class _Verbosity(logging.Filter):
    """Passes the records the terminal shows at `verbosity` (see the module's docstring)."""

    def __init__(self, verbosity: int) -> None:
        from flows.runs import OUTCOME  # imports Prefect: not before a command runs

        super().__init__()
        self.verbosity = verbosity
        self.outcome = OUTCOME

    def filter(self, record: logging.LogRecord) -> bool:
        if self.verbosity >= VERBOSE:
            return True
        if self.verbosity <= QUIET or getattr(record, self.outcome, False):
            return False
        if os.path.abspath(record.pathname).startswith(_OURS):
            return record.levelno >= logging.INFO
        if record.name in _RUN_LOGGERS:  # Prefect's own lines about a run
            if "- Retry" in str(record.msg):
                return True  # a task retried (a locked file): the wait is worth seeing
            return record.levelno == logging.WARNING  # its failures: the last line says why
        return record.levelno >= logging.WARNING


class _QuietFormatter(logging.Formatter):
    """Wraps a handler's formatter to drop the traceback of expected pipeline errors."""

    def __init__(self, inner: logging.Formatter, quiet: type[BaseException]) -> None:
        super().__init__()
        self.inner = inner
        self.quiet = quiet

    def format(self, record: logging.LogRecord) -> str:
        """Format as the wrapped formatter would, without the traceback of a quiet error."""
        if record.exc_info and isinstance(record.exc_info[1], self.quiet):
            saved = record.exc_info, record.exc_text
            record.exc_info, record.exc_text = None, None
            try:
                return self.inner.format(record)
            finally:
                record.exc_info, record.exc_text = saved
        return self.inner.format(record)


def quiet_children(verbosity: int) -> Callable[[], None]:
    """Under `-q`, the processes this command starts (a local Dask cluster's workers) print no
    log line nor warning either: their Prefect console handler is set to CRITICAL through
    Prefect's logging variable, and Python's warnings off through `PYTHONWARNINGS`, each unless
    the user set it. Returns what puts the environment back."""
    if verbosity > QUIET:
        return lambda: None
    quiet = {_CHILD_CONSOLE: "CRITICAL", _CHILD_WARNINGS: "ignore"}
    added = [name for name in quiet if name not in os.environ]
    for name in added:
        os.environ[name] = quiet[name]

    def restore() -> None:
        for name in added:
            os.environ.pop(name, None)

    return restore


_CHILD_CONSOLE = "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"
_CHILD_WARNINGS = "PYTHONWARNINGS"


def show_logs(verbosity: int) -> None:
    """Make Prefect's console handler show what `verbosity` asks for, and no traceback (the
    error log file keeps them), for the rest of the process: the temporary Prefect server logs
    its stop as the process exits. A later call replaces the verbosity."""
    from prefect.logging.configuration import ensure_logging_setup
    from prefect.logging.handlers import PrefectConsoleHandler

    ensure_logging_setup()
    shown = _Verbosity(verbosity)
    for handler in logging.getLogger().handlers:
        if not isinstance(handler, PrefectConsoleHandler):
            continue
        formatter = handler.formatter
        if formatter is not None and not isinstance(formatter, _QuietFormatter):
            handler.setFormatter(_QuietFormatter(formatter, BaseException))
        for earlier in [f for f in handler.filters if isinstance(f, _Verbosity)]:
            handler.removeFilter(earlier)
        handler.addFilter(shown)


_PREFECT_BOOKKEEPING = (
    "Beginning ",
    "Finished in state ",
    "Running hook ",
    "Hook ",
    "Received non-final state ",
    "Starting flow run process",
    "Tried to set traceparent ",
    "View at ",
    "Created task run ",
    "Executing ",
    "Opening process",
    "Process for flow run ",
    "Completed submission of flow run ",
    "Downloading flow code",
)
"""How Prefect's own INFO records about a run begin: a served run's records, read from the API,
carry no source file to tell them from the pipeline's."""

_TRACEBACK = "Traceback (most recent call last):"


def served_log_line(level: int, message: str, when: str, verbosity: int) -> str | None:
    """How `tdm run` shows one log record of the run it watches (None: not at all): at the
    default verbosity the pipeline's lines, Prefect's retry notices and warnings, not Prefect's
    bookkeeping nor its failure reports (the command's last line says why a run failed); with
    `-v` every record; with `-q` none. Never a traceback: a record is cut where one begins."""
    if verbosity <= QUIET:
        return None
    if verbosity < VERBOSE and (level >= logging.ERROR or message.startswith(_PREFECT_BOOKKEEPING)):
        return None
    text = message.split(_TRACEBACK, 1)[0].rstrip()
    if not text:
        return None
    label = "" if level < logging.WARNING else f"{logging.getLevelName(level)}: "
    first, *rest = text.splitlines()
    return "\n".join([f"{when} {label}{first}", *(f"    {line}" for line in rest)])
