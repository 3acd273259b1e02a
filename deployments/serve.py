"""Serve the deployments of `deployments/prefect.yaml` from one process (`tdm serve`).

The schedules, parameters, descriptions and tags are read from prefect.yaml, so that the served
deployments and the ones `prefect deploy` creates for a work pool are the same; the nightly
deployment's config and schedule can be changed by settings (`deployments.nightly`). Relative
paths in parameters are taken from the working directory.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from deployments.files import PREFECT_FILE
from deployments.nightly import (
    CONFIG_PARAMETER,
    ServeSettings,
    next_run,
    nightly_database,
    nightly_spec,
    served_environment,
    tables_not_found,
    with_settings,
)
from deployments.server import (
    DEFAULT_PORT,
    api_url_for,
    default_port,
    local_server,
    server_answers,
)
from deployments.specs import DeploymentSpec, read_deployment_specs
from tasks.errors import PipelineError

if TYPE_CHECKING:
    from prefect import Flow
    from prefect.deployments.runner import RunnerDeployment

__all__ = [
    "ServeSettings",
    "TagLimit",
    "build_deployments",
    "drop_replaced_schedules",
    "ensure_tag_limit",
    "ensure_unresponsive_rule",
    "leftover_runs",
    "load_flow",
    "serve_deployments",
    "serve_here",
]


def load_flow(entrypoint: str) -> Flow[..., Any]:
    """The flow object an entrypoint `package/module.py:name` names, imported as a module."""
    from prefect import Flow

    path, _, attribute = entrypoint.rpartition(":")
    module_name = path.removesuffix(".py").replace("/", ".")
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise PipelineError(f"Entrypoint {entrypoint!r} cannot be loaded: {error}") from None
    if not isinstance(found, Flow):
        raise PipelineError(f"Entrypoint {entrypoint!r} is not a Prefect flow.")
    return found


def build_deployments(
    path: str | Path = PREFECT_FILE, *, specs: list[DeploymentSpec] | None = None
) -> list[RunnerDeployment]:
    """One runner deployment per prefect.yaml entry (or per spec of `specs`), with its schedules
    and parameters.

    The entrypoint is recorded as a module path, so that runs find the flow from any working
    directory of the serving process.
    """
    from prefect.deployments.runner import EntrypointType

    deployments = []
    for spec in read_deployment_specs(path) if specs is None else specs:
        deployment = load_flow(spec.entrypoint).to_deployment(
            # name, description, tags, parameters, concurrency_limit: named as `to_deployment`'s
            **spec.model_dump(exclude={"entrypoint", "schedules", "work_pool"}),
            schedules=spec.schedule_objects(),
            entrypoint_type=EntrypointType.MODULE_PATH,
        )
        deployments.append(cast("RunnerDeployment", deployment))  # sync call: not a coroutine
    return deployments


def serve_deployments(specs: list[DeploymentSpec], *, limit: int | None = None) -> None:
    """Serve the deployments until interrupted (Ctrl-C or SIGTERM).

    Needs a Prefect server that outlives this process (PREFECT_API_URL): `serve_here` starts one
    when none is set. `limit` caps the flow runs executing at once (unset: no cap).
    """
    from prefect import serve

    deployments = build_deployments(specs=specs)
    drop_replaced_schedules(deployments)
    try:
        ensure_unresponsive_rule([d.apply() for d in deployments])  # type: ignore[union-attr]
    except Exception as error:  # best effort: serving matters more than this rule
        reason = str(error).splitlines()[0] if str(error) else ""
        print(
            "tdm serve: the rule that marks runs whose process died Crashed could not be kept "
            f"on the server ({type(error).__name__}: {reason}); such runs stay Running in the UI.",
            flush=True,
        )
    with warnings.catch_warnings():
        # Prefect's runner calls its async stop() without awaiting it on SIGTERM; the shutdown
        # (pausing the schedules) happens anyway when the runner's context exits.
        warnings.filterwarnings("ignore", message="coroutine 'Runner.astop' was never awaited")
        serve(*deployments, limit=limit)


def serve_here(
    *,
    port: int | None = None,
    gpu_slots: int | None = None,
    limit: int | None = None,
    path: str | Path = PREFECT_FILE,
    settings: ServeSettings | None = None,
    torch_threads: int | None = None,
    db_path: Path | None = None,
) -> None:
    """`tdm serve`: serve the deployments against PREFECT_API_URL or, when it is unset, against a
    Prefect server started on 127.0.0.1:`port` (default PREFECT_SERVER_API_PORT, 4200) for as
    long as this runs.

    The nightly deployment takes its config and schedule from `settings` (default: the TDM_*
    variables, else prefect.yaml). The runs inherit this process's environment, with the
    variables of `deployments.nightly.served_environment`: prefect.yaml's run-level retries,
    `torch_threads` (default TDM_TORCH_THREADS, else its default) and `db_path` (TDM_DB_PATH).

    Creates the tag concurrency limit `gpu` (`gpu_slots`, default 1) unless it exists; an existing
    one is changed only when `gpu_slots` is given.
    """
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    from flows.notify import check_notify_url
    from flows.settings import (
        SERVED_DB_VARIABLE,
        PipelineSettings,
        check_known_variables,
        environment_set,
    )
    from tasks.impute import GPU_TAG

    # A bad prefect.yaml, config, schedule, database path or notification URL fails before a
    # server is started.
    specs = with_settings(read_deployment_specs(path), settings or ServeSettings())
    pipeline = PipelineSettings.from_env()
    if pipeline.notify_url is not None:
        try:
            check_notify_url(pipeline.notify_url)
        except ValueError as error:
            raise PipelineError(f"{error}: no failure could be notified.") from None
    given = db_path or (pipeline.db_path if "db_path" in pipeline.model_fields_set else None)
    if given is not None and not Path(given).is_file():
        raise PipelineError(
            f"Database file '{given}' (--db or TDM_DB_PATH) does not exist, so every run served "
            "would fail: give the path of an existing DuckDB file."
        )
    database = nightly_database(specs, given)
    nightly = nightly_spec(specs)  # its page in the UI names the file (no db_path parameter)
    described = nightly.model_copy(
        update={"description": f"{nightly.description} Warehouse: {database[0]}."}
    )
    specs = [described if spec is nightly else spec for spec in specs]
    threads = pipeline.torch_threads if torch_threads is None else torch_threads
    run_env = served_environment(specs, torch_threads=threads, db_path=db_path, environ=os.environ)
    # The files its runs may write: the nightly run's, and an ad-hoc table run's by default.
    served = {Path(p).resolve() for p in (database[0], db_path or pipeline.db_path)}
    run_env[SERVED_DB_VARIABLE] = os.pathsep.join(sorted(map(str, served)))
    check_known_variables({**os.environ, **run_env})  # prefect.yaml's: every run gets them
    port = port or default_port()
    prefect_settings = get_current_settings()
    url = prefect_settings.api.url
    started_server = url is None
    serving = False
    try:
        with contextlib.ExitStack() as stack, contextlib.suppress(KeyboardInterrupt):
            stack.enter_context(_exit_on_sigterm())
            stack.enter_context(environment_set(run_env))  # the runs' processes inherit it
            if url is None:
                log = Path(prefect_settings.home).expanduser() / f"tdm-server-{port}.log"
                print(
                    f"Starting a Prefect server on 127.0.0.1:{port} (its log: {log}) ...",
                    flush=True,
                )
                url = stack.enter_context(local_server(port, log_path=log))
                stack.enter_context(temporary_settings({PREFECT_API_URL: url}))
                stack.enter_context(environment_set({"PREFECT_API_URL": url}))
            elif not server_answers(url):
                raise PipelineError(
                    f"No Prefect server answers at PREFECT_API_URL={url}: start it, or unset "
                    "PREFECT_API_URL to let `tdm serve` start one."
                )
            refuse_work_pool_deployments(specs, url)
            gpu = ensure_tag_limit(GPU_TAG, gpu_slots)
            absent = tables_not_found(specs, database[0])
            _print_banner(url, gpu, specs, database, absent, started_server=started_server)
            for line in leftover_runs(specs):
                print(line, flush=True)
            serving = True
            serve_deployments(specs, limit=limit)
    finally:
        if serving:
            server = " and stopped its Prefect server" if started_server else ""
            print(f"tdm serve: stopped serving the deployments{server}.", flush=True)


def refuse_work_pool_deployments(specs: list[DeploymentSpec], url: str) -> None:
    """Refuse to serve deployments that the server at `url` has as a work pool's (`prefect
    deploy`): serving them takes them over (no pull step, no pool's settings) and leaves them
    paused, their scheduled runs deleted, when serving stops, so the team's nightly run would
    stop without a word."""
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound

    pooled = []
    with get_client(sync_client=True) as client:
        for deployment in build_deployments(specs=specs):
            name = f"{deployment.flow_name}/{deployment.name}"
            try:
                found = client.read_deployment_by_name(name)
            except ObjectNotFound:
                continue
            if found.work_pool_name:
                pooled.append(f"'{name}' (work pool '{found.work_pool_name}')")
    if pooled:
        raise PipelineError(
            f"The Prefect server at {url} has {' and '.join(pooled)} from `prefect deploy`: "
            "serving them here would take them over from the pool's workers, and leave them "
            "paused without their scheduled runs when this stops. Nothing was served. Unset "
            "PREFECT_API_URL to serve on a server of tdm serve's own, or use the workers."
        )


def leftover_runs(specs: list[DeploymentSpec]) -> list[str]:
    """A line for each run of the served deployments that the server still has as going
    (pending, running, cancelling) before this process serves them: one an earlier `tdm serve`
    started and left when it stopped without ending it (killed, or its machine stopped). Such a
    run's process may still be going, or have ended without a word; the server cannot tell."""
    from prefect import get_client
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterName,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    going = [StateType.PENDING, StateType.RUNNING, StateType.CANCELLING]
    try:
        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs(
                flow_run_filter=FlowRunFilter(
                    state=FlowRunFilterState(type=FlowRunFilterStateType(any_=going))
                ),
                deployment_filter=DeploymentFilter(
                    name=DeploymentFilterName(any_=[spec.name for spec in specs])
                ),
            )
    except Exception:  # best effort: serving matters more than this report
        return []
    lines = []
    for run in runs:
        since = run.start_time or run.expected_start_time
        when = f" since {since:%Y-%m-%d %H:%M} UTC" if since is not None else ""
        lines.append(
            f"Going before this tdm serve started: run {run.name!r} ({run.id}), "
            f"{run.state_name or 'in no state'}{when}. Unless another runner or worker serves "
            "it, an earlier tdm serve left it when it stopped: its process may still be going, "
            "or have stopped with it. Each table is written whole or not at all: those with a "
            f"row of run_id '{run.id}' in tdm_lineage were written. Cancel it in the UI once "
            "you know."
        )
    return lines


def drop_replaced_schedules(deployments: list[RunnerDeployment]) -> None:
    """Delete the schedules each deployment has on the server under a slug it no longer has (a
    schedule changed since it was last served): the server keeps such schedules when the
    deployment is applied again, and both would start runs."""
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        for deployment in deployments:
            slugs = {schedule.slug for schedule in deployment.schedules or []}
            try:
                found = client.read_deployment_by_name(f"{deployment.flow_name}/{deployment.name}")
            except ObjectNotFound:
                continue
            for schedule in found.schedules:
                if schedule.slug not in slugs:
                    client.delete_deployment_schedule(found.id, schedule.id)


UNRESPONSIVE_RULE = "tdm serve: runs without heartbeats are crashed"
"""The name of the automation `ensure_unresponsive_rule` keeps on the server."""

CRASHED_MESSAGE = (
    "No heartbeat from this run's process for {minutes:g} min: it stopped (tdm serve killed, or "
    "its machine stopped). Each table is written whole or not at all: those with a row of this "
    "run's id in tdm_lineage were written. Run it again."
)


def ensure_unresponsive_rule(deployment_ids: list[Any]) -> bool:
    """Keep on the server an automation that marks a run of these deployments Crashed once
    its process has sent no heartbeat for three heartbeat periods (Prefect's own way to find
    runs whose process died: runs stay Running otherwise, for good). Runs of other deployments
    are left alone; an earlier rule of that name is replaced. Nothing is done when heartbeats
    are off (`PREFECT_FLOWS_HEARTBEAT_FREQUENCY` unset). Returns whether a rule is in place."""
    from datetime import timedelta

    from prefect import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture
    from prefect.events.schemas.events import ResourceSpecification
    from prefect.settings import get_current_settings

    frequency = get_current_settings().flows.heartbeat_frequency
    with get_client(sync_client=True) as client:
        earlier = client.read_automations_by_name(UNRESPONSIVE_RULE)
        if not frequency or not deployment_ids:
            for automation in earlier:
                client.delete_automation(automation.id)
            return False
        within = timedelta(seconds=3 * frequency)
        rule = AutomationCore(
            name=UNRESPONSIVE_RULE,
            description="Marks a run of the deployments tdm serve serves Crashed when its process "
            "stops sending heartbeats (tdm serve killed, its machine stopped).",
            trigger=EventTrigger(
                after={"prefect.flow-run.heartbeat"},
                expect={"prefect.flow-run.*"},
                match=ResourceSpecification({"prefect.resource.id": "prefect.flow-run.*"}),
                match_related=ResourceSpecification(
                    {
                        "prefect.resource.role": "deployment",
                        "prefect.resource.id": [f"prefect.deployment.{i}" for i in deployment_ids],
                    }
                ),
                for_each={"prefect.resource.id"},
                posture=Posture.Proactive,
                threshold=1,
                within=within,
            ),
            actions=[
                ChangeFlowRunState(
                    state=StateType.CRASHED,
                    message=CRASHED_MESSAGE.format(minutes=within.total_seconds() / 60),
                )
            ],
        )
        # An identical rule is kept, not made anew: it holds the heartbeats it has seen, by
        # which it finds the runs an earlier tdm serve left.
        wanted = rule.model_dump(mode="json", exclude={"description"})
        kept = [a for a in earlier if _same_rule(a, wanted)][:1]
        for automation in earlier:
            if automation not in kept:
                client.delete_automation(automation.id)
        if not kept:
            client.create_automation(rule)
    return True


def _same_rule(automation: Any, wanted: dict[str, Any]) -> bool:
    """Whether a stored automation has the trigger and actions of `wanted` (a dumped rule)."""
    stored = automation.model_dump(mode="json")
    return all(stored.get(key) == wanted[key] for key in ("trigger", "actions", "enabled"))


@dataclass(frozen=True)
class TagLimit:
    """A tag concurrency limit as `ensure_tag_limit` left it."""

    tag: str
    slots: int
    created: bool
    changed: bool


def ensure_tag_limit(tag: str, slots: int | None = None) -> TagLimit:
    """Create the tag concurrency limit `tag` (`slots` task runs at once, default 1) unless it
    exists; an existing limit is set to `slots` when given, else left as it is."""
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            existing = client.read_concurrency_limit_by_tag(tag).concurrency_limit
        except ObjectNotFound:
            client.create_concurrency_limit(tag=tag, concurrency_limit=slots or 1)
            return TagLimit(tag, slots or 1, created=True, changed=False)
        if slots is None or slots == existing:
            return TagLimit(tag, existing, created=False, changed=False)
        client.create_concurrency_limit(tag=tag, concurrency_limit=slots)  # an upsert
        return TagLimit(tag, slots, created=False, changed=True)


def _print_banner(
    url: str,
    gpu: TagLimit,
    specs: list[DeploymentSpec],
    database: tuple[str, str],
    absent: list[str] | None = None,
    *,
    started_server: bool,
) -> None:
    ui = url.rstrip("/").removesuffix("/api")
    nightly = nightly_spec(specs)
    (schedule,) = nightly.schedules
    first = next_run(str(schedule["cron"]), str(schedule["timezone"]))
    db, source = database
    missing = (
        ""
        if Path(db).is_file()
        else "; it does not exist yet: the run fails unless it is created by then"
    )
    if absent:
        names = ", ".join(f'"{table}"' for table in absent)
        those = "that table fails" if len(absent) == 1 else "those tables fail"
        missing += (
            f".\n  Not in {db} now: {names}, listed in {nightly.parameters[CONFIG_PARAMETER]}: "
            f"{those} unless created by then"
        )
    how = "created" if gpu.created else "changed" if gpu.changed else "already set"
    env = "" if url == api_url_for(DEFAULT_PORT) else f"PREFECT_API_URL={url} "
    threads = os.environ.get("TDM_TORCH_THREADS", "")
    print(
        f"Prefect UI: {ui}\n"
        f"Nightly {nightly.name}: {nightly.description}\n"
        f"  Next run: {first:%Y-%m-%d %H:%M} ({schedule['timezone']}), on {db} "
        f"({source}){missing}.\n"
        f"Served runs: torch threads {threads if threads != '0' else 'torch default'} "
        f"(TDM_TORCH_THREADS); {_retries()}\n"
        f"GPU imputations: at most {gpu.slots} at once (tag concurrency limit {gpu.tag!r}, "
        f"{how}).\n"
        f"Trigger a run from another terminal: {env}tdm run TABLE, or {env}prefect deployment "
        "run 'impute-table/impute-table' -p source_table=TABLE.\n"
        f"Ctrl-C stops serving{' and the server' if started_server else ''}.",
        flush=True,
    )


def _retries() -> str:
    """What the served runs' retries do, from PREFECT_FLOWS_DEFAULT_RETRIES and its delay."""
    retries = int(os.environ.get("PREFECT_FLOWS_DEFAULT_RETRIES") or 0)
    if not retries:
        return "a failed run is not retried (PREFECT_FLOWS_DEFAULT_RETRIES=0)."
    delay = os.environ.get("PREFECT_FLOWS_DEFAULT_RETRY_DELAY_SECONDS") or "0"
    return (
        "a run that fails because its warehouse file is locked, or was written to meanwhile, is "
        f"retried up to {retries} "
        f"time{'s' if retries > 1 else ''}, {delay} s apart (PREFECT_FLOWS_DEFAULT_RETRIES); any "
        "other failure (bad input, a failed check) would fail again and is not retried."
    )


@contextlib.contextmanager
def _exit_on_sigterm() -> Iterator[None]:
    """Within it, SIGTERM raises SystemExit, so that the server is stopped on the way out.

    Prefect's runner installs its own handler while serving, which exits too.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
