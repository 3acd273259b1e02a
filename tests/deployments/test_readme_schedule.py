"""The README's "Schedule your own tables", followed verbatim: its first code block (write the
table list, set the schedule, `tdm serve`) as terminal 1, its second (`tdm run`) as terminal 2,
in a temporary folder holding a real DuckDB file, on a free port; all but the wait for 03:30."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb
import httpx
import pytest

from tests.conftest import build_readings

REPO = Path(__file__).resolve().parents[2]
SECTION = "## Schedule your own tables"


def readme_blocks() -> list[str]:
    """The bash code blocks of the README's section, in order."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", section, flags=re.S)


def test_the_section_is_two_blocks_serve_then_run() -> None:
    """Terminal 1 serves (its last command), terminal 2 runs; no path of the clone is edited."""
    serve, run = readme_blocks()
    assert serve.strip().splitlines()[-1].startswith("tdm serve ")
    assert run.strip().startswith("tdm run ")
    assert "deployments/" not in serve + run


@pytest.mark.e2e
def test_schedule_your_own_tables_as_the_readme_says(tmp_path: Path) -> None:
    """From a folder with shop.duckdb: the nightly deployment runs the user's tables at 03:30
    Berlin time (said in its description, its next run created by the scheduler), `tdm run`
    imputes `sales` now and prints the run's page, and nothing in the clone changed."""
    serve_block, run_block = readme_blocks()
    build_readings(tmp_path / "shop.duckdb", table="sales", n_rows=40)
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",  # the .venv/bin
        PREFECT_HOME=str(tmp_path / "prefect"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_API_PORT=str(port),  # a free port instead of 4200, for server and client
        PREFECT_RUNNER_POLL_FREQUENCY="1",
        PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS="2",  # create the next runs at once
        TDM_MAX_ITER="30",
        TDM_TORCH_THREADS="1",
    )
    before = _tracked_changes()
    log = tmp_path / "terminal-1.log"
    with log.open("wb") as out:
        terminal_1 = subprocess.Popen(
            ["bash", "-c", serve_block],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        nightly = _wait_served(api, terminal_1, log)
        config = tmp_path / "tables.yaml"
        assert nightly["parameters"] == {"config": str(config)}
        assert nightly["description"] == (
            f"Impute every table listed in {config}, every day at 03:30 (Europe/Berlin)."
        )
        (schedule,) = [item["schedule"] for item in nightly["schedules"]]
        assert (schedule["cron"], schedule["timezone"]) == ("30 3 * * *", "Europe/Berlin")
        next_run = _next_scheduled_run(api, nightly["id"])
        assert next_run.astimezone(ZoneInfo("Europe/Berlin")).strftime("%H:%M") == "03:30"

        terminal_2 = subprocess.run(
            ["bash", "-c", run_block],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        out = terminal_2.stdout
        assert terminal_2.returncode == 0, out + terminal_2.stderr
        assert out.splitlines()[0].startswith("Flow run ")
        assert f"http://127.0.0.1:{port}/runs/flow-run/" in out.splitlines()[0]
        assert "Completed" in out and "`sales` → `sales_imputed`" in out
    finally:
        _stop(terminal_1)
    with duckdb.connect(str(tmp_path / "shop.duckdb"), read_only=True) as con:
        nulls = con.execute("SELECT count(*) FROM sales_imputed WHERE humidity IS NULL").fetchone()
        lineage = con.execute("SELECT deployment_name, key_column FROM tdm_lineage").fetchall()
    assert nulls == (0,)
    assert lineage == [("impute-table", "id")]
    assert _tracked_changes() == before  # the section needs no edit of the clone


def _wait_served(api: str, process: subprocess.Popen[bytes], log: Path) -> dict:
    """The nightly deployment, once both deployments are served."""
    deadline = time.monotonic() + 180
    while True:
        assert process.poll() is None, f"tdm serve exited: {log.read_text()}"
        assert time.monotonic() < deadline, f"not served in time: {log.read_text()}"
        found = {}
        for name in ("impute-warehouse/impute-warehouse", "impute-table/impute-table"):
            with contextlib.suppress(httpx.HTTPError):
                response = httpx.get(f"{api}/deployments/name/{name}", timeout=2)
                if response.status_code == 200 and response.json().get("status") == "READY":
                    found[name] = response.json()
        if len(found) == 2:
            return found["impute-warehouse/impute-warehouse"]
        time.sleep(0.5)


def _next_scheduled_run(api: str, deployment_id: str) -> datetime:
    """The earliest run the server's scheduler created for the deployment."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        response = httpx.post(
            f"{api}/flow_runs/filter",
            json={
                "deployments": {"id": {"any_": [deployment_id]}},
                "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}},
                "sort": "EXPECTED_START_TIME_ASC",
                "limit": 1,
            },
            timeout=10,
        )
        runs = response.json()
        if runs:
            return datetime.fromisoformat(runs[0]["expected_start_time"]).astimezone(UTC)
        time.sleep(1)
    raise AssertionError("the scheduler created no run of the nightly deployment")


def _tracked_changes() -> dict[str, str]:
    """The files a user once had to edit to schedule their tables, and the README itself."""
    names = ("deployments/prefect.yaml", "deployments/warehouse.yaml", "README.md")
    return {name: (REPO / name).read_text(encoding="utf-8") for name in names}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Ctrl-C's effect on terminal 1: `tdm serve` stops serving and its server."""
    for sig, wait in ((signal.SIGTERM, 45.0), (signal.SIGKILL, 5.0)):
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait)
