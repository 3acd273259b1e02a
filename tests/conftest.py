"""Shared fixtures: one Prefect test server for the whole run (opt-in; its tests are marked
``e2e``) and small DuckDB warehouses.

Prefect reads its settings when first imported, so the environment is set here, before any test
module imports it: a throw-away PREFECT_HOME, no telemetry, a patient server start; POT is told
not to start JAX.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="tdm-tests-prefect-")
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"
# POT looks for a backend by trying each in turn: called with torch tensors (the tests that check
# our transport against POT's), it starts JAX first where JAX is installed, and JAX then takes 75%
# of the GPU's memory in every test process that gets there, so other workers run out of it.
os.environ.setdefault("POT_BACKEND_DISABLE_JAX", "1")
for _name in [name for name in os.environ if name.startswith("TDM_")]:
    del os.environ[_name]  # the suite sets its own TDM_* values where it tests them
# The pipeline's runs start from column means: the default start (a forest) costs a second or two
# per fit and is the library's to test (tests/tdm); pipeline tests of imputation quality, and
# those of the default itself, take this variable away.
os.environ["TDM_INIT"] = "mean"
# Likewise a short fit: 2,000 steps are the library's to test; a test that needs another count
# sets it.
os.environ["TDM_MAX_ITER"] = "40"

Snapshot = dict[str, tuple[int, int]]

#: The folder of the run's one Prefect test server (its database, URL, process id, log), made by
#: the controlling pytest process and inherited by the pytest-xdist workers.
SERVER_DIR = "TESTS_PREFECT_SERVER_DIR"
CONTROLLER = "TESTS_CONTROLLER_PID"


def auto_device() -> str:
    """The device that ``device="auto"`` (the pipeline's default) resolves to on this machine:
    what lineage and results record for a run that does not name one."""
    from tdm._validation import resolve_device

    return str(resolve_device("auto", "tests"))


def pytest_configure(config: pytest.Config) -> None:
    """The controlling process names the folder of the run's one Prefect server (started by the
    first test that needs it). On pytest-xdist workers (``./dev.sh test``), share the cores
    between the workers: torch's default of one thread per core in every worker oversubscribes
    them, and its idle threads spin."""
    if not hasattr(config, "workerinput"):
        os.environ[SERVER_DIR] = tempfile.mkdtemp(prefix="tdm-tests-server-", dir=_in_memory())
        os.environ[CONTROLLER] = str(os.getpid())
    config.pluginmanager.register(_GroupIds(), "tdm-xdist-group-ids")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses the Prefect test harness starts a Prefect server: it is ``e2e`` too, like
    the ``tdm serve`` and browser tests, so that ``-m "not e2e"`` starts no server at all."""
    for item in items:
        if "prefect_harness" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.e2e)


class _GroupIds:
    """On an xdist worker, a test marked ``xdist_group`` gets its group in the id that pytest
    reports: xdist (3.8) writes ``item._nodeid``, which pytest 9 no longer reads, and its
    ``loadgroup`` scheduler would otherwise spread the group over the workers, each starting
    the group's module fixtures again."""

    @pytest.hookimpl(trylast=True)  # after pytest-xdist's own
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            grouped = item.__dict__.get("_nodeid")
            if isinstance(grouped, str) and grouped != item.nodeid:
                from _pytest.nodeid import coerce_node_id

                item._id = coerce_node_id(grouped)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The controlling process stops the run's Prefect server, if a test started it."""
    if hasattr(config, "workerinput") or SERVER_DIR not in os.environ:
        return
    pid_file = Path(os.environ[SERVER_DIR]) / "pid"
    if pid_file.exists():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(pid_file.read_text()), signal.SIGTERM)
    shutil.rmtree(os.environ[SERVER_DIR], ignore_errors=True)


def _in_memory() -> str | None:
    """A memory-backed folder for the test server's database where there is one (Linux): on
    disk, each commit's sync holds SQLite's lock long enough that concurrent runs meet "database
    is locked", and a state the server answered that way is re-sent, which Prefect then answers
    without the state's data."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


#: The test server's services no test uses (deployments are tested on `tdm serve`'s own server):
#: each polls or writes the database, competing with the runs for its lock and the CPU. Task runs
#: are still recorded (from their events), as the UI and the run tests read them.
_IDLE_SERVICES = [
    f"PREFECT_SERVER_SERVICES_{name}_ENABLED"
    for name in (
        "CANCELLATION_CLEANUP",
        "EVENT_PERSISTER",
        "FOREMAN",
        "LATE_RUNS",
        "PAUSE_EXPIRATIONS",
        "REPOSSESSOR",
        "SCHEDULER",
        "TRIGGERS",
    )
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def migrated_database() -> Path:
    """A Prefect database migrated to the installed Prefect's schema, made once per run (under a
    file lock): a server started on a copy of it skips the migrations, which take it 15-20 s on
    a fresh database."""
    where = Path(os.environ[SERVER_DIR])
    template = where / "template.db"
    with open(where / "template.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.exists():
            made = where / "template-new.db"
            subprocess.run(
                [
                    str(Path(sys.executable).parent / "prefect"),
                    "server",
                    "database",
                    "upgrade",
                    "-y",
                ],
                env={
                    **os.environ,
                    "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{made}",
                },
                capture_output=True,
                check=True,
                timeout=300,
            )
            made.rename(template)
    return template


@pytest.fixture
def prefect_home(tmp_path: Path) -> Path:
    """`tmp_path / "prefect-home"`: a PREFECT_HOME of its own, its database already migrated
    (`migrated_database`), for a test whose `tdm` starts a Prefect server there."""
    return fresh_prefect_home(tmp_path / "prefect-home")


def fresh_prefect_home(home: Path) -> Path:
    """Make `home` a PREFECT_HOME holding a copy of the migrated database; returns it."""
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(migrated_database(), home / "prefect.db")
    return home


def shared_prefect_server() -> str:
    """The API URL of the run's one Prefect server, started by the first caller of any worker
    (under a file lock) and stopped by the controlling process at the end of the run."""
    where = Path(os.environ[SERVER_DIR])
    with open(where / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        url_file = where / "url"
        if url_file.exists():
            return url_file.read_text()
        port = _free_port()
        shutil.copyfile(migrated_database(), where / "prefect.db")
        log = open(where / "server.log", "w")  # noqa: SIM115  (the server writes it until the end)
        command = [
            *(sys.executable, "-m", "uvicorn", "--factory", "prefect.server.api.server:create_app"),
            *("--lifespan", "on", "--host", "127.0.0.1", "--port", str(port)),
        ]
        # The server outlives the worker that starts it, and stops with the controlling process
        # (at its end, or if it is killed): a shell watches that process and the server.
        watch = (
            '"$@" & server=$!; while kill -0 "$CONTROLLER" 2>/dev/null && kill -0 $server '
            "2>/dev/null; do sleep 1; done; kill $server"
        )
        process = subprocess.Popen(
            ["sh", "-c", watch, "sh", *command],
            env={
                **os.environ,
                "CONTROLLER": os.environ[CONTROLLER],
                "PREFECT_UI_ENABLED": "0",
                "PREFECT__SERVER_EPHEMERAL": "1",
                "PREFECT__SERVER_FINAL": "1",
                "PREFECT_SERVER_DATABASE_CONNECTION_URL": (
                    f"sqlite+aiosqlite:///{where / 'prefect.db'}"
                ),
                **dict.fromkeys(_IDLE_SERVICES, "false"),
            },
            stdout=log,
            stderr=log,
            start_new_session=True,  # stopped as a group
        )
        (where / "pid").write_text(str(process.pid))
        import httpx  # here: the library's tests need no pipeline package

        url = f"http://127.0.0.1:{port}/api"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if process.poll() is not None:
                break
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    url_file.write_text(url)
                    return url
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        raise RuntimeError(
            f"the Prefect test server did not start: {(where / 'server.log').read_text()}"
        )


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """This worker's flows run against the run's one Prefect server (started on first use).

    Only tests that run flows should ask for it. Flow-run heartbeats are turned off: each flow
    run would otherwise wait up to a second at its end for the heartbeat thread.
    """
    import prefect.context
    from prefect.settings import PREFECT_API_URL, temporary_settings

    url = shared_prefect_server()
    with (
        temporary_settings(updates={PREFECT_API_URL: url, "flows.heartbeat_frequency": None}),
        prefect.context._temporary_global_settings_context(prefect.context.get_settings_context()),
    ):
        yield
        # Send the logs still queued while the server is there (it stops with the run).
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all(timeout=10)


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Run torch on one CPU thread: tiny fits are several times faster so on a shared CPU."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def build_readings(
    path: Path,
    *,
    table: str = "readings",
    n_rows: int = 80,
    missing_rate: float = 0.2,
    seed: int = 0,
) -> pd.DataFrame:
    """Write a mixed-type table to the DuckDB file `path`; returns the complete data.

    Columns: id (INTEGER key), temperature, pressure, humidity (DOUBLE, correlated), visits
    (INTEGER), site (VARCHAR), day (DATE), ok (BOOLEAN), price (DECIMAL(8,2), never missing).
    """
    import duckdb  # here: the library's tests need no pipeline package

    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n_rows, 2))
    truth = pd.DataFrame(
        {
            "id": np.arange(1, n_rows + 1, dtype=np.int32),
            "temperature": 20 + 5 * latent[:, 0] + rng.normal(0, 0.5, n_rows),
            "pressure": 1000 + 10 * latent[:, 1] + rng.normal(0, 1.0, n_rows),
            "humidity": 50 + 8 * (latent[:, 0] - latent[:, 1]) + rng.normal(0, 1.0, n_rows),
            "visits": np.round(30 + 6 * latent[:, 0]).astype(np.int32),
            "site": rng.choice(["north", "south", "east"], n_rows),
            "day": pd.Timestamp("2024-01-01") + pd.to_timedelta(np.arange(n_rows), unit="D"),
            "ok": rng.random(n_rows) < 0.5,
            "price": np.round(rng.uniform(1, 100, n_rows), 2),
        }
    )
    holed = truth.copy()
    for name in ("temperature", "pressure", "humidity", "visits"):
        holed[name] = holed[name].astype("float64").mask(rng.random(n_rows) < missing_rate)
    with duckdb.connect(str(path)) as con:
        con.register("frame", holed)
        quoted = '"' + table.replace('"', '""') + '"'
        con.execute(
            f"CREATE OR REPLACE TABLE {quoted} AS SELECT id, temperature, pressure, humidity, "
            "CAST(visits AS INTEGER) AS visits, site, CAST(day AS DATE) AS day, ok, "
            "CAST(price AS DECIMAL(8, 2)) AS price FROM frame"
        )
    return truth


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    """A DuckDB file holding the mixed-type table `readings` (80 rows, ~20% missing)."""
    path = tmp_path / "warehouse.duckdb"
    build_readings(path)
    return path


@contextlib.contextmanager
def small_mount(where: Path, size: str = "8m") -> Iterator[Path]:
    """`where` as a tmpfs of `size` bytes (`64k`, `8m`): a disk that fills up (skips the test
    without root and mount)."""
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("mounting a file system needs root on Linux")
    where.mkdir(parents=True, exist_ok=True)
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)]
    ).returncode:
        pytest.skip("mount is not permitted here")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)])


@contextlib.contextmanager
def read_only_mount(where: Path, fill: Callable[[Path], None]) -> Iterator[Path]:
    """`where` as a tmpfs that `fill` writes to and that is then remounted read-only: a place no
    user, root included, can write to (skips the test without root and mount)."""
    with small_mount(where):
        fill(where)
        subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        yield where


@pytest.fixture
def read_only_warehouse(warehouse: Path, tmp_path: Path) -> Iterator[Path]:
    """A copy of the `warehouse` file on a read-only tmpfs (skipped without root and mount)."""

    def copy(where: Path) -> None:
        (where / "w.duckdb").write_bytes(warehouse.read_bytes())

    with read_only_mount(tmp_path / "ro", copy) as where:
        yield where / "w.duckdb"


def snapshot(path: Path) -> Snapshot:
    """Every table of the file (any schema; ``schema.table`` outside main) with its row count
    and a hash of its contents."""
    import duckdb  # here: the library's tests need no pipeline package

    def quoted(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = "
            "current_database()"
        ).fetchall()
        result: Snapshot = {}
        for schema, table in rows:
            frame = con.execute(f"SELECT * FROM {quoted(schema)}.{quoted(table)}").df()
            digest = int(pd.util.hash_pandas_object(frame.astype(str), index=True).sum())
            result[table if schema == "main" else f"{schema}.{table}"] = (len(frame), digest)
    return result


@pytest.fixture
def take_snapshot() -> Callable[[Path], Snapshot]:
    """The `snapshot` helper: tables, row counts and content hashes of a DuckDB file."""
    return snapshot


@pytest.fixture
def make_readings() -> Callable[..., pd.DataFrame]:
    """The `build_readings` helper, to write other variants of the mixed-type table."""
    return build_readings


def prepare_write(
    db_path: Path,
    table: str = "readings",
    *,
    key: str | None = "id",
    max_iter: int = 10,
    columns: list[str] | None = None,
) -> tuple:
    """Run load → validate → standardise → impute → inverse-scale → quality with `task.fn`.

    Returns (source, plan, imputed, lineage): what `write_back` takes. No Prefect server needed.
    """
    from tasks.impute import impute
    from tasks.lineage import LineageRecord, current_run
    from tasks.load import load_table
    from tasks.quality import check_quality
    from tasks.scaling import inverse_scale, standardise
    from tasks.validate import validate_input

    params = {"max_iter": max_iter, "init": "mean"}  # as TDM_INIT above
    source = load_table.fn(str(db_path), table, key)
    plan = validate_input.fn(source, columns, key)
    scaled = standardise.fn(source.frame, plan.columns, table="t")
    outcome = impute.fn(scaled.frame, params, 0, table=table)
    imputed = inverse_scale.fn(outcome.frame, scaled.scaling, source.frame)
    report = check_quality.fn(source, plan, imputed)
    lineage = LineageRecord(
        run=current_run(),
        source=source,
        plan=plan,
        outcome=outcome,
        quality=report,
        seed=0,
        hyperparameters=dict(params),
    )
    return source, plan, imputed, lineage


@pytest.fixture
def steps_before_write() -> Callable[..., tuple]:
    """The `prepare_write` helper: every step up to write-back, run without Prefect."""
    return prepare_write
