"""The Prefect UI shows what an impute-table run publishes: a real server, run, and browser.

A `prefect server start` subprocess (its own PREFECT_HOME), the `tdm impute` command run against
it on a tiny table, then headless Chromium reads the pages an operator would open. Skipped when
no Chromium is installed (`apt-get install chromium`; CI does not install it).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import httpx
import pytest

from deployments.server import local_server
from tasks.artifacts import artifact_key
from tests.api import api_post
from tests.conftest import fresh_prefect_home

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        CHROMIUM is None, reason="no `chromium` binary on PATH (apt-get install chromium)"
    ),
]

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVER_START_SECONDS = 90
FLOW_SECONDS = 120
PAGE_SECONDS = 45
TABLE = "sensor"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server `tdm serve` starts (`deployments.server.local_server`), on a free port other
    than Prefect's 4200 and its own PREFECT_HOME, with no UI address given: the UI must find
    its API on that port by itself. Yields its base URL."""
    home = tmp_path_factory.mktemp("prefect-server")
    port = _free_port()
    with pytest.MonkeyPatch.context() as env:
        for name in [n for n in os.environ if n.startswith("PREFECT_")]:
            env.delenv(name)
        env.setenv("PREFECT_HOME", str(fresh_prefect_home(home)))
        env.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
        with local_server(port, log_path=home / "server.log", startup_timeout=SERVER_START_SECONDS):
            yield f"http://127.0.0.1:{port}"


def _tiny_warehouse(path: Path) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute(
            f'CREATE TABLE "{TABLE}" AS SELECT i AS id, '
            "CASE WHEN i % 5 = 0 THEN NULL ELSE 20 + i * 0.5 END AS temperature, "
            "CASE WHEN i % 7 = 3 THEN NULL ELSE 1000 - i END AS pressure, 'x' AS site "
            "FROM range(24) r(i)"
        )


def _dom(url: str, profile: Path, *expected: str) -> str:
    """The page's DOM once headless Chromium has run its scripts; retried until `expected`."""
    assert CHROMIUM is not None
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        f"--user-data-dir={profile}", "--virtual-time-budget=15000", "--dump-dom", url,
    ]  # fmt: skip
    deadline = time.monotonic() + PAGE_SECONDS
    while True:
        done = subprocess.run(command, capture_output=True, timeout=PAGE_SECONDS, check=False)
        dom = done.stdout.decode("utf-8", "replace")
        if all(text in dom for text in expected) or time.monotonic() > deadline:
            return dom


def test_the_ui_shows_the_report_statistics_and_loss_plot_of_a_run(
    prefect_server: str, tmp_path: Path
) -> None:
    """After `tdm impute`, the run's page lists its artifacts and each one renders its content."""
    db = tmp_path / "w.duckdb"
    _tiny_warehouse(db)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "TDM_"))}
    env |= {
        "PREFECT_API_URL": f"{prefect_server}/api",
        "PREFECT_HOME": str(tmp_path / "prefect-client"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "TDM_MAX_ITER": "60",
        "OMP_NUM_THREADS": "1",
    }
    command = [sys.executable, "-m", "cli.main", "impute", "--db", str(db), "--table", TABLE]
    ran = subprocess.run(
        [*command, "--key", "id", "--torch-threads", "1"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        timeout=FLOW_SECONDS,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr.decode()[-3000:]
    with duckdb.connect(str(db), read_only=True) as con:
        run_id = str(con.execute("SELECT run_id FROM tdm_lineage").fetchall()[0][0])

    found = api_post(
        f"{prefect_server}/api", "/artifacts/filter", {"flow_runs": {"id": {"any_": [run_id]}}}
    ).json()
    ids = {a["key"]: a["id"] for a in found}
    kinds = ("report", "statistics", "loss", "progress")
    keys = {kind: artifact_key(kind, TABLE) for kind in kinds}
    assert set(keys.values()) <= set(ids), sorted(ids)
    assert {a["key"]: a["data"] for a in found}[keys["progress"]] == 100.0

    profile = tmp_path / "chromium"

    def page(path: str, *expected: str) -> str:
        return _dom(f"{prefect_server}{path}", profile, *expected)

    # The run's Artifacts tab lists every artifact by key and description. The V2 UI selects the
    # tab from the address; the default UI resets it to Logs while the run loads.
    listing = page(f"/v2/runs/flow-run/{run_id}?tab=Artifacts", *keys.values())
    for key in keys.values():
        assert key in listing
    assert f"Per-column statistics of {TABLE} before and after imputation" in listing
    assert f"TDM training loss on {TABLE}" in listing

    # Each artifact's own page, in the default UI, renders its content.
    report = page(f"/artifacts/artifact/{ids[keys['report']]}", run_id, f"{TABLE}_imputed")
    assert "Can't connect to Server API" not in report  # the UI found its API on this port
    text = re.sub(r"<[^>]+>", "", report)  # what the page shows, without its markup
    # The verdict comes first, then the checks, passing ones one line per kind.
    verdict = text.index(f"Imputation of {TABLE} → {TABLE}_imputed: passed")
    assert verdict < text.index("Passed:") < text.index("observed cells unchanged: passed")
    assert run_id in report
    assert re.search(r"temperature</code>\s*</td>\s*<td[^>]*>\s*5\s*<", report), report[-3000:]

    statistics = page(f"/artifacts/artifact/{ids[keys['statistics']]}", "shift (sd)")
    headers = ("observed", "shift (sd)", "std", "spread", "max", "pressure")
    assert all(h in statistics for h in headers)

    loss = page(f"/artifacts/artifact/{ids[keys['loss']]}", "<img")
    assert re.search(r'<img[^>]+src="data:image/png;base64,[A-Za-z0-9+/=]{1000,}"', loss)
    assert "Relative transport cost over 60 iterations" in loss
    assert "no better than pairing the rows at random" in loss  # the sentence saying what it means

    # Runs are named after their table and tagged with it and the warehouse file.
    assert f"impute-{TABLE}" in page(f"/runs/flow-run/{run_id}", f"impute-{TABLE}")
    flow_run = httpx.get(f"{prefect_server}/api/flow_runs/{run_id}", timeout=10).json()
    assert flow_run["name"] == f"impute-{TABLE}"
    assert {f"table:{TABLE}", "warehouse:w.duckdb"} <= set(flow_run["tags"])
    tasks = api_post(
        f"{prefect_server}/api", "/task_runs/filter", {"flow_runs": {"id": {"any_": [run_id]}}}
    ).json()
    assert f"write-back-{TABLE}" in {t["name"] for t in tasks}
