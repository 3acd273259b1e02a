"""Serve the deployments of `deployments/prefect.yaml` from one process (`tdm serve`).

The schedules, parameters, descriptions and tags are read from prefect.yaml, so that the served
deployments and the ones `prefect deploy` creates for a work pool are the same. Run it from the
repository root: relative paths in parameters are taken from the working directory.
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
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deployments.files import PREFECT_FILE
from deployments.server import DEFAULT_PORT, api_url_for, local_server, server_answers
from tasks.errors import PipelineError

if TYPE_CHECKING:
    from prefect import Flow
    from prefect.deployments.runner import RunnerDeployment
    from prefect.schedules import Schedule

__all__ = [
    "PREFECT_FILE",
    "DeploymentSpec",
    "TagLimit",
    "build_deployments",
    "ensure_tag_limit",
    "load_flow",
    "read_deployment_specs",
    "serve_deployments",
    "serve_here",
]


class DeploymentSpec(BaseModel):
    """One entry of prefect.yaml's `deployments`, the fields a served deployment takes."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str = Field(min_length=1)
    entrypoint: str = Field(pattern=r"^[\w./-]+\.py:\w+$")
    description: str | None = None
    tags: list[str] = Field(default_factory=list)
    parameters: dict[str, Any] = Field(default_factory=dict)
    schedules: list[dict[str, Any]] = Field(default_factory=list)
    concurrency_limit: int | None = Field(default=None, ge=1)

    def schedule_objects(self) -> list[Schedule]:
        """The schedules as Prefect `Schedule`s (cron, interval in seconds, or rrule)."""
        from prefect.schedules import Schedule

        built = []
        for item in self.schedules:
            fields = {k: v for k, v in item.items() if k != "replaces"}
            if isinstance(fields.get("interval"), int | float):
                fields["interval"] = timedelta(seconds=fields["interval"])
            try:
                built.append(Schedule(**fields))
            except (TypeError, ValueError) as error:
                raise PipelineError(
                    f"Deployment {self.name!r}: invalid schedule {item}: {error}"
                ) from None
        return built


def read_deployment_specs(path: str | Path = PREFECT_FILE) -> list[DeploymentSpec]:
    """The deployments listed in a prefect.yaml; errors name the file and the entry."""
    where = Path(path)
    try:
        raw = yaml.safe_load(where.read_text(encoding="utf-8")) or {}
        entries = raw.get("deployments") or []
        return [DeploymentSpec.model_validate(entry) for entry in entries]
    except (OSError, yaml.YAMLError, AttributeError) as error:
        raise PipelineError(f"Cannot read the deployments in '{where}': {error}") from None
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()
        )
        raise PipelineError(f"Invalid deployment in '{where}': {problems}.") from None


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


def build_deployments(path: str | Path = PREFECT_FILE) -> list[RunnerDeployment]:
    """One runner deployment per prefect.yaml entry, with its schedules and parameters.

    The entrypoint is recorded as a module path, so that runs find the flow from any working
    directory of the serving process.
    """
    from prefect.deployments.runner import EntrypointType

    deployments = []
    for spec in read_deployment_specs(path):
        deployment = load_flow(spec.entrypoint).to_deployment(
            # name, description, tags, parameters, concurrency_limit: named as `to_deployment`'s
            **spec.model_dump(exclude={"entrypoint", "schedules"}),
            schedules=spec.schedule_objects(),
            entrypoint_type=EntrypointType.MODULE_PATH,
        )
        deployments.append(cast("RunnerDeployment", deployment))  # sync call: not a coroutine
    return deployments


def serve_deployments(path: str | Path = PREFECT_FILE, *, limit: int | None = None) -> None:
    """Serve every deployment of prefect.yaml until interrupted (Ctrl-C or SIGTERM).

    Needs a Prefect server that outlives this process (PREFECT_API_URL): `serve_here` starts one
    when none is set. `limit` caps the flow runs executing at once (unset: no cap).
    """
    from prefect import serve

    deployments = build_deployments(path)
    with warnings.catch_warnings():
        # Prefect's runner calls its async stop() without awaiting it on SIGTERM; the shutdown
        # (pausing the schedules) happens anyway when the runner's context exits.
        warnings.filterwarnings("ignore", message="coroutine 'Runner.astop' was never awaited")
        serve(*deployments, limit=limit)


def serve_here(
    *,
    port: int = DEFAULT_PORT,
    gpu_slots: int | None = None,
    limit: int | None = None,
    path: str | Path = PREFECT_FILE,
) -> None:
    """`tdm serve`: serve the deployments against PREFECT_API_URL or, when it is unset, against a
    Prefect server started on 127.0.0.1:`port` for as long as this runs.

    Creates the tag concurrency limit `gpu` (`gpu_slots`, default 1) unless it exists; an existing
    one is changed only when `gpu_slots` is given.
    """
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    from tasks.impute import GPU_TAG

    read_deployment_specs(path)  # a bad prefect.yaml fails before a server is started
    settings = get_current_settings()
    url = settings.api.url
    started_server = url is None
    with contextlib.ExitStack() as stack, contextlib.suppress(KeyboardInterrupt):
        stack.enter_context(_exit_on_sigterm())
        if url is None:
            log = Path(settings.home).expanduser() / f"tdm-server-{port}.log"
            print(f"Starting a Prefect server on 127.0.0.1:{port} (its log: {log}) ...", flush=True)
            url = stack.enter_context(local_server(port, log_path=log))
            stack.enter_context(temporary_settings({PREFECT_API_URL: url}))
            stack.enter_context(_environment("PREFECT_API_URL", url))  # for the runs' processes
        elif not server_answers(url):
            raise PipelineError(
                f"No Prefect server answers at PREFECT_API_URL={url}: start it, or unset "
                "PREFECT_API_URL to let `tdm serve` start one."
            )
        gpu = ensure_tag_limit(GPU_TAG, gpu_slots)
        _print_banner(url, gpu, started_server=started_server)
        serve_deployments(path, limit=limit)


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


def _print_banner(url: str, gpu: TagLimit, *, started_server: bool) -> None:
    ui = url.rstrip("/").removesuffix("/api")
    how = "created" if gpu.created else "changed" if gpu.changed else "already set"
    env = "" if url == api_url_for(DEFAULT_PORT) else f"PREFECT_API_URL={url} "
    print(
        f"Prefect UI: {ui}\n"
        f"GPU imputations: at most {gpu.slots} at once (tag concurrency limit {gpu.tag!r}, "
        f"{how}).\n"
        f"Trigger a run from another terminal: {env}tdm run TABLE, or {env}prefect deployment "
        "run 'impute-table/impute-table' -p source_table=TABLE.\n"
        f"Ctrl-C stops serving{' and the server' if started_server else ''}.",
        flush=True,
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


@contextlib.contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


if __name__ == "__main__":
    serve_here()  # as `tdm serve` with its defaults
