"""Failures of the warehouse steps: the first error is the one shown, locks and read-only files
are named for what they are, and staging folders of killed runs do not stay behind."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import tasks.write as write_module
from tasks.errors import PipelineError, PipelineInputError, WarehouseBusyError
from tasks.partitions import count_rows
from tasks.retry import RETRIES, RETRY_DELAY_SECONDS, retry_when_busy
from tasks.validate import validate_input
from tasks.warehouse.access import check_writable
from tasks.warehouse.staging import STAGE_PREFIX, make_stage_dir, remove_stale_stages
from tasks.warehouse.tables import connect, register_frame
from tasks.write import TableWriter, WriteMode, write_back

REPO = Path(__file__).resolve().parents[2]


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def hold_lock(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start a process that opens a DuckDB file (read-only or not) and keeps it open."""
    started: list[subprocess.Popen[str]] = []

    def start(db: Path, *, read_only: bool, seconds: float = 60.0) -> subprocess.Popen[str]:
        code = textwrap.dedent(
            f"""
            import duckdb, time
            con = duckdb.connect({str(db)!r}, read_only={read_only!r})
            print("open", flush=True)
            time.sleep({seconds!r})
            """
        )
        process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        started.append(process)
        assert process.stdout is not None and process.stdout.readline().strip() == "open"
        return process

    yield start
    for process in started:
        process.kill()
        process.wait()


def test_register_frame_raises_the_block_s_error_not_the_cleanup_s() -> None:
    """Bug: inside an aborted transaction, unregistering the frame raised "transaction is
    aborted" and replaced the statement's own error."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    con.execute("BEGIN TRANSACTION")
    frame = pd.DataFrame({"id": [1, 1]})
    with (
        pytest.raises(duckdb.ConstraintException, match="duplicate key"),
        register_frame(con, frame, "dupes") as view,
    ):
        con.execute(f"INSERT INTO t SELECT id FROM {view}")
    con.execute("ROLLBACK")
    assert not [r for r in con.execute("SHOW TABLES").fetchall() if r[0].startswith("dupes")]


def test_write_back_shows_the_foreign_key_error_and_leaves_the_file_as_it_was(
    tmp_path: Path,
    steps_before_write: Callable[..., tuple],
    take_snapshot: Callable[[Path], dict],
) -> None:
    """Bug: replacing a target that a FOREIGN KEY points at failed with "Current transaction is
    aborted" (the cleanup's error) instead of the constraint error. The target check now
    refuses it first (before the fit, in a run), naming the referencing table."""
    db = tmp_path / "fk.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE p (id INTEGER PRIMARY KEY, x DOUBLE, y DOUBLE)")
        con.execute(
            "INSERT INTO p SELECT i, CASE WHEN i % 5 = 0 THEN NULL ELSE i END, i * 2 + i % 3 "
            "FROM range(40) t(i)"
        )
        con.execute("CREATE TABLE p_imputed (id INTEGER PRIMARY KEY, x DOUBLE, y DOUBLE)")
        con.execute("CREATE TABLE c (pid INTEGER REFERENCES p_imputed(id), note VARCHAR)")
    source, _, imputed, lineage = steps_before_write(db, "p", key="id", max_iter=5)
    plan = validate_input.fn(source, None, "id", replace_target=True)
    before, before_hash = take_snapshot(db), file_hash(db)

    with pytest.raises(PipelineError) as caught:
        write_back.fn(source, plan, imputed, lineage)

    message = str(caught.value)
    assert "transaction is aborted" not in message
    assert '"p_imputed" would be written anew, but "c" references it' in message
    assert take_snapshot(db) == before and file_hash(db) == before_hash


def test_count_rows_retries_when_the_file_is_locked() -> None:
    """Bug: count-rows, the flows' first step, had no retry, so a lock released seconds later
    failed the run at once."""
    assert count_rows.retries == RETRIES and count_rows.retry_delay_seconds == RETRY_DELAY_SECONDS
    assert count_rows.retry_condition_fn is retry_when_busy


def test_a_read_only_holder_is_not_called_a_writer(
    warehouse: Path, hold_lock: Callable[..., subprocess.Popen[str]]
) -> None:
    """Bug: a process that only reads the file was reported as "writing to it"."""
    reader = hold_lock(warehouse, read_only=True)
    with pytest.raises(WarehouseBusyError) as caught, connect(warehouse, read_only=False):
        pass
    message = str(caught.value)
    assert "writing" not in message and "reading it" in message
    assert f"PID {reader.pid}" in message


def test_a_writing_holder_is_called_a_writer(
    warehouse: Path, hold_lock: Callable[..., subprocess.Popen[str]]
) -> None:
    """A process holding the file read-write is named as writing, whether we read or write."""
    writer = hold_lock(warehouse, read_only=False)
    for read_only in (True, False):
        expected = f"PID {writer.pid}\\), which is writing"
        with (
            pytest.raises(WarehouseBusyError, match=expected),
            connect(warehouse, read_only=read_only),
        ):
            pass


def test_a_file_on_a_read_only_file_system_is_refused_before_any_work(
    read_only_warehouse: Path,
) -> None:
    """Bug: a read-only file system was found only when the fitted result was written."""
    with pytest.raises(PipelineInputError, match="read-only file system"):
        check_writable(read_only_warehouse)
    with (
        pytest.raises(PipelineInputError, match="read-only file system"),
        TableWriter(str(read_only_warehouse), WriteMode.PARTITIONED),
    ):
        pass


@pytest.mark.skipif(
    sys.platform == "win32" or os.geteuid() == 0, reason="root may write a read-only file"
)
def test_a_read_only_file_is_refused_before_any_work(warehouse: Path) -> None:
    """Bug: a read-only file was found only when the fitted result was written."""
    warehouse.chmod(0o444)
    try:
        with pytest.raises(PipelineInputError, match="read-only for this user"):
            check_writable(warehouse)
    finally:
        warehouse.chmod(0o644)


def test_a_file_made_read_only_during_the_fit_is_refused_as_not_written(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failure injection: a file made read-only while the fit ran was refused at the write with
    "nothing was imputed (this is checked before the fit)", though the fit had run. A partitioned
    run's writer, opened before its fit, says nothing was imputed."""
    import tasks.warehouse.access as access

    monkeypatch.setattr(access, "_read_only_file_system", lambda path: True)
    with pytest.raises(PipelineInputError) as raised, TableWriter(str(warehouse), WriteMode.NEW):
        pass
    assert "read-only file system. The imputed table could not be written, so nothing was " in (
        str(raised.value)
    )
    with pytest.raises(PipelineInputError, match="nothing was imputed"):
        TableWriter(str(warehouse), WriteMode.PARTITIONED).__enter__()


def test_a_writable_file_passes_the_check(warehouse: Path) -> None:
    """The check refuses nothing that can be written."""
    check_writable(warehouse)


def test_staging_folder_of_a_killed_run_is_removed_by_the_next(
    warehouse: Path, take_snapshot: Callable[[Path], dict]
) -> None:
    """Bug: a partitioned run killed with SIGKILL left its .tdm-staging-* folder forever."""
    code = textwrap.dedent(
        f"""
        import time
        from tasks.write import TableWriter, WriteMode
        with TableWriter({str(warehouse)!r}, WriteMode.PARTITIONED):
            print("staged", flush=True)
            time.sleep(60)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    killed = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert killed.stdout is not None and killed.stdout.readline().strip() == "staged"
    finally:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
    (stale,) = warehouse.parent.glob(f"{STAGE_PREFIX}*")
    live = make_stage_dir(warehouse.parent)  # owned by this process: not stale
    before = take_snapshot(warehouse)

    with TableWriter(str(warehouse), WriteMode.PARTITIONED):  # the next run
        assert not stale.exists() and Path(live.path).is_dir()
    assert set(warehouse.parent.glob(f"{STAGE_PREFIX}*")) == {Path(live.path)}
    assert remove_stale_stages(warehouse.parent) == []
    assert take_snapshot(warehouse) == before


def test_a_killed_run_s_staging_folder_goes_though_its_pid_is_used_again(warehouse: Path) -> None:
    """Failure injection: a run killed in a container (PID 1 there, as the next run's) left its
    staging folder for ever, since its PID was alive. A folder whose owner file no process
    holds locked is left by a run that is gone, whatever PID it names."""
    stale = warehouse.parent / f"{STAGE_PREFIX}killed"
    stale.mkdir()
    (stale / "owner").write_text(f"{os.getpid()}\n{socket.gethostname()}\n")  # alive: this one
    live = make_stage_dir(warehouse.parent)
    assert not stale.exists()
    assert remove_stale_stages(warehouse.parent) == [] and Path(live.path).is_dir()
    live.remove()
    assert not list(warehouse.parent.glob(f"{STAGE_PREFIX}*"))
    # Another host's run may hold a lock this host cannot see: its folder goes once unchanged
    # for an hour.
    other = warehouse.parent / f"{STAGE_PREFIX}elsewhere"
    other.mkdir()
    (other / "owner").write_text("1\nanother-host\n")
    assert remove_stale_stages(warehouse.parent) == []
    for path in (other / "owner", other):
        os.utime(path, (0, 0))
    assert remove_stale_stages(warehouse.parent) == [other]


def test_a_partitioned_write_on_a_locked_file_says_so_and_leaves_nothing(
    warehouse: Path, hold_lock: Callable[..., subprocess.Popen[str]]
) -> None:
    """Bug: a lock met when a partitioned write opened the file was hidden by an AttributeError
    from the cleanup."""
    hold_lock(warehouse, read_only=False)
    with (
        pytest.raises(WarehouseBusyError, match="writing to it"),
        TableWriter(str(warehouse), WriteMode.PARTITIONED),
    ):
        pass
    assert not list(warehouse.parent.glob(f"{STAGE_PREFIX}*"))


def _write_from_another_process(db: Path) -> None:
    code = f"import duckdb; duckdb.connect({str(db)!r}).execute('CREATE TABLE other (x INT)')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_partitioned_writer_lets_others_read_and_while_released_write(
    warehouse: Path, hold_lock: Callable[..., subprocess.Popen[str]]
) -> None:
    """Bug: a partitioned run held the warehouse for writing from its first read to its commit
    (the fit and every partition: minutes to hours), locking out every other process. It reads
    read-only, so others read too, and opens nothing while released (the fit, the waits)."""
    with TableWriter(str(warehouse), WriteMode.PARTITIONED) as writer:
        hold_lock(warehouse, read_only=True).kill()  # another reader opens it meanwhile
        with writer.released():
            _write_from_another_process(warehouse)
        assert writer.con.execute("SELECT count(*) FROM other").fetchone() == (0,)


def test_a_partitioned_writer_waits_for_a_lock_to_pass_when_it_opens_again(
    warehouse: Path,
    hold_lock: Callable[..., subprocess.Popen[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run that has fitted waits for another process's lock to pass rather than lose its
    work; a lock that outlasts the wait is the lock error (retried by the run-level retries)."""
    monkeypatch.setattr(write_module, "REOPEN_POLL_SECONDS", 0.2)
    with TableWriter(str(warehouse), WriteMode.PARTITIONED) as writer:
        with writer.released():
            holder = hold_lock(warehouse, read_only=False, seconds=1.0)
        assert holder.poll() is not None  # it had to wait for the holder to end
        monkeypatch.setattr(write_module, "REOPEN_WAIT_SECONDS", 0.5)
        with pytest.raises(WarehouseBusyError, match="writing to it"), writer.released():
            hold_lock(warehouse, read_only=False)


def test_a_fitted_table_s_write_back_waits_for_a_lock_to_pass(
    warehouse: Path,
    hold_lock: Callable[..., subprocess.Popen[str]],
    steps_before_write: Callable[..., tuple],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bug: a whole table's write-back gave up after two retries 5 s apart, losing its fit to a
    lock of ten seconds (another job's write); a partitioned run waited 2 minutes. Every write
    now waits as long, and a lock that outlasts the wait is the lock error."""
    source, plan, imputed, lineage = steps_before_write(warehouse, max_iter=5)
    monkeypatch.setattr(write_module, "REOPEN_POLL_SECONDS", 0.2)
    holder = hold_lock(warehouse, read_only=False, seconds=1.0)
    written = write_back.fn(source, plan, imputed, lineage)
    assert holder.poll() is not None  # it had to wait for the holder to end
    assert written.rows == len(source.frame)
    monkeypatch.setattr(write_module, "REOPEN_WAIT_SECONDS", 0.5)
    hold_lock(warehouse, read_only=False)
    with pytest.raises(WarehouseBusyError, match="writing to it"):
        write_back.fn(source, plan, imputed, lineage)
