"""The nightly deployment as `tdm serve` serves it: prefect.yaml's entry with the warehouse
config and schedule of the settings (`ServeSettings`, no tracked file edited), and a description
that says when it runs.

Also the environment every served run gets: prefect.yaml's `job_variables.env` (run-level
retries), the torch thread count and the warehouse file.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from deployments.specs import DeploymentSpec
from schemas.warehouse import WarehouseConfigError, load_warehouse_config
from tasks.errors import PipelineError, PipelineInputError
from tasks.imputer_settings import environment_settings, imputer_settings

__all__ = [
    "CONFIG_PARAMETER",
    "NIGHTLY_DEPLOYMENT",
    "ServeSettings",
    "describe_schedule",
    "next_run",
    "nightly_database",
    "nightly_spec",
    "served_environment",
    "tables_not_found",
    "with_settings",
]

NIGHTLY_DEPLOYMENT = "impute-warehouse"
"""The prefect.yaml entry whose config and schedule the settings change."""

CONFIG_PARAMETER = "config"
"""Its parameter that names the warehouse config."""


class ServeSettings(BaseSettings):
    """The nightly deployment's config and schedule; each field `name` reads `TDM_<NAME>`.

    Unset fields keep prefect.yaml's values. Precedence: `tdm serve` flags > environment >
    prefect.yaml.
    """

    model_config = SettingsConfigDict(env_prefix="TDM_", frozen=True, extra="ignore")

    warehouse_config: Path | None = Field(
        default=None,
        description="The warehouse config (tables, and optionally db_path) the nightly run "
        "imputes; relative paths are taken from where `tdm serve` runs.",
    )
    schedule_cron: str | None = Field(
        default=None,
        min_length=1,
        description="When the nightly run starts, as a cron expression (minute hour day month "
        "weekday), e.g. '30 3 * * *' for 03:30.",
    )
    schedule_timezone: str | None = Field(
        default=None,
        min_length=1,
        description="The time zone of the cron expression (an IANA name such as Europe/Berlin).",
    )


_DAILY = re.compile(r"^(\d{1,2}) (\d{1,2}) \* \* \*$")


def describe_schedule(cron: str, timezone: str) -> str:
    """When a cron schedule fires, in words: `every day at 02:00 (UTC)` for a daily time,
    else the expression itself with its time zone."""
    daily = _DAILY.match(" ".join(cron.split()))
    if daily:
        minute, hour = int(daily.group(1)), int(daily.group(2))
        return f"every day at {hour:02d}:{minute:02d} ({timezone})"
    return f"on the cron schedule '{cron}' ({timezone})"


def nightly_spec(specs: list[DeploymentSpec]) -> DeploymentSpec:
    """The nightly entry of a prefect.yaml's deployments."""
    for spec in specs:
        if spec.name == NIGHTLY_DEPLOYMENT:
            return spec
    raise PipelineError(f"prefect.yaml has no deployment named {NIGHTLY_DEPLOYMENT!r}.")


def with_settings(
    specs: list[DeploymentSpec], settings: ServeSettings, *, cwd: Path | None = None
) -> list[DeploymentSpec]:
    """The deployments with the nightly one's config and schedule taken from `settings`.

    The config is made absolute (from `cwd`, default the working directory) and read, so that a
    missing or invalid file is refused now rather than at night; the schedule is validated (cron
    and IANA time zone). The nightly description states the table list and the time with its
    time zone, and so does the schedule's slug (`describe_schedule`).
    """
    nightly = nightly_spec(specs)
    parameters = dict(nightly.parameters)
    if settings.warehouse_config is not None:
        parameters[CONFIG_PARAMETER] = str((cwd or Path.cwd()) / settings.warehouse_config)
    config = parameters.get(CONFIG_PARAMETER)
    if config is None:
        raise PipelineError(
            f"Deployment {NIGHTLY_DEPLOYMENT!r} has no {CONFIG_PARAMETER!r} parameter: pass "
            "--config FILE (or set TDM_WAREHOUSE_CONFIG)."
        )
    _check_config(str(config), cwd or Path.cwd(), given=settings.warehouse_config is not None)
    cron, timezone = _schedule(nightly, settings)
    updated = nightly.model_copy(
        update={
            "parameters": parameters,
            # The slug is what the UI's schedule card shows: the time with its time zone.
            "schedules": [
                {
                    "cron": cron,
                    "timezone": timezone,
                    "active": True,
                    "slug": describe_schedule(cron, timezone),
                }
            ],
            "description": f"Impute every table listed in {config}, "
            f"{describe_schedule(cron, timezone)}.",
        }
    )
    where = "(the schedule comes from --schedule-cron, TDM_SCHEDULE_CRON or prefect.yaml)"
    try:
        updated.schedule_objects()
    except PipelineError as error:
        raise PipelineError(f"{error} {where}") from None
    if next_run(cron, timezone) is None:
        raise PipelineError(
            f"The cron schedule {cron!r} never fires (it names no date to come) {where}."
        )
    return [updated if spec is nightly else spec for spec in specs]


def next_run(cron: str, timezone: str, *, after: datetime | None = None) -> datetime | None:
    """When Prefect's scheduler starts the cron schedule's next run at or after `after` (default
    now), in `timezone`; None for a valid cron that names no date to come (31 February)."""
    from prefect.server.schemas.schedules import CronSchedule
    from prefect.utilities.asyncutils import run_coro_as_sync

    schedule = CronSchedule(cron=cron, timezone=timezone)
    try:
        dates: list[datetime] | None = run_coro_as_sync(  # also inside a running event loop
            schedule.get_dates(n=1, start=after)
        )
    except ValueError:  # croniter's "failed to find next date"
        return None
    return dates[0] if dates else None


def nightly_database(
    specs: list[DeploymentSpec], given: Path | None, *, cwd: Path | None = None
) -> tuple[str, str]:
    """The DuckDB file the nightly run opens, and where that path comes from, in the flow's
    order: its `db_path` parameter in prefect.yaml, `given` (--db or TDM_DB_PATH), TDM_DB_PATH
    among prefect.yaml's run variables, its warehouse config's db_path (the config read from
    `cwd`, default the working directory), the pipeline's default."""
    nightly = nightly_spec(specs)
    if nightly.parameters.get("db_path"):
        return str(nightly.parameters["db_path"]), "the db_path parameter in prefect.yaml"
    if given is not None:
        return str(given), "--db or TDM_DB_PATH"
    if from_yaml := nightly.run_environment().get("TDM_DB_PATH"):
        return from_yaml, "TDM_DB_PATH in prefect.yaml"
    config = str(nightly.parameters[CONFIG_PARAMETER])
    db_path = load_warehouse_config((cwd or Path.cwd()) / config).db_path
    if db_path is not None:
        return db_path, f"db_path in {config}"
    from flows.settings import PipelineSettings

    return str(PipelineSettings.model_fields["db_path"].default), "the default"


def tables_not_found(
    specs: list[DeploymentSpec], database: str, *, cwd: Path | None = None
) -> list[str] | None:
    """The tables of the nightly config that the DuckDB file `database` has no base table for
    now, in config order; None when that cannot be told (no such file yet, or it cannot be
    opened read-only now: locked or not DuckDB)."""
    from tasks.warehouse.tables import connect, find_table

    base = cwd or Path.cwd()
    config = load_warehouse_config(base / str(nightly_spec(specs).parameters[CONFIG_PARAMETER]))
    if not (base / database).is_file():
        return None
    try:
        with connect(base / database, read_only=True) as con:
            return [entry.table for entry in config.tables if find_table(con, entry.table) is None]
    except PipelineError:  # locked, or not a DuckDB file: the run will say so
        return None


def served_environment(
    specs: list[DeploymentSpec],
    *,
    torch_threads: int,
    db_path: Path | None = None,
    environ: Mapping[str, str],
) -> dict[str, str]:
    """The variables `tdm serve` sets for the runs it serves (they inherit its environment).

    - prefect.yaml's `work_pool.job_variables.env` (the run-level retries), unless `environ`
      already sets the variable: one process serves every deployment, so two deployments that
      set a variable differently are refused;
    - `TDM_TORCH_THREADS` and, unless it is 0 (torch's default), `OMP_NUM_THREADS`, which torch
      reads when a run's process starts;
    - `TDM_DB_PATH` when `db_path` is given (`tdm serve --db`).
    """
    chosen: dict[str, tuple[str, str]] = {}
    for spec in specs:
        for name, value in spec.run_environment().items():
            if name in chosen and chosen[name][1] != value:
                other, before = chosen[name]
                raise PipelineError(
                    f"prefect.yaml: deployments {other!r} and {spec.name!r} set {name} to "
                    f"{before!r} and {value!r}; `tdm serve` runs every deployment with one "
                    "environment: give them the same value, or set the variable for tdm serve."
                )
            chosen[name] = (spec.name, value)
    env = {name: value for name, (_, value) in chosen.items() if name not in environ}
    env["TDM_TORCH_THREADS"] = str(torch_threads)
    if torch_threads > 0:
        env["OMP_NUM_THREADS"] = str(torch_threads)
    if db_path is not None:
        env["TDM_DB_PATH"] = str(db_path)
    return env


def _schedule(nightly: DeploymentSpec, settings: ServeSettings) -> tuple[str, str]:
    crons = [item for item in nightly.schedules if item.get("cron")]
    if settings.schedule_cron is None and len(crons) != 1:
        raise PipelineError(
            f"Deployment {NIGHTLY_DEPLOYMENT!r} needs one cron schedule in prefect.yaml, or "
            "--schedule-cron (TDM_SCHEDULE_CRON)."
        )
    cron = settings.schedule_cron or str(crons[0]["cron"])
    shipped = str(crons[0].get("timezone") or "UTC") if crons else "UTC"
    timezone = settings.schedule_timezone or shipped
    try:
        zoneinfo.ZoneInfo(timezone)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise PipelineError(
            f"Schedule time zone {timezone!r} (--schedule-timezone, TDM_SCHEDULE_TIMEZONE) is not "
            "an IANA time zone name such as UTC or Europe/Berlin."
        ) from None
    return cron, timezone


def _check_config(config: str, cwd: Path, *, given: bool) -> None:
    """Refuse, at start rather than at night, a config that cannot be read or validated, or
    whose imputer settings (on top of the TDM_* ones) the library refuses."""
    try:
        env = environment_settings()
    except PipelineInputError as error:  # the environment's fault, not the config's
        raise PipelineError(str(error)) from None
    try:
        for entry in load_warehouse_config(cwd / config).tables:
            imputer_settings(
                env, entry.imputer, subject=f'The imputer settings of table "{entry.table}"'
            )
    except (WarehouseConfigError, PipelineInputError) as error:
        hint = (
            ""
            if given
            else " Pass your own with --config FILE (or TDM_WAREHOUSE_CONFIG), or start tdm "
            "serve from the repository root."
        )
        raise PipelineError(
            f"The nightly deployment {NIGHTLY_DEPLOYMENT!r} cannot use its warehouse config: "
            f"{error}{hint}"
        ) from None
