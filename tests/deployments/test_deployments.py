"""Deployments: prefect.yaml and the warehouse config parse, the entrypoints resolve, the nightly
cron fires when it says, and `tdm serve` + `tdm run` / `prefect deployment run` work end to end,
served as the README's "Schedule your own tables" says."""

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
from zoneinfo import ZoneInfo

import duckdb
import httpx
import pytest
import yaml
from prefect import Flow

from deployments.files import PREFECT_FILE, WAREHOUSE_CONFIG
from deployments.nightly import ServeSettings, nightly_spec, with_settings
from deployments.serve import (
    TagLimit,
    _print_banner,
    build_deployments,
    drop_replaced_schedules,
    leftover_runs,
    load_flow,
    refuse_work_pool_deployments,
    serve_here,
)
from deployments.server import _stop as stop_process_group
from deployments.specs import read_deployment_specs
from deployments.trigger import TABLE_DEPLOYMENT, CreatedRun, trigger_deployment
from flows.impute_table import impute_table
from flows.impute_warehouse import impute_warehouse
from schemas.warehouse import load_warehouse_config
from tasks.errors import PipelineError
from tests.api import api_post
from tests.conftest import build_readings, fresh_prefect_home

REPO = Path(__file__).resolve().parents[2]
WAREHOUSE_DEPLOYMENT = "impute-warehouse/impute-warehouse"
RUN_STATES = {  # the states `tdm run` prints as they come
    "Scheduled", "Late", "Pending", "Submitting", "Running", "Retrying", "AwaitingRetry",
    "Completed", "Failed", "Crashed", "Cancelling", "Cancelled", "Paused", "Suspended",
}  # fmt: skip

# One worker runs this module (`./dev.sh test`'s loadgroup scheduler): `served` starts once.
pytestmark = pytest.mark.xdist_group("served")


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
    with pytest.raises(PipelineError, match=r"deployment 1 \(x\) in '.*prefect\.yaml': entrypoint"):
        read_deployment_specs(bad)
    bad.write_text("deployments: 5\n")
    with pytest.raises(PipelineError, match=r"deployments must be a list of entries; got 5"):
        read_deployment_specs(bad)
    bad.write_text("deployments:\n  - name: x\n\tentrypoint: y\n")  # a tab
    with pytest.raises(PipelineError, match=r"prefect\.yaml' is not valid YAML: line 3, column 1"):
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


def test_serve_says_when_a_nightly_database_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipped config's file before the demo made it: serving starts (the file may be
    made before night), and the banner says the run would fail without it."""
    specs = with_settings(read_deployment_specs(), ServeSettings(), cwd=REPO)
    gpu = TagLimit("gpu", 1, created=True, changed=False)
    missing = str(tmp_path / "later.duckdb")
    _print_banner("http://127.0.0.1:4200/api", gpu, specs, (missing, "x"), started_server=True)
    line = f"on {missing} (x); it does not exist yet: the run fails unless it is created by then."
    assert line in capsys.readouterr().out
    there = tmp_path / "shop.duckdb"
    duckdb.connect(str(there)).close()
    absent = ["salse", "stock"]
    _print_banner(
        "http://127.0.0.1:4200/api", gpu, specs, (str(there), "x"), absent, started_server=True
    )
    config = nightly_spec(specs).parameters["config"]
    line = f'Not in {there} now: "salse", "stock", listed in {config}: those tables fail unless'
    assert line in capsys.readouterr().out


@pytest.mark.usefixtures("prefect_harness")
def test_a_changed_schedule_replaces_the_one_served_before() -> None:
    """Served again at another time, the nightly has the new schedule only, its slug (what the
    UI's schedule card shows) the time with its zone: the server keeps a schedule whose slug is
    not sent, and both would start runs."""
    from prefect import get_client

    def served_at(cron: str) -> list[str | None]:
        settings = ServeSettings(schedule_cron=cron, schedule_timezone="Europe/Berlin")
        specs = with_settings(read_deployment_specs(), settings, cwd=REPO)
        spec = nightly_spec(specs).model_copy(update={"name": "changed-schedule"})
        (deployment,) = build_deployments(specs=[spec])
        drop_replaced_schedules([deployment])
        deployment_id = deployment.apply()  # type: ignore[union-attr]
        with get_client(sync_client=True) as client:
            return [s.slug for s in client.read_deployment(deployment_id).schedules]

    assert served_at("0 1 * * *") == ["every day at 01:00 (Europe/Berlin)"]
    assert served_at("30 3 * * *") == ["every day at 03:30 (Europe/Berlin)"]


@pytest.mark.usefixtures("prefect_harness")
def test_runs_an_earlier_serve_left_going_are_named_at_start() -> None:
    """Bug: after `tdm serve` was killed mid-run, its run stayed Running in the UI for good and
    the next `tdm serve` said nothing of it. At start, each run of the served deployments the
    server still has as going is named, with where to find whether it wrote."""
    from prefect import get_client
    from prefect.states import Completed, Running

    specs = with_settings(read_deployment_specs(), ServeSettings(), cwd=REPO)
    spec = nightly_spec(specs).model_copy(update={"name": "left-going", "schedules": []})
    (deployment,) = build_deployments(specs=[spec])
    deployment_id = deployment.apply()  # type: ignore[union-attr]
    with get_client(sync_client=True) as client:
        run = client.create_flow_run_from_deployment(deployment_id)
        client.set_flow_run_state(run.id, Running(), force=True)
        (line,) = leftover_runs([spec])
        assert line.startswith(
            f"Going before this tdm serve started: run {run.name!r} ({run.id}), "
        )
        assert f"row of run_id '{run.id}' in tdm_lineage were written" in line
        client.set_flow_run_state(run.id, Completed(), force=True)
    assert leftover_runs([spec]) == []


@pytest.mark.usefixtures("prefect_harness")
def test_deployments_of_a_work_pool_are_not_taken_over_by_serve() -> None:
    """Review (the work-pool recipe): `tdm serve` against the team's server took over the
    deployments `prefect deploy` had given to a work pool, and left them paused, their scheduled
    runs deleted, when it stopped: the nightly run stopped without a word. It refuses."""
    from prefect import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists
    from prefect.settings import PREFECT_API_URL

    specs = with_settings(read_deployment_specs(), ServeSettings(), cwd=REPO)
    served = nightly_spec(specs).model_copy(update={"name": "served-here", "schedules": []})
    pooled = served.model_copy(update={"name": "pooled-elsewhere"})
    with get_client(sync_client=True) as client, contextlib.suppress(ObjectAlreadyExists):
        client.create_work_pool(WorkPoolCreate(name="tdm-test-pool", type="process"))
    build_deployments(specs=[served])[0].apply()  # type: ignore[union-attr]
    build_deployments(specs=[pooled])[0].apply(work_pool_name="tdm-test-pool")  # type: ignore[union-attr]
    url = str(PREFECT_API_URL.value())
    refuse_work_pool_deployments([served], url)  # served before: served again
    with pytest.raises(PipelineError) as raised:
        refuse_work_pool_deployments([served, pooled], url)
    flow = build_deployments(specs=[pooled])[0].flow_name
    assert str(raised.value).startswith(
        f"The Prefect server at {url} has '{flow}/pooled-elsewhere' (work pool 'tdm-test-pool') "
        "from `prefect deploy`: "
    )


@pytest.mark.usefixtures("prefect_harness")
def test_runs_whose_process_died_are_crashed_by_a_rule_kept_across_serves() -> None:
    """Bug: a run whose tdm serve was killed stayed Running in the UI for good. `tdm serve`
    keeps Prefect's rule for runs that stop sending heartbeats: three periods of silence from a
    run of its deployments (none other) mark it Crashed. Served again, the same rule is kept
    (it holds the heartbeats seen before the restart, by which it finds the runs left); other
    deployments replace it; with heartbeats off there is none. Checked by hand end to end: a
    run whose serve and process were killed was Crashed 1.5 min after its last heartbeat
    (period 30 s), across a restart of tdm serve."""
    from uuid import uuid4

    from prefect import get_client
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    from deployments.serve import UNRESPONSIVE_RULE, ensure_unresponsive_rule

    def rules() -> list[Any]:
        with get_client(sync_client=True) as client:
            return client.read_automations_by_name(UNRESPONSIVE_RULE)

    ids = [uuid4(), uuid4()]
    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 30}):
        assert ensure_unresponsive_rule(ids)
        (rule,) = rules()
        trigger = rule.trigger.model_dump(mode="json")
        assert trigger["within"] == 90.0 and trigger["posture"] == "Proactive"
        assert trigger["match_related"]["prefect.resource.id"] == [
            f"prefect.deployment.{i}" for i in ids
        ]
        assert rule.actions[0].model_dump()["state"] == "CRASHED"
        assert ensure_unresponsive_rule(ids)
        assert [r.id for r in rules()] == [rule.id]  # kept, with what it has seen
        assert ensure_unresponsive_rule(ids[:1])
        assert [r.id for r in rules()] != [rule.id] and len(rules()) == 1
    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        assert not ensure_unresponsive_rule(ids) and rules() == []


# End to end: `tdm serve` in a subprocess with its own server, runs triggered from outside.


SECTION = "## Schedule your own tables"


def readme_blocks() -> list[str]:
    """The bash code blocks of the README's "Schedule your own tables", in order."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", section, flags=re.S)


def test_the_readme_section_is_two_blocks_serve_then_run() -> None:
    """Terminal 1 serves (its last command), terminal 2 runs; no path of the clone is edited."""
    serve, run = readme_blocks()
    assert serve.strip().splitlines()[-1].startswith("tdm serve ")
    assert run.strip().startswith("tdm run ")
    assert "deployments/" not in serve + run


@dataclass(frozen=True)
class Served:
    process: subprocess.Popen[bytes]
    output: Path
    api_url: str
    db: Path
    env: dict[str, str]  # for clients: PREFECT_API_URL set
    tmp: Path
    tracked: dict[str, str]  # the files a user once edited to schedule tables, before serving


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The README's "Schedule your own tables", terminal 1, followed verbatim in a folder with
    shop.duckdb (tables `sales`, `readings`, `other`), on a free port, 30 iterations a run."""
    tmp = tmp_path_factory.mktemp("served")
    db = tmp / "shop.duckdb"
    build_readings(db, table="sales", n_rows=40)
    build_readings(db, n_rows=40)
    build_readings(db, table="other", n_rows=40, seed=1)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",  # the .venv/bin
        PREFECT_HOME=str(fresh_prefect_home(tmp / "prefect")),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_API_PORT=str(port),  # a free port instead of 4200, for server and client
        PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS="2",  # create the next runs at once
        TDM_MAX_ITER="30",
        TDM_TORCH_THREADS="1",  # `tdm serve` passes it on to its runs as OMP_NUM_THREADS
        PREFECT_RUNNER_POLL_FREQUENCY="1",  # pick runs up within a second, not ten
        # beat prefect.yaml's run-level retries (2, 60 s apart): one retry, 3 s later
        PREFECT_FLOWS_DEFAULT_RETRIES="1",
        PREFECT_FLOWS_DEFAULT_RETRY_DELAY_SECONDS="3",
    )
    env.pop("OMP_NUM_THREADS", None)
    tracked = _tracked_files()
    serve_block, _ = readme_blocks()
    output = tmp / "terminal-1.log"
    with output.open("wb") as log:
        process = subprocess.Popen(
            ["bash", "-c", serve_block],
            cwd=tmp,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    api_url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 150
        while not _all_ready(api_url, [TABLE_DEPLOYMENT, WAREHOUSE_DEPLOYMENT]):
            assert process.poll() is None, f"tdm serve exited: {output.read_text()}"
            assert time.monotonic() < deadline, f"not served in time: {output.read_text()}"
            time.sleep(0.5)
        client_env = {**env, "PREFECT_API_URL": api_url}
        yield Served(process, output, api_url, db, client_env, tmp, tracked)
    finally:
        stop_process_group(process, grace=30.0)  # as `tdm serve` stops its server
        if _answers(api_url):  # `tdm serve` failed to stop its server
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


@pytest.mark.e2e
def test_schedule_your_own_tables_as_the_readme_says(served: Served) -> None:
    """The nightly deployment runs the user's tables at 03:30 Berlin time (said in its
    description, its next run created by the scheduler); the README's `tdm run` (terminal 2)
    imputes `sales` now, printing the run's page first, each state and the report; target and
    lineage are written with the serving process's settings; nothing in the clone changed."""
    _, run_block = readme_blocks()
    response = httpx.get(f"{served.api_url}/deployments/name/{WAREHOUSE_DEPLOYMENT}", timeout=10)
    nightly = response.json()
    config = served.tmp / "tables.yaml"
    assert nightly["parameters"] == {"config": str(config)}
    assert nightly["description"] == (  # bug: the page named no file (no db_path parameter)
        f"Impute every table listed in {config}, every day at 03:30 (Europe/Berlin). "
        f"Warehouse: {served.db}."
    )
    ((schedule, slug),) = [(item["schedule"], item["slug"]) for item in nightly["schedules"]]
    assert (schedule["cron"], schedule["timezone"]) == ("30 3 * * *", "Europe/Berlin")
    assert slug == "every day at 03:30 (Europe/Berlin)"  # what the UI's schedule card shows
    next_run = _next_scheduled_run(served.api_url, nightly["id"])
    local = next_run.astimezone(ZoneInfo("Europe/Berlin"))
    assert local.strftime("%H:%M") == "03:30"
    # terminal 1 says it too, with the file the run opens
    banner = f"  Next run: {local:%Y-%m-%d} 03:30 (Europe/Berlin), on {served.db} (--db or "
    assert banner + "TDM_DB_PATH).\n" in served.output.read_text()

    env = {k: v for k, v in served.env.items() if k != "PREFECT_API_URL"}  # as the README's
    terminal_2 = subprocess.run(
        ["bash", "-c", run_block], cwd=served.tmp, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    out = terminal_2.stdout
    assert terminal_2.returncode == 0, out + terminal_2.stderr
    assert re.fullmatch(
        rf"Flow run 'impute-sales' of {TABLE_DEPLOYMENT}: {served.api_url[:-4]}/runs/flow-run/"
        r"[\w-]+",
        out.splitlines()[0],
    )  # named as the flow names it (bug: a random name)
    assert "Completed" in out and "`sales` → `sales_imputed`" in out
    # the run's own log lines as they come (bug: nothing between Running and Completed), not
    # Prefect's bookkeeping
    assert re.search(r"\n  \d\d:\d\d:\d\d TDM fit on 'sales': 100% \(30/30 iterations\)", out)
    assert "Finished in state" not in out, out
    # The whole report (bug: it stopped before its table of columns)
    assert "| column | cells imputed |" in out and "## Run" in out and "| **total** |" in out
    with duckdb.connect(str(served.db), read_only=True) as con:
        nulls = con.execute("SELECT count(*) FROM sales_imputed WHERE humidity IS NULL").fetchone()
        lineage = con.execute(
            "SELECT flow_name, deployment_name, key_column, n_iter FROM tdm_lineage "
            "WHERE source_table = 'sales'"
        ).fetchall()
    assert nulls == (0,)
    assert lineage == [("impute-table", "impute-table", "id", 30)]
    assert _tracked_files() == served.tracked  # the section needs no edit of the clone


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
    """impute-warehouse with a two-table config: both targets and lineage rows written, in
    the file `tdm serve --db` names, which beats the config's db_path (as the shipped demo
    config's would be beaten)."""
    config = served.tmp / "warehouse.yaml"
    config.write_text(
        "db_path: demo/not-this.duckdb\n"
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
    """A run that fails for bad input (a key column with NULLs): each state shown as it comes,
    no retry (it would fail the same way, though the deployment has retries), exit 1, the
    reason names the table and the column. Neither the run's log in the UI nor `tdm serve`'s
    output shows a traceback (bug: Prefect's "Engine execution exited with unexpected
    exception" and ~75 lines of traceback, under a random run name)."""
    assert "is not retried" in served.output.read_text()  # the banner says which runs are
    served_before = served.output.stat().st_size
    run = _command(served, "cli.main", "run", "sales", "--key", "humidity")
    assert run.returncode == 1, run.stdout + run.stderr
    words = [line.split()[1].rstrip(":") for line in run.stdout.splitlines()[1:-1]]
    states = [word for word in words if word in RUN_STATES]  # between them, the run's log lines
    # the first state seen: Scheduled, or Pending when the server took it on before the watch
    assert states[0] in ("Scheduled", "Pending") and states[-1] == "Failed", run.stdout
    assert "AwaitingRetry" not in states and "Crashed" not in run.stdout
    run_id = run.stdout.splitlines()[0].rsplit("/", 1)[1]
    assert httpx.get(f"{served.api_url}/flow_runs/{run_id}", timeout=10).json()["run_count"] == 1
    reason = 'Table "sales" cannot be imputed: the key column "humidity" is NULL in'
    assert reason in run.stderr
    deadline = time.monotonic() + 30
    while "Finished in state Failed" not in (text := _run_logs(served, run_id)):
        assert time.monotonic() < deadline, text
        time.sleep(1)
    time.sleep(3)  # what the run's process logs after its state goes out in the next batch
    text = _run_logs(served, run_id)
    assert reason in text and "Traceback" not in text and "Engine execution" not in text, text
    with served.output.open(encoding="utf-8") as output:
        output.seek(served_before)
        terminal_1 = output.read()
    # from this run's first line: an earlier run's process may print its last ones meanwhile
    terminal_1 = terminal_1[terminal_1.index("Beginning flow run 'impute-sales'") :]
    assert reason in terminal_1 and "Traceback" not in terminal_1, terminal_1
    assert set(re.findall(r"Flow run '([\w-]+)'", terminal_1)) == {"impute-sales"}, terminal_1


@pytest.mark.e2e
def test_a_locked_warehouse_is_retried_at_run_level(served: Served) -> None:
    """The deployment's run-level retries (here one, 3 s later, from `tdm serve`'s environment):
    a warehouse another process holds for writing fails the first attempt after the tasks' own
    retries, its state saying in its own words when the run tries again; released meanwhile,
    the second attempt writes the table."""
    lock = duckdb.connect(str(served.db))  # a writer: the run cannot even open the file
    lines: list[str] = []

    def release_on_retry(line: str) -> None:
        lines.append(line)
        if "AwaitingRetry" in line:
            lock.close()

    try:
        run = trigger_deployment(
            TABLE_DEPLOYMENT,
            {"source_table": "readings", "target_table": "after_lock", "key": "id"},
            api_url=served.api_url,
            progress=release_on_retry,
        )
    finally:
        lock.close()
    assert (run.state, run.succeeded) == ("Completed", True), lines
    retried = [line for line in lines if "AwaitingRetry" in line]
    assert len(retried) == 1 and "lock" in retried[0].lower(), lines
    assert "tries again by itself 3 s from now (attempt 2 of 2)" in retried[0], lines
    assert "WarehouseBusyError" not in retried[0] and "encountered" not in retried[0], lines
    assert httpx.get(f"{served.api_url}/flow_runs/{run.id}", timeout=10).json()["run_count"] == 2


@pytest.mark.e2e
def test_ui_talks_to_the_port_it_is_served_on(served: Served) -> None:
    """Regression (issue 15): `tdm serve --port N` served a UI that called port 4200. The UI's
    settings, served on port N, name the API on port N."""
    ui = served.api_url.removesuffix("/api")
    assert not ui.endswith(":4200")
    settings = httpx.get(f"{ui}/ui-settings", timeout=10).json()
    assert settings["api_url"] == served.api_url


@pytest.mark.e2e
def test_tdm_run_prints_the_address_first_and_no_wait_returns_once_taken(served: Served) -> None:
    """The run's UI page is the first line; --no-wait returns once a runner took the run."""
    run = _command(served, "cli.main", "run", "readings", "--target", "nowait", "--no-wait")
    assert run.returncode == 0, run.stdout + run.stderr
    first, *states, last = run.stdout.splitlines()
    assert re.fullmatch(
        rf"Flow run 'impute-readings' of {TABLE_DEPLOYMENT}: {served.api_url[:-4]}/runs/"
        r"flow-run/[\w-]+",
        first,
    )
    assert states[0].split()[1] == "Scheduled"
    assert {"Pending", "Submitting", "Running"} & {line.split()[1] for line in states[1:]}
    assert first.split(": ", 1)[1] in last


@pytest.mark.e2e
def test_run_past_its_timeout_is_cancelled(served: Served) -> None:
    """--timeout: exit 124 saying so; the run is cancelled (it never finishes or starts later)
    and its target is not written."""
    run = _command(
        served, "cli.main", "run", "readings", "--target", "slow", "--max-iter", "1000000",
        "--timeout", "8",
    )  # fmt: skip
    assert run.returncode == 124, run.stdout + run.stderr
    assert "stopped waiting after 8 s (--timeout) and cancelled the run" in run.stderr
    run_id = run.stdout.splitlines()[0].rsplit("/", 1)[1]
    deadline = time.monotonic() + 60
    while (state := _run_state(served, run_id)) != "CANCELLED":
        assert state in {"CANCELLING", "CANCELLED"}, state
        assert time.monotonic() < deadline, f"still {state}"
        time.sleep(1)
    while True:  # the cancelled run's process may hold the file a moment after the state is set
        try:
            with duckdb.connect(str(served.db), read_only=True) as con:
                tables = con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
            break
        except duckdb.IOException:
            assert time.monotonic() < deadline, "the cancelled run still holds the warehouse"
            time.sleep(1)
    assert ("slow",) not in tables
    logs = _run_logs(served, run_id)  # bug: the UI said only "cancelled successfully"
    assert "Cancelled: tdm run: --timeout 8 s passed." in logs, logs


@pytest.mark.e2e
def test_a_run_nothing_serves_is_cancelled(served: Served) -> None:
    """Regression (issue 15): a deployment that still looks ready but that no runner polls any
    more (`tdm serve` stopped a moment ago) took the run and ran it whenever served again. Now
    the run is cancelled after the pickup time, with "nothing serves" and what to do."""
    from prefect.deployments.runner import EntrypointType
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: served.api_url}):
        deployment = impute_table.to_deployment(
            name="orphan", entrypoint_type=EntrypointType.MODULE_PATH
        )
        deployment_id = deployment.apply()  # type: ignore[union-attr]
    poll = api_post(
        served.api_url,
        "/deployments/get_scheduled_flow_runs",
        {"deployment_ids": [str(deployment_id)]},
    )  # what a runner's poll does: the deployment is READY for a minute
    assert poll.status_code == 200
    orphan = "impute-table/orphan"
    deadline = time.monotonic() + 30
    while not _all_ready(served.api_url, [orphan]):
        assert time.monotonic() < deadline, "the poll did not make the deployment ready"
        time.sleep(0.5)
    created: list[CreatedRun] = []
    with pytest.raises(PipelineError, match=r"Nothing serves deployment 'impute-table/orphan'.*"
                       r"cancelled \(it will not start later\)\. Start `tdm serve`"):  # fmt: skip
        trigger_deployment(
            orphan, {"source_table": "readings"}, api_url=served.api_url, pickup_timeout=3,
            on_created=created.append,
        )  # fmt: skip
    assert _run_state(served, str(created[0].id)) == "CANCELLED"
    assert "Cancelled: nothing serves its deployment." in _run_logs(served, str(created[0].id))


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
    """SIGTERM: `tdm serve` stops serving, stops its server, says so (bug: it said nothing) and
    exits cleanly."""
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(timeout=45) == 0, served.output.read_text()
    assert not _answers(served.api_url)
    # its last words; the run processes it stopped write to the same terminal and may leave a
    # line of theirs without its newline just before
    said = served.output.read_text().rstrip()
    assert said.endswith(
        "tdm serve: stopped serving the deployments and stopped its Prefect server."
    )


def _command(served: Served, module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        env=served.env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _run_logs(served: Served, run_id: str) -> str:
    """The log messages of a flow run, as its page in the UI shows them."""
    from prefect import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with (
        temporary_settings({PREFECT_API_URL: served.api_url}),
        get_client(sync_client=True) as client,
    ):
        logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])))
    return "\n".join(log.message for log in logs)


def _run_state(served: Served, run_id: str) -> str:
    response = httpx.get(f"{served.api_url}/flow_runs/{run_id}", timeout=10)
    return str(response.json()["state"]["type"])


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


def _next_scheduled_run(api: str, deployment_id: str) -> datetime:
    """The earliest run the server's scheduler created for the deployment."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        response = api_post(
            api,
            "/flow_runs/filter",
            {
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


def _tracked_files() -> dict[str, str]:
    """The files a user once had to edit to schedule their tables, and the README itself."""
    names = ("deployments/prefect.yaml", "deployments/warehouse.yaml", "README.md")
    return {name: (REPO / name).read_text(encoding="utf-8") for name in names}
