"""Deployments: prefect.yaml and the warehouse config parse, the entrypoints resolve, the nightly
cron fires when it says, and `tdm serve` + `tdm run` / `prefect deployment run` work end to end."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
import yaml
from prefect import Flow

from deployments.files import WAREHOUSE_CONFIG
from deployments.serve import (
    PREFECT_FILE,
    build_deployments,
    load_flow,
    read_deployment_specs,
    serve_here,
)
from deployments.trigger import TABLE_DEPLOYMENT, trigger_deployment
from flows.impute_table import impute_table
from flows.impute_warehouse import impute_warehouse
from schemas.warehouse import load_warehouse_config
from tasks.errors import PipelineError
from tests.conftest import build_readings

REPO = Path(__file__).resolve().parents[2]
WAREHOUSE_DEPLOYMENT = "impute-warehouse/impute-warehouse"


def test_prefect_yaml_is_what_prefect_deploy_reads() -> None:
    """Both deployments on the process pool, the pull step back to the repository root."""
    from prefect.cli.deploy._models import PrefectYamlModel

    model = PrefectYamlModel.model_validate(yaml.safe_load(PREFECT_FILE.read_text()))
    assert [d.name for d in model.deployments] == ["impute-warehouse", "impute-table"]
    assert {d.work_pool.name for d in model.deployments if d.work_pool} == {"tdm-process"}
    (pull,) = model.pull or []
    assert pull == {
        "prefect.deployments.steps.set_working_directory": {"directory": "{{ repo-root.stdout }}"}
    }
    (build,) = model.build or []
    assert build == {
        "prefect.deployments.steps.run_shell_script": {
            "id": "repo-root",
            "script": "pwd",
            "stream_output": False,
        }
    }


@pytest.mark.parametrize(
    ("name", "flow"),
    [("impute-warehouse", impute_warehouse), ("impute-table", impute_table)],
    ids=["impute-warehouse", "impute-table"],
)
def test_entrypoints_resolve_to_the_flows(
    name: str, flow: Flow[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Imported as modules (tdm serve) or as files from the repository root (prefect deploy),
    each entrypoint is the flow of the deployment's name."""
    from prefect.flows import load_flow_from_entrypoint

    (spec,) = [s for s in read_deployment_specs() if s.name == name]
    assert load_flow(spec.entrypoint) is flow
    monkeypatch.chdir(REPO)
    assert load_flow_from_entrypoint(spec.entrypoint).name == name == flow.name


def test_nightly_schedule_fires_at_two_in_its_timezone() -> None:
    """impute-warehouse: one valid cron schedule, next run 02:00 (UTC) the next night."""
    from prefect.server.schemas.schedules import CronSchedule

    (spec,) = [s for s in read_deployment_specs() if s.name == "impute-warehouse"]
    (schedule,) = spec.schedule_objects()
    assert (schedule.cron, schedule.timezone, schedule.active) == ("0 2 * * *", "UTC", True)
    cron = CronSchedule(cron=str(schedule.cron), timezone=schedule.timezone)
    after = datetime(2026, 3, 28, 12, 30, tzinfo=UTC)
    dates = asyncio.run(cron.get_dates(n=2, start=after))
    assert [d.isoformat() for d in dates] == [
        "2026-03-29T02:00:00+00:00",
        "2026-03-30T02:00:00+00:00",
    ]


def test_served_deployments_take_everything_from_prefect_yaml() -> None:
    """Names, parameters, schedules and tags as in prefect.yaml; source_table required."""
    from prefect.utilities.callables import parameter_schema

    built = {d.name: d for d in build_deployments()}
    assert set(built) == {"impute-warehouse", "impute-table"}
    nightly, adhoc = built["impute-warehouse"], built["impute-table"]
    assert nightly.parameters == {"config": WAREHOUSE_CONFIG}
    assert [s.schedule.cron for s in nightly.schedules] == ["0 2 * * *"]  # type: ignore[union-attr]
    assert nightly.entrypoint == "flows.impute_warehouse.impute_warehouse"
    assert adhoc.schedules == [] and adhoc.parameters == {}
    assert "ad-hoc" in adhoc.tags
    assert parameter_schema(impute_table).required == ["source_table"]


def test_warehouse_config_example_parses() -> None:
    """deployments/warehouse.yaml is a valid config, the one the nightly deployment passes."""
    config = load_warehouse_config(REPO / WAREHOUSE_CONFIG)
    assert config.db_path == "demo/warehouse.duckdb"
    assert [(t.table, t.key, t.target) for t in config.tables] == [
        ("wines", "wine_id", "wines_nightly")
    ]
    assert config.tables[0].imputer == {"max_iter": 2000}


def test_bad_prefect_yaml_names_the_file_and_field(tmp_path: Path) -> None:
    """A deployment without an entrypoint is refused with the file and the field named."""
    bad = tmp_path / "prefect.yaml"
    bad.write_text("deployments:\n  - name: x\n")
    with pytest.raises(PipelineError, match=r"prefect\.yaml.*entrypoint"):
        read_deployment_specs(bad)


def test_serve_against_an_unreachable_api_is_a_clear_error() -> None:
    """With PREFECT_API_URL set, `tdm serve` serves there and starts no server of its own."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    url = f"http://127.0.0.1:{_free_port()}/api"
    with (
        temporary_settings({PREFECT_API_URL: url}),
        pytest.raises(PipelineError, match=re.escape(url)),
    ):
        serve_here()


# End to end: `tdm serve` in a subprocess with its own server, runs triggered from outside.


@dataclass(frozen=True)
class Served:
    process: subprocess.Popen[bytes]
    output: Path
    api_url: str
    db: Path
    env: dict[str, str]  # for clients: PREFECT_API_URL set
    tmp: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`tdm serve --port <free>` on a tiny warehouse (30 iterations), ready to take runs."""
    tmp = tmp_path_factory.mktemp("served")
    db = tmp / "warehouse.duckdb"
    build_readings(db, n_rows=40)
    build_readings(db, table="other", n_rows=40, seed=1)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(
        PREFECT_HOME=str(tmp / "prefect"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        TDM_DB_PATH=str(db),
        TDM_MAX_ITER="30",
        TDM_TORCH_THREADS="1",
        OMP_NUM_THREADS="1",
        PREFECT_RUNNER_POLL_FREQUENCY="1",  # pick runs up within a second, not ten
    )
    output = tmp / "serve.log"
    with output.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "serve", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    api_url = f"http://127.0.0.1:{port}/api"
    server_pid: int | None = None
    try:
        deadline = time.monotonic() + 150
        while not _all_ready(api_url, [TABLE_DEPLOYMENT, WAREHOUSE_DEPLOYMENT]):
            server_pid = server_pid or _child_pid(process.pid)
            assert process.poll() is None, f"tdm serve exited: {output.read_text()}"
            assert time.monotonic() < deadline, f"not served in time: {output.read_text()}"
            time.sleep(0.5)
        yield Served(process, output, api_url, db, {**env, "PREFECT_API_URL": api_url}, tmp)
    finally:
        _stop(process)
        if server_pid is not None and _answers(api_url):  # `tdm serve` failed to stop it
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server_pid, signal.SIGKILL)


@pytest.mark.e2e
def test_tdm_run_imputes_through_the_served_deployment(served: Served) -> None:
    """`tdm run` exits 0, prints the final state and report; target and lineage are written."""
    run = _command(served, "cli.main", "run", "readings", "--key", "id", "--target", "served")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Completed" in run.stdout and "`readings` → `served`" in run.stdout
    with duckdb.connect(str(served.db), read_only=True) as con:
        nulls = con.execute("SELECT count(*) FROM served WHERE temperature IS NULL").fetchall()
        lineage = con.execute(
            "SELECT flow_name, deployment_name, key_column, n_iter FROM tdm_lineage "
            "WHERE target_table = 'served'"
        ).fetchall()
    assert nulls == [(0,)]
    assert lineage == [("impute-table", "impute-table", "id", 30)]


@pytest.mark.e2e
def test_prefect_deployment_run_works_too(served: Served) -> None:
    """`prefect deployment run 'impute-table/impute-table' -p source_table=... --watch`."""
    run = _command(
        served,
        "prefect",
        "deployment",
        "run",
        TABLE_DEPLOYMENT,
        "-p",
        "source_table=other",
        "-p",
        'columns=["temperature", "humidity"]',
        "--watch",
        "--watch-interval",
        "1",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    with duckdb.connect(str(served.db), read_only=True) as con:
        row = con.execute(
            "SELECT deployment_name, columns_imputed FROM tdm_lineage "
            "WHERE target_table = 'other_imputed'"
        ).fetchall()
    assert [(name, json.loads(columns)) for name, columns in row] == [
        ("impute-table", ["temperature", "humidity"])
    ]


@pytest.mark.e2e
def test_warehouse_deployment_imputes_every_listed_table(served: Served) -> None:
    """impute-warehouse with a two-table config: both targets and lineage rows written."""
    config = served.tmp / "warehouse.yaml"
    config.write_text(
        "tables:\n"
        "  - {table: readings, key: id, target: readings_nightly}\n"
        "  - {table: other, target: other_nightly, imputer: {max_iter: 20}}\n"
    )
    run = trigger_deployment(WAREHOUSE_DEPLOYMENT, {"config": str(config)}, api_url=served.api_url)
    assert (run.state, run.succeeded) == ("Completed", True), run.message
    assert len(run.reports) == 2
    with duckdb.connect(str(served.db), read_only=True) as con:
        rows = con.execute(
            "SELECT target_table, deployment_name, n_iter FROM tdm_lineage "
            "WHERE flow_name = 'impute-warehouse' ORDER BY target_table"
        ).fetchall()
    assert rows == [
        ("other_nightly", "impute-warehouse", 20),
        ("readings_nightly", "impute-warehouse", 30),
    ]


@pytest.mark.e2e
def test_a_failed_run_exits_1_with_the_reason(served: Served) -> None:
    """A run that fails: exit 1, the state message names the table and why."""
    missing = served.tmp / "missing.duckdb"
    run = _command(served, "cli.main", "run", "sales", "--db", str(missing))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Failed" in run.stdout
    assert "sales" in run.stderr or str(missing) in run.stderr


@pytest.mark.e2e
def test_unknown_deployment_and_gpu_limit(served: Served) -> None:
    """No such deployment: a clear error; `tdm serve` created the `gpu` limit with one slot."""
    from prefect import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with pytest.raises(PipelineError, match=r"no deployment 'impute-table/nightly'.*tdm serve"):
        trigger_deployment("impute-table/nightly", {}, api_url=served.api_url)
    with (
        temporary_settings({PREFECT_API_URL: served.api_url}),
        get_client(sync_client=True) as client,
    ):
        assert client.read_concurrency_limit_by_tag("gpu").concurrency_limit == 1


@pytest.mark.e2e
def test_prefect_deploy_puts_both_on_the_work_pool(served: Served) -> None:
    """`prefect deploy --all --prefect-file ...` from the repository root (deployments renamed
    here, not to replace the served ones): on the pool, the schedule kept, runs moved to the
    repository root."""
    renamed = yaml.safe_load(PREFECT_FILE.read_text())
    for entry in renamed["deployments"]:
        entry["name"] = f"pool-{entry['name']}"
    prefect_file = served.tmp / "prefect.yaml"
    prefect_file.write_text(yaml.safe_dump(renamed))
    pool = _command(served, "prefect", "work-pool", "create", "tdm-process", "--type", "process")
    assert pool.returncode == 0, pool.stdout + pool.stderr
    deploy = _command(served, "prefect", "deploy", "--all", "--prefect-file", str(prefect_file))
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr
    from prefect import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with (
        temporary_settings({PREFECT_API_URL: served.api_url}),
        get_client(sync_client=True) as client,
    ):
        nightly = client.read_deployment_by_name("impute-warehouse/pool-impute-warehouse")
        adhoc = client.read_deployment_by_name("impute-table/pool-impute-table")
    assert (nightly.work_pool_name, adhoc.work_pool_name) == ("tdm-process", "tdm-process")
    assert nightly.entrypoint == "flows/impute_warehouse.py:impute_warehouse"
    assert [s.schedule.cron for s in nightly.schedules] == ["0 2 * * *"]  # type: ignore[union-attr]
    assert adhoc.pull_steps == [
        {"prefect.deployments.steps.set_working_directory": {"directory": str(REPO)}}
    ]


@pytest.mark.e2e
def test_sigterm_stops_serving_and_the_server(served: Served) -> None:
    """SIGTERM: `tdm serve` stops serving, stops its server and exits cleanly."""
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(timeout=45) == 0, served.output.read_text()
    assert not _answers(served.api_url)


def _command(served: Served, module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        env=served.env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(api_url: str) -> bool:
    try:
        return httpx.get(f"{api_url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _all_ready(api_url: str, names: list[str]) -> bool:
    """Whether every deployment exists and a runner has polled it."""
    for name in names:
        try:
            response = httpx.get(f"{api_url}/deployments/name/{name}", timeout=2)
        except httpx.HTTPError:
            return False
        if response.status_code != 200 or response.json().get("status") != "READY":
            return False
    return True


def _child_pid(pid: int) -> int | None:
    """The first child of `pid` (Linux), to clean up after a `tdm serve` that went wrong."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def _stop(process: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 5.0)):
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait)
