"""What the user of the `tdm` command sees when something goes wrong: one paragraph.

Expected pipeline errors are printed as they are. Anything else (a bug, or an input nobody
foresaw) is one paragraph naming the error and the log file its traceback was written to; the
console never shows a traceback. Warnings are configured here, at the command's entry point, as
is what happens when the reader of the command's output exits first (`tdm impute ... | head -1`:
the rest of the output is dropped, the run goes on to its own end and exit status), and objects
kept alive by a failed run's traceback are released before the interpreter exits (DuckDB's
bindings list every object still alive at exit).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_UNEXPECTED",
    "ErrorLog",
    "configure_warnings",
    "drop_output_after_closed_pipe",
    "interrupted_message",
]

EXIT_UNEXPECTED = 1
"""Exit status of an unforeseen error (a failed run's own errors exit 2)."""
EXIT_INTERRUPTED = 130
"""Exit status of a command stopped by Ctrl-C (128 + SIGINT, as the shell's)."""


class _UnexpectedTraceback(logging.Filter):
    """Passes the records that carry the traceback of an error not of the `expected` types."""

    def __init__(self, expected: type[BaseException]) -> None:
        super().__init__()
        self.expected = expected

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return error is not None and not isinstance(error, self.expected)


class ErrorLog:
    """The log file of one `tdm` command's tracebacks, created only when one is written.

    It lives in `$PREFECT_HOME/logs` (`~/.prefect/logs` by default; if that cannot be made, a new
    private folder in the temporary directory): every log record with the traceback of an
    unforeseen error goes there, with the traceback the console leaves out.
    """

    def __init__(self, command: str) -> None:
        try:
            from prefect.settings import get_current_settings

            home: Path | None = Path(get_current_settings().home).expanduser() / "logs"
        except Exception:  # no usable Prefect settings: the log must still go somewhere
            home = None
        self._home = home
        self._made_folder = False
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        name = f"tdm-{command}-{stamp}-{os.getpid()}.log"
        self.path = (home or Path(tempfile.gettempdir())) / name  # final once a record is written
        self._handler: logging.FileHandler | None = None

    def _made(self) -> Path:
        """The file's path, its folder made on the first call: `$PREFECT_HOME/logs`, else a new
        private folder in the temporary directory (this user's alone, 0700, a name no one can
        guess, so that the file cannot be a link someone planted)."""
        if not self._made_folder:
            try:
                if self._home is None:
                    raise OSError
                self._home.mkdir(parents=True, exist_ok=True)
            except OSError:
                self.path = Path(tempfile.mkdtemp(prefix="tdm-logs-")) / self.path.name
            self._made_folder = True
        return self.path

    def attach(self, expected: type[BaseException]) -> None:
        """Send every log record with the traceback of an error that is not `expected` (of any
        logger that reaches the root) here."""
        log = self

        class _Handler(logging.FileHandler):
            def _open(self) -> Any:  # the first record: make the folder, then the file
                self.baseFilename = str(log._made())
                return super()._open()

        handler = _Handler(self.path, encoding="utf-8", delay=True)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.addFilter(_UnexpectedTraceback(expected))
        logging.getLogger().addHandler(handler)
        self._handler = handler

    def detach(self) -> None:
        """Stop sending records here (the command is over)."""
        if self._handler is not None:
            logging.getLogger().removeHandler(self._handler)
            self._handler.close()
            self._handler = None

    def write(self, command: str, error: BaseException) -> None:
        """Append `error`'s traceback (the command's own last word)."""
        text = "".join(traceback.format_exception(error))
        with contextlib.suppress(OSError), self._made().open("a", encoding="utf-8") as log:
            log.write(f"{datetime.now(UTC).isoformat()} tdm {command} failed:\n{text}\n")

    def unexpected(self, command: str, error: BaseException) -> str:
        """The paragraph the user sees for an unforeseen `error` (its traceback is logged)."""
        self.write(command, error)
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        what = f"{type(error).__name__}: {reason}" if reason else type(error).__name__
        return (
            f"tdm {command}: unexpected error: {what}. This is a bug in tdm or an input it does "
            f"not handle yet; the traceback is in {self.path} (include it when you report it)."
        )


def configure_warnings(*, quiet: bool = False) -> Callable[[], None]:
    """The command's own warning display: each warning (category and text) once per run, as
    one line `warning: <text>` on stderr (not Python's source file, line and code), or none at
    all when `quiet`.

    A warning raised at each of a run's tables or partitions is shown once. A "once" filter
    cannot do this (Python forgets what it showed whenever a filter changes, as imports and
    `catch_warnings` do); the library leaves filters alone. Returns what puts the previous
    display back."""
    shown: set[tuple[str, str]] = set()
    show = warnings.showwarning

    def show_once(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        key = (category.__qualname__, str(message))
        if not quiet and key not in shown:
            shown.add(key)
            print(f"warning: {message}", file=file or sys.stderr, flush=True)

    warnings.showwarning = show_once

    def restore() -> None:
        warnings.showwarning = show

    return restore


class _PipeOutput:
    """The command's stdout, which drops what is written once its reader has gone."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.closed_pipe = False

    def write(self, text: str) -> int:
        if not self.closed_pipe:
            try:
                self._stream.write(text)
            except BrokenPipeError:
                self._close()
        return len(text)

    def flush(self) -> None:
        if not self.closed_pipe:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._close()

    def _close(self) -> None:
        self.closed_pipe = True
        # What the stream still buffers goes nowhere, also when the interpreter flushes it at exit.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def drop_output_after_closed_pipe() -> Callable[[], None]:
    """From now on, output to stdout after its reader has exited is dropped rather than raising
    `BrokenPipeError`, so the command ends as its run does. Returns what puts stdout back."""
    stream = sys.stdout
    sys.stdout = _PipeOutput(stream)  # type: ignore[assignment]

    def restore() -> None:
        sys.stdout = stream

    return restore


def interrupted_message(
    command: str, db_path: str | None, since: datetime, *, how: str = "interrupted"
) -> str:
    """What `tdm <command>` says when stopped (`how`: "interrupted" by Ctrl-C, or by a
    signal): the tables that `db_path`'s lineage records as written by runs started since
    `since` (each in one transaction, so every other one is as it was; those left unchanged
    are not named), or, when the file
    cannot be read now, where to look."""
    import duckdb

    from schemas.lineage import LINEAGE_TABLE

    said = f"tdm {command}: {how}"
    if db_path is None:
        return f"{said}. Each table is written in one transaction at the end of its run."
    if not Path(db_path).is_file():
        return f"{said} before writing anything: '{db_path}' does not exist."
    try:
        with duckdb.connect(db_path, read_only=True) as con:
            rows = con.execute(
                f"SELECT target_table, run_id FROM {LINEAGE_TABLE} WHERE started_at >= ? "
                "AND status <> 'unchanged' ORDER BY finished_at",
                [since],
            ).fetchall()
    except duckdb.CatalogException:  # no lineage table: nothing was ever written
        rows = []
    except (duckdb.Error, OSError):
        return (
            f"{said}. Each table is written in one transaction at the end of its run; "
            f"'{db_path}' cannot be read now to say which were: its {LINEAGE_TABLE} rows "
            f"started at or after {since.isoformat()} are those."
        )
    if not rows:
        return f"{said} before writing anything to '{db_path}'."
    written = ", ".join(f'"{table}" (run {run})' for table, run in rows)
    return (
        f"{said}. Since it began, {LINEAGE_TABLE} of '{db_path}' records {written} as written; "
        "each table is written in one transaction, so any other is as it was."
    )
