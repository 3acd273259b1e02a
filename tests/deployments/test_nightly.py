"""What `tdm serve` changes without an edit of a tracked file: the nightly deployment's config,
schedule and description (deployments.nightly), the environment of the runs it serves, and the
environment of the Prefect server it starts (deployments.server)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
import yaml

from deployments.files import PREFECT_FILE
from deployments.nightly import (
    NIGHTLY_DEPLOYMENT,
    ServeSettings,
    describe_schedule,
    next_run,
    nightly_database,
    nightly_spec,
    served_environment,
    tables_not_found,
    with_settings,
)
from deployments.server import server_environment
from deployments.specs import WorkPoolSpec, read_deployment_specs
from tasks.errors import PipelineError

REPO = Path(__file__).resolve().parents[2]
RETRIES = {"PREFECT_FLOWS_DEFAULT_RETRIES": "2", "PREFECT_FLOWS_DEFAULT_RETRY_DELAY_SECONDS": "60"}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A user's own warehouse config, outside the repository."""
    path = tmp_path / "tables.yaml"
    path.write_text("db_path: shop.duckdb\ntables:\n  - {table: sales, key: id}\n")
    return path


@pytest.mark.parametrize(
    ("cron", "timezone", "expected"),
    [
        ("0 2 * * *", "UTC", "every day at 02:00 (UTC)"),
        ("30  3 * * *", "Europe/Berlin", "every day at 03:30 (Europe/Berlin)"),
        ("0 2 * * 1-5", "UTC", "on the cron schedule '0 2 * * 1-5' (UTC)"),
    ],
    ids=["daily-utc", "daily-berlin", "weekdays"],
)
def test_describe_schedule_states_the_time_and_its_zone(
    cron: str, timezone: str, expected: str
) -> None:
    """A daily cron reads as a time of day with its time zone; any other as the expression."""
    assert describe_schedule(cron, timezone) == expected


def test_shipped_nightly_states_its_time_and_zone() -> None:
    """With no setting, the nightly keeps prefect.yaml's config and cron, and its description
    (served and in prefect.yaml, for `prefect deploy`) says when it runs."""
    specs = with_settings(read_deployment_specs(), ServeSettings(), cwd=REPO)
    nightly = nightly_spec(specs)
    assert nightly.parameters == {"config": "deployments/warehouse.yaml"}
    assert nightly.schedules == [
        {"cron": "0 2 * * *", "timezone": "UTC", "active": True, "slug": "every day at 02:00 (UTC)"}
    ]
    assert nightly.description == (
        "Impute every table listed in deployments/warehouse.yaml, every day at 02:00 (UTC)."
    )
    (shipped,) = [s for s in read_deployment_specs() if s.name == NIGHTLY_DEPLOYMENT]
    assert shipped.description == nightly.description


def test_settings_replace_config_and_schedule(config: Path, tmp_path: Path) -> None:
    """--config (relative, made absolute from the working directory), cron and time zone: the
    nightly runs the user's tables at 03:30 Berlin time; the ad-hoc deployment is unchanged."""
    settings = ServeSettings(
        warehouse_config=Path("tables.yaml"),
        schedule_cron="30 3 * * *",
        schedule_timezone="Europe/Berlin",
    )
    before = {s.name: s for s in read_deployment_specs()}
    specs = {s.name: s for s in with_settings(list(before.values()), settings, cwd=tmp_path)}
    nightly = specs[NIGHTLY_DEPLOYMENT]
    assert nightly.parameters == {"config": str(config)}
    (schedule,) = nightly.schedule_objects()
    assert (schedule.cron, schedule.timezone) == ("30 3 * * *", "Europe/Berlin")
    assert nightly.description == (
        f"Impute every table listed in {config}, every day at 03:30 (Europe/Berlin)."
    )
    assert specs["impute-table"] == before["impute-table"]
    from prefect.server.schemas.schedules import CronSchedule

    cron = CronSchedule(cron=str(schedule.cron), timezone=schedule.timezone)
    (first,) = asyncio.run(cron.get_dates(n=1, start=datetime(2026, 11, 23, 12, tzinfo=UTC)))
    assert first.astimezone(UTC).isoformat() == "2026-11-24T02:30:00+00:00"  # CET is UTC+1


def test_nightly_database_is_the_one_its_run_opens(config: Path, tmp_path: Path) -> None:
    """--db or TDM_DB_PATH, else the config's db_path, else the pipeline's default file."""
    specs = with_settings(read_deployment_specs(), ServeSettings(), cwd=REPO)
    given = tmp_path / "shop.duckdb"
    assert nightly_database(specs, given) == (str(given), "--db or TDM_DB_PATH")
    shipped = "deployments/warehouse.yaml"
    assert nightly_database(specs, None, cwd=REPO) == (
        "demo/warehouse.duckdb",
        f"db_path in {shipped}",
    )
    own = ServeSettings(warehouse_config=Path("tables.yaml"))
    specs = with_settings(read_deployment_specs(), own, cwd=tmp_path)
    assert nightly_database(specs, None) == ("shop.duckdb", f"db_path in {config}")
    config.write_text("tables:\n  - {table: sales}\n")
    assert nightly_database(specs, None) == ("warehouse.duckdb", "the default")
    # prefect.yaml's own choices come first, as the flow takes them
    nightly = nightly_spec(specs)
    with_env = nightly.model_copy(
        update={"work_pool": WorkPoolSpec(job_variables={"env": {"TDM_DB_PATH": "env.duckdb"}})}
    )
    assert nightly_database([with_env], None)[0] == "env.duckdb"
    assert nightly_database([with_env], given)[0] == str(given)
    with_parameter = with_env.model_copy(
        update={"parameters": {**nightly.parameters, "db_path": "param.duckdb"}}
    )
    assert nightly_database([with_parameter], given)[0] == "param.duckdb"


def test_tables_the_database_lacks_are_named_before_night(tmp_path: Path) -> None:
    """`tdm serve` names the config's tables its DuckDB file has no base table for (a view or a
    typo does not count), in config order; with no file, or one locked for writing by another
    process, it cannot tell."""
    (tmp_path / "tables.yaml").write_text(
        "tables:\n  - {table: salse}\n  - {table: sales}\n  - {table: Stock}\n"
        "  - {table: report}\n  - {table: crm.leads}\n"
    )
    own = ServeSettings(warehouse_config=Path("tables.yaml"))
    specs = with_settings(read_deployment_specs(), own, cwd=tmp_path)
    assert tables_not_found(specs, "shop.duckdb", cwd=tmp_path) is None
    with duckdb.connect(str(tmp_path / "shop.duckdb")) as con:
        con.execute("CREATE TABLE sales(x DOUBLE); CREATE TABLE stock(x DOUBLE)")
        con.execute("CREATE VIEW report AS SELECT * FROM sales; CREATE SCHEMA crm")
        con.execute("CREATE TABLE crm.leads(x DOUBLE)")
    assert tables_not_found(specs, "shop.duckdb", cwd=tmp_path) == ["salse", "report"]
    code = (
        "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); print('held', flush=True); "
        "time.sleep(60)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "shop.duckdb")], stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        assert tables_not_found(specs, "shop.duckdb", cwd=tmp_path) is None
    finally:
        holder.kill()
        holder.wait()


def test_next_run_is_the_schedules_next_date_even_inside_an_event_loop() -> None:
    """03:30 Berlin after noon UTC on 23 November is 02:30 UTC the next day; the same from
    within a running loop (a notebook); a cron naming no date to come gives None."""
    after = datetime(2026, 11, 23, 12, tzinfo=UTC)
    expected = "2026-11-24T02:30:00+00:00"
    assert next_run("30 3 * * *", "Europe/Berlin", after=after).astimezone(UTC).isoformat() == (
        expected
    )

    async def in_a_loop() -> datetime | None:
        return next_run("30 3 * * *", "Europe/Berlin", after=after)

    assert asyncio.run(in_a_loop()).astimezone(UTC).isoformat() == expected  # type: ignore[union-attr]
    assert next_run("0 2 31 2 *", "UTC") is None


def test_settings_come_from_tdm_variables(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TDM_WAREHOUSE_CONFIG, TDM_SCHEDULE_CRON and TDM_SCHEDULE_TIMEZONE; a value given
    explicitly (a flag) beats the variable."""
    monkeypatch.setenv("TDM_WAREHOUSE_CONFIG", str(config))
    monkeypatch.setenv("TDM_SCHEDULE_CRON", "15 1 * * *")
    monkeypatch.setenv("TDM_SCHEDULE_TIMEZONE", "America/New_York")
    from_env = ServeSettings()
    assert (from_env.warehouse_config, from_env.schedule_cron, from_env.schedule_timezone) == (
        config,
        "15 1 * * *",
        "America/New_York",
    )
    assert ServeSettings(schedule_cron="0 4 * * *").schedule_cron == "0 4 * * *"


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        (ServeSettings(schedule_cron="0 25 * * *"), r"invalid schedule.*TDM_SCHEDULE_CRON"),
        (ServeSettings(schedule_cron="0 2 31 2 *"), r"'0 2 31 2 \*' never fires.*TDM_SCHEDULE"),
        (ServeSettings(schedule_timezone="Mars/Olympus"), r"'Mars/Olympus'.*IANA"),
        (ServeSettings(warehouse_config=Path("nowhere.yaml")), r"nowhere\.yaml' does not exist"),
    ],
    ids=["bad-cron", "never-fires", "bad-timezone", "missing-config"],
)
def test_bad_settings_are_refused_before_serving(settings: ServeSettings, match: str) -> None:
    """A cron Prefect cannot parse, an unknown time zone or a missing config: one clear error
    when `tdm serve` starts, not a failed run at night."""
    with pytest.raises(PipelineError, match=match):
        with_settings(read_deployment_specs(), settings, cwd=REPO)


@pytest.mark.parametrize(
    ("imputer", "match"),
    [
        ("{max_itr: 5}", r'table "sales".*max_itr'),
        ("{max_iter: -5}", r'table "sales".*max_iter'),
        ("{random_state: 3}", r'table "sales".*the pipeline sets random_state itself'),
    ],
    ids=["unknown-setting", "bad-value", "pipeline-set"],
)
def test_imputer_settings_the_library_refuses_are_refused_before_serving(
    tmp_path: Path, imputer: str, match: str
) -> None:
    """A config whose imputer settings the library refuses fails `tdm serve` at start, naming
    the table and the setting, rather than its table's run at night."""
    path = tmp_path / "tables.yaml"
    path.write_text(f"tables:\n  - {{table: sales, key: id, imputer: {imputer}}}\n")
    with pytest.raises(PipelineError, match=match):
        with_settings(read_deployment_specs(), ServeSettings(warehouse_config=path), cwd=REPO)


def test_a_bad_imputer_variable_is_named_not_blamed_on_the_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bug: TDM_MAX_ITER=abc stopped `tdm serve` saying it "cannot use its warehouse config"."""
    monkeypatch.setenv("TDM_MAX_ITER", "abc")
    with pytest.raises(PipelineError, match="settings of TDM_MAX_ITER are invalid") as refused:
        with_settings(read_deployment_specs(), ServeSettings(), cwd=REPO)
    assert "warehouse config" not in str(refused.value)


def test_shipped_config_from_elsewhere_says_to_pass_config(tmp_path: Path) -> None:
    """From a folder without deployments/warehouse.yaml and no --config: refused, saying how."""
    with pytest.raises(PipelineError, match=r"--config FILE \(or TDM_WAREHOUSE_CONFIG\)"):
        with_settings(read_deployment_specs(), ServeSettings(), cwd=tmp_path)


def test_prefect_yaml_sets_run_level_retries_on_both_deployments() -> None:
    """Both deployments' runs get Prefect's default flow retries from `job_variables.env`, the
    same for `prefect deploy` (work pool) and `tdm serve`."""
    raw = yaml.safe_load(PREFECT_FILE.read_text())
    for entry in raw["deployments"]:
        assert entry["work_pool"]["job_variables"]["env"] == RETRIES, entry["name"]
    assert all(spec.run_environment() == RETRIES for spec in read_deployment_specs())


def test_served_environment_retries_threads_and_db() -> None:
    """The served runs' variables: the retries, the torch threads (as OMP_NUM_THREADS too, which
    torch reads at start), and TDM_DB_PATH from `tdm serve --db`."""
    env = served_environment(
        read_deployment_specs(), torch_threads=1, db_path=Path("/data/shop.duckdb"), environ={}
    )
    assert env == {
        **RETRIES,
        "TDM_TORCH_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "TDM_DB_PATH": "/data/shop.duckdb",
    }


def test_served_environment_keeps_the_callers_variables() -> None:
    """A retry variable already set for `tdm serve` wins over prefect.yaml; 0 threads (torch's
    default) sets no OMP_NUM_THREADS; no --db sets no TDM_DB_PATH."""
    env = served_environment(
        read_deployment_specs(),
        torch_threads=0,
        environ={"PREFECT_FLOWS_DEFAULT_RETRIES": "0"},
    )
    assert env == {"PREFECT_FLOWS_DEFAULT_RETRY_DELAY_SECONDS": "60", "TDM_TORCH_THREADS": "0"}


def test_deployments_that_disagree_on_a_variable_are_refused(tmp_path: Path) -> None:
    """One process serves every deployment: two values for one variable cannot both hold."""
    raw = yaml.safe_load(PREFECT_FILE.read_text())
    raw["deployments"][1]["work_pool"]["job_variables"]["env"]["PREFECT_FLOWS_DEFAULT_RETRIES"] = (
        "5"
    )
    path = tmp_path / "prefect.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(PipelineError, match=r"PREFECT_FLOWS_DEFAULT_RETRIES to '2' and '5'"):
        served_environment(read_deployment_specs(path), torch_threads=1, environ={})


def test_an_unknown_variable_in_prefect_yaml_is_refused_before_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """prefect.yaml's run variables reach every run served: a typo there is refused by `tdm
    serve` at start, as one in its own environment is (before, the runs failed at night)."""
    from deployments.serve import serve_here

    raw = yaml.safe_load(PREFECT_FILE.read_text())
    raw["deployments"][0]["work_pool"]["job_variables"]["env"]["TDM_MAX_ITERS"] = "5"
    path = tmp_path / "prefect.yaml"
    path.write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(REPO)  # the shipped config's relative path
    with pytest.raises(PipelineError, match=r"Unknown environment variable TDM_MAX_ITERS"):
        serve_here(path=path, port=1)  # refused before any server starts


def test_a_run_process_takes_its_torch_threads_from_omp_num_threads() -> None:
    """The mechanism behind the served runs' thread count: torch in a fresh process started with
    the served environment uses that many threads: one, where torch's default is one per core."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("torch's default is one thread on a one-core machine: nothing to tell apart")
    threads = 1
    env = {k: v for k, v in os.environ.items() if k not in {"OMP_NUM_THREADS", "MKL_NUM_THREADS"}}
    env.update(served_environment([], torch_threads=threads, environ=env))
    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(out.stdout) == threads


def test_server_environment_points_the_ui_at_its_port() -> None:
    """`prefect server start --port N` alone serves a UI that calls port 4200: its environment
    sets the port and the UI's API address; the client's PREFECT_API_URL is dropped."""
    env = server_environment(4311, {"PATH": "/bin", "PREFECT_API_URL": "http://x:1/api"})
    assert env == {
        "PATH": "/bin",
        "PREFECT_SERVER_API_HOST": "127.0.0.1",
        "PREFECT_SERVER_API_PORT": "4311",
        "PREFECT_UI_API_URL": "http://127.0.0.1:4311/api",
        "PREFECT_SERVER_API_CSRF_PROTECTION_ENABLED": "true",
        "PREFECT_SERVER_API_CORS_ALLOWED_ORIGINS": "http://127.0.0.1:4311,http://localhost:4311",
    }


def test_server_environment_lets_no_other_site_drive_the_server() -> None:
    """Bug (security review): Prefect's defaults allowed any origin (CORS `*`) without CSRF
    tokens, so a web page open in a browser on this machine could start runs. The user's own
    choices of either are kept."""
    env = server_environment(4311, {})
    assert env["PREFECT_SERVER_API_CSRF_PROTECTION_ENABLED"] == "true"
    assert "*" not in env["PREFECT_SERVER_API_CORS_ALLOWED_ORIGINS"]
    mine = {"PREFECT_SERVER_API_CORS_ALLOWED_ORIGINS": "https://ui.example"}
    assert server_environment(4311, mine)["PREFECT_SERVER_API_CORS_ALLOWED_ORIGINS"] == (
        "https://ui.example"
    )


def test_server_environment_keeps_a_ui_api_url_the_user_set() -> None:
    """Behind a proxy the user sets the UI's API address; it is kept."""
    env = server_environment(4311, {"PREFECT_UI_API_URL": "https://tdm.example/api"})
    assert env["PREFECT_UI_API_URL"] == "https://tdm.example/api"
